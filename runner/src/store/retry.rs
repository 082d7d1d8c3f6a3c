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
    #[error(transparent)]
    Store(#[from] StoreError),
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
