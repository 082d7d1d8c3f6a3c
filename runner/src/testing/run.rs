//! Running one case: the workflow with the case's inputs and mocks, no
//! run store, then each expectation checked; what failed is said with the
//! expected and the actual value.

use super::mocks::{holds, CaseMocks};
use super::spec::Case;
use crate::engine::{Engine, RunConfig, RunResult, RunStatus, WorkflowLoader};
use crate::format::inputs::Supplied;
use crate::format::model::Workflow;
use marktoflow_steps::{Capabilities, Sandbox};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
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
    let failures = match CaseFolder::for_case(case) {
        Err(e) => vec![format!("files: {e}")],
        Ok(folder) => {
            let dir = folder.as_ref().map(|f| f.0.as_path());
            match run_mocked(wf, case, setup, dir).await {
                Ok((result, calls)) => check(case, &result, calls, dir),
                Err(problems) => problems,
            }
        }
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
    folder: Option<&Path>,
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
    let mut caps = setup.caps.clone();
    if let Some(f) = folder {
        // The case's folder is its working folder, the one place it writes;
        // the workflow's own folder stays readable (sub-workflows, scripts).
        let old = &setup.caps.sandbox;
        let reads = std::iter::once(f.to_path_buf())
            .chain(old.read_roots.iter().cloned())
            .collect();
        let sandbox = Sandbox::new(f.to_path_buf(), reads, vec![f.to_path_buf()])
            .protecting(old.protected.clone());
        caps.sandbox = Arc::new(sandbox);
    }
    let cfg = RunConfig {
        run_id: format!("test:{}", case.name),
        caps,
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

/// A case's own folder, holding its `files:` (removed when dropped).
struct CaseFolder(PathBuf);

impl CaseFolder {
    /// None when the case names no files, in or expected.
    fn for_case(case: &Case) -> Result<Option<CaseFolder>, String> {
        if case.files.is_empty() && case.expect.files.is_empty() {
            return Ok(None);
        }
        let dir = std::env::temp_dir().join(format!("marktoflow-case-{}", uuid::Uuid::new_v4()));
        let folder = CaseFolder(dir);
        std::fs::create_dir_all(&folder.0).map_err(|e| e.to_string())?;
        for (path, text) in &case.files {
            let to = folder.0.join(super::spec::fixture_path(path)?);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("{path}: {e}"))?;
            }
            std::fs::write(&to, text).map_err(|e| format!("{path}: {e}"))?;
        }
        Ok(Some(folder))
    }
}

impl Drop for CaseFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The files a case expects, as they are in its folder: path → text (null
/// when there is none).
fn files_in(case: &Case, dir: Option<&Path>) -> Map<String, Value> {
    let Some(dir) = dir else {
        return Map::new();
    };
    case.expect
        .files
        .keys()
        .map(|path| {
            let text = std::fs::read_to_string(dir.join(path)).ok();
            (path.clone(), text.map_or(Value::Null, Value::String))
        })
        .collect()
}

/// The expectations `result` does not meet.
fn check(
    case: &Case,
    result: &RunResult,
    calls: Map<String, Value>,
    dir: Option<&Path>,
) -> Vec<String> {
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
    let files = files_in(case, dir);
    for (path, want) in &e.files {
        let got = files.get(path).unwrap_or(&Value::Null);
        let same = match (want, got) {
            (Value::Null, got) => got.is_null(),
            (Value::String(w), Value::String(g)) => w == g,
            // A mapping or list: the file's JSON holds it.
            (w, Value::String(g)) => serde_json::from_str::<Value>(g).is_ok_and(|v| holds(&v, w)),
            _ => false,
        };
        if !same {
            let shown = |v: &Value| match v {
                Value::Null => "no file".to_string(),
                other => other.to_string(),
            };
            failures.push(format!(
                "file `{path}`: expected {}, got {}",
                shown(want),
                shown(got)
            ));
        }
    }
    if !e.asserts.is_empty() {
        let ctx = json!({
            "status": result.status.as_str(),
            "outputs": result.outputs,
            "steps": steps,
            "calls": calls,
            "error": error,
            "files": files,
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
