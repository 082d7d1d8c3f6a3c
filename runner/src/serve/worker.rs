//! Working from a shared store's queue: claiming queued runs for the
//! workflows this process serves, and, for a server that only enqueues,
//! telling a run's end once a worker recorded it.

use super::{start_run, Job, ServerState};
use crate::engine::{RunFailure, RunResult, RunStatus};
use crate::format::model::Workflow;
use crate::store::{RunRecord, RunStore};
use std::sync::Arc;
use std::time::Duration;

/// How long a worker waits for a notification before it looks anyway.
const POLL: Duration = Duration::from_secs(1);

/// Claims queued runs of the served workflows while there are free slots,
/// until shutdown begins. Does nothing unless the store is shared.
pub async fn claim_runs(state: Arc<ServerState>) {
    let Some(store) = state.store.clone() else {
        return;
    };
    let Some(shared) = store.shared() else {
        return;
    };
    shared.join_cluster();
    while !state.is_stopping() {
        let served = state.served();
        // A run is taken by the exact text of its workflow: what was
        // accepted is what runs, wherever the file lives.
        let versions: Vec<(String, Arc<Workflow>)> = served
            .workflows
            .iter()
            .map(|w| (crate::store::version_of(w), w.clone()))
            .collect();
        let (queued, running) = state.load();
        let free = state.config.max_concurrent.saturating_sub(queued + running);
        let mut full = false;
        if free > 0 && !versions.is_empty() {
            let s = store.clone();
            let wanted: Vec<String> = versions.iter().map(|(v, _)| v.clone()).collect();
            let began = std::time::Instant::now();
            let claimed = tokio::task::spawn_blocking(move || match s.shared() {
                Some(pg) => pg.claim(&wanted, free),
                None => Ok(Vec::new()),
            })
            .await;
            match claimed {
                Ok(Ok(runs)) => {
                    state.metrics.claim(began.elapsed(), runs.len());
                    full = runs.len() == free;
                    for run in runs {
                        let Some((_, wf)) = versions.iter().find(|(v, _)| *v == run.version) else {
                            continue;
                        };
                        let id = run.id.clone();
                        if let Err(why) =
                            start_run(&state, wf.clone(), Job::Resume(Box::new(run)), id.clone())
                        {
                            // Its lease runs out and another worker takes it.
                            eprintln!("marktoflow: claimed run {id} not started: {why}");
                        }
                    }
                }
                Ok(Err(e)) => eprintln!("marktoflow: cannot claim runs: {e}"),
                Err(e) => eprintln!("marktoflow: cannot claim runs: {e}"),
            }
        }
        if full {
            // More may be waiting: look again once a slot is free.
            tokio::select! {
                _ = state.slot_freed.notified() => {}
                _ = tokio::time::sleep(POLL) => {}
                _ = state.stopping.cancelled() => return,
            }
            continue;
        }
        tokio::select! {
            _ = shared.wait_for_work(POLL) => {}
            _ = state.slot_freed.notified(), if free == 0 => {}
            _ = state.stopping.cancelled() => return,
        }
    }
}

/// The result of a run another process executes, once the store says it
/// ended (looked up with a growing pause); gives up when the server stops
/// or after the request timeout, answering that it is still going.
pub(super) async fn stored_result(
    store: &Arc<dyn RunStore>,
    run_id: &str,
    wf: &Workflow,
    state: &ServerState,
) -> RunResult {
    if let Some(r) = stored_end(store, run_id, wf, state, false).await {
        return r;
    }
    let mut r = result_of(
        &RunRecord {
            status: RunStatus::Cancelled,
            error: Some("the run is queued for the workers and has not ended yet".into()),
            ..placeholder(run_id, wf)
        },
        wf,
    );
    r.status = RunStatus::Cancelled;
    r
}

/// The result of a stored run once it ended (looked up with a growing
/// pause, first at once when `look_now`); None when the server stops or the
/// request timeout passes first.
pub(super) async fn stored_end(
    store: &Arc<dyn RunStore>,
    run_id: &str,
    wf: &Workflow,
    state: &ServerState,
    look_now: bool,
) -> Option<RunResult> {
    let mut pause = Duration::from_millis(50);
    let until = tokio::time::Instant::now() + state.config.request_timeout;
    // Just queued: nothing to look up before the first word of its end.
    let mut look = look_now;
    loop {
        // Asked before looking: an end committed in between still tells.
        let ended = store.shared().map(|pg| pg.ended(run_id));
        if look {
            let s = store.clone();
            let id = run_id.to_string();
            // With its steps, as a run executed here answers.
            let found = tokio::task::spawn_blocking(move || {
                // A run waiting for a person is as far as it goes for now.
                let r = s
                    .get_run(&id)
                    .ok()
                    .filter(|r| r.status.is_finished() || r.status == RunStatus::Waiting)?;
                let steps = s.steps_of(&r.id).unwrap_or_default();
                Some((r, steps))
            })
            .await;
            if let Ok(Some((r, steps))) = found {
                let mut result = result_of(&r, wf);
                result.steps = steps.into_iter().map(step_record).collect();
                return Some(result);
            }
        }
        look = true;
        if tokio::time::Instant::now() >= until {
            break;
        }
        let told = async {
            match ended {
                Some(rx) => drop(rx.await),
                None => std::future::pending().await,
            }
        };
        // Looked up again when told, or now and then in case a
        // notification was lost.
        tokio::select! {
            _ = told => {}
            _ = tokio::time::sleep(pause) => {}
            _ = state.stopping.cancelled() => break,
        }
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    None
}

fn placeholder(run_id: &str, wf: &Workflow) -> RunRecord {
    RunRecord {
        id: run_id.to_string(),
        workflow: wf.meta.id.clone(),
        file: wf.source.path.display().to_string(),
        version: String::new(),
        trigger: String::new(),
        status: RunStatus::Queued,
        retry_of: None,
        inputs: serde_json::Value::Null,
        outputs: serde_json::Value::Null,
        error: None,
        error_step: None,
        pid: None,
        owner: None,
        alive: None,
        created_at: 0,
        finished_at: None,
        duration_ms: None,
        context: serde_json::Value::Null,
        deaths: 0,
    }
}

/// A stored step as a run's result lists it.
fn step_record(s: crate::store::StepRow) -> crate::engine::StepRecord {
    crate::engine::StepRecord {
        id: s.step_id,
        name: s.name,
        status: s.status,
        output: s.output,
        error: s.error,
        duration_ms: s.duration_ms,
        retries: s.attempts.saturating_sub(1),
        depth: s.depth,
    }
}

/// A stored run as the result its callers expect.
fn result_of(r: &RunRecord, wf: &Workflow) -> RunResult {
    RunResult {
        run_id: r.id.clone(),
        workflow: r.workflow.clone(),
        status: match r.status {
            RunStatus::Completed => RunStatus::Completed,
            RunStatus::Cancelled => RunStatus::Cancelled,
            RunStatus::Rejected => RunStatus::Rejected,
            RunStatus::Waiting => RunStatus::Waiting,
            _ => RunStatus::Failed,
        },
        outputs: r.outputs.clone(),
        steps: Vec::new(),
        error: r.error.as_ref().map(|m| RunFailure {
            authored: None,
            code: None,
            message: m.clone(),
            step_id: r.error_step.clone(),
            step_name: None,
            file: wf.source.path.display().to_string(),
            pos: None,
        }),
        duration_ms: r.duration_ms.unwrap_or(0),
        response: None,
        waiting: None,
    }
}
