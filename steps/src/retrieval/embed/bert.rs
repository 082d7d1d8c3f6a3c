//! A BERT encoder (the kind sentence-transformers models use) run straight
//! on the weights mapped from `model.safetensors`.
//!
//! Why our own and mapped: a fresh process that embeds one question touches
//! a few rows of the 47 MB word table and the 42 MB of layers, read from the
//! page cache in place; copying the whole file into tensors first (what a
//! tensor library does) was half of a cold search. Sequences are not padded:
//! the per-token layers run over all tokens of a group at once, attention
//! runs per sequence, so no work is spent on padding and a text's vector
//! does not depend on its batch. The groups run in parallel, each on one
//! thread through every layer.

use gemm::Parallelism;
use marktoflow_kernels::ops::{self, Act};
use marktoflow_kernels::{attention, q8};
use memmap2::Mmap;
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use std::ops::Range;
use std::path::Path;
use std::sync::Mutex;

/// `config.json`: the fields the encoder needs.
#[derive(Debug, serde::Deserialize)]
pub struct Config {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    #[serde(default)]
    pub model_type: Option<String>,
}

fn default_act() -> String {
    "gelu".into()
}

fn default_eps() -> f64 {
    1e-12
}

/// Where a weight's numbers are: in the mapping (f32, aligned) or, for
/// other encodings, converted into memory of our own.
enum Place {
    Mapped(Range<usize>),
    Owned(Vec<f32>),
}

struct Weight {
    place: Place,
}

struct Linear {
    w: Weight,
    b: Weight,
    inputs: usize,
    outputs: usize,
    /// The same layer in int8, where the CPU runs it ([`q8`]).
    q8: Option<q8::Linear>,
}

struct Norm {
    w: Weight,
    b: Weight,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    up: Linear,
    down: Linear,
    out_norm: Norm,
}

impl Layer {
    fn linears_mut(&mut self) -> [&mut Linear; 6] {
        [
            &mut self.query,
            &mut self.key,
            &mut self.value,
            &mut self.attn_out,
            &mut self.up,
            &mut self.down,
        ]
    }
}

pub struct Bert {
    map: Mmap,
    hidden: usize,
    heads: usize,
    vocab: usize,
    max_positions: usize,
    eps: f32,
    act: Act,
    word: Weight,
    position: Weight,
    token_type: Weight,
    emb_norm: Norm,
    layers: Vec<Layer>,
    /// Room for the groups' numbers, one per thread that ran a group.
    scratch: Mutex<Vec<Scratch>>,
}

impl Bert {
    /// Maps `file` and checks every weight the encoder reads against
    /// `config`, so running it cannot index out of bounds. With `int8` (and
    /// a CPU that runs it) the linear layers are quantized ([`q8`]).
    pub fn load(file: &Path, config: &Config, int8: bool) -> Result<Bert, String> {
        let act = match config.hidden_act.as_str() {
            "gelu" => Act::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Act::GeluTanh,
            "relu" => Act::Relu,
            other => {
                return Err(format!(
                    "config.json: hidden_act `{other}` is not supported"
                ))
            }
        };
        if let Some(p) = config
            .position_embedding_type
            .as_deref()
            .filter(|p| *p != "absolute")
        {
            return Err(format!(
                "config.json: position_embedding_type `{p}` is not supported (only `absolute`)"
            ));
        }
        let (h, heads) = (config.hidden_size, config.num_attention_heads);
        if h == 0 || heads == 0 || h % heads != 0 {
            return Err(format!(
                "config.json: hidden_size {h} is not a multiple of num_attention_heads {heads}"
            ));
        }
        let f = std::fs::File::open(file).map_err(|e| e.to_string())?;
        // SAFETY: the mapping is read-only and the file is the user's model,
        // which `marktoflow model install` replaces by renaming a new file
        // over it (the old inode stays intact while mapped); nothing a run
        // does writes it.
        crate::core::mapped::guard();
        let map = unsafe { Mmap::map(&f) }.map_err(|e| e.to_string())?;
        let (word, position, token_type, emb_norm, layers, vocab, max_positions) = {
            let st = SafeTensors::deserialize(&map).map_err(|e| e.to_string())?;
            let base = map.as_ptr() as usize;
            let prefix = [
                String::new(),
                "bert.".to_string(),
                config
                    .model_type
                    .as_deref()
                    .map(|t| format!("{t}."))
                    .unwrap_or_default(),
            ]
            .into_iter()
            .find(|p| {
                st.tensor(&format!("{p}embeddings.word_embeddings.weight"))
                    .is_ok()
            })
            .ok_or("no `embeddings.word_embeddings.weight` tensor: not a BERT model")?;
            let take =
                |name: &str, shape: &[Option<usize>]| -> Result<(Weight, Vec<usize>), String> {
                    let full = format!("{prefix}{name}");
                    let t = st
                        .tensor(&full)
                        .map_err(|_| format!("tensor `{full}` is missing"))?;
                    let got = t.shape();
                    let fits = got.len() == shape.len()
                        && got
                            .iter()
                            .zip(shape)
                            .all(|(g, w)| w.is_none_or(|w| *g == w))
                        && got.iter().all(|g| *g > 0);
                    if !fits {
                        return Err(format!(
                            "tensor `{full}` has shape {got:?}, expected {shape:?}"
                        ));
                    }
                    let data = t.data();
                    let count: usize = got.iter().product();
                    let place = match t.dtype() {
                        Dtype::F32 if data.len() == count * 4 => {
                            let start = data.as_ptr() as usize - base;
                            if bytemuck::try_cast_slice::<u8, f32>(data).is_ok() {
                                Place::Mapped(start..start + data.len())
                            } else {
                                Place::Owned(
                                    data.chunks_exact(4)
                                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                                        .collect(),
                                )
                            }
                        }
                        Dtype::F16 if data.len() == count * 2 => Place::Owned(
                            data.chunks_exact(2)
                                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                                .collect(),
                        ),
                        Dtype::BF16 if data.len() == count * 2 => Place::Owned(
                            data.chunks_exact(2)
                                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                                .collect(),
                        ),
                        other => {
                            return Err(format!(
                                "tensor `{full}` is {other:?}; F32, F16 or BF16 expected"
                            ))
                        }
                    };
                    Ok((Weight { place }, got.to_vec()))
                };
            let (word, ws) = take("embeddings.word_embeddings.weight", &[None, Some(h)])?;
            let (position, ps) = take("embeddings.position_embeddings.weight", &[None, Some(h)])?;
            let (token_type, _) =
                take("embeddings.token_type_embeddings.weight", &[None, Some(h)])?;
            let norm = |name: &str| -> Result<Norm, String> {
                Ok(Norm {
                    w: take(&format!("{name}.weight"), &[Some(h)])?.0,
                    b: take(&format!("{name}.bias"), &[Some(h)])?.0,
                })
            };
            let linear = |name: &str, inputs: usize, outputs: usize| -> Result<Linear, String> {
                Ok(Linear {
                    w: take(&format!("{name}.weight"), &[Some(outputs), Some(inputs)])?.0,
                    b: take(&format!("{name}.bias"), &[Some(outputs)])?.0,
                    inputs,
                    outputs,
                    q8: None,
                })
            };
            let emb_norm = norm("embeddings.LayerNorm")?;
            let i = config.intermediate_size;
            let layers = (0..config.num_hidden_layers)
                .map(|n| {
                    let l = format!("encoder.layer.{n}");
                    Ok(Layer {
                        query: linear(&format!("{l}.attention.self.query"), h, h)?,
                        key: linear(&format!("{l}.attention.self.key"), h, h)?,
                        value: linear(&format!("{l}.attention.self.value"), h, h)?,
                        attn_out: linear(&format!("{l}.attention.output.dense"), h, h)?,
                        attn_norm: norm(&format!("{l}.attention.output.LayerNorm"))?,
                        up: linear(&format!("{l}.intermediate.dense"), h, i)?,
                        down: linear(&format!("{l}.output.dense"), i, h)?,
                        out_norm: norm(&format!("{l}.output.LayerNorm"))?,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            (word, position, token_type, emb_norm, layers, ws[0], ps[0])
        };
        let mut bert = Bert {
            map,
            hidden: h,
            heads,
            vocab,
            max_positions,
            eps: config.layer_norm_eps as f32,
            act,
            word,
            position,
            token_type,
            emb_norm,
            layers,
            scratch: Mutex::default(),
        };
        let fits = q8::fits(h) && q8::fits(config.intermediate_size);
        if int8 && fits && q8::available() {
            let quantized: Vec<Vec<q8::Linear>> = bert
                .layers
                .par_iter()
                .map(|l| {
                    [&l.query, &l.key, &l.value, &l.attn_out, &l.up, &l.down]
                        .into_par_iter()
                        .map(|lin| {
                            q8::Linear::new(
                                bert.get(&lin.w),
                                bert.get(&lin.b),
                                lin.outputs,
                                lin.inputs,
                            )
                        })
                        .collect()
                })
                .collect();
            for (layer, q) in bert.layers.iter_mut().zip(quantized) {
                for (lin, q) in layer.linears_mut().into_iter().zip(q) {
                    lin.q8 = Some(q);
                }
            }
        }
        Ok(bert)
    }

    /// The longest sequence the position table allows.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    fn get<'a>(&'a self, w: &'a Weight) -> &'a [f32] {
        match &w.place {
            // Alignment and length were checked at load.
            Place::Mapped(r) => bytemuck::cast_slice(&self.map[r.clone()]),
            Place::Owned(v) => v,
        }
    }

    /// The last hidden states of each sequence of token ids, one after the
    /// other (`sum(len) × hidden`, row-major). Sequences must be non-empty
    /// and at most [`Bert::max_positions`] long.
    pub fn forward(&self, seqs: &[&[u32]]) -> Result<Vec<f32>, String> {
        let h = self.hidden;
        for s in seqs {
            if s.is_empty() || s.len() > self.max_positions {
                return Err(format!(
                    "a sequence of {} tokens (1 to {} expected)",
                    s.len(),
                    self.max_positions
                ));
            }
            if let Some(id) = s.iter().find(|&&id| id as usize >= self.vocab) {
                return Err(format!(
                    "token id {id} is outside the vocabulary of {}: the tokenizer does not match the model",
                    self.vocab
                ));
            }
        }
        let tokens: usize = seqs.iter().map(|s| s.len()).sum();
        let mut out = vec![0f32; tokens * h];
        // Consecutive sequences in groups of at most about GROUP_TOKENS
        // tokens, as many groups as make every thread's share even (the
        // groups' tokens as near equal as whole sequences allow), each
        // group's rows of `out` beside it.
        let threads = rayon::current_num_threads().max(1);
        let parts = tokens
            .div_ceil(GROUP_TOKENS)
            .next_multiple_of(threads)
            .min(seqs.len());
        let mut groups = Vec::with_capacity(parts);
        let mut rest: &mut [f32] = &mut out;
        let (mut first, mut done) = (0, 0);
        for (i, s) in seqs.iter().enumerate() {
            done += s.len();
            if done * parts >= (groups.len() + 1) * tokens || i + 1 == seqs.len() {
                let rows: usize = seqs[first..=i].iter().map(|s| s.len()).sum();
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(rows * h);
                groups.push((&seqs[first..=i], part));
                rest = tail;
                first = i + 1;
            }
        }
        groups
            .into_par_iter()
            .with_max_len(1)
            .for_each(|(seqs, out)| {
                let mut scratch = self.scratch.lock().map(|mut s| s.pop()).unwrap_or(None);
                let s = scratch.get_or_insert_with(Scratch::default);
                self.run(seqs, out, s);
                if let (Ok(mut kept), Some(s)) = (self.scratch.lock(), scratch) {
                    kept.push(s);
                }
            });
        Ok(out)
    }

    /// The encoder over one group of sequences, on this thread start to
    /// end: their hidden states into `out`.
    fn run(&self, seqs: &[&[u32]], out: &mut [f32], s: &mut Scratch) {
        let h = self.hidden;
        let Scratch {
            x,
            q,
            k,
            v,
            ctx,
            tmp,
            up,
            input,
            attention,
        } = s;
        x.clear();
        x.resize(out.len(), 0.0);
        let (word, pos, typ) = (
            self.get(&self.word),
            self.get(&self.position),
            self.get(&self.token_type),
        );
        let positioned = seqs.iter().flat_map(|s| s.iter().enumerate());
        for (row, (p, &id)) in x.chunks_exact_mut(h).zip(positioned) {
            let (w, q) = (id as usize * h, p * h);
            for (j, v) in row.iter_mut().enumerate() {
                *v = word[w + j] + typ[j] + pos[q + j];
            }
        }
        self.add_norm(x, None, &self.emb_norm);
        for layer in &self.layers {
            if let (Some(wq), Some(wk), Some(wv)) =
                (&layer.query.q8, &layer.key.q8, &layer.value.q8)
            {
                // The three read the same rows: quantized once.
                input.set(x, h);
                wq.forward(input, None, q);
                wk.forward(input, None, k);
                wv.forward(input, None, v);
            } else {
                self.linear(x, &layer.query, None, q, input);
                self.linear(x, &layer.key, None, k, input);
                self.linear(x, &layer.value, None, v, input);
            }
            // Each sequence attends over its own tokens only.
            ctx.resize(x.len(), 0.0);
            let mut at = 0;
            for seq in seqs {
                let r = at..at + seq.len() * h;
                attention::attend(
                    &q[r.clone()],
                    &k[r.clone()],
                    &v[r.clone()],
                    seq.len(),
                    self.heads,
                    &mut ctx[r],
                    attention,
                );
                at += seq.len() * h;
            }
            self.linear(ctx, &layer.attn_out, None, tmp, input);
            self.add_norm(tmp, Some(x), &layer.attn_norm);
            std::mem::swap(x, tmp);
            self.linear(x, &layer.up, Some(self.act), up, input);
            self.linear(up, &layer.down, None, tmp, input);
            self.add_norm(tmp, Some(x), &layer.out_norm);
            std::mem::swap(x, tmp);
        }
        out.copy_from_slice(x);
    }

    /// `out = x · Wᵀ + b` for every row of `x`, then `act`; `input` is
    /// room for `x` quantized.
    fn linear(
        &self,
        x: &[f32],
        lin: &Linear,
        act: Option<Act>,
        out: &mut Vec<f32>,
        input: &mut q8::Input,
    ) {
        if let Some(q) = &lin.q8 {
            input.set(x, lin.inputs);
            return q.forward(input, act, out);
        }
        let (k, n) = (lin.inputs, lin.outputs);
        let m = x.len() / k;
        let (w, b) = (self.get(&lin.w), self.get(&lin.b));
        assert!(x.len() == m * k && w.len() == n * k && b.len() == n);
        out.clear();
        out.reserve(m * n);
        for _ in 0..m {
            out.extend_from_slice(b);
        }
        // SAFETY: the sizes were checked above: x is m×k, w is n×k (read
        // transposed), out is m×n, all row-major and contiguous.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                out.as_mut_ptr(),
                1,
                n as isize,
                true,
                x.as_ptr(),
                1,
                k as isize,
                w.as_ptr(),
                k as isize,
                1,
                1.0,
                1.0,
                false,
                false,
                false,
                Parallelism::None,
            )
        }
        if let Some(act) = act {
            ops::activate(act, out);
        }
    }

    /// `x + residual` (if given), then layer norm, row by row.
    fn add_norm(&self, x: &mut [f32], residual: Option<&[f32]>, norm: &Norm) {
        let (w, b) = (self.get(&norm.w), self.get(&norm.b));
        ops::add_norm(x, residual, w, b, self.eps)
    }
}

/// Tokens per group of sequences that one thread runs through every layer:
/// the threads then work apart (no wait between steps), a group's numbers
/// stay in the core's cache (its widest, 128 × 1,536, is 768 KB), and
/// groups small enough keep both threads busy to the end of a batch.
const GROUP_TOKENS: usize = 128;

/// A group's numbers between layers, kept for the next group.
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    up: Vec<f32>,
    input: q8::Input,
    attention: attention::Scratch,
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: usize = 4;
    const I: usize = 8;
    const VOCAB: usize = 10;
    const POS: usize = 6;

    fn config() -> Config {
        serde_json::from_value(serde_json::json!({
            "hidden_size": H, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": I, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
            "model_type": "bert"
        }))
        .unwrap()
    }

    /// Every tensor a 2-layer model needs, filled with small numbers that
    /// differ from tensor to tensor.
    fn tensors() -> Vec<(String, Vec<usize>, Vec<f32>)> {
        let mut seed = 1u32;
        let mut t = |name: String, shape: Vec<usize>| {
            let n = shape.iter().product();
            let data = (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    ((seed >> 16) % 200) as f32 / 100.0 - 1.0
                })
                .collect();
            (name, shape, data)
        };
        let mut out = vec![
            t("embeddings.word_embeddings.weight".into(), vec![VOCAB, H]),
            t("embeddings.position_embeddings.weight".into(), vec![POS, H]),
            t("embeddings.token_type_embeddings.weight".into(), vec![2, H]),
            t("embeddings.LayerNorm.weight".into(), vec![H]),
            t("embeddings.LayerNorm.bias".into(), vec![H]),
        ];
        for l in 0..2 {
            let p = format!("encoder.layer.{l}");
            for (name, o, i) in [
                ("attention.self.query", H, H),
                ("attention.self.key", H, H),
                ("attention.self.value", H, H),
                ("attention.output.dense", H, H),
                ("intermediate.dense", I, H),
                ("output.dense", H, I),
            ] {
                out.push(t(format!("{p}.{name}.weight"), vec![o, i]));
                out.push(t(format!("{p}.{name}.bias"), vec![o]));
            }
            for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
                out.push(t(format!("{p}.{name}.weight"), vec![H]));
                out.push(t(format!("{p}.{name}.bias"), vec![H]));
            }
        }
        out
    }

    /// A safetensors file of `tensors` as `dtype` (F32 or F16), the header
    /// padded with `pad` spaces (an odd pad leaves the data unaligned).
    fn write(
        path: &Path,
        prefix: &str,
        tensors: &[(String, Vec<usize>, Vec<f32>)],
        f16: bool,
        pad: usize,
    ) {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (name, shape, values) in tensors {
            let start = data.len();
            for v in values {
                if f16 {
                    data.extend_from_slice(&half::f16::from_f32(*v).to_le_bytes());
                } else {
                    data.extend_from_slice(&v.to_le_bytes());
                }
            }
            header.insert(
                format!("{prefix}{name}"),
                serde_json::json!({"dtype": if f16 { "F16" } else { "F32" }, "shape": shape,
                                   "data_offsets": [start, data.len()]}),
            );
        }
        let mut h = serde_json::to_string(&header).unwrap();
        h.push_str(&" ".repeat(pad));
        let mut file = (h.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(h.as_bytes());
        file.extend_from_slice(&data);
        std::fs::write(path, file).unwrap();
    }

    fn close(a: &[f32], b: &[f32], tol: f32) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
    }

    #[test]
    fn mapped_unaligned_f16_and_prefixed_weights_give_the_same_states() {
        let d = tempfile::tempdir().unwrap();
        let ts = tensors();
        let seqs: [&[u32]; 2] = [&[1, 5, 9, 2], &[1, 3, 2]];
        let run = |name: &str, prefix: &str, f16: bool, pad: usize| {
            let p = d.path().join(name);
            write(&p, prefix, &ts, f16, pad);
            let m = Bert::load(&p, &config(), true).unwrap();
            (m.forward(&seqs).unwrap(), m)
        };
        let (mapped, m) = run("a", "", false, 0);
        assert!(
            matches!(m.word.place, Place::Mapped(_)),
            "F32 is used in place"
        );
        assert_eq!(mapped.len(), 7 * H);
        assert!(mapped.iter().all(|v| v.is_finite()));
        // Each token's row is layer-normed: mean ≈ bias mean, not all equal.
        assert!(mapped.chunks(H).any(|r| r != &mapped[..H]));
        let (unaligned, m) = run("b", "", false, 1);
        assert!(
            matches!(m.word.place, Place::Owned(_)),
            "unaligned data is copied"
        );
        assert_eq!(mapped, unaligned);
        let (prefixed, _) = run("c", "bert.", false, 0);
        assert_eq!(mapped, prefixed);
        let (f16, m) = run("d", "", true, 0);
        assert!(close(&mapped, &f16, 0.05), "{mapped:?}\n{f16:?}");
        // A sequence's states do not depend on the others in its batch.
        let alone = m.forward(&[seqs[1]]).unwrap();
        assert!(close(&alone, &f16[4 * H..], 1e-5));
    }

    #[test]
    fn a_model_that_does_not_fit_is_an_error_naming_what() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m");
        let mut ts = tensors();
        ts.retain(|t| t.0 != "encoder.layer.1.output.dense.bias");
        write(&p, "", &ts, false, 0);
        let e = Bert::load(&p, &config(), true).err().unwrap();
        assert!(e.contains("encoder.layer.1.output.dense.bias"), "{e}");

        let mut ts = tensors();
        ts[5].1 = vec![H, H + 1];
        ts[5].2.extend([0.0; H]);
        write(&p, "", &ts, false, 0);
        let e = Bert::load(&p, &config(), true).err().unwrap();
        assert!(e.contains("shape"), "{e}");

        std::fs::write(&p, b"not a safetensors file").unwrap();
        assert!(Bert::load(&p, &config(), true).is_err());

        let mut c = config();
        c.hidden_act = "swish".into();
        write(&p, "", &tensors(), false, 0);
        assert!(Bert::load(&p, &c, true).err().unwrap().contains("swish"));

        let m = Bert::load(&p, &config(), true).unwrap();
        let e = m.forward(&[&[1, VOCAB as u32]]).err().unwrap();
        assert!(e.contains("vocabulary"), "{e}");
        let long = vec![1u32; POS + 1];
        assert!(m.forward(&[&long]).is_err());
        assert!(m.forward(&[&[]]).is_err());
    }
}
