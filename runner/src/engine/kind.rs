//! What each kind of step does once it runs: actions, scripts, `set`,
//! `if`/`switch`, `try`, `wait`, `while`, and the built-in core operations.

use super::loops::LoopNames;
use super::{restore, Done, Engine, Failure, KindFuture, RunConfig, RunState, CORE_TEMPLATE_FUEL};
use crate::format::model::{Step, StepKind, Workflow};
use crate::template::Templates;
use serde_json::{json, Map, Value};

pub(super) fn locals(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

pub(super) fn ran((r, retries): (Result<Value, Failure>, u32)) -> (Result<Done, Failure>, u32) {
    (r.map(Done::Ran), retries)
}

impl Engine {
    pub(super) fn exec_kind<'a>(
        &'a self,
        wf: &'a Workflow,
        step: &'a Step,
        st: &'a mut RunState,
        cfg: &'a RunConfig,
        depth: usize,
    ) -> KindFuture<'a> {
        Box::pin(async move {
            match &step.kind {
                StepKind::Action { .. } => ran(self.exec_action(step, st, cfg, depth).await),
                StepKind::If {
                    condition,
                    then,
                    otherwise,
                } => {
                    let r = async {
                        let take = self.condition(step, &["condition".into()], condition, st)?;
                        let branch = if take { then } else { otherwise };
                        let outs = self
                            .exec_list(wf, branch, st, cfg, depth + 1, false)
                            .await?;
                        let out =
                            json!({"branch": if take { "then" } else { "else" }, "outputs": outs});
                        // No branch to run: skipped, as in the peer.
                        Ok(if branch.is_empty() {
                            Done::Skipped(out)
                        } else {
                            Done::Ran(out)
                        })
                    }
                    .await;
                    (r, 0)
                }
                StepKind::Switch {
                    expression,
                    cases,
                    default,
                } => {
                    let r = async {
                        let v = self.render(
                            step,
                            &["expression"],
                            &Value::String(expression.clone()),
                            st,
                        )?;
                        let key = match &v {
                            Value::String(s) => s.clone(),
                            Value::Null => String::new(),
                            other => other.to_string(),
                        };
                        let branch = cases
                            .iter()
                            .find(|(k, _)| *k == key)
                            .map(|(_, s)| s)
                            .unwrap_or(default);
                        let outs = self
                            .exec_list(wf, branch, st, cfg, depth + 1, false)
                            .await?;
                        let out = json!({"case": key, "outputs": outs});
                        Ok(if branch.is_empty() {
                            Done::Skipped(out)
                        } else {
                            Done::Ran(out)
                        })
                    }
                    .await;
                    (r, 0)
                }
                StepKind::ForEach {
                    items,
                    item_variable,
                    index_variable,
                    steps,
                    max_concurrent,
                } => {
                    let names = LoopNames {
                        item: item_variable,
                        index: index_variable.as_deref(),
                    };
                    let r = self
                        .exec_for_each(
                            wf,
                            step,
                            items,
                            names,
                            steps,
                            *max_concurrent,
                            st,
                            cfg,
                            depth,
                        )
                        .await;
                    // Every item gives an entry: empty means no items, skipped.
                    let r = r.map(|out| match out.as_array() {
                        Some(a) if a.is_empty() => Done::Skipped(out),
                        _ => Done::Ran(out),
                    });
                    (r, 0)
                }
                StepKind::While {
                    condition,
                    max_iterations,
                    steps,
                    initial,
                } => {
                    let r = async {
                        for (name, v) in initial {
                            let v = self.render(step, &["variables", name], v, st)?;
                            st.vars_mut().insert(name.clone(), v);
                        }
                        let mut n = 0u64;
                        // With `on_error: continue`, a failed pass is noted
                        // and the next one runs (as the peer does).
                        let keep_going = step.on_error.action == crate::format::model::OnError::Continue;
                        let mut errors = Vec::new();
                        while self.condition(step, &["condition".into()], condition, st)? {
                            if n >= *max_iterations {
                                return Err(self.fail(
                                    step,
                                    step.field_pos(&["condition"]),
                                    // The peer's words first: a workflow may test them.
                                    format!("Max iterations ({max_iterations}) exceeded: the loop was still running after `max_iterations` passes"),
                                ));
                            }
                            st.iterations.push((n + 1).to_string());
                            let r = self.exec_list(wf, steps, st, cfg, depth + 1, false).await;
                            st.iterations.pop();
                            match r {
                                Ok(_) => {}
                                Err(f) if keep_going && !f.cancelled => {
                                    errors.push(json!({"iteration": n + 1, "error": f.message}))
                                }
                                Err(f) => return Err(f),
                            }
                            n += 1;
                        }
                        Ok(if errors.is_empty() {
                            json!({"iterations": n})
                        } else {
                            json!({"iterations": n, "errors": errors})
                        })
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Try {
                    body,
                    catch,
                    finally,
                } => {
                    let r = async {
                        let res = self.exec_list(wf, body, st, cfg, depth + 1, false).await;
                        let mut outcome = match res {
                            Ok(o) => Ok(json!({"outputs": o})),
                            Err(f) if f.cancelled => Err(f),
                            Err(f) if !catch.is_empty() => {
                                let saved = st.variables.get("error").cloned();
                                // The author's words (a sub-workflow's, a retried
                                // action's own); ours, with where and how often,
                                // as `detail`.
                                let message =
                                    f.authored.as_ref().map_or(&f.message, |a| &a.message);
                                let mut error = json!({"message": message, "step": f.step_id});
                                if let Some(c) = &f.code {
                                    error["code"] = json!(c);
                                }
                                if let Some(a) = f.authored.as_ref().filter(|a| a.attempts > 1) {
                                    error["attempts"] = json!(a.attempts);
                                }
                                if f.authored.is_some() {
                                    error["detail"] = json!(f.message);
                                }
                                st.vars_mut().insert("error".into(), error);
                                let c = self.exec_list(wf, catch, st, cfg, depth + 1, false).await;
                                restore(st, vec![("error".into(), saved)]);
                                c.map(|o| json!({"caught": f.message, "outputs": o}))
                            }
                            Err(f) => Err(f),
                        };
                        if !finally.is_empty() {
                            if let Err(f) =
                                self.exec_list(wf, finally, st, cfg, depth + 1, false).await
                            {
                                outcome = Err(f);
                            }
                        }
                        outcome
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Ask(ask) => (self.exec_ask(wf, step, ask, st, cfg, depth).await, 0),
                StepKind::Wait { duration } => {
                    let r = async {
                        let d = self.render(step, &["duration"], duration, st)?;
                        let d = marktoflow_steps::builtin::parse_duration(&d)
                            .map_err(|e| self.fail(step, step.field_pos(&["duration"]), e))?;
                        tokio::select! {
                            _ = tokio::time::sleep(d) => {
                                let ms = d.as_millis() as u64;
                                Ok(json!({"waited": ms, "waited_ms": ms}))
                            }
                            _ = cfg.caps.cancel.cancelled() => Err(Failure { cancelled: true, ..self.fail(step, step.pos, "cancelled") }),
                        }
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Map {
                    items,
                    item_variable,
                    expression,
                } => {
                    let r = async {
                        let items = self.items(step, items, st)?;
                        let base = self.context(st);
                        let mut out = Vec::with_capacity(items.len());
                        for (i, item) in items.into_iter().enumerate() {
                            let ctx = Templates::with_locals(
                                &base,
                                &locals(&[(item_variable, item), ("index", json!(i))]),
                            );
                            let v = self.templates.render_value(expression, &ctx).map_err(|e| {
                                self.template_failure(step, &["expression".into()], e)
                            })?;
                            out.push(v);
                        }
                        Ok(Value::Array(out))
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Filter {
                    items,
                    item_variable,
                    condition,
                } => {
                    let r =
                        async {
                            let items = self.items(step, items, st)?;
                            let base = self.context(st);
                            let mut out = Vec::new();
                            for (i, item) in items.into_iter().enumerate() {
                                let ctx = Templates::with_locals(
                                    &base,
                                    &locals(&[(item_variable, item.clone()), ("index", json!(i))]),
                                );
                                let keep = self.templates.eval_condition(condition, &ctx).map_err(
                                    |e| self.template_failure(step, &["condition".into()], e),
                                )?;
                                if keep {
                                    out.push(item);
                                }
                            }
                            Ok(Value::Array(out))
                        }
                        .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Reduce {
                    items,
                    item_variable,
                    accumulator_variable,
                    initial_value,
                    expression,
                } => {
                    let r = async {
                        let items = self.items(step, items, st)?;
                        let mut acc = self.render(step, &["initial_value"], initial_value, st)?;
                        let base = self.context(st);
                        for (i, item) in items.into_iter().enumerate() {
                            let ctx = Templates::with_locals(
                                &base,
                                &locals(&[
                                    (item_variable, item),
                                    (accumulator_variable, acc),
                                    ("index", json!(i)),
                                ]),
                            );
                            acc = self.templates.render_value(expression, &ctx).map_err(|e| {
                                self.template_failure(step, &["expression".into()], e)
                            })?;
                        }
                        Ok(acc)
                    }
                    .await;
                    (r.map(Done::Ran), 0)
                }
                StepKind::Parallel {
                    branches,
                    max_concurrent,
                } => ran((
                    self.exec_parallel(wf, step, branches, *max_concurrent, st, cfg, depth)
                        .await,
                    0,
                )),
                StepKind::Merge {
                    mode,
                    sources,
                    match_field,
                    keep_first,
                } => {
                    let r = super::compute::compute(|| {
                        self.exec_merge(
                            step,
                            *mode,
                            sources,
                            match_field.as_deref(),
                            *keep_first,
                            st,
                        )
                    });
                    (r.map(Done::Ran), 0)
                }
                StepKind::Spawn {
                    agents,
                    items,
                    wait,
                    on_error,
                    max_concurrent,
                } => {
                    let r = match items {
                        None => {
                            self.exec_spawn(step, agents, *wait, *on_error, st, cfg, depth)
                                .await
                        }
                        Some(items) => {
                            self.exec_spawn_map(
                                step,
                                &agents[0],
                                items,
                                *max_concurrent,
                                *on_error,
                                st,
                                cfg,
                                depth,
                            )
                            .await
                        }
                    };
                    ran((r, 0))
                }
                StepKind::SubWorkflow { path, inputs } => ran((
                    self.exec_subworkflow(wf, step, path, inputs, st, cfg, depth)
                        .await,
                    0,
                )),
            }
        })
    }

    /// `core.transform` / `core.template`: template fields stay as written,
    /// the rest is rendered, then [`crate::engine::core_ops`] evaluates per item.
    pub(super) fn core_op(
        &self,
        step: &Step,
        method: &str,
        inputs: &Value,
        st: &RunState,
    ) -> Result<Value, Failure> {
        let raw_names = crate::engine::core_ops::raw_fields(method);
        let empty = Map::new();
        let all = inputs.as_object().unwrap_or(&empty);
        let (raw, others): (Map<String, Value>, Map<String, Value>) = all
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .partition(|(k, _)| raw_names.contains(&k.as_str()));
        let rendered = self.render(step, &["inputs"], &Value::Object(others), st)?;
        let raw = Value::Object(raw);
        let base = self.context(st);
        let result = match method {
            "transform" => {
                crate::engine::core_ops::transform(&self.templates, &base, &rendered, &raw)
            }
            _ => {
                let fueled = self
                    .fueled
                    .get_or_init(|| Templates::with_fuel(CORE_TEMPLATE_FUEL));
                crate::engine::core_ops::template(&self.templates, fueled, &base, &rendered, &raw)
            }
        };
        result.map_err(|e| match e {
            crate::engine::core_ops::OpError::Input { field, message } => {
                let pos = step.field_pos(&["inputs", field]);
                self.fail(step, pos, message)
            }
            crate::engine::core_ops::OpError::Template { field, error } => {
                self.template_failure(step, &["inputs".into(), field.into()], error)
            }
        })
    }
}
