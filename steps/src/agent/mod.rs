//! `agent.run` / `agent.generate` / `agent.chat`: LLM providers over HTTP.
//!
//! All three methods send one non-streaming request and return the reply
//! **text** as a JSON string.
//!
//! # Providers
//!
//! The tool's `sdk` picks the provider (`--agent P` replaces it for every AI
//! tool):
//!
//! | sdk | provider | request |
//! |---|---|---|
//! | `claude-agent`, `claude`, `claude-code`, `anthropic` | Anthropic | `POST {base}/v1/messages`, `x-api-key`, `anthropic-version: 2023-06-01` |
//! | `openai`, `openai-compatible`, `vllm` | OpenAI | `POST {base}/chat/completions`, `Authorization: Bearer` |
//! | `ollama` | Ollama | `POST {host}/api/chat`, `stream: false` |
//!
//! Endpoint and key: the tool's `auth.base_url` / `auth.api_key` (also
//! `options.base_url`, `options.api_key`; `${VAR}` in them is replaced from
//! the environment), else the environment: `ANTHROPIC_BASE_URL`,
//! `ANTHROPIC_API_KEY` (or `ANTHROPIC_AUTH_TOKEN`, sent as a bearer token);
//! `OPENAI_BASE_URL` (default `https://api.openai.com/v1`), `OPENAI_API_KEY`;
//! `OLLAMA_HOST` (default `http://127.0.0.1:11434`), optional `OLLAMA_API_KEY`.
//! Anthropic always needs a key (any value for a proxy that does not check
//! it); OpenAI needs a key unless the base URL is not api.openai.com; Ollama
//! needs nothing. The environment is always the run's snapshot
//! ([`Capabilities::env`](crate::core::action::Capabilities::env)), never the process
//! environment.
//!
//! # Model resolution
//!
//! The model is the first that is set of:
//!
//! 1. the step's `model:`,
//! 2. the tool's `options.model`,
//! 3. the CLI `--model`,
//! 4. the provider's environment default: `ANTHROPIC_MODEL`, `OPENAI_MODEL`
//!    or `OLLAMA_MODEL`.
//!
//! Empty values and `auto` count as unset. With Anthropic, Claude aliases map
//! to full ids — `sonnet` → `claude-sonnet-4-5-20250929`, `haiku` →
//! `claude-haiku-4-5-20251001`, `opus` → `claude-opus-4-5-20251101` (also
//! `claude-sonnet`, `claude-haiku`, `claude-opus`, `sonnet-4.5`, …); any other
//! name is sent as written; with nothing set, Anthropic uses sonnet. With
//! OpenAI or Ollama a Claude alias means nothing, so it is skipped and the
//! next entry applies; with nothing left, the step fails before the run starts
//! and asks for `--model` or `OPENAI_MODEL` / `OLLAMA_MODEL`.
//!
//! When `--agent` switches a tool to another provider than its `sdk`, the
//! file's settings for the old provider — the step `model:`, `options.model`,
//! `auth.base_url`, `auth.api_key` — are dropped: only `--model` and the
//! environment apply. (`--agent` naming the tool's own provider changes
//! nothing.)
//!
//! # Inputs
//!
//! `prompt` (a string; objects and arrays are sent as JSON) and/or `messages`
//! (`[{role, content}]`; a `prompt` next to `messages` is appended as the last
//! user message), optional `system`, `max_tokens` (Anthropic default 4096;
//! OpenAI and Ollama use the server's default unless set) and `temperature`.
//! The tool's `options.max_tokens` / `options.temperature` are defaults for
//! them.
//!
//! # Robustness
//!
//! Each request has a timeout: the step's `timeout` if it has one, else the
//! tool's `options.timeout` (seconds), else 120 s. HTTP 429, 500, 502, 503,
//! 504, 529, connection errors and timeouts are retried up to
//! `options.max_retries` times (default 3) with exponential backoff and full
//! jitter (base `MARKTOFLOW_RETRY_BASE_MS`, default 1000 ms, capped at 30 s),
//! or after the `Retry-After` the server asked for (capped at 60 s); each
//! retry logs a warning. Other statuses fail at once with the provider's
//! message and a hint. API keys never appear in messages.

mod config;
pub mod local;
mod provider;
pub mod schema;
mod tools;
pub(crate) mod transport;
mod wire;

pub use config::{
    Resolved, ANTHROPIC_DEFAULT_MODEL, DEFAULT_LOCAL_TIMEOUT, DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT,
};
pub use provider::{claude_alias, claude_model_id, Provider, LOCAL_INSTALL_HINT, SDKS};

pub use crate::core::action::hosts::ModelInfo;
use crate::core::{
    action::{Action, Call},
    error::ActionError,
    signals::LogLevel,
    tool::ToolConfig,
};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Whether this process has said that the local model stands in for a
/// provider without a key (said once, not per step or per run).
static FALLBACK_SAID: AtomicBool = AtomicBool::new(false);

/// CLI overrides for every agent step.
#[derive(Debug, Clone, Default)]
pub struct AgentOverrides {
    /// `--agent P`: use provider P for every AI tool.
    pub agent: Option<String>,
    /// `--model M`: the model when neither the step nor the tool names one.
    pub model: Option<String>,
}

/// Shared state of the agent actions for one run: the overrides and one HTTP
/// client, built on first use.
pub struct AgentHub {
    pub overrides: AgentOverrides,
    client: OnceLock<Result<reqwest::Client, String>>,
    /// What makes an agent's HTTP tool calls (`http.*`, given by whoever
    /// builds the hub): None, HTTP tools are refused.
    http: Option<Arc<dyn crate::core::action::Action>>,
}

#[async_trait]
impl crate::core::action::hosts::Llm for AgentHub {
    fn preflight(
        &self,
        tool: &ToolConfig,
        step_model: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<String, String> {
        AgentHub::preflight(self, tool, step_model, env)
    }

    async fn complete(&self, call: &Call<'_>, inputs: &Value) -> Result<String, ActionError> {
        AgentHub::complete(self, call, inputs).await
    }

    async fn read_spans(
        &self,
        call: &Call<'_>,
        model: &std::path::Path,
        asks: Vec<crate::core::reading::SpanAsk>,
        timeout: std::time::Duration,
    ) -> Result<Vec<crate::core::reading::SpanReading>, ActionError> {
        local::read_spans(call, model, asks, timeout).await
    }

    async fn list_models(&self, call: &Call<'_>) -> Result<Vec<ModelInfo>, ActionError> {
        AgentHub::list_models(self, call).await
    }
}

impl AgentHub {
    pub fn new(overrides: AgentOverrides) -> Self {
        AgentHub {
            overrides,
            client: OnceLock::new(),
            http: None,
        }
    }

    /// Agents' HTTP tools make their requests with `http` (the `http.*`
    /// action).
    pub fn with_http(mut self, http: Arc<dyn crate::core::action::Action>) -> Self {
        self.http = Some(http);
        self
    }

    /// Resolves provider, endpoint, key and model for a step using `tool`
    /// (see the [module documentation](self) for the rules). `Err` says what
    /// to set.
    pub fn resolve(
        &self,
        tool: &ToolConfig,
        step_model: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<Resolved, String> {
        config::resolve(&self.overrides, tool, step_model, env)
    }

    /// Checks, before the first step runs, that an agent step can run: returns
    /// a short description (`anthropic claude-haiku-4-5-20251001`) or a message
    /// saying exactly what to set.
    pub fn preflight(
        &self,
        tool: &ToolConfig,
        step_model: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<String, String> {
        self.resolve(tool, step_model, env).map(|r| r.describe())
    }

    fn client(&self) -> Result<&reqwest::Client, ActionError> {
        self.client
            .get_or_init(|| {
                crate::core::net::client_builder()
                    .build()
                    .map_err(|e| format!("cannot start the HTTP client: {e}"))
            })
            .as_ref()
            .map_err(|e| ActionError::failed(e.clone()))
    }

    /// The provider, endpoint and model of `call`'s tool (an undeclared one
    /// is named by the action's first part).
    fn resolve_call(&self, call: &Call<'_>) -> Result<Resolved, ActionError> {
        let undeclared;
        let tool = match call.tool {
            Some(t) => t,
            None => {
                undeclared = ToolConfig {
                    name: call.action.split('.').next().unwrap_or("agent").to_string(),
                    ..ToolConfig::default()
                };
                &undeclared
            }
        };
        self.resolve(tool, call.model, &call.caps.env)
            .map_err(ActionError::failed)
    }

    /// The models the tool's provider serves.
    pub async fn list_models(&self, call: &Call<'_>) -> Result<Vec<ModelInfo>, ActionError> {
        let resolved = self.resolve_call(call)?;
        let Some(url) = resolved.models_url() else {
            return Ok(crate::core::models::installed(&call.caps.env)
                .into_iter()
                .filter(|m| {
                    m.known
                        .is_none_or(|k| k.kind == crate::core::models::Kind::Chat)
                })
                .map(|m| ModelInfo {
                    id: m.name,
                    owned_by: "local".into(),
                })
                .collect());
        };
        let timeout = call.timeout.unwrap_or(resolved.timeout);
        let reply = transport::get_json(self.client()?, call, &resolved, &url, timeout).await?;
        wire::parse_models(resolved.provider, &reply).map_err(|e| {
            ActionError::failed(format!("unexpected {} model list: {e}", resolved.provider))
        })
    }

    /// The first model the server lists (for `auto`).
    async fn first_model(
        &self,
        call: &Call<'_>,
        resolved: &Resolved,
        timeout: std::time::Duration,
    ) -> Result<String, ActionError> {
        let Some(url) = resolved.models_url() else {
            return Err(ActionError::failed("no model is set"));
        };
        let reply = transport::get_json(self.client()?, call, resolved, &url, timeout).await?;
        let models = wire::parse_models(resolved.provider, &reply).map_err(|e| {
            ActionError::failed(format!("unexpected {} model list: {e}", resolved.provider))
        })?;
        models.into_iter().next().map(|m| m.id).ok_or_else(|| {
            ActionError::failed(format!(
                "no model is set and the server at {} lists none: pass `--model <name>` or set {}",
                config::display_url(&url),
                resolved.provider.model_var()
            ))
        })
    }

    /// Runs one agent call and returns the reply text.
    pub async fn complete(&self, call: &Call<'_>, inputs: &Value) -> Result<String, ActionError> {
        let resolved = self.resolve_call(call)?;
        let prompt = wire::parse_inputs(call.method, inputs)?;
        let timeout = call.timeout.unwrap_or(resolved.timeout);
        if let Some(why) = &resolved.fallback {
            if !FALLBACK_SAID.swap(true, Ordering::Relaxed) {
                call.log(
                    LogLevel::Warn,
                    format!(
                        "{why}: agent steps use the local model {} ({}); set the key to use the tool's provider",
                        resolved.model,
                        config::display_url(&resolved.endpoint())
                    ),
                );
            }
        }
        if resolved.provider == Provider::Local {
            if !prompt.tools.is_empty() {
                return Err(ActionError::Input(format!(
                    "{}: input `tools` needs a provider that calls tools (anthropic, openai, ollama); the local model {} does not",
                    call.action, resolved.model
                )));
            }
            let parsed = local::complete(call, &resolved, &prompt, timeout).await?;
            return finish(call, &prompt, parsed);
        }
        call.log(
            LogLevel::Debug,
            format!(
                "{}: {} {} via {}",
                call.action,
                resolved.provider,
                resolved.model,
                config::display_url(&resolved.endpoint())
            ),
        );
        let mut resolved = resolved;
        if resolved.model == config::AUTO_MODEL {
            resolved.model = self.first_model(call, &resolved, timeout).await?;
        }
        let body = wire::request_body(&resolved, &prompt);
        let client = self.client()?;
        if !prompt.tools.is_empty() {
            return self.converse(call, &resolved, &prompt, body, timeout).await;
        }
        let reply = transport::post_json(client, call, &resolved, &body, timeout).await?;
        let parsed = wire::parse_reply(resolved.provider, &reply).map_err(|e| {
            ActionError::failed(format!("unexpected {} reply: {e}", resolved.provider))
        })?;
        finish(call, &prompt, parsed)
    }
}

impl AgentHub {
    /// A step that offers MCP tools: requests until the model answers
    /// without calling one, each call run and its result sent back.
    async fn converse(
        &self,
        call: &Call<'_>,
        resolved: &Resolved,
        prompt: &wire::Prompt,
        mut body: Value,
        timeout: std::time::Duration,
    ) -> Result<String, ActionError> {
        let offered = tools::offer(call, prompt, self.http.is_some()).await?;
        body["tools"] = tools::definitions(resolved.provider, &offered);
        let client = self.client()?;
        // Each turn's reply and each tool's result are recorded with the
        // run: a step that runs again (its run waited for an approval, or
        // its process died) replays them instead of asking or calling again.
        let replies = call.caps.replies.as_ref();
        let base = call.idempotency_key.unwrap_or(call.action);
        // A loop with no step `timeout` ends after this by default: agents
        // probing their surroundings can otherwise spend a whole CI job.
        let clock = call.caps.clock.clone();
        let started = clock.now_ms();
        for turn in 0..prompt.max_turns {
            let elapsed = clock.now_ms().saturating_sub(started);
            if call.timeout.is_none() && elapsed > MAX_LOOP_TIME.as_millis() as i64 {
                return Err(ActionError::failed(format!(
                    "{}: the model was still calling tools after {} minutes; give the step a `timeout` to allow longer, or narrow the task",
                    call.action,
                    MAX_LOOP_TIME.as_secs() / 60
                )));
            }
            let turn_key = format!("{base}:turn:{turn}");
            let recalled = match replies {
                Some(r) => r
                    .recall(&turn_key)
                    .await
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok()),
                None => None,
            };
            let reply = match recalled {
                Some(r) => r,
                None => {
                    let r = transport::post_json(client, call, resolved, &body, timeout).await?;
                    if let Some(rp) = replies {
                        rp.remember(&turn_key, &r.to_string());
                    }
                    r
                }
            };
            let calls = tools::calls(resolved.provider, &reply);
            if calls.is_empty() {
                let parsed = wire::parse_reply(resolved.provider, &reply).map_err(|e| {
                    ActionError::failed(format!("unexpected {} reply: {e}", resolved.provider))
                })?;
                return finish(call, prompt, parsed);
            }
            let mut results = Vec::with_capacity(calls.len());
            for (i, tc) in calls.into_iter().enumerate() {
                let call_key = format!("{turn_key}:call:{i}");
                let done = match replies {
                    Some(r) => r
                        .recall(&call_key)
                        .await
                        .and_then(|t| serde_json::from_str::<(String, bool)>(&t).ok()),
                    None => None,
                };
                let (text, is_error) = match done {
                    Some(d) => d,
                    None => {
                        let d = tools::run(call, &offered, &tc, &call_key, self.http.as_deref())
                            .await?;
                        if let Some(rp) = replies {
                            rp.remember(&call_key, &serde_json::to_string(&d).unwrap_or_default());
                        }
                        d
                    }
                };
                results.push((tc, text, is_error));
            }
            tools::append_turn(resolved.provider, &mut body, &reply, &results);
        }
        Err(ActionError::failed(format!(
            "{}: the model was still calling tools after {} requests; raise `max_turns` or narrow the task",
            call.action, prompt.max_turns
        )))
    }
}

/// The reply text, its warning logged; with `format`/`output_schema`, the
/// JSON text once it is checked.
fn finish(
    call: &Call<'_>,
    prompt: &wire::Prompt,
    reply: wire::Reply,
) -> Result<String, ActionError> {
    if let Some(w) = reply.warning {
        call.log(LogLevel::Warn, format!("{}: {w}", call.action));
    }
    match &prompt.format {
        None => Ok(reply.text),
        Some(f) => f
            .check(&reply.text)
            .map_err(|e| ActionError::failed(format!("{}: {e}", call.action))),
    }
}

/// One completion. As the peer's methods do (`generate({prompt, model})`),
/// an input `model` names the model when the step has no `model:`.
async fn complete_naming_model(call: &Call<'_>, mut inputs: Value) -> Result<String, ActionError> {
    let named = match &mut inputs {
        Value::Object(m) => match m.remove("model") {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s),
            _ => None,
        },
        _ => None,
    };
    if let (Some(step), Some(input)) = (call.model, &named) {
        if step != input {
            call.log(
                LogLevel::Warn,
                format!(
                    "{}: input `model` ({input}) is ignored: the step's `model:` ({step}) wins",
                    call.action
                ),
            );
        }
    }
    let model = call.model.map(str::to_string).or(named);
    let call = Call {
        model: model.as_deref(),
        ..call.reborrow()
    };
    // A reply recorded before the run was interrupted is not paid again.
    let recorded = call.caps.replies.as_ref().zip(call.idempotency_key);
    if let Some((replies, key)) = recorded {
        if let Some(text) = replies.recall(key).await {
            call.log(
                LogLevel::Info,
                format!(
                    "{}: the reply recorded before the run was interrupted is used",
                    call.action
                ),
            );
            return Ok(text);
        }
    }
    let text = call.caps.agents.complete(&call, &inputs).await?;
    if let Some((replies, key)) = recorded {
        replies.remember(key, &text);
    }
    Ok(text)
}

/// `agent.run`, `agent.generate`, `agent.chat`: all return the reply text.
/// How long an agent's tool loop may go on when its step sets no `timeout`.
const MAX_LOOP_TIME: std::time::Duration = std::time::Duration::from_secs(10 * 60);

pub struct AgentAction;

#[async_trait]
impl Action for AgentAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        match call.method {
            "listModels" => {
                let models = call.caps.agents.list_models(call).await?;
                Ok(Value::Array(
                    models
                        .into_iter()
                        .map(|m| serde_json::json!({"id": m.id, "owned_by": m.owned_by}))
                        .collect(),
                ))
            }
            "chat.completions" => {
                let text = complete_naming_model(call, inputs).await?;
                Ok(serde_json::json!({
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]
                }))
            }
            _ => {
                // A reply held to `format: json` or `output_schema` was
                // checked to be JSON: the step's output is the value, so
                // `{{ reply.field }}` reads it (`| tojson` gives the text).
                let structured =
                    wire::parse_inputs(call.method, &inputs).is_ok_and(|p| p.format.is_some());
                let text = complete_naming_model(call, inputs).await?;
                Ok(if structured {
                    wire::json_reply(&text).unwrap_or(Value::String(text))
                } else {
                    Value::String(text)
                })
            }
        }
    }
}

use crate::core::catalog::{
    alias, input, spec, Input, Spec, ANY, INTEGER, LIST, MAPPING, NUMBER, STRING, STRING_OR_LIST,
    WAITS,
};

const AGENT_INPUTS: &[Input] = &[
    input(
        "prompt",
        ANY,
        "The user message (a mapping or list is sent as pretty JSON).",
    ),
    input(
        "messages",
        LIST,
        "A conversation: [{role, content}]; a system message moves to `system`.",
    ),
    input("system", ANY, "The system prompt."),
    alias("systemPrompt", "system"),
    input(
        "max_tokens",
        INTEGER,
        "Longest reply (Anthropic: 4096 by default).",
    ),
    input(
        "temperature",
        NUMBER,
        "Sampling temperature (0 or more; the local model is greedy by default).",
    ),
    input(
        "seed",
        INTEGER,
        "Sampling seed (local model, OpenAI, Ollama): the same seed and prompt give the same reply.",
    ),
    input(
        "format",
        STRING,
        "`json`: the reply is one JSON object (local: grammar-constrained; OpenAI/Ollama: JSON mode; Anthropic: asked and checked).",
    ),
    input(
        "output_schema",
        MAPPING,
        "A JSON Schema the reply must follow (local: grammar-constrained; OpenAI/Ollama: structured output; Anthropic: asked and checked).",
    )
    .checked(schema::validate_schema),
    input(
        "tools",
        STRING_OR_LIST,
        "Tools the model may call: declared `sdk: mcp` tools (`[fs]`: all the tools they allow) or one tool (`fs.read_file`); HTTP requests: `http` (get, post, put, patch, delete), `http.get`…, or a declared `sdk: http` tool (its `base_url` and headers; its host only).",
    ),
    input(
        "approval",
        MAPPING,
        "With `tools`: which calls of each (named as in `tools`) wait for a person first: `required`, a list of tool names, or a rule `{tools, methods, hosts, over}` (besides a declared tool's own `approval:`).",
    ),
    input(
        "max_turns",
        INTEGER,
        "With `tools`: the most requests to the model (1 to 100); it fails when the model is still calling tools.",
    )
    .default("10"),
    alias("maxTurns", "max_turns"),
    input(
        "permissionMode",
        STRING,
        "Accepted from the Claude Agent SDK's workflows, with no effect: agent steps here never edit files or run commands (`validate` says so).",
    ),
    input(
        "model",
        ANY,
        "The model, when the step has no `model:` (as the peer's `generate({prompt, model})`); it wins over the tool's `options.model`.",
    ),
];

const fn agent(method: &'static str, doc: &'static str) -> Spec {
    spec("agent", method, doc)
        .inputs(AGENT_INPUTS)
        .text_inputs()
        .returns("the reply text; with `format: json` or `output_schema`, the value it holds")
        .traits(WAITS)
}

/// The contracts of every LLM provider's actions (any `tools.<name>.sdk`
/// naming a provider: `agent.run`, `claude.generate`, …).
pub const SPECS: &[Spec] = &[
    agent("run", "Asks the model; returns its reply."),
    agent("generate", "Same as `run`."),
    agent("chat", "Same as `run`."),
    agent(
        "chat.completions",
        "Same as `run`, answered in OpenAI's shape (as the peer's tools do).",
    )
    .returns("{choices: [{message: {role, content}}]}"),
    spec(
        "agent",
        "listModels",
        "The models the provider serves (`GET /models`; the local model: those installed).",
    )
    .returns("[{id, owned_by}]")
    .traits(WAITS),
];
