//! Webhook routes compiled from the workflows' `webhook` triggers: paths,
//! methods, and authentication that fails closed.

use crate::diag::{Diagnostic, Pos};
use crate::format::inputs::{self, Supplied};
use crate::format::model::Workflow;
use axum::http::Method;
use serde_json::Value;
use std::sync::Arc;

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
    /// `events:` — only these events start a run (`pull_request.opened`,
    /// or `pull_request` for every action of it); empty: every request.
    pub events: Vec<String>,
    /// Where its trigger is written.
    pub pos: Pos,
}

impl Route {
    /// The values of the route's `:name` segments when `path` is one of
    /// its paths (`/api/robots/:robot_id/context/latest` matches
    /// `/api/robots/r2/context/latest` with `robot_id` = `r2`); a segment
    /// matches one non-empty segment, percent-decoded.
    pub fn matches(&self, path: &str) -> Option<Vec<(String, String)>> {
        if self.path == path {
            return Some(Vec::new());
        }
        if !self.path.contains("/:") {
            return None;
        }
        let mine: Vec<&str> = self.path.split('/').collect();
        let theirs: Vec<&str> = path.split('/').collect();
        if mine.len() != theirs.len() {
            return None;
        }
        let mut params = Vec::new();
        for (m, t) in mine.iter().zip(&theirs) {
            match m.strip_prefix(':') {
                Some(name) if !name.is_empty() => {
                    if t.is_empty() {
                        return None;
                    }
                    // `+` is itself in a path, not a space as in a query.
                    let v = super::request::percent_decode(&t.replace('+', "%2B"));
                    params.push((name.to_string(), v));
                }
                _ if m == t => {}
                _ => return None,
            }
        }
        Some(params)
    }

    /// How many of its segments are written out (not `:name`): the route
    /// that spells more of a path wins.
    pub fn literal_segments(&self) -> usize {
        self.path.split('/').filter(|s| !s.starts_with(':')).count()
    }
}

/// A path with its parameters' names blanked: two routes with one shape
/// take the same requests.
fn shape(path: &str) -> String {
    path.split('/')
        .map(|s| if s.starts_with(':') { ":" } else { s })
        .collect::<Vec<_>>()
        .join("/")
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
        for t in wf
            .triggers
            .iter()
            .filter(|t| t.kind == crate::format::model::TriggerKind::Webhook)
        {
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
            if let Some(reserved) = reserved_path(&path) {
                errors.push(
                    Diagnostic::error(
                        &wf.source,
                        Some(t.pos),
                        format!("webhook `path:` `{path}` is the server's own ({reserved})"),
                    )
                    .with_hint("give the webhook another `path:`, e.g. `/hooks/my-workflow`"),
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
            // Each `:name` segment fills the input of that name.
            if let Some(name) = path
                .split('/')
                .filter_map(|s| s.strip_prefix(':'))
                .find(|n| wf.input(n).is_none())
            {
                errors.push(
                    Diagnostic::error(
                        &wf.source,
                        Some(t.pos),
                        if name.is_empty() {
                            format!("webhook `path:` `{path}`: a `:` segment needs a name (`:robot_id`)")
                        } else {
                            format!("webhook `path:` `{path}`: `:{name}` names no input of the workflow")
                        },
                    )
                    .with_hint("a `:name` segment of the path fills the input `name`: declare it under `inputs:`"),
                );
                continue;
            }
            if let Some(other) = routes
                .iter()
                .find(|r| shape(&r.path) == shape(&path) && r.method == method)
            {
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
            let input_mapping = input_mapping(t);
            let events = match t.fields.get("events") {
                None => Vec::new(),
                Some(Value::Array(list)) if list.iter().all(Value::is_string) => list
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
                Some(Value::String(one)) => vec![one.clone()],
                Some(_) => {
                    errors.push(Diagnostic::error(
                        &wf.source,
                        Some(t.pos),
                        "`events` must be a list of event names, e.g. `[pull_request.opened]`",
                    ));
                    continue;
                }
            };
            routes.push(Route {
                path,
                method,
                workflow: wf.clone(),
                secret,
                token,
                input_mapping,
                respond_async: f("response").as_deref() == Some("async"),
                events,
                pos: t.pos,
            });
        }
    }
    if errors.is_empty() {
        Ok(routes)
    } else {
        Err(errors)
    }
}

/// What the server itself answers at `path`, when it does.
fn reserved_path(path: &str) -> Option<&'static str> {
    let path = path.trim_end_matches('/');
    let under = |p: &str| path == p || path.starts_with(&format!("{p}/"));
    if path == "/health" {
        Some("its health check")
    } else if path == "/metrics" {
        Some("its metrics")
    } else if under("/runs") || under("/workflows") || under("/waits") {
        Some("the run API")
    } else if under("/answer") || under("/events") {
        Some("the answers to waiting runs")
    } else if under("/console") {
        Some("the console")
    } else if under("/mcp") {
        Some("the MCP endpoint")
    } else {
        None
    }
}

/// A webhook trigger's `inputMapping`: input name → dotted path into the body.
pub fn input_mapping(t: &crate::format::model::Trigger) -> Vec<(String, String)> {
    match t
        .fields
        .get("inputMapping")
        .or_else(|| t.fields.get("input_mapping"))
    {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
            .collect(),
        _ => Vec::new(),
    }
}

/// The event a webhook request carries: GitHub's `X-GitHub-Event` header,
/// else the body's `event.event_type` (PagerDuty), `event` or `type`; with
/// the body's `action` appended (`pull_request.opened`) when it has one.
pub fn event_of(headers: &axum::http::HeaderMap, body: &Value) -> Option<String> {
    let name = headers
        .get("x-github-event")
        .or_else(|| headers.get("x-event-type"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            let e = body.get("event");
            e.and_then(|e| e.get("event_type"))
                .or(e)
                .or_else(|| body.get("type"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })?;
    match body.get("action").and_then(Value::as_str) {
        Some(action) if !name.contains('.') => Some(format!("{name}.{action}")),
        _ => Some(name),
    }
}

/// Whether `event` is one `wanted` names (`pull_request` names every
/// `pull_request.*`).
pub fn event_wanted(wanted: &[String], event: &str) -> bool {
    wanted.iter().any(|w| {
        w == event
            || w == "*"
            || event
                .strip_prefix(w.as_str())
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// The value at a dotted path (`payload.a.b.0`) of a request body.
pub fn dotted<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
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

/// The inputs a webhook request supplies to `wf`: the query string's
/// values, then the body's fields of the same names, then `inputMapping`;
/// a workflow without inputs gets the whole body as `payload`. `marktoflow
/// run --event` reads a saved body the same way.
pub fn request_inputs(
    wf: &Workflow,
    input_mapping: &[(String, String)],
    payload: &Value,
    query: &[(String, String)],
) -> Vec<(String, Supplied)> {
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
    for (name, path) in input_mapping {
        if let Some(v) = dotted(payload, path) {
            put(name, Supplied::Json(v.clone()));
        }
    }
    if wf.inputs.is_empty() {
        put("payload", Supplied::Json(payload.clone()));
    }
    supplied
}

/// Headers a workflow never sees: credentials.
const HIDDEN_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-hub-signature",
    "x-hub-signature-256",
    "x-signature",
];

/// What a run started by a request knows of it, as `trigger` in templates
/// and scripts: `{type: webhook, method, path, headers, query, body,
/// event}`. Header names are lower case; credentials are left out.
pub fn request_context(
    method: &Method,
    path: &str,
    headers: &axum::http::HeaderMap,
    query: &[(String, String)],
    body: &Value,
    event: Option<&str>,
) -> Value {
    let mut h = serde_json::Map::new();
    for (name, value) in headers {
        let name = name.as_str().to_ascii_lowercase();
        if HIDDEN_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        // A repeated header reads as its values joined, as HTTP allows.
        match h.get_mut(&name) {
            Some(Value::String(prev)) => {
                prev.push_str(", ");
                prev.push_str(&value);
            }
            _ => {
                h.insert(name, Value::String(value));
            }
        }
    }
    let q: serde_json::Map<String, Value> = query
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    serde_json::json!({"type": "webhook", "method": method.as_str(), "path": path,
                       "headers": h, "query": q, "body": body, "event": event})
}

/// The variable names a `${NAME}` / `${NAME:-default}` text refers to.
pub(super) fn env_names(text: &str) -> Vec<String> {
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
