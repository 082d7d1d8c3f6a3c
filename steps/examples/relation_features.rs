//! The local encoder's token states pooled over spans of a text, for
//! `bench/relations.py` (a relation reader learned on them, measured
//! against the graph's rules).
//!
//!     cargo run --release -p marktoflow-steps --example relation_features -- MODEL_DIR
//!
//! stdin: JSON lines `{"text": "...", "spans": [[start, end], ...]}` (byte
//! offsets); stdout, a line each: `{"feats": [[384 numbers] per span],
//! "mean": [...]}`, a span's tokens' last hidden states averaged (zeros for
//! a span no token falls in), and the mean over all the text's tokens.
//! `MODEL_DIR` holds `config.json`, `tokenizer.json` and
//! `model.safetensors` (`~/.local/share/marktoflow/models/all-minilm-l6-v2`).

use marktoflow_steps::retrieval::embed::bert::{Bert, Config};
use std::io::{BufRead, Write};
use tokenizers::Tokenizer;

fn main() {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: relation_features MODEL_DIR"),
    );
    let config: Config = serde_json::from_str(
        &std::fs::read_to_string(dir.join("config.json")).expect("read config.json"),
    )
    .expect("config.json");
    let model = Bert::load(&dir.join("model.safetensors"), &config, true).expect("load the model");
    let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).expect("tokenizer.json");
    let h = model.hidden_size();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("read stdin");
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        let text = v["text"].as_str().expect("text");
        let spans: Vec<(usize, usize)> = v["spans"]
            .as_array()
            .expect("spans")
            .iter()
            .map(|s| {
                let at = |i: usize| s[i].as_u64().expect("a byte offset") as usize;
                (at(0), at(1))
            })
            .collect();
        let enc = tokenizer.encode(text, true).expect("tokenize");
        let n = enc.get_ids().len().min(model.max_positions());
        let (ids, offsets) = (&enc.get_ids()[..n], &enc.get_offsets()[..n]);
        let hidden = model.forward(&[ids]).expect("run the encoder");
        // The tokens' states averaged over those `pick` keeps ([CLS] and
        // [SEP], at offset (0, 0), never).
        let pool = |pick: &dyn Fn((usize, usize)) -> bool| {
            let mut mean = vec![0f32; h];
            let mut count = 0;
            for (i, &o) in offsets.iter().enumerate() {
                if o != (0, 0) && pick(o) {
                    let row = &hidden[i * h..(i + 1) * h];
                    mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
                    count += 1;
                }
            }
            mean.iter_mut().for_each(|m| *m /= count.max(1) as f32);
            mean
        };
        let feats: Vec<Vec<f32>> = spans
            .iter()
            .map(|&(s, e)| pool(&|(a, b)| a < e && b > s))
            .collect();
        let row = serde_json::json!({"feats": feats, "mean": pool(&|_| true)});
        writeln!(out, "{row}").expect("write stdout");
    }
}
