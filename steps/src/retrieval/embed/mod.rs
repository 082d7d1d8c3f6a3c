//! Local sentence embeddings for `kb.vector_search`.
//!
//! The backend sits behind [`Embedder`]; [`MiniLm`] runs a BERT-family
//! sentence-transformers model (all-MiniLM-L6-v2) on the CPU with our own
//! encoder on the mapped weights ([`bert`]; its linear layers in int8 where
//! the CPU has AVX-512 VNNI, `marktoflow_kernels::q8`): mean pooling over the tokens,
//! then L2 normalisation, so a dot product is the cosine similarity. Vectors are cached by chunk hash and model id
//! ([`cache`]); search is an exact flat scan ([`topk`]).

// Public for `steps/examples/relation_features.rs` (bench/relations.py).
pub mod bert;
pub mod cache;
pub mod journal;
mod minilm;
pub mod topk;

pub use minilm::MiniLm;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("no embedding model is configured: {0}")]
    NotConfigured(String),
    #[error("cannot load the embedding model from `{dir}`: {message}")]
    Load { dir: String, message: String },
    #[error("embedding failed: {0}")]
    Run(String),
    /// The chunks to embed could not be read from the index (its message).
    #[error("{0}")]
    Chunks(String),
    /// The step's time ran out or the run was cancelled while embedding:
    /// what was embedded is kept for the next run.
    #[error("embedding stopped: the step's time ran out or the run was cancelled (what was embedded is kept)")]
    Stopped,
    /// A mapped vector file read past its end (cut short while in use):
    /// its mapping is dropped and the file read again on the next search.
    #[error("the vectors of `{0}` were found damaged (a file was cut short while in use): they are read again, or embedded again, on the next search; try again")]
    Damaged(String),
}

/// Turns texts into unit-length vectors.
pub trait Embedder: Send + Sync {
    /// Names the model and its settings; cached vectors are keyed by it.
    fn model_id(&self) -> &str;
    fn dim(&self) -> usize;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The environment variable that names the model folder.
pub const MODEL_ENV: &str = "MARKTOFLOW_EMBED_MODEL";

/// How to get a model, for error messages.
pub const SETUP_HINT: &str = "install the sentence-transformers model all-MiniLM-L6-v2 with `marktoflow model install all-minilm-l6-v2`, or set MARKTOFLOW_EMBED_MODEL to its folder (or give the step `model_dir:`)";

/// The model folder: the step's `model_dir`, else the tool's
/// `options.model_dir`, else `MARKTOFLOW_EMBED_MODEL`, else the one
/// `marktoflow model install` put in the models folder.
pub fn model_dir(
    step: Option<&str>,
    tool: Option<&str>,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<PathBuf, EmbedError> {
    let chosen = step
        .or(tool)
        .map(str::to_string)
        .or_else(|| env.get(MODEL_ENV).cloned())
        .filter(|s| !s.trim().is_empty());
    match chosen {
        Some(d) => Ok(PathBuf::from(d)),
        None => {
            let installed =
                crate::core::models::path_of(&crate::core::models::DEFAULT_EMBEDDING, env);
            if installed.join("model.safetensors").is_file() {
                Ok(installed)
            } else {
                Err(EmbedError::NotConfigured(SETUP_HINT.to_string()))
            }
        }
    }
}

/// Loads a model once per folder and [`Caches`](crate::core::cache::Caches); later calls share it.
pub fn load_cached(
    caches: &crate::core::cache::Caches,
    dir: &Path,
) -> Result<Arc<dyn Embedder>, EmbedError> {
    type Models = HashMap<PathBuf, Arc<MiniLm>>;
    let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if let Some(m) = caches.with(|c: &mut Models| c.get(&key).cloned()) {
        return Ok(m);
    }
    // Loaded outside the lock: it takes a while and others may search.
    let m = Arc::new(MiniLm::load(&key)?);
    Ok(caches.with(|c: &mut Models| {
        let m = c.entry(key.clone()).or_insert(m).clone();
        // A model is ~90 MB: keep a few.
        crate::core::cache::bound(c, &key, 4);
        m
    }))
}

/// The model folder for tests that need the real model: `MARKTOFLOW_EMBED_MODEL`
/// (CI sets it). Without it the test fails in CI and says it is skipped elsewhere.
#[cfg(test)]
pub(crate) fn test_model_dir() -> Option<PathBuf> {
    match std::env::var_os(MODEL_ENV) {
        Some(d) => Some(PathBuf::from(d)),
        // As the end-to-end tests' `support::missing`: CI (or
        // `MARKTOFLOW_NO_SKIP=1`) fails it, elsewhere it says it is skipped.
        None => {
            let strict = std::env::var_os("CI").is_some()
                || std::env::var_os("MARKTOFLOW_NO_SKIP").is_some_and(|v| v == "1");
            assert!(
                !strict,
                "the embedding model test cannot run here: set MARKTOFLOW_EMBED_MODEL (`bash .ci/run` installs the model)"
            );
            eprintln!("skipped: set MARKTOFLOW_EMBED_MODEL to run the embedding model test");
            None
        }
    }
}
