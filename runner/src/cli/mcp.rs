//! `marktoflow mcp`: workflows as MCP tools over stdio. stdout carries the
//! protocol; everything else goes to stderr.

use super::args::McpArgs;
use super::env::environment;
use super::report::{plural, print_diagnostics};
use super::serve::{open_store, server_caps};
use super::validate::discover;
use super::{FileLoader, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::format::model::Workflow;
use crate::mcp::{tools_of, McpServer, WorkflowTool};
use crate::serve::ServerState;
use marktoflow_steps::Registry;
use rmcp::ServiceExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The tools `paths` offer (a file named is a tool; below a folder, the
/// workflows with a `type: mcp` trigger), and the workflows named.
fn offered(
    paths: &[PathBuf],
    registry: &Registry,
) -> Result<(Vec<WorkflowTool>, Vec<Arc<Workflow>>), String> {
    let (found, errors) = discover(paths, registry);
    if !errors.is_empty() {
        print_diagnostics(&errors);
        return Err(format!(
            "{} error{} in the workflows",
            errors.len(),
            plural(errors.len())
        ));
    }
    let mut named = Vec::new();
    let mut in_folders = Vec::new();
    for (path, l) in found {
        print_diagnostics(&l.warnings);
        let wf = Arc::new(l.workflow);
        if paths.contains(&path) {
            named.push(wf);
        } else {
            in_folders.push(wf);
        }
    }
    let tools = tools_of(&named, &in_folders).map_err(|e| e.to_string())?;
    if tools.is_empty() {
        return Err("no workflow to offer as a tool: name workflow files, or give the workflows below a folder a trigger `type: mcp`".into());
    }
    Ok((tools, named))
}

/// `tools` whose agent steps can reach a provider. A file named on the
/// command line must; one found in a folder is left out, saying so.
fn runnable(
    mut tools: Vec<WorkflowTool>,
    named: &[Arc<Workflow>],
    caps: &marktoflow_steps::Capabilities,
) -> Result<Vec<WorkflowTool>, Vec<crate::diag::Diagnostic>> {
    let mut problems = Vec::new();
    tools.retain(
        |t| match crate::engine::plan::preflight(&t.workflow, caps) {
            Ok(()) => true,
            Err(d)
                if named
                    .iter()
                    .any(|w| w.source.path == t.workflow.source.path) =>
            {
                problems.extend(d);
                true
            }
            Err(d) => {
                let why = d.first().map(|d| d.message.as_str()).unwrap_or_default();
                eprintln!("warning: not offering `{}`: {why}", t.name);
                false
            }
        },
    );
    if problems.is_empty() {
        Ok(tools)
    } else {
        Err(problems)
    }
}

pub(super) fn mcp(a: McpArgs) -> i32 {
    let registry = Registry::standard();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let serve_root = match a.paths.first() {
        Some(p) if p.is_file() => p.parent().map(Path::to_path_buf).unwrap_or_default(),
        Some(p) => p.clone(),
        None => PathBuf::from("."),
    };
    let (tools, named) = match offered(&a.paths, &registry) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let workflows: Vec<_> = tools.iter().map(|t| t.workflow.clone()).collect();
    let env = environment(&cwd);
    let links = super::run::wait_links(&serve_root, &env);
    let caps = server_caps(&a.server, &cwd, &workflows, &serve_root, env);
    let tools = match runnable(tools, &named, &caps) {
        Ok(t) => t,
        Err(problems) => {
            print_diagnostics(&problems);
            eprintln!("marktoflow: not serving: agent steps have no LLM provider they can reach");
            return EXIT_USAGE;
        }
    };
    let store = match open_store(&a.server, &serve_root, "mcp", true) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let config = super::serve::serve_config(&a.server);
    let grace = std::time::Duration::from_secs(a.server.grace_period);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("marktoflow-mcp")
        .thread_stack_size(super::serve::RUN_THREAD_STACK)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    let state = Arc::new(
        ServerState::new(Vec::new(), caps, Arc::new(FileLoader(registry)), config)
            .with_store(store.clone())
            .with_links_if(links)
            // A run that waits is answered and resumed by what is served.
            .with_workflows(tools.iter().map(|t| t.workflow.clone()).collect()),
    );
    let n = tools.len();
    eprintln!("marktoflow: offering {n} tool{} over stdio", plural(n));
    for t in &tools {
        eprintln!("  {} → {}", t.name, t.workflow.source.name);
    }
    let watched = a
        .watch
        .then(|| crate::serve::file_watch::ServedFiles::of(&a.paths, &cwd));
    let tenant = match a.tenant.as_deref().map(str::trim) {
        None => None,
        Some(t) if t.is_empty() || t.chars().any(char::is_control) => {
            eprintln!("error: `--tenant`: name a tenant (its id, as notes' `tenant_id` has it)");
            return EXIT_USAGE;
        }
        Some(t) => Some(t.to_string()),
    };
    let code = rt.block_on(async move {
        let pauses = tokio::spawn(crate::serve::pauses::take_served_pauses(state.clone()));
        let mut server = McpServer::new(state.clone(), tools).for_tenant(tenant);
        if let Some(files) = watched {
            server = server.watching();
            let (server, state, paths) = (server.clone(), state.clone(), a.paths.clone());
            // Until the process ends.
            tokio::spawn(async move {
                let again = (server.clone(), state.clone(), paths.clone());
                let reload = |_: &crate::serve::file_watch::ServedFiles, changed: Vec<String>| {
                    let (server, paths, state) = (server.clone(), paths.clone(), state.clone());
                    tokio::spawn(async move { reload(&server, &state, &paths, changed).await });
                };
                // Once watching, load again: a file changed since the first
                // load, before the watch began, is not missed.
                let ready = move || {
                    let (server, state, paths) = again;
                    tokio::spawn(
                        async move { self::reload(&server, &state, &paths, Vec::new()).await },
                    );
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
        let service = match server.serve(rmcp::transport::stdio()).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: the MCP client did not start a session: {e}");
                return EXIT_RUN_FAILED;
            }
        };
        // Until the client closes stdin.
        let _ = service.waiting().await;
        state.drain(grace).await;
        let _ = pauses.await;
        if let Some(store) = store {
            super::serve::flush_at_exit(store).await;
        }
        EXIT_OK
    });
    rt.shutdown_background();
    code
}

/// Loads the workflows again; when they all load, they are the tools from
/// now on and clients are told. Otherwise the last good list stays.
async fn reload(server: &McpServer, state: &ServerState, paths: &[PathBuf], changed: Vec<String>) {
    let registry = Registry::standard();
    let loaded = offered(paths, &registry).and_then(|(tools, named)| {
        runnable(tools, &named, &state.caps).map_err(|problems| {
            print_diagnostics(&problems);
            "agent steps have no LLM provider they can reach".to_string()
        })
    });
    // Reloaded as the watch began: what changed is not known.
    let changed = if changed.is_empty() {
        "the workflows".to_string()
    } else {
        changed.join(", ")
    };
    match loaded {
        Ok(tools) => {
            let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
            let workflows = tools.iter().map(|t| t.workflow.clone()).collect();
            if server.replace_tools(tools).await {
                state.replace_served(crate::serve::Served {
                    routes: Vec::new(),
                    workflows,
                    broken: Vec::new(),
                });
                eprintln!(
                    "marktoflow: {changed} changed: offering {}",
                    names.join(", ")
                );
            }
        }
        Err(e) => eprintln!(
            "marktoflow: {changed} changed, still offering the last tools that loaded: {e}"
        ),
    }
}
