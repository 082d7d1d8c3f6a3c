//! `marktoflow test [PATHS] [--junit FILE] [--live]`: finds the test files,
//! runs every case in parallel, prints each outcome and a summary, and
//! exits 1 when a case failed (2 when a file could not be read).

use super::report::{plural, print_diagnostics};
use super::{state_dir, FileLoader, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::diag::Diagnostic;
use crate::format::model::Workflow;
use crate::testing::run::{run_case, Outcome, Setup};
use crate::testing::spec::{self, TestFile};
use marktoflow_steps::{Registry, Sandbox};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub fn test(paths: &[PathBuf], junit: Option<&Path>, live: bool) -> i32 {
    let started = Instant::now();
    let mut problems: Vec<Diagnostic> = Vec::new();
    let mut files = Vec::new();
    for p in paths {
        if !p.exists() {
            problems.push(Diagnostic::file_error(
                &p.display().to_string(),
                "no such file or folder",
            ));
        } else if p.is_file() && !spec::is_test_file(p) {
            problems.push(Diagnostic::file_error(
                &p.display().to_string(),
                "not a test file: tests are named `NAME.test.md`",
            ));
        }
    }
    for f in crate::serve::workflow_files(paths) {
        if spec::is_test_file(&f) {
            // Named as below the folder given (`shop.test.md`, not `./shop.test.md`).
            files.push(f.strip_prefix("./").map(Path::to_path_buf).unwrap_or(f));
        }
    }
    let registry = Registry::standard();
    let mut loaded: Vec<(TestFile, Arc<Workflow>)> = Vec::new();
    for f in &files {
        match spec::load(f, &registry) {
            Ok(t) => loaded.push(t),
            Err(d) => problems.extend(d),
        }
    }
    if !problems.is_empty() {
        print_diagnostics(&problems);
        eprintln!("marktoflow: nothing was tested");
        return EXIT_USAGE;
    }
    if loaded.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| format!("`{}`", p.display())).collect();
        eprintln!(
            "error: no test files (`NAME.test.md`) under {}",
            shown.join(", ")
        );
        return EXIT_USAGE;
    }
    let results = match run_all(&loaded, live) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    let (mut passed, mut failed) = (0usize, 0usize);
    for (name, outcomes) in &results {
        println!("{name}");
        for o in outcomes {
            let ms = o.duration.as_millis();
            if o.passed() {
                passed += 1;
                println!("  ✓ {} ({ms} ms)", o.case);
            } else {
                failed += 1;
                println!("  ✗ {} ({ms} ms)", o.case);
                for f in &o.failures {
                    println!("      {f}");
                }
            }
        }
    }
    println!(
        "\n{passed} passed, {failed} failed ({} case{} in {} file{}) in {:.2} s",
        passed + failed,
        plural(passed + failed),
        results.len(),
        plural(results.len()),
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = junit {
        if let Err(e) = std::fs::write(path, crate::testing::junit::report(&results)) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
            return EXIT_RUN_FAILED;
        }
    }
    if failed == 0 {
        EXIT_OK
    } else {
        EXIT_RUN_FAILED
    }
}

/// A stored run that ended (or waits), its steps and its workflow as the
/// file is now; Err: the exit code, what was wrong said.
fn stored(
    run_id: &str,
    store: &super::StoreArgs,
) -> Result<
    (
        crate::store::RunRecord,
        Vec<crate::store::StepRow>,
        Workflow,
    ),
    i32,
> {
    let s = super::store::open(store)?;
    let (run, steps) = s
        .get_run(run_id)
        .and_then(|r| {
            let steps = s.steps_of(&r.id)?;
            Ok((r, steps))
        })
        .map_err(|e| {
            eprintln!("error: {e}");
            EXIT_USAGE
        })?;
    if !run.status.is_finished() && run.status != crate::engine::RunStatus::Waiting {
        eprintln!(
            "error: run `{}` is {}: it has not ended",
            run.id,
            run.shown_status()
        );
        return Err(EXIT_USAGE);
    }
    let file = PathBuf::from(&run.file);
    let wf = match crate::check::load::load_file(&file, &Registry::standard()) {
        Ok(l) => l.workflow,
        Err(d) => {
            print_diagnostics(&d);
            eprintln!(
                "error: the run's workflow `{}` does not load",
                file.display()
            );
            return Err(EXIT_USAGE);
        }
    };
    if crate::store::version_of(&wf) != run.version {
        eprintln!(
            "warning: `{}` changed since run {}",
            file.display(),
            crate::store::short_id(&run.id)
        );
    }
    Ok((run, steps, wf))
}

/// `marktoflow replay RUN`: the run again offline, and where it does
/// otherwise now.
pub fn replay(run_id: &str, json: bool, store: &super::StoreArgs) -> i32 {
    let (run, steps, wf) = match stored(run_id, store) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let (case, cut) = crate::testing::record::case_of(&wf, &run, &steps);
    for step in &cut {
        eprintln!("warning: the store kept only the start of what step `{step}` gave: the replay cannot answer it");
    }
    let wf = Arc::new(wf);
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    let setup = setup_for(&wf, false);
    let replayed = rt.block_on(crate::testing::run::run_mocked(&wf, &case, &setup, None));
    rt.block_on(setup.caps.mcp.shutdown());
    let (result, _) = match replayed {
        Ok(r) => r,
        Err(problems) => {
            for p in problems {
                eprintln!("error: {p}");
            }
            return EXIT_USAGE;
        }
    };
    let diffs = crate::testing::replay::diff(&steps, &result.steps);
    let same = result.status == run.status
        && result.outputs == run.outputs
        && diffs.iter().all(|d| d.same());
    if json {
        let out = serde_json::json!({
            "run_id": run.id,
            "workflow": run.workflow,
            "same": same,
            "status": result.status.as_str(),
            "outputs": result.outputs,
            "was_status": run.status.as_str(),
            "was_outputs": run.outputs,
            "steps": diffs.iter().map(|d| d.json()).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        let short = crate::store::short_id(&run.id);
        let first = diffs.iter().find(|d| !d.same()).map(|d| d.id.clone());
        println!(
            "replay of run {short} ({}), offline: {}",
            from_here(&wf.source.path),
            match (&first, same) {
                (_, true) => "the same".to_string(),
                (Some(step), false) => format!("diverges at step `{step}`"),
                (None, false) => "diverges in its end".to_string(),
            }
        );
        let shown = |s: &Option<(String, serde_json::Value)>| match s {
            Some((status, output)) if output.is_null() => status.clone(),
            Some((status, output)) => format!("{status} {}", brief(output)),
            None => "not run".to_string(),
        };
        for d in &diffs {
            if d.same() {
                println!("  = {:<16} {}", d.id, shown(&d.now));
            } else {
                println!(
                    "  ≠ {:<16} was {}, now {}",
                    d.id,
                    shown(&d.was),
                    shown(&d.now)
                );
            }
        }
        if result.status != run.status {
            println!(
                "status: was {}, now {}",
                run.status.as_str(),
                result.status.as_str()
            );
        }
        if result.outputs == run.outputs {
            println!("outputs: {}", brief(&result.outputs));
        } else {
            println!(
                "outputs: was {}, now {}",
                brief(&run.outputs),
                brief(&result.outputs)
            );
        }
    }
    if same {
        EXIT_OK
    } else {
        EXIT_RUN_FAILED
    }
}

/// `marktoflow eval FILE DATASET --metric …`: every case run for real, in
/// parallel, scored; exit 1 when a metric's share is under `min`.
pub fn eval(file: &Path, dataset: &Path, metrics: &[String], min: Option<f64>, json: bool) -> i32 {
    use crate::testing::eval::{cases, context, Metric};
    let here = std::env::current_dir().unwrap_or_default();
    let read = |f: &str| {
        std::fs::read_to_string(here.join(f)).map_err(|e| format!("cannot read `{f}`: {e}"))
    };
    let metrics: Vec<Metric> = match metrics.iter().map(|m| Metric::parse(m, read)).collect() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: --metric {e}");
            return EXIT_USAGE;
        }
    };
    if min.is_some_and(|m| !(0.0..=1.0).contains(&m)) {
        eprintln!("error: --min is a share, from 0 to 1");
        return EXIT_USAGE;
    }
    let text = match std::fs::read_to_string(dataset) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", dataset.display());
            return EXIT_USAGE;
        }
    };
    let all = match cases(&text) {
        Ok(c) if !c.is_empty() => c,
        Ok(_) => {
            eprintln!("error: `{}` holds no cases", dataset.display());
            return EXIT_USAGE;
        }
        Err((line, why)) => {
            eprintln!("{}:{line}: error: {why}", dataset.display());
            return EXIT_USAGE;
        }
    };
    let wf = match crate::check::load::load_file(file, &Registry::standard()) {
        Ok(l) => Arc::new(l.workflow),
        Err(d) => {
            print_diagnostics(&d);
            return EXIT_USAGE;
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    // Real calls: as many at once as there are cores.
    let setup = Arc::new(setup_for(&wf, true));
    let at_once = std::thread::available_parallelism().map_or(2, |n| n.get());
    let slots = Arc::new(tokio::sync::Semaphore::new(at_once));
    let runs = rt.block_on(async {
        let tasks: Vec<_> = all
            .iter()
            .map(|c| {
                let (wf, setup, slots) = (wf.clone(), setup.clone(), slots.clone());
                let case = crate::testing::spec::Case {
                    name: c.name.clone(),
                    pos: crate::diag::Pos { line: 1, col: 1 },
                    inputs: c.inputs.clone(),
                    mocks: Vec::new(),
                    files: Vec::new(),
                    expect: Default::default(),
                };
                tokio::spawn(async move {
                    let _slot = slots.acquire_owned().await;
                    let started = Instant::now();
                    let r = crate::testing::run::run_mocked(&wf, &case, &setup, None).await;
                    (r.map(|(result, _)| result), started.elapsed())
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await);
        }
        setup.caps.mcp.shutdown().await;
        out
    });
    let mut passes = vec![0usize; metrics.len()];
    let mut counted = vec![0usize; metrics.len()];
    let mut reports = Vec::new();
    for (case, run) in all.iter().zip(runs) {
        let (result, took) = match run {
            Ok(r) => r,
            Err(e) => (
                Err(vec![format!("the case did not finish: {e}")]),
                Default::default(),
            ),
        };
        let (status, outputs, problem) = match &result {
            Ok(r) => (
                r.status.as_str(),
                r.outputs.clone(),
                r.error.as_ref().map(|f| f.message.clone()),
            ),
            Err(p) => ("failed", serde_json::Value::Null, Some(p.join("; "))),
        };
        let ctx = context(case, status, &outputs);
        let scored: Vec<(String, Option<Result<(), String>>)> =
            metrics.iter().map(|m| (m.name(), m.score(&ctx))).collect();
        for (i, (_, s)) in scored.iter().enumerate() {
            if let Some(s) = s {
                counted[i] += 1;
                passes[i] += usize::from(s.is_ok());
            }
        }
        reports.push((case.name.clone(), status, took, outputs, problem, scored));
    }
    // A metric no case expected anything of measured nothing (a typo in
    // its output's name, most likely): no share, and under any `--min`.
    let share = |i: usize| match counted[i] {
        0 => None,
        c => Some(passes[i] as f64 / c as f64),
    };
    if json {
        let cases: Vec<serde_json::Value> = reports
            .iter()
            .map(|(name, status, took, outputs, problem, scored)| {
                let m: serde_json::Map<String, serde_json::Value> = scored
                    .iter()
                    .map(|(k, s)| {
                        let v = match s {
                            Some(s) => serde_json::json!({"pass": s.is_ok(), "why": s.as_ref().err()}),
                            None => serde_json::json!({"pass": null, "why": "not applicable"}),
                        };
                        (k.clone(), v)
                    })
                    .collect();
                serde_json::json!({"name": name, "status": status, "duration_ms": took.as_millis() as u64,
                    "outputs": outputs, "error": problem, "metrics": m})
            })
            .collect();
        let totals: serde_json::Map<String, serde_json::Value> = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let t = serde_json::json!({"passed": passes[i], "counted": counted[i], "share": share(i)});
                (m.name(), t)
            })
            .collect();
        let out = serde_json::json!({"workflow": wf.meta.id, "cases": cases, "totals": totals});
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        for (name, status, took, _, problem, scored) in &reports {
            let ok = scored
                .iter()
                .all(|(_, s)| s.as_ref().is_none_or(|s| s.is_ok()));
            println!(
                "{} {name} ({status}, {} ms)",
                if ok { "✓" } else { "✗" },
                took.as_millis()
            );
            if let Some(p) = problem {
                println!("      error: {p}");
            }
            for (k, s) in scored {
                if let Some(Err(why)) = s {
                    println!("      {k}: {why}");
                }
            }
        }
        println!();
        for (i, m) in metrics.iter().enumerate() {
            match share(i) {
                Some(s) => println!(
                    "{:<32} {}/{} ({:.0}%)",
                    m.name(),
                    passes[i],
                    counted[i],
                    s * 100.0
                ),
                None => println!("{:<32} no case expects anything of it", m.name()),
            }
        }
    }
    match min {
        Some(least) if (0..metrics.len()).any(|i| share(i).is_none_or(|s| s < least)) => {
            EXIT_RUN_FAILED
        }
        _ => EXIT_OK,
    }
}

/// The runtime cases run on (threads with a run's stack).
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(super::serve::RUN_THREAD_STACK)
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// `path` as from here when it is below here.
fn from_here(path: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    path.strip_prefix(&cwd)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A value in one line, cut at 120 characters.
fn brief(v: &serde_json::Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// `marktoflow test --record RUN`: the run as a case appended to its
/// workflow's `NAME.test.md` (made when missing).
pub fn record(run_id: &str, store: &super::StoreArgs) -> i32 {
    let (run, steps, wf) = match stored(run_id, store) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let file = PathBuf::from(&run.file);
    let tests = file.with_extension("test.md");
    let shown = from_here(&tests);
    let mut text = match std::fs::read_to_string(&tests) {
        Ok(t) => t,
        Err(_) => format!(
            "# Tests of {}\n\n`marktoflow test {}` runs these cases.\n",
            file.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            shown
        ),
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push('\n');
    text.push_str(&crate::testing::record::case_text(&wf, &run, &steps));
    // Whole or not at all: written beside, then renamed over.
    let tmp = tests.with_extension("md.tmp");
    if let Err(e) = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, &tests)) {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("error: cannot write `{}`: {e}", tests.display());
        return EXIT_RUN_FAILED;
    }
    println!(
        "recorded run {} as a case of {}; `marktoflow test {}` runs it",
        crate::store::short_id(&run.id),
        shown,
        shown
    );
    EXIT_OK
}

/// What a case of `wf` runs with: the usual sandbox of a run from here
/// (this folder and the workflow's readable), the environment, no key
/// needed unless `live`.
fn setup_for(wf: &Workflow, live: bool) -> Setup {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let env = super::env::environment(&cwd);
    let wf_dir = wf
        .source
        .path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let protected = state_dir(&wf_dir).protected(&cwd, &env, None);
    let sandbox =
        Sandbox::new(cwd.clone(), vec![cwd, wf_dir.clone()], Vec::new()).protecting(protected);
    let caps = super::run::one_run_caps(
        &wf_dir,
        sandbox,
        Default::default(),
        env,
        wf.allowed_hosts.clone(),
    );
    Setup {
        caps,
        loader: Arc::new(FileLoader(Registry::standard())),
        live,
    }
}

/// Every case of every file, at most as many at once as there are cores;
/// the outcomes in the files' and cases' order.
fn run_all(
    loaded: &[(TestFile, Arc<Workflow>)],
    live: bool,
) -> Result<Vec<(String, Vec<Outcome>)>, String> {
    let rt = runtime()?;
    let at_once = std::thread::available_parallelism().map_or(2, |n| n.get());
    let slots = Arc::new(tokio::sync::Semaphore::new(at_once));
    rt.block_on(async {
        let mut tasks = Vec::new();
        let mut setups = Vec::new();
        for (file, wf) in loaded {
            let setup = Arc::new(setup_for(wf, live));
            setups.push(setup.clone());
            let mut cases = Vec::new();
            for case in &file.cases {
                let (wf, case, setup, slots) =
                    (wf.clone(), case.clone(), setup.clone(), slots.clone());
                cases.push(tokio::spawn(async move {
                    let _slot = slots.acquire_owned().await;
                    run_case(&wf, &case, &setup).await
                }));
            }
            tasks.push((file.source.name.clone(), cases));
        }
        let mut out = Vec::new();
        for (name, cases) in tasks {
            let mut outcomes = Vec::new();
            for c in cases {
                outcomes.push(c.await.map_err(|e| format!("a case did not finish: {e}"))?);
            }
            out.push((name, outcomes));
        }
        // The MCP servers `--live` cases started end with the tests.
        for s in setups {
            s.caps.mcp.shutdown().await;
        }
        Ok(out)
    })
}
