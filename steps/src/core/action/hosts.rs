//! What actions call besides the disk and the network, as traits, so that
//! [`Capabilities`](super::Capabilities) holds a script runner
//! and an LLM client without depending on how they work (tests and servers
//! may give their own).

use super::Call;
use crate::core::error::ActionError;
use crate::core::sandbox::Sandbox;
use crate::core::signals::{Cancel, LogLine};
use crate::core::tool::ToolConfig;
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// Runs JavaScript for `script.*` steps.
#[async_trait]
pub trait ScriptRunner: Send + Sync {
    /// Runs one script; `log` receives its console lines.
    async fn run(
        &self,
        job: ScriptJob,
        log: &(dyn Fn(LogLine) + Send + Sync),
        cancel: &Cancel,
    ) -> Result<Value, ScriptError>;
}

/// One model a provider serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub id: String,
    pub owned_by: String,
}

/// Answers agent steps.
#[async_trait]
pub trait Llm: Send + Sync {
    /// Before the first step: a short description of what a step would call
    /// (`anthropic claude-haiku-4-5-20251001`), or what to set.
    fn preflight(
        &self,
        tool: &ToolConfig,
        step_model: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<String, String>;
    /// One call; the reply text.
    async fn complete(&self, call: &Call<'_>, inputs: &Value) -> Result<String, ActionError>;
    /// The models the provider of `call`'s tool serves.
    async fn list_models(&self, _call: &Call<'_>) -> Result<Vec<ModelInfo>, ActionError> {
        Err(ActionError::failed("listing models is not available here"))
    }
    /// Reads `asks` with the local GGUF model at `model`, within `timeout`.
    async fn read_spans(
        &self,
        _call: &Call<'_>,
        _model: &std::path::Path,
        _asks: Vec<crate::core::reading::SpanAsk>,
        _timeout: Duration,
    ) -> Result<Vec<crate::core::reading::SpanReading>, ActionError> {
        Err(ActionError::failed(
            "reading with a local model is not available here",
        ))
    }
}

/// LLM replies recorded with their call's idempotency key (see
/// [`crate::core::action::Call::idempotency_key`]): a run resumed after a
/// crash gets a reply it already paid for from here instead of asking again.
#[async_trait]
pub trait Replies: Send + Sync {
    /// The reply recorded for `key`, if any.
    async fn recall(&self, key: &str) -> Option<String>;
    /// Records `reply` for `key`.
    fn remember(&self, key: &str, reply: &str);
}

/// What a person decided about a tool call an agent asked for (a tool
/// marked `approval:`), as the run's store holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolDecision {
    /// Go ahead, with the arguments as the person left them (None: as asked).
    Approved {
        args: Option<serde_json::Map<String, serde_json::Value>>,
        by: String,
    },
    /// The agent is told the call was refused, and why.
    Rejected { reason: Option<String>, by: String },
}

/// The decisions about the tool calls of a run that needed a person's
/// approval, by call id (see [`crate::core::error::ApprovalAsk`]).
pub trait Approvals: Send + Sync {
    /// The decision for call `id`; None while nobody decided.
    fn decision(&self, id: &str) -> Option<ToolDecision>;
}

/// What a run's model calls spend, and the budget that stops them: asked
/// before each request to a model, told after it of what it took.
#[async_trait]
pub trait Usage: Send + Sync {
    /// Err (why) when a request of about `input_tokens` to `model`, served
    /// by `provider`, would take the run past a budget: it is not made.
    async fn before(&self, provider: &str, model: &str, input_tokens: u64) -> Result<(), String>;
    /// A request made, with what its reply says it took; the call's
    /// estimated cost in US dollars, where the model's price is known.
    fn after(&self, call: &ModelCall) -> Option<f64>;
}

/// Where a run's outgoing requests belong in a trace: the W3C
/// `traceparent` of the span of the step that makes them.
pub trait Trace: Send + Sync {
    /// For a request made now by step `step`; None: not traced.
    fn traceparent(&self, step: &str) -> Option<String>;
}

/// One request to a model, as [`Usage::after`] is told of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// Who served it: `anthropic`, `openai`, `ollama`, `local`, ….
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// When the request was sent (milliseconds since 1970, by the run's
    /// clock) and how long its reply took.
    pub started_ms: i64,
    pub duration_ms: u64,
}

/// Workflow files an agent step may call as tools (`tools: [refund.md]`),
/// found from the calling workflow's file: the engine's.
#[async_trait]
pub trait Workflows: Send + Sync {
    /// Workflow `path` as a tool: its name, description and input schema.
    fn tool(&self, path: &str) -> Result<WorkflowTool, String>;
    /// Runs it with `inputs`, checked as a sub-workflow's: its outputs, or
    /// why it did not complete. `key` names this call in the run (the same
    /// when the step runs again): the nested run's keys derive from it.
    async fn run(
        &self,
        path: &str,
        inputs: serde_json::Map<String, serde_json::Value>,
        key: &str,
    ) -> Result<serde_json::Value, String>;
}

/// A workflow as an agent's tool.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowTool {
    pub name: String,
    pub description: String,
    /// A JSON Schema object of its inputs.
    pub schema: serde_json::Value,
}

/// One script to run.
#[derive(Debug, Clone)]
pub struct ScriptJob {
    /// Body of an async function: may `return` and `await`.
    pub code: String,
    /// The `context` global.
    pub context: Value,
    /// More globals, deep-frozen (writes are ignored): the peer's
    /// `variables`, `inputs` and `steps` for `type: script`.
    pub globals: serde_json::Map<String, Value>,
    pub sandbox: Sandbox,
    /// Overrides [`ScriptLimits::timeout`].
    pub timeout: Option<Duration>,
}

/// Why a script produced no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The code does not parse. `line`/`column` (1-based) are relative to the
    /// code as given, so the caller can map them into its source file.
    #[error("script compilation failed: {message}{}", position(*.line, *.column))]
    Compile {
        message: String,
        line: Option<u32>,
        column: Option<u32>,
    },
    /// The script threw or its promise was rejected: `String(error)`, e.g.
    /// `Error: boom` or `TypeError: x is not a function`.
    #[error("{0}")]
    Thrown(String),
    #[error("script timed out after {}", human(*.0))]
    Timeout(Duration),
    #[error("script cancelled")]
    Cancelled,
    #[error("script exceeded its memory limit ({} MiB)", .0 >> 20)]
    MemoryLimit(u64),
    /// The worker process died for another reason (details and stderr tail).
    #[error("script worker died unexpectedly: {0}")]
    WorkerDied(String),
    #[error("cannot start a script worker: {0}")]
    Spawn(String),
    /// The worker reported an internal failure (engine panic).
    #[error("{0}")]
    Internal(String),
    /// The script returned (or logged in one line) more than this many bytes.
    #[error("the script returned more than {} MiB; return less (write large data to a file)", .0 >> 20)]
    TooLarge(usize),
}

fn position(line: Option<u32>, column: Option<u32>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" (line {l}, column {c} of the script)"),
        (Some(l), None) => format!(" (line {l} of the script)"),
        _ => String::new(),
    }
}

use crate::core::time::human;
