//! `marktoflow list`: the workflows below folders, with how each is started
//! and what it takes.

use super::report::{plural, print_diagnostics};
use super::validate::discover;
use super::{EXIT_OK, EXIT_USAGE};
use crate::format::model::{Trigger, Workflow};
use crate::serve::schedule;
use marktoflow_steps::Registry;
use serde_json::{json, Value};
use std::path::PathBuf;

pub(super) fn list(paths: &[PathBuf], as_json: bool) -> i32 {
    let (found, errors) = discover(paths, &Registry::standard());
    let now = chrono::Utc::now();
    let mut rows: Vec<Value> = found
        .iter()
        .map(|(f, l)| row(f, &l.workflow, now))
        .collect();
    rows.sort_by(|a, b| a["file"].as_str().cmp(&b["file"].as_str()));
    if as_json {
        let broken: Vec<&String> = errors.iter().map(|d| &d.file).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"workflows": rows, "failed_to_load": broken}))
                .unwrap_or_default()
        );
    } else {
        for r in &rows {
            print_row(r);
        }
        let n = rows.len();
        println!("{n} workflow{}", plural(n));
    }
    if !errors.is_empty() {
        print_diagnostics(&errors);
        let mut files: Vec<&str> = errors.iter().map(|d| d.file.as_str()).collect();
        files.dedup();
        eprintln!(
            "marktoflow: {} file{} did not load (`marktoflow validate` says more)",
            files.len(),
            plural(files.len())
        );
        return EXIT_USAGE;
    }
    if rows.is_empty() {
        eprintln!("error: no workflow files found");
        return EXIT_USAGE;
    }
    EXIT_OK
}

fn row(file: &std::path::Path, wf: &Workflow, now: chrono::DateTime<chrono::Utc>) -> Value {
    // A schedule says the zone it is read in and when it next fires, as
    // `serve` reads it.
    let triggers: Vec<String> = wf
        .triggers
        .iter()
        .map(
            |t| match schedule::fires(t).then(|| schedule::cron_of(wf, t)) {
                Some(Ok((_, cron))) => format!("{} ({})", trigger(t), cron.when(now)),
                _ => trigger(t),
            },
        )
        .collect();
    let inputs: Vec<Value> = wf
        .inputs
        .iter()
        .map(|i| {
            json!({"name": i.name, "type": i.ty.name(), "required": i.required && i.default.is_none(),
                   "default": i.default, "description": i.description})
        })
        .collect();
    json!({
        "file": file.display().to_string(),
        "id": wf.meta.id,
        "name": wf.meta.name,
        "description": wf.meta.description,
        "triggers": triggers,
        "inputs": inputs,
        "steps": wf.walk().len(),
    })
}

/// `webhook POST /lifeos/query`, `schedule 0 9 * * *`, `mcp notes.search`.
fn trigger(t: &Trigger) -> String {
    t.kind.describe(&t.fields)
}

fn print_row(r: &Value) {
    let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
    println!("{}  {} ({})", s("file"), s("name"), s("id"));
    let triggers: Vec<&str> = r["triggers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !triggers.is_empty() {
        println!("  triggers: {}", triggers.join("; "));
    }
    let inputs: Vec<String> = r["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let mark = if i["required"] == true { "" } else { "?" };
            format!(
                "{}{mark}: {}",
                i["name"].as_str().unwrap_or_default(),
                i["type"].as_str().unwrap_or_default()
            )
        })
        .collect();
    if !inputs.is_empty() {
        println!("  inputs: {}", inputs.join(", "));
    }
}
