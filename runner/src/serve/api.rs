//! The run API behind the console, usable on its own: runs listed with
//! filters and pages, one run with its steps, cancel, retry from a step,
//! the served workflows with their inputs, triggers and graph, and starting
//! a run. Guarded by [`ApiAccess`]: loopback only (Host and Origin checked)
//! unless a bearer token is configured.

use super::request::{bearer_matches, error, url_pairs};
use super::{reserve, start_reserved, Job, RunEntry, ServerState};
use crate::engine::{Event, RunEvent, RunResult};
use crate::format::graph::Graph;
use crate::format::inputs::{self, Supplied};
use crate::format::model::Workflow;
use crate::store::retry::RetryError;
use crate::store::{NewRun, RunFilter, RunRecord, Status, StepFold, StepRow};
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, request::Parts, HeaderMap, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Who may use the run API and the console.
#[derive(Clone, Debug, Default)]
pub struct ApiAccess {
    /// Requests must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// The server listens on a loopback address only.
    pub loopback: bool,
}

/// Why the run API refused a request (answered as `{"error": …}`).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(super) struct Refusal {
    status: StatusCode,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut r = error(self.status, self.message);
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        r
    }
}

/// Runs a page of `GET /runs` holds unless `limit` says otherwise, and the most.
const PAGE: usize = 50;
const MAX_PAGE: usize = 500;

/// Whether this request may use the run API: with a token, it must carry
/// it; without one, the server must be on loopback, the request addressed
/// to a loopback name (a DNS-rebinding page is not), and a state-changing
/// request must not come from another origin (a cross-site form is not).
pub(super) fn guard(s: &ServerState, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    if let Some(token) = &s.api.token {
        if bearer_matches(headers, token) {
            return Ok(());
        }
        return Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "missing or invalid bearer token",
        ));
    }
    if !s.api.loopback {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "the run API and the console are served to loopback only; start the server with `--api-token-env VAR` to serve them on this address",
        ));
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !is_loopback_host(host) {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            format!("requests to the run API must be addressed to localhost, not `{host}`"),
        ));
    }
    if method != Method::GET && method != Method::HEAD {
        if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
            let same = origin
                .split_once("://")
                .is_some_and(|(_, rest)| rest.eq_ignore_ascii_case(host));
            if !same {
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    format!("a request from `{origin}` cannot change runs"),
                ));
            }
        }
    }
    Ok(())
}

/// `localhost`, `127.0.0.1` or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    ["localhost", "127.0.0.1", "::1"].contains(&name.to_ascii_lowercase().as_str())
}

/// The served workflow with this id.
fn workflow(s: &ServerState, id: &str) -> Result<Arc<Workflow>, Refusal> {
    s.served()
        .workflows
        .iter()
        .find(|w| w.meta.id == id)
        .cloned()
        .ok_or_else(|| {
            Refusal::new(
                StatusCode::NOT_FOUND,
                format!("no workflow `{id}` is served"),
            )
        })
}

/// A trigger's fields as shown: credentials never leave the server.
fn shown_trigger(t: &crate::format::model::Trigger) -> Value {
    let mut fields = t.fields.clone();
    for (k, v) in fields.iter_mut() {
        let k = k.to_ascii_lowercase();
        if ["secret", "token", "password", "authorization", "headers"].contains(&k.as_str()) {
            *v = json!("(hidden)");
        }
    }
    json!({"type": t.kind, "config": fields, "line": t.pos.line})
}

fn inputs_json(wf: &Workflow) -> Vec<Value> {
    wf.inputs
        .iter()
        .map(|i| {
            json!({"name": i.name, "type": i.ty.name(), "required": i.required && i.default.is_none(),
                   "default": i.default, "description": i.description, "enum": i.allowed,
                   "min": i.min, "max": i.max, "pattern": i.pattern.as_ref().map(|p| p.as_str())})
        })
        .collect()
}

/// `GET /metrics`: Prometheus' text format (see [`super::metrics`]), with
/// the run API's access rules (a scraper sends the bearer token).
pub(super) async fn metrics(State(s): State<Arc<ServerState>>, parts: Parts) -> Response {
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    // The shared store's figures are read from the database: not here.
    let state = s.clone();
    let text = tokio::task::spawn_blocking(move || {
        state.metrics.render(state.load(), state.store.as_deref())
    })
    .await
    .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `GET /workflows`: every served workflow, with its inputs and webhook
/// route (`method`, `path`, `auth` of its first; null when it has none).
pub(super) async fn list_workflows(State(s): State<Arc<ServerState>>, parts: Parts) -> Response {
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    let served = s.served();
    let list: Vec<Value> = served
        .workflows
        .iter()
        .map(|wf| {
            let routes: Vec<Value> = served
                .routes
                .iter()
                .filter(|r| Arc::ptr_eq(&r.workflow, wf))
                .map(|r| json!({"method": r.method.as_str(), "path": r.path, "auth": r.secret.is_some() || r.token.is_some()}))
                .collect();
            let first = routes.first().cloned().unwrap_or(json!({}));
            json!({"workflow": wf.meta.id, "name": wf.meta.name, "description": wf.meta.description,
                   "file": wf.source.name, "inputs": inputs_json(wf),
                   "method": first.get("method"), "path": first.get("path"), "auth": first.get("auth"),
                   "routes": routes, "triggers": wf.triggers.iter().map(|t| t.kind.clone()).collect::<Vec<_>>(),
                   "steps": wf.steps.len()})
        })
        .collect();
    // Files `serve --watch` could not load: skipped, with their errors.
    let broken: Vec<Value> = served
        .broken
        .iter()
        .map(|d| json!({"file": d.file, "line": d.pos.map(|p| p.line), "column": d.pos.map(|p| p.col), "message": d.message}))
        .collect();
    Json(json!({"workflows": list, "broken": broken})).into_response()
}

/// `GET /workflows/{id}`: one workflow: inputs, outputs, triggers (without
/// credentials), top-level steps and its graph (Mermaid and SVG).
pub(super) async fn get_workflow(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    parts: Parts,
) -> Response {
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    let wf = match workflow(&s, &id) {
        Ok(w) => w,
        Err(r) => return r.into_response(),
    };
    let graph = Graph::of(&wf);
    let routes: Vec<Value> = s
        .served()
        .routes
        .iter()
        .filter(|r| Arc::ptr_eq(&r.workflow, &wf))
        .map(|r| json!({"method": r.method.as_str(), "path": r.path, "auth": r.secret.is_some() || r.token.is_some(), "async": r.respond_async}))
        .collect();
    let outputs: Vec<Value> = wf
        .outputs
        .iter()
        .map(|o| json!({"name": o.name, "type": o.ty}))
        .collect();
    let steps: Vec<Value> = wf
        .steps
        .iter()
        .map(|st| json!({"id": st.id, "name": st.display_name(), "line": st.pos.line}))
        .collect();
    Json(json!({
        "workflow": wf.meta.id, "name": wf.meta.name, "description": wf.meta.description,
        "version": wf.meta.version, "file": wf.source.name, "inputs": inputs_json(&wf),
        "outputs": outputs, "triggers": wf.triggers.iter().map(shown_trigger).collect::<Vec<_>>(),
        "routes": routes, "steps": steps,
        "graph": {"mermaid": graph.mermaid(), "svg": graph.svg()},
    }))
    .into_response()
}

/// `POST /workflows/{id}/runs`: starts a run with the body's inputs
/// (a JSON object), checked as on the command line; answers 202 at once.
pub(super) async fn start_workflow_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    req: Request<Body>,
) -> Response {
    let (parts, body) = req.into_parts();
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    let wf = match workflow(&s, &id) {
        Ok(w) => w,
        Err(r) => return r.into_response(),
    };
    let body = match super::request::read_body(&s, &parts.headers, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let given: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice(&body) {
            Ok(Value::Object(m)) => m,
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "the body must be a JSON object of input names to values",
                )
            }
        }
    };
    if let Some(unknown) = given.keys().find(|k| wf.input(k).is_none()) {
        return error(
            StatusCode::BAD_REQUEST,
            format!("`{id}` has no input `{unknown}`"),
        );
    }
    let supplied = given
        .into_iter()
        .map(|(k, v)| (k, Supplied::Json(v)))
        .collect();
    let inputs = match inputs::resolve(&wf, supplied, &s.caps.env) {
        Ok(i) => i,
        Err(errs) => return super::request::bad_inputs(&errs),
    };
    let place = match reserve(&s) {
        Ok(p) => p,
        Err(why) => return why.response(s.config.max_queue),
    };
    let run_id = crate::store::new_run_id();
    if let Some(store) = &s.store {
        let new = NewRun::new(run_id.clone(), &wf, inputs.clone(), "api");
        if let Err(e) = super::request::committed(store.submit_run(new)).await {
            return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
        }
    }
    start_reserved(
        &s,
        wf,
        Job::Recorded(inputs, "api", json!({"type": "api"})),
        run_id.clone(),
        place,
    );
    accepted(&run_id, json!({}))
}

fn accepted(run_id: &str, extra: Value) -> Response {
    let mut body =
        json!({"run_id": run_id, "status": "accepted", "location": format!("/runs/{run_id}")});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

/// `GET /runs`: runs newest first, filtered by `workflow`, `status`,
/// `trigger`, `since` and `until` (an age such as `24h`, a date, or epoch
/// milliseconds), paged by `limit` and `offset`.
pub(super) async fn list_runs(State(s): State<Arc<ServerState>>, parts: Parts) -> Response {
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
fn enc(s: &str) -> String {
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
fn run_filter(query: &[(String, String)]) -> Result<RunFilter, String> {
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
                f.status = Some(Status::parse(v).ok_or_else(|| {
                    format!("`status={v}`: use queued, running, completed, failed, cancelled or interrupted")
                })?)
            }
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
fn time_of(v: &str) -> Result<i64, String> {
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

/// A stored run as a list shows it.
fn record_summary(r: &RunRecord) -> Value {
    json!({"run_id": r.id, "workflow": r.workflow, "status": r.shown_status(), "trigger": r.trigger,
           "created_at": r.created_at, "finished_at": r.finished_at, "duration_ms": r.duration_ms,
           "retry_of": r.retry_of, "error": r.error})
}

fn entry_status(e: &RunEntry) -> (String, Option<Arc<RunResult>>) {
    let result = e.result.borrow().clone();
    let status = match &result {
        Some(r) => serde_json::to_value(r.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        None if e.started.load(Ordering::SeqCst) => "running".into(),
        None => "queued".into(),
    };
    (status, result)
}

/// The runs this server keeps in memory (`--no-store`), as a page.
fn memory_runs(s: &ServerState, f: &RunFilter) -> (Vec<Value>, usize) {
    let (Ok(runs), Ok(order)) = (s.runs.lock(), s.order.lock()) else {
        return (Vec::new(), 0);
    };
    let matching: Vec<Value> = order
        .iter()
        .rev()
        .filter_map(|id| runs.get(id).map(|e| (id, e)))
        .filter_map(|(id, e)| {
            let (status, result) = entry_status(e);
            let keep = f.workflow.as_ref().is_none_or(|w| *w == e.workflow)
                && f.trigger.as_ref().is_none_or(|t| *t == e.trigger)
                && f.status.is_none_or(|st| st.as_str() == status)
                && f.since.is_none_or(|t| e.created_at >= t)
                && f.until.is_none_or(|t| e.created_at < t);
            keep.then(|| {
                json!({"run_id": id, "workflow": e.workflow, "status": status, "trigger": e.trigger,
                       "created_at": e.created_at, "duration_ms": result.as_ref().map(|r| r.duration_ms),
                       "error": result.as_ref().and_then(|r| r.error.as_ref().map(|f| f.message.clone()))})
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
struct StepView {
    id: String,
    name: String,
    depth: usize,
    status: &'static str,
    attempts: u32,
    started_at: Option<i64>,
    duration_ms: Option<u64>,
    output: Value,
    error: Option<String>,
    reused: bool,
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
        }
    }
}

/// The steps a run's events tell of, in the order they ended; steps still
/// going come last, innermost first (so they gather the steps inside them).
fn steps_of_events(events: &[Event]) -> Vec<StepView> {
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
    }));
    steps
}

/// Steps in the order they ended (children before their parent) as a
/// tree: each step holds the steps inside it; a step that ran more than
/// once under one parent (a loop's body) is numbered by `iteration`.
fn step_tree(rows: &[StepView]) -> Vec<Value> {
    let mut pending: Vec<Vec<Value>> = Vec::new();
    for r in rows {
        while pending.len() <= r.depth + 1 {
            pending.push(Vec::new());
        }
        let mut children = std::mem::take(&mut pending[r.depth + 1]);
        number_iterations(&mut children);
        let node = json!({"id": r.id, "name": r.name, "depth": r.depth, "status": r.status,
                          "attempts": r.attempts, "started_at": r.started_at, "duration_ms": r.duration_ms,
                          "output": r.output, "error": r.error, "reused": r.reused, "children": children});
        pending[r.depth].push(node);
    }
    // Steps whose parent is not listed (it is still going) stay at their level.
    let mut roots = Vec::new();
    for level in pending {
        roots.extend(level);
    }
    roots
}

fn number_iterations(children: &mut [Value]) {
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
fn error_place(
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
pub(super) async fn get_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    parts: Parts,
) -> Response {
    // Inputs, every step's output and logs are for the API's users; a
    // caller holding only the run id sees what the webhook answers.
    let detail = guard(&s, &parts.method, &parts.headers).is_ok();
    // The table's lock is held only to look the run up, never during a
    // store read.
    let live = match s.runs.lock() {
        Ok(runs) => runs.get(&id).map(|e| {
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
        // Status, outputs and error: what the docs promise a run id holder.
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
    out["logs"] = json!(logs);
    // What the console may offer: the top-level steps a retry can start
    // from (the served workflow's), and whether the run can be cancelled.
    out["retry_from"] = json!(if finished && s.store.is_some() {
        retry_from
    } else {
        Vec::new()
    });
    out["cancellable"] = json!(live.is_some() && !finished);
    Json(out).into_response()
}

pub(super) fn run_json(
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

/// `POST /runs/{id}/cancel`: a queued or running run of this server stops
/// at its next step (a queued one never starts); an interrupted run (its
/// server gone) is marked cancelled.
pub(super) async fn cancel_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    parts: Parts,
) -> Response {
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    let live = s
        .runs
        .lock()
        .ok()
        .and_then(|runs| runs.get(&id).map(|e| (e.cancel.clone(), entry_status(e).0)));
    match live {
        Some((_, status)) if !["queued", "running"].contains(&status.as_str()) => error(
            StatusCode::CONFLICT,
            format!("run `{id}` has already ended ({status})"),
        ),
        Some((cancel, _)) => {
            cancel.cancel();
            (
                StatusCode::ACCEPTED,
                Json(json!({"run_id": id, "status": "cancelling", "location": format!("/runs/{id}")})),
            )
                .into_response()
        }
        None => {
            let Some(store) = s.store.clone() else {
                return error(StatusCode::NOT_FOUND, format!("no run `{id}`"));
            };
            let found = {
                let id = id.clone();
                tokio::task::spawn_blocking(move || store.get_run(&id)).await
            };
            match found {
                Ok(Ok(r)) if r.id == id && r.is_interrupted() => {
                    let Some(store) = s.store.clone() else {
                        return error(StatusCode::NOT_FOUND, format!("no run `{id}`"));
                    };
                    store.finish_run(
                        &id,
                        crate::store::RunEnd {
                            status: Status::Cancelled,
                            outputs: Value::Null,
                            error: Some("cancelled after its server stopped".into()),
                            error_step: None,
                            duration_ms: r.duration_ms.unwrap_or(0),
                        },
                    );
                    match super::request::committed(store.submit_flush()).await {
                        Ok(()) => {
                            Json(json!({"run_id": id, "status": "cancelled"})).into_response()
                        }
                        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                    }
                }
                Ok(Ok(r)) if r.id == id && r.status.is_finished() => error(
                    StatusCode::CONFLICT,
                    format!("run `{id}` has already ended ({})", r.status.as_str()),
                ),
                Ok(Ok(r)) if r.id == id => error(
                    StatusCode::CONFLICT,
                    format!("run `{id}` belongs to another server process; cancel it there"),
                ),
                _ => error(StatusCode::NOT_FOUND, format!("no run `{id}`")),
            }
        }
    }
}

/// `POST /runs/{id}/retry?from=STEP`: a new run with the same inputs that
/// reuses the steps before `STEP` (default: every step that completed).
pub(super) async fn retry_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    parts: Parts,
) -> Response {
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    let Some(store) = s.store.clone() else {
        return error(
            StatusCode::CONFLICT,
            "retries need the run store; this server runs with `--no-store`",
        );
    };
    let query = parts.uri.query().map(url_pairs).unwrap_or_default();
    let from = query
        .iter()
        .find(|(k, v)| k == "from" && !v.is_empty())
        .map(|(_, v)| v.clone());
    // After an edit: steps matched by id (as `retry --force`).
    let force = query
        .iter()
        .any(|(k, v)| k == "force" && (v == "true" || v == "1"));
    let run = {
        let (store, want) = (store.clone(), id.clone());
        match tokio::task::spawn_blocking(move || store.get_run(&want)).await {
            Ok(Ok(r)) => r,
            Ok(Err(crate::store::StoreError::NotFound(_))) | Err(_) => {
                return error(StatusCode::NOT_FOUND, format!("no run `{id}`"))
            }
            Ok(Err(e)) => return error(StatusCode::BAD_REQUEST, e.to_string()),
        }
    };
    let Some(wf) = s.workflow_at(std::path::Path::new(&run.file)) else {
        return error(
            StatusCode::CONFLICT,
            format!(
                "this server does not serve `{}`, the workflow of run `{}`",
                run.file, run.id
            ),
        );
    };
    let plan = {
        let (store, run, wf, from) = (store.clone(), run.clone(), wf.clone(), from.clone());
        tokio::task::spawn_blocking(move || {
            if force {
                crate::store::retry::plan_forced(store.as_ref(), &run, &wf, from.as_deref())
                    .map(|(plan, _)| plan)
            } else {
                crate::store::retry::plan(store.as_ref(), &run, &wf, from.as_deref())
            }
        })
        .await
    };
    let plan = match plan {
        Ok(Ok(p)) => p,
        Ok(Err(e @ (RetryError::NoSuchStep { .. } | RetryError::NewStep { .. }))) => {
            return error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Ok(Err(RetryError::Store(e))) => {
            return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
        Ok(Err(e)) => return error(StatusCode::CONFLICT, e.to_string()),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let place = match reserve(&s) {
        Ok(p) => p,
        Err(why) => return why.response(s.config.max_queue),
    };
    let run_id = crate::store::new_run_id();
    let mut new = NewRun::new(run_id.clone(), &wf, plan.inputs.clone(), "retry");
    new.retry_of = Some((plan.of.clone(), plan.reused));
    if let Err(e) = super::request::committed(store.submit_run(new)).await {
        return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    }
    let reused = plan.reused;
    start_reserved(
        &s,
        wf.clone(),
        Job::Retry(plan.inputs, Box::new(plan.checkpoint)),
        run_id.clone(),
        place,
    );
    let from_step = wf.steps.get(reused).map(|st| st.id.clone());
    accepted(
        &run_id,
        json!({"retry_of": run.id, "from": from_step, "reused_steps": reused}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:80",
            "[::1]",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "evil.com",
            "evil.com:8080",
            "127.0.0.2",
            "",
            "localhost.evil.com",
            "[::2]:80",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn queries_become_filters() {
        let q = |s: &str| run_filter(&url_pairs(s));
        let f = q("workflow=w&status=failed&trigger=api&limit=9999&offset=5").unwrap();
        assert_eq!(f.workflow.as_deref(), Some("w"));
        assert_eq!(f.status, Some(Status::Failed));
        assert_eq!(f.trigger.as_deref(), Some("api"));
        assert_eq!((f.limit, f.offset), (Some(MAX_PAGE), 5));
        assert_eq!(
            q("since=2026-11-24").unwrap().since,
            Some(1_795_478_400_000)
        );
        assert!(q("since=1h").unwrap().since.unwrap() > crate::store::now_ms() - 3_700_000);
        assert!(q("status=lost").unwrap_err().contains("status=lost"));
        assert!(q("since=yesterday-ish").is_err());
        assert!(q("limit=x").is_err());
        // Absurd ages and numbers are answered, never overflowed.
        assert!(q("since=99999999999999999w").is_err(), "beyond 100 years");
        assert!(q("since=5200w").is_ok());
        assert!(q("until=-9223372036854775808").is_ok());
    }

    #[test]
    fn children_sit_under_their_parent_and_iterations_are_numbered() {
        let row = |id: &str, depth| StepView {
            id: id.into(),
            name: id.into(),
            depth,
            status: "completed",
            attempts: 1,
            started_at: None,
            duration_ms: None,
            output: Value::Null,
            error: None,
            reused: false,
        };
        // A loop's body ends before the loop; two iterations of `body`.
        let rows = [row("a", 0), row("body", 1), row("body", 1), row("loop", 0)];
        let tree = step_tree(&rows);
        assert_eq!(tree.len(), 2);
        assert_eq!(tree[1]["id"], "loop");
        let kids = tree[1]["children"].as_array().unwrap();
        assert_eq!(kids.len(), 2);
        assert_eq!(
            (kids[0]["iteration"].clone(), kids[1]["iteration"].clone()),
            (json!(1), json!(2))
        );
        assert!(tree[0].get("iteration").is_none());
    }
}
