//! The HTTP surface: webhook requests (auth, inputs from body and query),
//! runs and their events, health and the list of workflows.

use super::api::{self, run_json};
use super::{reserve, start_reserved, Job, Route, ServerState, MAX_RUNS_KEPT};
use crate::engine::{Event, RunResult, RunStatus};
use crate::format::inputs;
use crate::store::NewRun;
use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hmac::{Hmac, Mac};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(api::metrics))
        .route("/workflows", get(api::list_workflows))
        .route("/workflows/{id}", get(api::get_workflow))
        .route("/workflows/{id}/runs", post(api::start_workflow_run))
        .route("/runs", get(api::list_runs))
        .route("/runs/{id}", get(api::get_run))
        .route("/runs/{id}/events", get(get_events))
        .route("/runs/{id}/cancel", post(api::cancel_run))
        .route("/runs/{id}/retry", post(api::retry_run))
        .merge(super::console::routes())
        .fallback(webhook)
        .with_state(state)
}

/// What a worker serves: its health and its metrics.
pub fn worker_router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(api::metrics))
        .with_state(state)
}

pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

pub(super) async fn health(State(s): State<Arc<ServerState>>) -> Response {
    let (queued, running) = s.load();
    let status = if s.is_stopping() { "stopping" } else { "ok" };
    let code = if s.is_stopping() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (
        code,
        Json(json!({"status": status, "workflows": s.served().routes.len(), "running": running, "queued": queued})),
    )
        .into_response()
}

/// The run's events so far, as Server-Sent Events (the stream ends with the run).
pub(super) async fn get_events(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    // Every step's output and log lines (a secret a step logged among
    // them) are the API's: a run id alone does not open them.
    if let Err(r) = api::guard(&s, &axum::http::Method::GET, &headers) {
        return r.into_response();
    }
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

/// Whether `headers` carry `Authorization: Bearer <token>` (compared in
/// constant time).
pub fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110 §11.1).
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .unwrap_or("");
    constant_time_eq(given.as_bytes(), token.as_bytes())
}

pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks `X-Hub-Signature-256: sha256=<hex>` (or `X-Signature: <hex>`) of the raw body.
pub(super) fn signature_ok(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
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

pub(super) async fn webhook(State(s): State<Arc<ServerState>>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let served = s.served();
    let same_path: Vec<&Route> = served.routes.iter().filter(|r| r.path == path).collect();
    if same_path.is_empty() && path == "/" && parts.method == axum::http::Method::GET {
        return axum::response::Redirect::to("/console").into_response();
    }
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
    let body = match read_body(&s, &parts.headers, body).await {
        Ok(b) => b,
        Err(r) => return r,
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
        if !bearer_matches(&parts.headers, token) {
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
    let event = super::routes::event_of(&parts.headers, &payload);
    let ignored = !route.events.is_empty()
        && !event
            .as_deref()
            .is_some_and(|e| super::routes::event_wanted(&route.events, e));
    if ignored {
        // Accepted and ignored: the sender (GitHub's `ping`, other
        // actions) must not see a failure or retry.
        return (
            StatusCode::ACCEPTED,
            Json(json!({
                "ignored": true,
                "event": event,
                "reason": format!("the workflow runs on {}", route.events.join(", ")),
            })),
        )
            .into_response();
    }
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
    let supplied = super::routes::request_inputs(&wf, &route.input_mapping, &payload, &query);
    let inputs = match inputs::resolve(&wf, supplied, &s.caps.env) {
        Ok(i) => i,
        Err(errs) => return bad_inputs(&errs),
    };
    // A repeated request with the same Idempotency-Key gets the same run.
    let key = parts
        .headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|k| format!("{} {} {k}", route.method, route.path));
    // Requests with one key take turns until the run it starts is known:
    // exactly one of them starts it, here; the store decides between
    // processes.
    let turn = match &key {
        Some(k) => Some(s.key_turn(k).await),
        None => None,
    };
    let existing = key.as_ref().and_then(|k| {
        let known = s.idempotency.lock().ok()?.get(k).cloned()?;
        let runs = s.runs.lock().ok()?;
        runs.get(&known).map(|e| (known.clone(), e.result.clone()))
    });
    // Not in memory (an earlier server process, or forgotten): the store
    // keeps keys with their runs for a day.
    if let (None, Some(k), Some(store)) = (&existing, &key, s.store.clone()) {
        let k = k.clone();
        let found = tokio::task::spawn_blocking(move || store.run_for_key(&k).ok().flatten())
            .await
            .ok()
            .flatten();
        if let Some(id) = found {
            drop(turn);
            return answer_for_key(&s, &id, &wf, want_async).await;
        }
    }
    let mut created = None;
    let (run_id, rx) = match existing {
        Some(found) => found,
        None => {
            let run_id = crate::store::new_run_id();
            // A place first: a request refused (503) leaves no trace.
            let place = match reserve(&s) {
                Ok(p) => p,
                Err(why) => return why.response(s.config.max_queue),
            };
            // Committed before anyone hears of the run: a crash after the
            // answer cannot lose it. An asynchronous caller hears of it now;
            // a waiting caller hears when it ends, so its run starts at once
            // and the answer waits for the commit of all of it (below). Its
            // rows are queued after this one, so none is ever stored alone.
            let context = super::routes::request_context(
                &parts.method,
                &path,
                &parts.headers,
                &query,
                &payload,
                event.as_deref(),
            );
            if let Some(store) = &s.store {
                let mut new = NewRun::new(run_id.clone(), &wf, inputs.clone(), "webhook");
                new.idempotency_key = key.clone();
                // Another process may start it: it goes with the run.
                if store.shared().is_some() {
                    new.context = context.clone();
                }
                // Queued for workers, a run is told of once committed; a
                // run with a key starts once the store gave it the key; on
                // a shared store, once the store took it (while it cannot
                // be reached nothing runs, and the caller hears 503).
                if want_async || s.enqueue_only || key.is_some() || store.shared().is_some() {
                    let commit = store.submit_run(new);
                    match committed(commit).await {
                        Ok(()) => {}
                        Err(crate::store::StoreError::DuplicateKey(other)) => {
                            drop((place, turn));
                            return answer_for_key(&s, &other, &wf, want_async).await;
                        }
                        Err(e @ crate::store::StoreError::Unavailable(_)) => {
                            return store_unavailable(&e)
                        }
                        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                    }
                } else {
                    created = Some(store.queue_run(new));
                }
            }
            let rx = start_reserved(
                &s,
                wf.clone(),
                Job::Recorded(inputs, "webhook", context),
                run_id.clone(),
                place,
            );
            if let (Some(k), Ok(mut map)) = (key, s.idempotency.lock()) {
                if map.len() >= MAX_RUNS_KEPT {
                    map.clear();
                }
                map.insert(k, run_id.clone());
            }
            (run_id, rx)
        }
    };
    drop(turn);
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
                    response: None,
                });
            }
        }
    })
    .await;
    // What the answer tells is stored: the run (and, when it ended, all of
    // it: a run's result is published once its end is committed).
    if let Some(commit) = created {
        if let Err(e) = committed(commit).await {
            if matches!(e, crate::store::StoreError::Unavailable(_)) {
                return store_unavailable(&e);
            }
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("run {run_id} could not be recorded: {e}"),
            );
        }
    }
    match waited {
        Ok(r) => match (&r.response, r.status) {
            // `workflow.exit` chose the answer.
            (Some(answer), RunStatus::Completed) => exit_answer(answer, run_json(&run_id, &wf.meta.id, true, Some(&r))),
            _ => {
                let status = if r.status == RunStatus::Completed { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR };
                (status, Json(run_json(&run_id, &wf.meta.id, true, Some(&r)))).into_response()
            }
        },
        Err(_) => (
            StatusCode::GATEWAY_TIMEOUT,
            Json(json!({"run_id": run_id, "status": "running", "error": format!("the run is still going after {}s; poll /runs/{run_id}", s.config.request_timeout.as_secs())})),
        )
            .into_response(),
    }
}

/// 503 with `Retry-After`: the run store cannot be reached now, so nothing
/// was accepted.
fn store_unavailable(e: &crate::store::StoreError) -> Response {
    let mut resp = error(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("{e}; nothing was run, try again shortly"),
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
    resp
}

/// The answer to a request whose `Idempotency-Key` started stored run
/// `id` (in another process, or before this one started): an asynchronous
/// caller hears where it stands; a waiting one gets its end, as the request
/// that started it did.
async fn answer_for_key(
    s: &Arc<ServerState>,
    id: &str,
    wf: &Arc<crate::format::model::Workflow>,
    want_async: bool,
) -> Response {
    let Some(store) = s.store.clone() else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "no run store");
    };
    if !want_async {
        return match super::worker::stored_end(&store, id, wf, s, true).await {
            Some(r) => {
                let status = if r.status == RunStatus::Completed { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR };
                (status, Json(run_json(id, &r.workflow, true, Some(&r)))).into_response()
            }
            None => (
                StatusCode::GATEWAY_TIMEOUT,
                Json(json!({"run_id": id, "status": "running", "error": format!("the run is still going after {}s; poll /runs/{id}", s.config.request_timeout.as_secs())})),
            )
                .into_response(),
        };
    }
    let key = id.to_string();
    let found = tokio::task::spawn_blocking(move || store.get_run(&key).ok())
        .await
        .ok()
        .flatten();
    let Some(r) = found else {
        return (
            StatusCode::ACCEPTED,
            Json(json!({"run_id": id, "status": "accepted", "location": format!("/runs/{id}")})),
        )
            .into_response();
    };
    let status = match r.status {
        crate::store::Status::Completed => StatusCode::OK,
        crate::store::Status::Failed | crate::store::Status::Cancelled => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::ACCEPTED,
    };
    (
        status,
        Json(json!({
            "run_id": r.id, "workflow": r.workflow, "status": r.shown_status(),
            "outputs": r.outputs, "error": r.error.map(|m| json!({"message": m, "step": r.error_step})),
            "location": format!("/runs/{}", r.id),
        })),
    )
        .into_response()
}

/// The answer `workflow.exit` asked for: its `status` (default 200), and its
/// `body` (text as `text/plain`, anything else as JSON), else the run's JSON.
fn exit_answer(answer: &Value, run: Value) -> Response {
    let status = answer["status"]
        .as_u64()
        .and_then(|s| StatusCode::from_u16(s as u16).ok())
        .unwrap_or(StatusCode::OK);
    match &answer["body"] {
        Value::Null => (status, Json(run)).into_response(),
        Value::String(text) => (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            text.clone(),
        )
            .into_response(),
        other => (status, Json(other.clone())).into_response(),
    }
}

/// A request's body within the server's size and time limits: a declared
/// length over the limit is answered at once, not waited for, and a body
/// sent too slowly does not hold the connection for ever.
pub(super) async fn read_body(
    s: &ServerState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, Response> {
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {} bytes", s.config.max_body),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > s.config.max_body as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(s.config.request_timeout, to_bytes(body, s.config.max_body)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(_)) => Err(too_large()),
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body did not arrive within {}s",
                s.config.request_timeout.as_secs()
            ),
        )),
    }
}

/// `400` for inputs that do not fit: every problem, and each by input.
pub(super) fn bad_inputs(errs: &[inputs::InputError]) -> Response {
    let fields: Vec<Value> = errs
        .iter()
        .map(|e| json!({"input": e.name, "message": e.message, "hint": e.hint}))
        .collect();
    let msg = errs
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": msg, "fields": fields})),
    )
        .into_response()
}

/// Waits for a store commit's answer.
pub(super) async fn committed(
    rx: tokio::sync::oneshot::Receiver<Result<(), crate::store::StoreError>>,
) -> Result<(), crate::store::StoreError> {
    rx.await.map_err(|_| crate::store::StoreError::Closed)?
}

pub(super) fn url_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

pub(super) fn percent_decode(s: &str) -> String {
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
        assert_eq!(
            super::super::routes::dotted(&v, "payload.a.b.1.c"),
            Some(&json!("x"))
        );
        assert_eq!(
            url_pairs("q=a+b%20c&async=true"),
            vec![
                ("q".into(), "a b c".into()),
                ("async".into(), "true".into())
            ]
        );
    }
}
