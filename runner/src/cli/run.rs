//! `marktoflow run` (and `retry`): inputs, sandbox, the store's journal, the run.

use crate::diag::Diagnostic;
use crate::engine::RunTrigger;
use crate::engine::{Engine, RunConfig, RunStatus};
use crate::format::inputs::{self, Supplied};
use crate::format::model::{self, Workflow};
use marktoflow_steps::agent::AgentOverrides;
use marktoflow_steps::core::action::Capabilities;
use marktoflow_steps::script::ScriptHost;
use marktoflow_steps::{Registry, Sandbox};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::env::environment;
use super::report::{plural, print_diagnostics};
use super::{load, state_dir, FileLoader, RunArgs, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::cli::progress::Progress;
use crate::cli::report::{print_plan, print_result};

pub(super) fn supplied_inputs(a: &RunArgs) -> Result<Vec<(String, Supplied)>, String> {
    let mut out: Vec<(String, Supplied)> = Vec::new();
    if let Some(f) = &a.inputs_file {
        let text = std::fs::read_to_string(f).map_err(|e| {
            format!(
                "cannot read inputs file `{}`: {}",
                f.display(),
                model::io_reason(&e)
            )
        })?;
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}:{}:{}: inputs file is not valid JSON: {e}",
                f.display(),
                e.line(),
                e.column()
            )
        })?;
        let Value::Object(m) = v else {
            return Err(format!(
                "{}: the inputs file must hold a JSON object of input names to values",
                f.display()
            ));
        };
        out.extend(m.into_iter().map(|(k, v)| (k, Supplied::Json(v))));
    }
    for raw in &a.input {
        let (k, v) = match raw.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), Supplied::Text(v.to_string())),
            // A bare `--input flag` sets it to true.
            None => (raw.trim().to_string(), Supplied::Json(Value::Bool(true))),
        };
        if k.is_empty() {
            return Err(format!("invalid `--input {raw}`: expected NAME=VALUE"));
        }
        out.retain(|(n, _)| *n != k);
        out.push((k, v));
    }
    Ok(out)
}

pub use crate::store::retry::RetryPlan;

/// With `--event FILE`: the inputs the saved request body supplies through
/// the workflow's webhook trigger (as `serve` would take them), and what
/// the run sees as `trigger`. Without it: none, and `{type: cli}`.
fn event_inputs(a: &RunArgs, wf: &Workflow) -> Result<(Vec<(String, Supplied)>, Value), String> {
    let Some(file) = &a.event else {
        return Ok((Vec::new(), json!({"type": "cli"})));
    };
    let text = std::fs::read_to_string(file).map_err(|e| {
        format!(
            "cannot read event file `{}`: {}",
            file.display(),
            model::io_reason(&e)
        )
    })?;
    let body: Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}:{}:{}: the event is not valid JSON: {e}",
            file.display(),
            e.line(),
            e.column()
        )
    })?;
    if !body.is_object() {
        return Err(format!(
            "{}: a webhook body must be a JSON object, as the server requires",
            file.display()
        ));
    }
    let headers = event_headers(&a.header)?;
    crate::serve::replay::replayed(wf, &headers, &body).map_err(|e| match e {
        crate::serve::replay::ReplayError::NoWebhook { .. } => format!(
            "{e}; `--event` runs a webhook workflow on a saved request body (use `--inputs-file` for plain inputs)"
        ),
        crate::serve::replay::ReplayError::Ignored { ref wanted, .. } if a.header.is_empty() => {
            // A saved payload lacks the header that names its event.
            format!(
                "{e}; a sender names the event in a header: pass it as `--header X-GitHub-Event={}` (GitHub) or `--header X-Event-Type=...`",
                wanted[0].split('.').next().unwrap_or("...")
            )
        }
        other => other.to_string(),
    })
}

/// The `--header`s of an `--event`, as a request would carry them.
fn event_headers(given: &[String]) -> Result<axum::http::HeaderMap, String> {
    let mut headers = axum::http::HeaderMap::new();
    for h in given {
        // `NAME: VALUE` as curl writes it, or `NAME=VALUE` as `--input` is.
        let split = match (h.find(':'), h.find('=')) {
            (Some(c), Some(e)) => Some(c.min(e)),
            (c, e) => c.or(e),
        };
        let Some(at) = split else {
            return Err(format!("`--header {h}`: expected NAME=VALUE"));
        };
        let (name, value) = (h[..at].trim(), h[at + 1..].trim());
        let name = axum::http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`--header {h}`: `{name}` is not a header name"))?;
        let value = axum::http::HeaderValue::from_str(value)
            .map_err(|_| format!("`--header {h}`: the value is not a header value"))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// With `--from STEP` or `--only STEP`: where the run starts (the steps
/// before it not run, `--var`s standing for what they set) and, for
/// `--only`, the workflow cut after that step.
fn part_of(
    a: &RunArgs,
    wf: Workflow,
) -> Result<(Workflow, Option<crate::engine::Checkpoint>), String> {
    let Some(step) = a.from.as_deref().or(a.only.as_deref()) else {
        if !a.var.is_empty() {
            return Err("`--var` gives variables to `--from STEP` or `--only STEP`; use `--input` for inputs".into());
        }
        return Ok((wf, None));
    };
    let Some(index) = wf.steps.iter().position(|s| s.id == step) else {
        let ids: Vec<&str> = wf.steps.iter().map(|s| s.id.as_str()).collect();
        return Err(format!(
            "`{step}` is not a top-level step of `{}` (they are {})",
            wf.source.name,
            ids.join(", ")
        ));
    };
    let mut variables = serde_json::Map::new();
    for raw in &a.var {
        let Some((name, value)) = raw.split_once('=') else {
            return Err(format!("`--var {raw}`: write it as name=value"));
        };
        let value =
            serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
        variables.insert(name.trim().to_string(), value);
    }
    // What the skipped steps would have set and the steps that run read
    // (by name, in their text) must come from `--var`: say which.
    let first_line = wf.steps[index].pos.line;
    let last_line = match (a.only.is_some(), wf.steps.get(index + 1)) {
        (true, Some(next)) => next.pos.line,
        _ => usize::MAX,
    };
    let text: String = wf
        .source
        .text
        .lines()
        .enumerate()
        .filter(|(i, _)| *i + 1 >= first_line && *i + 1 < last_line)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    let reads = |name: &str| {
        text.match_indices(name).any(|(i, _)| {
            let ident = |c: char| c.is_alphanumeric() || c == '_';
            !text[..i].chars().next_back().is_some_and(ident)
                && !text[i + name.len()..].chars().next().is_some_and(ident)
        })
    };
    let mut missing: Vec<String> = Vec::new();
    for st in wf.steps[..index].iter() {
        let mut set: Vec<&str> = vec![st.id.as_str()];
        set.extend(st.output_variable.as_deref());
        for name in set {
            if !variables.contains_key(name) && reads(name) && !missing.iter().any(|m| m == name) {
                missing.push(name.to_string());
            }
        }
    }
    if !missing.is_empty() {
        eprintln!(
            "warning: the steps before `{step}` are not run, and what follows reads {}: give {} with `--var NAME=VALUE`",
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "),
            if missing.len() == 1 { "it" } else { "them" }
        );
    }
    let mut wf = wf;
    if a.only.is_some() {
        wf.steps.truncate(index + 1);
    }
    Ok((
        wf,
        Some(crate::engine::Checkpoint {
            next_step: index,
            variables,
            ..Default::default()
        }),
    ))
}

pub(super) fn run(a: RunArgs, retry: Option<RetryPlan>) -> i32 {
    run_with(a, retry, None, None)
}

/// A waiting run answered from the command line: it continues in this
/// process, as the same run, recorded in `store` (never a journal: the
/// run's earlier rows are there).
pub(super) struct Continuing {
    pub run: crate::store::RunRecord,
    pub store: Arc<dyn crate::store::RunStore>,
}

/// `run`, and with `debug` (breakpoints, possibly none) `marktoflow debug`;
/// with `continuing`, an answered run goes on (`marktoflow answer`).
pub(super) fn run_with(
    a: RunArgs,
    retry: Option<RetryPlan>,
    debug: Option<Vec<String>>,
    continuing: Option<Continuing>,
) -> i32 {
    let registry = Registry::standard();
    let wf = match load(&a.file, &registry) {
        Ok(w) => w,
        Err(code) => return code,
    };
    let (wf, part) = match part_of(&a, wf) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let debugger: Option<Arc<dyn crate::engine::debug::Debugger>> = match debug {
        None => None,
        Some(breaks) => {
            let ids: Vec<String> = wf.walk().iter().map(|s| s.id.clone()).collect();
            if let Some(bad) = breaks.iter().find(|b| !ids.contains(b)) {
                eprintln!(
                    "error: `--break {bad}`: no step `{bad}` in `{}` (its steps: {})",
                    wf.source.name,
                    ids.join(", ")
                );
                return EXIT_USAGE;
            }
            let input = Box::new(std::io::BufReader::new(std::io::stdin()));
            Some(Arc::new(super::debug::Repl::new(
                Arc::new(wf.clone()),
                breaks,
                input,
            )))
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let wf_dir = a
        .file
        .parent()
        .map(Path::to_path_buf)
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or_else(|| PathBuf::from("."));
    let env = environment(&wf_dir);
    // What `validate` finds, before anything runs (and anything is paid for).
    let diags = crate::check::verify::verify(&wf, &registry, &crate::template::Templates::new());
    if !a.exec.quiet || crate::check::verify::has_errors(&diags) {
        print_diagnostics(&diags);
    }
    if crate::check::verify::has_errors(&diags) || (a.strict && !diags.is_empty()) {
        let n = diags.len();
        let what = if crate::check::verify::has_errors(&diags) {
            "problem"
        } else {
            "warning"
        };
        eprintln!(
            "marktoflow: {n} {what}{} in `{}`; nothing was run{}",
            plural(n),
            a.file.display(),
            if a.strict { " (--strict)" } else { "" }
        );
        return EXIT_USAGE;
    }
    let mut trigger = json!({"type": "cli"});
    let kept = retry.as_ref().map(|p| p.inputs.clone()).or_else(|| {
        continuing
            .as_ref()
            .map(|c| c.run.inputs.as_object().cloned().unwrap_or_default())
    });
    let supplied = match &kept {
        // A retry, or an answered run, runs with the inputs the run had.
        Some(inputs) => inputs
            .iter()
            .map(|(k, v)| (k.clone(), Supplied::Json(v.clone())))
            .collect(),
        None => match event_inputs(&a, &wf).and_then(|(mut from_event, context)| {
            from_event.extend(supplied_inputs(&a)?);
            trigger = context;
            Ok(from_event)
        }) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_USAGE;
            }
        },
    };
    // Paths named on the command line are readable (`--input knowledge_base=DIR`).
    let mut read_roots = vec![cwd.clone(), wf_dir.clone()];
    for (_, v) in &supplied {
        // From the command line, or the run a retry continues.
        if let Supplied::Text(s) | Supplied::Json(Value::String(s)) = v {
            let p = cwd.join(s);
            if !s.is_empty() && s.len() < 4096 && p.exists() {
                read_roots.push(p);
            }
        }
    }
    read_roots.extend(a.exec.roots.allow_read.iter().cloned());
    let inputs = match inputs::resolve(&wf, supplied, &env) {
        Ok(i) => i,
        Err(errs) => {
            let diags: Vec<Diagnostic> = errs.iter().map(|e| e.diagnostic(&wf)).collect();
            print_diagnostics(&diags);
            return EXIT_USAGE;
        }
    };
    // The state folder, the run store and `.env` files stay out of reach.
    let store_file = a
        .exec
        .store
        .url()
        .is_none()
        .then(|| a.exec.store.path(&wf_dir));
    let protected = state_dir(&wf_dir).protected(&cwd, &env, store_file.as_deref());
    let sandbox =
        Sandbox::new(cwd, read_roots, a.exec.roots.allow_write.clone()).protecting(protected);
    print_diagnostics(&crate::check::writes::writes_outside(&wf, &sandbox));
    let allowed_hosts = if a.exec.roots.allow_host.is_empty() {
        wf.allowed_hosts.clone()
    } else {
        Some(a.exec.roots.allow_host.clone())
    };
    let overrides = a.exec.provider.overrides();
    let mut caps = one_run_caps(&wf_dir, sandbox, overrides, env, allowed_hosts);
    let engine = Engine::new();
    if a.dry_run {
        let plan = crate::engine::plan::dry_run(&engine, &wf, &inputs, &caps);
        print_plan(&wf, &plan, a.exec.json);
        return EXIT_OK;
    }
    if let Err(diags) = crate::engine::plan::preflight(&wf, &caps) {
        print_diagnostics(&diags);
        eprintln!("marktoflow: nothing was run: agent steps have no LLM provider they can reach");
        return EXIT_USAGE;
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    // Recorded as a journal: the next reader of the store moves it in.
    let store = match &continuing {
        Some(c) => Some(c.store.clone()),
        // A staged run is a look before the real one: not recorded.
        None if a.staged => None,
        None => match a.exec.store.open_journal(&wf_dir) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                eprintln!("  = hint: `--store FILE` records runs elsewhere; `--no-store` does not record this run");
                return EXIT_USAGE;
            }
        },
    };
    let run_id = match &continuing {
        Some(c) => c.run.id.clone(),
        None => crate::store::new_run_id(),
    };
    // Agent replies are recorded with the run: a run that waited for a
    // person and goes on here replays them instead of asking again.
    caps.replies = store.clone().map(|store| {
        Arc::new(crate::store::RecordedReplies {
            store,
            run_id: run_id.clone(),
            recall: continuing.is_some(),
        }) as Arc<dyn marktoflow_steps::core::action::hosts::Replies>
    });
    // The run's row is committed while the first step runs (nobody waits
    // for an answer, unlike a webhook); its outcome is checked at the end.
    let created = store
        .as_ref()
        .filter(|_| continuing.is_none())
        .map(|store| {
            let trigger = match retry {
                Some(_) => RunTrigger::Retry,
                None => RunTrigger::Cli,
            };
            let mut new = crate::store::NewRun::new(run_id.clone(), &wf, inputs.clone(), trigger);
            if let Some(p) = &retry {
                new.retry_of = Some((p.of.clone(), p.reused));
            }
            store.submit_run(new)
        });
    let staged = a
        .staged
        .then(|| Arc::new(crate::testing::staged::Staged::default()));
    // What its model calls spend, to its budget (`--budget` over the file's).
    let mut budget = wf.budget.clone();
    match a.budget {
        Some(super::args::BudgetArg::Tokens(n)) => budget.tokens = Some(n),
        Some(super::args::BudgetArg::Usd(x)) => budget.cost_usd = Some(x),
        None => {}
    }
    let daily = store.clone().map(|store| {
        Arc::new(crate::store::StoredSpend {
            store,
            workflow: wf.meta.id.clone(),
            run_id: run_id.clone(),
            clock: caps.clock.clone(),
        }) as Arc<dyn crate::engine::DailySpend>
    });
    let usage = Arc::new(crate::engine::RunUsage::new(budget, daily));
    caps.usage = Some(usage.clone() as Arc<dyn marktoflow_steps::core::action::hosts::Usage>);
    let printer = Arc::new(Progress::new(&a));
    let sink = printer.clone();
    // `marktoflow pause` from another terminal: asked through the store.
    let pause = store
        .as_ref()
        .map(|_| Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let pauses = store.clone().zip(pause.clone()).map(|(store, flag)| {
        let (id, since) = (run_id.clone(), crate::store::now_ms());
        let held = move |run: &str, at: i64| (run == id && at >= since).then(|| flag.clone());
        (store, held)
    });
    let cfg = RunConfig {
        run_id,
        caps: caps.clone(),
        events: Arc::new(move |e: &crate::engine::Event| sink.event(&e.kind)),
        loader: Some(Arc::new(FileLoader(registry))),
        callers: Vec::new(),
        debugger,
        trigger,
        lease: None,
        recorded: None,
        answers: Default::default(),
        // A run only a store can continue: its waits get links.
        waits: store
            .as_ref()
            .and_then(|_| wait_links(&wf_dir, &caps.env))
            .map(|l| l as Arc<dyn crate::engine::WaitLinks>),
        pause,
        mocks: staged.clone().map(|s| s as Arc<dyn crate::engine::Mocks>),
    };
    let lineage = match &retry {
        Some(p) => crate::telemetry::Lineage::RetryOf(p.of.clone()),
        None => crate::telemetry::Lineage::New,
    };
    let checkpoint = retry.map(|p| p.checkpoint).or(part).unwrap_or_default();
    let cancel = caps.cancel.clone();
    let result = rt.block_on(async {
        // Ctrl-C or SIGTERM (a supervisor, `timeout`): the run is cancelled
        // and recorded as such. Both are listened for before the run starts,
        // so none arrives while the default action (exit) still holds.
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).ok();
        let mut int = signal(SignalKind::interrupt()).ok();
        let interrupt = async {
            tokio::select! {
                _ = recv(&mut int) => {}
                _ = recv(&mut term) => {}
            }
            cancel.cancel();
            // A second Ctrl-C is not waited for: the run is asked to stop.
            std::future::pending::<()>().await
        };
        let looking = pauses.map(|(store, held)| {
            use crate::serve::pauses::{take_asked_pauses, LOOK_EVERY};
            tokio::spawn(take_asked_pauses(
                store,
                LOOK_EVERY,
                Default::default(),
                held,
            ))
        });
        let go = async {
            match (&store, &continuing) {
                (Some(store), Some(c)) => {
                    crate::store::resume_run(store, &engine, &wf, &c.run, cfg).await
                }
                (Some(store), None) => {
                    let cp = checkpoint;
                    crate::store::resume_from(store, &engine, &wf, inputs, cfg, cp, lineage).await
                }
                (None, _) => engine.resume(&wf, inputs, cfg, checkpoint).await,
            }
        };
        let r = tokio::select! {
            r = go => r,
            _ = interrupt => unreachable!("the interrupt future never completes"),
        };
        if let Some(l) = looking {
            l.abort();
        }
        r
    });
    // The run has ended: so do the MCP servers it started.
    rt.block_on(caps.mcp.shutdown());
    if let Some(store) = &store {
        let flushed = store.flush();
        let created = created.map(|c| {
            c.blocking_recv()
                .unwrap_or(Err(crate::store::StoreError::Closed))
        });
        if let Err(e) = flushed.and(created.unwrap_or(Ok(()))) {
            eprintln!("warning: the run was not fully recorded: {e}");
        }
    }
    let mut extra = serde_json::Map::new();
    if let Some(s) = &staged {
        extra.insert("staged".into(), Value::Array(s.held()));
    }
    let spent = usage.totals();
    if let Some(u) = &spent {
        extra.insert("usage".into(), serde_json::to_value(u).unwrap_or_default());
    }
    print_result(&wf, &result, a.exec.json, extra);
    if !a.exec.json {
        if let Some(s) = &staged {
            super::report::print_staged(&s.held());
        }
        if let Some(u) = spent.filter(|_| !a.exec.quiet) {
            eprintln!("spent: {u}");
        }
    }
    match result.status {
        RunStatus::Completed => EXIT_OK,
        // Paused, not failed: it goes on once answered.
        RunStatus::Waiting if store.is_some() => {
            if !a.exec.json {
                super::report::print_waiting(&result);
            }
            EXIT_OK
        }
        RunStatus::Waiting => {
            eprintln!("error: the run stopped at a `wait` for an answer, but `--no-store` keeps nothing to continue it from");
            EXIT_RUN_FAILED
        }
        _ => EXIT_RUN_FAILED,
    }
}

/// The links a run's waits carry: signed with the key of the state folder
/// found from `wf_dir`, pointing at `MARKTOFLOW_PUBLIC_URL` (default: a
/// server on this machine's default port).
pub(super) fn wait_links(
    wf_dir: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Option<Arc<crate::serve::Links>> {
    let base = env
        .get("MARKTOFLOW_PUBLIC_URL")
        .cloned()
        .unwrap_or_else(|| "http://127.0.0.1:8080".into());
    crate::serve::Links::open(&state_dir(wf_dir).root, &base)
        .ok()
        .map(Arc::new)
}

/// The capabilities of one run in this process: the system clock, the
/// state folder found from `wf_dir`, script workers started on demand.
pub(super) fn one_run_caps(
    wf_dir: &Path,
    sandbox: Sandbox,
    agents: AgentOverrides,
    env: std::collections::BTreeMap<String, String>,
    allowed_hosts: Option<Vec<String>>,
) -> Capabilities {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("marktoflow"));
    Capabilities::new(
        sandbox,
        state_dir(wf_dir),
        Arc::new(ScriptHost::new(exe)),
        Arc::new(marktoflow_steps::registry::agent_hub(agents)),
        env,
        allowed_hosts,
    )
}

/// The next signal of `s` (never, when it could not be listened for).
pub(super) async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}
