//! One step: its conditions, pauses, retries and error policy around its
//! kind, and the events it emits; step lists and the top level.

use super::debug;
use super::{
    bounded_nested, human_duration, stop_before, Checkpoint, Done, Engine, Failure, RunConfig,
    RunEvent, RunState, StepRecord, StepStatus,
};
use crate::diag::Pos;
use crate::format::model::{OnError, Step, StepKind, Workflow};
use crate::template::{TemplateError, Templates};
use serde_json::{json, Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::time::Instant;

impl Engine {
    /// The top-level steps from `start`, with a checkpoint after each one.
    pub(super) async fn exec_top(
        &self,
        wf: &Workflow,
        start: usize,
        st: &mut RunState,
        cfg: &RunConfig,
    ) -> Result<(), Failure> {
        for (i, step) in wf.steps.iter().enumerate().skip(start) {
            // As in `exec_list`, with the index counted from the whole list.
            if let Some(stop) = stop_before(cfg, step) {
                return Err(stop);
            }
            if cfg
                .pause
                .as_ref()
                .is_some_and(|p| p.load(std::sync::atomic::Ordering::SeqCst))
            {
                return Err(self.paused(step, st, cfg));
            }
            if let Some(v) = self.exec_step(wf, step, st, cfg, 0, i + 1).await? {
                st.last_top_output = Some(v);
            }
            cfg.emit(RunEvent::Checkpoint(Arc::new(Checkpoint {
                next_step: i + 1,
                variables: (*st.variables).clone(),
                steps: (*st.meta).clone(),
                set_outputs: st.set_outputs.clone(),
                last_output: st.last_top_output.clone(),
            })));
            // Once means once: the next step starts only when this one's
            // checkpoint is durable, so a crash now resumes after it.
            if let Some(recorded) = &cfg.recorded {
                if let Err(why) = recorded().await {
                    return Err(Failure {
                        authored: None,
                        code: None,
                        message: format!(
                            "stopped after step `{}`: its checkpoint could not be recorded ({why}); no further step runs without a record",
                            step.id
                        ),
                        step_id: step.id.clone(),
                        step_name: step.display_name().to_string(),
                        pos: step.pos,
                        cancelled: false,
                    });
                }
            }
        }
        Ok(())
    }

    pub(super) fn exec_list<'a>(
        &'a self,
        wf: &'a Workflow,
        steps: &'a [Step],
        st: &'a mut RunState,
        cfg: &'a RunConfig,
        depth: usize,
        top: bool,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Value>, Failure>> + Send + 'a>> {
        Box::pin(async move {
            let mut outputs = Vec::new();
            for (i, step) in steps.iter().enumerate() {
                if let Some(stop) = stop_before(cfg, step) {
                    return Err(stop);
                }
                let index = if top { i + 1 } else { 0 };
                let out = self.exec_step(wf, step, st, cfg, depth, index).await?;
                if let Some(v) = out {
                    if top {
                        st.last_top_output = Some(v.clone());
                    }
                    if step.output_variable.is_some() {
                        outputs.push(v);
                    }
                }
            }
            Ok(outputs)
        })
    }

    /// Runs one step; `Ok(None)` when it was skipped or failed with `continue`.
    pub(super) async fn exec_step(
        &self,
        wf: &Workflow,
        step: &Step,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
        index: usize,
    ) -> Result<Option<Value>, Failure> {
        if let Some(debugger) = &cfg.debugger {
            if self.pause(debugger.as_ref(), step, st, depth) == debug::Resume::Stop {
                cfg.caps.cancel.cancel();
                return Err(Failure {
                    cancelled: true,
                    ..self.fail(step, step.pos, "stopped in the debugger")
                });
            }
        }
        let started = Instant::now();
        let emit = |e: RunEvent| cfg.emit(e);
        let detail = match &step.kind {
            StepKind::Action { action, .. } => Some(action.clone()),
            _ => None,
        };
        let shown = if st.iterations.is_empty() {
            step.display_name().to_string()
        } else {
            format!("{} [{}]", step.display_name(), st.iterations.join("]["))
        };
        emit(RunEvent::StepStarted {
            id: step.id.clone(),
            name: shown.clone(),
            depth,
            index,
            kind: step.kind.label(),
            detail,
        });
        let finish = |st: &mut RunState,
                      status: StepStatus,
                      output: Value,
                      error: Option<String>,
                      retries: u32| {
            let duration_ms = started.elapsed().as_millis() as u64;
            st.meta_mut().insert(
                step.id.clone(),
                // `retryCount`: the peer's name for `retries`.
                json!({"status": status, "output": output, "error": error, "retries": retries, "retryCount": retries, "duration_ms": duration_ms}),
            );
            let output = if depth > 0 {
                bounded_nested(output)
            } else {
                output
            };
            // An action's own (a container's steps took theirs already).
            let inputs = match step.kind {
                StepKind::Action { .. } => st.step_inputs.take(),
                _ => None,
            };
            emit(RunEvent::StepFinished {
                id: step.id.clone(),
                name: shown.clone(),
                depth,
                status,
                duration_ms,
                output: output.clone(),
                error: error.clone(),
                inputs,
            });
            st.records.push(StepRecord {
                id: step.id.clone(),
                name: shown.clone(),
                status,
                output,
                error,
                duration_ms,
                retries,
                depth,
            });
        };

        // `conditions:` all must hold, else the step is skipped.
        for (i, cond) in step.conditions.iter().enumerate() {
            let ok = self.condition(step, &["conditions".into(), i.to_string()], cond, st);
            match ok {
                Ok(true) => {}
                Ok(false) => {
                    finish(st, StepStatus::Skipped, Value::Null, None, 0);
                    return Ok(None);
                }
                Err(f) => {
                    finish(
                        st,
                        StepStatus::Failed,
                        Value::Null,
                        Some(f.message.clone()),
                        0,
                    );
                    return Err(f);
                }
            }
        }

        // Actions enforce their own timeout (it reaches scripts and providers);
        // every other kind is bounded here.
        // A wait's `timeout` is how long it stays open, not a timer here.
        let timed = |kind: &StepKind| !matches!(kind, StepKind::Action { .. } | StepKind::Ask(_));
        let (result, retries) = match (step.timeout, &step.kind) {
            (Some(t), kind) if timed(kind) => {
                match tokio::time::timeout(t, self.exec_kind(wf, step, st, cfg, depth)).await {
                    Ok(r) => r,
                    Err(_) => (
                        Err(self.fail(
                            step,
                            step.field_pos(&["timeout"]),
                            format!("timed out after {}", human_duration(t)),
                        )),
                        0,
                    ),
                }
            }
            _ => self.exec_kind(wf, step, st, cfg, depth).await,
        };
        // Rendering cannot be interrupted: a step that went past its timeout
        // inside a template (fuel bounds how far) still timed out.
        let result = match (step.timeout, result) {
            (Some(t), Ok(_)) if timed(&step.kind) && started.elapsed() > t => Err(self.fail(
                step,
                step.field_pos(&["timeout"]),
                format!("timed out after {}", human_duration(t)),
            )),
            (_, r) => r,
        };
        match result {
            Ok(done) => {
                let (status, mut output) = match done {
                    Done::Ran(v) => (StepStatus::Completed, v),
                    Done::Skipped(v) => (StepStatus::Skipped, v),
                };
                // As the peer's values are JavaScript objects: a workflow
                // written for it lists `{"503": …, "200": …}` as 200, 503.
                marktoflow_steps::core::js::order_keys(&mut output);
                // Unlike the peer, a skipped container still sets its
                // (empty) output, so later templates can rely on it.
                if let Some(var) = &step.output_variable {
                    st.vars_mut().insert(var.clone(), output.clone());
                }
                finish(st, status, output.clone(), None, retries);
                if st.exit.is_some() || st.rejected.is_some() {
                    // `workflow.exit` or a rejection: unwind to the top,
                    // nothing after it runs.
                    return Err(Failure {
                        cancelled: true,
                        ..self.fail(step, step.pos, "the workflow exited")
                    });
                }
                Ok(Some(output))
            }
            // Stopped to wait: recorded as waiting, with what it asks.
            Err(f) if f.cancelled && st.waiting.is_some() => {
                let asked = serde_json::to_value(&st.waiting).unwrap_or_default();
                finish(st, StepStatus::Waiting, asked, None, retries);
                Err(f)
            }
            // The steps around a `workflow.exit` completed.
            Err(f) if f.cancelled && st.exit.is_some() => {
                finish(st, StepStatus::Completed, Value::Null, None, retries);
                Err(f)
            }
            Err(f) => {
                finish(
                    st,
                    StepStatus::Failed,
                    Value::Null,
                    Some(f.message.clone()),
                    retries,
                );
                if step.on_error.action == OnError::Continue && !f.cancelled {
                    Ok(None)
                } else {
                    Err(f)
                }
            }
        }
    }

    pub(super) fn fail(&self, step: &Step, pos: Pos, message: impl Into<String>) -> Failure {
        Failure {
            authored: None,
            message: message.into(),
            code: None,
            step_id: step.id.clone(),
            step_name: step.display_name().to_string(),
            pos,
            cancelled: false,
        }
    }

    pub(super) fn context(&self, st: &RunState) -> minijinja::Value {
        Templates::clocked(
            Templates::context(
                &st.inputs,
                &st.variables,
                &Value::Object((*st.meta).clone()),
                &st.env,
            ),
            st.clock.clone(),
        )
    }

    pub(super) fn template_failure(
        &self,
        step: &Step,
        base: &[String],
        e: TemplateError,
    ) -> Failure {
        let mut path = base.to_vec();
        path.extend(e.path.iter().cloned());
        let pos = match e.line {
            Some(line) => step.string_pos(&path, line, e.col.unwrap_or(1)),
            None => step.spans.pos(&{
                let mut p = step.path.clone();
                p.extend(path.iter().cloned());
                p
            }),
        };
        self.fail(step, pos, format!("template error: {}", e.message))
    }

    pub(super) fn condition(
        &self,
        step: &Step,
        path: &[String],
        cond: &str,
        st: &RunState,
    ) -> Result<bool, Failure> {
        let ctx = self.context(st);
        self.templates
            .eval_condition(cond, &ctx)
            .map_err(|e| self.template_failure(step, path, e))
    }

    /// Asks `debugger` before `step` runs, with its inputs rendered now.
    pub(super) fn pause(
        &self,
        debugger: &dyn debug::Debugger,
        step: &Step,
        st: &mut RunState,
        depth: usize,
    ) -> debug::Resume {
        let raw_inputs = match &step.kind {
            StepKind::Action { inputs, .. } => Some(inputs),
            _ => None,
        };
        let (run_inputs, meta, env, clock) = (
            st.inputs.clone(),
            Value::Object((*st.meta).clone()),
            st.env.clone(),
            st.clock.clone(),
        );
        let eval = |v: &Value, vars: &Map<String, Value>| {
            let ctx = Templates::clocked(
                Templates::context(&run_inputs, vars, &meta, &env),
                clock.clone(),
            );
            self.templates.render_value(v, &ctx).map_err(|e| e.message)
        };
        debugger.before_step(debug::Pause {
            step,
            depth,
            variables: st.vars_mut(),
            raw_inputs,
            eval: &eval,
        })
    }

    pub(super) fn render(
        &self,
        step: &Step,
        path: &[&str],
        v: &Value,
        st: &RunState,
    ) -> Result<Value, Failure> {
        let ctx = self.context(st);
        let base: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        self.templates
            .render_value(v, &ctx)
            .map_err(|e| self.template_failure(step, &base, e))
    }
}
