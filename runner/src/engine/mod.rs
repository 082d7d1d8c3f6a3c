//! Runs a workflow: steps, control flow, variables, outputs, and run events.
//!
//! The engine never prints, reads the clock for output, or touches the disk:
//! everything it does goes out as [`RunEvent`]s and the returned [`RunResult`].

mod action;
pub mod debug;
pub(crate) use action::with_env;
pub mod core_ops;
pub mod plan;

use crate::diag::{Diagnostic, Pos};
use crate::format::inputs::substitute_env;
use crate::format::model::{Backoff, OnError, Step, StepKind, Workflow};
use crate::template::{TemplateError, Templates};
use futures_util::stream::{self, StreamExt};
use marktoflow_steps::core::{action::Capabilities, signals::LogLevel};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
// tokio's clock: a test may pause and advance it.
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    Completed,
    Failed,
    Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Completed,
    Failed,
    Cancelled,
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
    },
    /// After each top-level step: enough to continue the run from the next
    /// one without running the finished steps again (see [`Engine::resume`]).
    Checkpoint(Arc<Checkpoint>),
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
fn bounded_nested(output: Value) -> Value {
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
    let mut small = Count {
        n: 0,
        limit: NESTED_OUTPUT_BYTES,
    };
    if serde_json::to_writer(&mut small, &output).is_ok() {
        return output;
    }
    let mut all = Count {
        n: 0,
        limit: usize::MAX,
    };
    let _ = serde_json::to_writer(&mut all, &output);
    let bytes = all.n;
    json!({"omitted": format!(
        "the output of a step inside a loop, branch or try block, {bytes} bytes (records keep at most {NESTED_OUTPUT_BYTES}); its loop's output and the variables hold it"
    )})
}

/// Why a run failed, and where the failing step is.
#[derive(Debug, Clone, Serialize)]
pub struct RunFailure {
    pub message: String,
    pub step_id: Option<String>,
    pub step_name: Option<String>,
    pub file: String,
    pub pos: Option<Pos>,
}

impl RunFailure {
    pub fn diagnostic(&self, wf: &Workflow) -> Diagnostic {
        let msg = match &self.step_name {
            Some(n) => format!("step `{n}` failed: {}", self.message),
            None => self.message.clone(),
        };
        Diagnostic::error(&wf.source, self.pos, msg)
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
}

/// Loads sub-workflows (`workflow: path.md` steps): the engine itself never
/// reads files.
pub trait WorkflowLoader: Send + Sync {
    fn load(&self, path: &Path) -> Result<Workflow, Vec<Diagnostic>>;
}

/// Fuel for one `core.template` render (about one unit per template instruction).
const CORE_TEMPLATE_FUEL: u64 = 2_000_000;

/// How deep sub-workflows may nest.
pub const MAX_WORKFLOW_DEPTH: usize = 16;

/// How a run is set up.
pub struct RunConfig {
    pub run_id: String,
    pub caps: Capabilities,
    pub events: EventSink,
    /// None: `workflow:` steps fail with a clear message.
    pub loader: Option<Arc<dyn WorkflowLoader>>,
    /// The workflows that called this one (outermost first), to find cycles.
    pub callers: Vec<PathBuf>,
    /// Asked before each step (`marktoflow debug`); None: never pauses.
    pub debugger: Option<Arc<dyn debug::Debugger>>,
    /// What started the run (`{type: webhook, method, headers, body, …}`),
    /// seen as the variable `trigger` unless the run already has one (a
    /// resumed run keeps its own). Null: none.
    pub trigger: Value,
    /// Asked before each step: whether this process still holds the run
    /// (a worker of a shared store whose lease passed to another worker
    /// must not go on). None: always.
    pub lease: Option<Arc<dyn Lease>>,
}

/// Whether this process may go on running a run (see [`RunConfig::lease`]).
pub trait Lease: Send + Sync {
    fn held(&self) -> bool;
}

/// Why a run stopped before `step`, if it must: cancelled, or its lease
/// lost.
fn stop_before(cfg: &RunConfig, step: &Step) -> Option<Failure> {
    let message = if cfg.caps.cancel.is_cancelled() {
        "run cancelled"
    } else if cfg.lease.as_ref().is_some_and(|l| !l.held()) {
        "stopped: the run's lease passed to another worker, which continues it"
    } else {
        return None;
    };
    Some(Failure {
        message: message.into(),
        step_id: step.id.clone(),
        step_name: step.display_name().to_string(),
        pos: step.pos,
        cancelled: true,
    })
}

impl RunConfig {
    /// Sends `kind` to the run's sink, stamped by the run's clock.
    fn emit(&self, kind: RunEvent) {
        (self.events)(&Event::now(self.caps.clock.as_ref(), kind))
    }
}

pub struct Engine {
    templates: Arc<Templates>,
    /// For `core.template`, whose template text may come from data.
    fueled: std::sync::OnceLock<Templates>,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

struct Failure {
    message: String,
    step_id: String,
    step_name: String,
    pos: Pos,
    /// An action error that was reported as a timeout or cancellation.
    cancelled: bool,
}

#[derive(Clone)]
struct RunState {
    inputs: Value,
    variables: Map<String, Value>,
    /// `steps.<id>` as templates and conditions see it.
    meta: Map<String, Value>,
    set_outputs: Option<Value>,
    records: Vec<StepRecord>,
    last_top_output: Option<Value>,
    env: Value,
    /// What `now()` answers.
    clock: Arc<dyn marktoflow_steps::core::time::Clock>,
    /// The workflow's tools, `${VAR}`s filled in (an agent step may offer
    /// its MCP servers to the model).
    tools: Arc<Vec<marktoflow_steps::ToolConfig>>,
    /// The `trigger` variable the run was started with: not an output.
    trigger: Value,
    /// Set by `workflow.exit` (its output): the run ends, successfully.
    exit: Option<Value>,
}

impl Engine {
    pub fn new() -> Self {
        Engine {
            templates: Arc::new(Templates::new()),
            fueled: std::sync::OnceLock::new(),
        }
    }

    pub fn templates(&self) -> &Templates {
        &self.templates
    }

    /// Runs `wf` with already-resolved inputs.
    pub async fn run(
        &self,
        wf: &Workflow,
        inputs: Map<String, Value>,
        cfg: RunConfig,
    ) -> RunResult {
        self.resume(wf, inputs, cfg, Checkpoint::default()).await
    }

    /// Continues a run from `from`: top-level steps before `from.next_step`
    /// are not run again; their variables and outputs come from the checkpoint.
    /// `RunResult::steps` holds only the steps run now.
    pub async fn resume(
        &self,
        wf: &Workflow,
        inputs: Map<String, Value>,
        cfg: RunConfig,
        from: Checkpoint,
    ) -> RunResult {
        let started = Instant::now();
        let emit = |e: RunEvent| cfg.emit(e);
        emit(RunEvent::RunStarted {
            run_id: cfg.run_id.clone(),
            workflow: wf.meta.id.clone(),
            total_steps: wf.steps.len(),
        });
        let env: Map<String, Value> = cfg
            .caps
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let start = from.next_step;
        let mut st = RunState {
            inputs: Value::Object(inputs),
            variables: from.variables,
            meta: from.steps,
            set_outputs: from.set_outputs,
            records: Vec::new(),
            last_top_output: from.last_output,
            env: Value::Object(env),
            clock: cfg.caps.clock.clone(),
            tools: Arc::new(
                wf.tools
                    .iter()
                    .map(|t| with_env(t, &cfg.caps.env))
                    .collect(),
            ),
            trigger: Value::Null,
            exit: None,
        };
        if !cfg.trigger.is_null() && !st.variables.contains_key("trigger") {
            st.variables
                .insert("trigger".to_string(), cfg.trigger.clone());
        }
        st.trigger = st.variables.get("trigger").cloned().unwrap_or_default();
        let body = async {
            if start > wf.steps.len() {
                return Err(Failure {
                    message: format!(
                        "cannot resume at step {} of a workflow with {} steps",
                        start + 1,
                        wf.steps.len()
                    ),
                    step_id: String::new(),
                    step_name: String::new(),
                    pos: Pos { line: 1, col: 1 },
                    cancelled: false,
                });
            }
            self.exec_top(wf, start, &mut st, &cfg).await
        };
        let outcome = match wf.timeout {
            Some(t) => tokio::select! {
                r = body => r,
                _ = tokio::time::sleep(t) => {
                    cfg.caps.cancel.cancel();
                    Err(Failure {
                        message: format!("workflow timed out after {}", human_duration(t)),
                        step_id: String::new(),
                        step_name: String::new(),
                        pos: Pos { line: 1, col: 1 },
                        // A timeout is a failure, not an interruption.
                        cancelled: false,
                    })
                }
            },
            None => body.await,
        };
        // The same for the whole run: a template may have held it past the end.
        let outcome = match (wf.timeout, outcome) {
            (Some(t), Ok(_)) if started.elapsed() > t => Err(Failure {
                message: format!("workflow timed out after {}", human_duration(t)),
                step_id: String::new(),
                step_name: String::new(),
                pos: Pos { line: 1, col: 1 },
                cancelled: false,
            }),
            (_, o) => o,
        };
        let (status, error) = match outcome {
            Ok(_) => (RunStatus::Completed, None),
            Err(f) if f.cancelled && st.exit.is_some() => (RunStatus::Completed, None),
            Err(f) => (
                if f.cancelled && cfg.caps.cancel.is_cancelled() {
                    RunStatus::Cancelled
                } else {
                    RunStatus::Failed
                },
                Some(RunFailure {
                    message: f.message,
                    step_id: (!f.step_id.is_empty()).then_some(f.step_id),
                    step_name: (!f.step_name.is_empty()).then_some(f.step_name),
                    file: wf.source.name.clone(),
                    pos: Some(f.pos),
                }),
            ),
        };
        let outputs = workflow_outputs(wf, &st);
        let duration_ms = started.elapsed().as_millis() as u64;
        emit(RunEvent::RunFinished {
            status,
            duration_ms,
        });
        RunResult {
            run_id: cfg.run_id.clone(),
            workflow: wf.meta.id.clone(),
            status,
            outputs,
            steps: st.records,
            error,
            duration_ms,
            response: st.exit.as_ref().and_then(exit_response),
        }
    }

    /// The top-level steps from `start`, with a checkpoint after each one.
    async fn exec_top(
        &self,
        wf: &Workflow,
        start: usize,
        st: &mut RunState,
        cfg: &RunConfig,
    ) -> Result<(), Failure> {
        for (i, step) in wf.steps.iter().enumerate().skip(start) {
            // As in `exec_list`, with the index counted from the whole list.
            if let Some(stop) = stop_before(cfg, step) {
                return Err(stop);
            }
            if let Some(v) = self.exec_step(wf, step, st, cfg, 0, i + 1).await? {
                st.last_top_output = Some(v);
            }
            cfg.emit(RunEvent::Checkpoint(Arc::new(Checkpoint {
                next_step: i + 1,
                variables: st.variables.clone(),
                steps: st.meta.clone(),
                set_outputs: st.set_outputs.clone(),
                last_output: st.last_top_output.clone(),
            })));
        }
        Ok(())
    }

    fn exec_list<'a>(
        &'a self,
        wf: &'a Workflow,
        steps: &'a [Step],
        st: &'a mut RunState,
        cfg: &'a RunConfig,
        depth: usize,
        top: bool,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Value>, Failure>> + Send + 'a>> {
        Box::pin(async move {
            let mut outputs = Vec::new();
            for (i, step) in steps.iter().enumerate() {
                if let Some(stop) = stop_before(cfg, step) {
                    return Err(stop);
                }
                let index = if top { i + 1 } else { 0 };
                let out = self.exec_step(wf, step, st, cfg, depth, index).await?;
                if let Some(v) = out {
                    if top {
                        st.last_top_output = Some(v.clone());
                    }
                    if step.output_variable.is_some() {
                        outputs.push(v);
                    }
                }
            }
            Ok(outputs)
        })
    }

    /// Runs one step; `Ok(None)` when it was skipped or failed with `continue`.
    async fn exec_step(
        &self,
        wf: &Workflow,
        step: &Step,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
        index: usize,
    ) -> Result<Option<Value>, Failure> {
        if let Some(debugger) = &cfg.debugger {
            if self.pause(debugger.as_ref(), step, st, depth) == debug::Resume::Stop {
                cfg.caps.cancel.cancel();
                return Err(Failure {
                    cancelled: true,
                    ..self.fail(step, step.pos, "stopped in the debugger")
                });
            }
        }
        let started = Instant::now();
        let emit = |e: RunEvent| cfg.emit(e);
        let detail = match &step.kind {
            StepKind::Action { action, .. } => Some(action.clone()),
            _ => None,
        };
        emit(RunEvent::StepStarted {
            id: step.id.clone(),
            name: step.display_name().to_string(),
            depth,
            index,
            kind: step.kind.label(),
            detail,
        });
        let finish = |st: &mut RunState,
                      status: StepStatus,
                      output: Value,
                      error: Option<String>,
                      retries: u32| {
            let duration_ms = started.elapsed().as_millis() as u64;
            st.meta.insert(
                step.id.clone(),
                json!({"status": status, "output": output, "error": error, "retries": retries, "duration_ms": duration_ms}),
            );
            let output = if depth > 0 {
                bounded_nested(output)
            } else {
                output
            };
            emit(RunEvent::StepFinished {
                id: step.id.clone(),
                name: step.display_name().to_string(),
                depth,
                status,
                duration_ms,
                output: output.clone(),
                error: error.clone(),
            });
            st.records.push(StepRecord {
                id: step.id.clone(),
                name: step.display_name().to_string(),
                status,
                output,
                error,
                duration_ms,
                retries,
                depth,
            });
        };

        // `conditions:` all must hold, else the step is skipped.
        for (i, cond) in step.conditions.iter().enumerate() {
            let ok = self.condition(step, &["conditions".into(), i.to_string()], cond, st);
            match ok {
                Ok(true) => {}
                Ok(false) => {
                    finish(st, StepStatus::Skipped, Value::Null, None, 0);
                    return Ok(None);
                }
                Err(f) => {
                    finish(
                        st,
                        StepStatus::Failed,
                        Value::Null,
                        Some(f.message.clone()),
                        0,
                    );
                    return Err(f);
                }
            }
        }

        // Actions enforce their own timeout (it reaches scripts and providers);
        // every other kind is bounded here.
        let (result, retries) = match (step.timeout, &step.kind) {
            (Some(t), kind) if !matches!(kind, StepKind::Action { .. }) => {
                match tokio::time::timeout(t, self.exec_kind(wf, step, st, cfg, depth)).await {
                    Ok(r) => r,
                    Err(_) => (
                        Err(self.fail(
                            step,
                            step.field_pos(&["timeout"]),
                            format!("timed out after {}", human_duration(t)),
                        )),
                        0,
                    ),
                }
            }
            _ => self.exec_kind(wf, step, st, cfg, depth).await,
        };
        // Rendering cannot be interrupted: a step that went past its timeout
        // inside a template (fuel bounds how far) still timed out.
        let result = match (step.timeout, result) {
            (Some(t), Ok(_))
                if !matches!(step.kind, StepKind::Action { .. }) && started.elapsed() > t =>
            {
                Err(self.fail(
                    step,
                    step.field_pos(&["timeout"]),
                    format!("timed out after {}", human_duration(t)),
                ))
            }
            (_, r) => r,
        };
        match result {
            Ok(done) => {
                let (status, output) = match done {
                    Done::Ran(v) => (StepStatus::Completed, v),
                    Done::Skipped(v) => (StepStatus::Skipped, v),
                };
                // Unlike the peer, a skipped container still sets its
                // (empty) output, so later templates can rely on it.
                if let Some(var) = &step.output_variable {
                    st.variables.insert(var.clone(), output.clone());
                }
                finish(st, status, output.clone(), None, retries);
                if st.exit.is_some() {
                    // `workflow.exit`: unwind to the top, nothing after it runs.
                    return Err(Failure {
                        cancelled: true,
                        ..self.fail(step, step.pos, "the workflow exited")
                    });
                }
                Ok(Some(output))
            }
            // The steps around a `workflow.exit` completed.
            Err(f) if f.cancelled && st.exit.is_some() => {
                finish(st, StepStatus::Completed, Value::Null, None, retries);
                Err(f)
            }
            Err(f) => {
                finish(
                    st,
                    StepStatus::Failed,
                    Value::Null,
                    Some(f.message.clone()),
                    retries,
                );
                if step.on_error.action == OnError::Continue && !f.cancelled {
                    Ok(None)
                } else {
                    Err(f)
                }
            }
        }
    }

    fn fail(&self, step: &Step, pos: Pos, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            step_id: step.id.clone(),
            step_name: step.display_name().to_string(),
            pos,
            cancelled: false,
        }
    }

    fn context(&self, st: &RunState) -> minijinja::Value {
        Templates::clocked(
            Templates::context(
                &st.inputs,
                &st.variables,
                &Value::Object(st.meta.clone()),
                &st.env,
            ),
            st.clock.clone(),
        )
    }

    fn template_failure(&self, step: &Step, base: &[String], e: TemplateError) -> Failure {
        let mut path = base.to_vec();
        path.extend(e.path.iter().cloned());
        let pos = match e.line {
            Some(line) => step.string_pos(&path, line, e.col.unwrap_or(1)),
            None => step.spans.pos(&{
                let mut p = step.path.clone();
                p.extend(path.iter().cloned());
                p
            }),
        };
        self.fail(step, pos, format!("template error: {}", e.message))
    }

    fn condition(
        &self,
        step: &Step,
        path: &[String],
        cond: &str,
        st: &RunState,
    ) -> Result<bool, Failure> {
        let ctx = self.context(st);
        self.templates
            .eval_condition(cond, &ctx)
            .map_err(|e| self.template_failure(step, path, e))
    }

    /// Asks `debugger` before `step` runs, with its inputs rendered now.
    fn pause(
        &self,
        debugger: &dyn debug::Debugger,
        step: &Step,
        st: &mut RunState,
        depth: usize,
    ) -> debug::Resume {
        let raw_inputs = match &step.kind {
            StepKind::Action { inputs, .. } => Some(inputs),
            _ => None,
        };
        let (run_inputs, meta, env, clock) = (
            st.inputs.clone(),
            Value::Object(st.meta.clone()),
            st.env.clone(),
            st.clock.clone(),
        );
        let eval = |v: &Value, vars: &Map<String, Value>| {
            let ctx = Templates::clocked(
                Templates::context(&run_inputs, vars, &meta, &env),
                clock.clone(),
            );
            self.templates.render_value(v, &ctx).map_err(|e| e.message)
        };
        debugger.before_step(debug::Pause {
            step,
            depth,
            variables: &mut st.variables,
            raw_inputs,
            eval: &eval,
        })
    }

    fn render(
        &self,
        step: &Step,
        path: &[&str],
        v: &Value,
        st: &RunState,
    ) -> Result<Value, Failure> {
        let ctx = self.context(st);
        let base: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        self.templates
            .render_value(v, &ctx)
            .map_err(|e| self.template_failure(step, &base, e))
    }

    fn exec_kind<'a>(
        &'a self,
        wf: &'a Workflow,
        step: &'a Step,
        st: &'a mut RunState,
        cfg: &'a RunConfig,
        depth: usize,
    ) -> KindFuture<'a> {
        Box::pin(async move {
            match &step.kind {
                StepKind::Action { .. } => ran(self.exec_action(step, st, cfg, depth).await),
                StepKind::If {
                    condition,
                    then,
                    otherwise,
                } => {
                    let r = async {
                        let take = self.condition(step, &["condition".into()], condition, st)?;
                        let branch = if take { then } else { otherwise };
                        let outs = self
                            .exec_list(wf, branch, st, cfg, depth + 1, false)
                            .await?;
                        let out =
                            json!({"branch": if take { "then" } else { "else" }, "outputs": outs});
                        // No branch to run: skipped, as in the peer.
                        Ok(if branch.is_empty() {
                            Done::Skipped(out)
                        } else {
                            Done::Ran(out)
                        })
                    }
                    .await;
                    (r, 0)
                }
                StepKind::Switch {
                    expression,
                    cases,
                    default,
                } => {
                    let r = async {
                        let v = self.render(
                            step,
                            &["expression"],
                            &Value::String(expression.clone()),
                            st,
                        )?;
                        let key = match &v {
                            Value::String(s) => s.clone(),
                            Value::Null => String::new(),
                            other => other.to_string(),
                        };
                        let branch = cases
                            .iter()
                            .find(|(k, _)| *k == key)
                            .map(|(_, s)| s)
                            .unwrap_or(default);
                        let outs = self
                            .exec_list(wf, branch, st, cfg, depth + 1, false)
                            .await?;
                        let out = json!({"case": key, "outputs": outs});
                        Ok(if branch.is_empty() {
                            Done::Skipped(out)
                        } else {
                            Done::Ran(out)
                        })
                    }
                    .await;
                    (r, 0)
                }
                StepKind::ForEach {
                    items,
                    item_variable,
                    index_variable,
                    steps,
                    max_concurrent,
                } => {
                    let names = LoopNames {
                        item: item_variable,
                        index: index_variable.as_deref(),
                    };
                    let r = self
                        .exec_for_each(
                            wf,
                            step,
                            items,
                            names,
                            steps,
                            *max_concurrent,
                            st,
                            cfg,
                            depth,
                        )
                        .await;
                    // Every item gives an entry: empty means no items, skipped.
                    let r = r.map(|out| match out.as_array() {
                        Some(a) if a.is_empty() => Done::Skipped(out),
                        _ => Done::Ran(out),
                    });
                    (r, 0)
                }
                StepKind::While {
                    condition,
                    max_iterations,
                    steps,
                    initial,
                } => {
                    let r = async {
                        for (name, v) in initial {
                            let v = self.render(step, &["variables", name], v, st)?;
                            st.variables.insert(name.clone(), v);
                        }
                        let mut n = 0u64;
                        while self.condition(step, &["condition".into()], condition, st)? {
                            if n >= *max_iterations {
                                return Err(self.fail(
                                    step,
                                    step.field_pos(&["condition"]),
                                    format!("the loop was still running after `max_iterations` ({max_iterations}) passes"),
                                ));
                            }
                            self.exec_list(wf, steps, st, cfg, depth + 1, false).await?;
                            n += 1;
                        }
                        Ok(json!({"iterations": n}))
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Try {
                    body,
                    catch,
                    finally,
                } => {
                    let r = async {
                        let res = self.exec_list(wf, body, st, cfg, depth + 1, false).await;
                        let mut outcome = match res {
                            Ok(o) => Ok(json!({"outputs": o})),
                            Err(f) if f.cancelled => Err(f),
                            Err(f) if !catch.is_empty() => {
                                let saved = st.variables.get("error").cloned();
                                st.variables.insert(
                                    "error".into(),
                                    json!({"message": f.message, "step": f.step_id}),
                                );
                                let c = self.exec_list(wf, catch, st, cfg, depth + 1, false).await;
                                restore(st, vec![("error".into(), saved)]);
                                c.map(|o| json!({"caught": f.message, "outputs": o}))
                            }
                            Err(f) => Err(f),
                        };
                        if !finally.is_empty() {
                            if let Err(f) =
                                self.exec_list(wf, finally, st, cfg, depth + 1, false).await
                            {
                                outcome = Err(f);
                            }
                        }
                        outcome
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Wait { duration } => {
                    let r = async {
                        let d = self.render(step, &["duration"], duration, st)?;
                        let d = marktoflow_steps::builtin::parse_duration(&d)
                            .map_err(|e| self.fail(step, step.field_pos(&["duration"]), e))?;
                        tokio::select! {
                            _ = tokio::time::sleep(d) => {
                                let ms = d.as_millis() as u64;
                                Ok(json!({"waited": ms, "waited_ms": ms}))
                            }
                            _ = cfg.caps.cancel.cancelled() => Err(Failure { cancelled: true, ..self.fail(step, step.pos, "cancelled") }),
                        }
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Map {
                    items,
                    item_variable,
                    expression,
                } => {
                    let r = async {
                        let items = self.items(step, items, st)?;
                        let base = self.context(st);
                        let mut out = Vec::with_capacity(items.len());
                        for (i, item) in items.into_iter().enumerate() {
                            let ctx = Templates::with_locals(
                                &base,
                                &locals(&[(item_variable, item), ("index", json!(i))]),
                            );
                            let v = self.templates.render_value(expression, &ctx).map_err(|e| {
                                self.template_failure(step, &["expression".into()], e)
                            })?;
                            out.push(v);
                        }
                        Ok(Value::Array(out))
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Filter {
                    items,
                    item_variable,
                    condition,
                } => {
                    let r =
                        async {
                            let items = self.items(step, items, st)?;
                            let base = self.context(st);
                            let mut out = Vec::new();
                            for (i, item) in items.into_iter().enumerate() {
                                let ctx = Templates::with_locals(
                                    &base,
                                    &locals(&[(item_variable, item.clone()), ("index", json!(i))]),
                                );
                                let keep = self.templates.eval_condition(condition, &ctx).map_err(
                                    |e| self.template_failure(step, &["condition".into()], e),
                                )?;
                                if keep {
                                    out.push(item);
                                }
                            }
                            Ok(Value::Array(out))
                        }
                        .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Reduce {
                    items,
                    item_variable,
                    accumulator_variable,
                    initial_value,
                    expression,
                } => {
                    let r = async {
                        let items = self.items(step, items, st)?;
                        let mut acc = self.render(step, &["initial_value"], initial_value, st)?;
                        let base = self.context(st);
                        for (i, item) in items.into_iter().enumerate() {
                            let ctx = Templates::with_locals(
                                &base,
                                &locals(&[
                                    (item_variable, item),
                                    (accumulator_variable, acc),
                                    ("index", json!(i)),
                                ]),
                            );
                            acc = self.templates.render_value(expression, &ctx).map_err(|e| {
                                self.template_failure(step, &["expression".into()], e)
                            })?;
                        }
                        Ok(acc)
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Parallel {
                    branches,
                    max_concurrent,
                } => ran((
                    self.exec_parallel(wf, step, branches, *max_concurrent, st, cfg, depth)
                        .await,
                    0,
                )),
                StepKind::SubWorkflow { path, inputs } => ran((
                    self.exec_subworkflow(wf, step, path, inputs, st, cfg, depth)
                        .await,
                    0,
                )),
            }
        })
    }

    /// `core.transform` / `core.template`: template fields stay as written,
    /// the rest is rendered, then [`crate::engine::core_ops`] evaluates per item.
    fn core_op(
        &self,
        step: &Step,
        method: &str,
        inputs: &Value,
        st: &RunState,
    ) -> Result<Value, Failure> {
        let raw_names = crate::engine::core_ops::raw_fields(method);
        let empty = Map::new();
        let all = inputs.as_object().unwrap_or(&empty);
        let (raw, others): (Map<String, Value>, Map<String, Value>) = all
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .partition(|(k, _)| raw_names.contains(&k.as_str()));
        let rendered = match self.render(step, &["inputs"], &Value::Object(others), st)? {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let base = self.context(st);
        let result = match method {
            "transform" => {
                crate::engine::core_ops::transform(&self.templates, &base, &rendered, &raw)
            }
            _ => {
                let fueled = self
                    .fueled
                    .get_or_init(|| Templates::with_fuel(CORE_TEMPLATE_FUEL));
                crate::engine::core_ops::template(&self.templates, fueled, &base, &rendered, &raw)
            }
        };
        result.map_err(|e| match e {
            crate::engine::core_ops::OpError::Input { field, message } => {
                let pos = step.field_pos(&["inputs", field]);
                self.fail(step, pos, format!("`core.{method}`: {message}"))
            }
            crate::engine::core_ops::OpError::Template { field, error } => {
                self.template_failure(step, &["inputs".into(), field.into()], error)
            }
        })
    }
}

impl Engine {
    /// `items` rendered, which must give a list.
    fn items(&self, step: &Step, items: &Value, st: &RunState) -> Result<Vec<Value>, Failure> {
        match self.render(step, &["items"], items, st)? {
            Value::Array(a) => Ok(a),
            Value::Null => Ok(Vec::new()),
            other => Err(self.fail(
                step,
                step.field_pos(&["items"]),
                format!(
                    "`items` must be a list, got {}",
                    marktoflow_steps::core::error::type_name(&other)
                ),
            )),
        }
    }

    /// Runs the branches concurrently (at most `max` at a time), each on its
    /// own copy of the variables. Afterwards `<branch id>` holds the variables
    /// that branch set, so `{{ left.value }}` reaches them.
    #[allow(clippy::too_many_arguments)]
    async fn exec_parallel(
        &self,
        wf: &Workflow,
        step: &Step,
        branches: &[crate::format::model::Branch],
        max: usize,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<Value, Failure> {
        let before = st.variables.clone();
        let mut fork = st.clone();
        fork.records = Vec::new();
        // Collected first: a lazy `map` here trips the compiler's Send check.
        let mut tasks = Vec::with_capacity(branches.len());
        for b in branches {
            let mut bst = fork.clone();
            tasks.push(async move {
                let r = self
                    .exec_list(wf, &b.steps, &mut bst, cfg, depth + 1, false)
                    .await;
                (b, r, bst)
            });
        }
        let results: Vec<_> = stream::iter(tasks).buffered(max.max(1)).collect().await;
        let mut out = Map::new();
        let mut first_failure: Option<(String, Failure)> = None;
        for (b, r, bst) in results {
            st.records.extend(bst.records);
            for (k, v) in bst.meta {
                st.meta.insert(k, v);
            }
            if bst.set_outputs.is_some() {
                st.set_outputs = bst.set_outputs;
            }
            if bst.exit.is_some() {
                st.exit = bst.exit;
            }
            match r {
                Ok(_) => {
                    let set: Map<String, Value> = bst
                        .variables
                        .into_iter()
                        .filter(|(k, v)| before.get(k) != Some(v))
                        .collect();
                    st.variables
                        .insert(b.id.clone(), Value::Object(set.clone()));
                    out.insert(
                        b.id.clone(),
                        json!({"status": "completed", "variables": set}),
                    );
                }
                Err(f) => {
                    out.insert(
                        b.id.clone(),
                        json!({"status": "failed", "error": f.message}),
                    );
                    if first_failure.is_none() {
                        first_failure = Some((b.id.clone(), f));
                    }
                }
            }
        }
        match first_failure {
            // With `on_error: continue` the step succeeds with what the
            // successful branches produced.
            Some((id, f)) if step.on_error.action != OnError::Continue || f.cancelled => {
                Err(Failure {
                    message: format!("branch `{id}` failed: {}", f.message),
                    ..f
                })
            }
            _ => Ok(Value::Object(out)),
        }
    }

    /// Runs another workflow file with its inputs checked and defaulted like
    /// a top-level run; its outputs are this step's output.
    #[allow(clippy::too_many_arguments)]
    async fn exec_subworkflow(
        &self,
        wf: &Workflow,
        step: &Step,
        path: &str,
        inputs: &Value,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<Value, Failure> {
        let at = step.field_pos(&["workflow"]);
        let Some(loader) = cfg.loader.clone() else {
            return Err(self.fail(step, at, "sub-workflows cannot be loaded here"));
        };
        let rendered = self.render(step, &["inputs"], inputs, st)?;
        let here =
            marktoflow_steps::core::sandbox::normalize(&cfg.caps.sandbox.cwd.join(&wf.source.path));
        let target = marktoflow_steps::core::sandbox::normalize(
            &here.parent().unwrap_or(Path::new("/")).join(path),
        );
        let mut chain = cfg.callers.clone();
        chain.push(here);
        if chain.contains(&target) {
            let names: Vec<String> = chain
                .iter()
                .skip_while(|p| **p != target)
                .chain(std::iter::once(&target))
                .map(|p| {
                    p.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                })
                .collect();
            return Err(self.fail(
                step,
                at,
                format!("sub-workflow cycle: {}", names.join(" → ")),
            ));
        }
        if chain.len() >= MAX_WORKFLOW_DEPTH {
            return Err(self.fail(
                step,
                at,
                format!("sub-workflows nest deeper than {MAX_WORKFLOW_DEPTH} levels"),
            ));
        }
        // Loaded by the path as the user sees it (relative to the caller's file).
        let shown = marktoflow_steps::core::sandbox::normalize(
            &wf.source.path.parent().unwrap_or(Path::new("")).join(path),
        );
        let child = loader.load(&shown).map_err(|diags| {
            let first = diags.first().map(|d| d.render()).unwrap_or_default();
            self.fail(
                step,
                at,
                format!("cannot load sub-workflow `{path}`:\n{first}"),
            )
        })?;
        let supplied = match rendered {
            Value::Object(m) => m
                .into_iter()
                .map(|(k, v)| (k, crate::format::inputs::Supplied::Json(v)))
                .collect(),
            _ => Vec::new(),
        };
        let child_inputs = crate::format::inputs::resolve(&child, supplied, &cfg.caps.env)
            .map_err(|errs| {
                let list: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                self.fail(
                    step,
                    step.field_pos(&["inputs"]),
                    format!("sub-workflow `{path}`: {}", list.join("; ")),
                )
            })?;
        let events = cfg.events.clone();
        let shift = depth + 1;
        // The child's steps show nested under this step; its run start and
        // end are this step's.
        let child_events: EventSink = Arc::new(move |e: &Event| match &e.kind {
            RunEvent::RunStarted { .. }
            | RunEvent::RunFinished { .. }
            | RunEvent::Checkpoint(_) => {}
            RunEvent::StepStarted { .. } | RunEvent::StepFinished { .. } => {
                let mut e = e.clone();
                if let RunEvent::StepStarted { depth, index, .. } = &mut e.kind {
                    *depth += shift;
                    *index = 0;
                }
                if let RunEvent::StepFinished { depth, .. } = &mut e.kind {
                    *depth += shift;
                }
                events(&e)
            }
            _ => events(e),
        });
        let child_cfg = RunConfig {
            run_id: format!("{}/{}", cfg.run_id, step.id),
            caps: cfg.caps.clone(),
            events: child_events,
            loader: Some(loader),
            callers: chain,
            debugger: cfg.debugger.clone(),
            // A sub-workflow is called with inputs, not by a request.
            trigger: Value::Null,
            lease: cfg.lease.clone(),
        };
        let result = Box::pin(self.run(&child, child_inputs, child_cfg)).await;
        match result.status {
            RunStatus::Completed => Ok(result.outputs),
            status => {
                let why = result.error.map(|f| {
                    let at = f
                        .pos
                        .map(|p| format!(" ({}:{}:{})", f.file, p.line, p.col))
                        .unwrap_or_default();
                    match f.step_name {
                        Some(n) => format!("step `{n}` failed: {}{at}", f.message),
                        None => format!("{}{at}", f.message),
                    }
                });
                Err(Failure {
                    cancelled: status == RunStatus::Cancelled,
                    ..self.fail(
                        step,
                        at,
                        format!("sub-workflow `{path}` failed: {}", why.unwrap_or_default()),
                    )
                })
            }
        }
    }
}

/// The variables a `for_each` sets per item.
struct LoopNames<'a> {
    item: &'a str,
    index: Option<&'a str>,
}

impl LoopNames<'_> {
    fn keys(&self) -> Vec<String> {
        let mut k = vec![self.item.to_string(), "loop".to_string()];
        k.extend(self.index.map(str::to_string));
        k
    }

    fn set(&self, st: &mut RunState, item: Value, i: usize, n: usize) {
        st.variables.insert(self.item.to_string(), item);
        if let Some(iv) = self.index {
            st.variables.insert(iv.to_string(), json!(i));
        }
        st.variables.insert(
            "loop".into(),
            json!({"index": i, "index1": i + 1, "first": i == 0, "last": i + 1 == n, "length": n}),
        );
    }
}

impl Engine {
    /// Runs the steps once per item: in order, or up to `max` items at once,
    /// each on its own copy of the variables (merged back in item order).
    /// With `on_error: continue` a failing item is recorded and the loop goes on.
    #[allow(clippy::too_many_arguments)]
    async fn exec_for_each(
        &self,
        wf: &Workflow,
        step: &Step,
        items: &Value,
        names: LoopNames<'_>,
        steps: &[Step],
        max: usize,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<Value, Failure> {
        let items = self.items(step, items, st)?;
        let n = items.len();
        let keep_going = step.on_error.action == OnError::Continue;
        let saved: Vec<(String, Option<Value>)> = names
            .keys()
            .into_iter()
            .map(|k| {
                let v = st.variables.get(&k).cloned();
                (k, v)
            })
            .collect();
        let mut results = Vec::with_capacity(n);
        if max <= 1 {
            for (i, item) in items.into_iter().enumerate() {
                names.set(st, item, i, n);
                match self.exec_list(wf, steps, st, cfg, depth + 1, false).await {
                    Ok(o) => results.push(Value::Array(o)),
                    Err(f) if keep_going && !f.cancelled => {
                        results.push(json!({"error": f.message}))
                    }
                    Err(f) => {
                        restore(st, saved);
                        return Err(f);
                    }
                }
            }
            restore(st, saved);
            return Ok(Value::Array(results));
        }
        let before = st.variables.clone();
        let mut fork = st.clone();
        fork.records = Vec::new();
        let mut tasks = Vec::with_capacity(n);
        for (i, item) in items.into_iter().enumerate() {
            let mut ist = fork.clone();
            names.set(&mut ist, item, i, n);
            tasks.push(async move {
                let r = self
                    .exec_list(wf, steps, &mut ist, cfg, depth + 1, false)
                    .await;
                (r, ist)
            });
        }
        let done: Vec<_> = stream::iter(tasks).buffered(max).collect().await;
        let loop_keys = names.keys();
        let mut failure = None;
        for (r, ist) in done {
            st.records.extend(ist.records);
            for (k, v) in ist.meta {
                st.meta.insert(k, v);
            }
            if ist.set_outputs.is_some() {
                st.set_outputs = ist.set_outputs;
            }
            if ist.exit.is_some() {
                st.exit = ist.exit;
            }
            for (k, v) in ist.variables {
                if !loop_keys.contains(&k) && before.get(&k) != Some(&v) {
                    st.variables.insert(k, v);
                }
            }
            match r {
                Ok(o) => results.push(Value::Array(o)),
                Err(f) if keep_going && !f.cancelled => results.push(json!({"error": f.message})),
                Err(f) => {
                    failure.get_or_insert(f);
                }
            }
        }
        match failure {
            Some(f) => Err(f),
            None => Ok(Value::Array(results)),
        }
    }
}

fn locals(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// A step's result and how many retries it took.
type KindFuture<'a> = Pin<Box<dyn Future<Output = (Result<Done, Failure>, u32)> + Send + 'a>>;
/// An action's result and how many retries it took.
type ActionFuture<'a> = Pin<Box<dyn Future<Output = (Result<Value, Failure>, u32)> + Send + 'a>>;

/// How a step of any kind ended, when it did not fail.
enum Done {
    Ran(Value),
    /// A container with nothing to run (an `if` without the branch taken, a
    /// `switch` without a matching case or default, a `for_each` over no
    /// items): reported `skipped`, as in the peer, with its output kept.
    Skipped(Value),
}

fn ran((r, retries): (Result<Value, Failure>, u32)) -> (Result<Done, Failure>, u32) {
    (r.map(Done::Ran), retries)
}

fn restore(st: &mut RunState, saved: Vec<(String, Option<Value>)>) {
    for (k, v) in saved {
        match v {
            Some(v) => st.variables.insert(k, v),
            None => st.variables.remove(&k),
        };
    }
}

/// Delay before retry number `attempt + 1` of a step (default base 1 s, cap 30 s).
fn retry_delay(
    backoff: Backoff,
    base: Option<Duration>,
    cap: Option<Duration>,
    attempt: u32,
) -> Duration {
    marktoflow_steps::core::time::backoff(
        base.unwrap_or(Duration::from_secs(1)),
        cap.unwrap_or(Duration::from_secs(30)),
        matches!(backoff, Backoff::Exponential),
        attempt,
    )
}

pub use marktoflow_steps::core::time::human as human_duration;

/// The HTTP answer a `workflow.exit` asks for (`status`, `body`), if any.
fn exit_response(exit: &Value) -> Option<Value> {
    let status = exit.get("status").cloned();
    let body = exit.get("body").cloned();
    (status.is_some() || body.is_some()).then(|| json!({"status": status, "body": body}))
}

/// The workflow's outputs:
/// 1. the last `workflow.set_outputs` call, wherever it ran;
/// 2. else each frontmatter `outputs:` name, from the variable of that name,
///    or from that field of the last top-level step's object output;
/// 3. else all variables.
fn workflow_outputs(wf: &Workflow, st: &RunState) -> Value {
    if let Some(o) = &st.set_outputs {
        return o.clone();
    }
    if !wf.outputs.is_empty() {
        let last = st.last_top_output.as_ref().and_then(Value::as_object);
        let mut out = Map::new();
        for o in &wf.outputs {
            if let Some(v) = st.variables.get(&o.name) {
                out.insert(o.name.clone(), v.clone());
            } else if let Some(v) = last.and_then(|m| m.get(&o.name)) {
                out.insert(o.name.clone(), v.clone());
            }
        }
        if !out.is_empty() {
            return Value::Object(out);
        }
    }
    let mut all = st.variables.clone();
    // What started the run is the caller's, not an output of the workflow.
    if !st.trigger.is_null() && all.get("trigger") == Some(&st.trigger) {
        all.remove("trigger");
    }
    Value::Object(all)
}

#[cfg(test)]
mod tests;
