//! Everything `validate` checks beyond loading, and what `run` and `serve`
//! check before they start: the authoring checks ([`crate::check::lint`]),
//! sub-workflows (the file exists and loads, the inputs passed are ones it
//! declares, its required inputs are passed), and triggers, compiled exactly
//! as `serve` compiles them (routes, secrets, cron), across every file given.

use crate::diag::{did_you_mean, Diagnostic, Severity};
use crate::format::model::{self, StepKind, Workflow};
use crate::template::{has_tags, Templates};
use marktoflow_steps::core::mcp;
use marktoflow_steps::Registry;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Problems of one workflow on its own, as `run` checks it before starting:
/// template errors and authoring warnings, and its sub-workflows. (Its
/// triggers are `serve`'s business: see [`verify_triggers`].)
pub fn verify(wf: &Workflow, registry: &Registry, templates: &Templates) -> Vec<Diagnostic> {
    let mut out = crate::check::lint::lint(wf, templates);
    sub_workflows(wf, registry, &mut out);
    wait_defaults(wf, &mut out);
    mcp_allowed(wf, &mut out);
    agent_tools(wf, &mut out);
    out
}

/// A wait's `on_timeout.default` values must fit their fields, as an
/// answer must.
fn wait_defaults(wf: &Workflow, out: &mut Vec<Diagnostic>) {
    for step in &wf.steps {
        let crate::format::model::StepKind::Ask(a) = &step.kind else {
            continue;
        };
        let crate::format::model::OnTimeout::Default(d) = &a.on_timeout else {
            continue;
        };
        for (k, v) in d {
            let Some(def) = a.fields.iter().find(|f| &f.name == k) else {
                continue;
            };
            if let Err(e) = crate::format::inputs::check_value(def, v) {
                out.push(Diagnostic::error(
                    &wf.source,
                    Some(step.field_pos(&["on_timeout", "default", k])),
                    format!(
                        "`on_timeout.default`: field {}",
                        e.to_string().trim_start_matches("input ")
                    ),
                ));
            }
        }
    }
}

/// The Claude Agent SDK's built-in tools, which the peer's `claude-agent`
/// steps name in `tools:`.
const CLAUDE_CODE_TOOLS: &[&str] = &[
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "Bash",
    "BashOutput",
    "KillShell",
    "Glob",
    "Grep",
    "LS",
    "Task",
    "WebFetch",
    "WebSearch",
    "NotebookEdit",
    "NotebookRead",
    "TodoWrite",
    "ExitPlanMode",
];

/// The tools an agent step offers (`tools:`) must be declared MCP servers
/// or HTTP tools, or `http` itself.
fn agent_tools(wf: &Workflow, out: &mut Vec<Diagnostic>) {
    let servers: Vec<&str> = wf
        .tools
        .iter()
        .filter(|t| t.sdk == "mcp" || t.sdk == "http")
        .map(|t| t.name.as_str())
        .collect();
    for model::ActionStep {
        step,
        resolved,
        inputs,
        ..
    } in wf.actions()
    {
        if resolved.kind != marktoflow_steps::registry::ActionKind::Agent {
            continue;
        }
        if inputs.get("permissionMode").is_some() {
            out.push(Diagnostic::warning(
                &wf.source,
                Some(step.field_pos(&["inputs", "permissionMode"])),
                "`permissionMode` has no effect here: agent steps never edit files or run commands (they call the MCP servers given in `tools`)",
            ));
        }
        let Some(Value::Array(names)) = inputs.get("tools") else {
            continue;
        };
        for (i, name) in names.iter().enumerate() {
            let Some(name) = name.as_str().filter(|n| !has_tags(n)) else {
                continue;
            };
            // A workflow file is loaded when the step runs.
            let lower = name.to_ascii_lowercase();
            if lower.ends_with(".md") || lower.ends_with(".markdown") {
                continue;
            }
            let server = name.split('.').next().unwrap_or(name);
            if servers.contains(&server)
                || (server == "http" && !wf.tools.iter().any(|t| t.name == "http"))
            {
                continue;
            }
            if CLAUDE_CODE_TOOLS.contains(&server) {
                let mut d = Diagnostic::error(
                    &wf.source,
                    Some(step.field_pos(&["inputs", "tools", &i.to_string()])),
                    format!("input `tools`: `{server}` is a tool of Claude Code (the Claude Agent SDK: files, shell, web), which agent steps here do not have"),
                );
                d.hints.push("offer an MCP server that does the job instead, e.g. files: `tools: {fs: {sdk: mcp, command: npx, args: [-y, '@modelcontextprotocol/server-filesystem', .]}}` in the frontmatter and `tools: [fs]` on the step".into());
                out.push(d);
                continue;
            }
            let mut d = Diagnostic::error(
                &wf.source,
                Some(step.field_pos(&["inputs", "tools", &i.to_string()])),
                format!("input `tools`: `{server}` is not an MCP server or HTTP tool this workflow declares"),
            );
            d.hints.push(match did_you_mean(server, &servers) {
                Some(c) => format!("did you mean `{c}`?"),
                None => format!("declare it: `tools: {{{server}: {{sdk: mcp, command: ...}}}}`"),
            });
            out.push(d);
        }
    }
}

/// A call of an MCP tool the server's `allowed` list leaves out.
fn mcp_allowed(wf: &Workflow, out: &mut Vec<Diagnostic>) {
    for model::ActionStep {
        step,
        action,
        resolved,
        ..
    } in wf.actions()
    {
        let Some(tool) = resolved.tool.as_ref().filter(|t| t.sdk == "mcp") else {
            continue;
        };
        let Ok(config) = mcp::ServerConfig::from_options(&tool.options) else {
            continue;
        };
        if config.allows(&resolved.method) {
            continue;
        }
        let allowed = config.allowed.unwrap_or_default();
        let mut d = Diagnostic::error(
            &wf.source,
            Some(step.field_pos(&["action"])),
            format!(
                "`{action}`: tool `{}` is not in the `allowed` list of `{}`",
                resolved.method, tool.name
            ),
        );
        d.hints.push(
            match did_you_mean(
                &resolved.method,
                &allowed.iter().map(String::as_str).collect::<Vec<_>>(),
            ) {
                Some(c) => format!("did you mean `{}.{c}`?", tool.name),
                None => format!("allowed: {}", allowed.join(", ")),
            },
        );
        out.push(d);
    }
}

/// Trigger problems over a set of workflows served together: each
/// trigger's own (path, method, secrets, cron) and routes claimed twice.
pub fn verify_triggers(
    workflows: &[Arc<Workflow>],
    env: &BTreeMap<String, String>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if let Err(d) = crate::serve::routes_of(workflows, env) {
        out.extend(d);
    }
    if let Err(d) = crate::serve::schedules_of(workflows) {
        out.extend(d);
    }
    out
}

/// Whether any of `diags` is an error.
pub fn has_errors(diags: &[Diagnostic]) -> bool {
    diags.iter().any(|d| d.severity == Severity::Error)
}

/// Whether a template is anywhere in `v` (known only when the step runs).
fn templated(v: &Value) -> bool {
    match v {
        Value::String(s) => has_tags(s),
        Value::Array(a) => a.iter().any(templated),
        Value::Object(m) => m.values().any(templated),
        _ => false,
    }
}

fn sub_workflows(wf: &Workflow, registry: &Registry, out: &mut Vec<Diagnostic>) {
    for step in wf.walk() {
        let StepKind::SubWorkflow { path, inputs } = &step.kind else {
            continue;
        };
        if has_tags(path) {
            continue;
        }
        let at = step.field_pos(&["workflow"]);
        let file = wf.source.path.parent().unwrap_or(Path::new("")).join(path);
        if !file.is_file() {
            let shown = file.display();
            out.push(
                Diagnostic::error(
                    &wf.source,
                    Some(at),
                    format!("sub-workflow `{path}` not found: no file at `{shown}`"),
                )
                .with_hint("the path is relative to this workflow's folder"),
            );
            continue;
        }
        if let Some(chain) = cycle_back(&wf.source.path, &file, registry) {
            out.push(
                Diagnostic::error(
                    &wf.source,
                    Some(at),
                    format!("sub-workflow cycle: {}", chain.join(" → ")),
                )
                .with_hint("a workflow that calls itself, directly or not, never ends"),
            );
            continue;
        }
        let child = match model::load_file(&file, registry) {
            Ok(l) => l.workflow,
            Err(diags) => {
                let first = diags.first().map(|d| d.render()).unwrap_or_default();
                out.push(Diagnostic::error(
                    &wf.source,
                    Some(at),
                    format!("sub-workflow `{path}` does not load:\n{first}"),
                ));
                continue;
            }
        };
        let given = match inputs {
            Value::Object(m) => m.clone(),
            _ => continue,
        };
        let declared: Vec<&str> = child.inputs.iter().map(|i| i.name.as_str()).collect();
        for (k, v) in &given {
            // A literal is checked now, as the call will check it.
            if let Some(def) = child.input(k).filter(|_| !templated(v)) {
                if let Err(e) = crate::format::inputs::check_value(def, v) {
                    let mut d = Diagnostic::error(
                        &wf.source,
                        Some(step.field_pos(&["inputs", k])),
                        format!("sub-workflow `{path}`: {e}"),
                    );
                    d.hints.extend(e.hint);
                    out.push(d);
                }
            }
            if !declared.contains(&k.as_str()) {
                let mut d = Diagnostic::error(
                    &wf.source,
                    Some(step.field_pos(&["inputs", k])),
                    format!("sub-workflow `{path}` has no input `{k}`"),
                );
                d.hints.push(match did_you_mean(k, &declared) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None if declared.is_empty() => "it declares no inputs".into(),
                    None => format!("it declares: {}", declared.join(", ")),
                });
                out.push(d);
            }
        }
        for i in &child.inputs {
            if i.required && i.default.is_none() && !given.contains_key(&i.name) {
                out.push(Diagnostic::error(
                    &wf.source,
                    Some(step.field_pos(&["inputs"])),
                    format!("sub-workflow `{path}` needs the input `{}`", i.name),
                ));
            }
        }
    }
}

/// The chain of file names by which `first`, called from `start`, calls
/// `start` again through sub-workflows whose paths are written out (those
/// made by templates are known only when they run), if it does. The search
/// stops after 64 files.
fn cycle_back(start: &Path, first: &Path, registry: &Registry) -> Option<Vec<String>> {
    let key = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let home = key(start);
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    // Depth first, each file once: (file, the chain of names that led to it).
    let mut todo = vec![(first.to_path_buf(), vec![name(start), name(first)])];
    let mut seen = std::collections::BTreeSet::new();
    while let Some((file, chain)) = todo.pop() {
        if key(&file) == home {
            return Some(chain);
        }
        if !seen.insert(key(&file)) || seen.len() > 64 {
            continue;
        }
        let Ok(loaded) = model::load_file(&file, registry) else {
            continue;
        };
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        for step in loaded.workflow.walk() {
            if let StepKind::SubWorkflow { path, .. } = &step.kind {
                if !has_tags(path) {
                    let next = dir.join(path);
                    let mut c = chain.clone();
                    c.push(name(&next));
                    todo.push((next, c));
                }
            }
        }
    }
    None
}
