//! `marktoflow test --record RUN`: a stored run as a case — its inputs,
//! what its agent, HTTP and program steps gave as mocks (each with the
//! inputs it was called with, so a step called many times gets each of its
//! answers), and its status and outputs as what the case expects.

use crate::format::model::Workflow;
use crate::store::{RunRecord, StepRow};
use marktoflow_steps::registry::ActionKind;
use serde_json::{json, Map, Value};

/// The case for `run` (its `steps`) of `wf`, as a heading and a YAML block;
/// the steps whose values the store cut short are said in a comment, to be
/// mocked by hand.
pub fn case_text(wf: &Workflow, run: &RunRecord, steps: &[StepRow]) -> String {
    let outside: Vec<&str> = wf
        .actions()
        .iter()
        .filter(|a| {
            matches!(
                a.resolved.kind,
                ActionKind::Agent | ActionKind::Network | ActionKind::Process
            )
        })
        .map(|a| a.step.id.as_str())
        .collect();
    let mut mocks = Vec::new();
    let mut cut = Vec::new();
    for s in steps
        .iter()
        .filter(|s| outside.contains(&s.step_id.as_str()))
    {
        if is_cut(&s.output) {
            cut.push(s.step_id.clone());
            continue;
        }
        let mut m = Map::new();
        m.insert("step".into(), json!(s.step_id));
        if let Some(inputs) = s.inputs.as_ref().filter(|i| i.is_object() && !is_cut(i)) {
            m.insert("when".into(), inputs.clone());
        }
        match (&s.status, &s.error) {
            (crate::engine::StepStatus::Failed, Some(e)) => m.insert("fails".into(), json!(e)),
            _ => m.insert("returns".into(), s.output.clone()),
        };
        mocks.push(Value::Object(m));
    }
    let mut case = Map::new();
    if run.inputs.as_object().is_some_and(|i| !i.is_empty()) {
        case.insert("inputs".into(), run.inputs.clone());
    }
    if !mocks.is_empty() {
        case.insert("mocks".into(), Value::Array(mocks));
    }
    let mut expect = Map::new();
    expect.insert("status".into(), json!(run.status.as_str()));
    if run.outputs.as_object().is_some_and(|o| !o.is_empty()) && !is_cut(&run.outputs) {
        expect.insert("outputs".into(), run.outputs.clone());
    }
    case.insert("expect".into(), Value::Object(expect));
    let yaml = serde_yaml::to_string(&Value::Object(case)).unwrap_or_default();
    let note = if cut.is_empty() {
        String::new()
    } else {
        format!(
            "\nThe store kept only the start of what step{} {} gave: mock {} by hand.\n",
            if cut.len() == 1 { "" } else { "s" },
            cut.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", "),
            if cut.len() == 1 { "it" } else { "them" }
        )
    };
    format!(
        "## Recorded run {}\n{note}\n```yaml\n{yaml}```\n",
        crate::store::short_id(&run.id)
    )
}

/// Whether a stored value is the store's marker for a value cut short.
fn is_cut(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            (m.len() == 1 && m.contains_key("omitted"))
                || (m.get("truncated") == Some(&Value::Bool(true)) && m.contains_key("preview"))
        }
        _ => false,
    }
}
