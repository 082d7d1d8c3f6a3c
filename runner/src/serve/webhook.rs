//! A webhook request: its route chosen by path and event, checked (auth,
//! signature, inputs), answered at once or when its run ends; the same
//! answer again for a repeated `Idempotency-Key`.

use super::api::run_json;
use super::request::{
    bad_inputs, bearer_matches, committed, error, read_body, signature_ok, url_pairs,
};
use super::tenants::{self, Caller, TenantRefused};
use super::{reserve, start_reserved, Job, Route, ServerState, MAX_RUNS_KEPT};
use crate::engine::RunTrigger;
use crate::engine::{RunResult, RunStatus};
use crate::format::inputs::{self, Supplied};
use crate::store::NewRun;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use std::sync::Arc;
pub(super) async fn webhook(State(s): State<Arc<ServerState>>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let served = s.served();
    // The routes this path is one of, those that spell more of it first.
    let mut same_path: Vec<(&Route, Vec<(String, String)>)> = served
        .routes
        .iter()
        .filter_map(|r| r.matches(&path).map(|p| (r, p)))
        .collect();
    same_path.sort_by_key(|(r, _)| std::cmp::Reverse(r.literal_segments()));
    if same_path.is_empty() && path == "/" && parts.method == axum::http::Method::GET {
        return axum::response::Redirect::to("/console").into_response();
    }
    if same_path.is_empty() {
        return error(
            StatusCode::NOT_FOUND,
            format!("no workflow is served at `{path}`"),
        );
    }
    let Some((route, path_params)) = same_path
        .iter()
        .find(|(r, _)| r.method == parts.method)
        .map(|(r, p)| (*r, p.clone()))
    else {
        let allow: Vec<&str> = same_path.iter().map(|(r, _)| r.method.as_str()).collect();
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
    // A tenant's token opens the routes of workflows that keep tenants
    // apart, as the route's own token (the operator's) does.
    let caller = s.tenants.caller(&parts.headers);
    let tenant_bound = tenants::tenant_input(&route.workflow).is_some();
    let operator = match &route.token {
        Some(token) if bearer_matches(&parts.headers, token) => true,
        Some(_) if tenant_bound && caller != Caller::Open => false,
        Some(_) => return error(StatusCode::UNAUTHORIZED, "missing or invalid bearer token"),
        None => false,
    };
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
    let mut supplied = super::routes::request_inputs(&wf, &route.input_mapping, &payload, &query);
    // The path names what it names (`/api/robots/:robot_id/…`), whatever
    // the body says.
    for (name, value) in path_params {
        supplied.retain(|(k, _)| *k != name);
        supplied.push((name, Supplied::Text(value)));
    }
    if let Err(refused) = tenants::apply(&wf, &s.tenants, &caller, operator, &mut supplied) {
        let status = match refused {
            TenantRefused::NoToken { .. } => StatusCode::UNAUTHORIZED,
            TenantRefused::Other { .. } => StatusCode::FORBIDDEN,
            TenantRefused::NotText { .. } => StatusCode::BAD_REQUEST,
        };
        return error(status, refused.to_string());
    }
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
                let mut new = NewRun::new(run_id.clone(), &wf, inputs.clone(), RunTrigger::Webhook);
                new.idempotency_key = key.clone();
                // It goes with the run: another process may start it, and
                // a run that waits before its first checkpoint (at its first
                // step) sees it again when it goes on. One machine's store
                // keeps a body past its cap out (the inputs hold what runs).
                new.context = match store.shared() {
                    Some(_) => context.clone(),
                    None => crate::store::stored_marker(&context["body"])
                        .map(|m| {
                            let mut c = context.clone();
                            c["body"] = m;
                            c
                        })
                        .unwrap_or_else(|| context.clone()),
                };
                // A run starts only once the store has it: a run with a
                // key once the store gave it the key; any run once its
                // creation is committed. When the store cannot record it
                // (unreachable, a full disk) nothing runs and the caller
                // hears 503 with `Retry-After` (issue 49, item 12: a full
                // disk ran what it could not record).
                let commit = store.submit_run(new);
                match committed(commit).await {
                    Ok(()) => {}
                    Err(crate::store::StoreError::DuplicateKey(other)) => {
                        drop((place, turn));
                        return answer_for_key(&s, &other, &wf, want_async).await;
                    }
                    Err(e) => return store_unavailable(&e),
                }
            }
            let rx = start_reserved(
                &s,
                wf.clone(),
                Job::Recorded(inputs, RunTrigger::Webhook, context),
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
                    waiting: None,
                });
            }
        }
    })
    .await;
    match waited {
        Ok(r) => match (&r.response, r.status) {
            // `workflow.exit` chose the answer.
            (Some(answer), RunStatus::Completed | RunStatus::Rejected) => exit_answer(answer, run_json(&run_id, &wf.meta.id, true, Some(&r))),
            _ => {
                let status = http_status(r.status);
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

/// The HTTP status of a finished run's answer when `workflow.exit` chose
/// none (a replay from the store does not keep the code it chose: a
/// rejected run is answered 400).
fn http_status(status: RunStatus) -> StatusCode {
    match status {
        RunStatus::Completed => StatusCode::OK,
        RunStatus::Rejected => StatusCode::BAD_REQUEST,
        // Accepted, not done: it goes on when somebody answers (or has
        // not ended yet).
        RunStatus::Waiting | RunStatus::Queued | RunStatus::Running => StatusCode::ACCEPTED,
        RunStatus::Failed | RunStatus::Cancelled => StatusCode::INTERNAL_SERVER_ERROR,
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
                let status = http_status(r.status);
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
        crate::store::RunStatus::Completed => StatusCode::OK,
        // The code it answered is not kept: a replay says "refused".
        crate::store::RunStatus::Rejected => StatusCode::BAD_REQUEST,
        crate::store::RunStatus::Failed | crate::store::RunStatus::Cancelled => {
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
