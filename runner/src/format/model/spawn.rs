//! The peer's parallel agents: `action: parallel.spawn` (several agents at
//! once, each with its own prompt) and `action: parallel.map` (one agent
//! prompt over a list of items). Each agent becomes an agent step calling
//! `<provider>.chat.completions` with the prompt as the user's message, so
//! its provider resolves against the workflow's tools like any action.

use super::{Cx, Spans, SpawnOnError, SpawnWait, Step, StepKind};
use crate::diag::Pos;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The actions read here: `parallel.spawn`, `parallel.map`.
pub(super) const PARALLEL_AGENTS: &[&str] = &["parallel.spawn", "parallel.map"];

/// What the peer waits for when `timeout` is not given.
const DEFAULT_TIMEOUT: &str = "60s";

/// The peer's default `concurrency` for `parallel.map`.
const DEFAULT_CONCURRENCY: u64 = 5;

/// The most items a `parallel.map` (its `concurrency`) or a `for_each`
/// (its `max_concurrent`) runs at once: each running item holds its own
/// view of the run. Larger is refused when the workflow loads.
pub const MAX_CONCURRENCY: u64 = 64;

/// The most items one `parallel.map` goes over (each is an agent call); a
/// longer list fails the step before any item starts.
pub const MAX_MAP_ITEMS: usize = 10_000;

const SPAWN_KEYS: &[&str] = &["agents", "wait", "timeout", "onError", "on_error"];
const MAP_KEYS: &[&str] = &[
    "items",
    "agent",
    "concurrency",
    "timeout",
    "onError",
    "on_error",
];
const AGENT_KEYS: &[&str] = &["id", "provider", "model", "prompt", "inputs"];
const MAP_AGENT_KEYS: &[&str] = &["provider", "model", "prompt"];

/// Where a `parallel.*` step sits, for reading its inputs.
pub(super) struct SpawnAt<'a> {
    pub spans: &'a Arc<Spans>,
    /// The step's path; its inputs are under `inputs`.
    pub path: &'a [String],
    pub pos: Pos,
    pub id: &'a str,
}

impl SpawnAt<'_> {
    fn path(&self, keys: &[&str]) -> Vec<String> {
        let mut p = self.path.to_vec();
        p.push("inputs".into());
        p.extend(keys.iter().map(|k| k.to_string()));
        p
    }

    fn pos(&self, keys: &[&str]) -> Pos {
        self.spans.pos(&self.path(keys))
    }
}

impl Cx<'_> {
    /// `parallel.spawn` or `parallel.map` (`map` true) with its literal inputs.
    pub(super) fn spawn_kind(
        &mut self,
        at: &SpawnAt,
        inputs: &Value,
        map: bool,
    ) -> Option<StepKind> {
        let Value::Object(m) = inputs else {
            self.err(at.pos, "`inputs` must be a mapping");
            return None;
        };
        let (keys, what) = if map {
            (MAP_KEYS, "`parallel.map`'s inputs")
        } else {
            (SPAWN_KEYS, "`parallel.spawn`'s inputs")
        };
        // Every problem is reported, then the step is refused.
        let errors = self.errors.len();
        self.check_keys(m, keys, at.spans, &at.path(&[]), what);
        let timeout = m
            .get("timeout")
            .cloned()
            .unwrap_or_else(|| json!(DEFAULT_TIMEOUT));
        self.duration(&timeout, at.pos(&["timeout"]), "timeout");
        let on_error = match m.get("onError").or_else(|| m.get("on_error")) {
            None => SpawnOnError::Fail,
            Some(v) => match v.as_str() {
                Some("fail") => SpawnOnError::Fail,
                Some("continue") => SpawnOnError::Continue,
                Some("partial") => SpawnOnError::Partial,
                _ => {
                    let key = if m.contains_key("onError") {
                        "onError"
                    } else {
                        "on_error"
                    };
                    self.err(
                        at.pos(&[key]),
                        "`onError` must be `fail`, `continue` or `partial`",
                    );
                    SpawnOnError::Fail
                }
            },
        };
        if map {
            let Some(items) = m.get("items").cloned() else {
                self.err(at.pos, "`parallel.map` needs `items`: the list to go over");
                return None;
            };
            let Some(Value::Object(agent)) = m.get("agent") else {
                self.err(
                    at.pos(&["agent"]),
                    "`parallel.map` needs `agent`: `{provider, model, prompt}`",
                );
                return None;
            };
            self.check_keys(
                agent,
                MAP_AGENT_KEYS,
                at.spans,
                &at.path(&["agent"]),
                "`agent`",
            );
            let max = match m.get("concurrency") {
                None => DEFAULT_CONCURRENCY,
                Some(v) => {
                    match v.as_u64() {
                        Some(n) if n > 0 && n <= MAX_CONCURRENCY => n,
                        _ => {
                            self.err(
                            at.pos(&["concurrency"]),
                            format!("`concurrency` must be a whole number from 1 to {MAX_CONCURRENCY}"),
                        );
                            DEFAULT_CONCURRENCY
                        }
                    }
                }
            };
            let id = format!("{}_agent", at.id);
            let step = self.agent_step(at, &["agent"], agent, &id, &timeout)?;
            if self.errors.len() > errors {
                return None;
            }
            return Some(StepKind::Spawn {
                agents: vec![step],
                items: Some(items),
                wait: SpawnWait::All,
                on_error,
                max_concurrent: max as usize,
            });
        }
        let wait = match m.get("wait") {
            None => SpawnWait::All,
            Some(v) => match (v.as_str(), v.as_u64()) {
                (Some("all"), _) => SpawnWait::All,
                (Some("any"), _) => SpawnWait::Any,
                (Some("majority"), _) => SpawnWait::Majority,
                (_, Some(n)) if n > 0 => SpawnWait::Count(n as usize),
                _ => {
                    self.err(
                        at.pos(&["wait"]),
                        "`wait` must be `all`, `any`, `majority` or how many agents to wait for",
                    );
                    SpawnWait::All
                }
            },
        };
        let list = match m.get("agents") {
            Some(Value::Array(list)) if !list.is_empty() => list,
            Some(Value::Array(_)) | None => {
                self.err(
                    at.pos(&["agents"]),
                    "`parallel.spawn` needs `agents`: a list of `{id, provider, model, prompt}`",
                );
                return None;
            }
            Some(_) => {
                self.err(
                    at.pos(&["agents"]),
                    "`agents` must be written out as a list (its providers are checked when the workflow loads)",
                );
                return None;
            }
        };
        let mut agents: Vec<Step> = Vec::new();
        for (i, a) in list.iter().enumerate() {
            let index = i.to_string();
            let Value::Object(a) = a else {
                self.err(
                    at.pos(&["agents", &index]),
                    "an agent must be a mapping: `{id, provider, model, prompt}`",
                );
                continue;
            };
            self.check_keys(
                a,
                AGENT_KEYS,
                at.spans,
                &at.path(&["agents", &index]),
                "an agent",
            );
            let id = a
                .get("id")
                .map(super::scalar_string)
                .unwrap_or_else(|| format!("agent_{}", i + 1));
            if agents.iter().any(|s| s.id == id) {
                self.err(
                    at.pos(&["agents", &index]),
                    format!("duplicate agent id `{id}`"),
                );
                continue;
            }
            if let Some(step) = self.agent_step(at, &["agents", &index], a, &id, &timeout) {
                agents.push(step);
            }
        }
        if agents.len() < list.len() || self.errors.len() > errors {
            return None;
        }
        Some(StepKind::Spawn {
            max_concurrent: agents.len(),
            agents,
            items: None,
            wait,
            on_error,
        })
    }

    /// One agent as the action step the peer runs for it:
    /// `<provider>.chat.completions` with `{...inputs, model, messages:
    /// [{role: user, content: prompt}]}`.
    fn agent_step(
        &mut self,
        at: &SpawnAt,
        keys: &[&str],
        a: &Map<String, Value>,
        id: &str,
        timeout: &Value,
    ) -> Option<Step> {
        let pos = at.pos(keys);
        let Some(provider) = a.get("provider").and_then(Value::as_str) else {
            self.err(
                pos,
                "an agent needs `provider`: the tool that answers (`claude`, `ollama`, …)",
            );
            return None;
        };
        let Some(prompt) = a.get("prompt").and_then(Value::as_str) else {
            self.err(pos, "an agent needs `prompt`: the text it is asked");
            return None;
        };
        let mut inputs = match a.get("inputs") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(i)) => i.clone(),
            Some(_) => {
                let mut k = keys.to_vec();
                k.push("inputs");
                self.err(at.pos(&k), "an agent's `inputs` must be a mapping");
                return None;
            }
        };
        if let Some(model) = a.get("model") {
            inputs.insert("model".into(), model.clone());
        }
        inputs.insert(
            "messages".into(),
            json!([{"role": "user", "content": prompt}]),
        );
        let step = json!({
            "id": id,
            "action": format!("{provider}.chat.completions"),
            "inputs": inputs,
            "timeout": timeout,
        });
        self.step(&step, at.spans, at.path(keys), id, None)
    }
}
