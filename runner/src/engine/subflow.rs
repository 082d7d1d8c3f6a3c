//! Sub-workflows: loading the callee, checking its inputs, running it one
//! level deeper, and its outputs as the step's.

use super::{
    Engine, Event, EventSink, Failure, RunConfig, RunEvent, RunState, RunStatus, MAX_WORKFLOW_DEPTH,
};
use crate::format::model::{Step, Workflow};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

impl Engine {
    /// Runs another workflow file with its inputs checked and defaulted like
    /// a top-level run; its outputs are this step's output.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn exec_subworkflow(
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
        let given: Vec<String> = match &rendered {
            Value::Object(m) => m.keys().cloned().collect(),
            _ => Vec::new(),
        };
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
                // At the input given wrong (a missing one: at `inputs:`).
                let at = match errs.first() {
                    Some(e) if given.contains(&e.name) => step.field_pos(&["inputs", &e.name]),
                    _ => step.field_pos(&["inputs"]),
                };
                self.fail(
                    step,
                    at,
                    format!("sub-workflow `{path}`: {}", list.join("; ")),
                )
            })?;
        // The child's steps show nested under this step; its run start and
        // end are this step's.
        let child_events = nested(cfg.events.clone(), depth + 1);
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
            recorded: None,
            answers: Default::default(),
            waits: None,
            pause: None,
            mocks: cfg.mocks.clone(),
        };
        let result = Box::pin(self.run(&child, child_inputs, child_cfg)).await;
        match result.status {
            RunStatus::Completed => Ok(result.outputs),
            // Only a run's own top-level steps can pause it.
            RunStatus::Waiting => Err(self.fail(
                step,
                at,
                format!("sub-workflow `{path}` waits for an answer (a `wait` with a `mode`): only a workflow run on its own can pause; call it with a trigger or run it by itself"),
            )),
            status => {
                // The child's error code stays the caller's to test, and its
                // words are the caller's `error.message`.
                let code = result.error.as_ref().and_then(|f| f.code.as_deref().map(Box::from));
                let authored = result.error.as_ref().map(|f| {
                    Box::new(super::Authored {
                        message: f.authored.clone().unwrap_or_else(|| f.message.clone()),
                        attempts: 0,
                    })
                });
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
                    code,
                    authored,
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

/// A sub-workflow's events as its caller's: its steps `shift` levels
/// deeper, its run's start, end and checkpoints left out.
fn nested(events: EventSink, shift: usize) -> EventSink {
    Arc::new(move |e: &Event| match &e.kind {
        RunEvent::RunStarted { .. } | RunEvent::RunFinished { .. } | RunEvent::Checkpoint(_) => {}
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
    })
}

/// Workflow files an agent step of a run may call as tools
/// ([`marktoflow_steps::core::action::hosts::Workflows`]): found from the
/// calling workflow's file, checked as sub-workflows are (inputs, cycles,
/// depth), run one level deeper with the run's capabilities, their steps
/// shown nested in the run's events.
pub(super) struct WorkflowTools {
    /// The calling workflow's file, absolute, and as the user sees it.
    here: std::path::PathBuf,
    shown: std::path::PathBuf,
    /// Its callers and itself, outermost first.
    chain: Vec<std::path::PathBuf>,
    loader: Arc<dyn super::WorkflowLoader>,
    run_id: String,
    caps: marktoflow_steps::Capabilities,
    events: EventSink,
    lease: Option<Arc<dyn super::Lease>>,
    mocks: Option<Arc<dyn super::Mocks>>,
}

impl WorkflowTools {
    /// The tools of a run of `wf` set up by `cfg` (None: nothing loads
    /// workflows here).
    pub(super) fn of(wf: &Workflow, cfg: &RunConfig) -> Option<WorkflowTools> {
        let loader = cfg.loader.clone()?;
        let here =
            marktoflow_steps::core::sandbox::normalize(&cfg.caps.sandbox.cwd.join(&wf.source.path));
        let mut chain = cfg.callers.clone();
        chain.push(here.clone());
        Some(WorkflowTools {
            here,
            shown: wf.source.path.clone(),
            chain,
            loader,
            run_id: cfg.run_id.clone(),
            caps: cfg.caps.clone(),
            events: cfg.events.clone(),
            lease: cfg.lease.clone(),
            mocks: cfg.mocks.clone(),
        })
    }

    /// The workflow at `path` (relative to the caller's file), loaded;
    /// refused when it would call itself round a loop or nest too deep.
    fn load(&self, path: &str) -> Result<Workflow, String> {
        let target = marktoflow_steps::core::sandbox::normalize(
            &self.here.parent().unwrap_or(Path::new("/")).join(path),
        );
        if self.chain.contains(&target) {
            return Err(format!(
                "`{path}` is a workflow this run is already in (a cycle)"
            ));
        }
        if self.chain.len() >= MAX_WORKFLOW_DEPTH {
            return Err(format!(
                "workflows nest deeper than {MAX_WORKFLOW_DEPTH} levels"
            ));
        }
        let shown = marktoflow_steps::core::sandbox::normalize(
            &self.shown.parent().unwrap_or(Path::new("")).join(path),
        );
        let wf = self.loader.load(&shown).map_err(|diags| {
            let first = diags.first().map(|d| d.render()).unwrap_or_default();
            format!("cannot load workflow `{path}`:\n{first}")
        })?;
        Ok(wf)
    }
}

#[async_trait::async_trait]
impl marktoflow_steps::core::action::hosts::Workflows for WorkflowTools {
    fn tool(
        &self,
        path: &str,
    ) -> Result<marktoflow_steps::core::action::hosts::WorkflowTool, String> {
        let wf = self.load(path)?;
        let description = wf
            .meta
            .description
            .clone()
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| format!("Runs the workflow {}", wf.meta.name));
        Ok(marktoflow_steps::core::action::hosts::WorkflowTool {
            name: wf.meta.id.clone(),
            description,
            schema: Value::Object(crate::format::inputs::json_schema(&wf.inputs)),
        })
    }

    async fn run(
        &self,
        path: &str,
        inputs: serde_json::Map<String, Value>,
        key: &str,
    ) -> Result<Value, String> {
        let child = self.load(path)?;
        let supplied = inputs
            .into_iter()
            .map(|(k, v)| (k, crate::format::inputs::Supplied::Json(v)))
            .collect();
        let child_inputs = crate::format::inputs::resolve(&child, supplied, &self.caps.env)
            .map_err(|errs| {
                let list: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                list.join("; ")
            })?;
        // Its steps show one level under the agent's.
        let child_events = nested(self.events.clone(), 1);
        let cfg = RunConfig {
            // Each call its own nested run: its steps' idempotency keys and
            // its agents' recorded turns are this call's, not another's.
            run_id: format!("{}/{key}", self.run_id),
            caps: self.caps.clone(),
            events: child_events,
            loader: Some(self.loader.clone()),
            callers: self.chain.clone(),
            debugger: None,
            trigger: Value::Null,
            lease: self.lease.clone(),
            recorded: None,
            answers: Default::default(),
            waits: None,
            pause: None,
            mocks: self.mocks.clone(),
        };
        let result = Box::pin(Engine::new().run(&child, child_inputs, cfg)).await;
        match result.status {
            RunStatus::Completed => Ok(result.outputs),
            RunStatus::Waiting => Err(format!(
                "`{path}` waits for an answer (a `wait` with a `mode`): only a workflow run on its own can pause"
            )),
            status => Err(match result.error {
                Some(f) => match f.step_name {
                    Some(n) => format!("`{path}` {}: step `{n}` failed: {}", status.as_str(), f.message),
                    None => format!("`{path}` {}: {}", status.as_str(), f.message),
                },
                None => format!("`{path}` ended {}", status.as_str()),
            }),
        }
    }
}
