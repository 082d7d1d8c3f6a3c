//! `marktoflow mcp`: workflows as MCP tools over stdio. stdout carries the
//! protocol; everything else goes to stderr.

use super::args::McpArgs;
use super::env::environment;
use super::report::{plural, print_diagnostics};
use super::serve::{open_store, server_caps};
use super::validate::discover;
use super::{FileLoader, EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::mcp::{tools_of, McpServer};
use crate::serve::{ServeConfig, ServerState};
use marktoflow_steps::Registry;
use rmcp::ServiceExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(super) fn mcp(a: McpArgs) -> i32 {
    let registry = Registry::standard();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let (found, errors) = discover(&a.paths, &registry);
    if !errors.is_empty() {
        print_diagnostics(&errors);
        return EXIT_USAGE;
    }
    let serve_root = match a.paths.first() {
        Some(p) if p.is_file() => p.parent().map(Path::to_path_buf).unwrap_or_default(),
        Some(p) => p.clone(),
        None => PathBuf::from("."),
    };
    let mut named = Vec::new();
    let mut in_folders = Vec::new();
    for (path, l) in found {
        print_diagnostics(&l.warnings);
        let wf = Arc::new(l.workflow);
        if a.paths.contains(&path) {
            named.push(wf);
        } else {
            in_folders.push(wf);
        }
    }
    let mut tools = match tools_of(&named, &in_folders) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    if tools.is_empty() {
        eprintln!("error: no workflow to offer as a tool: name workflow files, or give the workflows below a folder a trigger `type: mcp`");
        return EXIT_USAGE;
    }
    let workflows: Vec<_> = tools.iter().map(|t| t.workflow.clone()).collect();
    let env = environment(&cwd);
    let caps = server_caps(&a.server, &cwd, &workflows, &serve_root, env);
    // A file named on the command line must be able to run; one found in a
    // folder whose agent steps have no provider is left out, saying so.
    let mut problems = Vec::new();
    tools.retain(
        |t| match crate::engine::plan::preflight(&t.workflow, &caps) {
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
    if !problems.is_empty() {
        print_diagnostics(&problems);
        eprintln!("marktoflow: not serving: agent steps have no LLM provider they can reach");
        return EXIT_USAGE;
    }
    let store = match open_store(&a.server, &serve_root) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let config = ServeConfig {
        max_concurrent: a.server.max_concurrent,
        max_concurrent_per_workflow: a.server.max_concurrent_per_workflow,
        max_queue: a.server.max_queue,
        ..ServeConfig::default()
    };
    let grace = std::time::Duration::from_secs(a.server.grace_period);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("marktoflow-mcp")
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
            .with_store(store.clone()),
    );
    let n = tools.len();
    eprintln!("marktoflow: offering {n} tool{} over stdio", plural(n));
    for t in &tools {
        eprintln!("  {} → {}", t.name, t.workflow.source.name);
    }
    let code = rt.block_on(async move {
        let server = McpServer::new(state.clone(), tools);
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
        if let Some(store) = store {
            match tokio::task::spawn_blocking(move || store.flush()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => eprintln!("marktoflow: not every run event was recorded: {e}"),
                Err(e) => eprintln!("marktoflow: not every run event was recorded: {e}"),
            }
        }
        EXIT_OK
    });
    rt.shutdown_background();
    code
}
