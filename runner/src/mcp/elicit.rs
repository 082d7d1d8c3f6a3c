//! Asking the MCP client's user when a workflow called as a tool waits for
//! a person: the wait becomes an elicitation form (its `fields:`, and for an
//! approval a decision and a comment), and the reply becomes an answer
//! checked and recorded as every other channel's (`via: mcp`).
//!
//! Only what a form can ask is asked: a `mode: webhook` wait waits for an
//! event, a pause for whoever paused it, and a required field a form cannot
//! hold (a list, an object, any JSON) leaves the run waiting for its link.

use crate::engine::WaitRequest;
use crate::format::model::AskMode;
use crate::serve::OutsideAnswer;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use serde_json::{json, Map, Value};

/// The property an approval's decision is given in.
pub const DECISION: &str = "decision";
/// The property a reviewer's comment is given in.
pub const COMMENT: &str = "comment";

/// What the user said, as the answer channels take it.
#[derive(Debug, PartialEq)]
pub enum Reply {
    Answer(OutsideAnswer),
    /// Declined or dismissed: the run goes on waiting for another channel.
    NotNow,
}

/// The form asking for `w`, or None when a form cannot answer it.
/// `problem` is why the last reply was not taken, said above the question.
pub fn request(w: &WaitRequest, problem: Option<&str>) -> Option<ElicitRequestParams> {
    if !matches!(w.mode, AskMode::Form | AskMode::Approval) {
        return None;
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    if w.mode == AskMode::Approval {
        properties.insert(
            DECISION.into(),
            json!({"type": "string", "title": "Decision", "enum": ["approve", "reject"], "enumNames": ["Approve", "Reject"]}),
        );
        required.push(Value::from(DECISION));
        properties.insert(
            COMMENT.into(),
            json!({"type": "string", "title": "Comment", "description": "Why (kept with the decision)"}),
        );
    }
    for f in &w.fields {
        if properties.contains_key(&f.name) {
            // A field named as the decision or comment cannot be told apart.
            return None;
        }
        let mut p = match (f.ty.as_str(), &f.choices) {
            (_, Some(choices)) => {
                // A choice is offered as its text; the answer converts it back.
                let texts: Vec<Value> = choices
                    .iter()
                    .map(|c| match c {
                        Value::String(s) => Value::String(s.clone()),
                        other => Value::String(other.to_string()),
                    })
                    .collect();
                json!({"type": "string", "enum": texts})
            }
            ("string", None) => json!({"type": "string"}),
            ("boolean", None) => json!({"type": "boolean"}),
            (ty @ ("number" | "integer"), None) => {
                let mut n = json!({ "type": ty });
                if let Some(min) = f.min {
                    n["minimum"] = json!(min);
                }
                if let Some(max) = f.max {
                    n["maximum"] = json!(max);
                }
                n
            }
            // A list, an object or any JSON does not fit a form: left out
            // when it may be, else the whole wait is left to its link.
            _ if f.required && f.default.is_none() => return None,
            _ => continue,
        };
        p["title"] = json!(f.name);
        if let Some(d) = &f.description {
            p["description"] = json!(d);
        }
        if let Some(d) = f.default.as_ref().filter(|d| !d.is_null()) {
            if p["type"] == "string" && !d.is_string() {
                p["default"] = json!(d.to_string());
            } else {
                p["default"] = d.clone();
            }
        }
        if f.required && f.default.is_none() {
            required.push(Value::from(f.name.clone()));
        }
        properties.insert(f.name.clone(), p);
    }
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": properties,
        "required": required,
    }))
    .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(w, problem),
        requested_schema: schema,
    })
}

/// What the form says: the problem with the last reply, the step's title
/// and prompt.
fn message(w: &WaitRequest, problem: Option<&str>) -> String {
    let mut parts = Vec::new();
    if let Some(p) = problem {
        parts.push(format!("That answer was not taken: {p}."));
    }
    match (&w.title, &w.prompt) {
        (Some(t), Some(p)) => parts.push(format!("{t}\n\n{p}")),
        (Some(t), None) | (None, Some(t)) => parts.push(t.clone()),
        (None, None) => parts.push(format!("Step `{}` waits for your answer.", w.step_name)),
    }
    parts.join("\n\n")
}

/// The reply as an answer.
pub fn reply(r: ElicitResult) -> Reply {
    match (r.action, r.content) {
        (ElicitationAction::Accept, Some(Value::Object(mut values))) => {
            let text = |v: Option<Value>| match v {
                Some(Value::String(s)) if !s.trim().is_empty() => Some(s),
                _ => None,
            };
            let decision = text(values.remove(DECISION));
            let comment = text(values.remove(COMMENT));
            Reply::Answer(OutsideAnswer {
                values,
                decision,
                comment,
            })
        }
        (ElicitationAction::Accept, _) => Reply::Answer(OutsideAnswer::default()),
        _ => Reply::NotNow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::FieldView;

    fn wait(mode: AskMode, fields: Vec<FieldView>) -> WaitRequest {
        WaitRequest {
            step_id: "review".into(),
            step_name: "Review".into(),
            mode,
            title: Some("Refund €40?".into()),
            prompt: Some("Order 7 asks for a refund.".into()),
            fields,
            approvals: 1,
            approvers: Vec::new(),
            requester: None,
            self_approval: true,
            key: None,
            created_at: 0,
            deadline: None,
            link: None,
            links: Map::new(),
            link_expires: None,
        }
    }

    fn field(name: &str, ty: &str, required: bool) -> FieldView {
        FieldView {
            name: name.into(),
            ty: ty.into(),
            required,
            description: None,
            choices: None,
            min: None,
            max: None,
            default: None,
        }
    }

    fn schema(p: &ElicitRequestParams) -> Value {
        match p {
            ElicitRequestParams::FormElicitationParams {
                requested_schema, ..
            } => serde_json::to_value(requested_schema).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_approval_asks_for_a_decision_and_its_fields() {
        let mut amount = field("amount", "number", true);
        amount.min = Some(0.0);
        amount.max = Some(100.0);
        let mut reason = field("reason", "string", false);
        reason.choices = Some(vec![json!("damaged"), json!(3)]);
        let p = request(&wait(AskMode::Approval, vec![amount, reason]), None).unwrap();
        assert_eq!(
            schema(&p),
            json!({
                "type": "object",
                "properties": {
                    "decision": {"type": "string", "title": "Decision", "enum": ["approve", "reject"], "enumNames": ["Approve", "Reject"]},
                    "comment": {"type": "string", "title": "Comment", "description": "Why (kept with the decision)"},
                    "amount": {"type": "number", "title": "amount", "minimum": 0.0, "maximum": 100.0},
                    "reason": {"type": "string", "title": "reason", "enum": ["damaged", "3"]},
                },
                "required": ["decision", "amount"],
            })
        );
        let ElicitRequestParams::FormElicitationParams { message, .. } = &p else {
            unreachable!()
        };
        assert_eq!(message, "Refund €40?\n\nOrder 7 asks for a refund.");
    }

    #[test]
    fn what_a_form_cannot_hold_is_left_out_or_left_to_the_link() {
        let optional = request(
            &wait(AskMode::Approval, vec![field("arguments", "object", false)]),
            Some("field `x` is not a number"),
        )
        .unwrap();
        assert_eq!(
            schema(&optional)["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["decision", "comment"]
        );
        let ElicitRequestParams::FormElicitationParams { message, .. } = &optional else {
            unreachable!()
        };
        assert!(message.starts_with("That answer was not taken: field `x` is not a number.\n\n"));
        assert_eq!(
            request(
                &wait(AskMode::Form, vec![field("items", "array", true)]),
                None
            ),
            None
        );
        assert_eq!(request(&wait(AskMode::Webhook, vec![]), None), None);
        assert_eq!(request(&wait(AskMode::Pause, vec![]), None), None);
        assert_eq!(
            request(
                &wait(AskMode::Approval, vec![field("decision", "string", false)]),
                None
            ),
            None
        );
    }

    #[test]
    fn a_reply_is_an_answer_or_not_now() {
        let accept = ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"decision": "reject", "comment": " ", "amount": 40}));
        assert_eq!(
            reply(accept),
            Reply::Answer(OutsideAnswer {
                values: json!({"amount": 40}).as_object().unwrap().clone(),
                decision: Some("reject".into()),
                comment: None,
            })
        );
        assert_eq!(
            reply(ElicitResult::new(ElicitationAction::Decline)),
            Reply::NotNow
        );
        assert_eq!(
            reply(ElicitResult::new(ElicitationAction::Cancel)),
            Reply::NotNow
        );
    }
}
