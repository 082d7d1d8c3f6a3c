//! Step inputs → provider request bodies, provider replies → text.

use super::config::{Resolved, DEFAULT_MAX_TOKENS};
use super::provider::Provider;
use crate::core::args::Args;
use crate::core::error::{type_name, ActionError};
use serde_json::{json, Map, Value};

/// One chat message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Msg {
    pub role: String,
    pub content: Value,
}

/// The step's request, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prompt {
    pub messages: Vec<Msg>,
    pub system: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// `seed`: the same seed and prompt give the same sampled reply (local model).
    pub seed: Option<u64>,
    /// `format: json` / `output_schema`: the reply must be JSON.
    pub format: Option<OutputFormat>,
    /// `tools`: MCP servers (or `server.tool`) the model may call.
    pub tools: Vec<String>,
    /// `approval`: which calls of a tool (named as in `tools`) wait for a
    /// person, beside the declared tool's own `approval:`.
    pub approval: Vec<(String, crate::core::approval::ApprovalRule)>,
    /// `max_turns`: the most requests of one step that offers tools.
    pub max_turns: u32,
}

/// What shape the reply must have.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OutputFormat {
    /// Any JSON object.
    Json,
    /// JSON following this JSON Schema.
    Schema(Value),
}

impl OutputFormat {
    /// The schema the reply follows (any object for `format: json`).
    pub fn schema(&self) -> Value {
        match self {
            OutputFormat::Json => json!({"type": "object"}),
            OutputFormat::Schema(s) => s.clone(),
        }
    }

    /// Said to the model in the system prompt (a grammar or a JSON mode
    /// then holds it to it).
    pub fn instruction(&self) -> String {
        match self {
            OutputFormat::Json => "Reply with one JSON object and nothing else.".into(),
            OutputFormat::Schema(s) => format!(
                "Reply with one JSON value and nothing else, following this JSON Schema:\n{s}"
            ),
        }
    }

    /// The reply's JSON text (a surrounding Markdown fence removed), or why
    /// it does not conform.
    pub fn check(&self, text: &str) -> Result<String, String> {
        let t = unfenced(text);
        let v: Value = serde_json::from_str(t)
            .map_err(|e| format!("the reply is not JSON ({e}): {}", snippet(t)))?;
        super::schema::check(&self.schema(), &v)
            .map_err(|e| format!("the reply does not follow `output_schema`: {e}"))?;
        Ok(t.to_string())
    }
}

/// The value of a reply [`OutputFormat::check`] accepted (a Markdown fence
/// around it taken off), else None.
pub(crate) fn json_reply(text: &str) -> Option<Value> {
    serde_json::from_str(unfenced(text)).ok()
}

/// `text` without a Markdown code fence around it.
fn unfenced(text: &str) -> &str {
    let t = text.trim();
    t.strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|r| r.trim_end().strip_suffix("```"))
        .map(str::trim)
        .unwrap_or(t)
}

pub(crate) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Reads the inputs of a call of `method` (`run`, `chat`, …: they take the
/// same inputs) through its catalog entry, as every action does.
pub(crate) fn parse_inputs(method: &str, inputs: &Value) -> Result<Prompt, ActionError> {
    // `inputs: "text"`: the whole inputs are the prompt.
    if let Value::String(s) = inputs {
        return parse_inputs(method, &json!({ "prompt": s }));
    }
    let spec = super::SPECS
        .iter()
        .find(|s| s.method == method)
        .unwrap_or(&super::SPECS[0]);
    let args = Args::new(spec, inputs)?;

    let mut messages = Vec::new();
    match args.get("messages") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let Value::Object(m) = item else {
                    return Err(args.invalid(
                        &format!("messages[{i}]"),
                        format!(
                            "must be a mapping `{{role, content}}`, got {}",
                            type_name(item)
                        ),
                    ));
                };
                let role = match m.get("role") {
                    Some(Value::String(r)) if !r.trim().is_empty() => r.trim().to_ascii_lowercase(),
                    _ => {
                        return Err(args.invalid(
                            &format!("messages[{i}].role"),
                            "must be a string (user, assistant or system)",
                        ))
                    }
                };
                let content = match m.get("content") {
                    None | Some(Value::Null) => {
                        return Err(args.invalid(&format!("messages[{i}].content"), "is missing"))
                    }
                    Some(c) => c.clone(),
                };
                messages.push(Msg { role, content });
            }
        }
        Some(other) => {
            return Err(args.invalid(
                "messages",
                format!(
                    "must be a list of `{{role, content}}`, got {}",
                    type_name(other)
                ),
            ))
        }
    }

    if let Some(p) = args.get("prompt").map(text_of) {
        if p.trim().is_empty() {
            return Err(args.invalid("prompt", "is empty"));
        }
        messages.push(Msg {
            role: "user".into(),
            content: Value::String(p),
        });
    }
    if messages.is_empty() {
        return Err(ActionError::Input(format!(
            "`{}` needs input `prompt` (text) or `messages` (a list of {{role, content}})",
            args.action()
        )));
    }

    let system = args
        .get("system")
        .map(text_of)
        .filter(|s| !s.trim().is_empty());
    let max_tokens = match args.whole("max_tokens")? {
        Some(0) => return Err(args.invalid("max_tokens", "must be at least 1, got 0")),
        n => n,
    };
    let temperature = args.at_least("temperature", 0.0)?;
    let seed = args.whole("seed")?;
    let format = match (args.get("output_schema"), args.str("format")?) {
        (Some(s @ Value::Object(_)), _) => {
            super::schema::validate_schema(s).map_err(|e| args.invalid("output_schema", e))?;
            Some(OutputFormat::Schema(s.clone()))
        }
        (Some(other), _) => {
            return Err(args.invalid(
                "output_schema",
                format!(
                    "must be a JSON Schema (a mapping), got {}",
                    type_name(other)
                ),
            ))
        }
        (None, None) => None,
        (None, Some(f)) => match f.trim().to_ascii_lowercase().as_str() {
            "json" => Some(OutputFormat::Json),
            "text" | "" => None,
            _ => return Err(args.invalid("format", format!("must be `json` or `text`, got `{f}`"))),
        },
    };
    let tools: Vec<String> = args
        .strings("tools")?
        .into_iter()
        .map(|t| match t.trim() {
            "" => Err(args.invalid(
                "tools",
                "lists MCP tools by name (`fs`, `fs.read_file`), got an empty name",
            )),
            t => Ok(t.to_string()),
        })
        .collect::<Result<_, _>>()?;
    let mut approval = Vec::new();
    match args.get("approval") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (tool, v) in m {
                if !tools.contains(tool) {
                    return Err(args.invalid(
                        "approval",
                        format!("`{tool}` is not among the step's `tools`"),
                    ));
                }
                let rule = crate::core::approval::ApprovalRule::parse(v)
                    .map_err(|e| args.invalid("approval", format!("`{tool}`: {e}")))?;
                if let Some(rule) = rule {
                    approval.push((tool.clone(), rule));
                }
            }
        }
        Some(_) => {
            return Err(args.invalid(
                "approval",
                "must map tools, as `tools` names them, to `required` or a rule",
            ))
        }
    }
    let max_turns = match args.whole("max_turns")? {
        Some(n @ 1..=100) => n as u32,
        other => {
            return Err(args.invalid(
                "max_turns",
                format!(
                    "must be from 1 to 100, got {}",
                    other.map_or("nothing".into(), |n| n.to_string())
                ),
            ))
        }
    };
    Ok(Prompt {
        messages,
        system,
        max_tokens,
        temperature,
        seed,
        format,
        tools,
        approval,
        max_turns,
    })
}

/// The JSON body for the resolved provider.
pub(crate) fn request_body(r: &Resolved, p: &Prompt) -> Value {
    let max_tokens = p.max_tokens.or(r.max_tokens);
    let temperature = p.temperature.or(r.temperature);
    match r.provider {
        Provider::Anthropic => {
            // System messages are a top-level field in the Messages API.
            let mut system: Vec<String> = p.system.iter().cloned().collect();
            let mut messages = Vec::new();
            for m in &p.messages {
                if m.role == "system" {
                    system.push(text_of(&m.content));
                    continue;
                }
                let content = match &m.content {
                    c @ (Value::String(_) | Value::Array(_)) => c.clone(),
                    other => Value::String(other.to_string()),
                };
                messages.push(json!({"role": m.role, "content": content}));
            }
            // The Messages API has no JSON mode: the instruction asks, the
            // reply is checked.
            if let Some(f) = &p.format {
                system.push(f.instruction());
            }
            let mut body = json!({
                "model": r.model,
                "max_tokens": max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
                "messages": messages,
            });
            if !system.is_empty() {
                body["system"] = Value::String(system.join("\n\n"));
            }
            if let Some(t) = temperature {
                body["temperature"] = json!(t);
            }
            body
        }
        Provider::OpenAi => {
            let mut messages = Vec::new();
            if let Some(s) = system_with_format(p) {
                messages.push(json!({"role": "system", "content": s}));
            }
            for m in &p.messages {
                let content = match &m.content {
                    c @ (Value::String(_) | Value::Array(_)) => c.clone(),
                    other => Value::String(other.to_string()),
                };
                messages.push(json!({"role": m.role, "content": content}));
            }
            let mut body = json!({"model": r.model, "messages": messages});
            if let Some(n) = max_tokens {
                // api.openai.com's newer models reject `max_tokens`; compatible
                // servers (vLLM, llama.cpp, …) know `max_tokens`.
                let field = if r.is_default_base() {
                    "max_completion_tokens"
                } else {
                    "max_tokens"
                };
                body[field] = json!(n);
            }
            if let Some(t) = temperature {
                body["temperature"] = json!(t);
            }
            if let Some(seed) = p.seed {
                body["seed"] = json!(seed);
            }
            match &p.format {
                None => {}
                Some(OutputFormat::Json) => {
                    body["response_format"] = json!({"type": "json_object"});
                }
                Some(OutputFormat::Schema(s)) => {
                    body["response_format"] = json!({
                        "type": "json_schema",
                        "json_schema": {"name": "output", "schema": s},
                    });
                }
            }
            body
        }
        Provider::Ollama => {
            let mut messages = Vec::new();
            if let Some(s) = system_with_format(p) {
                messages.push(json!({"role": "system", "content": s}));
            }
            for m in &p.messages {
                messages.push(json!({"role": m.role, "content": text_of(&m.content)}));
            }
            let mut body = json!({"model": r.model, "messages": messages, "stream": false});
            let mut options = Map::new();
            if let Some(n) = max_tokens {
                options.insert("num_predict".into(), json!(n));
            }
            if let Some(t) = temperature {
                options.insert("temperature".into(), json!(t));
            }
            if let Some(seed) = p.seed {
                options.insert("seed".into(), json!(seed));
            }
            if !options.is_empty() {
                body["options"] = Value::Object(options);
            }
            match &p.format {
                None => {}
                Some(OutputFormat::Json) => body["format"] = json!("json"),
                Some(OutputFormat::Schema(s)) => body["format"] = s.clone(),
            }
            body
        }
        // Runs in-process: no request body.
        Provider::Local => Value::Null,
    }
}

/// The system prompt with the output format's instruction appended.
fn system_with_format(p: &Prompt) -> Option<String> {
    let parts: Vec<String> = p
        .system
        .iter()
        .cloned()
        .chain(p.format.as_ref().map(OutputFormat::instruction))
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// A parsed reply: the text, plus a warning worth logging (truncation, empty reply).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    pub text: String,
    pub warning: Option<String>,
}

/// The model list of `GET /models` (`{data: [{id, owned_by}]}`) or Ollama's
/// `GET /api/tags` (`{models: [{name}]}`).
pub(crate) fn parse_models(
    provider: Provider,
    body: &Value,
) -> Result<Vec<super::ModelInfo>, String> {
    let (list, id_key) = match provider {
        Provider::Ollama => ("models", "name"),
        _ => ("data", "id"),
    };
    let items = body
        .get(list)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no `{list}` list in {}", snippet(&body.to_string())))?;
    let owner = provider.id();
    Ok(items
        .iter()
        .filter_map(|m| {
            let id = m.get(id_key)?.as_str()?.to_string();
            let owned_by = m
                .get("owned_by")
                .and_then(Value::as_str)
                .unwrap_or(owner)
                .to_string();
            Some(super::ModelInfo { id, owned_by })
        })
        .collect())
}

/// Extracts the reply text; `Err` when the body has not the provider's shape.
pub(crate) fn parse_reply(provider: Provider, body: &Value) -> Result<Reply, String> {
    match provider {
        Provider::Anthropic => {
            let Some(blocks) = body.get("content").and_then(Value::as_array) else {
                return Err(format!(
                    "reply has no `content` array: {}",
                    snippet(&body.to_string())
                ));
            };
            let text: String = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            let stop = body.get("stop_reason").and_then(Value::as_str);
            let warning = if stop == Some("max_tokens") {
                Some(
                    "the reply was cut off at max_tokens; raise `max_tokens` for a complete answer"
                        .into(),
                )
            } else if text.is_empty() {
                Some(format!(
                    "the reply has no text (stop_reason: {})",
                    stop.unwrap_or("none")
                ))
            } else {
                None
            };
            Ok(Reply { text, warning })
        }
        Provider::OpenAi => {
            let Some(choice) = body.get("choices").and_then(|c| c.get(0)) else {
                return Err(format!(
                    "reply has no `choices`: {}",
                    snippet(&body.to_string())
                ));
            };
            let message = choice.get("message");
            let text = match message.and_then(|m| m.get("content")) {
                Some(Value::String(s)) => s.clone(),
                // Some servers return content parts.
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect(),
                _ => String::new(),
            };
            let finish = choice.get("finish_reason").and_then(Value::as_str);
            let refusal = message
                .and_then(|m| m.get("refusal"))
                .and_then(Value::as_str);
            let warning = if finish == Some("length") {
                Some("the reply was cut off at the token limit; raise `max_tokens` for a complete answer".into())
            } else if let (true, Some(r)) = (text.is_empty(), refusal) {
                Some(format!("the model refused: {r}"))
            } else if text.is_empty() {
                Some(format!(
                    "the reply has no text (finish_reason: {})",
                    finish.unwrap_or("none")
                ))
            } else {
                None
            };
            Ok(Reply { text, warning })
        }
        Provider::Ollama => {
            let Some(text) = body
                .get("message")
                .and_then(|m| m.get("content"))
                .and_then(Value::as_str)
            else {
                return Err(format!(
                    "reply has no `message.content`: {}",
                    snippet(&body.to_string())
                ));
            };
            let warning = if body.get("done_reason").and_then(Value::as_str) == Some("length") {
                Some("the reply was cut off at the token limit; raise `max_tokens` for a complete answer".into())
            } else if text.is_empty() {
                Some("the reply has no text".into())
            } else {
                None
            };
            Ok(Reply {
                text: text.to_string(),
                warning,
            })
        }
        Provider::Local => Err("the local model has no HTTP reply".into()),
    }
}

/// The provider's error message from an error body, else a snippet of the body.
pub(crate) fn error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let found = v
            .get("error")
            .and_then(|e| match e {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => o.get("message").and_then(Value::as_str).map(str::to_string),
                _ => None,
            })
            .or_else(|| v.get("message").and_then(Value::as_str).map(str::to_string))
            .or_else(|| v.get("detail").and_then(Value::as_str).map(str::to_string));
        if let Some(m) = found {
            return snippet(&m);
        }
    }
    snippet(body.trim())
}

/// At most 500 characters of `s`, on one line.
pub(crate) fn snippet(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out: String = one_line.chars().take(500).collect();
    if one_line.chars().count() > 500 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs() {
        let p = parse_inputs("run", &json!({"prompt": {"a": 1}})).unwrap();
        assert_eq!(p.messages[0].content, json!("{\"a\":1}"));
        assert!(matches!(
            parse_inputs("run", &json!({})),
            Err(ActionError::Input(_))
        ));
        assert!(matches!(
            parse_inputs("run", &json!({"prompt": "x", "max_tokens": -1})),
            Err(ActionError::Input(_))
        ));
        let p = parse_inputs(
            "run",
            &json!({"messages": [{"role": "user", "content": "hi"}], "system": "s"}),
        )
        .unwrap();
        assert_eq!(p.messages.len(), 1);
        assert_eq!(p.system.as_deref(), Some("s"));
        // Read through the catalog: its default, its coercion, its aliases.
        let p = parse_inputs("run", &json!("just text")).unwrap();
        assert_eq!((p.max_turns, p.tools.len()), (10, 0));
        let p = parse_inputs(
            "run",
            &json!({"prompt": "q", "tools": ["refund.md", "fs"], "approval": {"refund.md": {"over": {"amount": 100}}, "fs": false}}),
        )
        .unwrap();
        assert_eq!(
            p.approval,
            [(
                "refund.md".to_string(),
                crate::core::approval::ApprovalRule::When(crate::core::approval::Conditions {
                    over: vec![("amount".into(), 100.0)],
                    ..Default::default()
                })
            )]
        );
        let p = parse_inputs(
            "run",
            &json!({"prompt": "q", "max_tokens": "64", "temperature": "0.5",
            "seed": u64::MAX, "tools": "fs", "max_turns": "3"}),
        )
        .unwrap();
        assert_eq!(
            (p.max_tokens, p.temperature, p.seed, p.tools, p.max_turns),
            (
                Some(64),
                Some(0.5),
                Some(u64::MAX),
                vec!["fs".to_string()],
                3
            )
        );
        for bad in [
            json!({"prompt": "q", "max_tokens": 0}),
            json!({"prompt": "q", "max_tokens": 2.5}),
            json!({"prompt": "q", "temperature": -1}),
            json!({"prompt": "q", "max_turns": 0}),
            json!({"prompt": "q", "max_turns": 101}),
            json!({"prompt": "q", "tools": [""]}),
            // A rule for a tool the step does not offer, or one that does not fit.
            json!({"prompt": "q", "tools": ["fs"], "approval": {"web": "required"}}),
            json!({"prompt": "q", "tools": ["fs"], "approval": {"fs": {"over": 3}}}),
            json!({"prompt": "q", "tools": ["fs"], "approval": "required"}),
            json!({"messages": "hi"}),
            json!({"messages": [{"content": "hi"}]}),
            json!([1]),
        ] {
            let e = parse_inputs("run", &bad).unwrap_err().to_string();
            assert!(e.contains("`agent.run`"), "{bad}: {e}");
        }
    }

    fn resolved(provider: Provider, base: &str) -> Resolved {
        let mut tool = crate::core::tool::ToolConfig {
            name: "agent".into(),
            sdk: provider.id().into(),
            ..Default::default()
        };
        tool.auth
            .insert("api_key".into(), Value::String("k".into()));
        tool.auth
            .insert("base_url".into(), Value::String(base.into()));
        tool.options
            .insert("model".into(), Value::String("m".into()));
        super::super::config::resolve(&Default::default(), &tool, None, &Default::default())
            .unwrap()
    }

    #[test]
    fn json_output_in_each_providers_terms() {
        let schema = json!({"type": "object", "required": ["a"]});
        let p = parse_inputs(
            "run",
            &json!({"prompt": "q", "output_schema": schema, "seed": 7}),
        )
        .unwrap();
        assert_eq!(p.format, Some(OutputFormat::Schema(schema.clone())));
        assert_eq!(p.seed, Some(7));

        let b = request_body(&resolved(Provider::OpenAi, "http://127.0.0.1:1/v1"), &p);
        assert_eq!(b["response_format"]["type"], "json_schema");
        assert_eq!(b["response_format"]["json_schema"]["schema"], schema);
        assert_eq!(b["seed"], 7);
        let b = request_body(&resolved(Provider::Ollama, "http://127.0.0.1:1"), &p);
        assert_eq!(b["format"], schema);
        assert_eq!(b["options"]["seed"], 7);
        let b = request_body(&resolved(Provider::Anthropic, "http://127.0.0.1:1"), &p);
        assert!(b["system"].as_str().unwrap().contains("JSON Schema"), "{b}");

        let p = parse_inputs("run", &json!({"prompt": "q", "format": "JSON"})).unwrap();
        assert_eq!(p.format, Some(OutputFormat::Json));
        let b = request_body(&resolved(Provider::OpenAi, "http://127.0.0.1:1/v1"), &p);
        assert_eq!(b["response_format"], json!({"type": "json_object"}));
        assert!(b["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON"));
        assert_eq!(
            parse_inputs("run", &json!({"prompt": "q"})).unwrap().format,
            None
        );

        for bad in [
            json!({"prompt": "q", "format": "yaml"}),
            json!({"prompt": "q", "format": 1}),
            json!({"prompt": "q", "output_schema": "object"}),
            json!({"prompt": "q", "output_schema": {"type": "obj"}}),
            json!({"prompt": "q", "seed": -1}),
        ] {
            assert!(
                matches!(parse_inputs("run", &bad), Err(ActionError::Input(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn replies_are_checked_against_the_format() {
        let f = OutputFormat::Schema(json!({"type": "object", "required": ["a"]}));
        assert_eq!(f.check("```json\n{\"a\": 1}\n```").unwrap(), "{\"a\": 1}");
        assert_eq!(f.check(" {\"a\": 1} ").unwrap(), "{\"a\": 1}");
        assert!(f
            .check("{\"b\": 1}")
            .unwrap_err()
            .contains("`a` is missing"));
        assert!(f
            .check("Sure! {\"a\": 1}")
            .unwrap_err()
            .contains("not JSON"));
        assert!(OutputFormat::Json.check("[1]").is_err());
        assert!(OutputFormat::Json.check("{}").is_ok());
    }

    #[test]
    fn errors() {
        assert_eq!(
            error_message(r#"{"type":"error","error":{"type":"x","message":"bad key"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message("oops"), "oops");
    }

    #[test]
    fn replies() {
        let r = parse_reply(
            Provider::Anthropic,
            &json!({"content": [{"type": "text", "text": "a"}, {"type": "tool_use"}, {"type": "text", "text": "b"}], "stop_reason": "end_turn"}),
        )
        .unwrap();
        assert_eq!(r.text, "ab");
        assert!(r.warning.is_none());
        let r = parse_reply(
            Provider::OpenAi,
            &json!({"choices": [{"message": {"content": "x"}, "finish_reason": "length"}]}),
        )
        .unwrap();
        assert_eq!(r.text, "x");
        assert!(r.warning.is_some());
        assert!(parse_reply(Provider::Ollama, &json!({"nope": 1})).is_err());
    }
}
