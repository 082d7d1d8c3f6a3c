//! Retrying a stored run: which run, with which inputs, from which
//! checkpoint. The CLI's `retry` and the server's `POST /runs/{id}/retry`
//! plan the same way; each reports a [`RetryError`] in its own words.

use super::{version_of, RunRecord, RunStore, StoreError};
use crate::engine::Checkpoint;
use crate::format::model::Workflow;
use serde_json::{Map, Value};

/// What a retry continues: the run it retries, its inputs, and where.
pub struct RetryPlan {
    pub of: String,
    pub inputs: Map<String, Value>,
    pub checkpoint: Checkpoint,
    /// Top-level steps reused from the earlier run.
    pub reused: usize,
}

/// Why a run cannot be retried (as asked).
#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    #[error("run `{run}` is still {status}; retry it once it ends")]
    StillGoing { run: String, status: &'static str },
    #[error("`{file}` changed since run `{run}`; its earlier outputs may not fit the steps as they are now")]
    Changed { file: String, run: String },
    #[error("`{step}` is not a top-level step of `{file}` (they are {})", steps.join(", "))]
    NoSuchStep {
        step: String,
        file: String,
        steps: Vec<String>,
    },
    #[error("run `{run}` never got past step `{before}`; nothing before `{step}` can be reused")]
    NotReached {
        run: String,
        step: String,
        before: String,
    },
    #[error("run `{run}` completed and its checkpoints were not kept (together over 4 MiB); retry it from the start (`--from {first}`)")]
    NotKept { run: String, first: String },
    #[error("`{step}` is not a step run `{run}` had; after an edit, retry from a step it had ({})", had.join(", "))]
    NewStep {
        step: String,
        run: String,
        had: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How the workflow's top-level steps differ from those a run recorded.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

/// Plans a retry of `run` (whose workflow, loaded again, is `wf`) from the
/// top-level step `from`, or from its latest checkpoint.
pub fn plan(
    store: &dyn RunStore,
    run: &RunRecord,
    wf: &Workflow,
    from: Option<&str>,
) -> Result<RetryPlan, RetryError> {
    if !run.status.is_finished() && !run.is_interrupted() {
        return Err(RetryError::StillGoing {
            run: run.id.clone(),
            status: run.status.as_str(),
        });
    }
    if version_of(wf) != run.version {
        return Err(RetryError::Changed {
            file: run.file.clone(),
            run: run.id.clone(),
        });
    }
    plan_positions(store, run, wf, from)
}

/// Plans a retry of `run` although its workflow changed since (`retry
/// --force`): steps are matched by id, so the run continues at the step of
/// that id (`from`, else the step it stopped at) with what the steps before
/// it recorded. Also says which top-level steps were added and removed.
pub fn plan_forced(
    store: &dyn RunStore,
    run: &RunRecord,
    wf: &Workflow,
    from: Option<&str>,
) -> Result<(RetryPlan, Changes), RetryError> {
    if version_of(wf) == run.version {
        return plan(store, run, wf, from).map(|p| (p, Changes::default()));
    }
    if !run.status.is_finished() && !run.is_interrupted() {
        return Err(RetryError::StillGoing {
            run: run.id.clone(),
            status: run.status.as_str(),
        });
    }
    // The run's top-level steps, by the index they had then.
    let mut had: Vec<(usize, String)> = store
        .steps_of(&run.id)?
        .into_iter()
        .filter(|s| s.depth == 0)
        .map(|s| (s.top_index, s.step_id))
        .collect();
    had.sort();
    had.dedup();
    let now: Vec<&str> = wf.steps.iter().map(|s| s.id.as_str()).collect();
    let changes = Changes {
        added: now
            .iter()
            .filter(|id| !had.iter().any(|(_, h)| h == *id))
            .map(|s| s.to_string())
            .collect(),
        removed: had
            .iter()
            .filter(|(_, h)| !now.contains(&h.as_str()))
            .map(|(_, h)| h.clone())
            .collect(),
    };
    let target = match from {
        Some(f) => f.to_string(),
        // Where it stopped: the failed step, else the step after the last
        // one it recorded.
        None => run
            .error_step
            .clone()
            .filter(|e| had.iter().any(|(_, h)| h == e))
            .or_else(|| {
                let last = had.last().map(|(i, _)| *i).unwrap_or(0);
                now.get(last).map(|s| s.to_string())
            })
            .unwrap_or_default(),
    };
    let Some(new_index) = now.iter().position(|s| *s == target) else {
        return Err(RetryError::NoSuchStep {
            step: target,
            file: run.file.clone(),
            steps: now.iter().map(|s| s.to_string()).collect(),
        });
    };
    let old_index = match had.iter().find(|(_, h)| *h == target) {
        Some((i, _)) => i.saturating_sub(1),
        None => {
            return Err(RetryError::NewStep {
                step: target,
                run: run.id.clone(),
                had: had.into_iter().map(|(_, h)| h).collect(),
            })
        }
    };
    let mut checkpoint = match old_index {
        0 => Checkpoint::default(),
        i => store
            .checkpoint(&run.id, Some(i))?
            .ok_or_else(|| RetryError::NotReached {
                run: run.id.clone(),
                step: target.clone(),
                before: had
                    .iter()
                    .find(|(n, _)| *n == i)
                    .map(|(_, h)| h.clone())
                    .unwrap_or_default(),
            })?,
    };
    checkpoint.next_step = new_index;
    let inputs = match &run.inputs {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    Ok((
        RetryPlan {
            of: run.id.clone(),
            inputs,
            // The old run's step rows before the target are copied.
            reused: old_index,
            checkpoint,
        },
        changes,
    ))
}

/// [`plan`] once the versions are known to agree: steps by position.
fn plan_positions(
    store: &dyn RunStore,
    run: &RunRecord,
    wf: &Workflow,
    from: Option<&str>,
) -> Result<RetryPlan, RetryError> {
    let index = match from {
        None => None,
        Some(step) => match wf.steps.iter().position(|s| s.id == step) {
            Some(i) => Some(i),
            None => {
                return Err(RetryError::NoSuchStep {
                    step: step.to_string(),
                    file: run.file.clone(),
                    steps: wf.steps.iter().map(|s| s.id.clone()).collect(),
                })
            }
        },
    };
    let checkpoint = match index {
        Some(0) => Some(Checkpoint::default()),
        _ => store.checkpoint(&run.id, index)?,
    };
    let checkpoint = match (checkpoint, index) {
        (Some(c), _) => c,
        (None, None) => Checkpoint::default(),
        (None, Some(_)) if run.status == super::RunStatus::Completed => {
            return Err(RetryError::NotKept {
                run: run.id.clone(),
                first: wf.steps.first().map(|s| s.id.clone()).unwrap_or_default(),
            })
        }
        (None, Some(i)) => {
            return Err(RetryError::NotReached {
                run: run.id.clone(),
                step: wf.steps[i].id.clone(),
                before: wf.steps[i - 1].id.clone(),
            })
        }
    };
    let inputs = match &run.inputs {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    Ok(RetryPlan {
        of: run.id.clone(),
        inputs,
        reused: checkpoint.next_step,
        checkpoint,
    })
}
