//! The HTTP surface: which handler answers each path (the run API, the
//! console, webhooks as the fallback), health, and a run's events as a stream.

use super::answers;
use super::api;
use super::request::error;
use super::webhook::webhook;
use super::ServerState;
use crate::engine::Event;
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(api::metrics))
        .route("/workflows", get(api::list_workflows))
        .route("/workflows/{id}", get(api::get_workflow))
        .route("/workflows/{id}/runs", post(api::start_workflow_run))
        .route("/workflows/{id}/replay", post(api::replay_workflow_run))
        .route("/runs", get(api::list_runs))
        .route("/runs/{id}", get(api::get_run))
        .route("/runs/{id}/events", get(get_events))
        .route("/runs/{id}/cancel", post(api::cancel_run))
        .route("/runs/{id}/retry", post(api::retry_run))
        .route("/runs/{id}/steps/{step}/answer", post(answers::answer_step))
        .route("/runs/{id}/pause", post(answers::pause_run))
        .route("/runs/{id}/resume", post(answers::resume_run))
        .route("/waits", get(answers::list_waits))
        .route(
            "/answer/{token}",
            get(answers::link_form).post(answers::link_answer),
        )
        .route("/events/{key}", post(answers::event))
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
        // `broken`: files that do not load (their last good version, if
        // any, is still served); which and why is the API's to say.
        Json(json!({"status": status, "workflows": s.served().routes.len(), "broken": s.served().broken.len(), "running": running, "queued": queued})),
    )
        .into_response()
}

/// The events of a run this process does not hold (a waiting run, one of
/// another process): none to stream, so the stream ends at once and the
/// reader looks the run up instead; `404` for a run nobody knows.
async fn stored_events(s: &ServerState, id: &str) -> Response {
    let known = match s.store.clone() {
        Some(store) => {
            let want = id.to_string();
            tokio::task::spawn_blocking(move || store.get_run(&want))
                .await
                .ok()
                .and_then(Result::ok)
                .is_some_and(|r| r.id == id)
        }
        None => false,
    };
    if !known {
        return error(StatusCode::NOT_FOUND, format!("no run `{id}`"));
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::empty())
        .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "cannot stream"))
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
    let live = {
        let runs = match s.runs.lock() {
            Ok(r) => r,
            Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "run table unavailable"),
        };
        runs.get(&id).map(|e| (e.events.clone(), e.result.clone()))
    };
    let Some((events, done)) = live else {
        return stored_events(&s, &id).await;
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
