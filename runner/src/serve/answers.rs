//! Answering waiting runs over HTTP: the run API
//! (`POST /runs/{id}/steps/{step}/answer`, `GET /waits`), signed links
//! (`GET`/`POST /answer/{token}`: a form, then its answer), events for
//! `mode: webhook` (`POST /events/{key}`), and the deadlines of waits.
//! Every answer is checked against the step's `fields:` and recorded once
//! (see [`crate::store::wait`]); the one that decides a wait resumes the run
//! here.

use super::api::guard;
use super::links::LinkError;
use super::request::{error, read_body, url_pairs};
use super::{start_run, Job, ServerState};
use crate::engine::{Vote, WaitRequest};
use crate::format::inputs::Supplied;
use crate::format::model::{AskMode, InputDef, Workflow};
use crate::store::{AnswerIn, Answered, RunStatus, WaitFilter, WaitRecord};
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// What a request answers with, before it is checked.
struct Given {
    values: Vec<(String, Supplied)>,
    decision: Option<String>,
    comment: Option<String>,
}

/// Why an answer was not taken: the status and what to tell.
pub struct NotTaken(pub StatusCode, pub Value);

impl NotTaken {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        NotTaken(status, json!({"error": message.into()}))
    }

    /// What to tell whoever answered.
    pub fn message(&self) -> String {
        match self.1.get("error") {
            Some(Value::String(m)) => m.clone(),
            _ => self.0.to_string(),
        }
    }
}

/// An answer given outside HTTP: its field values (JSON), and for an
/// approval the decision and a comment.
#[derive(Debug, Default, PartialEq)]
pub struct OutsideAnswer {
    pub values: serde_json::Map<String, Value>,
    pub decision: Option<String>,
    pub comment: Option<String>,
}

/// An answer given outside HTTP (an MCP client's user, through
/// elicitation) by `by`, checked and recorded as the API's are; the answer
/// that decides the wait resumes the run. Ok: what the API would answer
/// (`status` is `resumed` or `counted`).
pub async fn answer_from(
    s: &Arc<ServerState>,
    (run_id, step): (&str, &str),
    a: OutsideAnswer,
    by: String,
    via: &str,
) -> Result<Value, NotTaken> {
    let given = Given {
        values: a
            .values
            .into_iter()
            .map(|(k, v)| match v {
                // A choice comes back as its text; the field's type converts it.
                Value::String(t) => (k, Supplied::Text(t)),
                v => (k, Supplied::Json(v)),
            })
            .collect(),
        decision: a.decision,
        comment: a.comment,
    };
    take(s, run_id, step, given, by, via).await.map(|(_, v)| v)
}

/// `GET /waits`: the open waits of the served workflows, newest first.
pub(super) async fn list_waits(State(s): State<Arc<ServerState>>, headers: HeaderMap) -> Response {
    if let Err(r) = guard(&s, &axum::http::Method::GET, &headers) {
        return r.into_response();
    }
    let Some(store) = s.store.clone() else {
        return Json(json!({"waits": []})).into_response();
    };
    let found = tokio::task::spawn_blocking(move || {
        store.waits(&WaitFilter {
            open: true,
            limit: Some(500),
            ..Default::default()
        })
    })
    .await;
    match found {
        Ok(Ok(waits)) => {
            let list: Vec<Value> = waits.iter().map(wait_json).collect();
            Json(json!({"waits": list})).into_response()
        }
        Ok(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the store read failed"),
    }
}

/// A wait as the API shows it (links are for the people it asks, not the list).
pub(super) fn wait_json(w: &WaitRecord) -> Value {
    let r = &w.request;
    json!({
        "run_id": w.run_id,
        "workflow": w.workflow,
        "step": r.step_id,
        "step_name": r.step_name,
        "mode": r.mode,
        "title": r.title,
        "prompt": r.prompt,
        "fields": r.fields,
        "approvals": r.approvals,
        "approvers": r.approvers,
        "requester": r.requester,
        "created_at": r.created_at,
        "deadline": r.deadline,
        "state": w.state,
        "votes": w.votes,
        "answer": format!("/runs/{}/steps/{}/answer", w.run_id, r.step_id),
    })
}

/// `POST /runs/{id}/steps/{step}/answer`: a JSON object of the field
/// values, with `decision` (`approve`/`reject`) and `comment` for an
/// approval. Guarded as the run API; who answers is the gateway's
/// identity header when the server names one, else `api`.
pub(super) async fn answer_step(
    State(s): State<Arc<ServerState>>,
    UrlPath((id, step)): UrlPath<(String, String)>,
    req: Request<Body>,
) -> Response {
    let (parts, body) = match guarded(&s, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let by = identity(&s, &parts.headers);
    let via = if parts
        .headers
        .get("x-marktoflow-console")
        .is_some_and(|v| v == "1")
    {
        "console"
    } else {
        "api"
    };
    let given = match given_of(&parts.headers, &body) {
        Ok(g) => g,
        Err(n) => return reply(Err(n)),
    };
    reply(
        take(
            &s,
            &id,
            &step,
            given,
            by.unwrap_or_else(|| via.to_string()),
            via,
        )
        .await,
    )
}

/// `POST /events/{key}`: the event a `mode: webhook` wait waits for; its
/// JSON body is the step's output (checked against `fields:` when it has
/// them). Guarded as the run API.
pub(super) async fn event(
    State(s): State<Arc<ServerState>>,
    UrlPath(key): UrlPath<String>,
    req: Request<Body>,
) -> Response {
    let (parts, body) = req.into_parts();
    let body = match read_body(&s, &parts.headers, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    // The API's guard, or the wait's own `secret`/`token` (an outside
    // service signs its events as it signs webhooks).
    let api_ok = guard(&s, &parts.method, &parts.headers).is_ok();
    let Some(store) = s.store.clone() else {
        return error(
            StatusCode::CONFLICT,
            "waits need the run store; this server runs with `--no-store`",
        );
    };
    let k = key.clone();
    let found = tokio::task::spawn_blocking(move || {
        store.waits(&WaitFilter {
            open: true,
            key: Some(k),
            limit: Some(100),
            ..Default::default()
        })
    })
    .await;
    let waits: Vec<WaitRecord> = match found {
        Ok(Ok(w)) => w
            .into_iter()
            .filter(|w| w.request.mode == AskMode::Webhook)
            .collect(),
        Ok(Err(e)) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the store read failed"),
    };
    let waits: Vec<WaitRecord> = waits
        .into_iter()
        .filter(|w| event_allowed(&s, w, api_ok, &parts.headers, &body))
        .collect();
    if waits.is_empty() {
        // Whether a key has waits is told only to those who may answer them.
        return if api_ok {
            error(
                StatusCode::NOT_FOUND,
                format!("no run waits for an event with key `{key}`"),
            )
        } else {
            error(
                StatusCode::UNAUTHORIZED,
                "missing or invalid signature (X-Hub-Signature-256) or token for this event",
            )
        };
    }
    let mut resumed = Vec::new();
    for w in waits {
        let given = match given_of(&parts.headers, &body) {
            Ok(g) => g,
            Err(n) => return reply(Err(n)),
        };
        match take(
            &s,
            &w.run_id,
            &w.request.step_id,
            given,
            "event".into(),
            "event",
        )
        .await
        {
            Ok((_, v)) => resumed.push(v),
            Err(n) if resumed.is_empty() => return reply(Err(n)),
            Err(_) => {}
        }
    }
    (
        StatusCode::ACCEPTED,
        Json(json!({"key": key, "runs": resumed})),
    )
        .into_response()
}

/// A request the run API's guard lets through, and its body.
async fn guarded(
    s: &ServerState,
    req: Request<Body>,
) -> Result<(axum::http::request::Parts, axum::body::Bytes), Response> {
    let (parts, body) = req.into_parts();
    guard(s, &parts.method, &parts.headers).map_err(IntoResponse::into_response)?;
    let body = read_body(s, &parts.headers, body).await?;
    Ok((parts, body))
}

/// Whether an event may answer `w`: by the wait's `secret` (the body's
/// HMAC) or `token` (a bearer token), each `${VAR}` filled in from the
/// server's environment; a wait with neither takes what the API's guard lets
/// through.
fn event_allowed(
    s: &ServerState,
    w: &WaitRecord,
    api_ok: bool,
    headers: &HeaderMap,
    body: &[u8],
) -> bool {
    let served = s.served();
    let Some(ask) = served
        .workflows
        .iter()
        .find(|wf| wf.meta.id == w.workflow)
        .and_then(|wf| wf.ask(&w.request.step_id))
    else {
        return api_ok;
    };
    let filled = |t: &str| match crate::format::inputs::substitute_env(
        &Value::String(t.into()),
        &s.caps.env,
    ) {
        Value::String(v) if !v.is_empty() => Some(v),
        _ => None,
    };
    match (&ask.secret, &ask.token) {
        (None, None) => api_ok,
        (secret, token) => {
            secret
                .as_deref()
                .and_then(filled)
                .is_some_and(|sec| super::request::signature_ok(&sec, headers, body))
                || token
                    .as_deref()
                    .and_then(filled)
                    .is_some_and(|tok| super::request::bearer_matches(headers, &tok))
        }
    }
}

/// `GET /answer/{token}`: the form a link opens.
pub(super) async fn link_form(
    State(s): State<Arc<ServerState>>,
    UrlPath(token): UrlPath<String>,
) -> Response {
    let (claim, wait) = match link_wait(&s, &token).await {
        Ok(x) => x,
        Err(NotTaken(status, v)) => return page(status, "Cannot answer", &message_of(&v), None),
    };
    let who = claim.who.as_deref().unwrap_or("");
    page(
        StatusCode::OK,
        &title_of(&wait.request),
        "",
        Some((&wait.request, who)),
    )
}

/// `POST /answer/{token}`: the form's answer (form-encoded or JSON).
pub(super) async fn link_answer(
    State(s): State<Arc<ServerState>>,
    UrlPath(token): UrlPath<String>,
    req: Request<Body>,
) -> Response {
    let (parts, body) = req.into_parts();
    let body = match read_body(&s, &parts.headers, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (claim, wait) = match link_wait(&s, &token).await {
        Ok(x) => x,
        Err(n) => return link_reply(&parts.headers, Err(n)),
    };
    let given = match given_of(&parts.headers, &body) {
        Ok(g) => g,
        Err(n) => return link_reply(&parts.headers, Err(n)),
    };
    let by = claim.who.clone().unwrap_or_else(|| "link".into());
    let r = take(&s, &claim.run_id, &wait.request.step_id, given, by, "link").await;
    link_reply(&parts.headers, r)
}

/// The open wait a link names, if the link is good.
async fn link_wait(
    s: &Arc<ServerState>,
    token: &str,
) -> Result<(super::links::LinkClaim, WaitRecord), NotTaken> {
    let Some(links) = &s.links else {
        return Err(NotTaken::new(
            StatusCode::NOT_FOUND,
            "this server makes no links",
        ));
    };
    let claim = links
        .check(token, crate::store::now_ms())
        .map_err(|e| match e {
            LinkError::Forged => NotTaken::new(StatusCode::FORBIDDEN, e.to_string()),
            LinkError::Expired => NotTaken::new(StatusCode::GONE, e.to_string()),
        })?;
    let store = s
        .store
        .clone()
        .ok_or_else(|| NotTaken::new(StatusCode::CONFLICT, "waits need the run store"))?;
    let run_id = claim.run_id.clone();
    let waits = tokio::task::spawn_blocking(move || {
        store.waits(&WaitFilter {
            run_id: Some(run_id),
            ..Default::default()
        })
    })
    .await
    .map_err(|_| NotTaken::new(StatusCode::INTERNAL_SERVER_ERROR, "the store read failed"))?
    .map_err(|e| NotTaken::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let wait = waits
        .into_iter()
        .find(|w| w.request.step_id == claim.step_id)
        .ok_or_else(|| NotTaken::new(StatusCode::NOT_FOUND, "the run of this link is gone"))?;
    if wait.state != crate::store::WaitState::Open {
        return Err(NotTaken::new(
            StatusCode::CONFLICT,
            format!(
                "this was {} already; the link is used up",
                wait.state.as_str()
            ),
        ));
    }
    if claim
        .who
        .as_deref()
        .is_some_and(|who| wait.votes.iter().any(|v| v.by == who))
    {
        return Err(NotTaken::new(
            StatusCode::CONFLICT,
            "you answered this already; the link is used up",
        ));
    }
    Ok((claim, wait))
}

/// What a request gives: a JSON object, or a form's fields.
fn given_of(headers: &HeaderMap, body: &[u8]) -> Result<Given, NotTaken> {
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    let mut g = Given {
        values: Vec::new(),
        decision: None,
        comment: None,
    };
    if form {
        let text = String::from_utf8_lossy(body).replace('+', " ");
        for (k, v) in url_pairs(&text) {
            match k.as_str() {
                "decision" => g.decision = Some(v),
                "comment" => g.comment = Some(v).filter(|c| !c.is_empty()),
                // An empty box is a field not given.
                _ if v.is_empty() => {}
                _ => g.values.push((k, Supplied::Text(v))),
            }
        }
        return Ok(g);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(g);
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("decision", Value::String(d)) => g.decision = Some(d),
                    ("comment", Value::String(c)) => g.comment = Some(c),
                    ("comment", Value::Null) => {}
                    (_, v) => g.values.push((k, Supplied::Json(v))),
                }
            }
            Ok(g)
        }
        _ => Err(NotTaken::new(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object of field names to values (with `decision` and `comment` for an approval)",
        )),
    }
}

/// Checks and records an answer to step `step` of run `id`; the answer that
/// decides the wait resumes the run here.
async fn take(
    s: &Arc<ServerState>,
    id: &str,
    step: &str,
    given: Given,
    by: String,
    via: &str,
) -> Result<(StatusCode, Value), NotTaken> {
    let Some(store) = s.store.clone() else {
        return Err(NotTaken::new(
            StatusCode::CONFLICT,
            "waits need the run store; this server runs with `--no-store`",
        ));
    };
    let (st, want) = (store.clone(), id.to_string());
    let run = tokio::task::spawn_blocking(move || st.get_run(&want))
        .await
        .map_err(|_| NotTaken::new(StatusCode::INTERNAL_SERVER_ERROR, "the store read failed"))?
        .map_err(|e| match e {
            crate::store::StoreError::NotFound(_) => {
                NotTaken::new(StatusCode::NOT_FOUND, format!("no run `{id}`"))
            }
            e => NotTaken::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        })?;
    if run.status != RunStatus::Waiting {
        return Err(NotTaken::new(
            StatusCode::CONFLICT,
            format!(
                "run `{}` is not waiting for an answer (it is {})",
                run.id,
                run.shown_status()
            ),
        ));
    }
    let wf = served(s, &run.file).ok_or_else(|| {
        NotTaken::new(
            StatusCode::CONFLICT,
            format!(
                "this server does not serve `{}`, the run's workflow",
                run.file
            ),
        )
    })?;
    // A pause or an agent's tool call waits at no step of the file.
    let (fields, mode) = match (wf.ask(step), crate::engine::outside_wait(step)) {
        (Some(a), _) => (a.fields.clone(), a.mode),
        (None, Some(outside)) => outside,
        (None, None) => {
            return Err(NotTaken::new(
                StatusCode::NOT_FOUND,
                format!("`{}` has no `wait` step `{step}`", wf.source.name),
            ))
        }
    };
    let vote = vote_of(&fields, mode, given, by, via)?;
    let answer = AnswerIn {
        run_id: run.id.clone(),
        step_id: step.to_string(),
        vote,
    };
    let st = store.clone();
    let outcome = tokio::task::spawn_blocking(move || st.answer_wait(answer))
        .await
        .map_err(|_| NotTaken::new(StatusCode::INTERNAL_SERVER_ERROR, "the store write failed"))?
        .map_err(|e| NotTaken::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    match outcome {
        Answered::Resumes { answer } => {
            // On a shared store the run is back in the queue: a worker
            // serving its workflow (this process too) claims it.
            if store.shared().is_none() {
                resume(s, &run.id).await;
            }
            Ok((
                StatusCode::ACCEPTED,
                json!({"run_id": run.id, "step": step, "status": "resumed", "answered_by": answer.by, "decision": answer.decision, "location": format!("/runs/{}", run.id)}),
            ))
        }
        Answered::Counted { have, need } => Ok((
            StatusCode::ACCEPTED,
            json!({"run_id": run.id, "step": step, "status": "counted", "approvals": have, "needed": need}),
        )),
        Answered::Refused { why } => Err(NotTaken::new(StatusCode::FORBIDDEN, why)),
        Answered::Closed { state } => Err(NotTaken::new(
            StatusCode::CONFLICT,
            format!("step `{step}` of run `{}` was {state} already", run.id),
        )),
        Answered::NotFound => Err(NotTaken::new(
            StatusCode::NOT_FOUND,
            format!("run `{}` does not wait at step `{step}`", run.id),
        )),
    }
}

/// `POST /runs/{id}/pause`: a queued or running run of this server stops
/// before its next top-level step and waits, as at a `wait` step, until it
/// is resumed.
pub(super) async fn pause_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    req: Request<Body>,
) -> Response {
    let (parts, _) = match guarded(&s, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let live = s.runs.lock().ok().and_then(|runs| {
        runs.get(&id)
            .map(|e| (e.pause.clone(), super::api::entry_status(e).0))
    });
    match live {
        Some((pause, RunStatus::Queued | RunStatus::Running)) => {
            pause.store(true, std::sync::atomic::Ordering::SeqCst);
            (
                StatusCode::ACCEPTED,
                Json(json!({"run_id": id, "status": "pausing", "location": format!("/runs/{id}")})),
            )
                .into_response()
        }
        // Another process executes it (a worker, a CLI run, another
        // server; or it ended here and goes on elsewhere): asked through the
        // store, which that process looks at, and which knows its status.
        _ => {
            let Some(store) = s.store.clone() else {
                return error(
                    StatusCode::CONFLICT,
                    format!("run `{id}` is not running on this server"),
                );
            };
            let by = identity(&s, &parts.headers).unwrap_or_else(|| "api".into());
            let want = id.clone();
            match tokio::task::spawn_blocking(move || store.ask_pause(&want, &by)).await {
                Ok(Ok(crate::store::PauseAsked::Asked)) => (
                    StatusCode::ACCEPTED,
                    Json(json!({"run_id": id, "status": "pausing", "location": format!("/runs/{id}")})),
                )
                    .into_response(),
                Ok(Ok(crate::store::PauseAsked::NotRunning(status))) => error(
                    StatusCode::CONFLICT,
                    format!("run `{id}` is {}: only a queued or running run can be paused", status.as_str()),
                ),
                Ok(Ok(crate::store::PauseAsked::NotFound)) => {
                    error(StatusCode::NOT_FOUND, format!("no run `{id}`"))
                }
                Ok(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
                Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the store write failed"),
            }
        }
    }
}

/// `POST /runs/{id}/resume`: a paused run goes on from where it stopped
/// (the answer to its pause; who resumed it is kept).
pub(super) async fn resume_run(
    State(s): State<Arc<ServerState>>,
    UrlPath(id): UrlPath<String>,
    req: Request<Body>,
) -> Response {
    let (parts, _) = match guarded(&s, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let Some(store) = s.store.clone() else {
        return error(StatusCode::CONFLICT, "pauses need the run store");
    };
    let want = id.clone();
    let open = tokio::task::spawn_blocking(move || {
        store.waits(&WaitFilter {
            run_id: Some(want),
            open: true,
            ..Default::default()
        })
    })
    .await;
    let step = match open {
        Ok(Ok(w)) => w
            .into_iter()
            .find(|w| w.request.mode == AskMode::Pause)
            .map(|w| w.request.step_id),
        Ok(Err(e)) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "the store read failed"),
    };
    let Some(step) = step else {
        return error(StatusCode::CONFLICT, format!("run `{id}` is not paused"));
    };
    let given = Given {
        values: Vec::new(),
        decision: None,
        comment: None,
    };
    let by = identity(&s, &parts.headers).unwrap_or_else(|| "api".into());
    reply(take(&s, &id, &step, given, by, "api").await)
}

/// Who a request says it is: the gateway's identity header, when the
/// server names one.
fn identity(s: &ServerState, headers: &HeaderMap) -> Option<String> {
    s.api
        .identity_header
        .as_deref()
        .and_then(|h| headers.get(h))
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The served workflow of `file`.
fn served(s: &ServerState, file: &str) -> Option<Arc<Workflow>> {
    let path = std::path::PathBuf::from(file);
    s.served()
        .workflows
        .iter()
        .find(|w| std::path::absolute(&w.source.path).ok().as_deref() == Some(path.as_path()))
        .cloned()
}

/// The vote, its values checked against the fields as inputs are.
fn vote_of(
    fields: &[InputDef],
    mode: AskMode,
    g: Given,
    by: String,
    via: &str,
) -> Result<Vote, NotTaken> {
    let env = std::collections::BTreeMap::new();
    let values = crate::format::inputs::resolve_defs(
        fields,
        if fields.is_empty() && mode != AskMode::Form {
            Ok(())
        } else {
            Err("this step has no such field")
        },
        g.values,
        &env,
    )
    .map_err(|errs| {
        let fields: Vec<Value> = errs
            .iter()
            .map(|e| json!({"field": e.name, "message": e.message, "hint": e.hint}))
            .collect();
        let msg = errs
            .iter()
            .map(|e| e.to_string().replacen("input `", "field `", 1))
            .collect::<Vec<_>>()
            .join("; ");
        NotTaken(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"error": msg, "fields": fields}),
        )
    })?;
    let decision =
        match (mode, g.decision.as_deref()) {
            (AskMode::Approval, Some(d)) => Some(
                crate::store::wait::decision_word(d)
                    .ok_or_else(|| {
                        NotTaken::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            format!("`decision` must be `approve` or `reject`, not `{d}`"),
                        )
                    })?
                    .to_string(),
            ),
            (AskMode::Approval, None) => return Err(NotTaken::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "this step asks for an approval: send `\"decision\": \"approve\"` or `\"reject\"`",
            )),
            (_, Some(_)) => {
                return Err(NotTaken::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "`decision` answers `mode: approval` steps only",
                ))
            }
            (_, None) => None,
        };
    Ok(Vote {
        by,
        at: crate::store::now_ms(),
        decision,
        comment: g.comment,
        values,
        via: via.into(),
    })
}

/// Starts a run this process now owns (queued again by an answer or a
/// deadline) from its checkpoint.
pub(super) async fn resume(s: &Arc<ServerState>, run_id: &str) {
    let Some(store) = s.store.clone() else { return };
    let id = run_id.to_string();
    let run = match tokio::task::spawn_blocking(move || store.get_run(&id)).await {
        Ok(Ok(r)) => r,
        _ => {
            eprintln!("marktoflow: run {run_id} was answered but cannot be read now; it is resumed at the next start");
            return;
        }
    };
    let Some(wf) = served(s, &run.file) else {
        eprintln!(
            "marktoflow: run {run_id} is queued again but this server does not serve `{}`",
            run.file
        );
        return;
    };
    if let Err(why) = start_run(s, wf, Job::Resume(Box::new(run)), run_id.to_string()) {
        eprintln!("marktoflow: run {run_id} answered but not resumed now: {why}; it is resumed at the next start");
    }
}

/// Closes the waits whose deadline passed, every `every`, and resumes
/// their runs (their `on_timeout` decides what the step gives) until the
/// server stops.
pub async fn expire_waits(s: Arc<ServerState>, every: Duration) {
    let Some(store) = s.store.clone() else { return };
    let shared = store.shared().is_some();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = s.stopping.cancelled() => return,
        }
        let st = store.clone();
        let due =
            tokio::task::spawn_blocking(move || st.expire_waits(crate::store::now_ms())).await;
        match due {
            // On a shared store they are queued for the workers.
            Ok(Ok(ids)) if !shared => {
                for id in ids {
                    resume(&s, &id).await;
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("marktoflow: cannot look for expired waits: {e}"),
            Err(_) => {}
        }
    }
}

fn reply(r: Result<(StatusCode, Value), NotTaken>) -> Response {
    match r {
        Ok((status, v)) | Err(NotTaken(status, v)) => (status, Json(v)).into_response(),
    }
}

/// A link's answer: a page for a browser, JSON for a program.
fn link_reply(headers: &HeaderMap, r: Result<(StatusCode, Value), NotTaken>) -> Response {
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json") && !a.contains("text/html"));
    if wants_json {
        return reply(r);
    }
    match r {
        Ok((status, v)) => {
            let what = match v["status"].as_str() {
                Some("counted") => format!(
                    "Your approval is recorded ({} of {}).",
                    v["approvals"], v["needed"]
                ),
                _ => "Your answer is recorded; the run goes on.".into(),
            };
            page(status, "Thank you", &what, None)
        }
        Err(NotTaken(status, v)) => page(status, "Not recorded", &message_of(&v), None),
    }
}

fn message_of(v: &Value) -> String {
    v["error"].as_str().unwrap_or("").to_string()
}

fn title_of(w: &WaitRequest) -> String {
    w.title.clone().unwrap_or_else(|| w.step_name.clone())
}

/// A small page: a message, or the form of a wait.
fn page(
    status: StatusCode,
    title: &str,
    message: &str,
    form: Option<(&WaitRequest, &str)>,
) -> Response {
    let mut body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{t}</title>\
         <style>body{{font:16px system-ui,sans-serif;max-width:36em;margin:2em auto;padding:0 1em}}label{{display:block;margin:1em 0 .3em;font-weight:600}}\
         input,select,textarea{{width:100%;padding:.4em;font:inherit}}button{{margin:1.2em .5em 0 0;padding:.5em 1.2em;font:inherit}}.p{{white-space:pre-wrap}}</style></head><body><h1>{t}</h1>",
        t = esc(title)
    );
    if !message.is_empty() {
        body.push_str(&format!("<p>{}</p>", esc(message)));
    }
    if let Some((w, who)) = form {
        if let Some(p) = &w.prompt {
            body.push_str(&format!("<p class=\"p\">{}</p>", esc(p)));
        }
        if !who.is_empty() {
            body.push_str(&format!("<p>Answering as <b>{}</b>.</p>", esc(who)));
        }
        body.push_str("<form method=\"post\">");
        for f in &w.fields {
            let label = f.description.clone().unwrap_or_else(|| f.name.clone());
            let req = if f.required { " required" } else { "" };
            body.push_str(&format!(
                "<label for=\"f-{n}\">{l}</label>",
                n = esc(&f.name),
                l = esc(&label)
            ));
            match (&f.choices, f.ty.as_str()) {
                (Some(choices), _) => {
                    body.push_str(&format!("<select id=\"f-{n}\" name=\"{n}\"{req}><option value=\"\"></option>", n = esc(&f.name)));
                    for c in choices {
                        let c = match c {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        body.push_str(&format!("<option>{}</option>", esc(&c)));
                    }
                    body.push_str("</select>");
                }
                (None, "boolean") => body.push_str(&format!(
                    "<select id=\"f-{n}\" name=\"{n}\"{req}><option value=\"\"></option><option>true</option><option>false</option></select>",
                    n = esc(&f.name)
                )),
                (None, "number" | "integer") => {
                    let bound = |k: &str, v: Option<f64>| v.map(|x| format!(" {k}=\"{x}\"")).unwrap_or_default();
                    body.push_str(&format!(
                        "<input id=\"f-{n}\" name=\"{n}\" type=\"number\" step=\"any\"{}{}{req}>",
                        bound("min", f.min),
                        bound("max", f.max),
                        n = esc(&f.name)
                    ));
                }
                (None, "string") => body.push_str(&format!("<input id=\"f-{n}\" name=\"{n}\"{req}>", n = esc(&f.name))),
                (None, _) => body.push_str(&format!("<textarea id=\"f-{n}\" name=\"{n}\" rows=\"4\"{req}></textarea>", n = esc(&f.name))),
            }
        }
        if w.mode == AskMode::Approval {
            body.push_str("<label for=\"f-comment\">Comment</label><textarea id=\"f-comment\" name=\"comment\" rows=\"3\"></textarea>");
            body.push_str("<button name=\"decision\" value=\"approve\">Approve</button><button name=\"decision\" value=\"reject\">Reject</button>");
        } else {
            body.push_str("<button>Send</button>");
        }
        body.push_str("</form>");
    }
    body.push_str("</body></html>");
    let mut r = (status, Html(body)).into_response();
    // The page holds a one-time credential: never cached, never framed.
    let h = r.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    h.insert("x-frame-options", header::HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    r
}

use crate::template::html_escape as esc;
