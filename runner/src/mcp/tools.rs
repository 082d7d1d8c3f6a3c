//! Workflows as MCP tools: which workflows are exposed, under what name, and
//! the JSON Schemas of their inputs and outputs. Pure: no I/O.

use crate::format::model::{InputType, Workflow};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// One workflow offered as a tool.
#[derive(Debug, Clone)]
pub struct WorkflowTool {
    pub name: String,
    pub description: String,
    pub input_schema: Map<String, Value>,
    pub output_schema: Option<Map<String, Value>>,
    pub workflow: Arc<Workflow>,
}

/// The longest tool name MCP clients accept.
const MAX_NAME: usize = 64;

/// A name clients accept: letters, digits, `_`, `-`, `.`; at most 64
/// characters; other characters become `_`.
pub fn tool_name(raw: &str) -> String {
    let mut s: String = raw
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME)
        .collect();
    if s.is_empty() {
        s.push_str("workflow");
    }
    s
}

/// The workflow's `type: mcp` trigger, if it has one (and it is not disabled).
fn mcp_trigger(wf: &Workflow) -> Option<&Map<String, Value>> {
    wf.triggers
        .iter()
        .find(|t| {
            t.kind == crate::format::model::TriggerKind::Mcp
                && t.fields.get("enabled") != Some(&Value::Bool(false))
        })
        .map(|t| &t.fields)
}

/// The tool for `wf`: named by its `mcp` trigger's `name`, else its id;
/// described by the trigger, else the workflow's description or name.
pub fn tool_of(wf: Arc<Workflow>) -> WorkflowTool {
    let trigger = mcp_trigger(&wf);
    let field = |k: &str| {
        trigger
            .and_then(|t| t.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let name = tool_name(&field("name").unwrap_or_else(|| wf.meta.id.clone()));
    let description = field("description")
        .or_else(|| wf.meta.description.clone().filter(|d| !d.trim().is_empty()))
        .unwrap_or_else(|| format!("Runs the workflow {}", wf.meta.name));
    WorkflowTool {
        name,
        description,
        input_schema: crate::format::inputs::json_schema(&wf.inputs),
        output_schema: output_schema(&wf),
        workflow: wf,
    }
}

/// Which workflows are tools: every file named on the command line; below a
/// folder, those with a `type: mcp` trigger. Two tools with one name are
/// an error naming both files.
pub fn tools_of(
    named: &[Arc<Workflow>],
    found_in_folders: &[Arc<Workflow>],
) -> Result<Vec<WorkflowTool>, String> {
    let mut out: Vec<WorkflowTool> = Vec::new();
    let chosen = named.iter().cloned().chain(
        found_in_folders
            .iter()
            .filter(|wf| mcp_trigger(wf).is_some())
            .cloned(),
    );
    for wf in chosen {
        if out.iter().any(|t| t.workflow.source.path == wf.source.path) {
            continue;
        }
        let tool = tool_of(wf);
        if let Some(other) = out.iter().find(|t| t.name == tool.name) {
            return Err(format!(
                "two workflows are the tool `{}`: {} and {} (give one a `type: mcp` trigger with another `name`)",
                tool.name,
                other.workflow.source.name,
                tool.workflow.source.name
            ));
        }
        out.push(tool);
    }
    Ok(out)
}

/// The declared outputs as a JSON Schema object; none when the workflow
/// declares none (its outputs are then whatever it sets).
fn output_schema(wf: &Workflow) -> Option<Map<String, Value>> {
    if wf.outputs.is_empty() {
        return None;
    }
    let mut props = Map::new();
    for o in &wf.outputs {
        let mut p = Map::new();
        // An output a run did not set (a step skipped, debug left out) is
        // null: valid beside the declared type.
        if let Some(t) = o.ty.as_deref().filter(|t| InputType::NAMES.contains(t)) {
            p.insert("type".into(), json!([t, "null"]));
        }
        if let Some(d) = &o.description {
            p.insert("description".into(), json!(d));
        }
        props.insert(o.name.clone(), Value::Object(p));
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(props));
    Some(schema)
}
