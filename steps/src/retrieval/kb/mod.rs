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
mod hybrid;
pub mod index;
mod vectors;

use crate::core::walk::WalkOptions;
use crate::core::{
    action::{Action, Call},
    error::{type_name, ActionError},
    signals::LogLevel,
};
use crate::retrieval::syntax;
use async_trait::async_trait;
use chrono::NaiveDate;
use chunk::{ChunkOptions, KbError};
use index::{Filter, KbIndex, SearchRequest, UpdateStats};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct KbAction;

#[async_trait]
impl Action for KbAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        if !inputs.is_object() {
            return Err(ActionError::Input(format!(
                "`kb.{}` takes a mapping of inputs, got {}",
                call.method,
                type_name(&inputs)
            )));
        }
        match call.method {
            "index" => index_method(call, &inputs).await,
            "search" => search_method(call, &inputs).await,
            "facets" => facets_method(call, &inputs).await,
            "vector_search" => vector_search_method(call, &inputs).await,
            "evidence" => evidence::evidence_method(call, &inputs).await,
            m => Err(ActionError::Input(format!("unknown method `kb.{m}`"))),
        }
    }
}

fn kb_err(e: KbError) -> ActionError {
    match e {
        KbError::Locked(_) => ActionError::retryable(e.to_string()),
        other => ActionError::failed(other.to_string()),
    }
}

/// Opens (or creates) the index for the `kb` input, applying the sandbox.
fn open(call: &Call<'_>, inputs: &Value) -> Result<Arc<KbIndex>, ActionError> {
    let kb = match inputs.get("kb").or_else(|| inputs.get("knowledge_base")) {
        Some(Value::String(s)) if !s.is_empty() => s.as_str(),
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `kb` must be a folder path, got {}",
                type_name(other)
            )))
        }
        None => {
            return Err(ActionError::Input(
                "missing input `kb` (the knowledge base folder)".into(),
            ))
        }
    };
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
    let dir: Option<PathBuf> = match opt_str(inputs, "index_dir")? {
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
        None => Some(call.caps.state.kb_index(&root)),
    };
    match KbIndex::open(&call.caps.caches, &root, dir.as_deref()) {
        Ok(ix) => Ok(ix),
        // A state folder that cannot be written (and no `index_dir`): index
        // in memory, cached for the life of the process.
        Err(KbError::Io { .. }) if opt_str(inputs, "index_dir")?.is_none() => {
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

fn opt_str<'v>(inputs: &'v Value, field: &str) -> Result<Option<&'v str>, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ActionError::Input(format!(
            "input `{field}` must be a string, got {}",
            type_name(other)
        ))),
    }
}

fn opt_num(inputs: &Value, field: &str) -> Result<Option<f64>, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        // Inputs from the CLI arrive as strings.
        Some(Value::String(s)) if s.trim().parse::<f64>().is_ok() => Ok(s.trim().parse().ok()),
        Some(other) => Err(ActionError::Input(format!(
            "input `{field}` must be a number, got {}",
            type_name(other)
        ))),
    }
}

fn opt_bool(inputs: &Value, field: &str, default: bool) -> Result<bool, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ActionError::Input(format!(
            "input `{field}` must be true or false, got {}",
            type_name(other)
        ))),
    }
}

fn options(inputs: &Value) -> Result<(WalkOptions, ChunkOptions), ActionError> {
    let mut walk = WalkOptions::notes();
    if let Some(v) = inputs.get("extensions") {
        let exts = v.as_array().ok_or_else(|| {
            ActionError::Input("input `extensions` must be a list like [md, markdown]".into())
        })?;
        walk.extensions = exts
            .iter()
            .map(|e| e.as_str().map(|s| s.trim_start_matches('.').to_string()))
            .collect::<Option<_>>()
            .ok_or_else(|| ActionError::Input("input `extensions` must list strings".into()))?;
    }
    walk.include_hidden = opt_bool(inputs, "include_hidden", false)?;
    let mut chunking = ChunkOptions::default();
    if let Some(n) = opt_num(inputs, "chunk_chars")? {
        chunking.max_chars = n.max(200.0) as usize;
    }
    if let Some(n) = opt_num(inputs, "split_level")? {
        if !(1.0..=6.0).contains(&n) {
            return Err(ActionError::Input(
                "input `split_level` must be 1 to 6".into(),
            ));
        }
        chunking.split_level = n as u8;
    }
    Ok((walk, chunking))
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
    let cancel = call.caps.cancel.clone();
    let deadline = call.timeout.map(|t| std::time::Instant::now() + t);
    let stats = tokio::task::spawn_blocking(move || {
        let stop = move || {
            cancel.is_cancelled() || deadline.is_some_and(|d| std::time::Instant::now() >= d)
        };
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

async fn index_method(call: &Call<'_>, inputs: &Value) -> Result<Value, ActionError> {
    let started = Instant::now();
    let (walk, chunking) = options(inputs)?;
    let force = opt_bool(inputs, "force", false)?;
    let ix = open(call, inputs)?;
    let s = update(call, ix.clone(), walk, chunking, force)
        .await
        .map_err(kb_err)?;
    Ok(json!({
        "files": s.files,
        "chunks": s.chunks,
        "added": s.added,
        "updated": s.updated,
        "removed": s.removed,
        "unchanged": s.unchanged,
        "rebuilt": s.rebuilt,
        "duration_ms": ms(started.elapsed()),
        "index_dir": dir_label(&ix),
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
    inputs: &Value,
) -> Result<Option<UpdateStats>, ActionError> {
    let refresh = opt_str(inputs, "refresh")?.unwrap_or("auto");
    let interval = opt_num(inputs, "refresh_interval_ms")?.unwrap_or(1000.0);
    let needed = match refresh {
        "always" => true,
        "never" => ix.is_empty(),
        "auto" => {
            ix.is_empty() || !ix.fresh_within(Duration::from_millis(interval.max(0.0) as u64))
        }
        other => {
            return Err(ActionError::Input(format!(
                "input `refresh` must be auto, always or never, got `{other}`"
            )))
        }
    };
    if !needed {
        return Ok(None);
    }
    let (walk, chunking) = options(inputs)?;
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

fn today(inputs: &Value, clock: &dyn crate::core::time::Clock) -> Result<NaiveDate, ActionError> {
    crate::core::time::today(inputs, &["today"], clock).map_err(ActionError::Input)
}

/// `kb.search` / `kb.facets` inputs other than the query text.
fn request(
    inputs: &Value,
    parsed: syntax::ParsedQuery,
    today: NaiveDate,
) -> Result<SearchRequest, ActionError> {
    let mut req = SearchRequest {
        paths: parsed.paths.clone(),
        filters: Vec::new(),
        date: parsed.date,
        top_k: 10,
        threshold: opt_num(inputs, "threshold")?,
        boosts: [3.0, 2.0, 1.0],
        snippet_chars: 160,
        collapse: opt_bool(inputs, "per_file", false)?,
        question_words: opt_bool(inputs, "question_words", false)?,
        parsed,
    };
    if let Some(d) = req.parsed.bad_dates.first() {
        return Err(ActionError::Input(format!(
            "`date:{d}` in the query is not a date: use today, yesterday, this-week, last-week, this-month, YYYY-MM-DD, YYYY-MM, >DATE or DATE..DATE"
        )));
    }
    if let Some(k) = opt_num(inputs, "top_k")? {
        if k < 1.0 {
            return Err(ActionError::Input(
                "input `top_k` must be at least 1".into(),
            ));
        }
        req.top_k = k as usize;
    }
    if let Some(n) = opt_num(inputs, "snippet_chars")? {
        req.snippet_chars = n.max(20.0) as usize;
    }
    if let Some(b) = inputs.get("boosts") {
        let b = b.as_object().ok_or_else(|| {
            ActionError::Input(
                "input `boosts` must be a mapping like {title: 3, section: 2, body: 1}".into(),
            )
        })?;
        for (k, v) in b {
            let i = match k.as_str() {
                "title" => 0,
                "section" | "headings" => 1,
                "body" => 2,
                other => {
                    return Err(ActionError::Input(format!(
                        "unknown field `{other}` in `boosts`: use title, section or body"
                    )))
                }
            };
            req.boosts[i] = v
                .as_f64()
                .ok_or_else(|| ActionError::Input(format!("`boosts.{k}` must be a number")))?
                as f32;
        }
    }
    // The seed's `search_scope`: all, work, personal, or a folder.
    if let Some(s) = opt_str(inputs, "scope")? {
        if !s.is_empty() && !s.eq_ignore_ascii_case("all") {
            req.paths.push(s.to_string());
        }
    }
    match inputs.get("path_prefix") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => req.paths.push(s.clone()),
        Some(Value::Array(a)) => {
            for v in a {
                req.paths.push(
                    v.as_str()
                        .ok_or_else(|| {
                            ActionError::Input("input `path_prefix` must list strings".into())
                        })?
                        .to_string(),
                );
            }
        }
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `path_prefix` must be a string or a list, got {}",
                type_name(other)
            )))
        }
    }
    for (k, v) in &req.parsed.fields {
        req.filters.push(Filter {
            field: k.clone(),
            values: vec![v.clone()],
            negate: false,
        });
    }
    match inputs.get("filters") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => parse_filters(m, &mut req, today)?,
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `filters` must be a mapping of field to value, got {}",
                type_name(other)
            )))
        }
    }
    Ok(req)
}

fn scalars(field: &str, v: &Value) -> Result<Vec<String>, ActionError> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.trim_start_matches('#').to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(ActionError::Input(format!(
            "`filters.{field}` values must be strings, numbers or booleans, got {}",
            type_name(other)
        ))),
    };
    match v {
        Value::Array(a) => a.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// `filters: {type: task, tags: [a, b], status: {in: [..]}, project: {not: x},
/// path: Work/, date: {from: .., to: ..} | "last-week"}`.
fn parse_filters(
    m: &Map<String, Value>,
    req: &mut SearchRequest,
    today: NaiveDate,
) -> Result<(), ActionError> {
    for (k, v) in m {
        let field = if k == "tag" { "tags" } else { k.as_str() };
        match field {
            "path" | "path_prefix" | "in" => req.paths.extend(scalars(k, v)?),
            "date" => {
                let r = match v {
                    Value::String(s) => syntax::resolve_date(s, today),
                    Value::Object(o) => {
                        let end =
                            |key: &str, first: bool| -> Result<Option<NaiveDate>, ActionError> {
                                match o.get(key).and_then(Value::as_str) {
                                None => Ok(None),
                                Some(s) => syntax::span(s)
                                    .map(|(a, b)| Some(if first { a } else { b }))
                                    .ok_or_else(|| {
                                        ActionError::Input(format!("`filters.date.{key}` must be a date like 2026-11-20, got `{s}`"))
                                    }),
                            }
                            };
                        Some(syntax::DateRange {
                            from: end("from", true)?,
                            to: end("to", false)?,
                        })
                    }
                    _ => None,
                };
                req.date = Some(r.ok_or_else(|| {
                    ActionError::Input(format!(
                        "`filters.date` must be {{from, to}} or an expression like last-week, got {v}"
                    ))
                })?);
            }
            _ => {
                let (values, negate) = match v {
                    Value::Object(o) => match (o.get("eq"), o.get("in"), o.get("not")) {
                        (Some(x), None, None) | (None, Some(x), None) => (scalars(k, x)?, false),
                        (None, None, Some(x)) => (scalars(k, x)?, true),
                        _ => {
                            return Err(ActionError::Input(format!(
                                "`filters.{k}` takes one of eq, in or not"
                            )))
                        }
                    },
                    v => (scalars(k, v)?, false),
                };
                req.filters.push(Filter {
                    field: field.to_string(),
                    values,
                    negate,
                });
            }
        }
    }
    Ok(())
}

async fn search_method(call: &Call<'_>, inputs: &Value) -> Result<Value, ActionError> {
    let started = Instant::now();
    let q = match inputs.get("query") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `query` must be a string, got {}",
                type_name(other)
            )))
        }
    };
    let today = today(inputs, call.caps.clock.as_ref())?;
    let mut parsed = syntax::parse(q, opt_bool(inputs, "operators", true)?, today);
    if opt_bool(inputs, "analyze", false)? {
        analyzed(&mut parsed, q, today, call)?;
    }
    let dense_text = match opt_str(inputs, "dense_query")? {
        Some(d) if !d.trim().is_empty() => syntax::parse(d, true, today).text(),
        _ => parsed.text(),
    };
    let mut req = request(inputs, parsed, today)?;
    let dense = match dense_model(call, inputs)? {
        Some((path, weight)) if !dense_text.trim().is_empty() => {
            Some((dense::prepare(call, path, dense_text), weight))
        }
        _ => None,
    };
    let ix = open(call, inputs)?;
    let refreshed = ensure_fresh(call, &ix, inputs).await?;
    let (hits, total, mode) = match dense {
        Some((query, weight)) => {
            let want = req.top_k;
            req.top_k = want.max(hybrid::BM25_CANDIDATES);
            let (bm25, total) = ix.search(&req).map_err(kb_err)?;
            let found = dense::search(
                call,
                ix.clone(),
                &req,
                query,
                hybrid::DENSE_CANDIDATES.max(want),
                req.snippet_chars,
            )
            .await?;
            let floor = opt_num(inputs, "dense_min")?.unwrap_or(hybrid::DENSE_MIN);
            let hits = hybrid::fuse(&bm25, &found.hits, weight, floor, req.collapse, want);
            let mode = json!({"dense": true, "model": found.model, "dense_weight": weight});
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
    let a = crate::retrieval::query::analyze(
        &json!({"query": q, "today": today.to_string()}),
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

/// The `dense` input: true, false or auto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dense {
    On,
    Off,
    Auto,
}

/// Reads the `dense` input (`None`: not given; an empty string is false).
fn dense_setting(inputs: &Value) -> Result<Option<Dense>, ActionError> {
    Ok(match inputs.get("dense") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(if *b { Dense::On } else { Dense::Off }),
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "" | "false" | "off" | "no" => Some(Dense::Off),
            "true" | "on" | "yes" => Some(Dense::On),
            "auto" => Some(Dense::Auto),
            other => {
                return Err(ActionError::Input(format!(
                    "input `dense` must be true, false or auto, got `{other}`"
                )))
            }
        },
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `dense` must be true, false or auto, got {}",
                type_name(other)
            )))
        }
    })
}

/// Whether `kb.search` fuses dense search in, with which model and weight:
/// `dense: true` needs the model, `auto` uses it when one is configured
/// (and says once per process when none is), `false` (the default) never.
fn dense_model(call: &Call<'_>, inputs: &Value) -> Result<Option<(PathBuf, f64)>, ActionError> {
    let mode = match dense_setting(inputs)? {
        None | Some(Dense::Off) => return Ok(None),
        Some(Dense::On) => "true",
        Some(Dense::Auto) => "auto",
    };
    let weight = opt_num(inputs, "dense_weight")?.unwrap_or(hybrid::DENSE_WEIGHT);
    if !(0.0..=1.0).contains(&weight) {
        return Err(ActionError::Input(
            "input `dense_weight` must be between 0 and 1".into(),
        ));
    }
    if mode == "auto" && dense::configured(call, inputs)?.is_err() {
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
    Ok(Some((dense::model_path(call, inputs)?, weight)))
}

async fn facets_method(call: &Call<'_>, inputs: &Value) -> Result<Value, ActionError> {
    let field = match opt_str(inputs, "field")? {
        Some(f) if !f.is_empty() => f.to_string(),
        _ => {
            return Err(ActionError::Input(
                "missing input `field` (the metadata field to count, e.g. type)".into(),
            ))
        }
    };
    let today = today(inputs, call.caps.clock.as_ref())?;
    let q = opt_str(inputs, "query")?.unwrap_or("");
    let req = request(inputs, syntax::parse(q, true, today), today)?;
    let ix = open(call, inputs)?;
    ensure_fresh(call, &ix, inputs).await?;
    let (values, files) = ix.facets(&field, &req).map_err(kb_err)?;
    let limit = opt_num(inputs, "limit")?
        .map(|n| n as usize)
        .unwrap_or(usize::MAX);
    let values: Vec<Value> = values
        .into_iter()
        .take(limit)
        .map(|(v, n)| json!({"value": v, "count": n}))
        .collect();
    Ok(json!({"field": field, "values": values, "files": files}))
}

/// `kb.vector_search`: cosine similarity between the query's embedding and
/// every chunk's (exact, flat scan), under the same filters as `kb.search`.
async fn vector_search_method(call: &Call<'_>, inputs: &Value) -> Result<Value, ActionError> {
    let started = Instant::now();
    let q = match inputs.get("query") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(ActionError::Input("missing input `query`".into()))
        }
        Some(other) => {
            return Err(ActionError::Input(format!(
                "input `query` must be a string, got {}",
                type_name(other)
            )))
        }
    };
    let today = today(inputs, call.caps.clock.as_ref())?;
    let parsed = syntax::parse(&q, opt_bool(inputs, "operators", true)?, today);
    // Operators filter; the rest of the text is what gets embedded.
    let text = if parsed.has_operators() {
        parsed.text()
    } else {
        q.clone()
    };
    let req = request(inputs, parsed, today)?;
    let query = dense::prepare(call, dense::model_path(call, inputs)?, text);
    let ix = open(call, inputs)?;
    let refreshed = ensure_fresh(call, &ix, inputs).await?;
    let top_k = opt_num(inputs, "top_k")?
        .map(|n| n.max(0.0) as usize)
        .unwrap_or(10);
    let threshold = opt_num(inputs, "threshold")?;
    let snippet_chars = opt_num(inputs, "snippet_chars")?
        .map(|n| n as usize)
        .unwrap_or(240);
    let found = dense::search(call, ix, &req, query, top_k, snippet_chars).await?;
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

use crate::core::catalog::{
    alias, input, spec, Input, Spec, Traits, BOOLEAN, BOOLEAN_OR_STRING, EFFECTS, INTEGER, LIST,
    LIST_OR_MAPPING, MAPPING, NUMBER, STRING, STRING_OR_LIST,
};

const KB: Input = input("kb", STRING, "The knowledge base folder.").required();
const KB_ALIAS: Input = alias("knowledge_base", "kb");
const INDEX_DIR: Input = input(
    "index_dir",
    STRING,
    "Where the index lives (default `<kb>/.marktoflow/index`).",
);
const FORCE: Input = input("force", BOOLEAN, "Rebuild from scratch.").default("false");
const EXTENSIONS: Input =
    input("extensions", LIST, "Note file extensions.").default("[md, markdown]");
const HIDDEN: Input = input("include_hidden", BOOLEAN, "Index hidden folders.").default("false");
const CHUNK_CHARS: Input = input(
    "chunk_chars",
    INTEGER,
    "Longest section before it is cut at paragraphs.",
)
.default("2000");
const SPLIT_LEVEL: Input = input(
    "split_level",
    INTEGER,
    "Deepest heading that starts a chunk.",
)
.default("3");
const REFRESH: Input = input("refresh", STRING, "When to re-index first.")
    .default("auto")
    .one_of(&["auto", "always", "never"]);
const REFRESH_MS: Input = input(
    "refresh_interval_ms",
    NUMBER,
    "auto: check the folder at most this often.",
)
.default("1000");
const QUERY: Input = input("query", STRING, "The words (with the seed's operators).");
const TOP_K: Input = input("top_k", INTEGER, "How many hits.").default("10");
const THRESHOLD: Input = input("threshold", NUMBER, "The lowest score kept.");
const PER_FILE: Input =
    input("per_file", BOOLEAN, "One hit per note, its best chunk.").default("false");
const SCOPE: Input = input(
    "scope",
    STRING,
    "`all`, or a top-level folder such as `work`.",
);
const PATH_PREFIX: Input = input(
    "path_prefix",
    STRING_OR_LIST,
    "Only notes below these folders.",
);
const FILTERS: Input = input(
    "filters",
    MAPPING,
    "Metadata filters: {field: value | [values] | {eq, in, not}}, `date: {from, to}`.",
);
const BOOSTS: Input = input("boosts", MAPPING, "Field weights {title, section, body}.");
const SNIPPET: Input = input("snippet_chars", INTEGER, "Snippet length.").default("160");
const OPERATORS: Input = input(
    "operators",
    BOOLEAN,
    "Read `tag:`, `type:`, `\"phrases\"`, `-words` in the query.",
)
.default("true");
const TODAY: Input = input(
    "today",
    STRING,
    "The date relative dates count from (YYYY-MM-DD).",
);

const MODEL_DIR: Input = input(
    "model_dir",
    STRING,
    "The sentence-embedding model folder (else the tool's `options.model_dir`, else MARKTOFLOW_EMBED_MODEL).",
);

/// The index inputs, the freshness inputs, the search inputs, then `$extra`.
macro_rules! kb_inputs {
    ($($extra:expr),* $(,)?) => {
        &[
            KB, KB_ALIAS, INDEX_DIR, FORCE, EXTENSIONS, HIDDEN, CHUNK_CHARS, SPLIT_LEVEL,
            REFRESH, REFRESH_MS, QUERY, TOP_K, THRESHOLD, PER_FILE, SCOPE, PATH_PREFIX,
            FILTERS, BOOSTS, SNIPPET, OPERATORS, TODAY, $($extra),*
        ]
    };
}

const KB_TRAITS: Traits = EFFECTS;

/// The contracts of `kb.*`.
pub const SPECS: &[Spec] = &[
    spec("kb", "index", "Indexes a folder of Markdown notes (incremental).")
        .inputs(&[KB, KB_ALIAS, INDEX_DIR, FORCE, EXTENSIONS, HIDDEN, CHUNK_CHARS, SPLIT_LEVEL])
        .returns("{files, chunks, added, updated, removed, unchanged, rebuilt, duration_ms, index_dir}")
        .traits(KB_TRAITS),
    spec("kb", "search", "Full-text (BM25) search of the notes, fused with dense search when asked.")
        .inputs(kb_inputs!(
            input("analyze", BOOLEAN, "Search the words `query.analyze` keeps, and filter by a date the text names.").default("false"),
            input("question_words", BOOLEAN, "Search question words and pronouns too (what, when, my, did, …).").default("false"),
            input("dense", BOOLEAN_OR_STRING, "Fuse dense (embedding) search in: true, false or auto (when a model is configured).").default("false"),
            input("dense_weight", NUMBER, "The dense list's weight in the fusion, 0..1.").default("0.6"),
            input("dense_min", NUMBER, "The lowest cosine at which a hit found by meaning alone is kept.").default("0.3"),
            input("dense_query", STRING, "The text to embed (default: the query without operators)."),
            MODEL_DIR,
        ))
        .returns("{query, found, count, total, hits: [{id, path, title, section, text, snippet, score, metadata, mtime_ms}], ranking, took_ms}")
        .traits(KB_TRAITS),
    spec("kb", "facets", "Counts notes by a metadata field.")
        .inputs(kb_inputs!(
            input("field", STRING, "A metadata field, or `folder`.").required(),
            input("limit", INTEGER, "How many values."),
        ))
        .returns("{field, values: [{value, count}], files}")
        .traits(KB_TRAITS),
    spec("kb", "vector_search", "Dense (embedding) search of the notes.")
        .inputs(kb_inputs!(MODEL_DIR))
        .returns("{query, found, count, hits, took_ms}")
        .traits(KB_TRAITS),
    spec("kb", "evidence", "The lines of the found notes that bear on a question, with line numbers (rules, no model).")
        .inputs(&[
            KB,
            KB_ALIAS,
            input("question", STRING, "The question.").required(),
            input("hits", LIST_OR_MAPPING, "A `kb.search` output, or its `hits`: the notes to read, best first.").required(),
            input("max_notes", INTEGER, "Read at most this many notes.").default("5"),
            input("budget_tokens", INTEGER, "Keep at most this much text (characters / 4).").default("500"),
            input("max_items", INTEGER, "At most this many evidence items.").default("8"),
            input("min_score", NUMBER, "Drop items scored lower."),
            input("dense", BOOLEAN_OR_STRING, "Score lines by meaning too: true, false or auto (when a model is configured).").default("auto"),
            MODEL_DIR,
        ])
        .returns("{question, found, count, text, notes, evidence: [{id, path, title, heading, heading_path, start_line, end_line, lines, kind, text, quote, score, units}]}")
        .traits(KB_TRAITS),
];
