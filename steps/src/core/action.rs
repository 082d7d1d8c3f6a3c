//! The `Action` trait: what every step action implements, and what it is given.

use crate::core::sandbox::Sandbox;
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A log line produced by an action (`console.log`, `core.log`, provider retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: LogLevel,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn parse(s: &str) -> Option<LogLevel> {
        match s.to_ascii_lowercase().as_str() {
            "debug" | "trace" => Some(LogLevel::Debug),
            "info" | "log" => Some(LogLevel::Info),
            "warn" | "warning" => Some(LogLevel::Warn),
            "error" => Some(LogLevel::Error),
            _ => None,
        }
    }
}

/// Where actions send their log lines; the engine turns them into run events.
pub type LogSink = Arc<dyn Fn(LogLine) + Send + Sync>;

/// How far a long action has got (files indexed, passages embedded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// What is counted, e.g. `files indexed`.
    pub what: String,
    pub done: u64,
    pub total: u64,
}

/// Where actions report progress; the CLI draws a bar from it on a terminal.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// A sink that drops progress reports.
pub fn no_progress() -> ProgressSink {
    Arc::new(|_| {})
}

/// Set once to ask running actions to stop (Ctrl-C, workflow timeout).
#[derive(Clone, Default)]
pub struct Cancel(Arc<(AtomicBool, tokio::sync::Notify)>);

impl Cancel {
    pub fn cancel(&self) {
        self.0 .0.store(true, Ordering::SeqCst);
        self.0 .1.notify_waiters();
    }
    pub fn is_cancelled(&self) -> bool {
        self.0 .0.load(Ordering::SeqCst)
    }
    /// Resolves when cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0 .1.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

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

/// Everything an action may use besides its inputs. Built once per run.
#[derive(Clone)]
pub struct Capabilities {
    pub sandbox: Arc<Sandbox>,
    pub log: LogSink,
    pub progress: ProgressSink,
    pub cancel: Cancel,
    pub scripts: Arc<dyn crate::core::hosts::ScriptRunner>,
    pub agents: Arc<dyn crate::core::hosts::Llm>,
    /// Environment variables visible to the run (a snapshot: actions never read
    /// the process environment directly, so tests and servers can set it).
    pub env: Arc<std::collections::BTreeMap<String, String>>,
    /// Hosts `http.*` actions may call (`example.com`, `*.example.com`,
    /// `127.0.0.1:8080`); None allows any host.
    pub allowed_hosts: Option<Arc<Vec<String>>>,
    /// Where default state goes (kb indexes, memory databases): the
    /// project's `.marktoflow/` or the per-user folder.
    pub state: Arc<crate::core::state::StateDir>,
    /// The wall clock: `now()`, `core.datetime`, recency, event times.
    pub clock: Arc<dyn crate::core::time::Clock>,
    /// Open indexes, loaded models and vectors kept between runs.
    pub caches: Arc<crate::core::cache::Caches>,
    /// The MCP servers started for `sdk: mcp` tools; whoever made the
    /// capabilities stops them ([`McpServers::shutdown`]) when done.
    ///
    /// [`McpServers::shutdown`]: crate::core::mcp::McpServers::shutdown
    pub mcp: Arc<crate::core::mcp::McpServers>,
    /// Where agent steps' replies are recorded and recalled (None: not at
    /// all, as for a run that is not recorded).
    pub replies: Option<Arc<dyn crate::core::hosts::Replies>>,
}

impl Capabilities {
    /// What every caller chooses (the roots, the state folder, how scripts
    /// and agents run, the environment, the allowed hosts), with the rest as
    /// a fresh process has it: the system clock, empty caches, no MCP server
    /// started, no replies recorded, logs and progress discarded, not
    /// cancelled. Change a field after (`Capabilities { clock, ..new }`).
    pub fn new(
        sandbox: Sandbox,
        state: crate::core::state::StateDir,
        scripts: Arc<dyn crate::core::hosts::ScriptRunner>,
        agents: Arc<dyn crate::core::hosts::Llm>,
        env: std::collections::BTreeMap<String, String>,
        allowed_hosts: Option<Vec<String>>,
    ) -> Self {
        Capabilities {
            sandbox: Arc::new(sandbox),
            log: Arc::new(|_| {}),
            progress: no_progress(),
            cancel: Cancel::default(),
            scripts,
            agents,
            env: Arc::new(env),
            allowed_hosts: allowed_hosts.map(Arc::new),
            state: Arc::new(state),
            clock: Arc::new(crate::core::time::SystemClock),
            caches: Default::default(),
            mcp: Default::default(),
            replies: None,
        }
    }
}

/// One call of an action by one step.
pub struct Call<'a> {
    /// Full action name as written, e.g. `agent.run`.
    pub action: &'a str,
    /// The method part after the tool name, e.g. `run`.
    pub method: &'a str,
    /// The tool the action belongs to, when declared in the frontmatter.
    pub tool: Option<&'a ToolConfig>,
    /// Every tool the workflow declares (`${VAR}`s filled in): an agent step
    /// may offer MCP servers among them to its model.
    pub declared: &'a [ToolConfig],
    /// The step's `model:` field.
    pub model: Option<&'a str>,
    /// Step timeout, when one applies.
    pub timeout: Option<Duration>,
    /// Read-only globals a script step sees besides `context` (the peer's
    /// `variables`, `inputs`, `steps`); none for other actions.
    pub globals: Option<&'a serde_json::Map<String, Value>>,
    pub caps: &'a Capabilities,
    /// Sent as `Idempotency-Key` by `http.*` and to LLM providers: the same
    /// for a call made again after a crash or a retry of the same attempt
    /// (`run_id:step_id:attempt`), so a server that honours it acts once.
    pub idempotency_key: Option<&'a str>,
}

impl<'a> Call<'a> {
    /// A copy to change a field of (`Call { model, ..call.reborrow() }`).
    pub fn reborrow(&self) -> Call<'a> {
        Call {
            action: self.action,
            method: self.method,
            tool: self.tool,
            declared: self.declared,
            model: self.model,
            timeout: self.timeout,
            globals: self.globals,
            caps: self.caps,
            idempotency_key: self.idempotency_key,
        }
    }

    pub fn progress(&self, what: &str, done: usize, total: usize) {
        (self.caps.progress)(Progress {
            what: what.to_string(),
            done: done as u64,
            total: total as u64,
        })
    }

    pub fn log(&self, level: LogLevel, message: impl Into<String>) {
        (self.caps.log)(LogLine {
            level,
            message: message.into(),
        })
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ActionError {
    /// The inputs do not fit the action (missing field, wrong type).
    #[error("{0}")]
    Input(String),
    /// The action ran and failed; `retryable` tells the engine a retry may help.
    #[error("{message}")]
    Failed { message: String, retryable: bool },
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("cancelled")]
    Cancelled,
    /// Code the action ran (a script) failed at a place inside it: 1-based
    /// `line`/`column` within that code, for the caller to map into its file.
    #[error("{message}")]
    At {
        message: String,
        line: u32,
        column: u32,
    },
}

impl ActionError {
    pub fn failed(message: impl Into<String>) -> Self {
        ActionError::Failed {
            message: message.into(),
            retryable: false,
        }
    }
    pub fn retryable(message: impl Into<String>) -> Self {
        ActionError::Failed {
            message: message.into(),
            retryable: true,
        }
    }
}

#[async_trait]
pub trait Action: Send + Sync {
    /// The contract of each method this action answers to.
    fn specs(&self) -> &'static [crate::core::catalog::Spec];
    /// Runs the method with already-rendered inputs and returns its output.
    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError>;
}

/// Reads a required string field of an inputs object.
pub fn required_str<'v>(inputs: &'v Value, field: &str) -> Result<&'v str, ActionError> {
    match inputs.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ActionError::Input(format!(
            "input `{field}` must be a string, got {}",
            type_name(other)
        ))),
        None => Err(ActionError::Input(format!("missing input `{field}`"))),
    }
}

/// The JSON type name of a value, as used in messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
