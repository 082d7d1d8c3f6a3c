//! Runs in the API: listed with filters and pages (the store's and those
//! still in memory), one run with its steps as a tree, and its JSON.

use super::super::request::{error, url_pairs};
use super::super::{RunEntry, ServerState};
use super::{guard, MAX_PAGE, PAGE};
use crate::engine::{Event, RunEvent, RunResult};
use crate::format::model::Workflow;
use crate::store::{RunFilter, RunRecord, RunStatus, StepFold, StepRow};
use axum::extract::{Path as UrlPath, State};
use axum::http::{request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// `GET /runs`: runs newest first, filtered by `workflow`, `status`,
/// `trigger`, `since` and `until` (an age such as `24h`, a date, or epoch
/// milliseconds), paged by `limit` and `offset`.
pub(in crate::serve) async fn list_runs(
    State(s): State<Arc<ServerState>>,
    parts: Parts,
) -> Response {
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    let query = parts.uri.query().map(url_pairs).unwrap_or_default();
    let filter = match run_filter(&query) {
        Ok(f) => f,
        Err(msg) => return error(StatusCode::BAD_REQUEST, msg),
    };
    let interrupted = query
        .iter()
        .any(|(k, v)| k == "status" && v == "interrupted");
    let (runs, total) = match s.store.clone() {
        Some(store) => {
            let f = filter.clone();
            let read = tokio::task::spawn_blocking(move || {
                Ok::<_, crate::store::StoreError>((store.list_runs(&f)?, store.count_runs(&f)?))
            })
            .await;
            match read {
                Ok(Ok((runs, total))) => {
                    (runs.iter().map(record_summary).collect::<Vec<_>>(), total)
                }
                Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            }
        }
        None => memory_runs(&s, &filter),
    };
    // `interrupted` is a running or queued run whose process is gone: the
    // store lists both, this keeps those.
    let runs: Vec<Value> = if interrupted {
        runs.into_iter()
            .filter(|r| r["status"] == "interrupted")
            .collect()
    } else {
        runs
    };
    let limit = filter.limit.unwrap_or(PAGE);
    let next = (filter.offset + runs.len() < total && runs.len() == limit).then(|| {
        let mut q: Vec<String> = query
            .iter()
            .filter(|(k, _)| k != "offset")
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect();
        q.push(format!("offset={}", filter.offset + limit));
        format!("/runs?{}", q.join("&"))
    });
    Json(json!({"runs": runs, "total": total, "offset": filter.offset, "limit": limit, "next": next}))
        .into_response()
}

/// Percent-encodes a query component.
pub(super) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The filter a `GET /runs` query asks for.
pub(super) fn run_filter(query: &[(String, String)]) -> Result<RunFilter, String> {
    let mut f = RunFilter {
        limit: Some(PAGE),
        ..Default::default()
    };
    for (k, v) in query {
        if v.is_empty() {
            continue;
        }
        match k.as_str() {
            "workflow" => f.workflow = Some(v.clone()),
            "trigger" => f.trigger = Some(v.clone()),
            "status" if v == "interrupted" => {}
            "status" => {
                f.status = Some(RunStatus::parse(v).ok_or_else(|| {
                    let all: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
                    format!("`status={v}`: use {} or interrupted", all.join(", "))
                })?)
            }
            "q" => f.text = Some(v.chars().take(200).collect()),
            "since" => f.since = Some(time_of(v)?),
            "until" => f.until = Some(time_of(v)?),
            "limit" => {
                let n: usize = v
                    .parse()
                    .map_err(|_| format!("`limit={v}` is not a number"))?;
                f.limit = Some(n.clamp(1, MAX_PAGE));
            }
            "offset" => {
                f.offset = v
                    .parse()
                    .map_err(|_| format!("`offset={v}` is not a number"))?
            }
            _ => {}
        }
    }
    Ok(f)
}

/// A time in a query: epoch milliseconds, a date or date-time (UTC unless
/// it says otherwise), or an age (`30m`, `24h`, `7d`: that long ago).
pub(super) fn time_of(v: &str) -> Result<i64, String> {
    use marktoflow_steps::core::time::{parse_date_text, DateText};
    if let Ok(ms) = v.parse::<i64>() {
        return Ok(ms);
    }
    if let Some(age) = crate::store::parse_age(v) {
        let age = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        return Ok(crate::store::now_ms().saturating_sub(age));
    }
    match parse_date_text(v) {
        Some(DateText::Zoned(d)) => Ok(d.timestamp_millis()),
        Some(DateText::Wall(d)) => Ok(d.and_utc().timestamp_millis()),
        None => Err(format!(
            "`{v}` is not a time: use an age (`24h`, `7d`), a date (`2026-11-24`) or epoch milliseconds"
        )),
    }
}

/// A stored run as a list shows it: with its inputs and a line of its
/// outputs, so that runs of one workflow are told apart.
pub(super) fn record_summary(r: &RunRecord) -> Value {
    json!({"run_id": r.id, "workflow": r.workflow, "status": r.shown_status(), "trigger": r.trigger,
           "created_at": r.created_at, "finished_at": r.finished_at, "duration_ms": r.duration_ms,
           "retry_of": r.retry_of, "error": r.error, "inputs": brief(&r.inputs),
           "outputs": brief(&r.outputs)})
}

/// A value in one short line: `key: value` pairs, each value cut.
pub(super) fn brief(v: &Value) -> String {
    const MAX: usize = 120;
    let one = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let text = match v {
        Value::Null => String::new(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}: {}", cut(&one(v), 40)))
            .collect::<Vec<_>>()
            .join(", "),
        other => one(other),
    };
    cut(&text, MAX)
}

fn cut(s: &str, n: usize) -> String {
    let s = s.replace(['\n', '\r'], " ");
    if s.chars().count() <= n {
        s
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

pub(in crate::serve) fn entry_status(e: &RunEntry) -> (RunStatus, Option<Arc<RunResult>>) {
    let result = e.result.borrow().clone();
    let status = match &result {
        Some(r) => r.status,
        None if e.started.load(Ordering::SeqCst) => RunStatus::Running,
        None => RunStatus::Queued,
    };
    (status, result)
}

/// The runs this server keeps in memory (`--no-store`), as a page.
pub(super) fn memory_runs(s: &ServerState, f: &RunFilter) -> (Vec<Value>, usize) {
    let (Ok(runs), Ok(order)) = (s.runs.lock(), s.order.lock()) else {
        return (Vec::new(), 0);
    };
    let matching: Vec<Value> = order
        .iter()
        .rev()
        .filter_map(|id| runs.get(id).map(|e| (id, e)))
        .filter_map(|(id, e)| {
            let (status, result) = entry_status(e);
            // `q`: in its inputs or outputs, any case.
            let holds = f.text.as_deref().is_none_or(|t| {
                let t = t.to_lowercase();
                Value::Object((*e.inputs).clone()).to_string().to_lowercase().contains(&t)
                    || result
                        .as_ref()
                        .is_some_and(|r| r.outputs.to_string().to_lowercase().contains(&t))
            });
            let keep = holds
                && f.workflow.as_ref().is_none_or(|w| *w == e.workflow)
                && f.trigger.as_ref().is_none_or(|t| *t == e.trigger)
                && f.status.is_none_or(|st| st == status)
                && f.since.is_none_or(|t| e.created_at >= t)
                && f.until.is_none_or(|t| e.created_at < t);
            keep.then(|| {
                json!({"run_id": id, "workflow": e.workflow, "status": status, "trigger": e.trigger,
                       "created_at": e.created_at, "duration_ms": result.as_ref().map(|r| r.duration_ms),
                       "error": result.as_ref().and_then(|r| r.error.as_ref().map(|f| f.message.clone())),
                       "inputs": brief(&Value::Object((*e.inputs).clone())),
                       "outputs": result.as_ref().map(|r| brief(&r.outputs)).unwrap_or_default()})
            })
        })
        .collect();
    let total = matching.len();
    let page = matching
        .into_iter()
        .skip(f.offset)
        .take(f.limit.unwrap_or(PAGE))
        .collect();
    (page, total)
}

/// One step as the API shows it, children under their parent.
#[derive(Clone)]
pub(super) struct StepView {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) depth: usize,
    pub(super) status: &'static str,
    pub(super) attempts: u32,
    pub(super) started_at: Option<i64>,
    pub(super) duration_ms: Option<u64>,
    pub(super) output: Value,
    pub(super) error: Option<String>,
    pub(super) reused: bool,
    /// An action's inputs as it was called.
    pub(super) inputs: Option<Value>,
    /// What its model calls spent.
    pub(super) usage: Option<crate::engine::Spend>,
}

impl From<&StepRow> for StepView {
    fn from(r: &StepRow) -> Self {
        StepView {
            id: r.step_id.clone(),
            name: r.name.clone(),
            depth: r.depth,
            status: r.status.as_str(),
            attempts: r.attempts,
            started_at: Some(r.started_at),
            duration_ms: Some(r.duration_ms),
            output: r.output.clone(),
            error: r.error.clone(),
            reused: r.reused,
            inputs: r.inputs.clone(),
            usage: r.usage.clone(),
        }
    }
}

/// The steps a run's events tell of, in the order they ended; steps still
/// going come last, innermost first (so they gather the steps inside them).
pub(super) fn steps_of_events(events: &[Event]) -> Vec<StepView> {
    let mut fold = StepFold::default();
    let mut steps: Vec<StepView> = events
        .iter()
        .filter_map(|e| fold.push(e))
        .map(|r| StepView::from(&r))
        .collect();
    steps.extend(fold.going().into_iter().map(|g| StepView {
        id: g.id,
        name: g.name,
        depth: g.depth,
        status: "running",
        attempts: g.attempts,
        started_at: Some(g.started_at),
        duration_ms: None,
        output: Value::Null,
        error: None,
        reused: false,
        inputs: None,
        usage: g.usage,
    }));
    steps
}

/// Steps in the order they ended (children before their parent) as a
/// tree: each step holds the steps inside it; a step that ran more than
/// once under one parent (a loop's body) is numbered by `iteration`.
pub(super) fn step_tree(rows: &[StepView]) -> Vec<Value> {
    let mut pending: Vec<Vec<Value>> = Vec::new();
    for r in rows {
        while pending.len() <= r.depth + 1 {
            pending.push(Vec::new());
        }
        let mut children = std::mem::take(&mut pending[r.depth + 1]);
        number_iterations(&mut children);
        let mut node = json!({"id": r.id, "name": r.name, "depth": r.depth, "status": r.status,
                          "attempts": r.attempts, "started_at": r.started_at, "duration_ms": r.duration_ms,
                          "output": r.output, "error": r.error, "reused": r.reused, "children": children});
        if let Some(i) = &r.inputs {
            node["inputs"] = i.clone();
        }
        if let Some(u) = &r.usage {
            node["usage"] = json!(u);
        }
        pending[r.depth].push(node);
    }
    // Steps whose parent is not listed (it is still going) stay at their level.
    let mut roots = Vec::new();
    for level in pending {
        roots.extend(level);
    }
    roots
}

pub(super) fn number_iterations(children: &mut [Value]) {
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    for c in children.iter() {
        *counts
            .entry(c["id"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    for c in children.iter_mut() {
        let id = c["id"].as_str().unwrap_or("").to_string();
        if counts.get(&id).copied().unwrap_or(0) > 1 {
            let n = seen.entry(id).or_default();
            *n += 1;
            c["iteration"] = json!(*n);
        }
    }
}

/// Where the failure is written: the position the run reported, else
/// the failing step's; `file:line:col` and that line's text.
pub(super) fn error_place(
    wf: Option<&Workflow>,
    step: Option<&str>,
    reported: Option<(usize, usize)>,
) -> Value {
    let Some(wf) = wf else { return Value::Null };
    let pos = reported.or_else(|| {
        let st = wf
            .walk()
            .into_iter()
            .find(|s| Some(s.id.as_str()) == step)?;
        Some((st.pos.line, st.pos.col))
    });
    match pos {
        Some((line, column)) => json!({"file": wf.source.name, "line": line, "column": column,
                                       "source": wf.source.line_text(line)}),
        None => Value::Null,
    }
}

/// A run's summary for callers holding its id (the run a webhook answered
/// with): status, outputs, error, steps. Full detail when `detail`.
pub(in crate::serve) async fn get_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    parts: Parts,
) -> Response {
    // Inputs, every step's output and logs are for the API's users; a
    // caller holding only the run id sees what the webhook answers.
    let detail = guard(&s, &parts.method, &parts.headers).is_ok();
    // The table's lock is held only to look the run up, never during a
    // store read.
    // A waiting run is the store's (another process may answer or cancel it).
    let live = match s.runs.lock() {
        Ok(runs) => runs
            .get(&id)
            .filter(|e| entry_status(e).0 != RunStatus::Waiting)
            .map(|e| {
                let (status, result) = entry_status(e);
                (
                    e.workflow.clone(),
                    e.file.clone(),
                    e.trigger.clone(),
                    e.inputs.clone(),
                    e.created_at,
                    status,
                    result,
                    e.events.clone(),
                )
            }),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "run table unavailable"),
    };
    // A run whose end this process could not record: the store's word, once
    // it has one, replaces what this process knows.
    let unrecorded = s.unrecorded.lock().is_ok_and(|u| u.contains(&id));
    let stored = match (s.store.clone(), detail || live.is_none() || unrecorded) {
        (Some(st), true) => {
            let want = id.clone();
            tokio::task::spawn_blocking(move || {
                let run = st.get_run(&want)?;
                let steps = st.steps_of(&run.id)?;
                Ok::<_, crate::store::StoreError>((run, steps))
            })
            .await
            .ok()
            .and_then(Result::ok)
            .filter(|(r, _)| r.id == id)
        }
        _ => None,
    };
    let settled = unrecorded && stored.as_ref().is_some_and(|(r, _)| r.status.is_finished());
    if settled {
        if let Ok(mut u) = s.unrecorded.lock() {
            u.remove(&id);
        }
    }
    let live = if settled { None } else { live };
    let mut out = match (&live, &stored) {
        (Some((workflow, _, _, _, _, status, result, _)), _) => match result {
            Some(r) => run_json(&id, workflow, true, Some(r)),
            None => json!({"run_id": id, "workflow": workflow, "status": status}),
        },
        (None, Some((r, steps))) => json!({
            "run_id": r.id, "workflow": r.workflow, "status": r.shown_status(),
            "outputs": r.outputs, "error": r.error.as_ref().map(|m| json!({"message": m, "step": r.error_step})),
            "duration_ms": r.duration_ms,
            "steps": steps.iter().filter(|s| s.depth == 0).map(|s| json!({"id": s.step_id, "name": s.name, "status": s.status, "error": s.error, "duration_ms": s.duration_ms})).collect::<Vec<_>>(),
        }),
        (None, None) => return error(StatusCode::NOT_FOUND, format!("no run `{id}`")),
    };
    if !detail {
        // RunStatus, outputs and error: what the docs promise a run id holder.
        if let Some(o) = out.as_object_mut() {
            o.remove("steps");
        }
        return Json(out).into_response();
    }
    // The detail: what started it, with what, every step (nested under its
    // parent), logs, and where the failing step is written.
    let wf = match (&live, &stored) {
        (Some((_, file, ..)), _) => s.workflow_at(file),
        (None, Some((r, _))) => s.workflow_at(std::path::Path::new(&r.file)),
        _ => None,
    };
    let finished = out["status"]
        .as_str()
        .is_some_and(|st| !["queued", "running"].contains(&st));
    let rows: Vec<StepView> = match (&live, &stored) {
        // A run that ended is all in the store (its end is published once
        // committed); a run still going is in its events, after the steps
        // a retry reused.
        (Some((.., events)), stored) if !finished || stored.is_none() => {
            let mut rows: Vec<StepView> = stored
                .iter()
                .flat_map(|(_, steps)| steps.iter().filter(|s| s.reused).map(StepView::from))
                .collect();
            if let Ok(ev) = events.lock() {
                rows.extend(steps_of_events(&ev));
            }
            rows
        }
        (_, Some((_, steps))) => steps.iter().map(StepView::from).collect(),
        _ => Vec::new(),
    };
    let logs: Vec<Value> = live
        .as_ref()
        .and_then(|(.., events)| events.lock().ok().map(|ev| ev.clone()))
        .unwrap_or_default()
        .iter()
        .filter_map(|e| match &e.kind {
            RunEvent::Log {
                step,
                level,
                message,
            } => Some(json!({"at": e.at_ms, "step": step, "level": level, "message": message})),
            _ => None,
        })
        .collect();
    let (trigger, inputs, created_at, retry_of, finished_at, file) = match (&live, &stored) {
        (_, Some((r, _))) => (
            json!(r.trigger),
            r.inputs.clone(),
            json!(r.created_at),
            json!(r.retry_of),
            json!(r.finished_at),
            json!(r.file),
        ),
        (Some((_, file, trigger, inputs, created, ..)), None) => (
            json!(trigger),
            Value::Object((**inputs).clone()),
            json!(created),
            Value::Null,
            Value::Null,
            json!(file.display().to_string()),
        ),
        (None, None) => Default::default(),
    };
    let error_step = out["error"]["step"].as_str().map(str::to_string);
    let reported = match (
        out["error"]["line"].as_u64(),
        out["error"]["column"].as_u64(),
    ) {
        (Some(l), Some(c)) => Some((l as usize, c as usize)),
        _ => None,
    };
    if out["error"].is_object() {
        out["error"]["place"] = error_place(wf.as_deref(), error_step.as_deref(), reported);
    }
    let retry_from: Vec<Value> = wf
        .as_ref()
        .map(|w| w.steps.iter().map(|st| json!(st.id)).collect())
        .unwrap_or_default();
    out["trigger"] = trigger;
    out["inputs"] = inputs;
    out["created_at"] = created_at;
    out["finished_at"] = finished_at;
    out["retry_of"] = retry_of;
    out["file"] = file;
    out["steps"] = json!(step_tree(&rows));
    // What the run's model calls spent (steps a retry reused not counted).
    let own = rows
        .iter()
        .filter(|r| !r.reused)
        .filter_map(|r| r.usage.as_ref());
    if let Some(u) = crate::engine::Spend::total(own) {
        out["usage"] = json!(u);
    }
    out["logs"] = json!(logs);
    // What the console may offer: the top-level steps a retry can start
    // from (the served workflow's), and whether the run can be cancelled.
    let waiting = out["status"] == "waiting";
    out["retry_from"] = json!(if finished && !waiting && s.store.is_some() {
        retry_from
    } else {
        Vec::new()
    });
    // A waiting run is cancelled in the store, whoever started it.
    out["cancellable"] = json!((live.is_some() && !finished) || waiting);
    Json(out).into_response()
}

pub(in crate::serve) fn run_json(
    id: &str,
    workflow: &str,
    started: bool,
    result: Option<&RunResult>,
) -> Value {
    match result {
        None => {
            json!({"run_id": id, "workflow": workflow, "status": if started { "running" } else { "queued" }})
        }
        Some(r) => {
            let error = r.error.as_ref().map(|f| {
                json!({"message": f.message, "step": f.step_id, "file": f.file, "line": f.pos.map(|p| p.line), "column": f.pos.map(|p| p.col)})
            });
            json!({"run_id": id, "workflow": workflow, "status": r.status, "outputs": r.outputs, "error": error,
                   "duration_ms": r.duration_ms,
                   "steps": r.steps.iter().map(|s| json!({"id": s.id, "name": s.name, "status": s.status, "error": s.error, "duration_ms": s.duration_ms})).collect::<Vec<_>>()})
        }
    }
}
