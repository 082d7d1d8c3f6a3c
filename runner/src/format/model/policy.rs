//! Error handling: `on_error`, `errorHandling` and `retry` blocks into one
//! [`ErrorPolicy`].

use super::text::{camel_case, snake_case};
use super::{Backoff, Cx, ErrorPolicy, OnError};
use crate::diag::{did_you_mean, Pos};
use serde_json::{Map, Value};

impl Cx<'_> {
    /// `error_handling`/`errorHandling`/`on_error` (snake_case or the peer's
    /// camelCase keys inside), then the peer examples' `retry:` for what
    /// those left unset. `field` gives the position of a key path.
    pub(super) fn error_policy(
        &mut self,
        m: &Map<String, Value>,
        field: &dyn Fn(&[&str]) -> Pos,
    ) -> ErrorPolicy {
        let mut pol = ErrorPolicy::default();
        let key = ["error_handling", "errorHandling", "on_error"]
            .into_iter()
            .find(|k| m.contains_key(*k));
        if let Some(key) = key {
            self.error_handling(key, &m[key], field, &mut pol);
        }
        if let Some(r) = m.get("retry") {
            self.retry_block(r, field, &mut pol);
        }
        pol
    }
    pub(super) fn error_action(&mut self, s: &str, at: Pos) -> Option<OnError> {
        match s {
            "stop" | "fail" | "fallback" => Some(OnError::Stop),
            "continue" | "skip" | "ignore" => Some(OnError::Continue),
            other => {
                let hint = did_you_mean(other, &["stop", "continue", "fallback"]);
                let d = self.err(at, format!("unknown error action `{other}`"));
                d.hints.push(match hint {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => "expected `stop`, `continue` or `fallback`".into(),
                });
                None
            }
        }
    }
    pub(super) fn error_handling(
        &mut self,
        key: &str,
        v: &Value,
        field: &dyn Fn(&[&str]) -> Pos,
        pol: &mut ErrorPolicy,
    ) {
        const EH_KEYS: &[&str] = &[
            "action",
            "max_retries",
            "retry_delay_seconds",
            "backoff",
            "max_delay_seconds",
            "fallback_action",
        ];
        let o = match v {
            Value::String(s) => {
                if let Some(a) = self.error_action(s, field(&[key])) {
                    pol.action = a;
                }
                return;
            }
            Value::Object(o) => o,
            _ => {
                self.err(
                    field(&[key]),
                    format!("`{key}` must be `stop`, `continue` or a mapping"),
                );
                return;
            }
        };
        // The peer reads camelCase here (`maxRetries`); both spellings work.
        let mut written: Map<String, Value> = Map::new();
        let mut spelled: Vec<(&'static str, String)> = Vec::new();
        for (k, val) in o {
            let snake = snake_case(k);
            match EH_KEYS.iter().find(|c| **c == snake) {
                Some(c) => {
                    written.insert(c.to_string(), val.clone());
                    spelled.push((c, k.clone()));
                }
                None => {
                    // Suggest in the spelling the author uses.
                    let camel = k.chars().any(|c| c.is_ascii_uppercase());
                    let hint = did_you_mean(&snake, EH_KEYS).map(|c| {
                        let c = if camel { camel_case(c) } else { c.to_string() };
                        format!("did you mean `{c}`?")
                    });
                    let d = self.err(field(&[key, k]), format!("unknown key `{k}` in `{key}`"));
                    d.hints.push(
                        hint.unwrap_or_else(|| format!("expected one of: {}", EH_KEYS.join(", "))),
                    );
                }
            }
        }
        // The key as the author spelled it.
        let spelled_as = |name: &'static str| -> String {
            spelled
                .iter()
                .find(|(c, _)| *c == name)
                .map_or(name.to_string(), |(_, k)| k.clone())
        };
        let at = |name: &'static str| field(&[key, &spelled_as(name)]);
        if let Some(a) = written.get("action") {
            match a.as_str() {
                Some(a) => {
                    if let Some(a) = self.error_action(a, at("action")) {
                        pol.action = a;
                    }
                }
                None => {
                    self.err(
                        at("action"),
                        "`action` must be `stop`, `continue` or `fallback`",
                    );
                }
            }
        }
        let wants_fallback = written.get("action").and_then(Value::as_str) == Some("fallback");
        match written.get("fallback_action") {
            Some(Value::String(fa)) => match self.registry.resolve(fa, &self.tools) {
                Ok(r) => pol.fallback = Some((fa.clone(), Box::new(r))),
                Err(e) => {
                    if self.first_report(&e) {
                        let d = self.err(
                            at("fallback_action"),
                            format!("`{}`: {}", spelled_as("fallback_action"), e.message),
                        );
                        d.hints.extend(e.hint);
                    }
                }
            },
            Some(_) => {
                self.err(
                    at("fallback_action"),
                    format!(
                        "`{}` must be an action name like `core.set`",
                        spelled_as("fallback_action")
                    ),
                );
            }
            None if wants_fallback => {
                self.err(
                    at("action"),
                    "`action: fallback` needs `fallback_action: tool.method`",
                );
            }
            None => {}
        }
        if let Some(v) = written.get("max_retries") {
            match v.as_u64() {
                Some(n) => pol.max_retries = Some(n.min(100) as u32),
                None => {
                    self.err(
                        at("max_retries"),
                        format!("`{}` must be a whole number", spelled_as("max_retries")),
                    );
                }
            }
        }
        for name in ["retry_delay_seconds", "max_delay_seconds"] {
            let Some(v) = written.get(name) else { continue };
            let d = v.as_f64().and_then(marktoflow_steps::core::time::from_secs);
            if d.is_none() {
                self.err(
                    at(name),
                    format!(
                        "`{}` must be a number of seconds from 0 to 100 years",
                        spelled_as(name)
                    ),
                );
            }
            if name == "retry_delay_seconds" {
                pol.retry_delay = d;
            } else {
                pol.max_delay = d;
            }
        }
        if let Some(b) = written.get("backoff") {
            if let Some(b) = self.backoff(b, at("backoff")) {
                pol.backoff = b;
            }
        }
    }
    pub(super) fn backoff(&mut self, v: &Value, at: Pos) -> Option<Backoff> {
        match v.as_str() {
            Some("fixed" | "constant") => Some(Backoff::Fixed),
            Some("exponential" | "linear") => Some(Backoff::Exponential),
            _ => {
                let d = self.err(at, "`backoff` must be `exponential` or `fixed`");
                d.hints.push("`linear` is read as `exponential`".into());
                None
            }
        }
    }
    /// The peer examples' `retry: {max_attempts, delay, initial_delay,
    /// max_delay, backoff, on_failure}` (delays in milliseconds): fills what
    /// `error_handling` left unset.
    pub(super) fn retry_block(
        &mut self,
        v: &Value,
        field: &dyn Fn(&[&str]) -> Pos,
        pol: &mut ErrorPolicy,
    ) {
        const KEYS: &[&str] = &[
            "max_attempts",
            "delay",
            "initial_delay",
            "max_delay",
            "backoff",
            "on_failure",
        ];
        let Value::Object(o) = v else {
            self.err(
                field(&["retry"]),
                "`retry` must be a mapping like `{max_attempts: 3, delay: 1000}`",
            );
            return;
        };
        for (k, val) in o {
            let at = field(&["retry", k]);
            match snake_case(k).as_str() {
                "max_attempts" => match val.as_u64() {
                    Some(n) if n >= 1 => {
                        pol.max_retries.get_or_insert((n - 1).min(100) as u32);
                    }
                    _ => {
                        self.err(at, "`max_attempts` must be a whole number from 1");
                    }
                },
                name @ ("delay" | "initial_delay" | "max_delay") => {
                    match val
                        .as_f64()
                        .and_then(|ms| marktoflow_steps::core::time::from_secs(ms / 1000.0))
                    {
                        Some(d) if name == "max_delay" => {
                            pol.max_delay.get_or_insert(d);
                        }
                        Some(d) => {
                            pol.retry_delay.get_or_insert(d);
                        }
                        None => {
                            self.err(at, format!("`{name}` must be a number of milliseconds"));
                        }
                    }
                }
                "backoff" => {
                    if let Some(b) = self.backoff(val, at) {
                        pol.backoff = b;
                    }
                }
                "on_failure" => match val.as_str() {
                    Some(a) => {
                        if let Some(a) = self.error_action(a, at) {
                            pol.action = a;
                        }
                    }
                    None => {
                        self.err(at, "`on_failure` must be `stop` or `continue`");
                    }
                },
                _ => {
                    let hint = did_you_mean(k, KEYS).map(|c| format!("did you mean `{c}`?"));
                    let d = self.err(at, format!("unknown key `{k}` in `retry`"));
                    d.hints.push(
                        hint.unwrap_or_else(|| format!("expected one of: {}", KEYS.join(", "))),
                    );
                }
            }
        }
    }
}
