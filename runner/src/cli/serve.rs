//! `marktoflow serve`: wiring the server (routes, schedules, watches, store) from the command line.

use super::args::ServerOpts;
use super::env::environment;
use super::report::{plural, print_diagnostics};
use super::validate::discover;
use super::{state_dir, FileLoader, ServeArgs, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::format::model::Workflow;
use marktoflow_steps::core::action::Capabilities;
use marktoflow_steps::script::ScriptHost;
use marktoflow_steps::{Registry, Sandbox};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(super) fn serve(a: ServeArgs) -> i32 {
    if super::supervise::wanted(&a) {
        return super::supervise::run(&a);
    }
    let inherited = super::supervise::inherited_listener();
    use crate::format::model::TriggerKind;
    use crate::serve::triggers::Triggers;
    use crate::serve::{router, ServeConfig, ServerState};
    let registry = Registry::standard();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let (found, mut errors) = discover(&a.paths, &registry);
    // State (the run store, indexes) is found from the first path served.
    let serve_root = match a.paths.first() {
        Some(p) if p.is_file() => p.parent().map(Path::to_path_buf).unwrap_or_default(),
        Some(p) => p.clone(),
        None => PathBuf::from("."),
    };
    let mut workflows = Vec::new();
    for (_, l) in found {
        print_diagnostics(&l.warnings);
        workflows.push(Arc::new(l.workflow));
    }
    let env = environment(&cwd);
    // Following the files, nothing that fails to load stops the server:
    // it is reported, skipped and shown in the console.
    let mut broken = Vec::new();
    if a.watch {
        print_diagnostics(&errors);
        broken = std::mem::take(&mut errors);
        workflows = servable(workflows, &env, &cwd, None, &mut broken);
    }
    let mut triggers = match Triggers::of(&workflows, &env, &cwd) {
        Ok(t) if errors.is_empty() => t,
        Ok(_) => {
            print_diagnostics(&errors);
            return EXIT_USAGE;
        }
        Err(d) => {
            errors.extend(d);
            print_diagnostics(&errors);
            return EXIT_USAGE;
        }
    };
    // Tools for `/mcp`: the files named, and folder workflows with a
    // `type: mcp` trigger (a trigger source once the server they call into
    // exists).
    let mut tools = Vec::new();
    if a.mcp {
        let (named, in_folders): (Vec<_>, Vec<_>) = workflows
            .iter()
            .cloned()
            .partition(|w| a.paths.contains(&w.source.path));
        tools = match crate::mcp::tools_of(&named, &in_folders) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_USAGE;
            }
        };
    }
    let mcp_token = match mcp_token(&a, &env) {
        Ok(t) => t,
        Err(msg) => {
            eprintln!("error: {msg}");
            return EXIT_USAGE;
        }
    };
    let loopback = is_loopback(&a.host);
    let tenants = match crate::serve::tenants::Tenants::from_args(&a.tenant_token, &env) {
        Ok(t) => t,
        Err(msg) => {
            eprintln!("error: {msg}");
            return EXIT_USAGE;
        }
    };
    // A workflow that keeps tenants apart, served where anybody may call
    // it, with nothing to say whose a request is: refused, never open.
    if !loopback && tenants.is_empty() {
        for w in &workflows {
            let Some(input) = crate::serve::tenants::tenant_input(w) else {
                continue;
            };
            let open = w.triggers.iter().any(|t| {
                t.kind == crate::format::model::TriggerKind::Webhook
                    && !t.fields.contains_key("token_env")
                    && !t.fields.contains_key("secret")
            });
            if open {
                eprintln!(
                    "error: {}: input `{input}` is its tenant; serving it on {} needs `--tenant-token TENANT=VAR` (or a `token_env` on its webhook)",
                    w.source.name, a.host
                );
                return EXIT_USAGE;
            }
        }
    }
    let mut api = match api_access(&a.host, a.api_token_env.as_deref(), &env) {
        Ok(api) => api,
        Err(msg) => {
            eprintln!("error: {msg}");
            return EXIT_USAGE;
        }
    };
    api.identity_header = a.identity_header.clone();
    // Workflows without triggers are still served to the console and the
    // run API, where those are served.
    let console = api.token.is_some() || api.loopback;
    if triggers.is_empty() && tools.is_empty() && (!console || workflows.is_empty()) && !a.watch {
        let paths: Vec<String> = a
            .paths
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect();
        eprintln!(
            "error: no workflows with webhook, schedule or file_watch triggers found under {}",
            paths.join(", ")
        );
        eprintln!("  = hint: add `triggers: [{{type: webhook, path: /my-hook, method: POST}}]` to a workflow's frontmatter");
        return EXIT_USAGE;
    }
    let caps = server_caps(&a.server, &cwd, &workflows, &serve_root, env);
    // Said now, not when a schedule reaches the step.
    for wf in &workflows {
        print_diagnostics(&crate::check::writes::writes_outside(wf, &caps.sandbox));
    }
    // A workflow named on the command line must be servable; one found in a
    // folder whose agent steps have no provider is left out, saying so, and
    // the others are served (`serve workflows/` without an API key).
    let mut problems = Vec::new();
    let mut left_out = Vec::new();
    for w in &workflows {
        if let Err(d) = crate::engine::plan::preflight(w, &caps) {
            if a.watch {
                broken.extend(d.iter().cloned());
            }
            if a.paths.contains(&w.source.path) && !a.watch {
                problems.extend(d);
            } else {
                left_out.push((w.meta.id.clone(), d));
            }
        }
    }
    if !problems.is_empty() {
        print_diagnostics(&problems);
        eprintln!("marktoflow: not serving: agent steps have no LLM provider they can reach");
        return EXIT_USAGE;
    }
    if !left_out.is_empty() {
        for (id, d) in &left_out {
            let why = d.first().map(|d| d.message.as_str()).unwrap_or_default();
            eprintln!("warning: not serving `{id}`: {why}");
        }
        let served = |w: &Workflow| !left_out.iter().any(|(id, _)| *id == w.meta.id);
        triggers.retain(&served);
        tools.retain(|t| served(&t.workflow));
        workflows.retain(|w| served(w));
        let untriggered = triggers.is_empty() && tools.is_empty();
        if (workflows.is_empty() || (untriggered && !console)) && !a.watch {
            eprintln!("marktoflow: not serving: every workflow found needs an LLM provider");
            return EXIT_USAGE;
        }
    }
    let config = ServeConfig {
        max_body: a.max_body,
        request_timeout: std::time::Duration::from_secs(a.request_timeout),
        ..serve_config(&a.server)
    };
    let grace = std::time::Duration::from_secs(a.server.grace_period);
    let retention = match a
        .server
        .retention
        .as_deref()
        .map(|r| (r, crate::store::parse_age(r)))
    {
        None => None,
        Some((_, Some(age))) => Some(age),
        Some((r, None)) => {
            eprintln!("error: `--retention {r}` is not an age: use e.g. 30d, 12h");
            return EXIT_USAGE;
        }
    };
    let role = if a.no_execute { "enqueue" } else { "server" };
    let store = match open_store(&a.server, &serve_root, role, !a.no_execute) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let shared = store.as_ref().is_some_and(|s| s.shared().is_some());
    // Listed among the cluster's processes, and a candidate reaper.
    if let Some(pg) = store.as_ref().and_then(|s| s.shared()) {
        pg.join_cluster();
    }
    if a.no_execute && !shared {
        eprintln!("error: `--no-execute` queues runs for workers: it needs a shared store (`--store postgres://…`)");
        return EXIT_USAGE;
    }
    let (rt, runs_rt) = match runtimes("marktoflow-http") {
        Ok(r) => r,
        Err(code) => return code,
    };
    let public_url = a.public_url.clone().or_else(|| env_public_url(&serve_root));
    let links = match crate::serve::Links::open(
        &crate::cli::state_dir(&serve_root).root,
        public_url.as_deref().unwrap_or(""),
    ) {
        Ok(l) => Some(Arc::new(l)),
        Err(e) => {
            eprintln!(
                "warning: waits get no links to answer them: cannot read or make the link key: {e}"
            );
            None
        }
    };
    // Its routes come with the triggers, when they start.
    let mut built = ServerState::new(Vec::new(), caps, Arc::new(FileLoader(registry)), config)
        .with_workflows(workflows.clone())
        .with_api(api)
        .with_tenants(tenants)
        .with_store(store.clone())
        .with_run_runtime(runs_rt.handle().clone());
    built = built.with_links_if(links.clone());
    if a.no_execute {
        built = built.enqueuing_only();
    }
    let state = Arc::new(built);
    if !broken.is_empty() {
        let now = state.served();
        state.replace_served(crate::serve::Served {
            routes: now.routes.clone(),
            workflows: now.workflows.clone(),
            broken,
        });
    }
    crate::serve::listen::raise_descriptor_limit();
    let code = rt.block_on(async move {
        let addr = format!("{}:{}", a.host, a.port);
        let bound = match inherited {
            Some(l) => l
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpListener::from_std(l)),
            None => tokio::net::TcpListener::bind(&addr).await,
        };
        let listener = match bound {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {addr}: {e}");
                return EXIT_USAGE;
            }
        };
        let local = listener.local_addr().map(|a| a.to_string()).unwrap_or(addr);
        if let (Some(l), None) = (&links, &public_url) {
            l.set_base(&format!("http://{local}"));
        }
        let mut triggers = triggers;
        let mut mcp_server = None;
        if a.mcp {
            let mut mcp = crate::mcp::McpServer::new(state.clone(), Vec::new());
            if a.watch {
                mcp = mcp.watching();
            }
            let server = mcp.clone();
            triggers = triggers.with(Box::new(crate::mcp::source::McpTools { tools, server }));
            mcp_server = Some(mcp);
        }
        let n = triggers.count(TriggerKind::Webhook);
        let n_tools = triggers.count(TriggerKind::Mcp);
        let also = if n_tools > 0 {
            format!(" and {n_tools} MCP tool{}", plural(n_tools))
        } else {
            String::new()
        };
        eprintln!(
            "marktoflow: serving {n} route{}{also} on http://{local}",
            plural(n)
        );
        for l in triggers.listing() {
            eprintln!("{l}");
        }
        if console {
            let w = state.served().workflows.len();
            eprintln!("  console at http://{local}/console ({w} workflow{})", plural(w));
        }
        let (drained_tx, drained_rx) = tokio::sync::oneshot::channel::<()>();
        let draining = state.clone();
        let shutdown = async move {
            stop_signal().await;
            let (queued, running) = draining.load();
            eprintln!(
                "marktoflow: shutting down: {running} run{} executing (grace period {}s), {queued} queued",
                plural(running),
                grace.as_secs()
            );
            // Stop accepting now; runs drain in the background while the
            // connections of synchronous requests wait for their results.
            tokio::spawn(async move {
                draining.drain(grace).await;
                let _ = drained_tx.send(());
            });
        };
        if let (Some(store), Some(age)) = (store.clone(), retention) {
            tokio::spawn(async move {
                loop {
                    // `prune` waits for the store: not on the async threads.
                    let s = store.clone();
                    let pruned = tokio::task::spawn_blocking(move || s.prune(age))
                        .await
                        .unwrap_or(Err(crate::store::StoreError::Closed));
                    match pruned {
                        Ok(0) => {}
                        Ok(n) => eprintln!("marktoflow: pruned {n} run{} older than the retention", plural(n)),
                        Err(e) => eprintln!("marktoflow: pruning runs failed: {e}"),
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                }
            });
        }
        crate::serve::resume_stored_runs(&state, &workflows);
        // Waited for at exit: its hold on the store ends before the
        // store's last commit and the WAL's truncation.
        let deadlines = tokio::spawn(crate::serve::expire_waits(
            state.clone(),
            std::time::Duration::from_millis(500),
        ));
        let pauses = tokio::spawn(crate::serve::pauses::take_served_pauses(state.clone()));
        // On a shared store a server that executes is a worker too.
        if shared && !a.no_execute {
            tokio::spawn(crate::serve::worker::claim_runs(state.clone()));
        }
        let serving = Arc::new(std::sync::Mutex::new(triggers.start(&state)));
        let mut app = router(state.clone());
        if let Some(mcp) = &mcp_server {
            // On loopback the Host header is checked (DNS rebinding); on
            // other addresses the bearer token guards the route.
            let hosts = if loopback {
                vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
            } else {
                Vec::new()
            };
            app = crate::mcp::mcp_router(mcp.clone(), mcp_token, hosts).merge(app);
        }
        if a.watch {
            let files = crate::serve::file_watch::ServedFiles::of(&a.paths, &cwd);
            let follow = Following {
                state: state.clone(),
                paths: a.paths.clone(),
                env: (*state.caps.env).clone(),
                cwd: cwd.clone(),
                serving,
                reloading: Default::default(),
                mcp: mcp_server,
            };
            tokio::spawn(async move {
                let follow = Arc::new(follow);
                let reload = |_: &crate::serve::file_watch::ServedFiles, changed: Vec<String>| {
                    let follow = follow.clone();
                    tokio::spawn(async move { follow.reload(changed).await });
                };
                // Once watching, load again: what changed since the first
                // load, before the watch began, is not missed.
                let first = follow.clone();
                let ready = move || {
                    tokio::spawn(async move { first.reload(Vec::new()).await });
                };
                if let Err(e) = crate::serve::file_watch::watch_then(
                    vec![files],
                    std::future::pending(),
                    reload,
                    ready,
                )
                .await
                {
                    eprintln!("marktoflow: cannot watch the workflows: {e}");
                }
            });
        }
        crate::serve::listen::serve_http(listener, app, shutdown).await;
        let _ = drained_rx.await;
        let _ = deadlines.await;
        let _ = pauses.await;
        if let Some(store) = store.clone() {
            flush_at_exit(store).await;
        }
        eprintln!("marktoflow: stopped");
        EXIT_OK
    });
    // What is still running past the grace period is not waited for.
    runs_rt.shutdown_background();
    rt.shutdown_background();
    code
}

/// `MARKTOFLOW_PUBLIC_URL` from the environment (and `.env` files).
fn env_public_url(root: &std::path::Path) -> Option<String> {
    super::env::environment(root)
        .get("MARKTOFLOW_PUBLIC_URL")
        .filter(|v| !v.trim().is_empty())
        .cloned()
}

pub(super) fn is_loopback(host: &str) -> bool {
    ["127.0.0.1", "localhost", "::1"].contains(&host)
}

/// Who may use the run API, the console and `/metrics` of a process
/// listening on `host`: the bearer token in `token_env`'s variable (which
/// must be set), else loopback callers only.
pub(super) fn api_access(
    host: &str,
    token_env: Option<&str>,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<crate::serve::ApiAccess, String> {
    let loopback = is_loopback(host);
    match token_env {
        None => Ok(crate::serve::ApiAccess {
            token: None,
            loopback,
            identity_header: None,
        }),
        Some(var) => match env.get(var).filter(|v| !v.trim().is_empty()) {
            Some(t) => Ok(crate::serve::ApiAccess {
                token: Some(t.clone()),
                loopback,
                identity_header: None,
            }),
            None => Err(format!("`--api-token-env {var}`: `{var}` is not set; the console, the run API and /metrics are not served without their token")),
        },
    }
}

/// The stack of every thread that renders templates or runs steps: a known
/// size, eight times what the template bounds need (see
/// `template::limits`), so that what they let through cannot overflow it.
/// Only the pages a thread touches are committed.
pub(super) const RUN_THREAD_STACK: usize = 16 << 20;

/// Two runtimes: one (`name`) accepts connections and answers or claims
/// runs, the other runs workflows, so busy runs never stop the process from
/// answering. An error is said on stderr, as an exit code.
pub(super) fn runtimes(
    name: &str,
) -> Result<(tokio::runtime::Runtime, tokio::runtime::Runtime), i32> {
    let build = |name: &str| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name(name)
            .thread_stack_size(RUN_THREAD_STACK)
            .build()
    };
    match (build(name), build("marktoflow-run")) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: cannot start the async runtime: {e}");
            Err(EXIT_RUN_FAILED)
        }
    }
}

/// The server settings `opts` give.
pub(super) fn serve_config(opts: &ServerOpts) -> crate::serve::ServeConfig {
    crate::serve::ServeConfig {
        max_concurrent: opts.max_concurrent,
        max_concurrent_per_workflow: opts.max_concurrent_per_workflow,
        max_queue: opts.max_queue,
        ..crate::serve::ServeConfig::default()
    }
}

/// Waits for what is queued for the store, saying on stderr when some of
/// it could not be recorded.
pub(super) async fn flush_at_exit(store: Arc<dyn crate::store::RunStore>) {
    // `flush` blocks: not on the async threads.
    match tokio::task::spawn_blocking(move || store.flush()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("marktoflow: not every run event was recorded: {e}"),
        Err(e) => eprintln!("marktoflow: not every run event was recorded: {e}"),
    }
}

/// Waits for SIGTERM or Ctrl-C.
pub(super) async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// Workflows that can be served, each checked alone: its webhook routes
/// (auth that fails closed, a route another workflow already has), its
/// schedules and file watches, and with `caps`, its agent steps' provider.
/// The others go to `broken` with their errors.
fn servable(
    workflows: Vec<Arc<Workflow>>,
    env: &std::collections::BTreeMap<String, String>,
    cwd: &Path,
    caps: Option<&Capabilities>,
    broken: &mut Vec<crate::diag::Diagnostic>,
) -> Vec<Arc<Workflow>> {
    let mut accepted = Vec::new();
    let mut taken: Vec<crate::serve::Route> = Vec::new();
    for wf in workflows {
        let one = std::slice::from_ref(&wf);
        // Every kind's own problems (a route's among them), then the
        // routes other workflows took first.
        let mut problems = crate::serve::triggers::Triggers::of(one, env, cwd)
            .err()
            .unwrap_or_default();
        let routes = crate::serve::routes_of(one, env).unwrap_or_default();
        for r in &routes {
            if let Some(other) = taken
                .iter()
                .find(|t| t.path == r.path && t.method == r.method)
            {
                // Said at the newcomer's trigger.
                problems.push(
                    crate::diag::Diagnostic::error(
                        &wf.source,
                        Some(r.pos),
                        format!(
                            "route `{} {}` is already served by `{}`",
                            r.method, r.path, other.workflow.source.name
                        ),
                    )
                    .with_hint("the workflow served first keeps its route: give this webhook another `path:`"),
                );
            }
        }
        if let Some(caps) = caps {
            if let Err(d) = crate::engine::plan::preflight(&wf, caps) {
                problems.extend(d);
            }
        }
        if problems.is_empty() {
            taken.extend(routes);
            accepted.push(wf);
        } else {
            broken.extend(problems);
        }
    }
    accepted
}

/// `serve --watch`: what a reload needs.
struct Following {
    state: Arc<crate::serve::ServerState>,
    paths: Vec<PathBuf>,
    env: std::collections::BTreeMap<String, String>,
    cwd: PathBuf,
    /// The trigger sources served, replaced at each reload.
    serving: Arc<std::sync::Mutex<crate::serve::triggers::Serving>>,
    /// One reload at a time, whole: a later change's reload never finishes
    /// before an earlier one's and is then undone by it.
    reloading: tokio::sync::Mutex<()>,
    mcp: Option<crate::mcp::McpServer>,
}

impl Following {
    /// Loads the workflows again and serves what loads from now on; what
    /// does not is reported and listed in the console. Runs under way keep
    /// the workflow they started with.
    async fn reload(&self, changed: Vec<String>) {
        let _one = self.reloading.lock().await;
        let (paths, env, cwd, caps) = (
            self.paths.clone(),
            self.env.clone(),
            self.cwd.clone(),
            self.state.caps.clone(),
        );
        let served: Vec<Arc<Workflow>> = self.state.served().workflows.clone();
        let served_files: Vec<PathBuf> = served.iter().map(|w| w.source.path.clone()).collect();
        let loaded = tokio::task::spawn_blocking(move || {
            let registry = Registry::standard();
            let (found, mut broken) = discover(&paths, &registry);
            let mut workflows: Vec<Arc<Workflow>> = found
                .into_iter()
                .map(|(_, l)| Arc::new(l.workflow))
                .collect();
            // A served file whose edit does not load stays served as it
            // was: a typo must not take a live route offline. The error is
            // reported (log, console, `/health`) until the file is fixed.
            let failing: Vec<&str> = broken
                .iter()
                .filter(|d| d.severity == crate::diag::Severity::Error)
                .map(|d| d.file.as_str())
                .collect();
            let mut kept = Vec::new();
            for w in &served {
                let still_there = w.source.path.exists();
                let reloaded = workflows.iter().any(|n| n.source.path == w.source.path);
                if still_there && !reloaded && failing.contains(&w.source.name.as_str()) {
                    workflows.push(w.clone());
                    kept.push(w.source.name.clone());
                }
            }
            // What is served keeps its routes: a file added or edited later
            // that claims one is the file refused, whatever their names.
            workflows.sort_by_key(|w| {
                served_files
                    .iter()
                    .position(|p| *p == w.source.path)
                    .unwrap_or(usize::MAX)
            });
            let workflows = servable(workflows, &env, &cwd, Some(&caps), &mut broken);
            // Each was checked alone above: together they are sound too (None,
            // should they not be: what is served stays).
            let triggers = crate::serve::triggers::Triggers::of(&workflows, &env, &cwd).ok();
            let (named, in_folders): (Vec<_>, Vec<_>) = workflows
                .iter()
                .cloned()
                .partition(|w| paths.contains(&w.source.path));
            let tools = crate::mcp::tools_of(&named, &in_folders);
            (workflows, triggers, tools, broken, kept)
        })
        .await;
        let Ok((workflows, Some(mut triggers), tools, broken, kept)) = loaded else {
            return;
        };
        if !changed.is_empty() {
            print_diagnostics(&broken);
            for name in &kept {
                eprintln!("marktoflow: {name} did not load: its last good version is still served");
            }
        }
        // Tools that do not load keep the last list offered.
        if let (Some(server), Ok(tools)) = (&self.mcp, tools) {
            let server = server.clone();
            triggers = triggers.with(Box::new(crate::mcp::source::McpTools { tools, server }));
        }
        let n_routes = triggers.count(crate::format::model::TriggerKind::Webhook);
        let (n_workflows, n_broken) = (workflows.len(), broken.len());
        self.state.replace_served(crate::serve::Served {
            routes: self.state.served().routes.clone(),
            workflows,
            broken,
        });
        if let Ok(mut serving) = self.serving.lock() {
            serving.stop();
            *serving = triggers.start(&self.state);
        }
        if changed.is_empty() {
            return;
        }
        eprintln!(
            "marktoflow: {} changed: serving {n_routes} route{} and {n_workflows} workflow{}{}",
            changed.join(", "),
            plural(n_routes),
            plural(n_workflows),
            if n_broken > 0 {
                format!(
                    "; {n_broken} problem{} (skipped files above)",
                    plural(n_broken)
                )
            } else {
                String::new()
            }
        );
    }
}

/// The run store of a server's runs (None with `--no-store`); an error
/// said on stderr, as an exit code, when it cannot be opened.
pub(super) fn open_store(
    opts: &ServerOpts,
    root: &Path,
    role: &str,
    executes: bool,
) -> Result<Option<Arc<dyn crate::store::RunStore>>, i32> {
    let lease = match crate::store::parse_age(&opts.lease) {
        Some(l) if l >= std::time::Duration::from_secs(1) => l,
        _ => {
            eprintln!(
                "error: `--lease {}` is not an age of a second or more: use e.g. 10s, 1m",
                opts.lease
            );
            return Err(EXIT_USAGE);
        }
    };
    let shared = crate::store::PgOptions {
        executes,
        lease,
        role: role.to_string(),
    };
    opts.store.open_as(root, shared).map_err(|e| {
        eprintln!("error: {e}");
        eprintln!("  = hint: `--store FILE` records runs elsewhere; `--no-store` keeps them in memory only");
        EXIT_USAGE
    })
}

/// The bearer token `/mcp` requires: `--mcp-token-env`'s variable, which
/// must be set; none on a loopback address without it. Serving `/mcp` on
/// another address without a token is refused: never open by accident.
fn mcp_token(
    a: &ServeArgs,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Option<String>, String> {
    if !a.mcp {
        return Ok(None);
    }
    match &a.mcp_token_env {
        Some(var) => match env.get(var).filter(|v| !v.trim().is_empty()) {
            Some(t) => Ok(Some(t.clone())),
            None => Err(format!(
                "`--mcp-token-env {var}`: `{var}` is not set; /mcp is not served without its token"
            )),
        },
        None if ["127.0.0.1", "localhost", "::1"].contains(&a.host.as_str()) => Ok(None),
        None => Err(format!(
            "serving /mcp on {} needs `--mcp-token-env VAR` (clients then send `Authorization: Bearer $VAR`)",
            a.host
        )),
    }
}

/// The capabilities of a server's runs: roots fixed at start (the working
/// folder, the workflows' folders, `--allow-read`), warm script workers,
/// the providers.
pub(super) fn server_caps(
    opts: &ServerOpts,
    cwd: &Path,
    workflows: &[Arc<Workflow>],
    serve_root: &Path,
    env: std::collections::BTreeMap<String, String>,
) -> Capabilities {
    // Roots are fixed now: nothing in a request can widen them.
    let mut read_roots = vec![cwd.to_path_buf()];
    for w in workflows {
        if let Some(d) = w.source.path.parent() {
            read_roots.push(cwd.join(d));
        }
    }
    read_roots.extend(opts.roots.allow_read.iter().cloned());
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("marktoflow"));
    let state = state_dir(serve_root);
    // The state folder, the run store and `.env` files stay out of reach.
    let store_file = opts
        .store
        .url()
        .is_none()
        .then(|| opts.store.path(serve_root));
    let protected = state.protected(cwd, &env, store_file.as_deref());
    let sandbox = Sandbox::new(
        cwd.to_path_buf(),
        read_roots,
        opts.roots.allow_write.clone(),
    )
    .protecting(protected);
    let caps = Capabilities::new(
        sandbox,
        state,
        // A server runs scripts concurrently: keep enough warm workers that
        // requests do not pay for process starts.
        Arc::new(ScriptHost::with_limits(
            exe,
            marktoflow_steps::script::ScriptLimits {
                max_idle_workers: 16,
                ..Default::default()
            },
        )),
        Arc::new(marktoflow_steps::registry::agent_hub(
            opts.provider.overrides(),
        )),
        env,
        (!opts.roots.allow_host.is_empty()).then(|| opts.roots.allow_host.clone()),
    );
    // A server lives on: a big knowledge base is embedded while it answers.
    Capabilities {
        background: Some(marktoflow_steps::core::background::Background::new()),
        ..caps
    }
}
