//! Pausing a run before each step, for `marktoflow debug`: the engine
//! hands a [`Debugger`] the step, its inputs rendered as they would run,
//! and the variables, which it may change; the debugger says whether to go
//! on. The engine never reads a terminal: the CLI's debugger does.

use crate::format::model::Step;
use serde_json::{Map, Value};

/// What the run does after a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Run the step.
    Run,
    /// Stop the run here (it ends cancelled).
    Stop,
}

/// Renders a value's templates in the run's context as it is at the
/// pause, with the variables given.
pub type Eval<'a> = dyn Fn(&Value, &Map<String, Value>) -> Result<Value, String> + 'a;

/// A step about to run.
pub struct Pause<'a> {
    pub step: &'a Step,
    /// 0 for a top-level step; 1 inside a loop, branch or block; …
    pub depth: usize,
    /// The run's variables: changes are kept.
    pub variables: &'a mut Map<String, Value>,
    /// The step's inputs as written (None: the step has no inputs of its
    /// own, as a loop); [`Pause::inputs`] renders them.
    pub raw_inputs: Option<&'a Value>,
    pub eval: &'a Eval<'a>,
}

impl Pause<'_> {
    /// The step's inputs rendered with the variables as they are now (Err:
    /// the template error the step would fail with).
    pub fn inputs(&self) -> Option<Result<Value, String>> {
        self.raw_inputs.map(|raw| (self.eval)(raw, self.variables))
    }

    /// `{{ expr }}` now.
    pub fn print(&self, expr: &str) -> Result<Value, String> {
        (self.eval)(&Value::String(format!("{{{{ {expr} }}}}")), self.variables)
    }
}

/// Decides, before each step, whether the run goes on. Called on the run's
/// task: while it decides, the run waits.
pub trait Debugger: Send + Sync {
    fn before_step(&self, pause: Pause<'_>) -> Resume;
}
