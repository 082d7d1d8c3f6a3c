//! What the command prints at the end: diagnostics, plans, results.

use crate::diag::Diagnostic;
use crate::engine::{RunResult, RunStatus};
use crate::format::model::Workflow;
use serde_json::{json, Map, Value};
use std::io::{IsTerminal, Write};

pub(super) struct Style {
    color: bool,
}

impl Style {
    pub(super) fn stderr() -> Self {
        Style {
            color: std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }
    pub(super) fn stdout() -> Self {
        Style {
            color: std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }
    pub(super) fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
}

pub fn print_diagnostics(diags: &[Diagnostic]) {
    let style = Style::stderr();
    let mut err = std::io::stderr().lock();
    for d in diags {
        let text = d.render();
        let text = match d.severity {
            crate::diag::Severity::Error => text.replacen(
                ": error:",
                &format!(": {}:", style.paint("1;31", "error")),
                1,
            ),
            crate::diag::Severity::Warning => text.replacen(
                ": warning:",
                &format!(": {}:", style.paint("1;33", "warning")),
                1,
            ),
        };
        let _ = writeln!(err, "{text}");
    }
}

/// Writes to stdout. A reader that went away (`run … | head`) is not an
/// error of the run, which is over and recorded: what it did not read is
/// dropped rather than the process panicking.
fn to_stdout(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

pub(super) fn print_plan(wf: &Workflow, plan: &[crate::engine::plan::PlannedStep], as_json: bool) {
    if as_json {
        to_stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(
                &json!({"workflow": wf.meta.id, "dry_run": true, "steps": plan})
            )
            .unwrap_or_default()
        ));
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "Dry run of `{}` ({}): nothing is called.\n",
        wf.meta.id, wf.source.name
    );
    for p in plan {
        let pad = "  ".repeat(p.depth);
        let what = match (&p.action, &p.target, &p.condition) {
            (Some(a), Some(t), _) => format!("{a} → {t}"),
            (Some(a), None, _) => a.clone(),
            (None, _, Some(c)) => format!("{} {c}", p.kind),
            _ => p.kind.to_string(),
        };
        let _ = writeln!(out, "{pad}• {} [{what}]", p.name);
        if let Value::Object(m) = &p.inputs {
            for (k, v) in m {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string_pretty(other).unwrap_or_default(),
                };
                let mut lines = text.lines();
                let first = lines.next().unwrap_or("");
                let _ = writeln!(out, "{pad}    {k}: {first}");
                for l in lines {
                    let _ = writeln!(out, "{pad}      {l}");
                }
            }
        }
        if let Some(v) = &p.output_variable {
            let _ = writeln!(out, "{pad}    → {v}");
        }
    }
}

/// The result of a run; `extra`: more of it for `--json` (`staged`,
/// `usage`).
pub(super) fn print_result(wf: &Workflow, r: &RunResult, as_json: bool, extra: Map<String, Value>) {
    if let Some(f) = &r.error {
        print_diagnostics(&[f.diagnostic(wf)]);
    }
    if as_json {
        let steps: Vec<Value> = r
            .steps
            .iter()
            .map(|s| json!({"id": s.id, "name": s.name, "status": s.status, "output": s.output, "error": s.error, "duration_ms": s.duration_ms, "retries": s.retries}))
            .collect();
        let error = r.error.as_ref().map(|f| {
            let mut e = json!({"message": f.message, "step": f.step_id, "file": f.file, "line": f.pos.map(|p| p.line), "column": f.pos.map(|p| p.col)});
            if let Some(c) = &f.code {
                e["code"] = json!(c);
            }
            e
        });
        let doc = json!({
            "run_id": r.run_id,
            "workflow": r.workflow,
            "status": r.status,
            "outputs": r.outputs,
            "steps": steps,
            "error": error,
            "duration_ms": r.duration_ms,
        });
        let mut doc = doc;
        if let Some(w) = &r.waiting {
            doc["waiting"] = serde_json::to_value(w).unwrap_or_default();
        }
        for (k, v) in extra {
            doc[k] = v;
        }
        to_stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
        return;
    }
    if r.status == RunStatus::Completed {
        to_stdout(&human_outputs(&r.outputs));
    }
}

/// The writes a staged run held back (`run --staged`), after its outputs.
pub(super) fn print_staged(held: &[Value]) {
    {
        if held.is_empty() {
            to_stdout("staged: nothing to write\n");
        } else {
            to_stdout(&format!(
                "staged: {} write{} held back, none made:\n",
                held.len(),
                if held.len() == 1 { "" } else { "s" }
            ));
            for h in held {
                to_stdout(&format!(
                    "  {} at step `{}`: {}\n",
                    h["action"].as_str().unwrap_or_default(),
                    h["step"].as_str().unwrap_or_default(),
                    h["inputs"]
                ));
            }
        }
    }
}

/// How to answer a run that stopped at a `wait` (on stderr).
pub(super) fn print_waiting(r: &RunResult) {
    let Some(w) = &r.waiting else { return };
    let id = crate::store::short_id(&r.run_id);
    if w.mode == crate::format::model::AskMode::Pause {
        eprintln!(
            "run {id} is paused ({}); go on with:\n  marktoflow resume {id}",
            w.title.as_deref().unwrap_or("paused")
        );
        if let Some(link) = &w.link {
            eprintln!("  or open {link} (served by `marktoflow serve`)");
        }
        return;
    }
    let fields: Vec<String> = w
        .fields
        .iter()
        .map(|f| format!(" --input {}=<{}>", f.name, f.ty))
        .collect();
    let decision = if w.mode == crate::format::model::AskMode::Approval {
        " --approve|--reject"
    } else {
        ""
    };
    eprintln!(
        "run {id} waits at step `{}`; answer it with:\n  marktoflow answer {id} {}{decision}{}",
        w.step_id,
        w.step_id,
        fields.join("")
    );
    if let Some(link) = &w.link {
        eprintln!("  or open {link} (served by `marktoflow serve`)");
    }
    if let Some(d) = w.deadline {
        eprintln!(
            "  it expires at {}",
            marktoflow_steps::core::time::iso_ms(d)
        );
    }
}

/// Outputs as readable YAML (strings stay multi-line).
pub(super) fn human_outputs(v: &Value) -> String {
    match v {
        Value::Object(m) if m.is_empty() => String::new(),
        _ => serde_yaml::to_string(v).unwrap_or_else(|_| format!("{v}\n")),
    }
}
