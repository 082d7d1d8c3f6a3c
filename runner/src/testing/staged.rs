//! `marktoflow run --staged`: every read and every model call is made, but
//! the writes — actions that change what outlives the run (`file.write`,
//! memory stores: [`Traits::writes`]) and HTTP calls other than GET and
//! HEAD, the MCP tools a workflow marks with `writes:` — are recorded
//! instead of made, and listed when the run ends, for a person to look over
//! before running it for real. Other MCP tools and scripts run as they are.
//!
//! [`Traits::writes`]: marktoflow_steps::core::catalog::Traits::writes

use marktoflow_steps::core::error::ActionError;
use marktoflow_steps::core::mcp::ServerConfig;
use marktoflow_steps::registry::{ActionKind, Resolved};
use serde_json::{json, Value};
use std::sync::Mutex;

/// The writes a staged run held back, in order.
#[derive(Default)]
pub struct Staged {
    held: Mutex<Vec<Value>>,
}

impl Staged {
    /// `[{step, action, inputs}]`.
    pub fn held(&self) -> Vec<Value> {
        self.held.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

/// Whether a call of `resolved` with `inputs` writes.
pub fn writes(resolved: &Resolved, inputs: &Value) -> bool {
    if resolved.spec.traits.writes {
        return true;
    }
    if resolved.kind == ActionKind::Process {
        // An MCP server's tool the workflow marks as writing.
        return resolved
            .tool
            .as_ref()
            .filter(|t| t.sdk == "mcp")
            .and_then(|t| ServerConfig::from_options(&t.options).ok())
            .is_some_and(|c| c.writes(&resolved.method));
    }
    if resolved.kind != ActionKind::Network {
        return false;
    }
    let method = match resolved.method.as_str() {
        "request" => inputs
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("GET")
            .to_ascii_uppercase(),
        m => m.to_ascii_uppercase(),
    };
    !matches!(method.as_str(), "GET" | "HEAD")
}

impl crate::engine::Mocks for Staged {
    fn instead(
        &self,
        step_id: &str,
        action: &str,
        resolved: &Resolved,
        inputs: &Value,
    ) -> Option<Result<Value, ActionError>> {
        if !writes(resolved, inputs) {
            return None;
        }
        if let Ok(mut held) = self.held.lock() {
            held.push(json!({"step": step_id, "action": action, "inputs": inputs}));
        }
        // What the steps after it see: that it was held back.
        Some(Ok(json!({"staged": true, "action": action})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Mocks as _;

    #[test]
    fn writes_are_held_and_reads_go_through() {
        let r = marktoflow_steps::Registry::standard();
        let s = Staged::default();
        let call = |action: &str, inputs: Value| {
            let resolved = r.resolve(action, &[]).unwrap();
            s.instead("x", action, &resolved, &inputs).is_some()
        };
        assert!(call("file.write", json!({"path": "a", "content": "b"})));
        assert!(call("http.post", json!({"url": "https://a.example"})));
        assert!(call(
            "http.request",
            json!({"url": "https://a.example", "method": "delete"})
        ));
        assert!(!call("http.request", json!({"url": "https://a.example"})));
        assert!(!call("http.get", json!({"url": "https://a.example"})));
        assert!(!call("file.read", json!({"path": "a"})));
        assert!(call("memory.remember", json!({"content": "c"})));
        assert_eq!(s.held().len(), 4);
        assert_eq!(s.held()[1]["action"], "http.post");
        // An MCP server's tools: those marked `writes` are held back.
        let gh = marktoflow_steps::ToolConfig {
            name: "gh".into(),
            sdk: "mcp".into(),
            auth: Default::default(),
            options: json!({"command": "gh-mcp", "writes": ["create_issue"]})
                .as_object()
                .unwrap()
                .clone(),
        };
        let mcp = |action: &str| {
            let resolved = r.resolve(action, std::slice::from_ref(&gh)).unwrap();
            s.instead("x", action, &resolved, &json!({})).is_some()
        };
        assert!(mcp("gh.create_issue"));
        assert!(!mcp("gh.list_issues"));
        assert_eq!(s.held().len(), 5);
    }
}
