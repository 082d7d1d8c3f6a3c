//! Preflight checks and `--dry-run` plans: what a run would call, calling nothing.

use crate::diag::Diagnostic;
use crate::engine::with_env;
use crate::engine::Engine;
use crate::format::model::{ActionStep, Step, StepKind, Workflow};
use crate::template::Templates;
use marktoflow_steps::core::action::Capabilities;
use marktoflow_steps::registry::ActionKind;
use serde::Serialize;
use serde_json::{Map, Value};

/// Checks, before the first step runs, that every agent step has a provider
/// it can reach (keys and endpoints set).
pub fn preflight(wf: &Workflow, caps: &Capabilities) -> Result<(), Vec<Diagnostic>> {
    let mut errors: Vec<Diagnostic> = Vec::new();
    for ActionStep {
        step,
        resolved,
        inputs,
        ..
    } in wf.actions()
    {
        // Listing models needs no model; its errors come when it runs.
        if resolved.kind != ActionKind::Agent || resolved.method == "listModels" {
            continue;
        }
        let tool = resolved.tool.clone().unwrap_or_default();
        let tool = with_env(&tool, &caps.env);
        if let Err(msg) = caps
            .agents
            .preflight(&tool, step_model(step, inputs), &caps.env)
        {
            // One message per distinct problem is enough.
            if !errors.iter().any(|d| d.message == msg) {
                errors.push(Diagnostic::error(
                    &wf.source,
                    Some(step.field_pos(&["action"])),
                    msg,
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The model a step names: its `model:`, else a literal `inputs.model`
/// (as the peer's methods read it).
fn step_model<'a>(step: &'a Step, inputs: &'a Value) -> Option<&'a str> {
    step.model.as_deref().or_else(|| {
        inputs
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty() && !crate::template::has_tags(m))
    })
}

/// One step as a dry run shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedStep {
    pub id: String,
    pub name: String,
    pub depth: usize,
    pub kind: &'static str,
    pub action: Option<String>,
    /// For agent steps: the provider and model that would be called, or what is missing.
    pub target: Option<String>,
    /// Rendered inputs; strings that depend on earlier steps' outputs stay unrendered.
    pub inputs: Value,
    pub condition: Option<String>,
    pub output_variable: Option<String>,
}

pub fn dry_run(
    engine: &Engine,
    wf: &Workflow,
    inputs: &Map<String, Value>,
    caps: &Capabilities,
) -> Vec<PlannedStep> {
    let mut out = Vec::new();
    let env: Map<String, Value> = caps
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let ctx = Templates::context(
        &Value::Object(inputs.clone()),
        &Map::new(),
        &Value::Object(Map::new()),
        &Value::Object(env),
    );
    walk(engine.templates(), &wf.steps, 0, &ctx, caps, &mut out);
    // A plan is shown, like a run: its secrets are masked too.
    let secrets = crate::engine::secrets::Secrets::of_env(&caps.env);
    for p in &mut out {
        secrets.value(&mut p.inputs);
        if let Some(t) = &mut p.target {
            *t = secrets.text(t).into_owned();
        }
    }
    out
}

fn walk(
    t: &Templates,
    steps: &[Step],
    depth: usize,
    ctx: &minijinja::Value,
    caps: &Capabilities,
    out: &mut Vec<PlannedStep>,
) {
    for step in steps {
        let mut p = PlannedStep {
            id: step.id.clone(),
            name: step.display_name().to_string(),
            depth,
            kind: step.kind.label(),
            action: None,
            target: None,
            inputs: Value::Null,
            condition: None,
            output_variable: step.output_variable.clone(),
        };
        match &step.kind {
            StepKind::Action {
                action,
                resolved,
                inputs,
            } => {
                p.action = Some(action.clone());
                p.inputs = render_lenient(t, inputs, ctx);
                if resolved.kind == ActionKind::Agent {
                    let tool = with_env(&resolved.tool.clone().unwrap_or_default(), &caps.env);
                    p.target = Some(
                        match caps
                            .agents
                            .preflight(&tool, step_model(step, inputs), &caps.env)
                        {
                            Ok(d) => d,
                            Err(e) => format!("not configured: {e}"),
                        },
                    );
                }
            }
            StepKind::If { condition, .. } | StepKind::While { condition, .. } => {
                p.condition = Some(condition.clone())
            }
            StepKind::Switch { expression, .. } => p.condition = Some(expression.clone()),
            _ => {}
        }
        out.push(p);
        for child in step.kind.children() {
            walk(t, child, depth + 1, ctx, caps, out);
        }
    }
}

/// Renders what can be rendered now; a string that needs earlier outputs is kept as written.
fn render_lenient(t: &Templates, v: &Value, ctx: &minijinja::Value) -> Value {
    match v {
        Value::String(_) => t.render_value(v, ctx).unwrap_or_else(|_| v.clone()),
        Value::Array(a) => Value::Array(a.iter().map(|x| render_lenient(t, x, ctx)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), render_lenient(t, x, ctx)))
                .collect(),
        ),
        other => other.clone(),
    }
}
