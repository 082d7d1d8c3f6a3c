//! Dense search over a knowledge base's chunks: what `kb.vector_search`
//! returns and what `kb.search` fuses with BM25 when asked to.

use super::index::{KbIndex, SearchRequest};
use super::kb_err;
use super::vectors::Want;
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
    /// Chunks with a vector, and chunks: all of them once embedding is done.
    pub covered: (usize, usize),
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
    crate::core::blame::spawn_blocking(move || {
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
    embed: Embed,
) -> Result<DenseFound, ActionError> {
    let order = ix.row_order();
    let keep = ix.matching_rows(&order, req).map_err(kb_err)?;
    let want = match embed {
        Embed::All => Want::All,
        Embed::Now {
            notes,
            limit,
            at_most,
        } => Want::Now {
            rows: ix.rows_of_notes(&order, &notes).map_err(kb_err)?,
            limit,
            at_most,
        },
    };
    let build = Build::of(call, ix.clone());
    let work = async move {
        let Prepared { embedder, vector } = query.await??;
        // Embedding and the scan are CPU work: off the async threads.
        let done = crate::core::blame::spawn_blocking(move || {
            let faults = crate::core::mapped::faults();
            let (vectors, stats) = build.run(&*embedder, &order, want)?;
            let found = vectors.top_k(&vector, embedder.dim(), top_k, |row| {
                keep.as_ref().is_none_or(|k| k[row])
            });
            // Read past the end of a mapped file (zeros stood in): not an
            // answer. The mapping goes; the next search checks the file
            // again and embeds what it lacks (issue 49, item 9).
            if crate::core::mapped::faults() > faults {
                drop(vectors);
                super::vectors::forget(&build.caches, &build.key, embedder.model_id());
                return Err(EmbedError::Damaged(build.ix.root.display().to_string()));
            }
            // Only the chunks found are read from the index.
            let rows: Vec<usize> = found.iter().map(|f| f.0).collect();
            let chunks = ix.chunk_rows(&order, &rows)?;
            let found: Vec<_> = chunks.into_iter().zip(found.iter().map(|f| f.1)).collect();
            Ok::<_, EmbedError>((found, stats, embedder.model_id().to_string()))
        })
        .await??;
        Ok::<_, Stopped>(done)
    };
    let (found, stats, model) = until_cancelled(call, work).await?;
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
        covered: (stats.covered, stats.rows),
    })
}

/// What building a knowledge base's vectors needs, owned, for a thread.
struct Build {
    ix: Arc<KbIndex>,
    key: PathBuf,
    sink: crate::core::signals::ProgressSink,
    caches: Arc<crate::core::cache::Caches>,
    stop: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Build {
    fn of(call: &Call<'_>, ix: Arc<KbIndex>) -> Build {
        let key = ix
            .dir
            .clone()
            .unwrap_or_else(|| ix.root.join(".marktoflow-in-memory"));
        Build {
            ix,
            key,
            sink: call.caps.progress.clone(),
            caches: call.caps.caches.clone(),
            stop: Box::new(super::stopper(call)),
        }
    }

    /// The vectors of `order`'s rows, embedding what `want` asks for
    /// (cached beside the index: `vectors-<model>.bin` and its journal).
    fn run(
        &self,
        embedder: &dyn crate::retrieval::embed::Embedder,
        order: &super::index::RowOrder,
        want: Want,
    ) -> Result<(super::vectors::Coverage, super::vectors::VectorStats), EmbedError> {
        let sink = &self.sink;
        let progress = move |done: usize, total: usize| {
            sink(crate::core::signals::Progress {
                what: "chunks embedded".into(),
                done: done as u64,
                total: total as u64,
            })
        };
        let file = vector_file(&self.ix, embedder.model_id());
        let rows = IndexRows {
            ix: &self.ix,
            order,
        };
        super::vectors::vectors_for(
            &self.caches,
            embedder,
            order,
            &rows,
            &self.key,
            file.as_deref(),
            &progress,
            &*self.stop,
            want,
        )
    }
}

/// An index commit's rows, as the vectors read them.
struct IndexRows<'a> {
    ix: &'a KbIndex,
    order: &'a super::index::RowOrder,
}

impl super::vectors::Rows for IndexRows<'_> {
    fn hashes(&self) -> Result<Arc<Vec<u64>>, EmbedError> {
        Ok(self.ix.row_hashes(self.order)?)
    }

    fn texts(&self, rows: &[usize]) -> Result<Vec<String>, EmbedError> {
        let rows = self.ix.chunk_rows(self.order, rows)?;
        Ok(rows.iter().map(super::vectors::chunk_text).collect())
    }
}

/// What a search embeds before it answers.
pub enum Embed {
    /// Every chunk without a vector.
    All,
    /// Every chunk when at most `limit` lack a vector; else only those of
    /// `notes` (paths, best first), at most `at_most`.
    Now {
        notes: Vec<String>,
        limit: usize,
        at_most: usize,
    },
}

/// `work`, unless the run is cancelled first.
async fn until_cancelled<T>(
    call: &Call<'_>,
    work: impl std::future::Future<Output = Result<T, Stopped>>,
) -> Result<T, ActionError> {
    tokio::select! {
        _ = call.caps.cancel.cancelled() => Err(ActionError::Cancelled),
        r = work => r.map_err(|e| match e {
            Stopped::Join(e) => ActionError::failed(format!("embedding stopped: {e}")),
            Stopped::Embed(e @ EmbedError::Damaged(_)) => ActionError::retryable(e.to_string()),
            Stopped::Embed(e) => ActionError::failed(e.to_string()),
        }),
    }
}

/// How many of a knowledge base's chunks have a vector.
pub struct Embedded {
    pub model: String,
    /// Chunks this call embedded.
    pub embedded: usize,
    pub covered: usize,
    pub chunks: usize,
}

/// Embeds every chunk of the index that has no vector yet (`all`), or
/// only counts them: what `kb.index` with `embed` and `kb.status` report.
pub async fn embed_all(
    call: &Call<'_>,
    ix: Arc<KbIndex>,
    model_path: PathBuf,
    all: bool,
) -> Result<Embedded, ActionError> {
    let order = ix.row_order();
    let build = Build::of(call, ix);
    let caches = call.caps.caches.clone();
    let work = async move {
        let done = crate::core::blame::spawn_blocking(move || {
            let embedder = crate::retrieval::embed::load_cached(&caches, &model_path)?;
            let want = if all { Want::All } else { Want::Count };
            let (_, stats) = build.run(&*embedder, &order, want)?;
            Ok::<_, EmbedError>(Embedded {
                model: embedder.model_id().to_string(),
                embedded: stats.embedded,
                covered: stats.covered,
                chunks: stats.rows,
            })
        })
        .await??;
        Ok::<_, Stopped>(done)
    };
    until_cancelled(call, work).await
}

/// Where a knowledge base's vectors for `model` are kept (None: in memory).
fn vector_file(ix: &KbIndex, model_id: &str) -> Option<PathBuf> {
    let name = format!(
        "vectors-{}.bin",
        crate::retrieval::kb::chunk::slug(model_id)
    );
    ix.dir
        .as_ref()
        .and_then(|d| d.parent().map(|p| p.join(name)))
}

/// Where a process embedding a knowledge base in the background says how
/// far it has got, for `kb.status` in another process.
fn progress_file(vectors: &std::path::Path) -> PathBuf {
    vectors.with_extension("progress.json")
}

/// Embeds the rest of the knowledge base on the server's background
/// threads, unless that is under way: what `kb.search` starts when it
/// answered with some chunks still lacking a vector. Nothing happens in a
/// one-off run (no background).
pub fn embed_in_background(call: &Call<'_>, ix: Arc<KbIndex>, model_path: PathBuf) {
    let Some(bg) = call.caps.background.clone() else {
        return;
    };
    let key = ix
        .dir
        .clone()
        .unwrap_or_else(|| ix.root.join(".marktoflow-in-memory"));
    let caches = call.caps.caches.clone();
    let clock = call.caps.clock.clone();
    let label = format!("embedding {}", ix.root.display());
    let said = format!(
        "kb: some chunks of {} have no vector yet; the rest are embedded in the background",
        ix.root.display()
    );
    let started = bg.start(&key.display().to_string(), &label, move |cx| {
        let embedder = crate::retrieval::embed::load_cached(&caches, &model_path)
            .map_err(|e| e.to_string())?;
        let file = vector_file(&ix, embedder.model_id());
        let status = file.as_deref().map(progress_file);
        let since = clock.now_ms();
        let (shown, stopping) = (cx.clone(), cx.clone());
        let at = status.clone();
        let build = Build {
            ix: ix.clone(),
            key,
            sink: Arc::new(move |p: crate::core::signals::Progress| {
                shown.progress(p.done, p.total);
                if let Some(f) = &at {
                    let note = json!({
                        "pid": std::process::id(), "done": p.done, "total": p.total,
                        "started_ms": since,
                        "updated_ms": clock.now_ms(),
                    });
                    let _ = crate::core::files::atomic_write(f, note.to_string().as_bytes());
                }
            }),
            caches,
            stop: Box::new(move || stopping.should_stop()),
        };
        let order = ix.row_order();
        let done = build.run(&*embedder, &order, Want::All);
        if let Some(f) = &status {
            let _ = std::fs::remove_file(f);
        }
        done.map(|_| ()).map_err(|e| e.to_string())
    });
    if started {
        call.log(LogLevel::Info, said);
    }
}

/// What another process embedding this knowledge base in the background
/// last said, if it is still running: `{pid, done, total, started_ms,
/// updated_ms}`.
pub fn background_progress(ix: &KbIndex, model_id: &str) -> Option<Value> {
    let f = progress_file(&vector_file(ix, model_id)?);
    let note: Value = serde_json::from_slice(&std::fs::read(&f).ok()?).ok()?;
    let pid = note["pid"].as_u64()?;
    // A process that died without removing its note is not embedding.
    std::path::Path::new(&format!("/proc/{pid}"))
        .exists()
        .then_some(note)
}

/// The index's own errors, met while reading the chunks to embed.
impl From<super::chunk::KbError> for crate::retrieval::embed::EmbedError {
    fn from(e: super::chunk::KbError) -> Self {
        crate::retrieval::embed::EmbedError::Chunks(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::super::vectors::{chunk_text, Rows};
    use super::*;

    /// The hash the index stores for a row is the hash of the text the row
    /// is embedded as, read back from the index: vectors are found by it.
    #[test]
    fn stored_hashes_are_those_of_the_rows_as_read_back() {
        let kb = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        std::fs::write(
            kb.path().join("a.md"),
            "# Apollo\n\nIntro.\n\n## Apollo\n\nSame heading as the title.\n\n## Budget\n\n3,000 EUR.\n",
        )
        .unwrap();
        std::fs::write(kb.path().join("b.md"), "No title, no heading.\n").unwrap();
        let caches = crate::core::cache::Caches::default();
        let ix = KbIndex::open(&caches, kb.path(), Some(&state.path().join("ix"))).unwrap();
        ix.update(
            &Default::default(),
            &Default::default(),
            false,
            &|_, _| {},
            &|| false,
        )
        .unwrap();
        let order = ix.row_order();
        let rows = IndexRows {
            ix: &ix,
            order: &order,
        };
        let all: Vec<usize> = (0..order.len()).collect();
        assert!(all.len() >= 4, "{}", all.len());
        let texts = rows.texts(&all).unwrap();
        let want: Vec<u64> = texts
            .iter()
            .map(|t| crate::core::hash::hash64(&[t.as_bytes()]))
            .collect();
        assert_eq!(*rows.hashes().unwrap(), want);
        let read = ix.chunk_rows(&order, &all).unwrap();
        assert_eq!(texts[0], chunk_text(&read[0]));
        // The notes' rows, note by note as asked.
        let b = ix
            .rows_of_notes(&order, &["b.md".into(), "a.md".into()])
            .unwrap();
        assert_eq!(b.len(), all.len());
        assert_eq!(read[b[0]].path, "b.md");
        assert!(b[1..].iter().all(|&r| read[r].path == "a.md"));
    }
}
