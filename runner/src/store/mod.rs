//! The run store: every run, its steps and its checkpoints, kept on disk.
//!
//! [`RunStore`] is the interface; [`sqlite::SqliteStore`] (one file, WAL
//! mode) is the store of one machine, [`postgres::PgStore`] the one many
//! servers and workers share. Every write after a run's creation is a
//! [`Write`] given to [`RunStore::write`]; both backends queue it to one
//! writer (`writer.rs`) and differ only in how a batch is committed
//! (`sqlite/write.rs`, `postgres/write.rs`); a CLI run's journal appends
//! the same writes to a file.
//!
//! Writes are cheap on the caller's side: only [`RunStore::create_run`]
//! waits for its commit; step rows, checkpoints and run ends are queued and
//! committed in order by one writer, many to a transaction. [`RunStore::flush`]
//! waits for everything queued so far.
//!
//! How a server records and resumes runs:
//!
//! ```text
//! // accepting a run (before answering 202): durable once this returns
//! store.submit_run(NewRun::new(id, &wf, inputs, RunTrigger::Webhook)).await??;
//! // running it: records every step and checkpoint, then the end of the run
//! let result = run_recorded(&store, &engine, &wf, inputs, cfg).await;
//! // on startup: continue what a killed server left behind
//! for run in store.incomplete_runs()? {
//!     let wf = /* load run.file */;
//!     let result = resume_run(&store, &engine, &wf, &run, cfg).await;
//! }
//! // and apply the retention setting
//! store.prune(retention)?;
//! ```
//!
//! A CLI run does not open the database at all: [`journal::JournalStore`]
//! appends its writes to a file of its own beside the database, and the
//! next process that reads the store (`history`, `show`, `serve`, …) moves
//! finished journals into it in one transaction. Recording a short run then
//! costs one small file instead of opening SQLite, a commit and a checkpoint.
//!
//! [`recording_sink`] is the event sink alone, for callers that compose it
//! with others (the CLI's progress printer); they end the run with
//! [`RunStore::finish_run`].

pub mod checkpoint;
pub mod death;
mod fold;
pub mod journal;
pub mod owner;
pub mod postgres;
mod record;
pub mod retry;
pub mod sqlite;
pub mod wait;
mod writer;

pub use fold::{Going, StepFold};

pub use crate::engine::RunStatus;
use crate::engine::{Checkpoint, RunResult, StepStatus};
use crate::format::model::Workflow;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

pub use checkpoint::CheckpointRow;
pub use postgres::{PgOptions, PgStore};
pub use record::{
    not_resumed_for_deaths, recording_sink, resume_from, resume_run, run_recorded, tee,
    RecordedReplies, MAX_DEATHS,
};
pub use sqlite::SqliteStore;
pub use wait::{AnswerIn, Answered, PauseAsked, WaitFilter, WaitRecord, WaitState};
pub use writer::AfterCommit;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("run store `{path}`: {message}")]
    Open { path: String, message: String },
    #[error("run store: {0}")]
    Db(String),
    #[error("run store `{path}` has schema version {found}, newer than this marktoflow knows ({known}); upgrade marktoflow")]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("no run `{0}` in the store")]
    NotFound(String),
    #[error("run id prefix `{0}` matches several runs; give more characters")]
    Ambiguous(String),
    #[error("run store: the writer has stopped")]
    Closed,
    /// The shared store cannot be reached now (its server is down, the
    /// network is cut): worth trying again shortly.
    #[error("run store unreachable: {0}")]
    Unavailable(String),
    /// A shared store's run is now another worker's (this one's lease ran
    /// out): what this process writes for it is not recorded.
    #[error("run `{0}` is held by another worker now (this one's lease ran out); its writes here are not recorded")]
    LeaseLost(String),
    /// The request's `Idempotency-Key` already started run `{0}`.
    #[error("the Idempotency-Key already started run `{0}`")]
    DuplicateKey(String),
}

/// A run to record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewRun {
    pub id: String,
    /// The workflow's id.
    pub workflow: String,
    /// The workflow file, as it can be loaded again (absolute when known).
    pub file: String,
    /// [`version_of`] the workflow when the run was accepted.
    pub version: String,
    pub inputs: Map<String, Value>,
    /// What started it: `cli`, `webhook`, `schedule`, `retry`.
    pub trigger: String,
    pub status: RunStatus,
    /// The run this one retries, and how many of its top-level steps are
    /// reused (their step rows are copied to the new run).
    pub retry_of: Option<(String, usize)>,
    /// The process running it (shown; older rows tell liveness by it).
    pub pid: Option<u32>,
    /// The token of the process that owns it (see [`owner`]); the store
    /// fills it in.
    #[serde(default)]
    pub owner: Option<String>,
    /// The request's `Idempotency-Key` (with its route), kept with the run
    /// for [`IDEMPOTENCY_RETENTION`] so a repeat finds it after a restart.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// What the run sees as `trigger` (a request's method, headers, body),
    /// kept so that another process can start it (a shared queue).
    #[serde(default)]
    pub context: Value,
    /// Its `concurrency:` bucket (the workflow's id and the rendered key)
    /// and the bucket's limit: runs of one bucket execute at most `limit`
    /// at once, over every process of a shared store.
    #[serde(default)]
    pub concurrency: Option<(String, u32)>,
}

/// The `concurrency:` bucket of a run of `wf` with `inputs`, and its limit.
/// A key that does not render puts the run in the bucket of the key's own
/// text: such runs are limited together, never left unlimited.
/// A trigger's `max_concurrent:` (the smallest) counts as `concurrency:`
/// without a key: on a shared store it holds over the cluster too.
pub fn concurrency_of(wf: &Workflow, inputs: &Map<String, Value>) -> Option<(String, u32)> {
    static TEMPLATES: std::sync::OnceLock<crate::template::Templates> = std::sync::OnceLock::new();
    let Some(c) = wf.concurrency.as_ref() else {
        let limit = triggers_limit(wf)?;
        return Some((format!("{}\u{1f}", wf.meta.id), limit));
    };
    let key = match &c.key {
        None => String::new(),
        Some(k) => {
            // Inputs may come from a request: bounded work.
            let t = TEMPLATES.get_or_init(|| crate::template::Templates::with_fuel(50_000));
            let ctx = crate::template::Templates::to_value(
                &serde_json::json!({"inputs": Value::Object(inputs.clone())}),
            );
            t.render_str(k, &ctx).unwrap_or_else(|_| k.clone())
        }
    };
    Some((format!("{}\u{1f}{key}", wf.meta.id), c.limit))
}

/// The smallest `max_concurrent:` of the workflow's triggers.
fn triggers_limit(wf: &Workflow) -> Option<u32> {
    wf.triggers
        .iter()
        .filter_map(|t| t.fields.get("max_concurrent").and_then(Value::as_u64))
        .min()
        .map(|n| n.clamp(1, u64::from(u32::MAX)) as u32)
}

/// Whether runs of `wf` are limited over a cluster (`concurrency:`, or a
/// trigger's `max_concurrent:`): on a shared store they go through the queue.
pub fn cluster_limited(wf: &Workflow) -> bool {
    wf.concurrency.is_some() || triggers_limit(wf).is_some()
}

/// The most of one value (a step's output, a run's outputs) the store keeps,
/// as JSON text: a larger one is kept as a marker (see [`stored_json`]).
/// The run itself, and whoever waits for its answer, has the whole value.
pub const STORED_VALUE_MAX: usize = 1 << 20;

/// A completed run's checkpoints are deleted when together they hold more
/// than this (`retry --from` then starts such a run from its beginning);
/// a failed or cancelled run keeps them whole for `retry`.
pub const KEPT_CHECKPOINTS_MAX: i64 = 4 << 20;

/// `v` as JSON text, as the store keeps it: whole up to
/// [`STORED_VALUE_MAX`], else `{"truncated": true, "bytes": N, "preview":
/// "<the first 1,000 characters>"}`.
pub fn stored_json(v: &Value) -> String {
    let text = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    if text.len() <= STORED_VALUE_MAX {
        return text;
    }
    let end = text
        .char_indices()
        .nth(1000)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    serde_json::json!({"truncated": true, "bytes": text.len(), "preview": &text[..end]}).to_string()
}

/// The marker [`stored_json`] keeps instead of `v`, as a value; `None`
/// when `v` is kept whole. Cheap for small values: the counting stops at
/// the limit.
pub fn stored_marker(v: &Value) -> Option<Value> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            if self.0 > STORED_VALUE_MAX {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Count(0), v).err()?;
    serde_json::from_str(&stored_json(v)).ok()
}

/// `v` as JSON text, whole (see [`stored_json`] for what a store keeps of
/// a step's output).
fn json_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A stored JSON column read back: absent or unreadable text is null.
fn parse_json(text: Option<String>) -> Value {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// Whether `id` can be looked up as a run id or its start or end: the
/// backends match a part with `LIKE`, whose wildcards (`%`, `_`) and
/// escape (`\`) never occur in a run id.
fn is_run_key(id: &str) -> bool {
    !id.is_empty() && !id.contains(['%', '_', '\\'])
}

/// The run `id` names among `found` (the exact id first, then at most one
/// more that starts or ends with it), as both backends' `get_run` read it.
fn named_run(id: &str, found: Vec<RunRecord>) -> Result<RunRecord, StoreError> {
    let mut found = found.into_iter();
    match (found.next(), found.next()) {
        (None, _) => Err(StoreError::NotFound(id.to_string())),
        (Some(one), _) if one.id == id => Ok(one),
        (Some(one), None) => Ok(one),
        (Some(_), Some(_)) => Err(StoreError::Ambiguous(id.to_string())),
    }
}

/// The finished runs [`RunStore::prune`] deletes: those that ended before
/// this time (milliseconds since the Unix epoch).
fn prune_cutoff(older_than: Duration) -> i64 {
    now_ms().saturating_sub(older_than.as_millis().min(i64::MAX as u128) as i64)
}

/// How long an `Idempotency-Key` finds the run it started.
pub const IDEMPOTENCY_RETENTION: Duration = Duration::from_secs(24 * 3600);

impl NewRun {
    /// A queued run of `wf`, owned by this process.
    pub fn new(
        id: String,
        wf: &Workflow,
        inputs: Map<String, Value>,
        trigger: crate::engine::RunTrigger,
    ) -> Self {
        let file = std::path::absolute(&wf.source.path)
            .unwrap_or_else(|_| wf.source.path.clone())
            .to_string_lossy()
            .into_owned();
        NewRun {
            id,
            workflow: wf.meta.id.clone(),
            file,
            version: version_of(wf),
            trigger: trigger.as_str().to_string(),
            status: RunStatus::Queued,
            retry_of: None,
            pid: Some(std::process::id()),
            owner: None,
            idempotency_key: None,
            context: Value::Null,
            concurrency: concurrency_of(wf, &inputs),
            inputs,
        }
    }
}

/// A stored run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub id: String,
    pub workflow: String,
    pub file: String,
    pub version: String,
    pub trigger: String,
    pub status: RunStatus,
    pub retry_of: Option<String>,
    pub inputs: Value,
    pub outputs: Value,
    pub error: Option<String>,
    pub error_step: Option<String>,
    pub pid: Option<u32>,
    pub owner: Option<String>,
    /// Whether its owner still lives, as the store found when it read the
    /// row (None: no owner recorded; the pid decides).
    #[serde(skip)]
    pub alive: Option<bool>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub duration_ms: Option<u64>,
    /// What the run sees as `trigger` when it starts (see [`NewRun::context`]).
    #[serde(skip)]
    pub context: Value,
    /// The weight of the deaths of processes while they ran it (see
    /// [`death`]), counting a death the store has just found (its owner
    /// gone while it ran): at [`MAX_DEATHS`] it is not resumed again.
    #[serde(skip)]
    pub deaths: u32,
}

impl RunRecord {
    /// A queued or running run whose process is gone: it will never finish
    /// by itself (a server resumes such runs; see [`resume_run`]).
    pub fn is_interrupted(&self) -> bool {
        matches!(self.status, RunStatus::Queued | RunStatus::Running)
            && !self
                .alive
                .unwrap_or_else(|| self.pid.is_some_and(process_alive))
    }

    /// The status as people should read it (`interrupted` for a run whose
    /// process is gone).
    pub fn shown_status(&self) -> &'static str {
        if self.is_interrupted() {
            "interrupted"
        } else {
            self.status.as_str()
        }
    }
}

/// One finished (or skipped) step of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRow {
    pub step_id: String,
    pub name: String,
    pub depth: usize,
    /// 1-based index of the top-level step this one is (or is inside of).
    pub top_index: usize,
    pub status: StepStatus,
    pub attempts: u32,
    /// Milliseconds since the Unix epoch.
    pub started_at: i64,
    pub duration_ms: u64,
    pub output: Value,
    pub error: Option<String>,
    /// Copied from the run this one retries, not run again.
    pub reused: bool,
    /// An action's inputs as it was last called (bounded; see `StepFinished`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Value>,
    /// What its model calls spent (an agent step's), when it made any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::engine::Spend>,
}

impl StepRow {
    /// What a run's model calls spent: its steps' usage summed (steps a
    /// retry copied were spent by the run it retries); None: no calls.
    pub fn spent(steps: &[StepRow]) -> Option<crate::engine::Spend> {
        crate::engine::Spend::total(
            steps
                .iter()
                .filter(|s| !s.reused)
                .filter_map(|s| s.usage.as_ref()),
        )
    }

    /// The loop iterations a step inside loops ran in (`[2/5]`, `[1/3][2]`),
    /// as the engine ends its name with them; None outside loops.
    pub fn iterations(&self) -> Option<&str> {
        let at = self.name.find(" [")?;
        let tail = &self.name[at + 1..];
        let inner = tail.strip_prefix('[')?.strip_suffix(']')?;
        let looks = inner
            .split("][")
            .all(|it| !it.is_empty() && it.chars().all(|c| c.is_ascii_digit() || c == '/'));
        looks.then_some(tail)
    }
}

/// Which runs [`RunStore::list_runs`] returns, newest first.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub workflow: Option<String>,
    pub status: Option<RunStatus>,
    /// What started the runs (`webhook`, `cli`, `console`, `retry`, …).
    pub trigger: Option<String>,
    /// Created at or after (milliseconds since the Unix epoch).
    pub since: Option<i64>,
    /// Created before (milliseconds since the Unix epoch).
    pub until: Option<i64>,
    /// Text its inputs, outputs or error hold (any case).
    pub text: Option<String>,
    pub limit: Option<usize>,
    /// Runs skipped first (paging).
    pub offset: usize,
}

/// How a run ended, for [`RunStore::finish_run`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunEnd {
    pub status: RunStatus,
    pub outputs: Value,
    pub error: Option<String>,
    pub error_step: Option<String>,
    pub duration_ms: u64,
    /// A waiting run's wait: recorded with the status, in one write, so an
    /// answer can only find a run that is waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::engine::WaitRequest>,
}

impl From<&RunResult> for RunEnd {
    fn from(r: &RunResult) -> Self {
        RunEnd {
            status: r.status,
            outputs: r.outputs.clone(),
            error: r.error.as_ref().map(|e| e.message.clone()),
            error_step: r.error.as_ref().and_then(|e| e.step_id.clone()),
            duration_ms: r.duration_ms,
            waiting: r.waiting.clone(),
        }
    }
}

/// One write to the store, as queued by a store's writer and as kept, one
/// JSON line each, in a run's journal (see [`journal`]). Times are taken
/// when the write is made, not when it is applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Write {
    Create {
        run: NewRun,
        at: i64,
    },
    Running {
        run_id: String,
        at: i64,
        pid: u32,
        #[serde(default)]
        owner: Option<String>,
    },
    Step {
        run_id: String,
        row: StepRow,
    },
    Checkpoint {
        run_id: String,
        checkpoint: CheckpointRow,
        /// Taken after the last step: never needed once the run's end is
        /// committed with it.
        #[serde(default)]
        last: bool,
    },
    Finish {
        run_id: String,
        end: RunEnd,
        at: i64,
    },
    /// How many times a process died while running the run (it only grows).
    Died {
        run_id: String,
        deaths: u32,
    },
    /// An agent step's reply, by its call's idempotency key.
    Reply {
        run_id: String,
        key: String,
        text: String,
    },
}

impl Write {
    /// The run this write belongs to.
    pub fn run_id(&self) -> &str {
        match self {
            Write::Create { run, .. } => &run.id,
            Write::Running { run_id, .. }
            | Write::Step { run_id, .. }
            | Write::Checkpoint { run_id, .. }
            | Write::Finish { run_id, .. }
            | Write::Died { run_id, .. }
            | Write::Reply { run_id, .. } => run_id,
        }
    }
}

/// Where runs are kept. Writes other than `create_run` are queued and applied
/// in order; their errors surface at the next [`RunStore::flush`].
pub trait RunStore: Send + Sync {
    /// Records a new run; the receiver answers once it is committed.
    fn submit_run(&self, run: NewRun) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>>;
    /// [`RunStore::submit_run`] for a caller that waits for the run's end
    /// before it tells anyone of the run: the creation need not be hurried
    /// and may share the commit of the run's first writes (or of its end).
    fn queue_run(&self, run: NewRun) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        self.submit_run(run)
    }
    /// Queues one write of a run: every write after the run's creation
    /// comes here, on every backend, through the methods below.
    fn write(&self, w: Write);
    /// The token of this process as the owner of the runs it executes
    /// (see [`owner`]), written with a run's start.
    fn owner_token(&self) -> Option<String> {
        None
    }
    fn mark_running(&self, run_id: &str) {
        self.write(Write::Running {
            run_id: run_id.to_string(),
            at: now_ms(),
            pid: std::process::id(),
            owner: self.owner_token(),
        });
    }
    fn record_step(&self, run_id: &str, row: StepRow) {
        self.write(Write::Step {
            run_id: run_id.to_string(),
            row,
        });
    }
    /// `last`: the checkpoint after the workflow's last step.
    fn save_checkpoint(&self, run_id: &str, row: CheckpointRow, last: bool) {
        self.write(Write::Checkpoint {
            run_id: run_id.to_string(),
            checkpoint: row,
            last,
        });
    }
    fn finish_run(&self, run_id: &str, end: RunEnd) {
        self.write(Write::Finish {
            run_id: run_id.to_string(),
            end,
            at: now_ms(),
        });
    }
    /// Answers once everything queued before it is committed (with the
    /// first error of a queued write since the last flush, if any).
    fn submit_flush(&self) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>>;
    /// Calls `then` once everything queued before it is committed, with
    /// the first error of a queued write since the last flush, if any (as
    /// [`RunStore::submit_flush`] answers). A store with a writer thread
    /// makes the call there, so it must be short and must not wait for
    /// the store.
    fn after_commit(&self, then: AfterCommit) {
        let mut rx = self.submit_flush();
        match rx.try_recv() {
            Ok(r) => then.call(r),
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                then.call(Err(StoreError::Closed))
            }
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {
                std::thread::spawn(move || {
                    then.call(rx.blocking_recv().unwrap_or(Err(StoreError::Closed)))
                });
            }
        }
    }
    /// [`RunStore::submit_flush`], waiting for it (not from async code).
    fn flush(&self) -> Result<(), StoreError> {
        self.submit_flush()
            .blocking_recv()
            .map_err(|_| StoreError::Closed)?
    }

    /// A run by id, or a unique start or end of it (`history` shows the
    /// end: ids begin with the time, so runs of a minute share the start).
    fn get_run(&self, id: &str) -> Result<RunRecord, StoreError>;
    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError>;
    /// How many runs `filter` matches, ignoring its limit and offset.
    fn count_runs(&self, filter: &RunFilter) -> Result<usize, StoreError>;
    /// The run's steps in the order they finished.
    fn steps_of(&self, run_id: &str) -> Result<Vec<StepRow>, StoreError>;
    /// What the model calls of `workflow`'s runs other than `except` spent
    /// in steps that started at `since` (ms) or later: their recorded
    /// usage summed (steps a retry copied are not counted again).
    fn spent_since(
        &self,
        workflow: &str,
        since: i64,
        except: &str,
    ) -> Result<crate::engine::Spend, StoreError>;
    /// The checkpoint taken before top-level step `next_step` (0-based), or
    /// the latest one when `None`.
    fn checkpoint(
        &self,
        run_id: &str,
        next_step: Option<usize>,
    ) -> Result<Option<Checkpoint>, StoreError>;
    /// Queued or running runs started by a server (`trigger` other than
    /// `cli`) whose process is gone: what a restarted server resumes.
    fn incomplete_runs(&self) -> Result<Vec<RunRecord>, StoreError>;
    /// Records that a process died `deaths` times while running `run_id`
    /// (a store whose reaper counts them itself ignores it).
    fn record_deaths(&self, run_id: &str, deaths: u32) {
        self.write(Write::Died {
            run_id: run_id.to_string(),
            deaths,
        });
    }
    /// Deletes finished runs that ended more than `older_than` ago; returns
    /// how many.
    fn prune(&self, older_than: Duration) -> Result<usize, StoreError>;

    /// Records an agent step's reply for `key` (see [`RecordedReplies`]).
    fn remember_reply(&self, run_id: &str, key: &str, text: &str) {
        self.write(Write::Reply {
            run_id: run_id.to_string(),
            key: key.to_string(),
            text: text.to_string(),
        });
    }

    /// The reply recorded for `key`, if any.
    fn recall_reply(&self, _key: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    /// Records an answer to a wait (see [`wait`]): over every process of
    /// the store, exactly one answer decides a wait; the process that
    /// records it owns the run, queued again, and resumes it.
    fn answer_wait(&self, a: AnswerIn) -> Result<Answered, StoreError>;

    /// Closes the open waits whose deadline is at or before `now` as
    /// expired, their runs queued again as this process's: their ids.
    fn expire_waits(&self, now: i64) -> Result<Vec<String>, StoreError>;

    /// Cancels a waiting run: its wait closes and it ends cancelled.
    /// False when it was not waiting.
    fn cancel_waiting(&self, run_id: &str) -> Result<bool, StoreError>;

    /// Waits, newest first.
    fn waits(&self, f: &WaitFilter) -> Result<Vec<WaitRecord>, StoreError>;

    /// Asks whichever process executes run `run_id` to pause it before its
    /// next top-level step (the request is dropped when the run stops).
    fn ask_pause(&self, run_id: &str, by: &str) -> Result<PauseAsked, StoreError>;

    /// The pauses asked and not yet taken: each run's id and when it was
    /// asked (milliseconds since 1970). Processes that execute runs look.
    fn asked_pauses(&self) -> Result<Vec<(String, i64)>, StoreError>;

    /// The run an `Idempotency-Key` started within the retention, if any.
    fn run_for_key(&self, _key: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    /// The shared store (PostgreSQL) behind this one, for the queue and
    /// the cluster: None for a store of one machine.
    fn shared(&self) -> Option<&PgStore> {
        None
    }

    /// Whether this process still holds run `run_id`, asked before each of
    /// its steps (None: a store of one machine, where nobody else takes it).
    fn lease(&self, _run_id: &str) -> Option<Arc<dyn crate::engine::Lease>> {
        None
    }

    /// [`RunStore::submit_run`], waiting for the commit (not from async code).
    fn create_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.submit_run(run)
            .blocking_recv()
            .map_err(|_| StoreError::Closed)?
    }
}

/// A new run's id: a UUID whose first bits are the time (v7), so runs,
/// their steps and checkpoints are inserted at the end of the store's
/// indexes rather than all over them (far fewer pages written per commit).
/// Its last characters are random: [`short_id`] shows those.
/// The sum of stored step usages (`Spend` as JSON; unreadable ones skipped).
fn spend_of(texts: &[String]) -> crate::engine::Spend {
    let all: Vec<crate::engine::Spend> = texts
        .iter()
        .filter_map(|t| serde_json::from_str(t).ok())
        .collect();
    crate::engine::Spend::total(&all).unwrap_or_default()
}

/// A workflow's spend today (UTC) in a store: its daily budget's
/// [`crate::engine::DailySpend`], for run `run_id`.
pub struct StoredSpend {
    pub store: Arc<dyn RunStore>,
    pub workflow: String,
    pub run_id: String,
    pub clock: Arc<dyn marktoflow_steps::core::time::Clock>,
}

#[async_trait::async_trait]
impl crate::engine::DailySpend for StoredSpend {
    async fn today(&self) -> Result<crate::engine::Spend, String> {
        const DAY_MS: i64 = 86_400_000;
        let since = self.clock.now_ms().div_euclid(DAY_MS) * DAY_MS;
        let (store, workflow, run) = (
            self.store.clone(),
            self.workflow.clone(),
            self.run_id.clone(),
        );
        tokio::task::spawn_blocking(move || store.spent_since(&workflow, since, &run))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}

pub fn new_run_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The part of a run id people read and type: its last 8 characters (the
/// start is the time, shared by the runs of a minute).
pub fn short_id(id: &str) -> &str {
    let n = id.len();
    id.get(n.saturating_sub(8)..).unwrap_or(id)
}

/// The version of a workflow: the sha256 of what runs (its frontmatter and
/// step blocks; not its prose).
pub fn version_of(wf: &Workflow) -> String {
    wf.behaviour.clone()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// This machine's name (shown with the processes of a shared store).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Whether process `pid` exists on this machine.
pub fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    } else {
        // Without a cheap check, assume alive: never resume a live run.
        true
    }
}

pub use marktoflow_steps::core::time::parse_age;
