//! The frontmatter's sections: meta, tools and MCP servers, inputs,
//! outputs, triggers, concurrency.

use super::text::scalar_string;
use super::{
    Budget, Concurrency, Cx, InputDef, InputType, Meta, OutputDef, Price, Spans, Trigger,
    TriggerKind, INPUT_KEYS, META_KEYS, TOOL_KEYS,
};
use crate::diag::{did_you_mean, Pos};
use marktoflow_steps::core::mcp;
use marktoflow_steps::ToolConfig;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

impl Cx<'_> {
    pub(super) fn meta(&mut self, top: &Map<String, Value>, spans: &Arc<Spans>, meta: &mut Meta) {
        let Some(w) = top.get("workflow") else {
            self.warn(
                spans.pos(&[]),
                "the frontmatter has no `workflow:` section (id, name, version)",
            );
            return;
        };
        let Value::Object(w) = w else {
            let pos = spans.pos(&["workflow".into()]);
            self.err(pos, "`workflow` must be a mapping with `id`, `name`, …");
            return;
        };
        self.check_keys(w, META_KEYS, spans, &["workflow".into()], "`workflow`");
        let s = |k: &str| w.get(k).map(scalar_string);
        if let Some(v) = s("id") {
            meta.id = v;
        }
        // Without a name, the id names it (lists, the console, MCP titles).
        meta.name = s("name").unwrap_or_else(|| meta.id.clone());
        if let Some(v) = s("version") {
            meta.version = v;
        }
        meta.description = s("description");
        meta.author = s("author");
        if let Some(Value::Array(tags)) = w.get("tags") {
            meta.tags = tags.iter().map(scalar_string).collect();
        }
    }
    pub(super) fn tools(&mut self, top: &Map<String, Value>, spans: &Arc<Spans>) {
        let Some(tools) = top.get("tools") else {
            return;
        };
        let Value::Object(tools) = tools else {
            let pos = spans.pos(&["tools".into()]);
            self.err(
                pos,
                "`tools` must be a mapping of tool names to `{sdk, auth, options}`",
            );
            return;
        };
        for (name, t) in tools {
            let path = vec!["tools".to_string(), name.clone()];
            let Value::Object(t) = t else {
                let pos = spans.pos(&path);
                self.err(pos, format!("tool `{name}` must be a mapping with `sdk:`"));
                continue;
            };
            let sdk = match t.get("sdk") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    let pos = spans.pos(&path);
                    self.err(pos, format!("tool `{name}` needs `sdk:` (a string)"));
                    continue;
                }
            };
            let is_mcp = sdk == "mcp";
            let keys: Vec<&str> = if is_mcp {
                TOOL_KEYS.iter().chain(mcp::SERVER_KEYS).copied().collect()
            } else {
                TOOL_KEYS.to_vec()
            };
            let mut rest = t.clone();
            if !is_mcp {
                // An MCP server's key on another tool: say what it is for.
                for k in mcp::SERVER_KEYS.iter().filter(|k| t.contains_key(**k)) {
                    rest.remove(*k);
                    let pos = spans.key_pos_in(&path, k);
                    self.err(pos, format!("unknown key `{k}` in tool `{name}`"))
                        .hints
                        .push(format!(
                            "`{k}` belongs to MCP servers (`sdk: mcp`); a tool with sdk `{sdk}` takes settings under `options`"
                        ));
                }
            }
            self.check_keys(&rest, &keys, spans, &path, &format!("tool `{name}`"));
            if !self.registry.knows_sdk(&sdk) {
                let mut p = path.clone();
                p.push("sdk".into());
                let pos = spans.pos(&p);
                self.sdk_unknown.push((name.clone(), pos, sdk.clone()));
            }
            let obj = |k: &str| match t.get(k) {
                Some(Value::Object(m)) => m.clone(),
                _ => Map::new(),
            };
            let mut options = obj("options");
            if is_mcp {
                // The server's keys may sit beside `sdk` (as MCP clients write
                // them) or inside `options` (as the peer's tools do).
                for k in mcp::SERVER_KEYS {
                    if let Some(v) = t.get(*k) {
                        options.insert(k.to_string(), v.clone());
                    }
                }
                self.mcp_server(name, &options, t, spans, &path);
            }
            // Which of an agent's calls of an HTTP tool wait for a person.
            if let (Some(rule), "http") = (options.get("approval"), sdk.as_str()) {
                if let Err(e) = marktoflow_steps::core::approval::ApprovalRule::parse(rule) {
                    let mut p = path.clone();
                    p.extend(["options".into(), "approval".into()]);
                    let pos = spans.pos(&p);
                    self.err(pos, format!("tool `{name}`: {e}"));
                }
            }
            for (key, v) in obj("auth") {
                let Some(provider) = v.as_str().and_then(secret_provider) else {
                    continue;
                };
                let mut p = path.clone();
                p.extend(["auth".into(), key.clone()]);
                let pos = spans.pos(&p);
                self.err(
                    pos,
                    format!("tool `{name}`: `auth.{key}` reads the secret provider `{provider}`, which is not available here"),
                )
                .hints
                .push("put the secret in an environment variable and write `${secret:env://NAME}` or `${NAME}`".into());
            }
            self.tools.push(ToolConfig {
                name: name.clone(),
                sdk,
                auth: obj("auth"),
                options,
            });
        }
    }
    /// Checks a `sdk: mcp` tool's server keys; `${VAR}`s are filled in
    /// only when it runs, so a `url` or `timeout` made of one is not judged.
    pub(super) fn mcp_server(
        &mut self,
        name: &str,
        options: &Map<String, Value>,
        tool: &Map<String, Value>,
        spans: &Spans,
        path: &[String],
    ) {
        let mut probe = options.clone();
        let deferred =
            |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| s.contains("${"));
        if deferred(probe.get("url")) {
            probe.insert("url".into(), Value::String("http://env.invalid/".into()));
        }
        if deferred(probe.get("timeout")) {
            probe.remove("timeout");
        }
        let Err(e) = mcp::ServerConfig::from_options(&probe) else {
            return;
        };
        let mut p = path.to_vec();
        if !e.field.is_empty() {
            if !tool.contains_key(e.field) {
                p.push("options".into());
            }
            p.push(e.field.into());
        }
        let pos = spans.pos(&p);
        self.err(pos, format!("tool `{name}`: {}", e.message));
    }
    pub(super) fn inputs(&mut self, top: &Map<String, Value>, spans: &Arc<Spans>) -> Vec<InputDef> {
        let Some(inputs) = top.get("inputs") else {
            return Vec::new();
        };
        let Value::Object(inputs) = inputs else {
            let pos = spans.pos(&["inputs".into()]);
            self.err(
                pos,
                "`inputs` must be a mapping of input names to definitions",
            );
            return Vec::new();
        };
        let inputs = inputs.clone();
        self.input_defs(&inputs, spans, &["inputs".to_string()], "input", INPUT_KEYS)
    }

    /// Definitions like workflow inputs at `base` (`inputs`, a wait's
    /// `fields`): `noun` names one in messages; `keys` are those allowed.
    /// A wait's fields also take the peer's form spellings (`type: text`,
    /// `type: select` with `options:`).
    pub(super) fn input_defs(
        &mut self,
        inputs: &Map<String, Value>,
        spans: &Arc<Spans>,
        base: &[String],
        noun: &str,
        keys: &[&str],
    ) -> Vec<InputDef> {
        let mut out = Vec::new();
        let form = noun == "field";
        for (name, def) in inputs {
            let mut path = base.to_vec();
            path.push(name.clone());
            let pos = {
                let inputs_node = spans.node.lookup(&path[..base.len()]);
                let kp = inputs_node.key_pos(name).unwrap_or(inputs_node.pos());
                spans.yaml.file_pos(kp.line, kp.col)
            };
            let def = match def {
                Value::Object(d) => d.clone(),
                // `name: string` shorthand.
                Value::String(t) => {
                    let mut m = Map::new();
                    m.insert("type".into(), Value::String(t.clone()));
                    m
                }
                Value::Null => Map::new(),
                _ => {
                    self.err(
                        pos,
                        format!("{noun} `{name}` must be a mapping with `type:`"),
                    );
                    continue;
                }
            };
            self.check_keys(&def, keys, spans, &path, &format!("{noun} `{name}`"));
            let field = |k: &str| {
                let mut p = path.clone();
                p.push(k.into());
                spans.pos(&p)
            };
            let ty = match def.get("type") {
                None => InputType::String,
                Some(Value::String(t))
                    if form && matches!(t.as_str(), "text" | "select" | "enum") =>
                {
                    InputType::String
                }
                Some(Value::String(t)) => match InputType::parse(t) {
                    Some(ty) => ty,
                    None => {
                        let hint = did_you_mean(t, InputType::NAMES);
                        let d = self.err(
                            field("type"),
                            format!("{noun} `{name}`: unknown type `{t}`"),
                        );
                        d.hints.push(match hint {
                            Some(c) => format!("did you mean `{c}`?"),
                            None => format!("expected one of: {}", InputType::NAMES.join(", ")),
                        });
                        continue;
                    }
                },
                Some(_) => {
                    self.err(
                        field("type"),
                        format!("{noun} `{name}`: `type` must be a string"),
                    );
                    continue;
                }
            };
            let validation = match def.get("validation") {
                Some(Value::Object(v)) => v.clone(),
                _ => Map::new(),
            };
            let get = |k: &str| def.get(k).or_else(|| validation.get(k));
            let required = match get("required") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    self.err(
                        field("required"),
                        format!("{noun} `{name}`: `required` must be true or false"),
                    );
                    false
                }
            };
            let pattern = match get("pattern") {
                Some(Value::String(p)) => match regex::Regex::new(&format!("^(?:{p})$")) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        self.err(
                            field("pattern"),
                            format!("{noun} `{name}`: invalid pattern: {e}"),
                        );
                        None
                    }
                },
                _ => None,
            };
            // A form's choices: `options:` (the peer's) or `choices:`.
            let (choices_key, choices) = ["enum", "options", "choices"]
                .iter()
                .find_map(|k| get(k).map(|v| (*k, v)))
                .map_or(("enum", None), |(k, v)| (k, Some(v)));
            let allowed = match choices {
                Some(Value::Array(a)) => Some(a.clone()),
                Some(_) => {
                    self.err(
                        field(choices_key),
                        format!("{noun} `{name}`: `{choices_key}` must be a list"),
                    );
                    None
                }
                None => None,
            };
            if form
                && def.get("type").and_then(Value::as_str) == Some("select")
                && allowed.is_none()
            {
                self.err(
                    field("type"),
                    format!("{noun} `{name}`: a `select` needs `options:` (the choices)"),
                );
            }
            let tenant = match def.get("tenant") {
                None | Some(Value::Null | Value::Bool(false)) => false,
                Some(Value::Bool(true)) if ty == InputType::String => {
                    if let Some(other) = out.iter().find(|i: &&InputDef| i.tenant) {
                        self.err(
                            field("tenant"),
                            format!(
                                "{noun} `{name}`: input `{}` is already the tenant; a workflow has one",
                                other.name
                            ),
                        );
                        false
                    } else {
                        true
                    }
                }
                Some(Value::Bool(true)) => {
                    self.err(
                        field("tenant"),
                        format!("{noun} `{name}`: the tenant is text: `tenant: true` needs `type: string`"),
                    );
                    false
                }
                Some(_) => {
                    self.err(
                        field("tenant"),
                        format!("{noun} `{name}`: `tenant` must be true or false"),
                    );
                    false
                }
            };
            let num = |k: &str| get(k).and_then(Value::as_f64);
            out.push(InputDef {
                name: name.clone(),
                ty,
                required,
                default: def.get("default").cloned(),
                description: def
                    .get("description")
                    .or_else(|| def.get("label"))
                    .map(scalar_string),
                allowed,
                pattern,
                min: num("min"),
                max: num("max"),
                tenant,
                pos,
            });
        }
        out
    }
    pub(super) fn outputs(
        &mut self,
        top: &Map<String, Value>,
        spans: &Arc<Spans>,
    ) -> Vec<OutputDef> {
        match top.get("outputs") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(o)) => o
                .iter()
                .map(|(name, d)| OutputDef {
                    name: name.clone(),
                    ty: d.get("type").map(scalar_string),
                    description: d.get("description").map(scalar_string),
                    pos: spans.key_pos_in(&["outputs".into()], name),
                })
                .collect(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, n)| OutputDef {
                    name: scalar_string(n),
                    ty: None,
                    description: None,
                    pos: spans.pos(&["outputs".into(), i.to_string()]),
                })
                .collect(),
            Some(_) => {
                let pos = spans.pos(&["outputs".into()]);
                self.err(
                    pos,
                    "`outputs` must be a mapping of output names to `{type, description}`",
                );
                Vec::new()
            }
        }
    }
    pub(super) fn triggers(
        &mut self,
        top: &Map<String, Value>,
        spans: &Arc<Spans>,
    ) -> Vec<Trigger> {
        let mut out = Vec::new();
        let Some(t) = top.get("triggers") else {
            return out;
        };
        let Value::Array(items) = t else {
            let pos = spans.pos(&["triggers".into()]);
            self.err(pos, "`triggers` must be a list like `- type: webhook`");
            return out;
        };
        for (i, item) in items.iter().enumerate() {
            let path = vec!["triggers".to_string(), i.to_string()];
            let pos = spans.pos(&path);
            let Value::Object(m) = item else {
                self.err(pos, "a trigger must be a mapping with `type:`");
                continue;
            };
            let written = m.get("type").map(scalar_string).unwrap_or_default();
            let Some(kind) = TriggerKind::parse(&written) else {
                let names = TriggerKind::names();
                let hint = did_you_mean(&written, &names);
                let d = self.err(pos, format!("unknown trigger type `{written}`"));
                d.hints.push(match hint {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => format!("expected one of: {}", names.join(", ")),
                });
                continue;
            };
            // The seed writes `path:`/`method:` at the top level, the peer
            // under `config:`; both are read.
            let mut fields = m.clone();
            if let Some(Value::Object(cfg)) = m.get("config") {
                for (k, v) in cfg {
                    fields.insert(k.clone(), v.clone());
                }
            }
            fields.remove("config");
            // Kinds this runner does not start itself keep whatever they say.
            let own: &[&str] = kind.own_keys().unwrap_or_default();
            if !own.is_empty() {
                let common = ["type", "enabled", "name", "description", "id", "config"];
                let allowed: Vec<&str> = common.iter().chain(own).copied().collect();
                for k in fields.keys().filter(|k| !allowed.contains(&k.as_str())) {
                    let in_config = !m.contains_key(k);
                    let mut p = path.clone();
                    if in_config {
                        p.push("config".into());
                    }
                    let node = spans.node.lookup(&p);
                    let kp = node.key_pos(k).unwrap_or(node.pos());
                    let at = spans.yaml.file_pos(kp.line, kp.col);
                    let hint = match did_you_mean(k, &allowed) {
                        Some(c) => format!("did you mean `{c}`?"),
                        None => format!("a `{kind}` trigger reads: {}", own.join(", ")),
                    };
                    // An error, not a warning: a misspelt `secret` would
                    // otherwise serve the route without authentication.
                    let d = self.err(at, format!("unknown key `{k}` in a `{kind}` trigger"));
                    d.hints.push(hint);
                }
            }
            if kind == TriggerKind::Webhook {
                match fields.get("provider").map(scalar_string).as_deref() {
                    None | Some("generic" | "github") => {}
                    Some(p @ ("slack" | "telegram" | "discord")) => self.warn(
                        pos,
                        format!("`provider: {p}`: its handshake and request signing are not implemented; the route is a generic JSON webhook (authenticate it with `secret:` or `token_env:`)"),
                    ),
                    Some(other) => {
                        let d = self.err(pos, format!("unknown webhook provider `{other}`"));
                        d.hints.push("expected generic, github, slack, telegram or discord".into());
                    }
                }
            }
            out.push(Trigger { kind, fields, pos });
        }
        out
    }
    /// `concurrency: {key, limit}` (or a bare number: the limit).
    /// `budget: {tokens, cost_usd, daily_tokens, daily_cost_usd, prices}`:
    /// what a workflow's model calls may spend, and what they cost.
    pub(super) fn budget(&mut self, v: &Value, spans: &Spans) -> Budget {
        let here = ["budget".to_string()];
        let mut b = Budget::default();
        let Value::Object(m) = v else {
            let pos = spans.pos(&here);
            self.err(
                pos,
                "`budget` must be a mapping like `{tokens: 50000, cost_usd: 0.5}`",
            );
            return b;
        };
        self.check_keys(
            m,
            &[
                "tokens",
                "cost_usd",
                "daily_tokens",
                "daily_cost_usd",
                "prices",
            ],
            spans,
            &here,
            "`budget`",
        );
        let at = |k: &str| spans.pos(&["budget".into(), k.into()]);
        for (key, slot) in [
            ("tokens", &mut b.tokens),
            ("daily_tokens", &mut b.daily_tokens),
        ] {
            if let Some(t) = m.get(key) {
                *slot = t.as_u64().filter(|n| *n >= 1);
                if slot.is_none() {
                    let msg = format!("`budget.{key}` must be a whole number of tokens, 1 or more");
                    self.err(at(key), &msg);
                }
            }
        }
        for (key, slot) in [
            ("cost_usd", &mut b.cost_usd),
            ("daily_cost_usd", &mut b.daily_cost_usd),
        ] {
            if let Some(t) = m.get(key) {
                *slot = t.as_f64().filter(|x| *x > 0.0 && x.is_finite());
                if slot.is_none() {
                    let msg = format!(
                        "`budget.{key}` must be an amount of US dollars above 0, like `0.50`"
                    );
                    self.err(at(key), &msg);
                }
            }
        }
        match m.get("prices") {
            None => {}
            Some(Value::Object(models)) => {
                for (model, price) in models {
                    let path = ["budget".into(), "prices".into(), model.clone()];
                    let per = |k: &str| {
                        price
                            .get(k)
                            .and_then(Value::as_f64)
                            .filter(|x| *x >= 0.0 && x.is_finite())
                    };
                    match (price.as_object(), per("input"), per("output")) {
                        (Some(p), Some(input), Some(output)) => {
                            self.check_keys(p, &["input", "output"], spans, &path, "a price");
                            b.prices.push((model.clone(), Price { input, output }));
                        }
                        _ => {
                            let msg = format!(
                                "`budget.prices.{model}` must be `{{input: N, output: N}}`: US dollars per million tokens, 0 or more"
                            );
                            self.err(spans.pos(&path), &msg);
                        }
                    }
                }
            }
            Some(_) => {
                let msg = "`budget.prices` must map model names to `{input: N, output: N}` (US dollars per million tokens)";
                self.err(at("prices"), msg);
            }
        }
        b
    }

    pub(super) fn concurrency(&mut self, v: &Value, spans: &Spans) -> Option<Concurrency> {
        let here = ["concurrency".to_string()];
        let pos = spans.pos(&here);
        let limit_of = |v: &Value| v.as_u64().filter(|n| (1..=1_000_000).contains(n));
        match v {
            Value::Null => None,
            Value::Number(_) => match limit_of(v) {
                Some(n) => Some(Concurrency {
                    key: None,
                    limit: n as u32,
                }),
                None => {
                    self.err(
                        pos,
                        "`concurrency` must be a whole number of runs, 1 or more",
                    );
                    None
                }
            },
            Value::Object(m) => {
                self.check_keys(m, &["key", "limit"], spans, &here, "`concurrency`");
                let key = match m.get("key") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(k)) if !k.trim().is_empty() => Some(k.clone()),
                    Some(_) => {
                        let pos = spans.pos(&["concurrency".into(), "key".into()]);
                        self.err(pos, "`concurrency.key` must be text, a template over the inputs such as `'{{ inputs.user }}'`");
                        None
                    }
                };
                let limit = match m.get("limit") {
                    None => 1,
                    Some(l) => match limit_of(l) {
                        Some(n) => n as u32,
                        None => {
                            let pos = spans.pos(&["concurrency".into(), "limit".into()]);
                            self.err(
                                pos,
                                "`concurrency.limit` must be a whole number of runs, 1 or more",
                            );
                            return None;
                        }
                    },
                };
                Some(Concurrency { key, limit })
            }
            _ => {
                self.err(
                    pos,
                    "`concurrency` must be a mapping like `{key: '{{ inputs.user }}', limit: 1}`",
                );
                None
            }
        }
    }
    pub(super) fn duration(&mut self, v: &Value, pos: Pos, what: &str) -> Option<Duration> {
        match marktoflow_steps::builtin::parse_duration(v) {
            Ok(d) => Some(d),
            Err(e) => {
                self.err(pos, format!("`{what}`: {e}"));
                None
            }
        }
    }
}

/// The provider of a `${secret:PROVIDER://…}` reference other than the
/// environment's (the peer lists Vault, AWS and Azure; none of them is
/// wired up in its engine either).
fn secret_provider(text: &str) -> Option<&str> {
    text.match_indices("${secret:").find_map(|(i, m)| {
        let rest = &text[i + m.len()..];
        let provider = rest.split_once("://").map_or(rest, |(p, _)| p);
        let provider = provider.split('}').next().unwrap_or(provider);
        (provider != "env").then_some(provider)
    })
}
