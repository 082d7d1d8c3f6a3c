//! `marktoflow test --record RUN`: a stored run as a case — its inputs,
//! what its agent, HTTP and program steps gave as mocks (each with the
//! inputs it was called with, so a step called many times gets each of its
//! answers), and its status and outputs as what the case expects.

use super::spec::{Case, Expect, Mock};
use crate::format::model::Workflow;
use crate::store::{RunRecord, StepRow};
use marktoflow_steps::registry::ActionKind;
use serde_json::{json, Map, Value};

/// A stored run as a case, and the steps whose values the store cut short
/// (not mocked: to be mocked by hand).
pub fn case_of(wf: &Workflow, run: &RunRecord, steps: &[StepRow]) -> (Case, Vec<String>) {
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
        mocks.push(Mock {
            step: Some(s.step_id.clone()),
            action: None,
            when: s
                .inputs
                .as_ref()
                .filter(|i| !is_cut(i))
                .and_then(|i| i.as_object().map(matchable))
                .unwrap_or_default(),
            result: match (&s.status, &s.error) {
                (crate::engine::StepStatus::Failed, Some(e)) => Err(e.clone()),
                _ => Ok(s.output.clone()),
            },
        });
    }
    let outputs = match &run.outputs {
        Value::Object(o) if !is_cut(&run.outputs) => o.clone(),
        _ => Map::new(),
    };
    let case = Case {
        name: format!("Recorded run {}", crate::store::short_id(&run.id)),
        pos: crate::diag::Pos { line: 1, col: 1 },
        inputs: run.inputs.as_object().cloned().unwrap_or_default(),
        mocks,
        files: Vec::new(),
        expect: Expect {
            status: Some(run.status),
            outputs,
            ..Default::default()
        },
    };
    (case, cut)
}

/// The case for `run` (its `steps`) of `wf`, as a heading and a YAML block;
/// the steps whose values the store cut short are said above it, to be
/// mocked by hand.
pub fn case_text(wf: &Workflow, run: &RunRecord, steps: &[StepRow]) -> String {
    let (case, cut) = case_of(wf, run, steps);
    let mut m = Map::new();
    if !case.inputs.is_empty() {
        m.insert("inputs".into(), Value::Object(case.inputs.clone()));
    }
    let mocks: Vec<Value> = case
        .mocks
        .iter()
        .map(|mock| {
            let mut o = Map::new();
            o.insert("step".into(), json!(mock.step));
            if !mock.when.is_empty() {
                o.insert("when".into(), Value::Object(mock.when.clone()));
            }
            match &mock.result {
                Ok(v) => o.insert("returns".into(), v.clone()),
                Err(e) => o.insert("fails".into(), json!(e)),
            };
            Value::Object(o)
        })
        .collect();
    if !mocks.is_empty() {
        m.insert("mocks".into(), Value::Array(mocks));
    }
    let mut expect = Map::new();
    expect.insert("status".into(), json!(run.status.as_str()));
    if !case.expect.outputs.is_empty() {
        expect.insert("outputs".into(), Value::Object(case.expect.outputs.clone()));
    }
    m.insert("expect".into(), Value::Object(expect));
    let yaml = serde_yaml::to_string(&Value::Object(m)).unwrap_or_default();
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
    format!("## {}\n{note}\n```yaml\n{yaml}```\n", case.name)
}

/// What of a recorded call's inputs a mock can match on: not its headers,
/// nor the secrets the store masked (`***`), which the replayed call sends
/// in full.
fn matchable(inputs: &Map<String, Value>) -> Map<String, Value> {
    fn keep(v: &Value) -> Option<Value> {
        match v {
            Value::String(s) if s.contains("***") => None,
            Value::Object(m) => Some(Value::Object(
                m.iter()
                    .filter_map(|(k, v)| keep(v).map(|v| (k.clone(), v)))
                    .collect(),
            )),
            other => Some(other.clone()),
        }
    }
    inputs
        .iter()
        .filter(|(k, _)| k.as_str() != "headers")
        .filter_map(|(k, v)| keep(v).map(|v| (k.clone(), v)))
        .collect()
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
