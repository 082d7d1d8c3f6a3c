//! Agent steps with tools (`tools: [fs, tickets.search, payments]` on
//! `agent.run`): MCP servers' tools, and HTTP requests (`http`, `http.get`,
//! or a declared `sdk: http` tool, its `base_url` and headers applied), are
//! offered to the model in its provider's format; each tool call it makes
//! is run and its result sent back, until the model answers in text or
//! `max_turns` requests have been made. A declared tool's `approval:`
//! says which calls wait for a person first.

use super::provider::Provider;
use crate::core::action::hosts::ToolDecision;
use crate::core::action::Action;
use crate::core::approval::{ApprovalRule, CallFacts};
use crate::core::error::ApprovalAsk;
use crate::core::mcp::{result_text, ServerConfig, Session};
use crate::core::tool::ToolConfig;
use crate::core::{action::Call, error::ActionError, signals::LogLevel};
use serde_json::{json, Map, Value};
use sha2::Digest as _;
use std::sync::Arc;

/// The most of one tool result sent back to the model.
const MAX_RESULT_CHARS: usize = 32_000;

/// One tool offered to the model.
pub(crate) struct Offered {
    /// The name the model sees: `fs__read_file` (providers allow only
    /// letters, digits, `_` and `-`).
    wire: String,
    /// `fs.read_file`, for logs.
    shown: String,
    /// The server's name for it.
    name: String,
    description: String,
    schema: Value,
    backend: Backend,
    /// Which calls wait for a person's approval: the declared tool's
    /// `approval:` and the step's for it (any of them).
    approval: Vec<ApprovalRule>,
}

/// What runs a call.
enum Backend {
    Mcp(Arc<Session>),
    /// An HTTP request with this method (lower case), through the declared
    /// tool when there is one.
    Http(&'static str, Option<ToolConfig>),
    /// A workflow file, run as a sub-workflow with the call's arguments as
    /// its inputs.
    Workflow(String),
}

/// The methods an agent may use of an HTTP tool.
const HTTP_METHODS: &[&str] = &["get", "post", "put", "patch", "delete"];

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    /// The provider's id for it (Ollama gives none).
    pub id: String,
    pub wire: String,
    /// The arguments; `Err` when the model sent text that is not a JSON object.
    pub args: Result<Map<String, Value>, String>,
}

fn wire_name(tool: &str, name: &str) -> String {
    wire_of(&format!("{tool}__{name}"))
}

/// `raw` as a name providers take.
fn wire_of(raw: &str) -> String {
    let mut w: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    w.truncate(64);
    w
}

/// The tools `wanted` names: a declared `sdk: mcp` tool (all the tools its
/// server allows) or `<tool>.<name>` (one of them). Servers are started now.
pub(crate) async fn offer(
    call: &Call<'_>,
    prompt: &super::wire::Prompt,
    can_http: bool,
) -> Result<Vec<Offered>, ActionError> {
    let mut out: Vec<Offered> = Vec::new();
    for w in &prompt.tools {
        offer_one(call, w, can_http, &mut out).await?;
    }
    // The step's rule for an entry covers every tool that entry names,
    // whichever entry offered it first (`[http, http.post]`).
    for (entry, rule) in &prompt.approval {
        for o in out.iter_mut().filter(|o| covers(entry, &o.shown)) {
            o.approval.push(rule.clone());
        }
    }
    Ok(out)
}

/// Whether the `tools` entry `entry` names the tool shown as `shown`:
/// the tool itself (`payments.post`, `refund.md`), or all of a server's or
/// HTTP tool's (`payments`).
fn covers(entry: &str, shown: &str) -> bool {
    shown.eq_ignore_ascii_case(entry)
        || shown
            .strip_prefix(entry)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// Whether a `tools` entry names a workflow file.
fn is_workflow_file(w: &str) -> bool {
    let lower = w.to_ascii_lowercase();
    lower.ends_with(".md") || lower.ends_with(".markdown")
}

/// The tools one `tools` entry offers, added to `out`.
async fn offer_one(
    call: &Call<'_>,
    w: &String,
    can_http: bool,
    out: &mut Vec<Offered>,
) -> Result<(), ActionError> {
    {
        if is_workflow_file(w) {
            let Some(host) = call.caps.workflows.as_ref() else {
                return Err(ActionError::Input(format!(
                    "input `tools`: `{w}`: workflow files cannot be offered here"
                )));
            };
            let t = host
                .tool(w)
                .map_err(|e| ActionError::Input(format!("input `tools`: {e}")))?;
            let wire = wire_of(&t.name);
            if !out.iter().any(|o| o.wire == wire) {
                out.push(Offered {
                    wire,
                    shown: w.clone(),
                    name: t.name,
                    description: t.description,
                    schema: t.schema,
                    backend: Backend::Workflow(w.clone()),
                    approval: Vec::new(),
                });
            }
            return Ok(());
        }
        let (tool_name, only) = match w.split_once('.') {
            Some((t, n)) => (t, Some(n)),
            None => (w.as_str(), None),
        };
        let declared = call.declared.iter().find(|t| t.name == tool_name);
        let http = match declared {
            Some(t) => t.sdk == "http",
            None => tool_name == "http",
        };
        if http {
            if !can_http {
                return Err(ActionError::Input(format!(
                    "input `tools`: `{w}`: HTTP tools cannot be offered here"
                )));
            }
            return offer_http(w, declared, only, call.caps.allowed_hosts.is_some(), out);
        }
        let Some(tool) = declared.filter(|t| t.sdk == "mcp") else {
            let mcp: Vec<&str> = call
                .declared
                .iter()
                .filter(|t| t.sdk == "mcp")
                .map(|t| t.name.as_str())
                .collect();
            return Err(ActionError::Input(format!(
                "input `tools`: `{tool_name}` is not an MCP server the workflow declares (`tools: {{{tool_name}: {{sdk: mcp, command: ...}}}}`){}",
                if mcp.is_empty() {
                    String::new()
                } else {
                    format!("; declared: {}", mcp.join(", "))
                }
            )));
        };
        let config = ServerConfig::from_options(&tool.options)
            .map_err(|e| ActionError::Input(format!("tool `{}`: {e}", tool.name)))?;
        if let Some(n) = only.filter(|n| !config.allows(n)) {
            return Err(ActionError::Input(format!(
                "input `tools`: `{w}`: tool `{n}` is not in the `allowed` list of `{tool_name}`"
            )));
        }
        let session = call.mcp_session(&tool.name, &config).await?;
        let before = out.len();
        for t in session.tools().await? {
            let name: &str = &t.name;
            if !config.allows(name) || only.is_some_and(|o| o != name) {
                continue;
            }
            let wire = wire_name(&tool.name, name);
            if out.iter().any(|o| o.wire == wire) {
                continue;
            }
            out.push(Offered {
                wire,
                shown: format!("{}.{name}", tool.name),
                name: name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_string(),
                schema: Value::Object((*t.input_schema).clone()),
                backend: Backend::Mcp(session.clone()),
                approval: config.approval.clone().into_iter().collect(),
            });
        }
        if out.len() == before {
            return Err(ActionError::Input(format!(
                "input `tools`: the MCP server of `{tool_name}` has {}",
                match only {
                    Some(n) => format!("no tool `{n}`"),
                    None => "no tools the workflow may call".into(),
                }
            )));
        }
    }
    Ok(())
}

/// The HTTP methods `wanted` names (`http`, `http.post`, a declared
/// `sdk: http` tool or one of its methods), each a function taking a URL
/// (or a path under the tool's `base_url`), query, headers and a JSON body.
fn offer_http(
    wanted: &str,
    declared: Option<&ToolConfig>,
    only: Option<&str>,
    hosts_limited: bool,
    out: &mut Vec<Offered>,
) -> Result<(), ActionError> {
    let tool_name = declared.map_or("http", |t| t.name.as_str());
    // A model picks the URLs: bare `http` only where the workflow limits the
    // hosts (no cloud metadata address, no service on localhost by
    // accident); a declared tool's headers only to its own origin.
    match declared {
        None if !hosts_limited => {
            return Err(ActionError::Input(format!(
                "input `tools`: `{wanted}`: an agent gets `http` only where the workflow limits the hosts it may call (`permissions: {{hosts: [api.example.com]}}` or `--allow-host`); or declare an `sdk: http` tool with its `base_url`"
            )))
        }
        Some(t) if t.options.get("base_url").or_else(|| t.options.get("baseUrl")).is_none() => {
            return Err(ActionError::Input(format!(
                "input `tools`: `{wanted}`: give the tool `{}` a `base_url`: an agent calls a declared HTTP tool on its own origin only",
                t.name
            )))
        }
        _ => {}
    }
    let methods: Vec<&'static str> = match only {
        None => HTTP_METHODS.to_vec(),
        Some(m) => match HTTP_METHODS.iter().find(|x| x.eq_ignore_ascii_case(m)) {
            Some(x) => vec![*x],
            None => {
                return Err(ActionError::Input(format!(
                    "input `tools`: `{wanted}`: an HTTP tool offers {}",
                    HTTP_METHODS.join(", ")
                )))
            }
        },
    };
    let approval = match declared.and_then(|t| t.options.get("approval")) {
        None => None,
        Some(v) => ApprovalRule::parse(v)
            .map_err(|e| ActionError::Input(format!("tool `{tool_name}`: {e}")))?,
    };
    let base = declared
        .and_then(|t| {
            t.options
                .get("base_url")
                .or_else(|| t.options.get("baseUrl"))
        })
        .and_then(Value::as_str);
    for method in methods {
        let wire = wire_name(tool_name, method);
        if out.iter().any(|o| o.wire == wire) {
            continue;
        }
        let upper = method.to_ascii_uppercase();
        let description = match base {
            Some(b) => format!("An HTTP {upper} request to {b} (give the path) or another allowed URL; returns the status and the body."),
            None => format!("An HTTP {upper} request to a URL; returns the status and the body."),
        };
        let mut properties = json!({
            "url": {"type": "string", "description": match base {
                Some(b) => format!("A path under {b}, or a whole URL"),
                None => "The URL (http or https)".to_string(),
            }},
            "query": {"type": "object", "description": "Query parameters"},
            "headers": {"type": "object", "description": "Request headers"},
        });
        if matches!(method, "post" | "put" | "patch") {
            properties["json"] = json!({"description": "The body, sent as JSON"});
        }
        out.push(Offered {
            wire,
            shown: format!("{tool_name}.{method}"),
            name: method.to_string(),
            description,
            schema: json!({"type": "object", "properties": properties, "required": ["url"]}),
            backend: Backend::Http(method, declared.cloned()),
            approval: approval.clone().into_iter().collect(),
        });
    }
    Ok(())
}

/// The request's `tools` field.
pub(crate) fn definitions(provider: Provider, offered: &[Offered]) -> Value {
    Value::Array(
        offered
            .iter()
            .map(|o| match provider {
                Provider::Anthropic => json!({
                    "name": o.wire, "description": o.description, "input_schema": o.schema,
                }),
                _ => json!({"type": "function", "function": {
                    "name": o.wire, "description": o.description, "parameters": o.schema,
                }}),
            })
            .collect(),
    )
}

/// The tool calls in a reply (none: the model answered).
pub(crate) fn calls(provider: Provider, reply: &Value) -> Vec<ToolCall> {
    let object = |v: &Value| match v {
        Value::Object(m) => Ok(m.clone()),
        Value::Null => Ok(Map::new()),
        // OpenAI sends the arguments as JSON text.
        Value::String(s) if s.trim().is_empty() => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(format!("the arguments are not a JSON object: {s}")),
        },
        other => Err(format!("the arguments are not a JSON object: {other}")),
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    match provider {
        Provider::Anthropic => reply
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .map(|b| ToolCall {
                id: text(b.get("id")),
                wire: text(b.get("name")),
                args: object(b.get("input").unwrap_or(&Value::Null)),
            })
            .collect(),
        _ => {
            let message = match provider {
                Provider::OpenAi => reply.pointer("/choices/0/message"),
                _ => reply.get("message"),
            };
            message
                .and_then(|m| m.get("tool_calls"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| ToolCall {
                    id: text(c.get("id")),
                    wire: text(c.pointer("/function/name")),
                    args: object(c.pointer("/function/arguments").unwrap_or(&Value::Null)),
                })
                .collect()
        }
    }
}

/// Runs one call; the text for the model and whether it is an error (an
/// error goes back to the model, which may try again). `id` names the call
/// in the run (the same when the step runs again): a tool that needs a
/// person's approval is called once the decision for it is known.
pub(crate) async fn run(
    call: &Call<'_>,
    offered: &[Offered],
    tc: &ToolCall,
    id: &str,
    http: Option<&dyn Action>,
) -> Result<(String, bool), ActionError> {
    let Some(o) = offered.iter().find(|o| o.wire == tc.wire) else {
        let names: Vec<&str> = offered.iter().map(|o| o.wire.as_str()).collect();
        return Ok((
            format!(
                "there is no tool `{}`; the tools are: {}",
                tc.wire,
                names.join(", ")
            ),
            true,
        ));
    };
    let mut args = match &tc.args {
        Ok(a) => a.clone(),
        Err(e) => return Ok((e.clone(), true)),
    };
    // The call as asked names it: another call (a model that answered
    // differently when the step ran again) is asked about anew.
    let digest = sha2::Sha256::digest(format!("{}{}", o.shown, Value::Object(args.clone())));
    let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let id = format!("tool:{id}:{short}");
    if o.needs_approval(&args) {
        match call.caps.approvals.as_ref().and_then(|a| a.decision(&id)) {
            None => {
                return Err(ActionError::NeedsApproval(Box::new(ApprovalAsk {
                    id,
                    tool: o.shown.clone(),
                    args,
                })))
            }
            Some(ToolDecision::Rejected { reason, by }) => {
                call.log(
                    LogLevel::Info,
                    format!("{}: {by} refused the call of {}", call.action, o.shown),
                );
                let why = reason
                    .filter(|r| !r.trim().is_empty())
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                return Ok((format!("{by} refused this call of {}{why}", o.shown), true));
            }
            Some(ToolDecision::Approved { args: edited, by }) => {
                call.log(
                    LogLevel::Info,
                    format!("{}: {by} approved the call of {}", call.action, o.shown),
                );
                if let Some(edited) = edited {
                    args = edited;
                }
            }
        }
    }
    call.log(
        LogLevel::Info,
        format!("{}: calling {}", call.action, o.shown),
    );
    let made = match &o.backend {
        Backend::Mcp(session) => session
            .call(&o.name, args, &call.caps.cancel)
            .await
            .map(|r| {
                let mut text = result_text(&r);
                if text.is_empty() {
                    text = r
                        .structured_content
                        .as_ref()
                        .map(Value::to_string)
                        .unwrap_or_default();
                }
                (text, r.is_error == Some(true))
            }),
        Backend::Http(method, tool) => match http {
            Some(http) => {
                let to = HttpTo {
                    shown: &o.shown,
                    method,
                    tool: tool.as_ref(),
                    key: &id,
                };
                http_call(call, http, to, args).await
            }
            None => Err(ActionError::failed("HTTP tools cannot be called here")),
        },
        // Its outputs, as JSON; a run that did not complete is an error
        // the model is told of.
        Backend::Workflow(path) => match call.caps.workflows.as_ref() {
            Some(host) => Ok(match host.run(path, args, &id).await {
                Ok(outputs) => (outputs.to_string(), false),
                Err(why) => (why, true),
            }),
            None => Err(ActionError::failed("workflow files cannot be called here")),
        },
    };
    let (text, is_error) = match made {
        Ok(r) => r,
        Err(ActionError::Cancelled) => return Err(ActionError::Cancelled),
        // A refused or failed call: the model is told, and may recover.
        Err(e) => (e.to_string(), true),
    };
    if is_error {
        call.log(
            LogLevel::Warn,
            format!("{}: {} failed: {text}", call.action, o.shown),
        );
    }
    Ok((cap(text), is_error))
}

impl Offered {
    /// Whether this call of it waits for a person (its tool's `approval:`).
    fn needs_approval(&self, args: &Map<String, Value>) -> bool {
        if self.approval.is_empty() {
            return false;
        }
        let (method, host) = match &self.backend {
            Backend::Mcp(_) | Backend::Workflow(_) => (None, None),
            Backend::Http(m, tool) => {
                (Some(m.to_ascii_uppercase()), http_host(tool.as_ref(), args))
            }
        };
        // An HTTP call's amounts are in what it sends: its JSON body and its
        // query, each looked at (what else the model adds is not sent).
        let empty = Map::new();
        let object = |k: &str| args.get(k).and_then(Value::as_object).unwrap_or(&empty);
        let sent: Vec<&Map<String, Value>> = match &self.backend {
            Backend::Http(..) => vec![object("json"), object("query")],
            Backend::Mcp(_) | Backend::Workflow(_) => vec![args],
        };
        sent.into_iter().any(|args| {
            let facts = CallFacts {
                name: &self.name,
                method: method.as_deref(),
                host: host.as_deref(),
                args,
            };
            self.approval.iter().any(|rule| rule.applies(&facts))
        })
    }
}

/// Where an HTTP call goes: its URL, or its tool's `base_url` for a path.
fn http_url(tool: Option<&ToolConfig>, args: &Map<String, Value>) -> Option<reqwest::Url> {
    let url = args.get("url").and_then(Value::as_str).unwrap_or_default();
    let base = tool
        .and_then(|t| {
            t.options
                .get("base_url")
                .or_else(|| t.options.get("baseUrl"))
        })
        .and_then(Value::as_str);
    reqwest::Url::parse(url)
        .ok()
        .or_else(|| base.and_then(|b| reqwest::Url::parse(b).ok()))
}

/// A URL's host as rules name it: lower case, without a trailing dot.
fn host_of(u: &reqwest::Url) -> Option<String> {
    u.host_str()
        .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
}

/// A URL's origin: scheme, host and port (credentials go to one origin).
fn origin_of(u: &reqwest::Url) -> String {
    format!(
        "{}://{}:{}",
        u.scheme(),
        host_of(u).unwrap_or_default(),
        u.port_or_known_default().unwrap_or(0)
    )
}

/// The host an HTTP call goes to (see [`http_url`]).
fn http_host(tool: Option<&ToolConfig>, args: &Map<String, Value>) -> Option<String> {
    http_url(tool, args).as_ref().and_then(host_of)
}

/// An agent's HTTP call, made as `http.<method>` would make it (the
/// allowed hosts, the tool's `base_url` and headers, limits, retries); a
/// status of 400 or more is an error the model is told of. `key` makes the
/// request once (`Idempotency-Key`) when the step runs again.
/// Where an agent's HTTP call goes: the tool as shown, its method, the
/// declared tool, and the call's key.
struct HttpTo<'a> {
    shown: &'a str,
    method: &'static str,
    tool: Option<&'a ToolConfig>,
    key: &'a str,
}

async fn http_call(
    call: &Call<'_>,
    http: &dyn Action,
    to: HttpTo<'_>,
    args: Map<String, Value>,
) -> Result<(String, bool), ActionError> {
    let HttpTo {
        shown,
        method,
        tool,
        key,
    } = to;
    let mut inputs = Map::new();
    let url = args.get("url").cloned().unwrap_or(Value::Null);
    let is_path = url
        .as_str()
        .is_some_and(|u| reqwest::Url::parse(u).is_err());
    // A declared tool's headers (its credentials) go to its own origin
    // only: same scheme, host and port as its `base_url`.
    let home = tool.and_then(|t| http_url(Some(t), &Map::new()));
    if let (Some(home), false) = (&home, is_path) {
        let there = http_url(None, &args).map(|u| origin_of(&u));
        if there.as_deref() != Some(origin_of(home).as_str()) {
            return Ok((
                format!(
                    "{shown} calls {} only: give a path under its base URL",
                    host_of(home).unwrap_or_default()
                ),
                true,
            ));
        }
    }
    inputs.insert(
        if is_path && tool.is_some() {
            "path"
        } else {
            "url"
        }
        .into(),
        url,
    );
    for k in ["query", "headers", "json"] {
        if let Some(v) = args.get(k).filter(|v| !v.is_null()) {
            inputs.insert(k.into(), v.clone());
        }
    }
    inputs.insert("fail_on_error".into(), Value::Bool(false));
    let sub = Call {
        action: shown,
        method,
        tool,
        idempotency_key: Some(key),
        ..*call
    };
    let out = http.call(&sub, Value::Object(inputs)).await?;
    let status = out["status"].as_u64().unwrap_or(0);
    let text = json!({"status": status, "body": out["body"]}).to_string();
    Ok((text, status >= 400))
}

fn cap(mut text: String) -> String {
    if text.len() > MAX_RESULT_CHARS {
        let mut end = MAX_RESULT_CHARS;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[… cut: the result was longer]");
    }
    text
}

/// Appends the model's turn and the results of its calls to the request.
pub(crate) fn append_turn(
    provider: Provider,
    body: &mut Value,
    reply: &Value,
    results: &[(ToolCall, String, bool)],
) {
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    match provider {
        Provider::Anthropic => {
            messages.push(json!({"role": "assistant", "content": reply.get("content").cloned().unwrap_or(json!([]))}));
            let blocks: Vec<Value> = results
                .iter()
                .map(|(tc, text, is_error)| {
                    json!({"type": "tool_result", "tool_use_id": tc.id, "content": text, "is_error": is_error})
                })
                .collect();
            messages.push(json!({"role": "user", "content": blocks}));
        }
        Provider::OpenAi => {
            let mut m = reply
                .pointer("/choices/0/message")
                .cloned()
                .unwrap_or(json!({"role": "assistant"}));
            m["role"] = json!("assistant");
            messages.push(m);
            for (tc, text, _) in results {
                messages.push(json!({"role": "tool", "tool_call_id": tc.id, "content": text}));
            }
        }
        _ => {
            let mut m = reply
                .get("message")
                .cloned()
                .unwrap_or(json!({"role": "assistant"}));
            m["role"] = json!("assistant");
            messages.push(m);
            for (tc, text, _) in results {
                messages.push(json!({"role": "tool", "tool_name": tc.wire, "content": text}));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_rule_covers_the_tools_its_entry_names() {
        // `[http, http.post]` with a rule for `http.post`: it covers the
        // `post` that `http` offered first.
        assert!(covers("http.post", "http.post"));
        assert!(covers("http", "http.post"));
        assert!(covers("payments", "payments.get"));
        assert!(!covers("payments", "payments2.get"));
        assert!(!covers("http.post", "http.get"));
        assert!(covers("refund.md", "refund.md"));
    }

    #[test]
    fn an_origin_is_scheme_host_and_port() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert_eq!(
            origin_of(&u("https://API.example.com./v1")),
            "https://api.example.com:443"
        );
        assert_ne!(
            origin_of(&u("http://api.example.com:8080/")),
            origin_of(&u("https://api.example.com/"))
        );
    }

    #[test]
    fn wire_names_fit_every_provider() {
        assert_eq!(wire_name("fs", "read_file"), "fs__read_file");
        assert_eq!(wire_name("kb", "memory.search"), "kb__memory_search");
        assert_eq!(wire_name("t", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn reads_tool_calls_in_each_format() {
        let anthropic = json!({"content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "tu_1", "name": "fs__read", "input": {"path": "a.md"}}
        ], "stop_reason": "tool_use"});
        assert_eq!(
            calls(Provider::Anthropic, &anthropic),
            [ToolCall {
                id: "tu_1".into(),
                wire: "fs__read".into(),
                args: Ok(json!({"path": "a.md"}).as_object().unwrap().clone())
            }]
        );
        let openai = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "fs__read", "arguments": "{\"path\": \"b.md\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "fs__read", "arguments": "not json"}}
        ]}}]});
        let c = calls(Provider::OpenAi, &openai);
        assert_eq!(
            c[0].args,
            Ok(json!({"path": "b.md"}).as_object().unwrap().clone())
        );
        assert!(c[1].args.is_err());
        let ollama = json!({"message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "fs__read", "arguments": {"path": "c.md"}}}
        ]}});
        assert_eq!(calls(Provider::Ollama, &ollama)[0].wire, "fs__read");
        assert!(calls(
            Provider::OpenAi,
            &json!({"choices": [{"message": {"content": "done"}}]})
        )
        .is_empty());
    }

    #[test]
    fn results_go_back_in_each_format() {
        let tc = ToolCall {
            id: "id1".into(),
            wire: "fs__read".into(),
            args: Ok(Map::new()),
        };
        let results = [(tc, "text".to_string(), false)];
        let mut body = json!({"messages": [{"role": "user", "content": "q"}]});
        let reply = json!({"content": [{"type": "tool_use", "id": "id1", "name": "fs__read", "input": {}}]});
        append_turn(Provider::Anthropic, &mut body, &reply, &results);
        assert_eq!(body["messages"][1]["role"], "assistant");
        assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "id1");
        let mut body = json!({"messages": []});
        let reply = json!({"choices": [{"message": {"role": "assistant", "tool_calls": []}}]});
        append_turn(Provider::OpenAi, &mut body, &reply, &results);
        assert_eq!(
            body["messages"][1],
            json!({"role": "tool", "tool_call_id": "id1", "content": "text"})
        );
    }
}
