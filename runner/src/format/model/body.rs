//! The body: step blocks under headings, nested step lists, and the
//! inputs of action steps checked against the catalog.

use super::text::is_step;
use super::{Cx, Parsed, Spans, Step};
use crate::diag::Pos;
use crate::format::document::Block;
use marktoflow_steps::core::catalog::{self, Problem};
use marktoflow_steps::registry::Resolved;
use serde_json::{Map, Value};
use std::sync::Arc;

impl Cx<'_> {
    pub(super) fn body_steps(&mut self, blocks: &[Block]) -> Vec<Step> {
        let mut steps = Vec::new();
        // Steps under one heading: where each group starts, and the ids
        // their authors wrote (named in the display name, see `number_group`).
        let mut group_start = 0;
        let mut group_heading: Option<&str> = None;
        let mut explicit_ids: Vec<String> = Vec::new();
        for b in blocks {
            if b.index_under_heading == 0 {
                number_group(&mut steps[group_start..], group_heading, &explicit_ids);
                group_start = steps.len();
                group_heading = b.heading.as_deref();
                explicit_ids.clear();
            }
            let Some(Parsed { value, spans }) = self.parse_yaml(&b.yaml) else {
                continue;
            };
            let name = b.heading.as_deref();
            match &value {
                Value::Array(items) => {
                    explicit_ids.extend(items.iter().filter_map(explicit_id));
                    let list = self.step_list(items, &spans, &[], "", name);
                    steps.extend(list);
                }
                Value::Object(m) if is_step(m) => {
                    explicit_ids.extend(explicit_id(&value));
                    let n = steps.len() + 1;
                    if let Some(s) =
                        self.step(&value, &spans, Vec::new(), &format!("step_{n}"), name)
                    {
                        steps.push(s);
                    }
                }
                _ => {
                    self.warn(
                        b.fence,
                        "this ```yaml block is not a step (it has no `action`, `workflow` or `type`); it is ignored. Use another fence language for documentation snippets",
                    );
                }
            }
        }
        number_group(&mut steps[group_start..], group_heading, &explicit_ids);
        steps
    }
    pub(super) fn step_list(
        &mut self,
        items: &[Value],
        spans: &Arc<Spans>,
        path: &[String],
        prefix: &str,
        heading: Option<&str>,
    ) -> Vec<Step> {
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let mut p = path.to_vec();
            p.push(i.to_string());
            let default_id = if prefix.is_empty() {
                format!("step_{}", self.ids.len() + 1)
            } else {
                format!("{prefix}_{}", i + 1)
            };
            if let Some(s) = self.step(item, spans, p, &default_id, heading) {
                out.push(s);
            }
        }
        out
    }
    /// A step's `inputs:`: a mapping, or nothing (an empty one).
    /// Literal inputs against the action's contract; templates wait for
    /// run time, where the engine checks the rendered values the same way.
    pub(super) fn check_inputs(
        &mut self,
        resolved: &Resolved,
        fallback: Option<&catalog::Spec>,
        inputs: &Value,
        spans: &Spans,
        step_path: &[String],
        action_pos: Pos,
    ) {
        let mut issues = catalog::check(resolved.spec, inputs, &|s| crate::template::has_tags(s));
        // A fallback action gets the same inputs: one of them is enough.
        issues.retain(|i| !catalog::meant_for(i, fallback));
        let mut inputs_path = step_path.to_vec();
        inputs_path.push("inputs".into());
        let inputs_node = spans.node.lookup(step_path);
        let inputs_pos = match inputs_node.key_pos("inputs") {
            Some(p) => spans.yaml.file_pos(p.line, p.col),
            None => action_pos,
        };
        for issue in issues {
            let pos = match &issue.problem {
                _ if issue.input.is_empty() => spans.pos(&inputs_path),
                Problem::Missing => inputs_pos,
                Problem::Unknown { .. } => {
                    let node = spans.node.lookup(&inputs_path);
                    match node.key_pos(&issue.input) {
                        Some(p) => spans.yaml.file_pos(p.line, p.col),
                        None => inputs_pos,
                    }
                }
                _ => {
                    let mut p = inputs_path.clone();
                    p.push(issue.input.clone());
                    spans.pos(&p)
                }
            };
            let hint = issue.hint(resolved.spec);
            let d = self.err(pos, issue.to_string());
            if let Some(h) = hint {
                d.hints.push(h);
            }
        }
    }
    pub(super) fn inputs_mapping(&mut self, m: &Map<String, Value>, at: Pos) -> Option<Value> {
        match m.get("inputs") {
            None | Some(Value::Null) => Some(Value::Object(Map::new())),
            Some(i @ Value::Object(_)) => Some(i.clone()),
            Some(_) => {
                self.err(at, "`inputs` must be a mapping");
                None
            }
        }
    }
}

fn explicit_id(step: &Value) -> Option<String> {
    step.get("id").map(super::text::scalar_string)
}

/// Several unnamed steps under one heading share its text as their name;
/// tell them apart in progress, history and the console by their place
/// ("Write (2 of 3)") and by the id their author gave, if any. A step named
/// by its author keeps its name.
fn number_group(group: &mut [Step], heading: Option<&str>, explicit_ids: &[String]) {
    let n = group.len();
    let Some(heading) = heading.filter(|_| n > 1) else {
        return;
    };
    for (k, s) in group.iter_mut().enumerate() {
        if s.name.as_deref() != Some(heading) {
            continue;
        }
        s.name = Some(if explicit_ids.contains(&s.id) {
            format!("{heading} ({} of {n}, {})", k + 1, s.id)
        } else {
            format!("{heading} ({} of {n})", k + 1)
        });
    }
}
