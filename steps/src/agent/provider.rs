//! The LLM providers an agent step can speak to, the names (`sdk:`,
//! `--agent`) that select them, and Claude's model aliases.

use std::fmt;

pub(super) const SUPPORTED_SDKS: &str =
    "claude-agent, claude, claude-code, anthropic (Anthropic Messages API); \
openai, openai-compatible, vllm (OpenAI chat completions); ollama (Ollama chat API); \
local (a GGUF model run in-process)";

pub(super) const SUPPORTED_AGENTS: &str =
    "anthropic (also claude, claude-agent, claude-code), openai (also openai-compatible, vllm), ollama, local";

/// How to get the built-in model, for messages.
pub const LOCAL_INSTALL_HINT: &str =
    "`marktoflow model install` (the built-in local model, about 490 MB; no key or network needed afterwards)";

/// An LLM provider spoken over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `POST {base}/v1/messages`.
    Anthropic,
    /// `POST {base}/chat/completions`.
    OpenAi,
    /// `POST {host}/api/chat`.
    Ollama,
    /// A GGUF model run in this process by llama.cpp.
    Local,
}

/// Every tool `sdk` (and `--agent` value) naming a provider.
pub const SDKS: &[(&str, Provider)] = &[
    ("claude-agent", Provider::Anthropic),
    ("claude", Provider::Anthropic),
    ("claude-code", Provider::Anthropic),
    ("anthropic", Provider::Anthropic),
    ("openai", Provider::OpenAi),
    ("openai-compatible", Provider::OpenAi),
    ("vllm", Provider::OpenAi),
    ("ollama", Provider::Ollama),
    ("local", Provider::Local),
];

impl Provider {
    /// The provider for a tool `sdk` (or a `--agent` value), case-insensitive.
    pub fn from_sdk(sdk: &str) -> Option<Provider> {
        let sdk = crate::core::tool::canonical_sdk(sdk.trim());
        SDKS.iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(sdk))
            .map(|(_, p)| *p)
    }

    /// Short lowercase id: `anthropic`, `openai`, `ollama`.
    pub fn id(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
            Provider::Ollama => "ollama",
            Provider::Local => "local",
        }
    }

    /// Display name: `Anthropic`, `OpenAI`, `Ollama`.
    pub fn label(self) -> &'static str {
        match self {
            Provider::Anthropic => "Anthropic",
            Provider::OpenAi => "OpenAI",
            Provider::Ollama => "Ollama",
            Provider::Local => "the local model",
        }
    }

    /// The environment variable holding the API key.
    pub fn key_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Ollama => "OLLAMA_API_KEY",
            Provider::Local => "",
        }
    }

    /// The environment variable holding the endpoint.
    pub fn base_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::OpenAi => "OPENAI_BASE_URL",
            Provider::Ollama => "OLLAMA_HOST",
            Provider::Local => "",
        }
    }

    /// The environment variable holding the default model.
    pub fn model_var(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_MODEL",
            Provider::OpenAi => "OPENAI_MODEL",
            Provider::Ollama => "OLLAMA_MODEL",
            Provider::Local => crate::core::models::MODEL_ENV,
        }
    }

    /// The endpoint used when neither the tool nor the environment names one.
    pub fn default_base(self) -> &'static str {
        match self {
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Ollama => "http://127.0.0.1:11434",
            Provider::Local => "",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// Maps a Claude model alias to a full Anthropic model id; anything else
/// (full ids, unknown names) passes through unchanged.
///
/// `sonnet` / `claude-sonnet` / `sonnet-4.5` → `claude-sonnet-4-5-20250929`,
/// `haiku` / `claude-haiku` → `claude-haiku-4-5-20251001`,
/// `opus` / `claude-opus` → `claude-opus-4-5-20251101`.
pub fn claude_model_id(model: &str) -> String {
    match claude_alias(model) {
        Some(id) => id.to_string(),
        None => model.to_string(),
    }
}

/// The full id for a Claude alias, `None` when `model` is not an alias.
pub fn claude_alias(model: &str) -> Option<&'static str> {
    let m = model.trim().to_ascii_lowercase();
    let m = m.strip_prefix("claude-").unwrap_or(&m);
    let m = m.replace('.', "-");
    match m.as_str() {
        "sonnet" | "sonnet-4-5" | "sonnet-latest" => Some("claude-sonnet-4-5-20250929"),
        "haiku" | "haiku-4-5" | "haiku-latest" => Some("claude-haiku-4-5-20251001"),
        "opus" | "opus-4-5" | "opus-latest" => Some("claude-opus-4-5-20251101"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases() {
        assert_eq!(claude_model_id("haiku"), "claude-haiku-4-5-20251001");
        assert_eq!(
            claude_model_id("Claude-Sonnet"),
            "claude-sonnet-4-5-20250929"
        );
        assert_eq!(claude_model_id("opus"), "claude-opus-4-5-20251101");
        assert_eq!(claude_model_id("sonnet-4.5"), "claude-sonnet-4-5-20250929");
        assert_eq!(
            claude_model_id("claude-3-5-haiku-latest"),
            "claude-3-5-haiku-latest"
        );
        assert!(claude_alias("gpt-4o").is_none());
    }
}
