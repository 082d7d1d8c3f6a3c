//! A webhook request replayed without its sender: `run --event` and the
//! console's "start from a request body" give a saved body (and the headers
//! the sender would send) to a webhook workflow, taken as its trigger takes
//! a request: its `events` filter and `inputMapping` apply, its
//! authentication does not (nobody is sending).

use crate::format::inputs::Supplied;
use crate::format::model::Workflow;
use axum::http::{HeaderMap, Method};
use serde_json::Value;

/// Why a replayed request would not start a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("`{workflow}` has no webhook trigger")]
    NoWebhook { workflow: String },
    /// The trigger's `events:` leave this request out.
    #[error("the trigger runs on {} and would ignore this request (its event: {})", wanted.join(", "), event.as_deref().unwrap_or("none"))]
    Ignored {
        wanted: Vec<String>,
        event: Option<String>,
    },
}

/// The inputs `body` (with `headers`) gives `wf` through its first enabled
/// webhook trigger, and what the run sees as `trigger`.
pub fn replayed(
    wf: &Workflow,
    headers: &HeaderMap,
    body: &Value,
) -> Result<(Vec<(String, Supplied)>, Value), ReplayError> {
    let Some(t) = wf.triggers.iter().find(|t| {
        t.kind == crate::format::model::TriggerKind::Webhook
            && t.fields.get("enabled") != Some(&Value::Bool(false))
    }) else {
        return Err(ReplayError::NoWebhook {
            workflow: wf.source.name.clone(),
        });
    };
    let field = |k: &str| t.fields.get(k).and_then(Value::as_str);
    let event = super::event_of(headers, body);
    let wanted: Vec<String> = match t.fields.get("events") {
        Some(Value::Array(l)) => l
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    if !wanted.is_empty()
        && !event
            .as_deref()
            .is_some_and(|e| super::event_wanted(&wanted, e))
    {
        return Err(ReplayError::Ignored { wanted, event });
    }
    let method = Method::from_bytes(
        field("method")
            .unwrap_or("POST")
            .to_ascii_uppercase()
            .as_bytes(),
    )
    .unwrap_or(Method::POST);
    let path = field("path").unwrap_or("/");
    let context = super::request_context(&method, path, headers, &[], body, event.as_deref());
    let supplied = super::request_inputs(wf, &super::input_mapping(t), body, &[]);
    Ok((supplied, context))
}
