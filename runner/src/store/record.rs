//! Running a workflow as a stored run: the event sink that records its
//! steps and checkpoints, its end, resuming an interrupted one, and its
//! agent replies kept for a resumed run.

use super::{version_of, CheckpointRow, RunEnd, RunRecord, RunStore, StepFold};
use crate::engine::{
    Checkpoint, Engine, Event, EventSink, RunConfig, RunEvent, RunResult, RunStatus,
};
use crate::format::model::Workflow;
use crate::telemetry::{Lineage, RunTrace};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};

/// A run's agent replies in the store: every reply is recorded; a resumed
/// run recalls those recorded before it was interrupted, so a call already
/// paid for is not paid again.
pub struct RecordedReplies {
    pub store: Arc<dyn RunStore>,
    pub run_id: String,
    /// Whether to look (only a resumed run can find anything).
    pub recall: bool,
}

#[async_trait::async_trait]
impl marktoflow_steps::core::action::hosts::Replies for RecordedReplies {
    async fn recall(&self, key: &str) -> Option<String> {
        if !self.recall {
            return None;
        }
        let store = self.store.clone();
        let key = key.to_string();
        tokio::task::spawn_blocking(move || store.recall_reply(&key))
            .await
            .ok()?
            .ok()?
    }

    fn remember(&self, key: &str, reply: &str) {
        self.store.remember_reply(&self.run_id, key, reply);
    }
}

#[derive(Default)]
struct SinkState {
    total_steps: usize,
    /// The run's previous checkpoint: the next row holds what changed.
    prev: Option<Arc<Checkpoint>>,
    steps: StepFold,
}

/// An event sink recording `run_id`'s steps and checkpoints into `store`.
/// It does not record the end of the run: call [`RunStore::finish_run`]
/// with the result (the outputs are not in the events).
pub fn recording_sink(store: Arc<dyn RunStore>, run_id: String) -> EventSink {
    let state = Mutex::new(SinkState::default());
    Arc::new(move |e: &Event| match &e.kind {
        RunEvent::RunStarted { total_steps, .. } => {
            if let Ok(mut s) = state.lock() {
                s.total_steps = *total_steps;
            }
            store.mark_running(&run_id)
        }
        RunEvent::StepStarted { .. }
        | RunEvent::ModelCall { .. }
        | RunEvent::StepRetry { .. }
        | RunEvent::StepFinished { .. } => {
            let row = state.lock().ok().and_then(|mut s| s.steps.push(e));
            if let Some(row) = row {
                store.record_step(&run_id, row);
            }
        }
        RunEvent::Checkpoint(cp) => {
            let (row, last) = match state.lock() {
                Ok(mut s) => {
                    let row = CheckpointRow::between(s.prev.as_deref(), cp);
                    s.prev = Some(cp.clone());
                    (row, cp.next_step >= s.total_steps)
                }
                Err(_) => (CheckpointRow::Whole(cp.clone()), false),
            };
            store.save_checkpoint(&run_id, row, last)
        }
        // A wait is recorded with the run's end (see `RunEnd::waiting`).
        RunEvent::Log { .. }
        | RunEvent::Progress { .. }
        | RunEvent::Waiting(_)
        | RunEvent::RunFinished { .. } => {}
    })
}

/// Both sinks, in order.
pub fn tee(a: EventSink, b: EventSink) -> EventSink {
    Arc::new(move |e: &Event| {
        a(e);
        b(e);
    })
}

/// Runs an already-created run (see [`RunStore::submit_run`]) and records
/// it: its steps and checkpoints as they happen, then how it ended.
pub async fn run_recorded(
    store: &Arc<dyn RunStore>,
    engine: &Engine,
    wf: &Workflow,
    inputs: Map<String, Value>,
    cfg: RunConfig,
) -> RunResult {
    let cp = Checkpoint::default();
    resume_from(store, engine, wf, inputs, cfg, cp, Lineage::New).await
}

/// Continues a stored run that did not finish, from its latest checkpoint
/// (from the start when it has none), as the same run. `wf` is the workflow
/// loaded again from `run.file`; when it changed since the run started the
/// run is not resumed but marked failed, and the result says why.
/// `cfg.run_id` is replaced by the run's id.
pub async fn resume_run(
    store: &Arc<dyn RunStore>,
    engine: &Engine,
    wf: &Workflow,
    run: &RunRecord,
    mut cfg: RunConfig,
) -> RunResult {
    cfg.run_id = run.id.clone();
    let refuse = |message: String| {
        let result = RunResult {
            run_id: run.id.clone(),
            workflow: run.workflow.clone(),
            status: RunStatus::Failed,
            outputs: Value::Object(Map::new()),
            steps: Vec::new(),
            error: Some(crate::engine::RunFailure {
                authored: None,
                code: None,
                message,
                step_id: None,
                step_name: None,
                file: run.file.clone(),
                pos: None,
            }),
            duration_ms: 0,
            response: None,
            waiting: None,
        };
        store.finish_run(&run.id, RunEnd::from(&result));
        result
    };
    // A run that aborted its process twice would most likely abort the
    // next one too (and a server restarted by a supervisor would die forever).
    if run.deaths >= MAX_DEATHS {
        return refuse(not_resumed_for_deaths().to_string());
    }
    if run.deaths > 0 {
        // Counted before any step runs again, so the next death is seen.
        store.record_deaths(&run.id, run.deaths);
        if let Ok(Err(e)) = store.submit_flush().await {
            return refuse(format!("not resumed: {e}"));
        }
    }
    if version_of(wf) != run.version {
        return refuse(format!(
            "not resumed: the workflow file `{}` changed since the run started",
            run.file
        ));
    }
    let cp = match store.checkpoint(&run.id, None) {
        Ok(cp) => cp.unwrap_or_default(),
        Err(e) => return refuse(format!("not resumed: {e}")),
    };
    let inputs = match &run.inputs {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    // The waits it stopped at and how they were closed.
    let filter = super::WaitFilter {
        run_id: Some(run.id.clone()),
        ..Default::default()
    };
    match store.waits(&filter) {
        Ok(waits) => cfg.answers.extend(
            waits
                .into_iter()
                .filter_map(|w| Some((w.request.step_id, w.resolution?))),
        ),
        Err(e) => return refuse(format!("not resumed: {e}")),
    }
    resume_from(store, engine, wf, inputs, cfg, cp, Lineage::Resumed).await
}

/// Why a run whose deaths weigh [`MAX_DEATHS`] is failed.
pub fn not_resumed_for_deaths() -> &'static str {
    "not resumed: the process died while running it too often (it aborted inside this run twice, or was killed four times)"
}

/// The weight of deaths (see [`super::death`]) at which a server stops
/// resuming a run and marks it failed: two aborts inside it, or four
/// deaths nobody could be blamed for.
pub const MAX_DEATHS: u32 = 4;

/// Runs `wf` from `cp` as the stored run `cfg.run_id`, recording it, and
/// tracing it as the part of the run `lineage` says (when traces are sent).
pub async fn resume_from(
    store: &Arc<dyn RunStore>,
    engine: &Engine,
    wf: &Workflow,
    inputs: Map<String, Value>,
    mut cfg: RunConfig,
    cp: Checkpoint,
    lineage: Lineage,
) -> RunResult {
    let run_id = cfg.run_id.clone();
    cfg.events = tee(recording_sink(store.clone(), run_id.clone()), cfg.events);
    // What started it says whose trace it is in (a webhook's `traceparent`):
    // a run resumed or retried from a checkpoint has it there.
    let trigger = match cp.variables.get("trigger") {
        Some(t @ Value::Object(_)) => t.clone(),
        _ => cfg.trigger.clone(),
    };
    if let Some(trace) = RunTrace::start(&run_id, lineage, &trigger) {
        cfg.events = tee(cfg.events, trace.sink());
        cfg.caps.trace = Some(trace as Arc<dyn marktoflow_steps::core::action::hosts::Trace>);
    }
    let flushing = store.clone();
    cfg.recorded = Some(Arc::new(move || {
        let done = flushing.submit_flush();
        Box::pin(async move {
            match done.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("the store is closed".to_string()),
            }
        })
    }));
    let result = engine.resume(wf, inputs, cfg, cp).await;
    store.finish_run(&run_id, RunEnd::from(&result));
    result
}
