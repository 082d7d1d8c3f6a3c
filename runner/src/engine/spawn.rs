//! `parallel.spawn` and `parallel.map`: the peer's parallel agents, with
//! its result shapes. Each agent is an agent step (see
//! `format::model::spawn`) run on its own copy of the variables; its
//! prompt is rendered when it starts (with `item` and `itemIndex` for a
//! map). Agents not waited for (`wait: any`, …) are stopped.

use super::{Engine, Failure, RunConfig, RunState};
use crate::format::model::{SpawnOnError, SpawnWait, Step};
use futures_util::stream::{self, FuturesUnordered, StreamExt};
use serde_json::{json, Map, Value};
use std::time::Instant;

/// One agent's run, as the peer reports it.
struct Outcome {
    id: String,
    result: Result<Value, Failure>,
    started: i64,
    completed: i64,
}

impl Outcome {
    /// `{id, success, output | error, timing: {started, completed,
    /// duration}, cost}` (no provider reports a cost: 0, as in the peer).
    fn report(&self) -> Value {
        let mut r = json!({
            "id": self.id,
            "success": self.result.is_ok(),
            "timing": {
                "started": iso(self.started),
                "completed": iso(self.completed),
                "duration": self.completed - self.started,
            },
            "cost": 0,
        });
        match &self.result {
            Ok(v) => r["output"] = v.clone(),
            Err(f) => r["error"] = json!(f.message),
        }
        r
    }
}

use marktoflow_steps::core::time::iso_ms as iso;

impl Engine {
    /// Runs one agent step on `st` (a copy), timed by the run's clock.
    async fn run_agent(
        &self,
        agent: &Step,
        id: String,
        mut st: RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Outcome {
        let started = st.clock.now_ms();
        let (result, _) = self.exec_action(agent, &mut st, cfg, depth + 1).await;
        Outcome {
            id,
            result,
            started,
            completed: st.clock.now_ms(),
        }
    }

    /// `parallel.spawn`: every agent at once; returns `{results, successful,
    /// failed, timing, costs}` once `wait` of them finished.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn exec_spawn(
        &self,
        step: &Step,
        agents: &[Step],
        wait: SpawnWait,
        on_error: SpawnOnError,
        st: &RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<Value, Failure> {
        let started = st.clock.now_ms();
        let t0 = Instant::now();
        let n = agents.len();
        let target = match wait {
            SpawnWait::All => n,
            SpawnWait::Any => 1,
            SpawnWait::Majority => n.div_ceil(2),
            SpawnWait::Count(k) => k.min(n),
        };
        let mut running: FuturesUnordered<_> = agents
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let run = self.run_agent(a, a.id.clone(), st.clone(), cfg, depth);
                async move { (i, run.await) }
            })
            .collect();
        let mut done: Vec<(usize, Outcome)> = Vec::with_capacity(n);
        while done.len() < target {
            let Some(d) = running.next().await else { break };
            done.push(d);
        }
        // The agents not waited for stop here.
        drop(running);
        // With `wait: all` the results are in the agents' order, else in
        // the order they finished (as the peer records them).
        if wait == SpawnWait::All {
            done.sort_by_key(|(i, _)| *i);
        }
        // A cancelled run stops here, as the map does.
        let cancelled = done
            .iter()
            .filter_map(|(_, o)| o.result.as_ref().err())
            .find(|f| f.cancelled);
        if let Some(f) = cancelled {
            return Err(f.clone());
        }
        let mut results = Map::new();
        let mut by_agent = Map::new();
        let (mut ok, mut failed) = (Vec::new(), Vec::new());
        for (_, o) in &done {
            results.insert(o.id.clone(), o.report());
            by_agent.insert(o.id.clone(), json!(0));
            if o.result.is_ok() {
                ok.push(json!(o.id));
            } else {
                failed.push(o);
            }
        }
        let failures: Vec<String> = failed
            .iter()
            .map(|o| match &o.result {
                Err(f) => format!("{}: {}", o.id, f.message),
                Ok(_) => String::new(),
            })
            .collect();
        match on_error {
            SpawnOnError::Fail if !failures.is_empty() => {
                return Err(self.fail(
                    step,
                    step.pos,
                    format!("Parallel execution failed: {}", failures.join(", ")),
                ));
            }
            SpawnOnError::Partial if !done.is_empty() && failures.len() == done.len() => {
                return Err(self.fail(
                    step,
                    step.pos,
                    format!(
                        "All agents failed in partial error mode: {}",
                        failures.join(", ")
                    ),
                ));
            }
            _ => {}
        }
        let completed = st.clock.now_ms();
        Ok(json!({
            "results": results,
            "successful": ok,
            "failed": failed.iter().map(|o| json!(o.id)).collect::<Vec<_>>(),
            "timing": {
                "duration": t0.elapsed().as_millis() as u64,
                "started": iso(started),
                "completed": iso(completed),
            },
            "costs": {"total": 0, "byAgent": by_agent},
        }))
    }

    /// `parallel.map`: the agent once per item (`item`, `itemIndex`), at
    /// most `max` at once; returns each item's output, in the items' order
    /// (`{error}` for an item that failed, with `onError: continue` or
    /// `partial`).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn exec_spawn_map(
        &self,
        step: &Step,
        agent: &Step,
        items: &Value,
        max: usize,
        on_error: SpawnOnError,
        st: &RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<Value, Failure> {
        let items = self.items(step, items, st)?;
        let n = items.len();
        let most = crate::format::model::MAX_MAP_ITEMS;
        if n > most {
            return Err(self.fail(
                step,
                step.field_pos(&["items"]),
                format!("`items` holds {n} items; a `parallel.map` goes over at most {most}"),
            ));
        }
        let runs = items.into_iter().enumerate().map(|(i, item)| {
            let mut fork = st.clone();
            fork.records = Vec::new();
            fork.vars_mut().insert("item".into(), item);
            fork.vars_mut().insert("itemIndex".into(), json!(i));
            self.run_agent(agent, format!("item_{i}"), fork, cfg, depth)
        });
        let done: Vec<Outcome> = stream::iter(runs).buffered(max.max(1)).collect().await;
        let failures: Vec<&Outcome> = done.iter().filter(|o| o.result.is_err()).collect();
        let first = failures.first().and_then(|o| o.result.as_ref().err());
        match (on_error, first) {
            (_, Some(f)) if f.cancelled => return Err(f.clone()),
            (SpawnOnError::Fail, Some(f)) => {
                return Err(self.fail(
                    step,
                    step.pos,
                    format!(
                        "parallel.map failed: {} of {n} items failed (first: {}: {})",
                        failures.len(),
                        failures[0].id,
                        f.message
                    ),
                ));
            }
            (SpawnOnError::Partial, Some(f)) if failures.len() == n => {
                return Err(self.fail(
                    step,
                    step.pos,
                    format!(
                        "All items failed in partial error mode (first: {})",
                        f.message
                    ),
                ));
            }
            _ => {}
        }
        Ok(Value::Array(
            done.into_iter()
                .map(|o| match o.result {
                    Ok(v) => v,
                    Err(f) => json!({"error": f.message}),
                })
                .collect(),
        ))
    }
}
