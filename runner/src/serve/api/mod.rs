//! The run API behind the console, usable on its own: runs listed with
//! filters and pages, one run with its steps, cancel, retry from a step,
//! the served workflows with their inputs, triggers and graph, and starting
//! a run. Guarded by [`ApiAccess`]: loopback only (Host and Origin checked)
//! unless a bearer token is configured.

mod control;
mod runs;
mod workflows;

pub(super) use control::{cancel_run, retry_run};
pub(super) use runs::{entry_status, get_run, list_runs, run_json};
pub(super) use workflows::{
    get_workflow, list_workflows, metrics, replay_workflow_run, start_workflow_run,
};

use super::request::{bearer_matches, error};
use super::ServerState;
use crate::format::model::Workflow;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;

/// Who may use the run API and the console.
#[derive(Clone, Debug, Default)]
pub struct ApiAccess {
    /// Requests must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// The server listens on a loopback address only.
    pub loopback: bool,
    /// The header a gateway in front sets to the person's identity (who
    /// answers a wait); trusted only on requests the guard lets through.
    pub identity_header: Option<String>,
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
pub(in crate::serve) fn guard(
    s: &ServerState,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
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

fn accepted(run_id: &str, extra: Value) -> Response {
    let mut body =
        json!({"run_id": run_id, "status": "accepted", "location": format!("/runs/{run_id}")});
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::super::request::url_pairs;
    use super::runs::{run_filter, step_tree, StepView};
    use super::*;
    use crate::store::RunStatus;

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
        assert_eq!(f.status, Some(RunStatus::Failed));
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
            inputs: None,
            usage: None,
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
