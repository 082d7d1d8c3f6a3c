//! Running one case: the workflow with the case's inputs and mocks, no
//! run store, then each expectation checked; what failed is said with the
//! expected and the actual value.

use super::mocks::{holds, CaseMocks};
use super::spec::Case;
use crate::engine::{Engine, RunConfig, RunResult, RunStatus, WorkflowLoader};
use crate::format::inputs::Supplied;
use crate::format::model::Workflow;
use marktoflow_steps::Capabilities;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a case went.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub case: String,
    /// Each expectation not met (none: it passed).
    pub failures: Vec<String>,
    pub duration: Duration,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// What a case runs with besides itself.
pub struct Setup {
    pub caps: Capabilities,
    pub loader: Arc<dyn WorkflowLoader>,
    /// Unmocked agent, HTTP and process calls are made.
    pub live: bool,
}

/// Runs `case` on `wf` and checks what it expects.
pub async fn run_case(wf: &Workflow, case: &Case, setup: &Setup) -> Outcome {
    let started = Instant::now();
    let failures = match run_mocked(wf, case, setup).await {
        Ok((result, calls)) => check(case, &result, calls),
        Err(problems) => problems,
    };
    Outcome {
        case: case.name.clone(),
        failures,
        duration: started.elapsed(),
    }
}

/// Runs `case` on `wf` with its mocks: the run's result and every action
/// call it made; Err: the case's inputs do not fit the workflow's.
pub async fn run_mocked(
    wf: &Workflow,
    case: &Case,
    setup: &Setup,
) -> Result<(RunResult, Map<String, Value>), Vec<String>> {
    let supplied = case
        .inputs
        .iter()
        .map(|(k, v)| (k.clone(), Supplied::Json(v.clone())))
        .collect();
    let inputs = crate::format::inputs::resolve(wf, supplied, &setup.caps.env).map_err(|errs| {
        errs.iter()
            .map(|e| format!("inputs: {e}"))
            .collect::<Vec<_>>()
    })?;
    let mocks = Arc::new(CaseMocks::new(case.mocks.clone(), setup.live));
    let cfg = RunConfig {
        run_id: format!("test:{}", case.name),
        caps: setup.caps.clone(),
        events: Arc::new(|_| {}),
        loader: Some(setup.loader.clone()),
        callers: Vec::new(),
        debugger: None,
        trigger: json!({"type": "test"}),
        lease: None,
        recorded: None,
        answers: Default::default(),
        waits: None,
        pause: None,
        mocks: Some(mocks.clone() as Arc<dyn crate::engine::Mocks>),
    };
    let result = Engine::new().run(wf, inputs, cfg).await;
    Ok((result, mocks.calls()))
}

/// The expectations `result` does not meet.
fn check(case: &Case, result: &RunResult, calls: Map<String, Value>) -> Vec<String> {
    let e = &case.expect;
    let mut failures = Vec::new();
    let error = result.error.as_ref().map(|f| match &f.step_name {
        Some(step) => format!("step `{step}` failed: {}", f.message),
        None => f.message.clone(),
    });
    let want = e.status.unwrap_or(RunStatus::Completed);
    if result.status != want {
        failures.push(format!(
            "status: expected {}, got {}{}",
            want.as_str(),
            result.status.as_str(),
            error
                .as_ref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ));
    }
    if let Some(part) = &e.error {
        match &error {
            Some(m) if m.contains(part.as_str()) => {}
            Some(m) => failures.push(format!("error: expected it to contain {part:?}, got {m:?}")),
            None => failures.push(format!(
                "error: expected one containing {part:?}, the run had none"
            )),
        }
    }
    for (name, want) in &e.outputs {
        let got = result.outputs.get(name).unwrap_or(&Value::Null);
        if !holds(got, want) {
            failures.push(format!("output `{name}`: expected {want}, got {got}"));
        }
    }
    let mut steps = Map::new();
    for r in &result.steps {
        steps.entry(r.id.clone()).or_insert_with(
            || json!({"status": r.status.as_str(), "output": r.output, "error": r.error}),
        );
    }
    for (id, want) in &e.steps {
        let got = steps
            .get(id)
            .and_then(|s| s["status"].as_str())
            .unwrap_or("not run");
        if want.as_str() != Some(got) {
            let want = want
                .as_str()
                .map_or_else(|| want.to_string(), str::to_string);
            failures.push(format!("step `{id}`: expected {want}, got {got}"));
        }
    }
    if !e.asserts.is_empty() {
        let ctx = json!({
            "status": result.status.as_str(),
            "outputs": result.outputs,
            "steps": steps,
            "calls": calls,
            "error": error,
        });
        let templates = crate::template::Templates::new();
        for a in &e.asserts {
            match templates.eval_condition(a, &crate::template::Templates::to_value(&ctx)) {
                Ok(true) => {}
                Ok(false) => failures.push(format!("assert `{a}` is false")),
                Err(err) => failures.push(format!("assert `{a}`: {err}")),
            }
        }
    }
    failures
}
