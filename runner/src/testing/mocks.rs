//! A case's mocks standing in for actions ([`crate::engine::Mocks`]), and
//! every call the run made, mocked or not, for the case's assertions
//! (`calls['http.post'][0].json.amount`).

use super::spec::Mock;
use marktoflow_steps::core::error::ActionError;
use marktoflow_steps::registry::ActionKind;
use serde_json::{Map, Value};
use std::sync::Mutex;

/// The mocks of one case run.
pub struct CaseMocks {
    mocks: Vec<Mock>,
    /// Unmocked agent, HTTP and process calls are made (`--live`).
    live: bool,
    calls: Mutex<Vec<Called>>,
}

/// One action call of the run.
#[derive(Debug, Clone)]
pub struct Called {
    pub step: String,
    pub action: String,
    pub inputs: Value,
}

impl CaseMocks {
    pub fn new(mocks: Vec<Mock>, live: bool) -> Self {
        CaseMocks {
            mocks,
            live,
            calls: Mutex::default(),
        }
    }

    /// The calls made, by step id and by action: `{id: [inputs…]}`.
    pub fn calls(&self) -> Map<String, Value> {
        let mut out: Map<String, Value> = Map::new();
        for c in self.calls.lock().map(|c| c.clone()).unwrap_or_default() {
            for key in [c.step, c.action] {
                if let Value::Array(list) =
                    out.entry(key).or_insert_with(|| Value::Array(Vec::new()))
                {
                    list.push(c.inputs.clone());
                }
            }
        }
        out
    }
}

/// Whether a mock for `name` (`http.post`, or a family `http.*`) stands in
/// for `action`.
fn names(name: &str, action: &str) -> bool {
    match name.strip_suffix(".*") {
        Some(family) => action.split('.').next() == Some(family),
        None => name == action,
    }
}

/// Whether `got` holds every value of `want` (objects: at any depth).
pub fn holds(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            w.iter().all(|(k, v)| g.get(k).is_some_and(|x| holds(x, v)))
        }
        // A number is a number, whatever its written form (1 and 1.0).
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => got == want,
    }
}

impl crate::engine::Mocks for CaseMocks {
    fn instead(
        &self,
        step_id: &str,
        action: &str,
        resolved: &marktoflow_steps::registry::Resolved,
        inputs: &Value,
    ) -> Option<Result<Value, ActionError>> {
        let kind = resolved.kind;
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(Called {
                step: step_id.to_string(),
                action: action.to_string(),
                inputs: inputs.clone(),
            });
        }
        let when = |m: &Mock| holds(inputs, &Value::Object(m.when.clone()));
        // A step's own mock first, then the action's.
        let found = self
            .mocks
            .iter()
            .find(|m| m.step.as_deref() == Some(step_id) && when(m))
            .or_else(|| {
                self.mocks.iter().find(|m| {
                    m.step.is_none()
                        && m.action.as_deref().is_some_and(|a| names(a, action))
                        && when(m)
                })
            });
        if let Some(m) = found {
            return Some(m.result.clone().map_err(ActionError::failed));
        }
        let outside = matches!(
            kind,
            ActionKind::Agent | ActionKind::Network | ActionKind::Process
        );
        (outside && !self.live).then(|| {
            Err(ActionError::Input(format!(
                "`{action}` at step `{step_id}` is not mocked: a test makes no model, network or program call unless `--live` (add `mocks: [{{step: {step_id}, returns: …}}]`)"
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Mocks as _;
    use serde_json::json;

    fn mock(step: Option<&str>, action: Option<&str>, when: Value, result: Value) -> Mock {
        Mock {
            step: step.map(str::to_string),
            action: action.map(str::to_string),
            when: when.as_object().cloned().unwrap_or_default(),
            result: Ok(result),
        }
    }

    #[test]
    fn a_steps_mock_wins_then_the_actions_whose_inputs_hold() {
        let m = CaseMocks::new(
            vec![
                mock(
                    None,
                    Some("http.*"),
                    json!({"url": "https://a.example"}),
                    json!("any a"),
                ),
                mock(None, Some("http.get"), json!({}), json!("a get")),
                mock(Some("fetch"), None, json!({}), json!("the step's")),
            ],
            false,
        );
        let registry = marktoflow_steps::Registry::standard();
        let call = |step: &str, action: &str, inputs: Value| {
            let resolved = registry.resolve(action, &[]).unwrap();
            m.instead(step, action, &resolved, &inputs)
                .map(|r| r.map_err(|e| e.to_string()))
        };
        assert_eq!(
            call("fetch", "http.get", json!({"url": "https://a.example"})),
            Some(Ok(json!("the step's")))
        );
        assert_eq!(
            call(
                "x",
                "http.post",
                json!({"url": "https://a.example", "json": {}})
            ),
            Some(Ok(json!("any a")))
        );
        assert_eq!(
            call("y", "http.get", json!({"url": "https://b.example"})),
            Some(Ok(json!("a get")))
        );
        assert!(
            matches!(call("z", "http.post", json!({"url": "https://b.example"})), Some(Err(e)) if e.contains("is not mocked"))
        );
        // Pure actions run for real.
        let set = registry.resolve("core.set", &[]).unwrap();
        assert!(m.instead("s", "core.set", &set, &json!({})).is_none());
        let calls = m.calls();
        assert_eq!(calls["http.get"].as_array().unwrap().len(), 2);
        assert_eq!(calls["fetch"][0]["url"], "https://a.example");
    }
}
