//! `for_each` and the collection kinds (map, filter, reduce): the items,
//! the loop's variables, one pass per item (side by side when asked).

use super::{restore, Engine, Failure, RunConfig, RunState};
use crate::format::model::{OnError, Step, Workflow};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

/// The variables a `for_each` sets per item.
pub(super) struct LoopNames<'a> {
    pub(super) item: &'a str,
    pub(super) index: Option<&'a str>,
}

impl LoopNames<'_> {
    pub(super) fn keys(&self) -> Vec<String> {
        let mut k = vec![self.item.to_string(), "loop".to_string()];
        k.extend(self.index.map(str::to_string));
        k
    }

    pub(super) fn set(&self, st: &mut RunState, item: Value, i: usize, n: usize) {
        st.vars_mut().insert(self.item.to_string(), item);
        if let Some(iv) = self.index {
            st.vars_mut().insert(iv.to_string(), json!(i));
        }
        st.vars_mut().insert(
            "loop".into(),
            json!({"index": i, "index1": i + 1, "first": i == 0, "last": i + 1 == n, "length": n}),
        );
    }
}

impl Engine {
    /// `items` rendered, which must give a list.
    pub(super) fn items(
        &self,
        step: &Step,
        items: &Value,
        st: &RunState,
    ) -> Result<Vec<Value>, Failure> {
        // The peer's words first (a workflow may test `error.message`), then
        // what was given; null is most often a misspelt or unset variable.
        let got = match self.render(step, &["items"], items, st)? {
            Value::Array(a) => return Ok(a),
            Value::Null => "`items` gave null (a variable no step or input set?)".to_string(),
            other => format!(
                "`items` gave {}",
                marktoflow_steps::core::error::type_name(&other)
            ),
        };
        Err(self.fail(
            step,
            step.field_pos(&["items"]),
            format!("Items must be an array: {got}"),
        ))
    }

    /// Runs the steps once per item: in order, or up to `max` items at once,
    /// each on its own copy of the variables (merged back in item order).
    /// With `on_error: continue` a failing item is recorded and the loop goes on.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn exec_for_each(
        &self,
        wf: &Workflow,
        step: &Step,
        items: &Value,
        names: LoopNames<'_>,
        steps: &[Step],
        max: usize,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<Value, Failure> {
        let items = self.items(step, items, st)?;
        let n = items.len();
        let keep_going = step.on_error.action == OnError::Continue;
        let saved: Vec<(String, Option<Value>)> = names
            .keys()
            .into_iter()
            .map(|k| {
                let v = st.variables.get(&k).cloned();
                (k, v)
            })
            .collect();
        let mut results = Vec::with_capacity(n);
        if max <= 1 {
            for (i, item) in items.into_iter().enumerate() {
                names.set(st, item, i, n);
                st.iterations.push(format!("{}/{n}", i + 1));
                let r = self.exec_list(wf, steps, st, cfg, depth + 1, false).await;
                st.iterations.pop();
                match r {
                    Ok(o) => results.push(Value::Array(o)),
                    Err(f) if keep_going && !f.cancelled => {
                        results.push(json!({"error": f.message}))
                    }
                    Err(f) => {
                        restore(st, saved);
                        return Err(f);
                    }
                }
            }
            restore(st, saved);
            return Ok(Value::Array(results));
        }
        let before = st.variables.clone();
        let mut fork = st.clone();
        fork.records = Vec::new();
        let mut tasks = Vec::with_capacity(n);
        for (i, item) in items.into_iter().enumerate() {
            let mut ist = fork.clone();
            names.set(&mut ist, item, i, n);
            ist.iterations.push(format!("{}/{n}", i + 1));
            tasks.push(async move {
                let r = self
                    .exec_list(wf, steps, &mut ist, cfg, depth + 1, false)
                    .await;
                (r, ist)
            });
        }
        let done: Vec<_> = stream::iter(tasks).buffered(max).collect().await;
        let loop_keys = names.keys();
        let mut failure = None;
        for (r, ist) in done {
            st.records.extend(ist.records);
            for (k, v) in std::sync::Arc::unwrap_or_clone(ist.meta) {
                st.meta_mut().insert(k, v);
            }
            if ist.set_outputs.is_some() {
                st.set_outputs = ist.set_outputs;
            }
            if ist.exit.is_some() {
                st.exit = ist.exit;
            }
            for (k, v) in std::sync::Arc::unwrap_or_clone(ist.variables) {
                if !loop_keys.contains(&k) && before.get(&k) != Some(&v) {
                    st.vars_mut().insert(k, v);
                }
            }
            match r {
                Ok(o) => results.push(Value::Array(o)),
                Err(f) if keep_going && !f.cancelled => results.push(json!({"error": f.message})),
                Err(f) => {
                    failure.get_or_insert(f);
                }
            }
        }
        match failure {
            Some(f) => Err(f),
            None => Ok(Value::Array(results)),
        }
    }
}
