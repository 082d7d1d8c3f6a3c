//! The run's vocabulary: statuses, the events a run emits, checkpoints,
//! and what a run returns.

use crate::diag::{Diagnostic, Pos};
use crate::format::model::Workflow;
use marktoflow_steps::core::signals::LogLevel;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Completed,
    Failed,
    Skipped,
    /// A `wait` for a person that stopped the run (it runs again, answered).
    Waiting,
}

impl StepStatus {
    /// The word stores, the API and `--json` use (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Completed => "completed",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
            StepStatus::Waiting => "waiting",
        }
    }

    /// The status a store wrote with [`StepStatus::as_str`]; anything else
    /// reads as failed.
    pub fn from_stored(s: &str) -> StepStatus {
        match s {
            "completed" => StepStatus::Completed,
            "skipped" => StepStatus::Skipped,
            "waiting" => StepStatus::Waiting,
            _ => StepStatus::Failed,
        }
    }
}

/// Where a run stands: the one set of run states that the engine returns,
/// the stores record, and the CLI, the API, the console, MCP and
/// `/metrics` show ([`RunStatus::as_str`]). A run the engine executed ends
/// in any state but `Queued` and `Running`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Accepted, not started.
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
    /// The workflow ended itself with an error answer: `workflow.exit` with
    /// a status of 400 or more (a refused request, not a broken run), or
    /// an approval rejected with no branch for it.
    Rejected,
    /// Stopped at a `wait` for a person or an event: a row, no process;
    /// resumed when answered.
    Waiting,
}

impl RunStatus {
    /// Every state, in the order a run may go through them.
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Waiting,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::Rejected,
    ];

    /// The word stores, the API, `--json` and the console use (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Rejected => "rejected",
            RunStatus::Waiting => "waiting",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Ended for good (a waiting run is not: it goes on when answered).
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            RunStatus::Queued | RunStatus::Running | RunStatus::Waiting
        )
    }
}

/// What started a run, as the store records it and the API (`?trigger=`),
/// the console and `history` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunTrigger {
    /// `marktoflow run` (and `answer`/`resume` continuing one).
    Cli,
    /// `POST /workflows/{id}/runs` (the console's Run).
    Api,
    Webhook,
    Schedule,
    FileWatch,
    /// A tool call of an MCP client.
    Mcp,
    /// A retry of an earlier run (`marktoflow retry`, `POST /runs/{id}/retry`).
    Retry,
}

impl RunTrigger {
    pub const ALL: [RunTrigger; 7] = [
        RunTrigger::Webhook,
        RunTrigger::Api,
        RunTrigger::Schedule,
        RunTrigger::FileWatch,
        RunTrigger::Mcp,
        RunTrigger::Retry,
        RunTrigger::Cli,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunTrigger::Cli => "cli",
            RunTrigger::Api => "api",
            RunTrigger::Webhook => "webhook",
            RunTrigger::Schedule => "schedule",
            RunTrigger::FileWatch => "file_watch",
            RunTrigger::Mcp => "mcp",
            RunTrigger::Retry => "retry",
        }
    }
}

/// What happens during a run, in order. Printers, servers and stores all
/// consume the same stream.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    RunStarted {
        run_id: String,
        workflow: String,
        total_steps: usize,
    },
    StepStarted {
        id: String,
        name: String,
        depth: usize,
        /// 1-based index among top-level steps (0 for nested steps).
        index: usize,
        kind: &'static str,
        detail: Option<String>,
    },
    Log {
        step: String,
        level: LogLevel,
        message: String,
    },
    /// A long action's progress (`kb.index` files, `kb.vector_search` chunks).
    Progress {
        step: String,
        what: String,
        done: u64,
        total: u64,
    },
    /// A request to a model made by step `step` (an agent's), with what
    /// its reply says it took and what that cost, where the price is known.
    ModelCall {
        step: String,
        provider: String,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        duration_ms: u64,
    },
    StepRetry {
        id: String,
        attempt: u32,
        error: String,
        delay_ms: u64,
    },
    StepFinished {
        id: String,
        name: String,
        depth: usize,
        status: StepStatus,
        duration_ms: u64,
        output: Value,
        error: Option<String>,
        /// An action's inputs as it was called (their last attempt), at
        /// most [`NESTED_OUTPUT_BYTES`] of JSON (see [`bounded_ref`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        inputs: Option<Value>,
    },
    /// After each top-level step: enough to continue the run from the next
    /// one without running the finished steps again (see [`Engine::resume`]).
    Checkpoint(Arc<Checkpoint>),
    /// The run stops at a `wait` for a person or an event (the last event
    /// before `RunFinished` with status `waiting`).
    Waiting(Arc<super::WaitRequest>),
    RunFinished {
        status: RunStatus,
        duration_ms: u64,
    },
}

/// The state of a run between two top-level steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Checkpoint {
    /// 0-based index of the first top-level step still to run.
    pub next_step: usize,
    pub variables: Map<String, Value>,
    /// `steps.<id>` as templates see it.
    pub steps: Map<String, Value>,
    pub set_outputs: Option<Value>,
    pub last_output: Option<Value>,
}

/// A run event and when it happened.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// Milliseconds since 1970, by the run's clock.
    pub at_ms: i64,
    #[serde(flatten)]
    pub kind: RunEvent,
}

impl Event {
    /// `kind`, stamped now by `clock`.
    pub fn now(clock: &dyn marktoflow_steps::core::time::Clock, kind: RunEvent) -> Event {
        Event {
            at_ms: clock.now_ms(),
            kind,
        }
    }
}

pub type EventSink = Arc<dyn Fn(&Event) + Send + Sync>;

/// One executed (or skipped) step.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    pub id: String,
    pub name: String,
    pub status: StepStatus,
    pub output: Value,
    pub error: Option<String>,
    pub duration_ms: u64,
    pub retries: u32,
    #[serde(skip)]
    pub depth: usize,
}

/// The most of a step's output inside a loop, branch or try block that its
/// record and `StepFinished` event keep (the JSON bytes).
pub const NESTED_OUTPUT_BYTES: usize = 4096;

/// A nested step's output as its record keeps it: whole when small, else
/// a note of its size. A loop's own output (and the variables) still hold
/// every iteration's; without this, a 50-iteration loop kept each
/// iteration's output again in the run's step list, the store and `--json`.
pub(super) fn bounded_nested(output: Value) -> Value {
    if fits(&output) {
        return output;
    }
    let bytes = size(&output);
    json!({"omitted": format!(
        "the output of a step inside a loop, branch or try block, {bytes} bytes (records keep at most {NESTED_OUTPUT_BYTES}); its loop's output and the variables hold it"
    )})
}

/// [`bounded_nested`] of a value that stays where it is: copied only when
/// small (an action's inputs as shown beside its output).
pub(super) fn bounded_ref(v: &Value) -> Value {
    if fits(v) {
        return v.clone();
    }
    let bytes = size(v);
    json!({"omitted": format!("inputs of {bytes} bytes (a step's record keeps at most {NESTED_OUTPUT_BYTES})")})
}

/// Whether `v` is at most [`NESTED_OUTPUT_BYTES`] of JSON (counted without
/// keeping it; the count stops at the limit).
fn fits(v: &Value) -> bool {
    let mut small = Count {
        n: 0,
        limit: NESTED_OUTPUT_BYTES,
    };
    serde_json::to_writer(&mut small, v).is_ok()
}

/// Counts JSON bytes without keeping them; fails past `limit`.
struct Count {
    n: usize,
    limit: usize,
}

impl std::io::Write for Count {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.n += b.len();
        if self.n > self.limit {
            return Err(std::io::Error::other("over the limit"));
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `v`'s size as JSON, in bytes.
fn size(v: &Value) -> usize {
    let mut all = Count {
        n: 0,
        limit: usize::MAX,
    };
    let _ = serde_json::to_writer(&mut all, v);
    all.n
}

/// Why a run failed, and where the failing step is.
#[derive(Debug, Clone, Serialize)]
pub struct RunFailure {
    pub message: String,
    /// The error code a `workflow.fail` step gave, beside its message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub step_id: Option<String>,
    pub step_name: Option<String>,
    pub file: String,
    pub pos: Option<Pos>,
    /// The author's words when `message` says more (see the engine's
    /// `Failure::authored`): what a caller's `catch` reads.
    #[serde(skip)]
    pub authored: Option<String>,
}

impl RunFailure {
    pub fn diagnostic(&self, wf: &Workflow) -> Diagnostic {
        let msg = match &self.step_name {
            Some(n) => format!("step `{n}` failed: {}", self.message),
            None => self.message.clone(),
        };
        let mut d = Diagnostic::error(&wf.source, self.pos, msg);
        if let Some(c) = &self.code {
            d.hints.push(format!("error code: {c}"));
        }
        d
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub run_id: String,
    pub workflow: String,
    pub status: RunStatus,
    pub outputs: Value,
    pub steps: Vec<StepRecord>,
    pub error: Option<RunFailure>,
    pub duration_ms: u64,
    /// What a waiting webhook caller gets instead of the run's JSON, when
    /// `workflow.exit` said so: `{status, body}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// What a waiting run waits for (status `waiting`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<super::WaitRequest>,
}
