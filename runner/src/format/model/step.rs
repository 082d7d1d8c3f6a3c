//! One step block → a typed [`Step`]: what every step has (kind, keys, id,
//! name, conditions, timeout, error policy), then one small reader per kind.

use super::{
    infer_kind, scalar_string, slug, Ask, AskMode, Branch, Cx, ErrorPolicy, MergeMode, OnTimeout,
    Spans, Step, StepKind, ANSWER_NAMES, ASK_KEYS, COMMON_KEYS, FIELD_KEYS, KINDS, NOT_YET,
};
use crate::diag::{did_you_mean, Pos};
use marktoflow_steps::registry::ActionKind;
use serde_json::{Map, Value};
use std::sync::Arc;

/// The step being read: its mapping and where it sits.
struct Fields<'a> {
    /// Its keys in snake_case (the peer's camelCase spellings renamed).
    m: &'a Map<String, Value>,
    /// Each renamed key and how the file spells it, for positions.
    spelled: &'a [(String, String)],
    spans: &'a Arc<Spans>,
    path: &'a [String],
    /// The step's own position.
    pos: Pos,
    kind: &'a str,
    id: &'a str,
}

impl Fields<'_> {
    fn path_to(&self, keys: &[&str]) -> Vec<String> {
        let mut p = self.path.to_vec();
        p.extend(keys.iter().enumerate().map(|(i, k)| match i {
            0 => self.written(k).to_string(),
            _ => k.to_string(),
        }));
        p
    }

    /// The key as the file spells it (`itemVariable` for `item_variable`).
    fn written<'k>(&'k self, key: &'k str) -> &'k str {
        self.spelled
            .iter()
            .find(|(snake, _)| snake == key)
            .map_or(key, |(_, w)| w.as_str())
    }

    /// Where `key` is written.
    fn at(&self, key: &str) -> Pos {
        self.spans.pos(&self.path_to(&[key]))
    }

    /// Where the key `key` itself is (not its value).
    fn key_at(&self, key: &str) -> Pos {
        self.spans.key_pos_in(self.path, self.written(key))
    }

    /// Where `key` is written, else the step itself.
    fn at_or_step(&self, key: &str) -> Pos {
        if self.m.contains_key(key) {
            self.at(key)
        } else {
            self.pos
        }
    }
}

/// `m` with each camelCase key whose snake_case form `allowed` lists
/// renamed to it (unless both are written), and the renamed keys with their
/// spelling in the file.
fn snake_keys(
    m: &Map<String, Value>,
    allowed: &[&str],
) -> (Map<String, Value>, Vec<(String, String)>) {
    let mut out = Map::new();
    let mut spelled = Vec::new();
    for (k, v) in m {
        let snake = super::text::snake_case(k);
        // A spelling the readers take as it is (`errorHandling`) keeps it.
        let renamed = snake != *k && !allowed.contains(&k.as_str());
        if renamed && allowed.contains(&snake.as_str()) && !m.contains_key(&snake) {
            spelled.push((snake.clone(), k.clone()));
            out.insert(snake, v.clone());
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    (out, spelled)
}

impl Cx<'_> {
    pub(super) fn step(
        &mut self,
        v: &Value,
        spans: &Arc<Spans>,
        path: Vec<String>,
        default_id: &str,
        heading: Option<&str>,
    ) -> Option<Step> {
        let pos = spans.pos(&path);
        let Value::Object(m) = v else {
            self.err(pos, "a step must be a mapping with `action:` or `type:`");
            return None;
        };
        let kind = self.kind_of(m, spans, &path, pos)?;
        let n_errors = self.errors.len();
        let own_keys = KINDS
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, keys)| *keys)
            .unwrap_or_default();
        let allowed: Vec<&str> = COMMON_KEYS.iter().chain(own_keys).copied().collect();
        // The peer reads each key in camelCase too (`itemVariable`,
        // `maxIterations`, `initialValue`, …): both spellings work.
        let (renamed, spelled) = snake_keys(m, &allowed);
        let m = &renamed;
        let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        self.check_keys(
            m,
            &allowed,
            spans,
            &path,
            &format!("{article} `{kind}` step"),
        );
        let id = self.step_id(m, spans, &path, pos, default_id, heading);
        let f = Fields {
            m,
            spelled: &spelled,
            spans,
            path: &path,
            pos,
            kind,
            id: &id,
        };
        let output_variable = self
            .opt_str(&f, "output_variable")
            .or_else(|| self.opt_str(&f, "outputVariable"));
        let model = self.opt_str(&f, "model");
        let name = m
            .get("name")
            .map(scalar_string)
            .or_else(|| heading.map(str::to_string));
        let mut conditions = match m.get("conditions") {
            None => Vec::new(),
            Some(Value::Array(c)) => c.iter().map(scalar_string).collect(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(_) => {
                self.err(
                    f.at("conditions"),
                    "`conditions` must be a list of expressions",
                );
                Vec::new()
            }
        };
        // The peer's examples guard actions with a single `condition:`.
        if matches!(kind, "action" | "script" | "workflow") {
            match m.get("condition") {
                None => {}
                Some(Value::String(c)) => conditions.push(c.clone()),
                Some(Value::Bool(b)) => conditions.push(b.to_string()),
                Some(_) => {
                    self.err(f.at("condition"), "`condition` must be an expression");
                }
            }
        }
        let timeout = match m.get("timeout") {
            None => None,
            // The peer's `timeout` is in milliseconds when a bare number.
            Some(t) => self.duration(t, f.at("timeout"), "timeout"),
        };
        // Errors point at the key they are about.
        let on_error = self.error_policy(m, &|keys| match keys.split_last() {
            Some((last, parent)) => f.spans.key_pos_in(&f.path_to(parent), last),
            None => f.pos,
        });
        let kind = self.step_kind(&f, &on_error)?;
        if self.errors.len() > n_errors {
            return None;
        }
        Some(Step {
            id,
            name,
            pos,
            kind,
            output_variable,
            conditions,
            timeout,
            on_error,
            model,
            spans: spans.clone(),
            path,
        })
    }

    /// The step's kind (`type:`, else inferred from its keys), when known.
    fn kind_of(
        &mut self,
        m: &Map<String, Value>,
        spans: &Arc<Spans>,
        path: &[String],
        pos: Pos,
    ) -> Option<&'static str> {
        let type_pos = || {
            let mut p = path.to_vec();
            p.push("type".into());
            spans.pos(&p)
        };
        let name = match m.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(_) => {
                self.err(type_pos(), "`type` must be a string");
                return None;
            }
            None => {
                match infer_kind(m) {
                    Some(k) => k,
                    None => {
                        self.err(pos, "cannot tell what this step does: it has no `action`, `workflow` or `type`");
                        return None;
                    }
                }
            }
        };
        if NOT_YET.contains(&name) {
            let at = if m.contains_key("type") {
                type_pos()
            } else {
                pos
            };
            self.err(
                at,
                format!("step type `{name}` is not supported by this version of marktoflow yet"),
            );
            return None;
        }
        if let Some((k, _)) = KINDS.iter().find(|(k, _)| *k == name) {
            return Some(k);
        }
        let names: Vec<&str> = KINDS
            .iter()
            .map(|(k, _)| *k)
            .chain(NOT_YET.iter().copied())
            .collect();
        let hint = did_you_mean(name, &names);
        let d = self.err(type_pos(), format!("unknown step type `{name}`"));
        d.hints.push(match hint {
            Some(c) => format!("did you mean `{c}`?"),
            None => format!("expected one of: {}", names.join(", ")),
        });
        None
    }

    /// `id:`, else the heading's slug (or `default_id`) made unique; a
    /// duplicate is an error pointing at the first use.
    fn step_id(
        &mut self,
        m: &Map<String, Value>,
        spans: &Arc<Spans>,
        path: &[String],
        pos: Pos,
        default_id: &str,
        heading: Option<&str>,
    ) -> String {
        let id = match m.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => scalar_string(other),
            None => {
                let base = heading
                    .map(slug)
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| default_id.to_string());
                let mut id = base.clone();
                let mut n = 2;
                while self.ids.iter().any(|(i, _)| *i == id) {
                    id = format!("{base}_{n}");
                    n += 1;
                }
                id
            }
        };
        if let Some((_, prev)) = self.ids.iter().find(|(i, _)| *i == id) {
            let prev = *prev;
            let mut p = path.to_vec();
            p.push("id".into());
            let d = self.err(spans.pos(&p), format!("duplicate step id `{id}`"));
            d.hints
                .push(format!("the same id is used at line {}", prev.line));
        }
        self.ids.push((id.clone(), pos));
        id
    }

    /// An optional text field (numbers and booleans read as text).
    fn opt_str(&mut self, f: &Fields, k: &str) -> Option<String> {
        match f.m.get(k) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v @ (Value::Bool(_) | Value::Number(_))) => Some(v.to_string()),
            Some(_) => {
                self.err(f.at(k), format!("`{}` must be a string", f.written(k)));
                None
            }
        }
    }

    /// A text field the step's kind needs.
    fn req_str(&mut self, f: &Fields, k: &str) -> Option<String> {
        match f.m.get(k) {
            None => {
                self.err(f.pos, format!("a `{}` step needs `{k}`", f.kind));
                None
            }
            Some(Value::Null) => {
                self.err(f.at(k), format!("`{}` must be a string", f.written(k)));
                None
            }
            Some(_) => self.opt_str(f, k),
        }
    }

    /// A list of steps under `key` (none when absent).
    fn children(&mut self, f: &Fields, key: &str, prefix: &str) -> Vec<Step> {
        match f.m.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let p = f.path_to(&[key]);
                self.step_list(items, f.spans, &p, prefix, None)
            }
            Some(_) => {
                self.err(
                    f.at(key),
                    format!("`{}` must be a list of steps", f.written(key)),
                );
                Vec::new()
            }
        }
    }

    /// A positive whole number under `key`, `default` when absent.
    /// [`Self::positive`], at most `max`.
    fn bounded(&mut self, f: &Fields, key: &str, default: u64, max: u64) -> u64 {
        match f.m.get(key).and_then(Value::as_u64) {
            Some(n) if n > max => {
                self.err(
                    f.at(key),
                    format!(
                        "`{}` must be a whole number from 1 to {max}",
                        f.written(key)
                    ),
                );
                default
            }
            _ => self.positive(f, key, default),
        }
    }

    fn positive(&mut self, f: &Fields, key: &str, default: u64) -> u64 {
        match f.m.get(key) {
            None => default,
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => n,
                _ => {
                    self.err(
                        f.at(key),
                        format!("`{}` must be a positive whole number", f.written(key)),
                    );
                    default.max(1)
                }
            },
        }
    }

    fn step_kind(&mut self, f: &Fields, on_error: &ErrorPolicy) -> Option<StepKind> {
        let id = f.id;
        Some(match f.kind {
            "action" | "script" => self.action_kind(f, on_error)?,
            "if" => {
                let condition = self.req_str(f, "condition")?;
                let mut then = self.children(f, "then", &format!("{id}_then"));
                if then.is_empty() {
                    then = self.children(f, "steps", &format!("{id}_then"));
                }
                StepKind::If {
                    condition,
                    then,
                    otherwise: self.children(f, "else", &format!("{id}_else")),
                }
            }
            "switch" => self.switch_kind(f)?,
            "for_each" => {
                let Some(items) = f.m.get("items").cloned() else {
                    self.err(f.pos, "a `for_each` step needs `items`");
                    return None;
                };
                StepKind::ForEach {
                    items,
                    item_variable: self
                        .opt_str(f, "item_variable")
                        .unwrap_or_else(|| "item".into()),
                    index_variable: self.opt_str(f, "index_variable"),
                    steps: self.children(f, "steps", &format!("{id}_step")),
                    max_concurrent: self.bounded(
                        f,
                        "max_concurrent",
                        1,
                        super::spawn::MAX_CONCURRENCY,
                    ) as usize,
                }
            }
            "while" => StepKind::While {
                condition: self.req_str(f, "condition")?,
                max_iterations: self.positive(f, "max_iterations", 100),
                steps: self.children(f, "steps", &format!("{id}_step")),
                initial: self.loop_variables(f),
            },
            "try" => StepKind::Try {
                body: self.children(f, "try", &format!("{id}_try")),
                catch: self.children(f, "catch", &format!("{id}_catch")),
                finally: self.children(f, "finally", &format!("{id}_finally")),
            },
            "wait" => self.wait_kind(f)?,
            "map" | "filter" | "reduce" => self.collection_kind(f)?,
            "parallel" => self.parallel_kind(f)?,
            "merge" => self.merge_kind(f)?,
            "workflow" => {
                if f.m
                    .get("use_subagent")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                {
                    self.err(
                        f.at("use_subagent"),
                        "`use_subagent` is not supported: the sub-workflow runs in this engine",
                    );
                }
                StepKind::SubWorkflow {
                    path: self.req_str(f, "workflow")?,
                    inputs: self.inputs_mapping(f.m, f.at("inputs"))?,
                }
            }
            other => unreachable!("step kind `{other}` is in KINDS but not read"),
        })
    }

    /// `action:` (or `type: script`): resolved against the registry, its
    /// literal inputs checked against the action's contract.
    fn action_kind(&mut self, f: &Fields, on_error: &ErrorPolicy) -> Option<StepKind> {
        let m = f.m;
        // `action: script` (the peer's examples) means `type: script`.
        let bare_script = m.get("action").and_then(Value::as_str) == Some("script");
        let (action, inputs) = if f.kind == "script" || bare_script {
            let mut inputs = match m.get("inputs") {
                Some(Value::Object(i)) => i.clone(),
                _ => Map::new(),
            };
            if let Some(code) = m.get("code") {
                inputs.insert("code".into(), code.clone());
            }
            ("script.execute".to_string(), Value::Object(inputs))
        } else {
            let action = self.req_str(f, "action")?;
            let inputs = self.inputs_mapping(m, f.at("inputs"))?;
            if let Some(kind) = super::spawn::PARALLEL_AGENTS
                .iter()
                .position(|a| *a == action)
            {
                let at = super::spawn::SpawnAt {
                    spans: f.spans,
                    path: f.path,
                    pos: f.at_or_step("inputs"),
                    id: f.id,
                };
                return self.spawn_kind(&at, &inputs, kind == 1);
            }
            (action, inputs)
        };
        let resolved = match self.registry.resolve(&action, &self.tools) {
            Ok(r) => r,
            Err(e) => {
                if self.first_report(&e) {
                    let d = self.err(f.at_or_step("action"), e.message);
                    d.hints.extend(e.hint);
                }
                return None;
            }
        };
        if resolved.kind == ActionKind::Script
            && !matches!(inputs.get("code"), Some(Value::String(_)))
        {
            self.err(
                f.at_or_step("inputs"),
                "a script step needs `inputs.code` (a string of JavaScript)",
            );
        } else {
            let fallback = on_error.fallback.as_ref().map(|(_, fb)| fb.spec);
            let at = f.at_or_step("action");
            self.check_inputs(&resolved, fallback, &inputs, f.spans, f.path, at);
        }
        Some(StepKind::Action {
            action,
            resolved: Box::new(resolved),
            inputs,
        })
    }

    /// A `while`'s `variables: {name: {initial: value}}` (a bare value is
    /// taken as the initial one).
    fn loop_variables(&mut self, f: &Fields) -> Vec<(String, Value)> {
        match f.m.get("variables") {
            None => Vec::new(),
            Some(Value::Object(vars)) => vars
                .iter()
                .map(|(k, v)| {
                    let init = match v {
                        Value::Object(o) if o.len() == 1 && o.contains_key("initial") => {
                            o["initial"].clone()
                        }
                        other => other.clone(),
                    };
                    (k.clone(), init)
                })
                .collect(),
            Some(_) => {
                self.err(
                    f.at("variables"),
                    "`variables` must be a mapping of names to `{initial: value}`",
                );
                Vec::new()
            }
        }
    }

    /// `type: wait`: a duration, or (`mode: form | approval | webhook`) a
    /// pause until somebody answers.
    fn wait_kind(&mut self, f: &Fields) -> Option<StepKind> {
        let mode = f.m.get("mode").map(scalar_string);
        let ask = match mode.as_deref() {
            None | Some("duration") => None,
            Some("form") => Some(AskMode::Form),
            Some("approval") => Some(AskMode::Approval),
            Some("webhook") => Some(AskMode::Webhook),
            Some(other) => {
                let d = self.err(f.at("mode"), format!("unknown wait mode `{other}`"));
                d.hints
                    .push("expected `duration`, `form`, `approval` or `webhook`".into());
                return None;
            }
        };
        if let Some(mode) = ask {
            return self.ask_kind(f, mode).map(|a| StepKind::Ask(Box::new(a)));
        }
        for key in ASK_KEYS {
            if f.m.contains_key(*key) {
                self.warn(
                    f.key_at(key),
                    format!(
                        "`{key}` is ignored: it belongs to the `form`, `approval` and `webhook` wait modes"
                    ),
                );
            }
        }
        let Some(duration) = f.m.get("duration").cloned() else {
            self.err(
                f.pos,
                "a `wait` step needs `duration` (`5s`, `2m`, or milliseconds), or a `mode` (`form`, `approval`, `webhook`)",
            );
            return None;
        };
        Some(StepKind::Wait { duration })
    }

    /// A wait for a person or an event (see [`Ask`]).
    fn ask_kind(&mut self, f: &Fields, mode: AskMode) -> Option<Ask> {
        if f.m.contains_key("duration") {
            self.warn(
                f.key_at("duration"),
                format!(
                    "`duration` is ignored by `mode: {}`: `timeout` says how long it waits",
                    mode.as_str()
                ),
            );
        }
        if f.m.contains_key("webhook_path") {
            self.warn(
                f.key_at("webhook_path"),
                "`webhook_path` is ignored: a waiting run is answered at `/events/{key}` (see `key`)",
            );
        }
        let fields = match f.m.get("fields") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(m)) => {
                let m = m.clone();
                let base = f.path_to(&["fields"]);
                self.input_defs(&m, f.spans, &base, "field", FIELD_KEYS)
            }
            Some(_) => {
                self.err(
                    f.at("fields"),
                    "`fields` must be a mapping of field names to definitions (`type`, `required`, `options`, …)",
                );
                Vec::new()
            }
        };
        for def in &fields {
            if ANSWER_NAMES.contains(&def.name.as_str())
                && !(mode == AskMode::Form && matches!(def.name.as_str(), "decision" | "comment"))
            {
                let d = self.err(
                    def.pos,
                    format!("field `{}`: the name is the answer's own", def.name),
                );
                d.hints.push(format!(
                    "rename it: a wait's output has {}",
                    ANSWER_NAMES
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if mode == AskMode::Form && fields.is_empty() {
            self.err(
                f.pos,
                "a `wait` with `mode: form` needs `fields:` (what the person fills in)",
            );
        }
        let prompt = match (f.m.get("prompt"), f.m.get("message")) {
            (Some(_), _) => self.opt_str(f, "prompt"),
            (None, Some(_)) => self.opt_str(f, "message"),
            (None, None) => None,
        };
        let on_timeout = match f.m.get("on_timeout") {
            None | Some(Value::Null) => OnTimeout::Fail,
            Some(Value::String(s)) if s == "fail" => OnTimeout::Fail,
            Some(Value::String(s)) if s == "continue" => OnTimeout::Continue,
            Some(Value::Object(o)) if o.len() == 1 && o.contains_key("default") => {
                match &o["default"] {
                    Value::Object(d) => OnTimeout::Default(d.clone()),
                    _ => {
                        self.err(
                            f.at("on_timeout"),
                            "`on_timeout.default` must be a mapping of field names to values",
                        );
                        OnTimeout::Fail
                    }
                }
            }
            Some(_) => {
                let d = self.err(f.at("on_timeout"), "unknown `on_timeout`");
                d.hints
                    .push("expected `fail`, `continue`, or `{default: {field: value, …}}`".into());
                OnTimeout::Fail
            }
        };
        if let OnTimeout::Default(d) = &on_timeout {
            for k in d.keys() {
                // Its values' types are checked with the rest (`check::verify`).
                if !fields.iter().any(|x| &x.name == k) {
                    let names: Vec<&str> = fields.iter().map(|x| x.name.as_str()).collect();
                    let d = self.err(
                        f.at("on_timeout"),
                        format!("`on_timeout.default` names `{k}`, which is not one of the fields"),
                    );
                    if let Some(c) = did_you_mean(k, &names) {
                        d.hints.push(format!("did you mean `{c}`?"));
                    }
                }
            }
        }
        if matches!(on_timeout, OnTimeout::Continue | OnTimeout::Default(_))
            && f.m.get("timeout").is_none()
        {
            self.warn(
                f.key_at("on_timeout"),
                "`on_timeout` never applies: the wait has no `timeout`",
            );
        }
        let approvals = match f.m.get("approvals") {
            None | Some(Value::Null) => 1,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=100) => n as u32,
                _ => {
                    self.err(
                        f.at("approvals"),
                        "`approvals` must be a whole number from 1 to 100",
                    );
                    1
                }
            },
        };
        if mode != AskMode::Approval {
            for key in ["approvals", "on_approve", "on_reject"] {
                if f.m.contains_key(key) {
                    self.err(
                        f.key_at(key),
                        format!("`{key}` belongs to `mode: approval`"),
                    );
                }
            }
        }
        let approvers = match f.m.get("approvers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if a.iter().all(|v| v.is_string()) => {
                a.iter().map(scalar_string).collect()
            }
            Some(_) => {
                self.err(
                    f.at("approvers"),
                    "`approvers` must be a list of identities (`[alice, bob]`)",
                );
                Vec::new()
            }
        };
        if approvers.len() < approvals as usize && !approvers.is_empty() {
            self.err(
                f.at("approvals"),
                format!(
                    "`approvals: {approvals}` can never be reached by the {} approvers listed",
                    approvers.len()
                ),
            );
        }
        let self_approval = match f.m.get("self_approval") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.err(
                    f.at("self_approval"),
                    "`self_approval` must be true or false",
                );
                true
            }
        };
        let requester = self.opt_str(f, "requester");
        if !self_approval && requester.is_none() {
            self.err(
                f.key_at("self_approval"),
                "`self_approval: false` needs `requester:` (who asked, such as '{{ inputs.employee }}')",
            );
        }
        let key = self.opt_str(f, "key");
        if mode == AskMode::Webhook && key.is_none() {
            self.err(
                f.pos,
                "a `wait` with `mode: webhook` needs `key:` (what the event carries, such as '{{ inputs.order_id }}')",
            );
        }
        let (secret, token) = (self.opt_str(f, "secret"), self.opt_str(f, "token"));
        if mode != AskMode::Webhook {
            for k in ["secret", "token"] {
                if f.m.contains_key(k) {
                    self.err(f.key_at(k), format!("`{k}` belongs to `mode: webhook`"));
                }
            }
        }
        let link_ttl = match f.m.get("link_ttl") {
            None => None,
            Some(t) => self.duration(t, f.at("link_ttl"), "link_ttl"),
        };
        let timeout = match f.m.get("timeout") {
            None => None,
            Some(t) => self.duration(t, f.at("timeout"), "timeout"),
        };
        Some(Ask {
            mode,
            title: self.opt_str(f, "title"),
            prompt,
            prompt_key: if f.m.contains_key("prompt") {
                "prompt"
            } else {
                "message"
            },
            fields,
            timeout,
            on_timeout,
            approvals,
            approvers,
            requester,
            self_approval,
            key,
            secret,
            token,
            link_ttl,
            notify: self.children(f, "notify", &format!("{}_notify", f.id)),
            on_approve: self.children(f, "on_approve", &format!("{}_approve", f.id)),
            on_reject: self.children(f, "on_reject", &format!("{}_reject", f.id)),
        })
    }

    fn switch_kind(&mut self, f: &Fields) -> Option<StepKind> {
        let expression = self.req_str(f, "expression")?;
        let mut cases = Vec::new();
        match f.m.get("cases") {
            Some(Value::Object(c)) => {
                for (k, v) in c {
                    let p = f.path_to(&["cases", k]);
                    match v {
                        Value::Array(items) => {
                            let prefix = format!("{}_{}", f.id, slug(k));
                            let steps = self.step_list(items, f.spans, &p, &prefix, None);
                            cases.push((k.clone(), steps));
                        }
                        _ => {
                            let pos = f.spans.pos(&p);
                            self.err(pos, format!("case `{k}` must be a list of steps"));
                        }
                    }
                }
            }
            _ => {
                self.err(
                    f.at("cases"),
                    "`cases` must be a mapping of values to lists of steps",
                );
            }
        }
        Some(StepKind::Switch {
            expression,
            cases,
            default: self.children(f, "default", &format!("{}_default", f.id)),
        })
    }

    /// `map`, `filter` and `reduce`: an expression over `items`.
    fn collection_kind(&mut self, f: &Fields) -> Option<StepKind> {
        let Some(items) = f.m.get("items").cloned() else {
            self.err(f.pos, format!("a `{}` step needs `items`", f.kind));
            return None;
        };
        let item_variable = self
            .opt_str(f, "item_variable")
            .unwrap_or_else(|| "item".into());
        if f.kind == "filter" {
            return Some(StepKind::Filter {
                items,
                item_variable,
                condition: self.req_str(f, "condition")?,
            });
        }
        let Some(expression) = f.m.get("expression").cloned() else {
            self.err(f.pos, format!("a `{}` step needs `expression`", f.kind));
            return None;
        };
        Some(if f.kind == "map" {
            StepKind::Map {
                items,
                item_variable,
                expression,
            }
        } else {
            StepKind::Reduce {
                items,
                item_variable,
                accumulator_variable: self
                    .opt_str(f, "accumulator_variable")
                    .unwrap_or_else(|| "accumulator".into()),
                // `0`, `''` and `false` are kept (the peer loses them).
                initial_value: f.m.get("initial_value").cloned().unwrap_or(Value::Null),
                expression,
            }
        })
    }

    /// The peer's `merge`: `mode`, at least two `sources`, `match_field`
    /// (or `key_field`) for the modes that compare, `on_conflict`.
    fn merge_kind(&mut self, f: &Fields) -> Option<StepKind> {
        let mode = match self.req_str(f, "mode")?.as_str() {
            "append" => MergeMode::Append,
            "match" => MergeMode::Match,
            "diff" => MergeMode::Diff,
            "combine_by_field" => MergeMode::CombineByField,
            other => {
                let d = self.err(f.at("mode"), format!("unknown merge mode `{other}`"));
                d.hints
                    .push("expected one of: append, match, diff, combine_by_field".into());
                return None;
            }
        };
        let sources = match f.m.get("sources") {
            Some(Value::Array(s)) if s.len() >= 2 => s.clone(),
            _ => {
                self.err(
                    f.at_or_step("sources"),
                    "a `merge` step needs `sources`: at least two lists (or templates giving them)",
                );
                return None;
            }
        };
        let match_field = match f.m.get("match_field") {
            Some(_) => self.opt_str(f, "match_field"),
            None => self.opt_str(f, "key_field"),
        };
        if mode != MergeMode::Append && match_field.is_none() {
            self.err(
                f.pos,
                "this merge mode needs `matchField` (or `match_field`): the field its items are compared by",
            );
            return None;
        }
        let keep_first = match self.opt_str(f, "on_conflict").as_deref() {
            None | Some("keep_last" | "merge_fields") => false,
            Some("keep_first") => true,
            Some(other) => {
                let d = self.err(
                    f.at("on_conflict"),
                    format!("unknown `{}` `{other}`", f.written("on_conflict")),
                );
                d.hints
                    .push("expected one of: keep_first, keep_last, merge_fields".into());
                return None;
            }
        };
        Some(StepKind::Merge {
            mode,
            sources,
            match_field,
            keep_first,
        })
    }

    fn parallel_kind(&mut self, f: &Fields) -> Option<StepKind> {
        let Some(Value::Array(list)) = f.m.get("branches") else {
            self.err(
                f.at_or_step("branches"),
                "a `parallel` step needs `branches`: a list of `{id, steps}`",
            );
            return None;
        };
        let mut branches: Vec<Branch> = Vec::new();
        for (i, b) in list.iter().enumerate() {
            let p = f.path_to(&["branches", &i.to_string()]);
            let bpos = f.spans.pos(&p);
            let Value::Object(bm) = b else {
                self.err(bpos, "a branch must be a mapping with `id` and `steps`");
                continue;
            };
            self.check_keys(bm, &["id", "name", "steps"], f.spans, &p, "a branch");
            let bid = bm
                .get("id")
                .map(scalar_string)
                .unwrap_or_else(|| format!("branch_{}", i + 1));
            if branches.iter().any(|x| x.id == bid) {
                self.err(bpos, format!("duplicate branch id `{bid}`"));
            }
            let steps = match bm.get("steps") {
                Some(Value::Array(items)) => {
                    let mut sp = p.clone();
                    sp.push("steps".into());
                    let prefix = format!("{}_{}", f.id, slug(&bid));
                    self.step_list(items, f.spans, &sp, &prefix, None)
                }
                _ => {
                    self.err(
                        bpos,
                        format!("branch `{bid}` needs `steps`: a list of steps"),
                    );
                    Vec::new()
                }
            };
            branches.push(Branch { id: bid, steps });
        }
        let all = branches.len().max(1) as u64;
        let max_concurrent = self.positive(f, "max_concurrent", all) as usize;
        Some(StepKind::Parallel {
            branches,
            max_concurrent,
        })
    }
}
