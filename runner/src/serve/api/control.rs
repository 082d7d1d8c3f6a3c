//! Acting on a run: cancel it, or retry it from a step.

use super::super::request::{error, url_pairs};
use super::super::{reserve, start_reserved, Job, ServerState};
use super::runs::entry_status;
use super::{accepted, guard};
use crate::engine::RunTrigger;
use crate::store::retry::RetryError;
use crate::store::{NewRun, RunStatus};
use axum::extract::{Path as UrlPath, State};
use axum::http::{request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;

/// `POST /runs/{id}/cancel`: a queued or running run of this server stops
/// at its next step (a queued one never starts); an interrupted run (its
/// server gone) is marked cancelled.
pub(in crate::serve) async fn cancel_run(
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
        // A waiting run has no task to stop: its row is cancelled (below).
        Some((_, RunStatus::Waiting)) => cancel_stored(&s, &id).await,
        Some((_, status)) if status.is_finished() => error(
            StatusCode::CONFLICT,
            format!("run `{id}` has already ended ({})", status.as_str()),
        ),
        Some((cancel, _)) => {
            cancel.cancel();
            (
                StatusCode::ACCEPTED,
                Json(json!({"run_id": id, "status": "cancelling", "location": format!("/runs/{id}")})),
            )
                .into_response()
        }
        None => cancel_stored(&s, &id).await,
    }
}

/// Cancels a run this process does not hold: one that waits for an
/// answer, or one whose server is gone.
async fn cancel_stored(s: &Arc<ServerState>, id: &str) -> Response {
    let id = id.to_string();
    let Some(store) = s.store.clone() else {
        return error(StatusCode::NOT_FOUND, format!("no run `{id}`"));
    };
    let found = {
        let id = id.clone();
        tokio::task::spawn_blocking(move || store.get_run(&id)).await
    };
    match found {
        Ok(Ok(r)) if r.id == id && r.status == RunStatus::Waiting => {
            let Some(store) = s.store.clone() else {
                return error(StatusCode::NOT_FOUND, format!("no run `{id}`"));
            };
            let run_id = id.clone();
            match tokio::task::spawn_blocking(move || store.cancel_waiting(&run_id)).await {
                Ok(Ok(true)) => Json(json!({"run_id": id, "status": "cancelled"})).into_response(),
                Ok(Ok(false)) => error(
                    StatusCode::CONFLICT,
                    format!("run `{id}` was answered or ended meanwhile"),
                ),
                Ok(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
                Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the store write failed"),
            }
        }
        Ok(Ok(r)) if r.id == id && r.is_interrupted() => {
            let Some(store) = s.store.clone() else {
                return error(StatusCode::NOT_FOUND, format!("no run `{id}`"));
            };
            store.finish_run(
                &id,
                crate::store::RunEnd {
                    status: RunStatus::Cancelled,
                    outputs: Value::Null,
                    error: Some("cancelled after its server stopped".into()),
                    error_step: None,
                    duration_ms: r.duration_ms.unwrap_or(0),
                    waiting: None,
                },
            );
            match super::super::request::committed(store.submit_flush()).await {
                Ok(()) => Json(json!({"run_id": id, "status": "cancelled"})).into_response(),
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

/// `POST /runs/{id}/retry?from=STEP`: a new run with the same inputs that
/// reuses the steps before `STEP` (default: every step that completed).
pub(in crate::serve) async fn retry_run(
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
    let mut new = NewRun::new(run_id.clone(), &wf, plan.inputs.clone(), RunTrigger::Retry);
    new.retry_of = Some((plan.of.clone(), plan.reused));
    if let Err(e) = super::super::request::committed(store.submit_run(new)).await {
        return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    }
    let reused = plan.reused;
    start_reserved(
        &s,
        wf.clone(),
        Job::Retry(plan.inputs, Box::new(plan.checkpoint), plan.of.clone()),
        run_id.clone(),
        place,
    );
    let from_step = wf.steps.get(reused).map(|st| st.id.clone());
    accepted(
        &run_id,
        json!({"retry_of": run.id, "from": from_step, "reused_steps": reused}),
    )
}
