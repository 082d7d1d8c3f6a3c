//! `marktoflow validate`: every check short of running, over files and folders.

use super::env::environment;
use super::report::{plural, print_diagnostics};
use super::{EXIT_OK, EXIT_USAGE};
use crate::check::online::ServerReport;
use crate::diag::Diagnostic;
use crate::format::model::{self};
use marktoflow_steps::Registry;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(super) fn validate(
    files: &[PathBuf],
    as_json: bool,
    strict: bool,
    online: bool,
    allow_write: &[PathBuf],
) -> i32 {
    let registry = Registry::standard();
    let templates = crate::template::Templates::new();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let env = environment(&cwd);
    // A test file named is checked as one: its cases, and the workflow it tests.
    let (tests, files): (Vec<PathBuf>, Vec<PathBuf>) = files
        .iter()
        .cloned()
        .partition(|f| f.is_file() && crate::testing::spec::is_test_file(f));
    let files = &files[..];
    let (found, mut errors) = discover(files, &registry);
    // (file, steps when it loaded, diagnostics)
    let mut entries: Vec<(PathBuf, Option<usize>, Vec<Diagnostic>)> = Vec::new();
    let mut loaded = Vec::new();
    let mut servers: Vec<(PathBuf, Vec<ServerReport>)> = Vec::new();
    for (f, l) in found {
        let mut diags = l.warnings;
        if online {
            let (d, reports) = check_online(&l.workflow, &cwd, &env);
            diags.extend(d);
            servers.push((f.clone(), reports));
        }
        diags.extend(crate::check::verify::verify(
            &l.workflow,
            &registry,
            &templates,
        ));
        diags.extend(crate::check::verify::verify_triggers(
            &[Arc::new(l.workflow.clone())],
            &env,
        ));
        if !allow_write.is_empty() {
            let sandbox =
                marktoflow_steps::Sandbox::new(cwd.clone(), Vec::new(), allow_write.to_vec());
            diags.extend(crate::check::writes::writes_outside(&l.workflow, &sandbox));
        }
        entries.push((f, Some(l.workflow.walk().len()), diags));
        loaded.push(Arc::new(l.workflow));
    }
    for d in errors.drain(..) {
        let f = PathBuf::from(&d.file);
        match entries.iter_mut().find(|e| e.0 == f) {
            Some(e) => e.2.push(d),
            None => entries.push((f, None, vec![d])),
        }
    }
    // What only shows across files: a route claimed twice.
    for d in crate::check::verify::verify_triggers(&loaded, &env) {
        if let Some(e) = entries
            .iter_mut()
            .find(|e| e.1.is_some() && Path::new(&d.file) == e.0 && !e.2.contains(&d))
        {
            e.2.push(d);
        }
    }
    let mut report = Vec::new();
    let mut failed = entries.is_empty() && tests.is_empty();
    if failed {
        eprintln!("error: no workflow files found");
    }
    for (f, steps, mut diags) in entries {
        diags.sort_by_key(|d| (d.pos, d.severity == crate::diag::Severity::Warning));
        let n_err = diags
            .iter()
            .filter(|d| d.severity == crate::diag::Severity::Error)
            .count();
        let n_warn = diags.len() - n_err;
        let ok = steps.is_some() && n_err == 0 && !(strict && n_warn > 0);
        failed |= !ok;
        if !as_json {
            print_diagnostics(&diags);
            match steps {
                Some(n) if n_err == 0 => println!(
                    "{}: {} ({} step{}, {} warning{})",
                    f.display(),
                    if ok { "ok" } else { "failed (--strict)" },
                    n,
                    plural(n),
                    n_warn,
                    plural(n_warn)
                ),
                _ => println!(
                    "{}: {} error{}{}",
                    f.display(),
                    n_err,
                    plural(n_err),
                    if n_warn > 0 {
                        format!(", {n_warn} warning{}", plural(n_warn))
                    } else {
                        String::new()
                    }
                ),
            }
        }
        let reports = servers.iter().find(|s| s.0 == f).map(|s| &s.1);
        if !as_json {
            for r in reports.into_iter().flatten() {
                print_server(r);
            }
        }
        let mut entry = json!({"file": f, "ok": ok, "diagnostics": diags});
        if let Some(n) = steps {
            entry["steps"] = json!(n);
        }
        if let Some(r) = reports {
            entry["mcp_servers"] = json!(r);
        }
        report.push(entry);
    }
    for t in &tests {
        let (ok, entry) = match crate::testing::spec::load(t, &registry) {
            Ok((file, wf)) => {
                let n = file.cases.len();
                if !as_json {
                    println!(
                        "{}: ok ({n} case{} of {})",
                        t.display(),
                        plural(n),
                        wf.source.name
                    );
                }
                let entry = json!({"file": t, "ok": true, "diagnostics": [], "cases": n,
                                   "workflow": file.workflow});
                (true, entry)
            }
            Err(diags) => {
                if !as_json {
                    print_diagnostics(&diags);
                    let n = diags.len();
                    println!("{}: {n} error{}", t.display(), plural(n));
                }
                (false, json!({"file": t, "ok": false, "diagnostics": diags}))
            }
        };
        failed |= !ok;
        report.push(entry);
    }
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    }
    if failed {
        EXIT_USAGE
    } else {
        EXIT_OK
    }
}

/// Starts `wf`'s MCP servers, checks its calls of them, and stops them.
fn check_online(
    wf: &model::Workflow,
    cwd: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> (Vec<Diagnostic>, Vec<ServerReport>) {
    use marktoflow_steps::core::action::Capabilities;
    let caps = Capabilities::new(
        marktoflow_steps::Sandbox::closed(cwd.to_path_buf()),
        super::state_dir(cwd),
        Arc::new(marktoflow_steps::script::ScriptHost::new(PathBuf::from(
            "marktoflow",
        ))),
        Arc::new(marktoflow_steps::registry::agent_hub(Default::default())),
        env.clone(),
        wf.allowed_hosts.clone(),
    );
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let d = Diagnostic::file_error(
                &wf.source.name,
                format!("cannot start the async runtime: {e}"),
            );
            return (vec![d], Vec::new());
        }
    };
    rt.block_on(async {
        let out = crate::check::online::check_mcp(wf, &caps).await;
        caps.mcp.shutdown().await;
        out
    })
}

/// `  tool `fs` (npx -y server): read_file(path), …`
fn print_server(r: &ServerReport) {
    println!("  tool `{}`: MCP server `{}`", r.tool, r.server);
    for t in &r.tools {
        let args: Vec<String> = t
            .arguments
            .iter()
            .map(|a| {
                if t.required.contains(a) {
                    a.clone()
                } else {
                    format!("{a}?")
                }
            })
            .collect();
        println!("    {}.{}({})", r.tool, t.name, args.join(", "));
    }
}

/// The workflows named, or found below the folders named (as `serve` finds
/// them: Markdown files with frontmatter), loaded; and the load errors.
/// A Markdown file below a folder that is not a workflow is skipped.
pub fn discover(
    paths: &[PathBuf],
    registry: &Registry,
) -> (Vec<(PathBuf, model::Loaded)>, Vec<Diagnostic>) {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        if !p.exists() {
            errors.push(Diagnostic::file_error(
                &p.display().to_string(),
                "no such file or folder",
            ));
        }
    }
    for f in crate::serve::workflow_files(paths) {
        let named = paths.contains(&f);
        let text = match std::fs::read(&f) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                errors.push(Diagnostic::file_error(
                    &f.display().to_string(),
                    format!("cannot read workflow file: {}", model::io_reason(&e)),
                ));
                continue;
            }
        };
        // Folders hold READMEs, notes and tests too: below a folder, only
        // files with a workflow's frontmatter count, and tests do not.
        if !named && crate::testing::spec::is_test_file(&f) {
            continue;
        }
        if !named {
            let src = crate::diag::Source::new(&f, &text);
            if crate::format::document::parse_document(src)
                .frontmatter
                .is_none()
            {
                continue;
            }
        }
        match crate::check::load::load_file(&f, registry) {
            Ok(l) => found.push((f, l)),
            Err(d) => errors.extend(d),
        }
    }
    (found, errors)
}
