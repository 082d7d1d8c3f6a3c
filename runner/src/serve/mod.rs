//! `marktoflow serve`: webhook triggers over HTTP, a thin layer over the engine.
//!
//! Routes come from each workflow's `webhook` triggers. A request's JSON body
//! (and query string) supply inputs by name, converted and checked exactly as
//! on the command line. Runs are synchronous by default; `Prefer:
//! respond-async`, `?async=true` or `response: async` on the trigger answer
//! 202 at once. Request data never widens the sandbox: its roots are fixed
//! when the server starts.

pub mod cron;
pub mod file_watch;

use crate::diag::Diagnostic;
use crate::engine::{
    Engine, Event, EventSink, RunConfig, RunEvent, RunResult, RunStatus, WorkflowLoader,
};
use crate::format::inputs::{self, Supplied};
use crate::format::model::Workflow;
use crate::store::{NewRun, RunRecord, RunStore};
use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hmac::{Hmac, Mac};
use marktoflow_steps::core::action::{Cancel, Capabilities};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Semaphore};

/// One webhook route.
#[derive(Clone)]
pub struct Route {
    pub path: String,
    pub method: Method,
    pub workflow: Arc<Workflow>,
    /// HMAC-SHA256 secret (`X-Hub-Signature-256: sha256=<hex>`).
    pub secret: Option<String>,
    /// A bearer token the request must present (`Authorization: Bearer …`).
    pub token: Option<String>,
    /// `inputMapping`: input name → dotted path into the body.
    pub input_mapping: Vec<(String, String)>,
    pub respond_async: bool,
}

/// Server settings fixed at start.
pub struct ServeConfig {
    pub max_body: usize,
    pub request_timeout: Duration,
    /// Runs executing at once, over all workflows.
    pub max_concurrent: usize,
    /// Runs of one workflow executing at once (a trigger's `max_concurrent:` may lower it).
    pub max_concurrent_per_workflow: usize,
    /// Runs waiting for a slot; beyond it requests get 503.
    pub max_queue: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            max_body: 1024 * 1024,
            request_timeout: Duration::from_secs(300),
            max_concurrent: 64,
            max_concurrent_per_workflow: 16,
            max_queue: 1000,
        }
    }
}

/// A run the server knows about.
struct RunEntry {
    workflow: String,
    result: watch::Receiver<Option<Arc<RunResult>>>,
    events: Arc<Mutex<Vec<Event>>>,
    /// False while the run waits for a concurrency slot.
    started: Arc<AtomicBool>,
    cancel: Cancel,
}

/// Counts run tasks so shutdown can wait for them.
#[derive(Default)]
struct Active {
    count: AtomicUsize,
    idle: tokio::sync::Notify,
}

struct ActiveGuard(Arc<ServerState>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        if self.0.active.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.active.idle.notify_waiters();
        }
    }
}

pub struct ServerState {
    pub engine: Engine,
    pub routes: Vec<Route>,
    pub caps: Capabilities,
    pub loader: Arc<dyn WorkflowLoader>,
    pub config: ServeConfig,
    runs: Mutex<HashMap<String, RunEntry>>,
    /// Run ids oldest first, to forget finished runs past `MAX_RUNS_KEPT`.
    order: Mutex<std::collections::VecDeque<String>>,
    /// `Idempotency-Key` (with the route) → the run it started.
    idempotency: Mutex<HashMap<String, String>>,
    global_slots: Arc<Semaphore>,
    /// Per workflow file: its slots.
    workflow_slots: Mutex<HashMap<PathBuf, Arc<Semaphore>>>,
    queued: AtomicUsize,
    /// Runs holding their slots.
    running: AtomicUsize,
    active: Active,
    /// Set when shutdown begins: no new runs, queued runs stay unstarted.
    stopping: Cancel,
    /// Where runs are recorded (None: `--no-store`).
    pub store: Option<Arc<dyn RunStore>>,
}

/// Finished runs kept in memory for `GET /runs/{id}`.
const MAX_RUNS_KEPT: usize = 10_000;

impl ServerState {
    pub fn new(
        routes: Vec<Route>,
        caps: Capabilities,
        loader: Arc<dyn WorkflowLoader>,
        config: ServeConfig,
    ) -> Self {
        ServerState {
            engine: Engine::new(),
            global_slots: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            routes,
            caps,
            loader,
            config,
            runs: Mutex::new(HashMap::new()),
            order: Mutex::new(std::collections::VecDeque::new()),
            idempotency: Mutex::new(HashMap::new()),
            workflow_slots: Mutex::new(HashMap::new()),
            queued: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            active: Active::default(),
            stopping: Cancel::default(),
            store: None,
        }
    }

    /// Records runs in `store`.
    pub fn with_store(mut self, store: Option<Arc<dyn RunStore>>) -> Self {
        self.store = store;
        self
    }

    /// The slots of one workflow: the smallest `max_concurrent:` of its
    /// triggers, else the server's per-workflow limit.
    fn slots_for(&self, wf: &Workflow) -> Arc<Semaphore> {
        let mut map = self
            .workflow_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.entry(wf.source.path.clone())
            .or_insert_with(|| {
                let limit = wf
                    .triggers
                    .iter()
                    .filter_map(|t| t.fields.get("max_concurrent").and_then(Value::as_u64))
                    .min()
                    .map(|n| n as usize)
                    .unwrap_or(self.config.max_concurrent_per_workflow);
                Arc::new(Semaphore::new(limit.max(1)))
            })
            .clone()
    }

    /// Runs waiting for a slot, and runs executing.
    pub fn load(&self) -> (usize, usize) {
        (
            self.queued.load(Ordering::SeqCst),
            self.running.load(Ordering::SeqCst),
        )
    }

    /// Begins shutdown: no new runs start, queued runs are left unstarted.
    /// Waits up to `grace` for executing runs, then cancels the rest and
    /// waits for them to record their end.
    pub async fn drain(&self, grace: Duration) {
        self.stopping.cancel();
        if !self.wait_idle(grace).await {
            if let Ok(runs) = self.runs.lock() {
                for e in runs.values() {
                    e.cancel.cancel();
                }
            }
            self.wait_idle(Duration::from_secs(10)).await;
        }
    }

    /// True when every run task ended within `limit`.
    async fn wait_idle(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            loop {
                let idle = self.active.idle.notified();
                if self.active.count.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await
        .is_ok()
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }
}

/// The routes of every workflow's webhook triggers; duplicates are errors
/// naming both files.
pub fn routes_of(
    workflows: &[Arc<Workflow>],
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<Route>, Vec<Diagnostic>> {
    let mut routes: Vec<Route> = Vec::new();
    let mut errors = Vec::new();
    for wf in workflows {
        for t in wf.triggers.iter().filter(|t| t.kind == "webhook") {
            if t.fields.get("enabled") == Some(&Value::Bool(false)) {
                continue;
            }
            let f = |k: &str| t.fields.get(k).and_then(Value::as_str).map(str::to_string);
            let Some(path) = f("path") else {
                errors.push(Diagnostic::error(
                    &wf.source,
                    Some(t.pos),
                    "a webhook trigger needs `path:` (e.g. `/hooks/my-workflow`)",
                ));
                continue;
            };
            let path = if path.starts_with('/') {
                path
            } else {
                format!("/{path}")
            };
            if let Some(bad) = path
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || "/-_.~:@!$&'()*+,;=%".contains(*c)))
            {
                errors.push(
                    Diagnostic::error(
                        &wf.source,
                        Some(t.pos),
                        format!(
                            "invalid webhook `path:` `{path}`: `{bad}` cannot stand in a URL path"
                        ),
                    )
                    .with_hint("use letters, digits and `/-_.~`, e.g. `/hooks/my-workflow`"),
                );
                continue;
            }
            let method = match Method::from_bytes(
                f("method")
                    .unwrap_or_else(|| "POST".into())
                    .to_ascii_uppercase()
                    .as_bytes(),
            ) {
                Ok(m) => m,
                Err(_) => {
                    errors.push(Diagnostic::error(
                        &wf.source,
                        Some(t.pos),
                        "invalid `method:` for the webhook trigger",
                    ));
                    continue;
                }
            };
            if let Some(other) = routes.iter().find(|r| r.path == path && r.method == method) {
                errors.push(
                    Diagnostic::error(
                        &wf.source,
                        Some(t.pos),
                        format!(
                            "route `{method} {path}` is already served by `{}`",
                            other.workflow.source.name
                        ),
                    )
                    .with_hint("give one of the webhook triggers another `path:`"),
                );
                continue;
            }
            let sub = |v: Option<String>| {
                v.map(|s| match inputs::substitute_env(&Value::String(s), env) {
                    Value::String(s) => s,
                    _ => String::new(),
                })
                .filter(|s| !s.is_empty())
            };
            // A trigger that asks for authentication and cannot have it is
            // refused: never served open by accident.
            let secret = match f("secret") {
                None => None,
                Some(raw) => match sub(Some(raw.clone())) {
                    Some(s) => Some(s),
                    None => {
                        let vars = env_names(&raw);
                        let unset: Vec<String> = vars
                            .iter()
                            .filter(|v| env.get(*v).is_none_or(|x| x.is_empty()))
                            .map(|v| format!("`{v}`"))
                            .collect();
                        errors.push(
                            Diagnostic::error(
                                &wf.source,
                                Some(t.pos),
                                if unset.is_empty() {
                                    "the webhook's `secret` is empty".to_string()
                                } else {
                                    format!(
                                        "the webhook's `secret` is empty: {} is not set",
                                        unset.join(", ")
                                    )
                                },
                            )
                            .with_hint("set the variable (or put it in `.env`); the route is not served without its secret"),
                        );
                        continue;
                    }
                },
            };
            let token = match f("token_env") {
                None => None,
                Some(var) => match env.get(&var).filter(|s| !s.is_empty()) {
                    Some(v) => Some(v.clone()),
                    None => {
                        errors.push(
                            Diagnostic::error(
                                &wf.source,
                                Some(t.pos),
                                format!("the webhook's `token_env` names `{var}`, which is not set"),
                            )
                            .with_hint("set the variable (or put it in `.env`); the route is not served without its token"),
                        );
                        continue;
                    }
                },
            };
            let input_mapping = match t
                .fields
                .get("inputMapping")
                .or_else(|| t.fields.get("input_mapping"))
            {
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect(),
                _ => Vec::new(),
            };
            routes.push(Route {
                path,
                method,
                workflow: wf.clone(),
                secret,
                token,
                input_mapping,
                respond_async: f("response").as_deref() == Some("async"),
            });
        }
    }
    if errors.is_empty() {
        Ok(routes)
    } else {
        Err(errors)
    }
}

/// The variable names a `${NAME}` / `${NAME:-default}` text refers to.
fn env_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        rest = &rest[i + 2..];
        let end = rest.find('}').unwrap_or(rest.len());
        let name = rest[..end].split(":-").next().unwrap_or("").trim();
        if !name.is_empty() {
            out.push(name.to_string());
        }
        rest = &rest[end..];
    }
    out
}

pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/workflows", get(list_workflows))
        .route("/runs/{id}", get(get_run))
        .route("/runs/{id}/events", get(get_events))
        .fallback(webhook)
        .with_state(state)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

async fn health(State(s): State<Arc<ServerState>>) -> Response {
    let (queued, running) = s.load();
    let status = if s.is_stopping() { "stopping" } else { "ok" };
    let code = if s.is_stopping() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (
        code,
        Json(json!({"status": status, "workflows": s.routes.len(), "running": running, "queued": queued})),
    )
        .into_response()
}

async fn list_workflows(State(s): State<Arc<ServerState>>) -> Response {
    let list: Vec<Value> = s
        .routes
        .iter()
        .map(|r| {
            let inputs: Vec<Value> = r
                .workflow
                .inputs
                .iter()
                .map(|i| json!({"name": i.name, "type": i.ty.name(), "required": i.required && i.default.is_none(), "default": i.default, "description": i.description}))
                .collect();
            json!({"workflow": r.workflow.meta.id, "name": r.workflow.meta.name, "method": r.method.as_str(), "path": r.path,
                   "file": r.workflow.source.name, "inputs": inputs, "auth": r.secret.is_some() || r.token.is_some()})
        })
        .collect();
    Json(json!({"workflows": list})).into_response()
}

fn run_json(id: &str, workflow: &str, started: bool, result: Option<&RunResult>) -> Value {
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

async fn get_run(State(s): State<Arc<ServerState>>, UrlPath(id): UrlPath<String>) -> Response {
    let runs = match s.runs.lock() {
        Ok(r) => r,
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "run table unavailable"),
    };
    match runs.get(&id) {
        Some(e) => Json(run_json(
            &id,
            &e.workflow,
            e.started.load(Ordering::SeqCst),
            e.result.borrow().as_deref(),
        ))
        .into_response(),
        // Older runs, and runs of earlier server processes, are in the store.
        None => match s.store.as_ref().map(|st| st.get_run(&id)) {
            Some(Ok(r)) if r.id == id => Json(json!({
                "run_id": r.id, "workflow": r.workflow, "status": r.shown_status(),
                "outputs": r.outputs, "error": r.error.map(|m| json!({"message": m, "step": r.error_step})),
                "duration_ms": r.duration_ms,
            }))
            .into_response(),
            _ => error(StatusCode::NOT_FOUND, format!("no run `{id}`")),
        },
    }
}

/// The run's events so far, as Server-Sent Events (the stream ends with the run).
async fn get_events(State(s): State<Arc<ServerState>>, UrlPath(id): UrlPath<String>) -> Response {
    let (events, done) = {
        let runs = match s.runs.lock() {
            Ok(r) => r,
            Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "run table unavailable"),
        };
        match runs.get(&id) {
            Some(e) => (e.events.clone(), e.result.clone()),
            None => return error(StatusCode::NOT_FOUND, format!("no run `{id}`")),
        }
    };
    let stream = futures_util::stream::unfold((0usize, false), move |(sent, finished)| {
        let events = events.clone();
        let mut done = done.clone();
        async move {
            loop {
                let batch: Vec<Event> = events
                    .lock()
                    .map(|e| e[sent.min(e.len())..].to_vec())
                    .unwrap_or_default();
                if !batch.is_empty() {
                    let text: String = batch
                        .iter()
                        .map(|e| {
                            format!("data: {}\n\n", serde_json::to_string(e).unwrap_or_default())
                        })
                        .collect();
                    return Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from(text)),
                        (sent + batch.len(), finished),
                    ));
                }
                if finished || done.borrow().is_some() {
                    if finished {
                        return None;
                    }
                    // One more pass picks up events written just before the end.
                    return Some((Ok(Bytes::new()), (sent, true)));
                }
                let _ = tokio::time::timeout(Duration::from_millis(200), done.changed()).await;
            }
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "cannot stream"))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks `X-Hub-Signature-256: sha256=<hex>` (or `X-Signature: <hex>`) of the raw body.
fn signature_ok(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    let given = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("sha256="))
        .or_else(|| headers.get("x-signature").and_then(|v| v.to_str().ok()));
    let Some(given) = given else { return false };
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    let expected = hex(&mac.finalize().into_bytes());
    constant_time_eq(
        expected.as_bytes(),
        given.trim().to_ascii_lowercase().as_bytes(),
    )
}

fn dotted<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    let path = path
        .strip_prefix("payload.")
        .or_else(|| path.strip_prefix("body."))
        .unwrap_or(path);
    path.split('.')
        .filter(|s| !s.is_empty())
        .try_fold(v, |cur, seg| match cur {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        })
}

async fn webhook(State(s): State<Arc<ServerState>>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let same_path: Vec<&Route> = s.routes.iter().filter(|r| r.path == path).collect();
    if same_path.is_empty() {
        return error(
            StatusCode::NOT_FOUND,
            format!("no workflow is served at `{path}`"),
        );
    }
    let Some(route) = same_path.iter().find(|r| r.method == parts.method).copied() else {
        let allow: Vec<&str> = same_path.iter().map(|r| r.method.as_str()).collect();
        let mut resp = error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("`{path}` accepts {}", allow.join(", ")),
        );
        if let Ok(v) = allow.join(", ").parse() {
            resp.headers_mut().insert(header::ALLOW, v);
        }
        return resp;
    };
    let body = match to_bytes(body, s.config.max_body).await {
        Ok(b) => b,
        Err(_) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {} bytes", s.config.max_body),
            )
        }
    };
    if let Some(secret) = &route.secret {
        if !signature_ok(secret, &parts.headers, &body) {
            return error(
                StatusCode::UNAUTHORIZED,
                "missing or invalid signature (X-Hub-Signature-256: sha256=<hmac of the body>)",
            );
        }
    }
    if let Some(token) = &route.token {
        let given = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), token.as_bytes()) {
            return error(StatusCode::UNAUTHORIZED, "missing or invalid bearer token");
        }
    }
    let payload: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Map::new())
    } else {
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "the body must be a JSON object of input names to values",
                )
            }
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("the body is not valid JSON: {e}"),
                )
            }
        }
    };
    let wf = route.workflow.clone();
    let query: Vec<(String, String)> = parts.uri.query().map(url_pairs).unwrap_or_default();
    let want_async = route.respond_async
        || query
            .iter()
            .any(|(k, v)| k == "async" && (v == "true" || v == "1"))
        || parts
            .headers
            .get("prefer")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("respond-async"));
    // Inputs: query string, then body fields by name, then inputMapping.
    let mut supplied: Vec<(String, Supplied)> = Vec::new();
    let mut put = |name: &str, v: Supplied| {
        supplied.retain(|(n, _)| n != name);
        supplied.push((name.to_string(), v));
    };
    for def in &wf.inputs {
        if let Some((_, v)) = query.iter().rev().find(|(k, _)| *k == def.name) {
            put(&def.name, Supplied::Text(v.clone()));
        }
        if let Some(v) = payload.get(&def.name) {
            put(&def.name, Supplied::Json(v.clone()));
        }
    }
    for (name, path) in &route.input_mapping {
        if let Some(v) = dotted(&payload, path) {
            put(name, Supplied::Json(v.clone()));
        }
    }
    if wf.inputs.is_empty() {
        put("payload", Supplied::Json(payload.clone()));
    }
    let inputs = match inputs::resolve(&wf, supplied, &s.caps.env) {
        Ok(i) => i,
        Err(errs) => {
            let fields: Vec<Value> = errs
                .iter()
                .map(|e| json!({"input": e.name, "message": e.message, "hint": e.hint}))
                .collect();
            let msg = errs
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ");
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": msg, "fields": fields})),
            )
                .into_response();
        }
    };
    // A repeated request with the same Idempotency-Key gets the same run.
    let key = parts
        .headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| format!("{} {} {k}", route.method, route.path));
    let existing = key.as_ref().and_then(|k| {
        let known = s.idempotency.lock().ok()?.get(k).cloned()?;
        let runs = s.runs.lock().ok()?;
        runs.get(&known).map(|e| (known.clone(), e.result.clone()))
    });
    let (run_id, rx) = match existing {
        Some(found) => found,
        None => {
            let run_id = uuid::Uuid::new_v4().to_string();
            if s.is_stopping() {
                return Refused::ShuttingDown.response(s.config.max_queue);
            }
            // Committed before anyone hears of the run: a crash after the
            // answer cannot lose it.
            if let Some(store) = &s.store {
                let new = NewRun::new(run_id.clone(), &wf, inputs.clone(), "webhook");
                match store.submit_run(new).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                    Err(_) => {
                        return error(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "the run store has stopped",
                        )
                    }
                }
            }
            let rx = match start_run(&s, wf.clone(), Job::Recorded(inputs), run_id.clone()) {
                Ok(rx) => rx,
                Err(why) => return why.response(s.config.max_queue),
            };
            if let (Some(k), Ok(mut map)) = (key, s.idempotency.lock()) {
                if map.len() >= MAX_RUNS_KEPT {
                    map.clear();
                }
                map.insert(k, run_id.clone());
            }
            (run_id, rx)
        }
    };
    if want_async {
        return (StatusCode::ACCEPTED, Json(json!({"run_id": run_id, "status": "accepted", "location": format!("/runs/{run_id}")}))).into_response();
    }
    let mut rx = rx;
    let waited = tokio::time::timeout(s.config.request_timeout, async {
        loop {
            if let Some(r) = rx.borrow().clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                // The run task ended without a result: it panicked.
                return Arc::new(RunResult {
                    run_id: run_id.clone(),
                    workflow: wf.meta.id.clone(),
                    status: RunStatus::Failed,
                    outputs: Value::Null,
                    steps: Vec::new(),
                    error: None,
                    duration_ms: 0,
                });
            }
        }
    })
    .await;
    match waited {
        Ok(r) => {
            let status = if r.status == RunStatus::Completed { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR };
            (status, Json(run_json(&run_id, &wf.meta.id, true, Some(&r)))).into_response()
        }
        Err(_) => (
            StatusCode::GATEWAY_TIMEOUT,
            Json(json!({"run_id": run_id, "status": "running", "error": format!("the run is still going after {}s; poll /runs/{run_id}", s.config.request_timeout.as_secs())})),
        )
            .into_response(),
    }
}

fn url_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why the server would not take a run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the server is shutting down")]
    ShuttingDown,
    #[error("the run queue is full")]
    QueueFull,
}

impl Refused {
    fn response(self, max_queue: usize) -> Response {
        let msg = match self {
            Refused::ShuttingDown => self.to_string(),
            Refused::QueueFull => {
                format!("{max_queue} runs are already waiting; try again shortly")
            }
        };
        let mut resp = error(StatusCode::SERVICE_UNAVAILABLE, msg);
        resp.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        resp
    }
}

/// What a background run does.
pub enum Job {
    /// A new run, recorded when it starts (`trigger` says by what).
    New(Map<String, Value>, &'static str),
    /// A new run already committed to the store.
    Recorded(Map<String, Value>),
    /// A stored run that did not finish, continued from its checkpoint.
    Resume(Box<RunRecord>),
}

/// Starts a run in the background; its result arrives on the receiver. The
/// run waits for a slot of its workflow and a global slot (workflow first, so
/// one busy workflow queues behind its own limit without holding global slots).
fn start_run(
    s: &Arc<ServerState>,
    wf: Arc<Workflow>,
    job: Job,
    run_id: String,
) -> Result<watch::Receiver<Option<Arc<RunResult>>>, Refused> {
    if s.is_stopping() {
        return Err(Refused::ShuttingDown);
    }
    // Reserve a queue place; the reservation ends when the run gets its slots.
    if s.queued.fetch_add(1, Ordering::SeqCst) >= s.config.max_queue {
        s.queued.fetch_sub(1, Ordering::SeqCst);
        return Err(Refused::QueueFull);
    }
    s.active.count.fetch_add(1, Ordering::SeqCst);
    let (tx, rx) = watch::channel(None);
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let started = Arc::new(AtomicBool::new(false));
    let cancel = Cancel::default();
    if let (Ok(mut runs), Ok(mut order)) = (s.runs.lock(), s.order.lock()) {
        runs.insert(
            run_id.clone(),
            RunEntry {
                workflow: wf.meta.id.clone(),
                result: rx.clone(),
                events: events.clone(),
                started: started.clone(),
                cancel: cancel.clone(),
            },
        );
        order.push_back(run_id.clone());
        // Forget the oldest finished runs; unfinished ones stay until they end.
        let mut scanned = 0;
        while runs.len() > MAX_RUNS_KEPT && scanned < order.len() {
            let Some(old) = order.pop_front() else { break };
            if runs.get(&old).is_some_and(|e| e.result.borrow().is_none()) {
                order.push_back(old);
                scanned += 1;
            } else {
                runs.remove(&old);
            }
        }
    }
    let mut caps = s.caps.clone();
    caps.cancel = cancel;
    let sink_events = events.clone();
    let sink: EventSink = Arc::new(move |e: &Event| {
        // Checkpoints are for the store; streams and memory do without them.
        if matches!(e.kind, RunEvent::Checkpoint(_)) {
            return;
        }
        if let Ok(mut v) = sink_events.lock() {
            v.push(e.clone());
        }
    });
    let cfg = RunConfig {
        run_id: run_id.clone(),
        caps,
        events: sink,
        loader: Some(s.loader.clone()),
        callers: Vec::new(),
    };
    let state = s.clone();
    let wf_slots = s.slots_for(&wf);
    tokio::spawn(async move {
        let _active = ActiveGuard(state.clone());
        let store = state.store.clone();
        // Scheduled and watched runs are committed here, before they wait.
        if let (Some(store), Job::New(inputs, trigger)) = (&store, &job) {
            let new = NewRun::new(run_id.clone(), &wf, inputs.clone(), trigger);
            if let Ok(Err(e)) | Err(e) = store
                .submit_run(new)
                .await
                .map_err(|_| crate::store::StoreError::Closed)
            {
                eprintln!("marktoflow: run {run_id} is not recorded: {e}");
            }
        }
        let slots = async {
            let a = wf_slots.acquire_owned().await.ok()?;
            let b = state.global_slots.clone().acquire_owned().await.ok()?;
            Some((a, b))
        };
        let permits = tokio::select! {
            p = slots => p,
            _ = state.stopping.cancelled() => None,
        };
        state.queued.fetch_sub(1, Ordering::SeqCst);
        let Some(_permits) = permits else {
            // Not started: in the store it stays queued, for the next start.
            let _ = tx.send(Some(Arc::new(not_started(&run_id, &wf, store.is_some()))));
            return;
        };
        started.store(true, Ordering::SeqCst);
        state.running.fetch_add(1, Ordering::SeqCst);
        let result = match (&store, job) {
            (Some(store), Job::Resume(record)) => {
                crate::store::resume_run(store, &state.engine, &wf, &record, cfg).await
            }
            (Some(store), Job::New(inputs, _) | Job::Recorded(inputs)) => {
                crate::store::run_recorded(store, &state.engine, &wf, inputs, cfg).await
            }
            (None, Job::New(inputs, _) | Job::Recorded(inputs)) => {
                state.engine.run(&wf, inputs, cfg).await
            }
            (None, Job::Resume(_)) => not_started(&run_id, &wf, false),
        };
        // Counted out before the slots are released to the next run.
        state.running.fetch_sub(1, Ordering::SeqCst);
        let _ = tx.send(Some(Arc::new(result)));
    });
    Ok(rx)
}

/// Continues the runs a killed server left unfinished (queued or running in
/// the store, their process gone), each from its last checkpoint.
pub fn resume_stored_runs(state: &Arc<ServerState>, workflows: &[Arc<Workflow>]) -> usize {
    let Some(store) = &state.store else { return 0 };
    let runs = match store.incomplete_runs() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("marktoflow: cannot look for unfinished runs: {e}");
            return 0;
        }
    };
    let mut n = 0;
    for run in runs {
        let path = std::path::PathBuf::from(&run.file);
        let same = |w: &&Arc<Workflow>| {
            std::path::absolute(&w.source.path).ok().as_deref() == Some(path.as_path())
        };
        let wf = match workflows.iter().find(same) {
            Some(w) => w.clone(),
            None => match state.loader.load(&path) {
                Ok(w) => Arc::new(w),
                Err(_) => {
                    store.finish_run(
                        &run.id,
                        crate::store::RunEnd {
                            status: crate::store::Status::Failed,
                            outputs: Value::Null,
                            error: Some(format!("not resumed: `{}` cannot be loaded", run.file)),
                            error_step: None,
                            duration_ms: 0,
                        },
                    );
                    continue;
                }
            },
        };
        let id = run.id.clone();
        match start_run(state, wf, Job::Resume(Box::new(run)), id.clone()) {
            Ok(_) => {
                n += 1;
                eprintln!("marktoflow: resuming run {id}");
            }
            Err(why) => eprintln!("marktoflow: run {id} not resumed now: {why}"),
        }
    }
    n
}

/// The result of a queued run that shutdown kept from starting.
fn not_started(run_id: &str, wf: &Workflow, kept: bool) -> RunResult {
    RunResult {
        run_id: run_id.to_string(),
        workflow: wf.meta.id.clone(),
        status: RunStatus::Cancelled,
        outputs: Value::Null,
        steps: Vec::new(),
        error: Some(crate::engine::RunFailure {
            message: if kept {
                "the server shut down before the run started; it stays queued and runs when the server starts again".into()
            } else {
                "the server shut down before the run started".into()
            },
            step_id: None,
            step_name: None,
            file: wf.source.name.clone(),
            pos: None,
        }),
        duration_ms: 0,
    }
}

/// A `schedule` trigger: when, and with which inputs.
pub struct Schedule {
    pub workflow: Arc<Workflow>,
    pub cron: crate::serve::cron::Cron,
    pub expr: String,
    pub inputs: Map<String, Value>,
}

/// The `schedule` triggers of the workflows (`cron:` at the top level or under `config:`).
pub fn schedules_of(workflows: &[Arc<Workflow>]) -> Result<Vec<Schedule>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for wf in workflows {
        for t in wf.triggers.iter().filter(|t| t.kind == "schedule") {
            if t.fields.get("enabled") == Some(&Value::Bool(false)) {
                continue;
            }
            let Some(expr) = t
                .fields
                .get("cron")
                .or_else(|| t.fields.get("schedule"))
                .and_then(Value::as_str)
            else {
                errors.push(Diagnostic::error(
                    &wf.source,
                    Some(t.pos),
                    "a schedule trigger needs `cron:` (e.g. `0 9 * * mon-fri`)",
                ));
                continue;
            };
            match crate::serve::cron::Cron::parse(expr) {
                Ok(cron) => out.push(Schedule {
                    workflow: wf.clone(),
                    cron,
                    expr: expr.to_string(),
                    inputs: match t.fields.get("inputs") {
                        Some(Value::Object(m)) => m.clone(),
                        _ => Map::new(),
                    },
                }),
                Err(e) => errors.push(Diagnostic::error(
                    &wf.source,
                    Some(t.pos),
                    format!("invalid cron expression: {e}"),
                )),
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Starts each scheduled run at its minute (UTC), with the trigger's inputs
/// checked and defaulted like any other run. Runs show in `/runs/{id}`.
pub async fn run_schedules(state: Arc<ServerState>, schedules: Vec<Schedule>) {
    if schedules.is_empty() {
        return;
    }
    loop {
        let now = chrono::Utc::now();
        let Some(next) = schedules
            .iter()
            .filter_map(|s| s.cron.next_after(now))
            .min()
        else {
            return;
        };
        let wait = (next - chrono::Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(wait).await;
        for s in schedules.iter().filter(|s| s.cron.matches(next)) {
            let supplied = s
                .inputs
                .iter()
                .map(|(k, v)| (k.clone(), Supplied::Json(v.clone())))
                .collect();
            match inputs::resolve(&s.workflow, supplied, &state.caps.env) {
                Ok(inputs) => {
                    let run_id = uuid::Uuid::new_v4().to_string();
                    match start_run(
                        &state,
                        s.workflow.clone(),
                        Job::New(inputs, "schedule"),
                        run_id.clone(),
                    ) {
                        Ok(_) => eprintln!(
                            "marktoflow: schedule `{}` started run {run_id} of {}",
                            s.expr, s.workflow.source.name
                        ),
                        Err(why) => eprintln!(
                            "marktoflow: schedule `{}` of {}: not started: {why}",
                            s.expr, s.workflow.source.name
                        ),
                    }
                }
                Err(errs) => {
                    let msg: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                    eprintln!(
                        "marktoflow: schedule `{}` of {}: not started: {}",
                        s.expr,
                        s.workflow.source.name,
                        msg.join("; ")
                    );
                }
            }
        }
    }
}

/// Runs the `file_watch` triggers until shutdown begins: each debounced
/// batch of changed paths starts one run (inputs checked like any run's).
pub async fn run_file_watches(
    state: Arc<ServerState>,
    watches: Vec<crate::serve::file_watch::FileWatch>,
) {
    let stop = state.stopping.clone();
    let result = crate::serve::file_watch::watch(watches, stop.cancelled(), |w, paths| {
        let mut supplied: Vec<(String, Supplied)> = w
            .inputs
            .iter()
            .map(|(k, v)| (k.clone(), Supplied::Json(v.clone())))
            .collect();
        let n = paths.len();
        supplied.push((w.input.clone(), Supplied::Json(json!(paths))));
        match inputs::resolve(&w.workflow, supplied, &state.caps.env) {
            Ok(inputs) => {
                let run_id = uuid::Uuid::new_v4().to_string();
                match start_run(
                    &state,
                    w.workflow.clone(),
                    Job::New(inputs, "file_watch"),
                    run_id.clone(),
                ) {
                    Ok(_) => eprintln!(
                        "marktoflow: {n} changed file{} started run {run_id} of {}",
                        if n == 1 { "" } else { "s" },
                        w.workflow.source.name
                    ),
                    Err(why) => eprintln!(
                        "marktoflow: file_watch of {}: not started: {why}",
                        w.workflow.source.name
                    ),
                }
            }
            Err(errs) => {
                let msg: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                eprintln!(
                    "marktoflow: file_watch of {}: not started: {}",
                    w.workflow.source.name,
                    msg.join("; ")
                );
            }
        }
    })
    .await;
    if let Err(e) = result {
        eprintln!("marktoflow: cannot watch files: {e}");
    }
}

/// Every `.md` file under the given files and folders, as the one walker
/// lists them (ignore files honoured, hidden entries and `.marktoflow/`
/// skipped); callers skip files without a workflow's frontmatter.
pub fn workflow_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_file() {
            out.push(p.clone());
            continue;
        }
        let opts = marktoflow_steps::core::walk::WalkOptions {
            extensions: vec!["md".into()],
            ..Default::default()
        };
        // An unreadable folder yields nothing here; loading reports it.
        for e in marktoflow_steps::core::walk::walk(p, &opts).unwrap_or_default() {
            out.push(e.abs_path);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_and_paths() {
        let mut h = HeaderMap::new();
        // echo -n '{"a":1}' | openssl dgst -sha256 -hmac s3cret
        h.insert(
            "x-hub-signature-256",
            "sha256=d0b9e2ba0c1a9b5d7f5c7a1f2ed60b9a5e0c0d6b6f0a7b0e7d8b6cf0d3f5f6a9"
                .parse()
                .unwrap(),
        );
        assert!(
            !signature_ok("s3cret", &h, b"{\"a\":1}"),
            "a wrong signature is refused"
        );
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(b"{\"a\":1}");
        let good = format!("sha256={}", hex(&mac.finalize().into_bytes()));
        h.insert("x-hub-signature-256", good.parse().unwrap());
        assert!(signature_ok("s3cret", &h, b"{\"a\":1}"));
        assert!(!signature_ok("s3cret", &h, b"{\"a\":2}"));
        assert!(!signature_ok("s3cret", &HeaderMap::new(), b""));
        let v = json!({"a": {"b": [1, {"c": "x"}]}});
        assert_eq!(dotted(&v, "payload.a.b.1.c"), Some(&json!("x")));
        assert_eq!(
            url_pairs("q=a+b%20c&async=true"),
            vec![
                ("q".into(), "a b c".into()),
                ("async".into(), "true".into())
            ]
        );
    }
}
