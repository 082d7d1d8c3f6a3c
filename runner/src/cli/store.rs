//! `marktoflow history`, `show`, `retry` and `prune`: the run store from the
//! command line. Data goes to stdout, problems to stderr.

use crate::cli::{ExecArgs, RunArgs, StoreArgs, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::store::retry::{RetryError, RetryPlan};
use crate::store::{RunFilter, RunRecord, RunStatus, RunStore, StepRow};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Opens the store for reading; a missing file means no runs yet.
pub(super) fn open(store: &StoreArgs) -> Result<Arc<dyn RunStore>, i32> {
    if store.url().is_some() {
        return match store.open(Path::new(".")) {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Err(EXIT_USAGE),
            Err(e) => {
                eprintln!("error: {e}");
                Err(EXIT_USAGE)
            }
        };
    }
    let path = store.path(Path::new("."));
    if !path.exists() && !crate::store::journal::dir_of(&path).exists() {
        eprintln!(
            "error: no run store at `{}` (runs are recorded there by `marktoflow run` and `serve`)",
            path.display()
        );
        return Err(EXIT_USAGE);
    }
    match crate::store::SqliteStore::open(&path) {
        Ok(s) => Ok(Arc::new(s)),
        Err(e) => {
            eprintln!("error: {e}");
            Err(EXIT_USAGE)
        }
    }
}

fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

fn duration(ms: Option<u64>) -> String {
    match ms {
        None => "-".into(),
        Some(ms) => crate::engine::human_duration(std::time::Duration::from_millis(ms)),
    }
}

/// A run as `history --json` and `show --json` print it: `run_id` as in
/// `run --json` and the API (`id`, its former name, kept for a release).
fn run_json(r: &RunRecord) -> Value {
    let mut v = led_by("run_id", &r.id, r);
    v["status"] = json!(r.shown_status());
    v
}

pub fn history(
    store: &StoreArgs,
    workflow: Option<String>,
    status: Option<String>,
    limit: usize,
    as_json: bool,
) -> i32 {
    let status = match status.as_deref().map(|s| (s, RunStatus::parse(s))) {
        None => None,
        Some((_, Some(s))) => Some(s),
        Some((s, None)) => {
            let all: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            eprintln!("error: unknown status `{s}`: use {}", all.join(", "));
            return EXIT_USAGE;
        }
    };
    let s = match open(store) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let runs = match s.list_runs(&RunFilter {
        workflow,
        status,
        limit: Some(limit),
        ..Default::default()
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    if as_json {
        let list: Vec<Value> = runs.iter().map(run_json).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"runs": list})).unwrap_or_default()
        );
        return EXIT_OK;
    }
    if runs.is_empty() {
        eprintln!("no runs recorded");
        return EXIT_OK;
    }
    println!(
        "{:<8}  {:<24}  {:<11}  {:<8}  {:<19}  {:>9}",
        "RUN", "WORKFLOW", "STATUS", "TRIGGER", "STARTED (UTC)", "DURATION"
    );
    for r in &runs {
        println!(
            "{:<8}  {:<24}  {:<11}  {:<8}  {:<19}  {:>9}",
            crate::store::short_id(&r.id),
            r.workflow,
            r.shown_status(),
            r.trigger,
            when(r.created_at),
            duration(r.duration_ms)
        );
    }
    EXIT_OK
}

/// A step as `show --json` prints it: `id` as in `run --json` and the API
/// (`step_id`, its former name, kept for a release).
fn step_json(s: &StepRow) -> Value {
    led_by("id", &s.step_id, s)
}

/// `row`'s fields after `key: id` (the name the rest of the JSON uses).
fn led_by(key: &str, id: &str, row: &impl serde::Serialize) -> Value {
    let mut v = json!({ key: id });
    if let (Value::Object(out), Ok(Value::Object(rest))) = (&mut v, serde_json::to_value(row)) {
        out.extend(rest);
    }
    v
}

/// What a waiting run waits for, and how to answer it.
fn waiting_lines(s: &dyn RunStore, run: &crate::store::RunRecord) {
    let filter = crate::store::WaitFilter {
        run_id: Some(run.id.clone()),
        open: true,
        ..Default::default()
    };
    for w in s.waits(&filter).unwrap_or_default() {
        let r = &w.request;
        let what = r.title.clone().or(r.prompt.clone()).unwrap_or_default();
        println!("waits at  {} ({what})", r.step_id);
        let short = crate::store::short_id(&run.id);
        let command = match r.mode {
            crate::format::model::AskMode::Pause => format!("marktoflow resume {short}"),
            crate::format::model::AskMode::Approval => {
                format!("marktoflow answer {short} {} --approve|--reject", r.step_id)
            }
            _ => format!("marktoflow answer {short} {} --input …", r.step_id),
        };
        println!("answer    {command}");
        if let Some(d) = r.deadline {
            println!("expires   {} UTC", when(d));
        }
    }
}

pub fn show(store: &StoreArgs, id: &str, as_json: bool) -> i32 {
    let s = match open(store) {
        Ok(s) => s,
        Err(c) => return c,
    };
    let (run, steps) = match s.get_run(id).and_then(|r| {
        let steps = s.steps_of(&r.id)?;
        Ok((r, steps))
    }) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    if as_json {
        let mut v = run_json(&run);
        v["steps"] = Value::Array(steps.iter().map(step_json).collect());
        if let Some(u) = StepRow::spent(&steps) {
            v["usage"] = serde_json::to_value(u).unwrap_or_default();
        }
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return EXIT_OK;
    }
    println!("run       {}", run.id);
    println!("workflow  {} ({})", run.workflow, run.file);
    println!("status    {}", run.shown_status());
    println!("trigger   {}", run.trigger);
    if let Some(of) = &run.retry_of {
        println!("retry of  {of}");
    }
    println!("started   {} UTC", when(run.created_at));
    println!("duration  {}", duration(run.duration_ms));
    println!("inputs    {}", run.inputs);
    if let Some(u) = StepRow::spent(&steps) {
        println!("spent     {u}");
    }
    if run.status == crate::store::RunStatus::Waiting {
        waiting_lines(s.as_ref(), &run);
    }
    println!();
    for st in &steps {
        let indent = "  ".repeat(st.depth);
        let status = st.status.as_str();
        let id = match st.iterations() {
            Some(it) => format!("{} {it}", st.step_id),
            None => st.step_id.clone(),
        };
        let mut line = format!(
            "{indent}{:<9} {} ({}), {} attempt{}",
            status,
            id,
            duration(Some(st.duration_ms)),
            st.attempts,
            if st.attempts == 1 { "" } else { "s" }
        );
        if st.reused {
            line.push_str(", reused");
        }
        println!("{line}");
        if let Some(u) = &st.usage {
            let model = u.model.as_deref().unwrap_or("model");
            println!("{indent}          {model}: {u}");
        }
        if let Some(e) = &st.error {
            println!("{indent}          error: {e}");
        } else if !st.output.is_null() {
            let text = st.output.to_string();
            let short: String = text.chars().take(120).collect();
            let more = if text.chars().count() > 120 {
                "…"
            } else {
                ""
            };
            println!("{indent}          output: {short}{more}");
        }
    }
    if let Some(e) = &run.error {
        println!();
        match &run.error_step {
            Some(step) => println!("failed at `{step}`: {e}"),
            None => println!("failed: {e}"),
        }
    }
    if !run.outputs.is_null() && run.status == RunStatus::Completed {
        println!();
        println!("outputs   {}", run.outputs);
    }
    EXIT_OK
}

/// The arguments and plan for `retry`: the stored run's file and inputs,
/// and the checkpoint before `from` (default: the run's latest checkpoint).
pub fn retry_plan(
    a: &ExecArgs,
    id: &str,
    from: Option<&str>,
    force: bool,
) -> Result<(RunArgs, RetryPlan), i32> {
    let s = open(&a.store)?;
    let run = s.get_run(id).map_err(|e| {
        eprintln!("error: {e}");
        EXIT_USAGE
    })?;
    let file = PathBuf::from(&run.file);
    let wf = crate::check::load::load_file(&file, &marktoflow_steps::Registry::standard())
        .map_err(|d| {
            crate::cli::print_diagnostics(&d);
            EXIT_USAGE
        })?;
    let wf = wf.workflow;
    let planned = if force {
        crate::store::retry::plan_forced(s.as_ref(), &run, &wf, from).map(|(plan, changes)| {
            if crate::store::version_of(&wf) != run.version {
                let list = |v: &[String]| {
                    if v.is_empty() {
                        "none".to_string()
                    } else {
                        v.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
                    }
                };
                eprintln!(
                    "warning: `{}` changed since run `{}`; retrying from `{}` anyway (--force)",
                    run.file,
                    run.id,
                    wf.steps
                        .get(plan.checkpoint.next_step)
                        .map(|s| s.id.as_str())
                        .unwrap_or("the end")
                );
                eprintln!(
                    "  top-level steps added: {}; removed: {}; the steps before it reuse the run's recorded values",
                    list(&changes.added),
                    list(&changes.removed)
                );
            }
            plan
        })
    } else {
        crate::store::retry::plan(s.as_ref(), &run, &wf, from)
    };
    let plan = planned.map_err(|e| {
        eprintln!("error: {e}");
        match e {
            RetryError::Changed { file, .. } => {
                eprintln!("  = hint: `--force` retries anyway, matching steps by id; `marktoflow run {file}` starts afresh");
                EXIT_USAGE
            }
            RetryError::Store(_) => EXIT_RUN_FAILED,
            _ => EXIT_USAGE,
        }
    })?;
    let args = RunArgs::of_file(file, a.clone());
    Ok((args, plan))
}

pub fn prune(store: &StoreArgs, older_than: &str) -> i32 {
    let Some(age) = crate::store::parse_age(older_than) else {
        eprintln!("error: `{older_than}` is not an age: use e.g. 30d, 12h, 90m, 2w");
        return EXIT_USAGE;
    };
    let s = match open(store) {
        Ok(s) => s,
        Err(c) => return c,
    };
    match s.prune(age) {
        Ok(n) => {
            println!("pruned {n} run{}", if n == 1 { "" } else { "s" });
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_RUN_FAILED
        }
    }
}

/// `copy-history`: the finished runs of the SQLite store `from`, with their
/// steps, into the shared store `to`, a page at a time; prints how many were
/// copied, already there, and left (unfinished runs stay where they are).
pub fn copy_history(from: &Path, to: &str) -> i32 {
    if !crate::store::postgres::is_url(to) {
        eprintln!("error: `--to {to}` is not a PostgreSQL URL (postgres://USER@HOST/DB)");
        return EXIT_USAGE;
    }
    // Runs of `marktoflow run` may still be journals beside the file.
    if !from.is_file() && !crate::store::journal::dir_of(from).exists() {
        eprintln!("error: no run store at `{}`", from.display());
        return EXIT_USAGE;
    }
    let source = match crate::store::SqliteStore::open(from) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let shared = crate::store::PgOptions {
        executes: false,
        role: "cli".into(),
        ..Default::default()
    };
    let target = match crate::store::PgStore::open(to, shared) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    const PAGE: usize = 500;
    let (mut copied, mut present, mut left) = (0, 0, 0);
    let mut offset = 0;
    loop {
        let page = match source.list_runs(&RunFilter {
            limit: Some(PAGE),
            offset,
            ..Default::default()
        }) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_RUN_FAILED;
            }
        };
        offset += page.len();
        let mut runs = Vec::new();
        for r in page.iter() {
            if !r.status.is_finished() {
                left += 1;
                continue;
            }
            match source.steps_of(&r.id) {
                Ok(steps) => runs.push((r.clone(), steps)),
                Err(e) => {
                    eprintln!("error: {e}");
                    return EXIT_RUN_FAILED;
                }
            }
        }
        match target.import_finished(runs) {
            Ok((new, old)) => {
                copied += new;
                present += old;
            }
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_RUN_FAILED;
            }
        }
        if page.len() < PAGE {
            break;
        }
    }
    println!(
        "copied {copied} run{}; {present} already there; {left} unfinished left in `{}`",
        if copied == 1 { "" } else { "s" },
        from.display()
    );
    EXIT_OK
}
