//! Dense search over a knowledge base's chunks: what `kb.vector_search`
//! returns and what `kb.search` fuses with BM25 when asked to.

use super::index::{KbIndex, SearchRequest};
use super::kb_err;
use crate::core::args::Args;
use crate::core::{action::Call, error::ActionError, signals::LogLevel};
use crate::retrieval::embed::EmbedError;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// Chunks by cosine similarity to the query, best first.
pub struct DenseFound {
    /// Hits shaped like `kb.search`'s; `score` is the cosine.
    pub hits: Vec<Value>,
    pub model: String,
    /// How many chunks this call embedded.
    pub embedded: usize,
}

/// Why a dense search did not finish.
enum Stopped {
    Join(tokio::task::JoinError),
    Embed(EmbedError),
}

impl From<tokio::task::JoinError> for Stopped {
    fn from(e: tokio::task::JoinError) -> Self {
        Stopped::Join(e)
    }
}

impl From<EmbedError> for Stopped {
    fn from(e: EmbedError) -> Self {
        Stopped::Embed(e)
    }
}

/// The embedding model's folder: the step's `model_dir`, else the tool's
/// `options.model_dir` (both must be readable by the run), else
/// `MARKTOFLOW_EMBED_MODEL` (set by whoever started marktoflow, not by a
/// workflow, so it needs no read root of its own).
pub fn model_path(call: &Call<'_>, a: &Args) -> Result<PathBuf, ActionError> {
    let dir = configured(call, a)?.map_err(|e| ActionError::failed(e.to_string()))?;
    if named_by_workflow(call, a)?.is_none() {
        return Ok(dir);
    }
    call.caps
        .sandbox
        .check_read(&dir.to_string_lossy())
        .map_err(|e| ActionError::failed(format!("the embedding model: {e}")))
}

/// The model folder the step or its tool names, if any.
fn named_by_workflow<'a>(call: &'a Call<'_>, a: &Args<'a>) -> Result<Option<&'a str>, ActionError> {
    let named = |d: &&str| !d.trim().is_empty();
    let tool_dir = call
        .tool
        .and_then(|t| t.options.get("model_dir"))
        .and_then(Value::as_str)
        .filter(named);
    Ok(a.str("model_dir")?.filter(named).or(tool_dir))
}

/// The model folder if one is configured (`Err` inside: none is).
pub fn configured(call: &Call<'_>, a: &Args) -> Result<Result<PathBuf, EmbedError>, ActionError> {
    Ok(crate::retrieval::embed::model_dir(
        named_by_workflow(call, a)?,
        None,
        &call.caps.env,
    ))
}

/// A query's vector and the model that made it.
pub struct Prepared {
    embedder: Arc<dyn crate::retrieval::embed::Embedder>,
    vector: Vec<f32>,
}

/// A query embedded on a thread of its own, started before the index is
/// checked for changes: a fresh process then loads the model and walks the
/// folder at the same time, on two cores.
pub type PreparedQuery = tokio::task::JoinHandle<Result<Prepared, EmbedError>>;

/// Loads the model at `model_path` (once per process) and embeds `text`.
pub fn prepare(call: &Call<'_>, model_path: PathBuf, text: String) -> PreparedQuery {
    let caches = call.caps.caches.clone();
    tokio::task::spawn_blocking(move || {
        let embedder = crate::retrieval::embed::load_cached(&caches, &model_path)?;
        let vector = embedder.embed(&[text.as_str()])?.remove(0);
        Ok(Prepared { embedder, vector })
    })
}

/// The `top_k` chunks `req` allows closest to the `query`, embedding the
/// chunks not embedded yet (vectors are cached beside the index).
pub async fn search(
    call: &Call<'_>,
    ix: Arc<KbIndex>,
    req: &SearchRequest,
    query: PreparedQuery,
    top_k: usize,
    snippet_chars: usize,
) -> Result<DenseFound, ActionError> {
    let order = ix.row_order();
    let keep = ix.matching_rows(&order, req).map_err(kb_err)?;
    let key = ix
        .dir
        .clone()
        .unwrap_or_else(|| ix.root.join(".marktoflow-in-memory"));
    let sink = call.caps.progress.clone();
    let caches = call.caps.caches.clone();
    let stop = super::stopper(call);
    let work = async move {
        let Prepared { embedder, vector } = query.await??;
        // Embedding and the scan are CPU work: off the async threads.
        let done = tokio::task::spawn_blocking(move || {
            let progress = move |done: usize, total: usize| {
                sink(crate::core::signals::Progress {
                    what: "chunks embedded".into(),
                    done: done as u64,
                    total: total as u64,
                })
            };
            let file = ix.dir.as_ref().and_then(|d| {
                let name = format!(
                    "vectors-{}.bin",
                    crate::retrieval::kb::chunk::slug(embedder.model_id())
                );
                d.parent().map(|p| p.join(name))
            });
            let table = || Ok(ix.chunk_table(&order)?);
            let (vectors, stats) = super::vectors::vectors_for(
                &caches,
                &*embedder,
                &order,
                &table,
                &key,
                file.as_deref(),
                &progress,
                &stop,
            )?;
            let found = crate::retrieval::embed::topk::top_k(
                &vector,
                vectors.matrix(),
                embedder.dim(),
                top_k,
                |row| keep.as_ref().is_none_or(|k| k[row]),
            );
            // Only the chunks found are read from the index.
            let rows: Vec<usize> = found.iter().map(|f| f.0).collect();
            let chunks = ix.chunk_rows(&order, &rows)?;
            let found: Vec<_> = chunks.into_iter().zip(found.iter().map(|f| f.1)).collect();
            Ok::<_, EmbedError>((found, stats, embedder.model_id().to_string()))
        })
        .await??;
        Ok::<_, Stopped>(done)
    };
    let (found, stats, model) = tokio::select! {
        _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
        r = work => r.map_err(|e| match e {
            Stopped::Join(e) => ActionError::failed(format!("vector search stopped: {e}")),
            Stopped::Embed(e) => ActionError::failed(e.to_string()),
        })?,
    };
    if let Some(why) = &stats.discarded {
        call.log(
            LogLevel::Warn,
            format!("the vector cache was unusable ({why}); rebuilt it"),
        );
    }
    let hits = found
        .into_iter()
        .map(|(r, score)| {
            let snippet: String = r.text.chars().take(snippet_chars).collect();
            json!({
                "id": r.id, "path": r.path, "title": r.title, "section": r.section,
                "text": r.text, "snippet": snippet,
                "score": (score as f64 * 1e4).round() / 1e4,
                "metadata": r.metadata, "mtime_ms": r.mtime_ms,
            })
        })
        .collect();
    Ok(DenseFound {
        hits,
        model,
        embedded: stats.embedded,
    })
}

/// The index's own errors, met while reading the chunks to embed.
impl From<super::chunk::KbError> for crate::retrieval::embed::EmbedError {
    fn from(e: super::chunk::KbError) -> Self {
        crate::retrieval::embed::EmbedError::Chunks(e.to_string())
    }
}
