//! `agent.run` / `agent.generate` / `agent.chat`: LLM providers over HTTP.
//!
//! Provider by the tool's `sdk`: Anthropic Messages API, OpenAI chat
//! completions (any base URL), or Ollama's chat API. Keys and endpoints come
//! from the tool's `auth` or the run's environment snapshot.
//!
//! Model resolution, first that applies:
//! 1. the step's `model:`, 2. the tool's `options.model`, 3. `--model`,
//! 4. the provider's variable (`ANTHROPIC_MODEL`, `OPENAI_MODEL`, `OLLAMA_MODEL`),
//! 5. for Anthropic only, `sonnet`.
//!
//! `sonnet`/`haiku`/`opus` are Claude aliases: mapped to model ids for
//! Anthropic, skipped for the other providers. When `--agent` switches a tool
//! to another provider, the file's models (1, 2) are skipped as well.

use crate::action::{type_name, Action, ActionError, Call, LogLevel, ToolConfig};
use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct AgentOverrides {
    /// `--agent`: the provider for every agent tool.
    pub agent: Option<String>,
    /// `--model`.
    pub model: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
    Ollama,
}

impl Provider {
    pub fn from_sdk(sdk: &str) -> Option<Provider> {
        Some(match sdk.to_ascii_lowercase().as_str() {
            "claude-agent" | "claude" | "claude-code" | "anthropic" => Provider::Anthropic,
            "openai" | "openai-compatible" | "vllm" => Provider::OpenAi,
            "ollama" => Provider::Ollama,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::Ollama => "ollama",
        }
    }

    fn model_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_MODEL",
            Provider::OpenAi => "OPENAI_MODEL",
            Provider::Ollama => "OLLAMA_MODEL",
        }
    }
}

const SUPPORTED: &str =
    "claude-agent, claude, claude-code, anthropic, openai, openai-compatible, vllm, ollama";

/// Claude aliases → current model ids.
pub fn claude_alias(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "sonnet" | "claude-sonnet" => "claude-sonnet-4-5-20250929",
        "haiku" | "claude-haiku" => "claude-haiku-4-5-20251001",
        "opus" | "claude-opus" => "claude-opus-4-5-20251101",
        _ => return None,
    })
}

/// Everything needed to call one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub provider: Provider,
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
}

impl Target {
    pub fn describe(&self) -> String {
        format!(
            "{} {} at {}",
            self.provider.name(),
            self.model,
            self.base_url
        )
    }
}

pub struct AgentHub {
    pub overrides: AgentOverrides,
    client: OnceLock<reqwest::Client>,
}

fn non_empty(v: Option<&String>) -> Option<String> {
    v.filter(|s| !s.trim().is_empty()).cloned()
}

fn opt_str(m: &Map<String, Value>, k: &str) -> Option<String> {
    m.get(k)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
}

impl AgentHub {
    pub fn new(overrides: AgentOverrides) -> Self {
        AgentHub {
            overrides,
            client: OnceLock::new(),
        }
    }

    /// Built on first use: a run without agent steps never pays for TLS setup.
    fn client(&self) -> &reqwest::Client {
        self.client.get_or_init(|| {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(15))
                .build()
                .unwrap_or_else(|_| reqwest::Client::new())
        })
    }

    /// Which provider, endpoint, key and model a step would use, or what to
    /// set when that cannot be worked out.
    pub fn resolve(
        &self,
        tool: &ToolConfig,
        step_model: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<Target, String> {
        let file_provider = Provider::from_sdk(&tool.sdk);
        let (provider, switched) = match &self.overrides.agent {
            Some(a) => {
                let p = Provider::from_sdk(a).ok_or_else(|| format!("`--agent {a}` is not a provider marktoflow knows; use one of: {SUPPORTED}"))?;
                (p, file_provider != Some(p))
            }
            None => (
                file_provider.ok_or_else(|| format!("tool `{}` uses sdk `{}`, which is not an LLM provider; use one of: {SUPPORTED}", tool.name, tool.sdk))?,
                false,
            ),
        };
        // Tool auth applies only to the provider the file names.
        let (auth_url, auth_key) = if switched {
            (None, None)
        } else {
            (
                opt_str(&tool.auth, "base_url").or_else(|| opt_str(&tool.options, "base_url")),
                opt_str(&tool.auth, "api_key"),
            )
        };
        let mut candidates: Vec<String> = Vec::new();
        if !switched {
            candidates.extend(step_model.map(str::to_string));
            candidates.extend(opt_str(&tool.options, "model"));
        }
        candidates.extend(self.overrides.model.clone());
        candidates.extend(non_empty(env.get(provider.model_var())));
        let model = candidates.into_iter().find_map(|m| match provider {
            Provider::Anthropic => Some(claude_alias(&m).map(str::to_string).unwrap_or(m)),
            _ if claude_alias(&m).is_some() => None,
            _ if m.eq_ignore_ascii_case("auto") => None,
            _ => Some(m),
        });
        let (base_url, api_key, model) = match provider {
            Provider::Anthropic => {
                let base = auth_url
                    .or_else(|| non_empty(env.get("ANTHROPIC_BASE_URL")))
                    .unwrap_or_else(|| "https://api.anthropic.com".into());
                let key = auth_key.or_else(|| non_empty(env.get("ANTHROPIC_API_KEY")));
                if key.is_none() {
                    return Err(format!(
                        "tool `{}` uses the Anthropic API, but ANTHROPIC_API_KEY is not set. Set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a proxy or a compatible server), or pick another provider: `--agent openai` with OPENAI_API_KEY or OPENAI_BASE_URL, or `--agent ollama` with OLLAMA_HOST",
                        tool.name
                    ));
                }
                (
                    base,
                    key,
                    model.unwrap_or_else(|| claude_alias("sonnet").unwrap_or_default().to_string()),
                )
            }
            Provider::OpenAi => {
                let custom = auth_url.or_else(|| non_empty(env.get("OPENAI_BASE_URL")));
                let key = auth_key.or_else(|| non_empty(env.get("OPENAI_API_KEY")));
                if custom.is_none() && key.is_none() {
                    return Err(format!(
                        "tool `{}` uses an OpenAI-compatible API, but neither OPENAI_API_KEY nor OPENAI_BASE_URL is set. Set OPENAI_API_KEY for api.openai.com, or OPENAI_BASE_URL for a local server (vLLM, LM Studio, …)",
                        tool.name
                    ));
                }
                let model = model.ok_or_else(|| {
                    format!("no model for tool `{}` on the OpenAI-compatible API: pass `--model NAME` or set OPENAI_MODEL", tool.name)
                })?;
                (
                    custom.unwrap_or_else(|| "https://api.openai.com/v1".into()),
                    key,
                    model,
                )
            }
            Provider::Ollama => {
                let host = auth_url
                    .or_else(|| non_empty(env.get("OLLAMA_HOST")))
                    .unwrap_or_else(|| "http://127.0.0.1:11434".into());
                let host = if host.contains("://") {
                    host
                } else {
                    format!("http://{host}")
                };
                let model = model.ok_or_else(|| format!("no model for tool `{}` on Ollama: pass `--model NAME` (e.g. llama3.2) or set OLLAMA_MODEL", tool.name))?;
                (host, None, model)
            }
        };
        Ok(Target {
            provider,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            model,
        })
    }

    /// Checked before the run starts: a short description, or what to set.
    pub fn preflight(
        &self,
        tool: &ToolConfig,
        step_model: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<String, String> {
        self.resolve(tool, step_model, env)
            .map(|t| format!("{} {}", t.provider.name(), t.model))
    }
}

/// The request, independent of the wire format.
struct Ask {
    system: Option<String>,
    messages: Vec<Value>,
    max_tokens: u64,
    temperature: Option<f64>,
}

fn ask_from_inputs(inputs: &Value) -> Result<Ask, ActionError> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    let mut messages = match inputs.get("messages") {
        Some(Value::Array(list)) => {
            let mut out = Vec::new();
            for (i, m) in list.iter().enumerate() {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                let Some(content) = m.get("content") else {
                    return Err(ActionError::Input(format!(
                        "`messages[{i}]` has no `content`"
                    )));
                };
                out.push(json!({"role": role, "content": text(content)}));
            }
            out
        }
        Some(other) => {
            return Err(ActionError::Input(format!(
                "`messages` must be a list of {{role, content}}, got {}",
                type_name(other)
            )))
        }
        None => Vec::new(),
    };
    if let Some(p) = inputs.get("prompt").filter(|p| !p.is_null()) {
        messages.push(json!({"role": "user", "content": text(p)}));
    }
    if messages.is_empty() {
        return Err(ActionError::Input(
            "an agent step needs `inputs.prompt` (or `inputs.messages`)".into(),
        ));
    }
    // A system message in the list moves to the system field.
    let mut system = inputs.get("system").map(text);
    messages.retain(|m| {
        if m["role"] == "system" {
            let s = m["content"].as_str().unwrap_or("").to_string();
            system = Some(match system.take() {
                Some(prev) => format!("{prev}\n\n{s}"),
                None => s,
            });
            false
        } else {
            true
        }
    });
    Ok(Ask {
        system,
        messages,
        max_tokens: inputs
            .get("max_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(4096),
        temperature: inputs.get("temperature").and_then(Value::as_f64),
    })
}

fn request_body(t: &Target, ask: &Ask) -> (String, Value) {
    match t.provider {
        Provider::Anthropic => {
            let mut b =
                json!({"model": t.model, "max_tokens": ask.max_tokens, "messages": ask.messages});
            if let Some(s) = &ask.system {
                b["system"] = json!(s);
            }
            if let Some(temp) = ask.temperature {
                b["temperature"] = json!(temp);
            }
            (format!("{}/v1/messages", t.base_url), b)
        }
        Provider::OpenAi | Provider::Ollama => {
            let mut msgs = Vec::new();
            if let Some(s) = &ask.system {
                msgs.push(json!({"role": "system", "content": s}));
            }
            msgs.extend(ask.messages.iter().cloned());
            let mut b = json!({"model": t.model, "messages": msgs});
            if t.provider == Provider::OpenAi {
                b["max_tokens"] = json!(ask.max_tokens);
                if let Some(temp) = ask.temperature {
                    b["temperature"] = json!(temp);
                }
                (format!("{}/chat/completions", t.base_url), b)
            } else {
                b["stream"] = json!(false);
                let mut options = json!({"num_predict": ask.max_tokens});
                if let Some(temp) = ask.temperature {
                    options["temperature"] = json!(temp);
                }
                b["options"] = options;
                (format!("{}/api/chat", t.base_url), b)
            }
        }
    }
}

fn reply_text(p: Provider, body: &Value) -> Option<String> {
    match p {
        Provider::Anthropic => {
            let parts = body.get("content")?.as_array()?;
            Some(
                parts
                    .iter()
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(""),
            )
        }
        Provider::OpenAi => body
            .pointer("/choices/0/message/content")?
            .as_str()
            .map(str::to_string),
        Provider::Ollama => body
            .pointer("/message/content")?
            .as_str()
            .map(str::to_string),
    }
}

/// The provider's own error message, when the body has one.
fn provider_message(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let m = v
        .pointer("/error/message")
        .or_else(|| v.get("error").filter(|e| e.is_string()))
        .or_else(|| v.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| body.chars().take(300).collect());
    m.trim().to_string()
}

fn key_var(p: Provider) -> &'static str {
    match p {
        Provider::Anthropic => "ANTHROPIC_API_KEY",
        Provider::OpenAi => "OPENAI_API_KEY",
        Provider::Ollama => "OLLAMA_HOST",
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = h.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let secs = (when.timestamp_millis() - chrono::Utc::now().timestamp_millis()).max(0) as u64;
    Some(Duration::from_millis(secs))
}

const RETRYABLE: &[u16] = &[408, 409, 429, 500, 502, 503, 504, 529];
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

pub struct AgentAction;

#[async_trait]
impl Action for AgentAction {
    fn methods(&self) -> &'static [&'static str] {
        &["run", "generate", "chat"]
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let hub = &call.caps.agents;
        let tool = call.tool.cloned().unwrap_or_else(|| ToolConfig {
            name: call.action.split('.').next().unwrap_or("agent").to_string(),
            sdk: call.action.split('.').next().unwrap_or("").to_string(),
            ..Default::default()
        });
        let target = hub
            .resolve(&tool, call.model, &call.caps.env)
            .map_err(ActionError::failed)?;
        let ask = ask_from_inputs(&inputs)?;
        let (url, body) = request_body(&target, &ask);
        let timeout = inputs
            .get("timeout")
            .and_then(Value::as_f64)
            .or_else(|| tool.options.get("timeout").and_then(Value::as_f64))
            .map(Duration::from_secs_f64)
            .or(call.timeout)
            .unwrap_or(Duration::from_secs(120));
        let max_retries = tool
            .options
            .get("max_retries")
            .and_then(Value::as_u64)
            .unwrap_or(3) as u32;
        let base_ms: u64 = call
            .caps
            .env
            .get("MARKTOFLOW_RETRY_BASE_MS")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        let mut attempt = 0u32;
        loop {
            let mut req = hub.client().post(&url).timeout(timeout).json(&body);
            match target.provider {
                Provider::Anthropic => {
                    req = req.header("anthropic-version", "2023-06-01");
                    if let Some(k) = &target.api_key {
                        req = req.header("x-api-key", k);
                    }
                }
                _ => {
                    if let Some(k) = &target.api_key {
                        req = req.bearer_auth(k);
                    }
                }
            }
            let sent = tokio::select! {
                r = req.send() => r,
                _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
            };
            // (retryable?, message, server-requested wait)
            let failure: (bool, String, Option<Duration>) = match sent {
                Ok(resp) => {
                    let status = resp.status();
                    let wait = retry_after(resp.headers());
                    let text = tokio::select! {
                        t = resp.text() => t.unwrap_or_default(),
                        _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
                    };
                    if status.is_success() {
                        let v: Value = serde_json::from_str(&text).map_err(|e| {
                            ActionError::failed(format!(
                                "{} answered with something that is not JSON ({e})",
                                target.provider.name()
                            ))
                        })?;
                        return match reply_text(target.provider, &v) {
                            Some(t) => Ok(Value::String(t)),
                            None => Err(ActionError::failed(format!(
                                "{} answered without a reply text: {}",
                                target.provider.name(),
                                text.chars().take(300).collect::<String>()
                            ))),
                        };
                    }
                    let code = status.as_u16();
                    let mut msg = format!(
                        "{} returned HTTP {code}: {}",
                        target.provider.name(),
                        provider_message(&text)
                    );
                    if code == 401 || code == 403 {
                        msg.push_str(&format!(" (check {})", key_var(target.provider)));
                    }
                    if code == 404 {
                        msg.push_str(&format!(
                            " (is `{}` a model this server has, and {} the right endpoint?)",
                            target.model, target.base_url
                        ));
                    }
                    (RETRYABLE.contains(&code), msg, wait)
                }
                Err(e) => {
                    let what = if e.is_timeout() {
                        format!("timed out after {}s", timeout.as_secs_f64())
                    } else if e.is_connect() {
                        "could not connect".to_string()
                    } else {
                        "request failed".to_string()
                    };
                    (
                        true,
                        format!(
                            "{} at {}: {what}: {e}",
                            target.provider.name(),
                            target.base_url
                        ),
                        None,
                    )
                }
            };
            let (retryable, message, wait) = failure;
            if !retryable || attempt >= max_retries {
                let message = if attempt > 0 {
                    format!("{message} (after {} attempts)", attempt + 1)
                } else {
                    message
                };
                return Err(ActionError::failed(message));
            }
            // Exponential backoff with full jitter; the server's Retry-After wins.
            let cap = base_ms.saturating_mul(1u64 << attempt.min(16));
            let backoff = Duration::from_millis(fastrand::u64(0..=cap.max(1)));
            let delay = wait.map(|w| w.min(MAX_RETRY_WAIT)).unwrap_or(backoff);
            call.log(
                LogLevel::Warn,
                format!(
                    "{message}; retrying in {} ms (attempt {} of {})",
                    delay.as_millis(),
                    attempt + 2,
                    max_retries + 1
                ),
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
            }
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(sdk: &str, model: Option<&str>) -> ToolConfig {
        let mut options = Map::new();
        if let Some(m) = model {
            options.insert("model".into(), json!(m));
        }
        ToolConfig {
            name: "agent".into(),
            sdk: sdk.into(),
            options,
            ..Default::default()
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn model_resolution_order_and_aliases() {
        let hub = AgentHub::new(AgentOverrides::default());
        let e = env(&[("ANTHROPIC_API_KEY", "k")]);
        let t = tool("claude-agent", Some("sonnet"));
        assert_eq!(
            hub.resolve(&t, Some("haiku"), &e).unwrap().model,
            "claude-haiku-4-5-20251001"
        );
        assert_eq!(
            hub.resolve(&t, None, &e).unwrap().model,
            "claude-sonnet-4-5-20250929"
        );
        assert_eq!(
            hub.resolve(&tool("anthropic", None), None, &e)
                .unwrap()
                .model,
            "claude-sonnet-4-5-20250929"
        );
        assert_eq!(
            hub.resolve(
                &tool("anthropic", None),
                Some("claude-3-7-sonnet-latest"),
                &e
            )
            .unwrap()
            .model,
            "claude-3-7-sonnet-latest"
        );

        // --agent switches provider: the file's Claude models no longer apply.
        let hub = AgentHub::new(AgentOverrides {
            agent: Some("ollama".into()),
            model: Some("llama3.2".into()),
        });
        let t2 = hub.resolve(&t, Some("haiku"), &env(&[])).unwrap();
        assert_eq!(
            (t2.provider, t2.model.as_str(), t2.base_url.as_str()),
            (Provider::Ollama, "llama3.2", "http://127.0.0.1:11434")
        );

        // OpenAI skips Claude aliases and needs a model.
        let hub = AgentHub::new(AgentOverrides::default());
        let e = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")]);
        let err = hub
            .resolve(&tool("openai", Some("sonnet")), None, &e)
            .unwrap_err();
        assert!(err.contains("--model"), "{err}");
        let t3 = hub
            .resolve(&tool("openai", Some("gpt-4o-mini")), None, &e)
            .unwrap();
        assert_eq!(t3.base_url, "http://127.0.0.1:9/v1");
    }

    #[test]
    fn preflight_says_what_to_set() {
        let hub = AgentHub::new(AgentOverrides::default());
        let err = hub
            .preflight(&tool("claude-agent", Some("sonnet")), None, &env(&[]))
            .unwrap_err();
        assert!(
            err.contains("ANTHROPIC_API_KEY is not set") && err.contains("--agent ollama"),
            "{err}"
        );
        let err = hub
            .preflight(&tool("openai", Some("gpt-4o")), None, &env(&[]))
            .unwrap_err();
        assert!(
            err.contains("OPENAI_API_KEY") && err.contains("OPENAI_BASE_URL"),
            "{err}"
        );
        let ok = hub
            .preflight(&tool("ollama", Some("llama3")), None, &env(&[]))
            .unwrap();
        assert_eq!(ok, "ollama llama3");
        let err = hub
            .preflight(&tool("slack", None), None, &env(&[]))
            .unwrap_err();
        assert!(err.contains("not an LLM provider"), "{err}");
    }

    #[test]
    fn inputs_become_messages() {
        let a =
            ask_from_inputs(&json!({"prompt": {"q": 1}, "system": "be brief", "max_tokens": 10}))
                .unwrap();
        assert_eq!(
            a.messages,
            vec![json!({"role": "user", "content": "{\n  \"q\": 1\n}"})]
        );
        assert_eq!((a.system.as_deref(), a.max_tokens), (Some("be brief"), 10));
        let a = ask_from_inputs(&json!({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]})).unwrap();
        assert_eq!(a.system.as_deref(), Some("s"));
        assert_eq!(a.messages.len(), 1);
        assert!(ask_from_inputs(&json!({})).is_err());
    }

    #[test]
    fn reply_text_per_format() {
        assert_eq!(
            reply_text(
                Provider::Anthropic,
                &json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
            )
            .as_deref(),
            Some("ab")
        );
        assert_eq!(
            reply_text(
                Provider::OpenAi,
                &json!({"choices": [{"message": {"content": "x"}}]})
            )
            .as_deref(),
            Some("x")
        );
        assert_eq!(
            reply_text(Provider::Ollama, &json!({"message": {"content": "y"}})).as_deref(),
            Some("y")
        );
        assert_eq!(
            provider_message(r#"{"error": {"message": "bad key"}}"#),
            "bad key"
        );
    }
}
