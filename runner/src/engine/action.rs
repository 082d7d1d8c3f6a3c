//! Action steps: inputs rendered and checked against the action's contract,
//! the call made under the step's timeout with its own log and progress,
//! retried by the step's policy, then its fallback; failures placed in the
//! `.md` file.

use super::compute::{compute, compute_async};
use super::{
    bounded_ref, human_duration, retry_delay, substitute_env, ActionFuture, Engine, Event, Failure,
    RunConfig, RunEvent, RunState,
};
use crate::format::model::{Step, StepKind};
use marktoflow_steps::core::catalog;
use marktoflow_steps::core::{
    action::{Call, Capabilities},
    error::ActionError,
    signals::{LogLevel, LogLine, Progress},
};
use marktoflow_steps::registry::{ActionKind, Resolved};
use marktoflow_steps::ToolConfig;
use serde_json::{Map, Value};
use std::sync::Arc;

impl Engine {
    pub(super) fn exec_action<'a>(
        &'a self,
        step: &'a Step,
        st: &'a mut RunState,
        cfg: &'a RunConfig,
        depth: usize,
    ) -> ActionFuture<'a> {
        Box::pin(async move {
            let StepKind::Action {
                action,
                resolved,
                inputs,
            } = &step.kind
            else {
                unreachable!("exec_action is only called for action steps")
            };
            if resolved.spec.traits.engine_op {
                let st = &*st;
                let done = compute(|| self.core_op(step, &resolved.method, inputs, st));
                return (done, 0);
            }
            let policy = &step.on_error;
            let max_retries = policy.max_retries.unwrap_or(0);
            let tool = tool_config(resolved, cfg);
            let caps = step_caps(step, cfg);
            let mut attempt = 0u32;
            loop {
                // Inputs are rendered per attempt: a retry sees current state.
                let rendering = tokio::time::Instant::now();
                let rendered = match compute(|| self.action_inputs(step, resolved, inputs, st)) {
                    Ok(v) => v,
                    Err(f) => return (Err(f), attempt),
                };
                // Rendering cannot be interrupted; past the timeout, the
                // attempt has timed out before its call.
                if let Some(t) = step.timeout.filter(|t| rendering.elapsed() > *t) {
                    let message = format!("timed out after {}", human_duration(t));
                    let pos = step.field_pos(&["timeout"]);
                    return (Err(self.fail(step, pos, message)), attempt);
                }
                let code = rendered
                    .get("code")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let globals = script_globals(resolved, code, st);
                let key = idempotency_key(&cfg.run_id, step, depth, attempt + 1, &rendered);
                let call = Call {
                    action,
                    method: &resolved.method,
                    tool: tool.as_ref(),
                    declared: &st.tools,
                    model: step.model.as_deref(),
                    timeout: step.timeout,
                    globals: globals.as_ref(),
                    caps: &caps,
                    idempotency_key: Some(&key),
                };
                // Shown beside its output (the run's events mask secrets),
                // without the `context` a script is given unasked.
                st.step_inputs = Some(match &rendered {
                    Value::Object(m)
                        if resolved.kind == ActionKind::Script
                            && inputs.get("context").is_none() =>
                    {
                        let written: Map<String, Value> = m
                            .iter()
                            .filter(|(k, _)| *k != "context")
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        bounded_ref(&Value::Object(written))
                    }
                    other => bounded_ref(other),
                });
                // A test's mock stands in for the call.
                let mocked = cfg
                    .mocks
                    .as_ref()
                    .and_then(|m| m.instead(&step.id, action, resolved, &rendered));
                let done = match mocked {
                    Some(r) => r,
                    None => {
                        let called = call_with_timeout(resolved, &call, rendered);
                        if resolved.spec.traits.waits {
                            called.await
                        } else {
                            compute_async(called).await
                        }
                    }
                };
                let e = match done {
                    Ok(mut out) => {
                        // Outputs are set from here, before the step ends.
                        marktoflow_steps::core::js::order_keys(&mut out);
                        if resolved.spec.traits.sets_outputs {
                            st.set_outputs = Some(out.clone());
                        }
                        if resolved.spec.traits.exits {
                            if let Some(o) = out.get("outputs").filter(|o| o.is_object()) {
                                st.set_outputs = Some(o.clone());
                            }
                            st.exit = Some(out.clone());
                        }
                        return (Ok(out), attempt);
                    }
                    // A tool call that waits for a person: the run stops
                    // here (never retried, no fallback).
                    Err(ActionError::NeedsApproval(ask)) => {
                        return (Err(self.tool_approval(step, &ask, st, cfg, depth)), attempt)
                    }
                    Err(e) => e,
                };
                let cancelled = matches!(e, ActionError::Cancelled);
                let message = match &e {
                    ActionError::Timeout(d) => format!("timed out after {}", human_duration(*d)),
                    other => other.to_string(),
                };
                let retryable =
                    !cancelled && !matches!(e, ActionError::Input(_) | ActionError::At { .. });
                if retryable && attempt < max_retries {
                    let delay = retry_delay(
                        policy.backoff,
                        policy.retry_delay,
                        policy.max_delay,
                        attempt,
                    );
                    cfg.emit(RunEvent::StepRetry {
                        id: step.id.clone(),
                        attempt: attempt + 1,
                        error: message.clone(),
                        delay_ms: delay.as_millis() as u64,
                    });
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = cfg.caps.cancel.cancelled() => {}
                    }
                    attempt += 1;
                    continue;
                }
                if !cancelled && policy.fallback.is_some() {
                    let r = self
                        .call_fallback(step, inputs, st, cfg, &caps, &message)
                        .await;
                    return (r, attempt);
                }
                // The step's attempts, as `show` counts them; a workflow reads
                // them as `error.attempts`, beside the action's own message.
                let authored = (attempt > 0).then(|| super::Authored {
                    message: message.clone(),
                    attempts: attempt + 1,
                });
                let message = match attempt {
                    0 => message,
                    n => format!("{message} (after {} attempts)", n + 1),
                };
                let mut f = self.action_failure(step, inputs, &e, message);
                f.cancelled = cancelled;
                if f.authored.is_none() {
                    f.authored = authored.map(Box::new);
                }
                return (Err(f), attempt);
            }
        })
    }

    /// The step's inputs rendered, checked against the same contract
    /// `validate` checked the literal ones with, and for a script with its
    /// `context` (the run's variables and inputs) unless it gave one.
    fn action_inputs(
        &self,
        step: &Step,
        resolved: &Resolved,
        inputs: &Value,
        st: &RunState,
    ) -> Result<Value, Failure> {
        let mut rendered = self.render(step, &["inputs"], inputs, st)?;
        let fallback = step.on_error.fallback.as_ref().map(|(_, f)| f.spec);
        if let Some(issue) = catalog::check(resolved.spec, &rendered, &|_| false)
            .into_iter()
            .find(|i| !catalog::meant_for(i, fallback))
        {
            let pos = if issue.input.is_empty() || inputs.get(&issue.input).is_none() {
                step.field_pos(&["inputs"])
            } else {
                step.field_pos(&["inputs", &issue.input])
            };
            let message = issue.message(resolved.spec);
            return Err(self.fail(step, pos, message));
        }
        if resolved.kind == ActionKind::Script {
            if let Value::Object(m) = &mut rendered {
                if !m.contains_key("context") {
                    let mut ctx = (*st.variables).clone();
                    ctx.insert("inputs".into(), (*st.inputs).clone());
                    m.insert("context".into(), Value::Object(ctx));
                }
            }
        }
        Ok(rendered)
    }

    /// The step's fallback action, with the same inputs, after `message`.
    async fn call_fallback(
        &self,
        step: &Step,
        inputs: &Value,
        st: &RunState,
        cfg: &RunConfig,
        caps: &Capabilities,
        message: &str,
    ) -> Result<Value, Failure> {
        let Some((name, fb)) = &step.on_error.fallback else {
            unreachable!("called only with a fallback")
        };
        let rendered = self.render(step, &["inputs"], inputs, st)?;
        cfg.emit(RunEvent::Log {
            step: step.id.clone(),
            level: LogLevel::Warn,
            message: format!("{message}; calling fallback `{name}`"),
        });
        let call = Call {
            action: name,
            method: &fb.method,
            tool: fb.tool.as_ref(),
            declared: &st.tools,
            model: step.model.as_deref(),
            timeout: step.timeout,
            globals: None,
            caps,
            idempotency_key: None,
        };
        fb.action.call(&call, rendered).await.map_err(|e2| {
            let pos = step.field_pos(&["action"]);
            self.fail(
                step,
                pos,
                format!("{message}; fallback `{name}` failed too: {e2}"),
            )
        })
    }

    /// A failed call, placed at the action (a script's own error at its line
    /// and column inside `inputs.code`).
    fn action_failure(
        &self,
        step: &Step,
        inputs: &Value,
        e: &ActionError,
        message: String,
    ) -> Failure {
        let pos = match e {
            ActionError::At { line, column, .. } if inputs.get("code").is_some() => step
                .string_pos(
                    &["inputs".into(), "code".into()],
                    *line as usize,
                    *column as usize,
                ),
            _ => step.field_pos(&["action"]),
        };
        Failure {
            code: e.code().map(Box::from),
            ..self.fail(step, pos, message)
        }
    }
}

/// The action's tool with `${VAR}`s of its auth and options filled in.
fn tool_config(resolved: &Resolved, cfg: &RunConfig) -> Option<ToolConfig> {
    resolved.tool.as_ref().map(|t| with_env(t, &cfg.caps.env))
}

/// `tool` with the `${VAR}`s of its auth and options filled in from `env`.
pub(crate) fn with_env(
    tool: &ToolConfig,
    env: &std::collections::BTreeMap<String, String>,
) -> ToolConfig {
    let fill = |m: &Map<String, Value>| match substitute_env(&Value::Object(m.clone()), env) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    ToolConfig {
        name: tool.name.clone(),
        sdk: tool.sdk.clone(),
        auth: fill(&tool.auth),
        options: fill(&tool.options),
    }
}

/// The run's capabilities, with the action's log lines and progress sent
/// to the run's events as this step's.
fn step_caps(step: &Step, cfg: &RunConfig) -> Capabilities {
    let mut caps = cfg.caps.clone();
    let (events, clock) = (cfg.events.clone(), cfg.caps.clock.clone());
    let step_id = step.id.clone();
    caps.log = Arc::new(move |l: LogLine| {
        let kind = RunEvent::Log {
            step: step_id.clone(),
            level: l.level,
            message: l.message,
        };
        events(&Event::now(clock.as_ref(), kind))
    });
    let (events, clock) = (cfg.events.clone(), cfg.caps.clock.clone());
    let step_id = step.id.clone();
    caps.progress = Arc::new(move |p: Progress| {
        let kind = RunEvent::Progress {
            step: step_id.clone(),
            what: p.what,
            done: p.done,
            total: p.total,
        };
        events(&Event::now(clock.as_ref(), kind))
    });
    caps.step = Some(step.id.as_str().into());
    caps.usage = cfg.caps.usage.clone().map(|run| {
        Arc::new(super::usage::StepUsage {
            run,
            step: step.id.clone(),
            events: cfg.events.clone(),
            clock: cfg.caps.clock.clone(),
        }) as Arc<dyn marktoflow_steps::core::action::hosts::Usage>
    });
    caps
}

/// One call, bounded by the step's timeout.
async fn call_with_timeout(
    resolved: &Resolved,
    call: &Call<'_>,
    inputs: Value,
) -> Result<Value, ActionError> {
    let fut = resolved.action.call(call, inputs);
    match call.timeout {
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .unwrap_or(Err(ActionError::Timeout(t))),
        None => fut.await,
    }
}

/// What a script sees besides `context`, as in the peer's `type: script`:
/// `variables`, `inputs` and `steps` (the step metadata), deep-frozen copies.
/// Each is sent to the script worker only when the code names it: step
/// metadata holds every step's output, and most scripts read `context`.
fn script_globals(resolved: &Resolved, code: &str, st: &RunState) -> Option<Map<String, Value>> {
    (resolved.kind == ActionKind::Script).then(|| {
        let mut g = Map::new();
        if code.contains("variables") {
            g.insert("variables".into(), Value::Object((*st.variables).clone()));
        }
        if code.contains("inputs") {
            g.insert("inputs".into(), (*st.inputs).clone());
        }
        if code.contains("steps") {
            g.insert("steps".into(), Value::Object((*st.meta).clone()));
        }
        g
    })
}

/// A call's `Idempotency-Key`: `run_id:step_id:attempt`, the same when the
/// call is made again for the same attempt (a run resumed elsewhere after a
/// crash). Inside a loop or branch a step runs many times in one run; there
/// a digest of its rendered inputs tells the iterations apart.
fn idempotency_key(
    run_id: &str,
    step: &Step,
    depth: usize,
    attempt: u32,
    inputs: &Value,
) -> String {
    if depth == 0 {
        return format!("{run_id}:{}:{attempt}", step.id);
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(inputs.to_string().as_bytes());
    let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{run_id}:{}:{attempt}:{short}", step.id)
}
