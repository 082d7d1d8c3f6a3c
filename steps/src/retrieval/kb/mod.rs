//! `kb.*`: full-text retrieval over a folder of Markdown notes.
//!
//! - `kb.index` brings the index up to date (only changed files are redone);
//! - `kb.search` ranks chunks with BM25 (title > section > body), with
//!   phrases, prefixes, filters and the `in: type: tag: date:` operators;
//!   it indexes first when the index is missing or stale;
//! - `kb.facets` counts the values of a metadata field.
//!
//! The index lives in `<kb>/.marktoflow/index/` unless `index_dir` is given.

pub mod chunk;
mod dense;
mod evidence;
mod graph;
mod hybrid;
pub mod index;
mod inputs;
mod specs;
mod vectors;

use inputs::{dense_setting, options, request, Dense};
pub use specs::SPECS;

use crate::core::walk::WalkOptions;
use crate::core::{
    action::{Action, Call},
    args::Args,
    error::ActionError,
    signals::LogLevel,
};
use crate::retrieval::syntax;
use async_trait::async_trait;
use chrono::NaiveDate;
use chunk::{ChunkOptions, KbError};
use index::{KbIndex, UpdateStats};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct KbAction;

/// Chunks `kb.search` embeds before answering when most of the notes have
/// no vector yet (`embed_limit`): those of the best notes by words, about
/// a second and a half on this 2-core machine.
const ON_DEMAND: usize = 64;

#[async_trait]
impl Action for KbAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let a = Args::of(SPECS, call, &inputs)?;
        match call.method {
            "index" => index_method(call, &a).await,
            "search" => search_method(call, &a).await,
            "facets" => facets_method(call, &a).await,
            "vector_search" => vector_search_method(call, &a).await,
            "evidence" => evidence::evidence_method(call, &a).await,
            "graph" => graph::graph_method(call, &a).await,
            "status" => status_method(call, &a).await,
            m => Err(ActionError::Input(format!("unknown method `kb.{m}`"))),
        }
    }
}

fn kb_err(e: KbError) -> ActionError {
    match e {
        KbError::Locked(_) | KbError::Damaged(_) => ActionError::retryable(e.to_string()),
        other => ActionError::failed(other.to_string()),
    }
}

/// Opens (or creates) the index for the `kb` input, applying the sandbox.
fn open(call: &Call<'_>, a: &Args) -> Result<Arc<KbIndex>, ActionError> {
    let kb = a.required_str("kb")?;
    let sb = &call.caps.sandbox;
    let root = sb
        .check_read(kb)
        .map_err(|e| ActionError::failed(e.to_string()))?;
    if !root.is_dir() {
        return Err(ActionError::failed(format!(
            "knowledge base {} is {}",
            crate::core::files::shown(kb, &root),
            if root.exists() {
                "not a folder"
            } else {
                "not found"
            }
        )));
    }
    let dir: Option<PathBuf> = match a.str("index_dir")? {
        Some(d) => Some(sb.check_write(d).map_err(|e| {
            ActionError::failed(format!(
                "{e} (it is `index_dir`; pass `--allow-write` for it)"
            ))
        })?),
        // The default location is written even without a write root: the index
        // holds only text the workflow may already read, at a fixed place in
        // the state folder (named after the knowledge base, outside it), so it
        // neither widens what can be read nor lets a workflow choose where it
        // writes, and the user's notes stay as they are.
        None => Some(call.caps.state.kb_index_in_use(&root)),
    };
    match KbIndex::open(&call.caps.caches, &root, dir.as_deref()) {
        Ok(ix) => Ok(ix),
        // A state folder that cannot be written (and no `index_dir`): index
        // in memory, cached for the life of the process.
        Err(KbError::Io { .. }) if !a.is_given("index_dir") => {
            call.log(
                LogLevel::Warn,
                format!(
                    "kb: cannot write the index under `{}`; indexing in memory (set `index_dir` to keep it)",
                    call.caps.state.root.display()
                ),
            );
            KbIndex::open(&call.caps.caches, &root, None).map_err(kb_err)
        }
        Err(e) => Err(kb_err(e)),
    }
}

/// Whether work off the async threads should stop now: the run was
/// cancelled (SIGTERM, the console's Cancel) or the step's time ran out.
/// Long loops (indexing, embedding) ask between pieces, so a stop is
/// obeyed within about a second and the process can end.
pub(crate) fn stopper(call: &Call<'_>) -> impl Fn() -> bool + Send + Sync + 'static {
    let cancel = call.caps.cancel.clone();
    let deadline = call.timeout.map(|t| std::time::Instant::now() + t);
    move || cancel.is_cancelled() || deadline.is_some_and(|d| std::time::Instant::now() >= d)
}

/// Runs an update off the async threads, reporting progress.
async fn update(
    call: &Call<'_>,
    ix: Arc<KbIndex>,
    walk: WalkOptions,
    chunking: ChunkOptions,
    force: bool,
) -> Result<UpdateStats, KbError> {
    let sink = call.caps.progress.clone();
    let stop = stopper(call);
    let stats = crate::core::blame::spawn_blocking(move || {
        let progress = move |done: usize, total: usize| {
            sink(crate::core::signals::Progress {
                what: "files indexed".into(),
                done: done as u64,
                total: total as u64,
            })
        };
        ix.update(&walk, &chunking, force, &progress, &stop)
    })
    .await
    .unwrap_or_else(|e| {
        Err(KbError::Index {
            path: String::new(),
            message: format!("indexing stopped: {e}"),
        })
    });
    if let Ok(s) = &stats {
        if !s.skipped.is_empty() {
            let n = s.skipped.len();
            let shown: Vec<&str> = s.skipped.iter().take(5).map(String::as_str).collect();
            call.log(
                LogLevel::Warn,
                format!(
                    "kb: left out {n} note{} that {} not UTF-8 text: {}{}",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "is" } else { "are" },
                    shown.join(", "),
                    if n > 5 { ", …" } else { "" }
                ),
            );
        }
    }
    stats
}

fn dir_label(ix: &KbIndex) -> Value {
    match &ix.dir {
        Some(d) => json!(d.display().to_string()),
        None => json!("(memory)"),
    }
}

async fn index_method(call: &Call<'_>, a: &Args<'_>) -> Result<Value, ActionError> {
    let started = Instant::now();
    let (walk, chunking) = options(a)?;
    let force = a.bool("force")?;
    let ix = open(call, a)?;
    let s = update(call, ix.clone(), walk, chunking, force)
        .await
        .map_err(kb_err)?;
    let vectors = if a.bool("embed")? {
        let e = dense::embed_all(call, ix.clone(), dense::model_path(call, a)?, true).await?;
        json!({"model": e.model, "embedded": e.embedded, "covered": e.covered, "chunks": e.chunks})
    } else {
        Value::Null
    };
    let mut out = json!({
        "files": s.files,
        "chunks": s.chunks,
        "added": s.added,
        "updated": s.updated,
        "removed": s.removed,
        "unchanged": s.unchanged,
        "rebuilt": s.rebuilt,
        "duration_ms": ms(started.elapsed()),
        "index_dir": dir_label(&ix),
    });
    if !vectors.is_null() {
        out["vectors"] = vectors;
    }
    Ok(out)
}

/// `kb.status`: what is indexed and embedded, changing neither (the index
/// is not brought up to date, nothing is embedded).
async fn status_method(call: &Call<'_>, a: &Args<'_>) -> Result<Value, ActionError> {
    let ix = open(call, a)?;
    let (files, chunks) = ix.counts();
    let vectors = match dense::configured(call, a)? {
        Ok(_) if !ix.is_empty() => {
            let e = dense::embed_all(call, ix.clone(), dense::model_path(call, a)?, false).await?;
            let mut v = json!({"model": e.model, "covered": e.covered, "chunks": e.chunks});
            if let Some(p) = dense::background_progress(&ix, &e.model) {
                v["background"] = p;
            }
            v
        }
        _ => Value::Null,
    };
    Ok(json!({
        "kb": ix.root.display().to_string(),
        "index_dir": dir_label(&ix),
        "files": files,
        "chunks": chunks,
        "indexed": !ix.is_empty(),
        "vectors": vectors,
    }))
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// Indexes when the index is empty or (with `refresh: auto`) not checked
/// within `refresh_interval_ms`; a locked index is searched as it is.
async fn ensure_fresh(
    call: &Call<'_>,
    ix: &Arc<KbIndex>,
    a: &Args<'_>,
) -> Result<Option<UpdateStats>, ActionError> {
    let needed = match a.chosen("refresh")? {
        "always" => true,
        "never" => ix.is_empty(),
        _ => {
            let interval = a.number("refresh_interval_ms")?.max(0.0) as u64;
            ix.is_empty() || !ix.fresh_within(Duration::from_millis(interval))
        }
    };
    if !needed {
        return Ok(None);
    }
    let (walk, chunking) = options(a)?;
    match update(call, ix.clone(), walk, chunking, false).await {
        Ok(s) => Ok(Some(s)),
        Err(KbError::Locked(d)) if !ix.is_empty() => {
            call.log(
                LogLevel::Warn,
                format!("kb: the index in `{d}` is being updated elsewhere; searching it as it is"),
            );
            Ok(None)
        }
        Err(e) => Err(kb_err(e)),
    }
}

async fn search_method(call: &Call<'_>, a: &Args<'_>) -> Result<Value, ActionError> {
    let started = Instant::now();
    let q = a.str("query")?.unwrap_or_default();
    let today = a.today("today", call.caps.clock.as_ref())?;
    let mut parsed = syntax::parse(q, a.bool("operators")?, today);
    if a.bool("analyze")? {
        analyzed(&mut parsed, q, today, call)?;
    }
    let dense_text = match a.str("dense_query")? {
        Some(d) if !d.trim().is_empty() => syntax::parse(d, true, today).text(),
        _ => parsed.text(),
    };
    let mut req = request(a, parsed, today)?;
    let dense = match dense_model(call, a)? {
        Some((path, weight)) if !dense_text.trim().is_empty() => {
            Some((dense::prepare(call, path.clone(), dense_text), weight, path))
        }
        _ => None,
    };
    let ix = open(call, a)?;
    let refreshed = ensure_fresh(call, &ix, a).await?;
    let (hits, total, mode) = match dense {
        Some((query, weight, model_path)) => {
            let want = req.top_k;
            req.top_k = want.max(hybrid::BM25_CANDIDATES);
            let (bm25, total) = ix.search(&req).map_err(kb_err)?;
            // Without vectors for most of the notes, the chunks of the best
            // notes by words are embedded now and the rest later.
            let mut notes: Vec<String> = Vec::new();
            for h in &bm25 {
                let p = h["path"].as_str().unwrap_or_default();
                if !notes.iter().any(|n| n == p) {
                    notes.push(p.to_string());
                }
            }
            let now = dense::Embed::Now {
                notes,
                limit: a.num("embed_limit")?.map_or(0, |n| n.max(0.0) as usize),
                at_most: ON_DEMAND,
            };
            let found = dense::search(
                call,
                ix.clone(),
                &req,
                query,
                hybrid::DENSE_CANDIDATES.max(want),
                req.snippet_chars,
                now,
            )
            .await?;
            let floor = a.number("dense_min")?;
            let hits = hybrid::fuse(&bm25, &found.hits, weight, floor, req.collapse, want);
            let (covered, rows) = found.covered;
            if covered < rows {
                dense::embed_in_background(call, ix.clone(), model_path);
            }
            let mode = json!({
                "dense": true, "model": found.model, "dense_weight": weight,
                "embedded": found.embedded,
                "dense_coverage": if rows == 0 { 1.0 } else { (covered as f64 / rows as f64 * 1e4).round() / 1e4 },
            });
            (hits, total, mode)
        }
        _ => {
            let (hits, total) = ix.search(&req).map_err(kb_err)?;
            (hits, total, json!({"dense": false}))
        }
    };
    let mut out = json!({
        "query": q,
        "found": !hits.is_empty(),
        "count": hits.len(),
        "total": total,
        "hits": hits,
        "ranking": mode,
        "took_ms": ms(started.elapsed()),
    });
    if let Some(s) = refreshed.filter(UpdateStats::changed) {
        out["indexed"] = json!({"added": s.added, "updated": s.updated, "removed": s.removed});
    }
    Ok(out)
}

/// `analyze: true`: the words `query.analyze` keeps (no stop, question or
/// time words) are searched, and a date it reads in the text ("on November
/// 17", "last week") filters like a `date:` operator unless one is given.
fn analyzed(
    parsed: &mut syntax::ParsedQuery,
    q: &str,
    today: NaiveDate,
    call: &Call<'_>,
) -> Result<(), ActionError> {
    let inputs = json!({"query": q, "today": today.to_string()});
    let a = crate::retrieval::query::analyze(
        &Args::new(&crate::retrieval::query::SPECS[0], &inputs)?,
        call.caps.clock.as_ref(),
    )?;
    let terms: Vec<String> = a["terms"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|w| w.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if !terms.is_empty() {
        parsed.terms = terms;
    }
    if parsed.date.is_none() {
        let day = |k: &str| {
            a["time"][k]
                .as_str()
                .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
        };
        if day("from").is_some() || day("to").is_some() {
            parsed.date = Some(syntax::DateRange {
                from: day("from"),
                to: day("to"),
            });
        }
    }
    Ok(())
}

/// Whether `kb.search` fuses dense search in, with which model and weight:
/// `dense: true` needs the model, `auto` uses it when one is configured
/// (and says once per process when none is), `false` (the default) never.
fn dense_model(call: &Call<'_>, a: &Args) -> Result<Option<(PathBuf, f64)>, ActionError> {
    let mode = match dense_setting(a)? {
        Dense::Off => return Ok(None),
        Dense::On => "true",
        Dense::Auto => "auto",
    };
    let weight = a
        .unit("dense_weight")?
        .ok_or_else(|| a.missing("dense_weight"))?;
    if mode == "auto" && dense::configured(call, a)?.is_err() {
        static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
            call.log(
                LogLevel::Warn,
                format!(
                    "kb.search: no embedding model, so notes are found by their words only (BM25); for search by meaning too, {}",
                    crate::retrieval::embed::SETUP_HINT
                ),
            );
        }
        return Ok(None);
    }
    Ok(Some((dense::model_path(call, a)?, weight)))
}

async fn facets_method(call: &Call<'_>, a: &Args<'_>) -> Result<Value, ActionError> {
    let field = a.required_str("field")?.to_string();
    let today = a.today("today", call.caps.clock.as_ref())?;
    let q = a.str("query")?.unwrap_or_default();
    let req = request(a, syntax::parse(q, true, today), today)?;
    let ix = open(call, a)?;
    ensure_fresh(call, &ix, a).await?;
    let (values, files) = ix.facets(&field, &req).map_err(kb_err)?;
    let limit = a.num("limit")?.map_or(usize::MAX, |n| n.max(0.0) as usize);
    let values: Vec<Value> = values
        .into_iter()
        .take(limit)
        .map(|(v, n)| json!({"value": v, "count": n}))
        .collect();
    Ok(json!({"field": field, "values": values, "files": files}))
}

/// `kb.vector_search`: cosine similarity between the query's embedding and
/// every chunk's (exact, flat scan), under the same filters as `kb.search`.
async fn vector_search_method(call: &Call<'_>, a: &Args<'_>) -> Result<Value, ActionError> {
    let started = Instant::now();
    let q = a.required_str("query")?.to_string();
    let today = a.today("today", call.caps.clock.as_ref())?;
    let parsed = syntax::parse(&q, a.bool("operators")?, today);
    // Operators filter; the rest of the text is what gets embedded.
    let text = if parsed.has_operators() {
        parsed.text()
    } else {
        q.clone()
    };
    let req = request(a, parsed, today)?;
    let query = dense::prepare(call, dense::model_path(call, a)?, text);
    let ix = open(call, a)?;
    let refreshed = ensure_fresh(call, &ix, a).await?;
    let threshold = req.threshold;
    let found = dense::search(
        call,
        ix,
        &req,
        query,
        req.top_k,
        req.snippet_chars,
        dense::Embed::All,
    )
    .await?;
    let hits: Vec<Value> = found
        .hits
        .into_iter()
        .filter(|h| threshold.is_none_or(|t| h["score"].as_f64().unwrap_or(0.0) >= t))
        .collect();
    let mut out = json!({
        "query": q,
        "found": !hits.is_empty(),
        "count": hits.len(),
        "hits": hits,
        "model": found.model,
        "embedded": found.embedded,
        "took_ms": ms(started.elapsed()),
    });
    if let Some(s) = refreshed.filter(UpdateStats::changed) {
        out["indexed"] = json!({"added": s.added, "updated": s.updated, "removed": s.removed});
    }
    Ok(out)
}
