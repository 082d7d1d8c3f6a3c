//! A `wait` for a person or an event: the run stops before it and leaves
//! memory (what it waits for goes out as [`RunEvent::Waiting`]); resumed
//! with the answer (see [`RunConfig::answers`]), the step gives it as its
//! output and takes its approve / reject / timeout branch.

use super::{Done, Engine, Failure, RunConfig, RunEvent, RunState};
use crate::format::model::{Ask, AskMode, InputDef, OnTimeout, Step, Workflow};
use marktoflow_steps::core::action::hosts::ToolDecision;
use marktoflow_steps::core::error::ApprovalAsk;
use marktoflow_steps::core::time::iso_ms as iso;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// What a waiting run waits for, as stores, the API, the console and the
/// CLI show it: rendered when the wait started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitRequest {
    pub step_id: String,
    pub step_name: String,
    pub mode: AskMode,
    pub title: Option<String>,
    pub prompt: Option<String>,
    /// What the person fills in (as declared; checked against the workflow's).
    pub fields: Vec<FieldView>,
    pub approvals: u32,
    pub approvers: Vec<String>,
    pub requester: Option<String>,
    pub self_approval: bool,
    /// Webhook mode: the rendered correlation key.
    pub key: Option<String>,
    /// Milliseconds since 1970, by the run's clock.
    pub created_at: i64,
    /// When an unanswered wait expires (its `timeout`), if ever.
    pub deadline: Option<i64>,
    /// A link anyone holding it may answer with, while it is valid.
    pub link: Option<String>,
    /// One link per listed approver, answering as them.
    #[serde(default)]
    pub links: Map<String, Value>,
    /// When the links stop working.
    pub link_expires: Option<i64>,
}

/// A field as a form shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldView {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub required: bool,
    pub description: Option<String>,
    pub choices: Option<Vec<Value>>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub default: Option<Value>,
}

impl FieldView {
    fn of(d: &InputDef) -> FieldView {
        FieldView {
            name: d.name.clone(),
            ty: d.ty.name().to_string(),
            required: d.required,
            description: d.description.clone(),
            choices: d.allowed.clone(),
            min: d.min,
            max: d.max,
            default: d.default.clone(),
        }
    }
}

/// How a wait was closed, as the store hands it to the resumed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Resolution {
    Answered(Answer),
    /// Its timeout passed first.
    Expired {
        at: i64,
    },
}

/// The answer that closed a wait: the values and decision of the last
/// vote, and every vote (approval mode may need several).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// `approved` / `rejected` (approval mode), else None.
    pub decision: Option<String>,
    pub comment: Option<String>,
    pub values: Map<String, Value>,
    pub by: String,
    pub at: i64,
    pub via: String,
    pub votes: Vec<Vote>,
}

/// One person's answer to a wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    pub by: String,
    pub at: i64,
    /// `form`/`webhook`: None.
    pub decision: Option<String>,
    pub comment: Option<String>,
    #[serde(default)]
    pub values: Map<String, Value>,
    /// `api`, `link`, `cli`, `console`, `mcp`, `event`.
    pub via: String,
}

/// Makes the links a waiting run's message carries (the server's secret
/// signs them; the engine never sees it).
pub trait WaitLinks: Send + Sync {
    /// A link answering `step_id` of `run_id` (as `who`, when given),
    /// valid until `expires` (milliseconds since 1970); None: no links here.
    fn link(&self, run_id: &str, step_id: &str, who: Option<&str>, expires: i64) -> Option<String>;
}

/// How long links stay valid when neither `link_ttl` nor `timeout` says.
const DEFAULT_LINK_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

impl Engine {
    /// A top-level `wait` for a person or an event: with its resolution,
    /// the step's output (and branch); without, the run stops here waiting.
    pub(super) async fn exec_ask(
        &self,
        wf: &Workflow,
        step: &Step,
        ask: &Ask,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<Done, Failure> {
        match cfg.answers.get(&step.id) {
            Some(Resolution::Answered(a)) => {
                let output = answered_output(ask, a);
                let rejected = a.decision.as_deref() == Some("rejected");
                let branch = match (ask.mode, rejected) {
                    (AskMode::Approval, false) => &ask.on_approve,
                    (AskMode::Approval, true) if ask.on_reject.is_empty() => {
                        // No branch for it: the run ends rejected, with the
                        // step's output kept for whoever reads the run.
                        st.rejected = Some(format!(
                            "rejected by {}{}",
                            a.by,
                            a.comment
                                .as_deref()
                                .filter(|c| !c.is_empty())
                                .map(|c| format!(": {c}"))
                                .unwrap_or_default()
                        ));
                        return Ok(Done::Ran(output));
                    }
                    (AskMode::Approval, true) => &ask.on_reject,
                    _ => return Ok(Done::Ran(output)),
                };
                self.in_branch(wf, branch, "answer", &output, st, cfg, depth)
                    .await?;
                Ok(Done::Ran(output))
            }
            Some(Resolution::Expired { at }) => {
                let timeout = ask
                    .timeout
                    .map(super::human_duration)
                    .unwrap_or_else(|| "its timeout".into());
                let values = match &ask.on_timeout {
                    OnTimeout::Fail => {
                        return Err(self.fail(
                            step,
                            step.field_pos(&["timeout"]),
                            format!("nobody answered within {timeout}"),
                        ))
                    }
                    OnTimeout::Continue => Map::new(),
                    OnTimeout::Default(d) => d.clone(),
                };
                let mut out = Map::new();
                for f in &ask.fields {
                    out.insert(
                        f.name.clone(),
                        values.get(&f.name).cloned().unwrap_or(Value::Null),
                    );
                }
                out.insert("timed_out".into(), json!(true));
                out.insert("answered_by".into(), Value::Null);
                out.insert("answered_at".into(), json!(iso(*at)));
                let out = Value::Object(out);
                if ask.mode == AskMode::Approval {
                    // Not approved in time: the reject branch, if any (the
                    // run goes on either way: `on_timeout` said so).
                    let mut out = out;
                    out["decision"] = Value::Null;
                    out["approved"] = json!(false);
                    self.in_branch(wf, &ask.on_reject, "answer", &out, st, cfg, depth)
                        .await?;
                    return Ok(Done::Ran(out));
                }
                Ok(Done::Ran(out))
            }
            None => Err(self.begin_wait(wf, step, ask, st, cfg, depth).await),
        }
    }

    /// Runs `steps` with `name` bound to `value` for them.
    #[allow(clippy::too_many_arguments)]
    async fn in_branch(
        &self,
        wf: &Workflow,
        steps: &[Step],
        name: &str,
        value: &Value,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Result<(), Failure> {
        if steps.is_empty() {
            return Ok(());
        }
        let saved = st.variables.get(name).cloned();
        st.vars_mut().insert(name.to_string(), value.clone());
        let r = self
            .exec_list(wf, steps, st, cfg, depth + 1, false)
            .await
            .map(drop);
        super::restore(st, vec![(name.to_string(), saved)]);
        r
    }

    /// Renders what the wait asks, runs its `notify` steps, and stops the
    /// run: the failure returned unwinds it as waiting.
    async fn begin_wait(
        &self,
        wf: &Workflow,
        step: &Step,
        ask: &Ask,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Failure {
        let render =
            |key: &str, t: &Option<String>, st: &RunState| -> Result<Option<String>, Failure> {
                match t {
                    None => Ok(None),
                    Some(t) => match self.render(step, &[key], &Value::String(t.clone()), st)? {
                        Value::String(s) => Ok(Some(s)),
                        Value::Null => Ok(None),
                        other => Ok(Some(other.to_string())),
                    },
                }
            };
        let now = st.clock.now_ms();
        let deadline = ask
            .timeout
            .map(|t| now.saturating_add(t.as_millis().min(i64::MAX as u128) as i64));
        let link_expires = ask
            .link_ttl
            .map(|t| now.saturating_add(t.as_millis().min(i64::MAX as u128) as i64))
            .or(deadline)
            .unwrap_or(now.saturating_add(DEFAULT_LINK_TTL_MS));
        let link = |who: Option<&str>| {
            cfg.waits
                .as_ref()
                .and_then(|w| w.link(&cfg.run_id, &step.id, who, link_expires))
        };
        let request = (|| {
            Ok(WaitRequest {
                step_id: step.id.clone(),
                step_name: step.display_name().to_string(),
                mode: ask.mode,
                title: render("title", &ask.title, st)?,
                prompt: render(ask.prompt_key, &ask.prompt, st)?,
                fields: ask.fields.iter().map(FieldView::of).collect(),
                approvals: ask.approvals,
                approvers: ask.approvers.clone(),
                requester: render("requester", &ask.requester, st)?,
                self_approval: ask.self_approval,
                key: render("key", &ask.key, st)?,
                created_at: now,
                deadline,
                link: link(None),
                links: ask
                    .approvers
                    .iter()
                    .filter_map(|who| Some((who.clone(), Value::String(link(Some(who))?))))
                    .collect(),
                link_expires: Some(link_expires),
            })
        })();
        let request = match request {
            Ok(r) => r,
            Err(f) => return f,
        };
        if ask.mode == AskMode::Webhook && request.key.as_deref().is_none_or(str::is_empty) {
            return self.fail(
                step,
                step.field_pos(&["key"]),
                "the wait's `key` rendered empty: an event could never find this run",
            );
        }
        // The message with the link goes out before the run stops; should
        // the process die in between, a resumed run sends it again.
        let seen = json!({
            "run_id": cfg.run_id,
            "step": step.id,
            "link": request.link,
            "links": request.links,
            "key": request.key,
            "deadline": request.deadline.map(iso),
            "expires_at": request.link_expires.map(iso),
        });
        if let Err(f) = self
            .in_branch(wf, &ask.notify, "wait", &seen, st, cfg, depth)
            .await
        {
            return f;
        }
        cfg.emit(RunEvent::Waiting(Arc::new(request.clone())));
        st.waiting = Some(request);
        Failure {
            cancelled: true,
            ..self.fail(step, step.pos, "waiting for an answer")
        }
    }
}

/// The waits a run stops at that no `wait` step declares, by their ids:
/// a pause (`pause:…`, nothing to fill in) and an agent's tool call
/// (`tool:…`, approved or rejected, its arguments editable as JSON).
pub fn outside_wait(step_id: &str) -> Option<(Vec<InputDef>, AskMode)> {
    if step_id.starts_with("pause:") {
        return Some((Vec::new(), AskMode::Pause));
    }
    if step_id.starts_with("tool:") {
        let arguments = InputDef {
            name: "arguments".into(),
            ty: crate::format::model::InputType::Object,
            required: false,
            default: None,
            description: Some("The arguments, edited (JSON); empty: as the agent asked".into()),
            allowed: None,
            pattern: None,
            min: None,
            max: None,
            tenant: false,
            pos: crate::diag::Pos { line: 1, col: 1 },
        };
        return Some((vec![arguments], AskMode::Approval));
    }
    None
}

/// The decisions about a run's tool calls, from its closed waits.
struct Decisions(std::collections::HashMap<String, Resolution>);

impl marktoflow_steps::core::action::hosts::Approvals for Decisions {
    fn decision(&self, id: &str) -> Option<ToolDecision> {
        match self.0.get(id)? {
            Resolution::Answered(a) if a.decision.as_deref() == Some("approved") => {
                Some(ToolDecision::Approved {
                    args: a
                        .values
                        .get("arguments")
                        .and_then(Value::as_object)
                        .cloned(),
                    by: a.by.clone(),
                })
            }
            Resolution::Answered(a) => Some(ToolDecision::Rejected {
                reason: a.comment.clone(),
                by: a.by.clone(),
            }),
            Resolution::Expired { .. } => Some(ToolDecision::Rejected {
                reason: Some("nobody decided in time".into()),
                by: "nobody".into(),
            }),
        }
    }
}

/// What a run's actions are told of its decided tool calls.
pub(super) fn decisions(
    answers: &std::collections::HashMap<String, Resolution>,
) -> Option<Arc<dyn marktoflow_steps::core::action::hosts::Approvals>> {
    let tools: std::collections::HashMap<String, Resolution> = answers
        .iter()
        .filter(|(k, _)| k.starts_with("tool:"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(Arc::new(Decisions(tools)))
}

impl Engine {
    /// Stops the run at an agent's tool call that needs a person: it waits
    /// (mode `approval`, the arguments shown and editable) and, answered,
    /// the step runs again, its earlier turns and calls replayed from the
    /// store, this call approved or refused. Only a top-level step of a
    /// recorded run can wait; elsewhere the step fails saying so.
    pub(super) fn tool_approval(
        &self,
        step: &Step,
        ask: &ApprovalAsk,
        st: &mut RunState,
        cfg: &RunConfig,
        depth: usize,
    ) -> Failure {
        if depth > 0 || cfg.recorded.is_none() {
            return self.fail(
                step,
                step.pos,
                format!(
                    "the call of `{}` needs a person's approval, which only a top-level step of a recorded run can wait for",
                    ask.tool
                ),
            );
        }
        let now = st.clock.now_ms();
        let expires = now.saturating_add(DEFAULT_LINK_TTL_MS);
        let args = Value::Object(ask.args.clone());
        let fields = outside_wait(&ask.id).map(|(f, _)| f).unwrap_or_default();
        let mut fields: Vec<FieldView> = fields.iter().map(FieldView::of).collect();
        if let Some(f) = fields.first_mut() {
            f.default = Some(args.clone());
        }
        let request = WaitRequest {
            step_id: ask.id.clone(),
            step_name: format!("{} asks to call {}", step.display_name(), ask.tool),
            mode: AskMode::Approval,
            title: Some(format!("Allow `{}`?", ask.tool)),
            prompt: Some(format!(
                "The agent of step `{}` asks to call `{}` with:\n{}",
                step.display_name(),
                ask.tool,
                serde_json::to_string_pretty(&args).unwrap_or_default()
            )),
            fields,
            approvals: 1,
            approvers: Vec::new(),
            requester: None,
            self_approval: true,
            key: None,
            created_at: now,
            deadline: None,
            link: cfg
                .waits
                .as_ref()
                .and_then(|w| w.link(&cfg.run_id, &ask.id, None, expires)),
            links: Map::new(),
            link_expires: Some(expires),
        };
        cfg.emit(RunEvent::Waiting(Arc::new(request.clone())));
        st.waiting = Some(request);
        Failure {
            cancelled: true,
            ..self.fail(
                step,
                step.pos,
                "waiting for a person's approval of a tool call",
            )
        }
    }

    /// Stops the run before `step`, paused from outside: it waits as at a
    /// `wait` step (mode `pause`, no fields) until somebody resumes it.
    pub(super) fn paused(&self, step: &Step, st: &mut RunState, cfg: &RunConfig) -> Failure {
        let now = st.clock.now_ms();
        // Unique per pause: a run may be paused before the same step again.
        let id = format!("pause:{}:{now}", step.id);
        let expires = now.saturating_add(DEFAULT_LINK_TTL_MS);
        let request = WaitRequest {
            step_id: id.clone(),
            step_name: format!("Paused before {}", step.display_name()),
            mode: AskMode::Pause,
            title: Some(format!("Paused before {}", step.display_name())),
            prompt: None,
            fields: Vec::new(),
            approvals: 1,
            approvers: Vec::new(),
            requester: None,
            self_approval: true,
            key: None,
            created_at: now,
            deadline: None,
            link: cfg
                .waits
                .as_ref()
                .and_then(|w| w.link(&cfg.run_id, &id, None, expires)),
            links: Map::new(),
            link_expires: Some(expires),
        };
        cfg.emit(RunEvent::Waiting(Arc::new(request.clone())));
        st.waiting = Some(request);
        Failure {
            cancelled: true,
            ..self.fail(step, step.pos, "paused")
        }
    }
}

/// The step's output for an answer: its values, the decision and who gave it.
fn answered_output(ask: &Ask, a: &Answer) -> Value {
    let mut out = Map::new();
    if ask.fields.is_empty() {
        // An event's body, or an approval's extra values, as sent.
        out.extend(a.values.clone());
    }
    for f in &ask.fields {
        out.insert(
            f.name.clone(),
            a.values.get(&f.name).cloned().unwrap_or(Value::Null),
        );
    }
    if ask.mode == AskMode::Approval {
        out.insert("decision".into(), json!(a.decision));
        out.insert(
            "approved".into(),
            json!(a.decision.as_deref() == Some("approved")),
        );
        out.insert("comment".into(), json!(a.comment));
        out.insert(
            "approvals".into(),
            Value::Array(
                a.votes
                    .iter()
                    .map(|v| {
                        json!({"by": v.by, "at": iso(v.at), "decision": v.decision, "comment": v.comment, "via": v.via})
                    })
                    .collect(),
            ),
        );
    }
    out.insert("answered_by".into(), json!(a.by));
    out.insert("answered_at".into(), json!(iso(a.at)));
    out.insert("via".into(), json!(a.via));
    out.insert("timed_out".into(), json!(false));
    Value::Object(out)
}
