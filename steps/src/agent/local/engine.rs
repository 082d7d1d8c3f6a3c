//! A GGUF chat model run in-process by llama.cpp: load once (memory-mapped),
//! then generate from a prompt, token by token, stopping at the end of the
//! reply, the token limit, the caller's deadline or cancellation.
//!
//! Everything here blocks; callers run it off the async threads.

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Tokens decoded per call while reading the prompt; between chunks the
/// stop condition is checked.
const PROMPT_CHUNK: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot start llama.cpp: {0}")]
    Backend(String),
    #[error("cannot read the model {}: {why}", path.display())]
    Unreadable { path: PathBuf, why: String },
    #[error("{} is not a GGUF model (it does not start with `GGUF`); give the path of a .gguf file", path.display())]
    NotGguf { path: PathBuf },
    #[error("llama.cpp could not load {}: the file may be truncated or of an architecture this build does not know", path.display())]
    Load { path: PathBuf },
    #[error("the prompt is {prompt} tokens, but the model reads at most {limit} (with {reply} more for the reply); shorten the prompt or lower `max_tokens`")]
    TooLong {
        prompt: usize,
        reply: u32,
        limit: u32,
    },
    #[error("the model's context could not be created ({0})")]
    Context(String),
    #[error("generation failed: {0}")]
    Decode(String),
    #[error("the output grammar is invalid: {0}")]
    Grammar(String),
    #[error("cancelled")]
    Cancelled,
    #[error("no reply within the step's time limit")]
    TimedOut,
}

/// Why generation should stop early, asked between chunks and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halt {
    Cancelled,
    TimedOut,
}

/// One generation's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GenRequest {
    /// The prompt, chat template already applied.
    pub prompt: String,
    pub max_tokens: u32,
    /// 0 (the default) samples greedily: the same prompt gives the same reply.
    pub temperature: f32,
    pub seed: u32,
    /// A GBNF grammar (root rule `root`) the reply must follow.
    pub grammar: Option<String>,
}

/// How generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The model ended its reply.
    End,
    /// `max_tokens` was reached.
    Length,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub text: String,
    pub finish: Finish,
    pub prompt_tokens: usize,
    pub reply_tokens: usize,
    pub prompt_time: Duration,
    pub reply_time: Duration,
}

/// llama.cpp's global state, set up once per process, its logging off
/// (the engine never prints).
fn backend() -> Result<&'static LlamaBackend, LocalError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut b = LlamaBackend::init().map_err(|e| e.to_string())?;
            b.void_logs();
            Ok(b)
        })
        .as_ref()
        .map_err(|e| LocalError::Backend(e.clone()))
}

/// A loaded model. Shared by every step of a process; each generation
/// makes its own context.
pub struct LocalModel {
    model: LlamaModel,
    pub path: PathBuf,
    /// The GGUF's `tokenizer.chat_template`, when it has one.
    pub chat_template: Option<String>,
    pub bos: String,
    pub eos: String,
    /// How long loading took.
    pub load_time: Duration,
    threads: i32,
    /// llama.cpp may adjust the model while creating a context: one at a time.
    creating: Mutex<()>,
    /// The tokens that end a span's answer (found once, by [`span`](super::span)).
    pub(super) span_ends: OnceLock<Vec<LlamaToken>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Memory-maps the GGUF at `path`.
    pub fn load(path: &Path) -> Result<LocalModel, LocalError> {
        let started = Instant::now();
        check_gguf(path)?;
        let backend = backend()?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|_| LocalError::Load {
                path: path.to_path_buf(),
            })?;
        let chat_template = model.meta_val_str("tokenizer.chat_template").ok();
        let vocab = model.vocab();
        let piece = |t: LlamaToken| {
            if t.0 < 0 {
                return String::new();
            }
            String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned()
        };
        let bos = piece(vocab.bos());
        let eos = piece(vocab.eos());
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(64) as i32;
        Ok(LocalModel {
            model,
            path: path.to_path_buf(),
            chat_template,
            bos,
            eos,
            load_time: started.elapsed(),
            threads,
            creating: Mutex::new(()),
            span_ends: OnceLock::new(),
        })
    }

    /// The longest context the model was trained for.
    pub fn context_limit(&self) -> u32 {
        self.model.n_ctx_train()
    }

    /// Turns a JSON Schema into a grammar for [`GenRequest::grammar`].
    pub fn grammar_for_schema(schema: &serde_json::Value) -> Result<String, LocalError> {
        llama_cpp_2::json_schema_to_grammar(&schema.to_string())
            .map_err(|e| LocalError::Grammar(e.to_string()))
    }

    /// Generates a reply; `halt` is asked between prompt chunks and tokens.
    pub fn generate(
        &self,
        req: &GenRequest,
        halt: &dyn Fn() -> Option<Halt>,
    ) -> Result<Generation, LocalError> {
        let check = || match halt() {
            Some(Halt::Cancelled) => Err(LocalError::Cancelled),
            Some(Halt::TimedOut) => Err(LocalError::TimedOut),
            None => Ok(()),
        };
        check()?;
        let vocab = self.model.vocab();
        // Special tokens written in the template (`<|im_start|>`) are parsed as such.
        let tokens = vocab.tokenize(req.prompt.as_bytes(), false, true);
        if tokens.is_empty() {
            return Err(LocalError::Decode("the prompt has no tokens".into()));
        }
        let limit = self.context_limit();
        let reply = req.max_tokens.max(1);
        let needed = tokens.len() as u64 + u64::from(reply);
        if needed > u64::from(limit) {
            return Err(LocalError::TooLong {
                prompt: tokens.len(),
                reply,
                limit,
            });
        }
        let n_ctx = (needed as u32).next_multiple_of(256).min(limit);
        let mut ctx = self.context(n_ctx, PROMPT_CHUNK)?;
        let mut sampler = self.sampler(req)?;

        let started = Instant::now();
        let mut batch = LlamaBatch::new(PROMPT_CHUNK, 1);
        let last = tokens.len() - 1;
        for (c, chunk) in tokens.chunks(PROMPT_CHUNK).enumerate() {
            check()?;
            batch.clear();
            for (i, t) in chunk.iter().enumerate() {
                let pos = c * PROMPT_CHUNK + i;
                batch
                    .add(*t, pos as i32, &[0], pos == last)
                    .map_err(|e| LocalError::Decode(e.to_string()))?;
            }
            ctx.decode(&mut batch)
                .map_err(|e| LocalError::Decode(e.to_string()))?;
        }
        let prompt_time = started.elapsed();

        let started = Instant::now();
        let mut out: Vec<u8> = Vec::new();
        let mut pos = tokens.len() as i32;
        let mut finish = Finish::Length;
        let mut produced = 0usize;
        while produced < reply as usize {
            check()?;
            let tok = sampler.sample(&ctx, batch.n_tokens() - 1);
            if vocab.is_eog(tok) {
                finish = Finish::End;
                break;
            }
            out.extend(vocab.token_to_piece(tok, false, None));
            produced += 1;
            batch.clear();
            batch
                .add(tok, pos, &[0], true)
                .map_err(|e| LocalError::Decode(e.to_string()))?;
            pos += 1;
            ctx.decode(&mut batch)
                .map_err(|e| LocalError::Decode(e.to_string()))?;
        }
        Ok(Generation {
            text: String::from_utf8_lossy(&out).into_owned(),
            finish,
            prompt_tokens: tokens.len(),
            reply_tokens: produced,
            prompt_time,
            reply_time: started.elapsed(),
        })
    }

    /// A context of `n_ctx` tokens that decodes `batch` at a time.
    pub(super) fn context(&self, n_ctx: u32, batch: usize) -> Result<LlamaContext<'_>, LocalError> {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(batch as u32)
            .with_n_ubatch(batch as u32)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads);
        let _one = self.creating.lock().unwrap_or_else(|e| e.into_inner());
        self.model
            .new_context(backend()?, params)
            .map_err(|e| LocalError::Context(e.to_string()))
    }

    pub(super) fn model(&self) -> &LlamaModel {
        &self.model
    }

    fn sampler(&self, req: &GenRequest) -> Result<LlamaSampler, LocalError> {
        let mut chain = Vec::new();
        if let Some(g) = &req.grammar {
            chain.push(
                LlamaSampler::grammar(&self.model, g, "root")
                    .map_err(|e| LocalError::Grammar(e.to_string()))?,
            );
        }
        if req.temperature > 0.0 {
            chain.push(LlamaSampler::top_k(40));
            chain.push(LlamaSampler::top_p(0.95, 1));
            chain.push(LlamaSampler::temp(req.temperature));
            chain.push(LlamaSampler::dist(req.seed));
        } else {
            chain.push(LlamaSampler::greedy());
        }
        Ok(LlamaSampler::chain_simple(chain))
    }
}

/// A clear error for a missing file or one that is not a GGUF, before
/// llama.cpp (which only says "failed") sees it.
fn check_gguf(path: &Path) -> Result<(), LocalError> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| LocalError::Unreadable {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
    if &magic != b"GGUF" {
        return Err(LocalError::NotGguf {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}
