//! Runs a workflow: steps, control flow, variables, outputs, and run events.
//!
//! The engine never prints, reads the clock for output, or touches the disk:
//! everything it does goes out as [`RunEvent`]s and the returned [`RunResult`].

mod action;
mod ask;
mod compute;
pub mod debug;
pub mod secrets;
pub(crate) use action::with_env;
mod config;
pub mod core_ops;
mod event;
mod kind;
mod loops;
mod merge;
mod parallel;
pub mod plan;
mod prices;
mod spawn;
mod step;
mod subflow;
mod usage;

pub use ask::{outside_wait, Answer, FieldView, Resolution, Vote, WaitLinks, WaitRequest};
use config::{stop_before, CORE_TEMPLATE_FUEL};
pub use config::{Lease, Mocks, RunConfig, WorkflowLoader, MAX_WORKFLOW_DEPTH};
use event::{bounded_nested, bounded_ref};
pub use event::{
    Checkpoint, Event, EventSink, RunEvent, RunFailure, RunResult, RunStatus, RunTrigger,
    StepRecord, StepStatus, NESTED_OUTPUT_BYTES,
};
pub use prices::Prices;
pub use usage::{usd, DailySpend, RunUsage, Spend};

use crate::diag::Pos;
use crate::format::inputs::substitute_env;
use crate::format::model::{Backoff, Workflow};
use crate::template::Templates;
use serde_json::{json, Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
// tokio's clock: a test may pause and advance it.
use tokio::time::Instant;

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

#[derive(Clone)]
struct Failure {
    message: String,
    /// The error code a `workflow.fail` step gave (boxed, as `authored`).
    code: Option<Box<str>>,
    step_id: String,
    step_name: String,
    pos: Pos,
    /// An action error that was reported as a timeout or cancellation.
    cancelled: bool,
    /// What a workflow reads as `error` when it differs from `message`
    /// (ours, which says where and how often). Boxed: failures are passed
    /// by value everywhere.
    authored: Option<Box<Authored>>,
}

/// The author's words for a failure, and the step's attempts.
#[derive(Debug, Clone, Default)]
struct Authored {
    /// A failed sub-workflow's own message, a retried action's without the
    /// count.
    message: String,
    /// The step's attempts, when it was retried (0: not counted here).
    attempts: u32,
}

#[derive(Clone)]
///
/// Its large parts are shared: a copy (one per branch, per concurrent
/// `for_each` item, per `parallel.map` item) costs a few counters until it
/// changes one, and only that one is then copied (`vars_mut`, `meta_mut`).
struct RunState {
    inputs: Arc<Value>,
    variables: Arc<Map<String, Value>>,
    /// `steps.<id>` as templates and conditions see it.
    meta: Arc<Map<String, Value>>,
    set_outputs: Option<Value>,
    records: Vec<StepRecord>,
    last_top_output: Option<Value>,
    env: Arc<Value>,
    /// What `now()` answers.
    clock: Arc<dyn marktoflow_steps::core::time::Clock>,
    /// The workflow's tools, `${VAR}`s filled in (an agent step may offer
    /// its MCP servers to the model).
    tools: Arc<Vec<marktoflow_steps::ToolConfig>>,
    /// The `trigger` variable the run was started with: not an output.
    trigger: Arc<Value>,
    /// Set by `workflow.exit` (its output): the run ends, successfully.
    exit: Option<Value>,
    /// Set by a `wait` for a person: the run stops there, waiting.
    waiting: Option<WaitRequest>,
    /// The inputs the action step running now was last called with (as
    /// shown: bounded), taken when the step finishes.
    step_inputs: Option<Value>,
    /// Set by an approval rejected with no `on_reject` branch: the run
    /// ends rejected, saying by whom.
    rejected: Option<String>,
    /// The iterations of the loops the current step is in, outermost
    /// first (`2/5` of a `for_each`, `3` of a `while`): its name shows
    /// them, so a loop's steps are told apart in the progress and history.
    iterations: Vec<String>,
}

impl RunState {
    /// The variables, to change (copied first when a copy of the state shares them).
    fn vars_mut(&mut self) -> &mut Map<String, Value> {
        Arc::make_mut(&mut self.variables)
    }

    /// `steps.<id>`, to change (copied first when shared).
    fn meta_mut(&mut self) -> &mut Map<String, Value> {
        Arc::make_mut(&mut self.meta)
    }
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
        mut cfg: RunConfig,
        from: Checkpoint,
    ) -> RunResult {
        let started = Instant::now();
        let secrets = secrets::Secrets::of_env(&cfg.caps.env);
        if !secrets.is_empty() {
            // Everything the run shows or keeps goes through its events.
            let (inner, secrets) = (cfg.events.clone(), secrets.clone());
            cfg.events = Arc::new(move |e: &Event| match secrets.event(e) {
                Some(masked) => inner(&masked),
                None => inner(e),
            });
        }
        // An agent's tool calls decided while the run waited.
        cfg.caps.approvals = ask::decisions(&cfg.answers);
        // A run started without a usage counter (a server's) counts here, to
        // its workflow's budget; a sub-workflow's calls count to its caller's.
        if cfg.caps.usage.is_none() {
            cfg.caps.usage = Some(Arc::new(RunUsage::new(wf.budget.clone(), None)));
        }
        // Workflow files its agent steps may call as tools.
        cfg.caps.workflows = subflow::WorkflowTools::of(wf, &cfg)
            .map(|t| Arc::new(t) as Arc<dyn marktoflow_steps::core::action::hosts::Workflows>);
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
            inputs: Arc::new(Value::Object(inputs)),
            variables: Arc::new(from.variables),
            meta: Arc::new(from.steps),
            set_outputs: from.set_outputs,
            records: Vec::new(),
            last_top_output: from.last_output,
            env: Arc::new(Value::Object(env)),
            clock: cfg.caps.clock.clone(),
            tools: Arc::new(
                wf.tools
                    .iter()
                    .map(|t| with_env(t, &cfg.caps.env))
                    .collect(),
            ),
            trigger: Arc::new(Value::Null),
            exit: None,
            waiting: None,
            step_inputs: None,
            rejected: None,
            iterations: Vec::new(),
        };
        if !cfg.trigger.is_null() && !st.variables.contains_key("trigger") {
            st.vars_mut()
                .insert("trigger".to_string(), cfg.trigger.clone());
        }
        st.trigger = Arc::new(st.variables.get("trigger").cloned().unwrap_or_default());
        let body = async {
            if start > wf.steps.len() {
                return Err(Failure {
                    authored: None,
                    code: None,
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
                        authored: None,
                        code: None,
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
                authored: None,
                code: None,
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
            Err(f) if f.cancelled && st.waiting.is_some() => (RunStatus::Waiting, None),
            Err(f) if f.cancelled && st.rejected.is_some() => (
                RunStatus::Rejected,
                Some(RunFailure {
                    authored: None,
                    message: st.rejected.clone().unwrap_or_default(),
                    code: None,
                    step_id: (!f.step_id.is_empty()).then_some(f.step_id),
                    step_name: (!f.step_name.is_empty()).then_some(f.step_name),
                    file: wf.source.name.clone(),
                    pos: Some(f.pos),
                }),
            ),
            Err(f) if f.cancelled && st.exit.is_some() => {
                match st
                    .exit
                    .as_ref()
                    .and_then(|e| e.get("status"))
                    .and_then(Value::as_u64)
                {
                    Some(code) if code >= 400 => (
                        RunStatus::Rejected,
                        Some(RunFailure {
                            authored: None,
                            message: format!("the workflow answered {code}"),
                            code: Some(code.to_string()),
                            step_id: (!f.step_id.is_empty()).then_some(f.step_id),
                            step_name: (!f.step_name.is_empty()).then_some(f.step_name),
                            file: wf.source.name.clone(),
                            pos: Some(f.pos),
                        }),
                    ),
                    _ => (RunStatus::Completed, None),
                }
            }
            Err(f) => (
                if f.cancelled && cfg.caps.cancel.is_cancelled() {
                    RunStatus::Cancelled
                } else {
                    RunStatus::Failed
                },
                Some(RunFailure {
                    authored: f.authored.map(|a| a.message),
                    message: f.message,
                    code: f.code.map(String::from),
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
        let mut result = RunResult {
            run_id: cfg.run_id.clone(),
            workflow: wf.meta.id.clone(),
            status,
            outputs,
            steps: st.records,
            error,
            duration_ms,
            response: st.exit.as_ref().and_then(exit_response),
            waiting: st.waiting.take(),
        };
        secrets.result(&mut result);
        result
    }
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

fn restore(st: &mut RunState, saved: Vec<(String, Option<Value>)>) {
    for (k, v) in saved {
        match v {
            Some(v) => st.vars_mut().insert(k, v),
            None => st.vars_mut().shift_remove(&k),
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
        // Declared outputs are the contract: the variables that are not
        // among them are the run's own.
        return Value::Object(out);
    }
    let mut all = (*st.variables).clone();
    // What started the run is the caller's, not an output of the workflow.
    if !st.trigger.is_null() && all.get("trigger") == Some(&*st.trigger) {
        all.shift_remove("trigger");
    }
    Value::Object(all)
}

#[cfg(test)]
mod tests;
