//! A tool as the workflow declares it, and the other names of our sdks.

use serde_json::{Map, Value};

/// A tool declared in the workflow's frontmatter (`tools.<name>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolConfig {
    /// The name the workflow gave it (`agent` in `agent.run`).
    pub name: String,
    pub sdk: String,
    pub auth: Map<String, Value>,
    pub options: Map<String, Value>,
}

/// Other names of the sdks we provide, as the peer's workflows write them:
/// HTTP client libraries all mean the built-in `http`.
pub const SDK_ALIASES: &[(&str, &str)] = &[
    ("axios", "http"),
    ("node-fetch", "http"),
    ("fetch", "http"),
    ("got", "http"),
    ("undici", "http"),
    ("superagent", "http"),
    ("ky", "http"),
    ("@anthropic-ai/claude-agent-sdk", "claude-agent"),
    ("@anthropic-ai/sdk", "anthropic"),
];

/// The sdk `sdk` stands for (itself unless it is an alias).
pub fn canonical_sdk(sdk: &str) -> &str {
    SDK_ALIASES
        .iter()
        .find(|(alias, _)| *alias == sdk)
        .map_or(sdk, |(_, to)| to)
}
