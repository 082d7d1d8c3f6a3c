//! `parallel`: branches side by side, each on its own copy of the variables.

use super::{Engine, Failure, RunConfig, RunState};
use crate::format::model::{OnError, Step, Workflow};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Map, Value};

impl Engine {
    /// Runs the branches concurrently (at most `max` at a time), each on its
    /// own copy of the variables. Afterwards `<branch id>` holds the variables
    /// that branch set, so `{{ left.value }}` reaches them.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn exec_parallel(
        &self,
        wf: &Workflow,
        step: &Step,
        branches: &[crate::format::model::Branch],
        max: usize,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<Value, Failure> {
        let before = st.variables.clone();
        let mut fork = st.clone();
        fork.records = Vec::new();
        // Collected first: a lazy `map` here trips the compiler's Send check.
        let mut tasks = Vec::with_capacity(branches.len());
        for b in branches {
            let mut bst = fork.clone();
            tasks.push(async move {
                let r = self
                    .exec_list(wf, &b.steps, &mut bst, cfg, depth + 1, false)
                    .await;
                (b, r, bst)
            });
        }
        let results: Vec<_> = stream::iter(tasks).buffered(max.max(1)).collect().await;
        let mut out = Map::new();
        let mut first_failure: Option<(String, Failure)> = None;
        for (b, r, bst) in results {
            st.records.extend(bst.records);
            for (k, v) in std::sync::Arc::unwrap_or_clone(bst.meta) {
                st.meta_mut().insert(k, v);
            }
            if bst.set_outputs.is_some() {
                st.set_outputs = bst.set_outputs;
            }
            if bst.exit.is_some() {
                st.exit = bst.exit;
            }
            match r {
                Ok(_) => {
                    let set: Map<String, Value> = std::sync::Arc::unwrap_or_clone(bst.variables)
                        .into_iter()
                        .filter(|(k, v)| before.get(k) != Some(v))
                        .collect();
                    st.vars_mut()
                        .insert(b.id.clone(), Value::Object(set.clone()));
                    out.insert(
                        b.id.clone(),
                        json!({"status": "completed", "variables": set}),
                    );
                }
                Err(f) => {
                    out.insert(
                        b.id.clone(),
                        json!({"status": "failed", "error": f.message}),
                    );
                    if first_failure.is_none() {
                        first_failure = Some((b.id.clone(), f));
                    }
                }
            }
        }
        match first_failure {
            // With `on_error: continue` the step succeeds with what the
            // successful branches produced.
            Some((id, f)) if step.on_error.action != OnError::Continue || f.cancelled => {
                Err(Failure {
                    // The peer's words: a workflow may test them.
                    message: format!("Branch {id} failed: {}", f.message),
                    ..f
                })
            }
            _ => Ok(Value::Object(out)),
        }
    }
}
