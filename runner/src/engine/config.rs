//! What a run is given besides its workflow: limits, the loader of
//! sub-workflows, the lease a shared store holds, where to stop.

use super::debug;
use super::{Event, EventSink, Failure, RunEvent};
use crate::diag::Diagnostic;
use crate::format::model::{Step, Workflow};
use marktoflow_steps::core::action::Capabilities;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Loads sub-workflows (`workflow: path.md` steps): the engine itself never
/// reads files.
pub trait WorkflowLoader: Send + Sync {
    fn load(&self, path: &Path) -> Result<Workflow, Vec<Diagnostic>>;
}

/// Fuel for one `core.template` render (about one unit per template instruction).
pub(super) const CORE_TEMPLATE_FUEL: u64 = 2_000_000;

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
    /// Awaited after each top-level step's checkpoint, before the next step
    /// starts: answers once the checkpoint is durable (`Err` with why when
    /// it cannot be, and the run stops there). None: nothing to wait for.
    pub recorded: Option<Recorded>,
    /// How the run's closed waits were closed, by step id: a resumed run
    /// takes its `wait` steps' answers from here (see [`super::Resolution`]).
    pub answers: std::collections::HashMap<String, super::Resolution>,
    /// Makes the links to answer a wait; None: waits have no links.
    pub waits: Option<Arc<dyn super::WaitLinks>>,
    /// Set from outside to pause the run before its next top-level step,
    /// where it waits as at a `wait` step (see [`super::Engine::paused`]).
    pub pause: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// What stands in for actions (`marktoflow test`); None: every action
    /// is called.
    pub mocks: Option<Arc<dyn Mocks>>,
}

/// Stands in for actions (a test's mocks, a staged run's writes): asked
/// before each action call, with what the action is and the call's
/// rendered inputs.
pub trait Mocks: Send + Sync {
    /// The result to give instead of calling `action` (resolved as
    /// `resolved`) at step `step_id` (an error fails the step as the
    /// action's would); None: call it.
    fn instead(
        &self,
        step_id: &str,
        action: &str,
        resolved: &marktoflow_steps::registry::Resolved,
        inputs: &Value,
    ) -> Option<Result<Value, marktoflow_steps::core::error::ActionError>>;
}

/// See [`RunConfig::recorded`].
pub type Recorded = Arc<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
        + Send
        + Sync,
>;

/// Whether this process may go on running a run (see [`RunConfig::lease`]).
pub trait Lease: Send + Sync {
    fn held(&self) -> bool;
}

/// Why a run stopped before `step`, if it must: cancelled, or its lease
/// lost.
pub(super) fn stop_before(cfg: &RunConfig, step: &Step) -> Option<Failure> {
    let message = if cfg.caps.cancel.is_cancelled() {
        "run cancelled"
    } else if cfg.lease.as_ref().is_some_and(|l| !l.held()) {
        "stopped: the run's lease passed to another worker, which continues it"
    } else {
        return None;
    };
    Some(Failure {
        authored: None,
        code: None,
        message: message.into(),
        step_id: step.id.clone(),
        step_name: step.display_name().to_string(),
        pos: step.pos,
        cancelled: true,
    })
}

impl RunConfig {
    /// Sends `kind` to the run's sink, stamped by the run's clock.
    pub(super) fn emit(&self, kind: RunEvent) {
        (self.events)(&Event::now(self.caps.clock.as_ref(), kind))
    }
}
