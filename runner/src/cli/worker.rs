//! `marktoflow worker` and `marktoflow workers`: executing runs queued in a
//! shared (PostgreSQL) store, and listing the processes that do.

use super::args::WorkerArgs;
use super::env::environment;
use super::report::{plural, print_diagnostics};
use super::serve::{open_store, server_caps, stop_signal};
use super::validate::discover;
use super::{FileLoader, StoreArgs, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::serve::ServerState;
use marktoflow_steps::Registry;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const NEEDS_URL: &str = "a worker takes runs from a shared store: give `--store postgres://USER@HOST/DB` (or set MARKTOFLOW_STORE)";

pub(super) fn worker(a: WorkerArgs) -> i32 {
    if a.server.store.url().is_none() || a.server.store.no_store {
        eprintln!("error: {NEEDS_URL}");
        return EXIT_USAGE;
    }
    let registry = Registry::standard();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let (found, errors) = discover(&a.paths, &registry);
    if !errors.is_empty() {
        print_diagnostics(&errors);
        return EXIT_USAGE;
    }
    let mut workflows = Vec::new();
    for (_, l) in found {
        print_diagnostics(&l.warnings);
        workflows.push(Arc::new(l.workflow));
    }
    let root = match a.paths.first() {
        Some(p) if p.is_file() => p.parent().map(Path::to_path_buf).unwrap_or_default(),
        Some(p) => p.clone(),
        None => PathBuf::from("."),
    };
    let env = environment(&cwd);
    let api = match super::serve::api_access(&a.host, a.api_token_env.as_deref(), &env) {
        Ok(api) => api,
        Err(msg) => {
            eprintln!("error: {msg}");
            return EXIT_USAGE;
        }
    };
    // A run it continues may stop at another wait: its links.
    let links = super::run::wait_links(&root, &env);
    let caps = server_caps(&a.server, &cwd, &workflows, &root, env);
    for wf in &workflows {
        super::report::print_diagnostics(&crate::check::writes::writes_outside(wf, &caps.sandbox));
    }
    // A workflow this worker cannot run (an agent step without a provider)
    // is left to the workers that can.
    workflows.retain(|w| match crate::engine::plan::preflight(w, &caps) {
        Ok(()) => true,
        Err(d) => {
            let why = d.first().map(|d| d.message.as_str()).unwrap_or_default();
            eprintln!("warning: not taking runs of `{}`: {why}", w.meta.id);
            false
        }
    });
    if workflows.is_empty() {
        let paths: Vec<String> = a
            .paths
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect();
        eprintln!(
            "error: no workflows this worker can run under {}",
            paths.join(", ")
        );
        return EXIT_USAGE;
    }
    let store = match open_store(&a.server, &root, "worker", true) {
        Ok(Some(s)) => s,
        Ok(None) => return EXIT_USAGE,
        Err(code) => return code,
    };
    let config = super::serve::serve_config(&a.server);
    let grace = std::time::Duration::from_secs(a.server.grace_period);
    let (rt, runs_rt) = match super::serve::runtimes("marktoflow-work") {
        Ok(r) => r,
        Err(code) => return code,
    };
    let state = Arc::new(
        ServerState::new(Vec::new(), caps, Arc::new(FileLoader(registry)), config)
            .with_workflows(workflows.clone())
            .with_store(Some(store.clone()))
            .with_api(api)
            .with_run_runtime(runs_rt.handle().clone())
            .with_links_if(links),
    );
    let code = rt.block_on(async move {
        let Some(shared) = store.shared() else {
            eprintln!("error: {NEEDS_URL}");
            return EXIT_USAGE;
        };
        eprintln!(
            "marktoflow: worker {} taking runs of {} workflow{} (up to {} at once, lease {}s)",
            short(shared.member_id()),
            workflows.len(),
            plural(workflows.len()),
            state.config.max_concurrent,
            shared.lease().as_secs_f64()
        );
        for w in &workflows {
            eprintln!("  {} ({})", w.meta.id, w.source.name);
        }
        let claiming = tokio::spawn(crate::serve::worker::claim_runs(state.clone()));
        let pauses = tokio::spawn(crate::serve::pauses::take_served_pauses(state.clone()));
        if let Some(port) = a.port {
            let addr = format!("{}:{port}", a.host);
            let listener = match tokio::net::TcpListener::bind(&addr).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("error: cannot listen on {addr}: {e}");
                    return EXIT_USAGE;
                }
            };
            let local = listener.local_addr().map(|a| a.to_string()).unwrap_or(addr);
            eprintln!("  /health and /metrics on http://{local}");
            let app = crate::serve::worker_router(state.clone());
            tokio::spawn(crate::serve::listen::serve_http(
                listener,
                app,
                stop_signal(),
            ));
        }
        stop_signal().await;
        let (_, running) = state.load();
        eprintln!(
            "marktoflow: shutting down: {running} run{} executing (grace period {}s)",
            plural(running),
            grace.as_secs()
        );
        let s = store.clone();
        let _ = tokio::task::spawn_blocking(move || s.shared().map(|p| p.set_draining())).await;
        if !state.stop_and_wait(grace).await {
            // Past the grace period: what is still running continues on
            // another worker from its last checkpoint, not cancelled.
            let s = store.clone();
            match tokio::task::spawn_blocking(move || s.shared().map(|p| p.release_held())).await {
                Ok(Some(Ok(n))) => eprintln!(
                    "marktoflow: gave {n} unfinished run{} back to the queue",
                    plural(n)
                ),
                Ok(Some(Err(e))) => eprintln!(
                    "marktoflow: could not give runs back: {e} (their leases run out instead)"
                ),
                _ => {}
            }
        }
        state.drain(std::time::Duration::ZERO).await;
        let _ = claiming.await;
        let _ = pauses.await;
        super::serve::flush_at_exit(store.clone()).await;
        eprintln!("marktoflow: stopped");
        EXIT_OK
    });
    runs_rt.shutdown_background();
    rt.shutdown_background();
    code
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

pub(super) fn workers(store: &StoreArgs, as_json: bool) -> i32 {
    if store.url().is_none() {
        eprintln!("error: only a shared store has workers: give `--store postgres://USER@HOST/DB` (or set MARKTOFLOW_STORE)");
        return EXIT_USAGE;
    }
    let opened = match store.open_as(
        Path::new("."),
        crate::store::PgOptions {
            executes: false,
            role: "cli".into(),
            ..Default::default()
        },
    ) {
        Ok(Some(s)) => s,
        Ok(None) => return EXIT_USAGE,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let Some(shared) = opened.shared() else {
        return EXIT_USAGE;
    };
    let list = match shared.workers() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&list).unwrap_or_default()
        );
        return EXIT_OK;
    }
    if list.is_empty() {
        eprintln!("no live servers or workers");
        return EXIT_OK;
    }
    let now = crate::store::now_ms();
    println!(
        "{:<10} {:<8} {:<20} {:>8} {:>6} {:>10}  STATE",
        "ID", "ROLE", "HOST", "PID", "LEASES", "HEARTBEAT"
    );
    for w in &list {
        let ago = (now - w.heartbeat_at).max(0) as f64 / 1000.0;
        println!(
            "{:<10} {:<8} {:<20} {:>8} {:>6} {:>9.1}s  {}",
            short(&w.id),
            w.role,
            w.host,
            w.pid,
            w.leases,
            ago,
            if w.draining { "draining" } else { "live" }
        );
    }
    EXIT_OK
}
