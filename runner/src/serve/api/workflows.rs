//! The served workflows in the API: the list, one with its inputs,
//! triggers and graph, starting a run of one, and `/metrics`.

use super::super::request::error;
use super::super::{reserve, start_reserved, Job, ServerState};
use super::{accepted, guard, workflow};
use crate::engine::RunTrigger;
use crate::format::graph::Graph;
use crate::format::inputs::{self, Supplied};
use crate::format::model::Workflow;
use crate::store::NewRun;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, request::Parts, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// A trigger's fields as shown: credentials never leave the server.
pub(super) fn shown_trigger(t: &crate::format::model::Trigger) -> Value {
    let mut fields = t.fields.clone();
    for (k, v) in fields.iter_mut() {
        let k = k.to_ascii_lowercase();
        if ["secret", "token", "password", "authorization", "headers"].contains(&k.as_str()) {
            *v = json!("(hidden)");
        }
    }
    json!({"type": t.kind, "config": fields, "line": t.pos.line})
}

pub(super) fn inputs_json(wf: &Workflow) -> Vec<Value> {
    wf.inputs
        .iter()
        .map(|i| {
            json!({"name": i.name, "type": i.ty.name(), "required": i.required && i.default.is_none(),
                   "default": i.default, "description": i.description, "enum": i.allowed,
                   "min": i.min, "max": i.max, "pattern": i.pattern.as_ref().map(|p| p.as_str())})
        })
        .collect()
}

/// `GET /metrics`: Prometheus' text format (see [`super::super::metrics`]), with
/// the run API's access rules (a scraper sends the bearer token).
pub(in crate::serve) async fn metrics(State(s): State<Arc<ServerState>>, parts: Parts) -> Response {
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    // The shared store's figures are read from the database: not here.
    let state = s.clone();
    let text = tokio::task::spawn_blocking(move || {
        state.metrics.render(
            state.load(),
            state.store.as_deref(),
            state.caps.background.as_deref(),
        )
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

/// When `wf`'s schedules fire next (epoch ms; null without one), and how
/// it is read (`Europe/Paris, next 2026-11-30 07:00 CET`).
fn next_fire(wf: &Workflow, now: chrono::DateTime<chrono::Utc>) -> Value {
    let next = wf
        .triggers
        .iter()
        .filter(|t| crate::serve::schedule::fires(t))
        .filter_map(|t| crate::serve::schedule::cron_of(wf, t).ok())
        .filter_map(|(_, cron)| cron.next_after(now).map(|at| (at, cron)))
        .min_by_key(|(at, _)| *at);
    match next {
        Some((at, cron)) => json!({"at": at.timestamp_millis(), "shown": cron.when(now)}),
        None => Value::Null,
    }
}

/// Each workflow's latest run in the store (`{run_id, status,
/// created_at}`), by id; none without a store.
async fn last_runs(s: &ServerState, ids: Vec<String>) -> Map<String, Value> {
    let Some(store) = s.store.clone() else {
        return Map::new();
    };
    tokio::task::spawn_blocking(move || {
        ids.into_iter()
            .filter_map(|id| {
                let filter = crate::store::RunFilter {
                    workflow: Some(id.clone()),
                    limit: Some(1),
                    ..Default::default()
                };
                let run = store.list_runs(&filter).ok()?.into_iter().next()?;
                Some((
                    id,
                    json!({"run_id": run.id, "status": run.shown_status(), "created_at": run.created_at}),
                ))
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

/// `GET /workflows`: every served workflow, with its inputs and webhook
/// route (`method`, `path`, `auth` of its first; null when it has none),
/// its latest run and when its schedule fires next.
pub(in crate::serve) async fn list_workflows(
    State(s): State<Arc<ServerState>>,
    parts: Parts,
) -> Response {
    if let Err(r) = guard(&s, &parts.method, &parts.headers) {
        return r.into_response();
    }
    let served = s.served();
    let now = chrono::Utc::now();
    let ids = served.workflows.iter().map(|w| w.meta.id.clone()).collect();
    let last = last_runs(&s, ids).await;
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
                   "routes": routes, "triggers": wf.triggers.iter().map(|t| t.kind).collect::<Vec<_>>(),
                   "steps": wf.steps.len(), "last_run": last.get(&wf.meta.id),
                   "next": next_fire(wf, now)})
        })
        .collect();
    // Files `serve --watch` could not load: skipped, with their errors.
    let broken: Vec<Value> = served
        .broken
        .iter()
        .map(|d| json!({"file": d.file, "line": d.pos.map(|p| p.line), "column": d.pos.map(|p| p.col), "message": d.message}))
        .collect();
    Json(json!({"workflows": list, "broken": broken, "background": background(&s)})).into_response()
}

/// The server's background tasks (a big knowledge base being embedded):
/// `[{task, done, total, running, error, eta_seconds}]`.
fn background(s: &ServerState) -> Value {
    let Some(bg) = &s.caps.background else {
        return json!([]);
    };
    let tasks: Vec<Value> = bg
        .status()
        .into_iter()
        .map(|(_, t)| {
            let eta = (t.running && t.done > 0 && t.done < t.total)
                .then(|| (t.seconds as f64 / t.done as f64 * (t.total - t.done) as f64).round());
            json!({"task": t.what, "done": t.done, "total": t.total, "running": t.running,
                   "error": t.error, "eta_seconds": eta})
        })
        .collect();
    json!(tasks)
}

/// `GET /workflows/{id}`: one workflow: inputs, outputs, triggers (without
/// credentials), top-level steps and its graph (Mermaid and SVG).
pub(in crate::serve) async fn get_workflow(
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
        "version": (!wf.meta.version.is_empty()).then_some(&wf.meta.version), "file": wf.source.name, "inputs": inputs_json(&wf),
        "outputs": outputs, "triggers": wf.triggers.iter().map(shown_trigger).collect::<Vec<_>>(),
        "routes": routes, "steps": steps,
        "graph": {"mermaid": graph.mermaid(), "svg": graph.svg()},
    }))
    .into_response()
}

/// A request about workflow `id` that the API's access rules let through,
/// with its body read (bounded as every body is).
async fn workflow_request(
    s: &Arc<ServerState>,
    id: &str,
    req: Request<Body>,
) -> Result<(Arc<Workflow>, axum::body::Bytes), Response> {
    let (parts, body) = req.into_parts();
    guard(s, &parts.method, &parts.headers).map_err(IntoResponse::into_response)?;
    let wf = workflow(s, id).map_err(IntoResponse::into_response)?;
    let body = super::super::request::read_body(s, &parts.headers, body).await?;
    Ok((wf, body))
}

/// `POST /workflows/{id}/runs`: starts a run with the body's inputs
/// (a JSON object), checked as on the command line; answers 202 at once.
pub(in crate::serve) async fn start_workflow_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    req: Request<Body>,
) -> Response {
    let (wf, body) = match workflow_request(&s, &id, req).await {
        Ok(r) => r,
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
        Err(errs) => return super::super::request::bad_inputs(&errs),
    };
    start_api_run(&s, wf, inputs, json!({"type": "api"})).await
}

/// Starts a run the API was asked for, recorded before the 202 answers;
/// `context` is what it sees as `trigger`.
async fn start_api_run(
    s: &Arc<ServerState>,
    wf: Arc<Workflow>,
    inputs: Map<String, Value>,
    context: Value,
) -> Response {
    let place = match reserve(s) {
        Ok(p) => p,
        Err(why) => return why.response(s.config.max_queue),
    };
    let run_id = crate::store::new_run_id();
    if let Some(store) = &s.store {
        let mut new = NewRun::new(run_id.clone(), &wf, inputs.clone(), RunTrigger::Api);
        new.context = context.clone();
        if let Err(e) = super::super::request::committed(store.submit_run(new)).await {
            return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
        }
    }
    start_reserved(
        s,
        wf,
        Job::Recorded(inputs, RunTrigger::Api, context),
        run_id.clone(),
        place,
    );
    accepted(&run_id, json!({}))
}

/// `POST /workflows/{id}/replay`: starts a run of a webhook workflow from a
/// request body, `{"body": {...}, "headers": {"X-GitHub-Event": "issues"}}`,
/// as its trigger would take the request (its `events` filter and
/// `inputMapping`; not its authentication: the caller holds the API's
/// access already). The console's "start from a request body".
pub(in crate::serve) async fn replay_workflow_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    req: Request<Body>,
) -> Response {
    let (wf, body) = match workflow_request(&s, &id, req).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let bad = |m: String| error(StatusCode::BAD_REQUEST, m);
    let Ok(Value::Object(given)) = serde_json::from_slice::<Value>(&body) else {
        return bad("the body must be a JSON object: {\"body\": {...}, \"headers\": {...}}".into());
    };
    let request_body = given
        .get("body")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    if !request_body.is_object() {
        return bad("`body` must be a JSON object, as a webhook's body must".into());
    }
    let mut headers = axum::http::HeaderMap::new();
    if let Some(h) = given.get("headers") {
        let Value::Object(h) = h else {
            return bad("`headers` must be a mapping of header names to text".into());
        };
        for (name, value) in h {
            let (Ok(n), Some(Ok(v))) = (
                axum::http::HeaderName::from_bytes(name.as_bytes()),
                value.as_str().map(axum::http::HeaderValue::from_str),
            ) else {
                return bad(format!(
                    "header `{name}`: not a header name with a text value"
                ));
            };
            headers.append(n, v);
        }
    }
    let (supplied, context) = match crate::serve::replay::replayed(&wf, &headers, &request_body) {
        Ok(r) => r,
        Err(e) => return bad(e.to_string()),
    };
    let inputs = match inputs::resolve(&wf, supplied, &s.caps.env) {
        Ok(i) => i,
        Err(errs) => return super::super::request::bad_inputs(&errs),
    };
    start_api_run(&s, wf, inputs, context).await
}
