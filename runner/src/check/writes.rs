//! File writes a run would be refused, found before it starts: a
//! `file.write` to a literal path below no `--allow-write` folder fails only
//! when its step runs (a schedule at 07:00), so `run` and `serve` say so at
//! start, and `validate --allow-write DIR` checks against those folders.

use crate::diag::Diagnostic;
use crate::format::model::{ActionStep, Workflow};
use crate::template::has_tags;
use marktoflow_steps::core::sandbox::SandboxError;
use marktoflow_steps::Sandbox;
use serde_json::Value;
use std::path::Path;

/// The write roots as the user named them: relative to the working folder
/// when below it.
fn roots(sandbox: &Sandbox) -> String {
    if sandbox.write_roots.is_empty() {
        return "there are none".into();
    }
    let shown: Vec<String> = sandbox
        .write_roots
        .iter()
        .map(|r| match r.strip_prefix(&sandbox.cwd) {
            Ok(rel) if rel.as_os_str().is_empty() => "`.`".to_string(),
            Ok(rel) => format!("`{}`", rel.display()),
            Err(_) => format!("`{}`", r.display()),
        })
        .collect();
    format!("they are {}", shown.join(", "))
}

/// A warning for each `file.write` whose literal `path` `sandbox` refuses,
/// naming the flag that allows it.
pub fn writes_outside(wf: &Workflow, sandbox: &Sandbox) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for ActionStep {
        step,
        resolved,
        inputs,
        ..
    } in wf.actions()
    {
        if resolved.spec.name() != "file.write" {
            continue;
        }
        let Some(Value::String(path)) = inputs.get("path") else {
            continue;
        };
        if has_tags(path) {
            continue;
        }
        let said = match sandbox.check_write(path) {
            Ok(_) => continue,
            Err(SandboxError::WriteDenied { .. }) => {
                format!(
                    "`file.write` to `{path}` will be refused: it is below no `--allow-write` folder ({})",
                    roots(sandbox)
                )
            }
            Err(SandboxError::Protected { what, .. }) => {
                format!("`file.write` to `{path}` will be refused: it is {what}")
            }
            Err(_) => continue,
        };
        let folder = Path::new(path)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or(".".to_string(), |p| p.display().to_string());
        let mut d =
            Diagnostic::warning(&wf.source, Some(step.field_pos(&["inputs", "path"])), said);
        d.hints.push(format!(
            "run with `--allow-write {folder}` (or a folder above it)"
        ));
        out.push(d);
    }
    out
}
