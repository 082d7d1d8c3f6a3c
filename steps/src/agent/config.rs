//! Which provider, endpoint, key and model an agent step uses.
//!
//! Everything here is pure: it reads the tool declaration, the step's
//! `model:`, the CLI overrides and an environment *snapshot*, never the
//! process environment.

use super::provider::{
    claude_alias, claude_model_id, Provider, LOCAL_INSTALL_HINT, SUPPORTED_AGENTS, SUPPORTED_SDKS,
};
use super::AgentOverrides;
use crate::core::tool::ToolConfig;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Default per-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default time limit of a local generation (prompt reading included).
pub const DEFAULT_LOCAL_TIMEOUT: Duration = Duration::from_secs(600);
/// Default number of retries after the first attempt.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// Default `max_tokens` for Anthropic (where the API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The model used with Anthropic when nothing names one.
pub const ANTHROPIC_DEFAULT_MODEL: &str = "claude-sonnet-4-5-20250929";

/// How a request authenticates.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    None,
    /// Anthropic `x-api-key`.
    XApiKey(String),
    /// `Authorization: Bearer`.
    Bearer(String),
}

impl Auth {
    pub(crate) fn secret(&self) -> Option<&str> {
        match self {
            Auth::None => None,
            Auth::XApiKey(k) | Auth::Bearer(k) => Some(k),
        }
    }
}

/// The model name that means "the first the server lists".
pub const AUTO_MODEL: &str = "auto";

/// The outcome of resolution: everything needed to call the provider.
///
/// `Debug` never shows the key.
#[derive(Clone)]
pub struct Resolved {
    pub provider: Provider,
    /// The tool's name (`agent` in `agent.run`).
    pub tool: String,
    /// The model id sent to the provider (aliases already mapped).
    pub model: String,
    /// Where the model came from (`step model:`, `--model`, `ANTHROPIC_MODEL`, …).
    pub model_source: String,
    /// Base URL without a trailing slash.
    pub base_url: String,
    /// Per-request timeout (before a step `timeout` override).
    pub timeout: Duration,
    /// Retries after the first attempt on 429/5xx/connection errors.
    pub max_retries: u32,
    /// Tool `options.max_tokens`, used when the step gives none.
    pub max_tokens: Option<u64>,
    /// Tool `options.temperature`, used when the step gives none.
    pub temperature: Option<f64>,
    pub(crate) auth: Auth,
    /// Where the key came from, for hints (`ANTHROPIC_API_KEY`, `tool `agent` auth.api_key`).
    pub(crate) key_source: String,
    /// The GGUF file, for [`Provider::Local`].
    pub local_model: Option<std::path::PathBuf>,
    /// Whether the workflow named that file (its step `model:` or tool
    /// `options.model`): then it must be readable by the run, like any file
    /// a workflow reads. `--model`, the environment and the installed
    /// default are chosen by whoever started marktoflow.
    pub local_named_by_workflow: bool,
    /// Why the local model stands in for the tool's provider (its key is not
    /// set), when it does.
    pub fallback: Option<String>,
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolved")
            .field("provider", &self.provider)
            .field("tool", &self.tool)
            .field("model", &self.model)
            .field("model_source", &self.model_source)
            .field("base_url", &display_url(&self.base_url))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("has_key", &(self.auth != Auth::None))
            .finish()
    }
}

impl Resolved {
    /// Short description for the run header: `anthropic claude-haiku-4-5-20251001`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.provider.id(), self.model)
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        let base = &self.base_url;
        match self.provider {
            Provider::Anthropic => {
                if base.ends_with("/v1") {
                    format!("{base}/messages")
                } else {
                    format!("{base}/v1/messages")
                }
            }
            Provider::OpenAi => format!("{base}/chat/completions"),
            Provider::Ollama => {
                let base = base.strip_suffix("/api").unwrap_or(base);
                format!("{base}/api/chat")
            }
            Provider::Local => match &self.local_model {
                Some(p) => p.display().to_string(),
                None => "in-process".into(),
            },
        }
    }

    /// Where the provider lists its models (`GET`); none for the local model.
    pub fn models_url(&self) -> Option<String> {
        let base = &self.base_url;
        match self.provider {
            Provider::Anthropic if base.ends_with("/v1") => Some(format!("{base}/models")),
            Provider::Anthropic => Some(format!("{base}/v1/models")),
            Provider::OpenAi => Some(format!("{base}/models")),
            Provider::Ollama => {
                let base = base.strip_suffix("/api").unwrap_or(base);
                Some(format!("{base}/api/tags"))
            }
            Provider::Local => None,
        }
    }

    /// True when the base URL is the provider's public default.
    pub fn is_default_base(&self) -> bool {
        self.base_url == self.provider.default_base()
    }
}

/// A URL with any `user:password@` part removed, for messages.
pub fn display_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            return format!("{scheme}://{}", &rest[at + 1..]);
        }
    }
    url.to_string()
}

fn env_get<'e>(env: &'e BTreeMap<String, String>, name: &str) -> Option<&'e str> {
    env.get(name).map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// Replaces `${NAME}` (and a whole-value `$NAME`) with the snapshot's value;
/// an unset variable becomes empty.
fn substitute(s: &str, env: &BTreeMap<String, String>) -> String {
    let t = s.trim();
    if let Some(name) = t.strip_prefix('$') {
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return env_get(env, name).unwrap_or("").to_string();
        }
    }
    let mut out = String::new();
    let mut rest = t;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        match rest[start + 2..].find('}') {
            Some(end) => {
                let name = &rest[start + 2..start + 2 + end];
                out.push_str(env_get(env, name).unwrap_or(""));
                rest = &rest[start + 3 + end..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn value_str(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn value_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// First non-empty string among `keys` in `maps`, after `${VAR}` substitution.
fn setting(
    maps: &[(&Map<String, Value>, &'static str)],
    keys: &[&str],
    env: &BTreeMap<String, String>,
) -> Option<(String, String)> {
    for (map, map_name) in maps {
        for key in keys {
            if let Some(v) = map.get(*key).and_then(value_str) {
                let v = substitute(&v, env);
                if !v.is_empty() {
                    return Some((v, format!("{map_name}.{key}")));
                }
            }
        }
    }
    None
}

/// Normalises a base URL: trims, drops trailing slashes, adds a scheme
/// (`http://` for local hosts and Ollama, `https://` otherwise) and, for an
/// Ollama host given without scheme or port, the default port 11434.
fn normalize_base(provider: Provider, raw: &str) -> String {
    let mut s = raw.trim().trim_end_matches('/').to_string();
    if !s.contains("://") {
        let host = s.split('/').next().unwrap_or("");
        let local = host.starts_with("localhost")
            || host.starts_with("127.")
            || host.starts_with("0.0.0.0")
            || host.starts_with('[');
        let has_port = match host.rfind(':') {
            Some(i) => host[i + 1..].chars().all(|c| c.is_ascii_digit()) && i + 1 < host.len(),
            None => false,
        };
        if provider == Provider::Ollama {
            if !has_port && !host.is_empty() {
                s = format!("{host}:11434{}", &s[host.len()..]);
            }
            s = format!("http://{s}");
        } else if local {
            s = format!("http://{s}");
        } else {
            s = format!("https://{s}");
        }
    }
    s
}

/// Resolves provider, endpoint, key and model for one agent step.
/// See the module documentation for the rules.
pub(crate) fn resolve(
    overrides: &AgentOverrides,
    tool: &ToolConfig,
    step_model: Option<&str>,
    env: &BTreeMap<String, String>,
) -> Result<Resolved, String> {
    let tool_name = if tool.name.trim().is_empty() {
        "agent"
    } else {
        tool.name.trim()
    };
    let sdk = tool.sdk.trim();
    let file_provider = Provider::from_sdk(sdk);
    let agent = overrides
        .agent
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty());

    let provider = match agent {
        Some(a) => Provider::from_sdk(a).ok_or_else(|| {
            format!("unknown `--agent {a}`. Supported providers: {SUPPORTED_AGENTS}")
        })?,
        None => match file_provider {
            Some(p) => p,
            // An undeclared `agent` tool (the peer's examples leave the
            // choice to `--agent`): the provider whose key is set, else the
            // local model.
            None if sdk.is_empty() && tool_name == "agent" => {
                if env_get(env, Provider::Anthropic.key_var()).is_some() {
                    Provider::Anthropic
                } else if env_get(env, Provider::OpenAi.key_var()).is_some() {
                    Provider::OpenAi
                } else {
                    // As a fallback: model names meant for a cloud provider
                    // are passed over, and the notice says why.
                    return resolve_local(
                        overrides,
                        tool,
                        tool_name,
                        true,
                        step_model,
                        env,
                        Some("neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set".into()),
                    );
                }
            }
            None if sdk.is_empty() => {
                return Err(format!(
                    "tool `{tool_name}` has no `sdk` (or is not declared under `tools:` in the frontmatter). \
                     Declare it, e.g. `tools: {{{tool_name}: {{sdk: claude-agent}}}}`; supported sdks: {SUPPORTED_SDKS}. \
                     Or pass `--agent anthropic|openai|ollama`"
                ))
            }
            None => {
                return Err(format!(
                    "tool `{tool_name}` uses sdk `{sdk}`, which is not a supported agent provider. \
                     Supported sdks: {SUPPORTED_SDKS}. Or pass `--agent anthropic|openai|ollama` to use one of them for every AI tool"
                ))
            }
        },
    };
    // The file's own settings (models, endpoint, key) only apply to the file's provider.
    // An undeclared `agent` has no file settings but its steps' `model:`.
    let implicit = sdk.is_empty() && tool_name == "agent" && agent.is_none();
    let keep_file = file_provider == Some(provider) || implicit;
    if provider == Provider::Local {
        return resolve_local(overrides, tool, tool_name, keep_file, step_model, env, None);
    }
    let who = match agent {
        Some(a) => format!(
            "`--agent {a}` selects {} for tool `{tool_name}`",
            provider.label()
        ),
        None => format!("tool `{tool_name}` uses sdk `{sdk}` ({})", provider.label()),
    };

    let empty = Map::new();
    let (auth_map, opt_map) = if keep_file {
        (&tool.auth, &tool.options)
    } else {
        (&empty, &empty)
    };
    let file_maps = [(auth_map, "auth"), (opt_map, "options")];

    // Endpoint.
    let mut base_keys = vec!["base_url", "baseUrl", "baseURL"];
    if provider == Provider::Ollama {
        base_keys.push("host");
    }
    let tool_base = setting(&file_maps, &base_keys, env);
    let env_base = env_get(env, provider.base_var())
        .map(str::to_string)
        .or_else(|| {
            (provider == Provider::OpenAi)
                .then(|| env_get(env, "OPENAI_API_BASE").map(str::to_string))
                .flatten()
        });
    let (base_raw, base_source) = match (tool_base, env_base) {
        (Some((v, src)), _) => (v, format!("tool `{tool_name}` {src}")),
        (None, Some(v)) => (v, provider.base_var().to_string()),
        (None, None) => (provider.default_base().to_string(), String::new()),
    };
    let base_url = normalize_base(provider, &base_raw);
    let default_base = base_url == provider.default_base();

    // Key.
    let tool_key = setting(&file_maps, &["api_key", "apiKey"], env);
    let (auth, key_source) = match provider {
        Provider::Anthropic => {
            if let Some((k, src)) = tool_key {
                (Auth::XApiKey(k), format!("tool `{tool_name}` {src}"))
            } else if let Some(k) = env_get(env, "ANTHROPIC_API_KEY") {
                (
                    Auth::XApiKey(k.to_string()),
                    "ANTHROPIC_API_KEY".to_string(),
                )
            } else if let Some(k) = env_get(env, "ANTHROPIC_AUTH_TOKEN") {
                (
                    Auth::Bearer(k.to_string()),
                    "ANTHROPIC_AUTH_TOKEN".to_string(),
                )
            } else {
                let mut msg = format!("{who}, but ANTHROPIC_API_KEY is not set. ");
                if default_base {
                    msg.push_str(
                        "Set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a proxy or a compatible server)",
                    );
                } else {
                    msg.push_str(&format!(
                        "The endpoint is {} (from {base_source}); set ANTHROPIC_API_KEY too (any value works if that server does not check keys)",
                        display_url(&base_url)
                    ));
                }
                if agent.is_none() && default_base {
                    if let Some(local) = local_fallback(
                        overrides,
                        tool,
                        tool_name,
                        env,
                        "ANTHROPIC_API_KEY is not set",
                    ) {
                        return local;
                    }
                }
                msg.push_str(", or pick another provider: `--agent openai` with OPENAI_API_KEY or OPENAI_BASE_URL, `--agent ollama` with OLLAMA_HOST; or install the local model: ");
                msg.push_str(LOCAL_INSTALL_HINT);
                return Err(msg);
            }
        }
        Provider::OpenAi => {
            if let Some((k, src)) = tool_key {
                (Auth::Bearer(k), format!("tool `{tool_name}` {src}"))
            } else if let Some(k) = env_get(env, "OPENAI_API_KEY") {
                (Auth::Bearer(k.to_string()), "OPENAI_API_KEY".to_string())
            } else if !default_base {
                (Auth::None, "OPENAI_API_KEY".to_string())
            } else {
                if agent.is_none() {
                    if let Some(local) = local_fallback(
                        overrides,
                        tool,
                        tool_name,
                        env,
                        "neither OPENAI_API_KEY nor OPENAI_BASE_URL is set",
                    ) {
                        return local;
                    }
                }
                return Err(format!(
                    "{who}, but neither OPENAI_API_KEY nor OPENAI_BASE_URL is set. \
                     Set OPENAI_API_KEY for api.openai.com, or OPENAI_BASE_URL for a local or compatible server \
                     (e.g. http://127.0.0.1:8000/v1; no key needed), \
                     or pick another provider: `--agent anthropic` with ANTHROPIC_API_KEY, `--agent ollama` with OLLAMA_HOST; \
                     or install the local model: {LOCAL_INSTALL_HINT}"
                ));
            }
        }
        Provider::Ollama => {
            if let Some((k, src)) = tool_key {
                (Auth::Bearer(k), format!("tool `{tool_name}` {src}"))
            } else if let Some(k) = env_get(env, "OLLAMA_API_KEY") {
                (Auth::Bearer(k.to_string()), "OLLAMA_API_KEY".to_string())
            } else {
                (Auth::None, "OLLAMA_API_KEY".to_string())
            }
        }
        Provider::Local => (Auth::None, String::new()),
    };

    // Model.
    let mut candidates: Vec<(String, String)> = Vec::new();
    if keep_file {
        if let Some(m) = step_model {
            candidates.push((m.to_string(), "step `model:`".to_string()));
        }
        if let Some(m) = opt_map.get("model").and_then(value_str) {
            candidates.push((
                substitute(&m, env),
                format!("tool `{tool_name}` options.model"),
            ));
        }
    }
    if let Some(m) = &overrides.model {
        candidates.push((m.clone(), "--model".to_string()));
    }
    if let Some(m) = env_get(env, provider.model_var()) {
        candidates.push((m.to_string(), provider.model_var().to_string()));
    }
    let mut skipped: Vec<String> = Vec::new();
    let mut chosen: Option<(String, String)> = None;
    for (m, src) in candidates {
        let m = m.trim();
        if m.is_empty() || m.eq_ignore_ascii_case("auto") {
            continue;
        }
        match provider {
            Provider::Anthropic => {
                chosen = Some((claude_model_id(m), src));
                break;
            }
            Provider::OpenAi | Provider::Ollama | Provider::Local => {
                if claude_alias(m).is_some() {
                    skipped.push(format!("`{m}` ({src})"));
                    continue;
                }
                chosen = Some((m.to_string(), src));
                break;
            }
        }
    }
    let (model, model_source) = match chosen {
        Some(c) => c,
        None if provider == Provider::Anthropic => {
            (ANTHROPIC_DEFAULT_MODEL.to_string(), "default".to_string())
        }
        // A compatible server of one's own (vLLM, llama.cpp) usually serves
        // one model: ask it, as the peer does.
        None if provider == Provider::OpenAi && !default_base && skipped.is_empty() => (
            AUTO_MODEL.to_string(),
            "the server's model list".to_string(),
        ),
        None => {
            let mut msg = format!(
                "{who}, but no model is set. Pass `--model <name>` or set {}",
                provider.model_var()
            );
            if keep_file {
                msg.push_str(&format!(" (or `options.model` on tool `{tool_name}`)"));
            }
            if !skipped.is_empty() {
                msg.push_str(&format!(
                    "; Claude aliases are not used with {}: skipped {}",
                    provider.label(),
                    skipped.join(", ")
                ));
            }
            return Err(msg);
        }
    };

    // Generic options (kept under --agent: they are not provider-specific).
    let Generic {
        timeout,
        max_retries,
        max_tokens,
        temperature,
    } = generic_options(tool);

    Ok(Resolved {
        provider,
        tool: tool_name.to_string(),
        model,
        model_source,
        base_url,
        timeout,
        max_retries,
        max_tokens,
        temperature,
        auth,
        key_source,
        local_model: None,
        local_named_by_workflow: false,
        fallback: None,
    })
}

/// The tool's generic options: timeout, retries, max_tokens, temperature.
struct Generic {
    timeout: Duration,
    max_retries: u32,
    max_tokens: Option<u64>,
    temperature: Option<f64>,
}

fn generic_options(tool: &ToolConfig) -> Generic {
    let o = &tool.options;
    Generic {
        timeout: o
            .get("timeout")
            .and_then(value_f64)
            .filter(|t| *t > 0.0)
            .and_then(crate::core::time::from_secs)
            .unwrap_or(DEFAULT_TIMEOUT),
        max_retries: o
            .get("max_retries")
            .and_then(value_f64)
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n.min(10.0) as u32)
            .unwrap_or(DEFAULT_MAX_RETRIES),
        max_tokens: o
            .get("max_tokens")
            .and_then(value_f64)
            .filter(|n| n.is_finite() && *n >= 1.0)
            .map(|n| n as u64),
        temperature: o
            .get("temperature")
            .and_then(value_f64)
            .filter(|t| t.is_finite()),
    }
}

/// The local model standing in for a cloud provider whose key is missing,
/// when one is installed (`None` otherwise).
fn local_fallback(
    overrides: &AgentOverrides,
    tool: &ToolConfig,
    tool_name: &str,
    env: &BTreeMap<String, String>,
    why: &str,
) -> Option<Result<Resolved, String>> {
    crate::core::models::default_gguf(env)?;
    Some(resolve_local(
        overrides,
        tool,
        tool_name,
        false,
        None,
        env,
        Some(why.to_string()),
    ))
}

/// Which GGUF a local step runs: the step's `model:`, the tool's
/// `options.model`, `--model`, `MARKTOFLOW_LOCAL_MODEL`, else the installed
/// default. A name is a path to a `.gguf` or a file in the models folder;
/// a Claude alias (`haiku`) names no local model and is passed over.
fn resolve_local(
    overrides: &AgentOverrides,
    tool: &ToolConfig,
    tool_name: &str,
    keep_file: bool,
    step_model: Option<&str>,
    env: &BTreeMap<String, String>,
    fallback: Option<String>,
) -> Result<Resolved, String> {
    use crate::core::models as catalog;
    // (name, where it came from, whether the workflow named it)
    let mut candidates: Vec<(String, String, bool)> = Vec::new();
    if keep_file {
        if let Some(m) = step_model {
            candidates.push((m.to_string(), "step `model:`".to_string(), true));
        }
        if let Some(m) = tool.options.get("model").and_then(value_str) {
            candidates.push((
                substitute(&m, env),
                format!("tool `{tool_name}` options.model"),
                true,
            ));
        }
    }
    if let Some(m) = &overrides.model {
        candidates.push((m.clone(), "--model".to_string(), false));
    }
    let mut chosen: Option<(std::path::PathBuf, String, bool)> = None;
    for (m, src, by_workflow) in candidates {
        let m = m.trim();
        if m.is_empty() || m.eq_ignore_ascii_case("auto") || claude_alias(m).is_some() {
            continue;
        }
        match catalog::resolve_gguf(m, env) {
            Some(p) => {
                chosen = Some((p, src, by_workflow));
                break;
            }
            // A model named for the cloud provider means nothing here.
            None if fallback.is_some() => continue,
            None => {
                return Err(format!(
                "the local model `{m}` ({src}) is not installed: give the path of a .gguf file, \
                     a file name in {}, or install the default model with {LOCAL_INSTALL_HINT}",
                crate::core::state::models_dir(env).display()
            ))
            }
        }
    }
    let (path, source, by_workflow) = match chosen {
        Some(c) => c,
        None => match catalog::default_gguf(env) {
            Some(p) => {
                let src = if env_get(env, catalog::MODEL_ENV).is_some() {
                    catalog::MODEL_ENV.to_string()
                } else {
                    "default".to_string()
                };
                (p, src, false)
            }
            None => {
                return Err(format!(
                    "tool `{tool_name}` uses the local model, but none is installed in {}. \
                     Install it with {LOCAL_INSTALL_HINT}, or give a GGUF file with `--model /path/model.gguf` \
                     (or the tool's `options.model`, or {})",
                    crate::core::state::models_dir(env).display(),
                    catalog::MODEL_ENV
                ))
            }
        },
    };
    let g = generic_options(tool);
    Ok(Resolved {
        provider: Provider::Local,
        tool: tool_name.to_string(),
        model: catalog::short_name(&path),
        model_source: source,
        base_url: String::new(),
        // Reading a long prompt on two cores takes a while.
        timeout: if tool.options.contains_key("timeout") {
            g.timeout
        } else {
            DEFAULT_LOCAL_TIMEOUT
        },
        max_retries: 0,
        max_tokens: g.max_tokens,
        temperature: g.temperature,
        auth: Auth::None,
        key_source: String::new(),
        local_model: Some(path),
        local_named_by_workflow: by_workflow,
        fallback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases() {
        assert_eq!(
            normalize_base(Provider::Ollama, "0.0.0.0"),
            "http://0.0.0.0:11434"
        );
        assert_eq!(
            normalize_base(Provider::Ollama, "gpu:1234/"),
            "http://gpu:1234"
        );
        assert_eq!(
            normalize_base(Provider::OpenAi, "localhost:8000/v1/"),
            "http://localhost:8000/v1"
        );
        assert_eq!(
            normalize_base(Provider::OpenAi, "proxy.example.com/v1"),
            "https://proxy.example.com/v1"
        );
        assert_eq!(
            display_url("https://u:p@h.example/v1"),
            "https://h.example/v1"
        );
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn tool(sdk: &str, model: Option<&str>) -> ToolConfig {
        let mut t = ToolConfig {
            name: "agent".into(),
            sdk: sdk.into(),
            ..Default::default()
        };
        if let Some(m) = model {
            t.options.insert("model".into(), Value::String(m.into()));
        }
        t
    }

    /// A models folder holding a file named like the default model (its
    /// content is never read by resolution).
    fn models_with_default() -> (std::path::PathBuf, BTreeMap<String, String>) {
        let d = std::env::temp_dir().join(format!(
            "mtf-local-{}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(crate::core::models::DEFAULT_CHAT.file), b"GGUF").unwrap();
        let e = env(&[
            ("HOME", "/nowhere"),
            (crate::core::state::MODELS_DIR_ENV, d.to_str().unwrap()),
        ]);
        (d, e)
    }

    #[test]
    fn the_local_model_stands_in_for_a_provider_without_a_key() {
        let (d, e) = models_with_default();
        let r = resolve(
            &AgentOverrides::default(),
            &tool("claude-agent", Some("sonnet")),
            Some("haiku"),
            &e,
        )
        .unwrap();
        assert_eq!(r.provider, Provider::Local);
        assert_eq!(
            r.local_model,
            Some(d.join(crate::core::models::DEFAULT_CHAT.file))
        );
        assert!(r.fallback.as_deref().unwrap().contains("ANTHROPIC_API_KEY"));
        assert_eq!(r.model_source, "default");
        // A key, or an endpoint of one's own, keeps the tool's provider.
        let mut with_key = e.clone();
        with_key.insert("ANTHROPIC_API_KEY".into(), "k".into());
        let r = resolve(
            &AgentOverrides::default(),
            &tool("claude", None),
            None,
            &with_key,
        )
        .unwrap();
        assert_eq!(r.provider, Provider::Anthropic);
        let mut proxy = e.clone();
        proxy.insert("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into());
        assert!(resolve(
            &AgentOverrides::default(),
            &tool("claude", None),
            None,
            &proxy
        )
        .is_err());
        // So does an explicit --agent: it says what to set instead.
        let over = AgentOverrides {
            agent: Some("openai".into()),
            model: Some("gpt".into()),
        };
        assert!(resolve(&over, &tool("claude", None), None, &e).is_err());
        let r = resolve(
            &AgentOverrides::default(),
            &tool("openai", Some("gpt-4o")),
            None,
            &e,
        )
        .unwrap();
        assert_eq!(r.provider, Provider::Local);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn without_a_key_or_a_local_model_the_error_says_how_to_get_either() {
        let e = env(&[("HOME", "/nowhere")]);
        let err = resolve(
            &AgentOverrides::default(),
            &tool("claude-agent", None),
            None,
            &e,
        )
        .unwrap_err();
        assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
        assert!(err.contains("marktoflow model install"), "{err}");
        let err = resolve(&AgentOverrides::default(), &tool("local", None), None, &e).unwrap_err();
        assert!(
            err.contains("none is installed in /nowhere/.local/share/marktoflow/models"),
            "{err}"
        );
        assert!(
            err.contains("marktoflow model install") && err.contains("--model /path/model.gguf"),
            "{err}"
        );
    }

    #[test]
    fn a_local_step_names_its_model_by_path_or_installed_name() {
        let (d, e) = models_with_default();
        let other = d.join("other.gguf");
        std::fs::write(&other, b"GGUF").unwrap();
        let r = resolve(
            &AgentOverrides::default(),
            &tool("local", Some("other")),
            None,
            &e,
        )
        .unwrap();
        assert_eq!(r.local_model.as_deref(), Some(other.as_path()));
        assert_eq!(r.model, "other");
        let p = other.display().to_string();
        let r = resolve(
            &AgentOverrides::default(),
            &tool("local", None),
            Some(&p),
            &e,
        )
        .unwrap();
        assert_eq!(r.model_source, "step `model:`");
        let over = AgentOverrides {
            agent: Some("local".into()),
            model: Some(p.clone()),
        };
        let r = resolve(&over, &tool("claude", Some("sonnet")), None, &e).unwrap();
        assert_eq!(r.local_model.as_deref(), Some(other.as_path()));
        let err = resolve(
            &AgentOverrides::default(),
            &tool("local", Some("nope.gguf")),
            None,
            &e,
        )
        .unwrap_err();
        assert!(
            err.contains("`nope.gguf` (tool `agent` options.model) is not installed"),
            "{err}"
        );
        // A Claude alias names no local model: the default is used.
        let r = resolve(
            &AgentOverrides::default(),
            &tool("local", Some("haiku")),
            None,
            &e,
        )
        .unwrap();
        assert_eq!(r.model_source, "default");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn substitution() {
        let env: BTreeMap<String, String> = [("K".to_string(), "v".to_string())].into();
        assert_eq!(substitute("${K}", &env), "v");
        assert_eq!(substitute("$K", &env), "v");
        assert_eq!(substitute("a${K}b${NOPE}", &env), "avb");
        assert_eq!(substitute("plain", &env), "plain");
    }
}
