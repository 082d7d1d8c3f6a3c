//! The `marktoflow` command: a thin layer over the engine. All printing
//! happens here: data on stdout, progress and diagnostics on stderr.

pub mod actions;
pub mod answer;
pub mod args;
pub mod debug;
pub mod doctor;
pub mod env;
pub mod kb;
pub mod list;
pub mod mcp;
pub mod models;
pub mod progress;
pub mod report;
pub mod run;
pub mod scaffold;
pub mod serve;
pub mod store;
pub mod supervise;
pub mod test;
pub mod validate;
pub mod worker;

pub use args::*;
pub use env::parse_dotenv;
use report::plural;
pub use report::print_diagnostics;
pub use run::RetryPlan;
pub use validate::discover;

use crate::diag::Diagnostic;
use crate::format::model::{self, Workflow};
use clap::Parser;
use marktoflow_steps::Registry;
use std::collections::BTreeMap;

use std::path::{Path, PathBuf};

/// Exit codes.
pub const EXIT_OK: i32 = 0;
pub const EXIT_RUN_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// The state folder for work started at `start` (a workflow's folder, or
/// the current one): see [`marktoflow_steps::core::state`].
pub fn state_dir(start: &Path) -> marktoflow_steps::core::state::StateDir {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let env: BTreeMap<String, String> = std::env::vars().collect();
    marktoflow_steps::core::state::StateDir::discover(start, &cwd, &env)
}

/// Entry point of the binary; returns the exit code.
pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).map(|a| a == "__script-worker").unwrap_or(false) {
        return marktoflow_steps::script::worker_main();
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    // Commands that only print (not `run`, `retry` or `serve`, which talk to
    // script workers and clients over pipes and sockets): a closed pipe, as
    // in `marktoflow history --json | head -1`, ends them quietly instead
    // of a panic.
    let prints_only = !matches!(
        cli.command,
        Command::Serve(_)
            | Command::Worker(_)
            | Command::Mcp(_)
            | Command::Run(_)
            | Command::Debug { .. }
            | Command::Retry { .. }
    );
    if prints_only {
        // SAFETY: setting a signal's disposition to the default is sound.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // Commands that run workflows send their traces when `OTEL_*` asks.
    let runs_workflows = matches!(
        cli.command,
        Command::Run(_)
            | Command::Debug { .. }
            | Command::Answer(_)
            | Command::Resume { .. }
            | Command::Retry { .. }
            | Command::Serve(_)
            | Command::Worker(_)
            | Command::Mcp(_)
    );
    let telemetry = if runs_workflows {
        match crate::telemetry::start(&|k| std::env::var(k).ok()) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("warning: {e}");
                None
            }
        }
    } else {
        None
    };
    // The project's own integrations, beside the bundled ones.
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut dirs = vec![cwd.join(".marktoflow").join("integrations")];
    if let Some(more) = std::env::var_os("MARKTOFLOW_INTEGRATIONS") {
        dirs.extend(std::env::split_paths(&more));
    }
    marktoflow_steps::integrations::set_user_dirs(dirs);
    for (file, why) in marktoflow_steps::integrations::load_errors() {
        eprintln!("warning: integration `{file}` is not loaded: {why}");
    }
    let code = dispatch(cli);
    if let Some(t) = telemetry {
        t.shutdown();
    }
    code
}

fn dispatch(cli: Cli) -> i32 {
    match cli.command {
        Command::Run(a) => run::run(a, None),
        Command::Debug { breaks, run } => run::run_with(run, None, Some(breaks), None),
        Command::Answer(a) => answer::answer(a),
        Command::Pause { run_id, as_, store } => answer::pause(&run_id, as_, &store),
        Command::Resume { run_id, as_, exec } => answer::resume(run_id, as_, exec),
        Command::History {
            workflow,
            status,
            limit,
            json,
            store,
        } => crate::cli::store::history(&store, workflow, status, limit, json),
        Command::Show {
            run_id,
            json,
            store,
        } => crate::cli::store::show(&store, &run_id, json),
        Command::Retry {
            run_id,
            from,
            force,
            run,
        } => match crate::cli::store::retry_plan(&run, &run_id, from.as_deref(), force) {
            Ok((args, plan)) => run::run(args, Some(plan)),
            Err(code) => code,
        },
        Command::Prune { older_than, store } => crate::cli::store::prune(&store, &older_than),
        Command::CopyHistory { from, to } => crate::cli::store::copy_history(&from, &to),
        Command::Validate {
            files,
            json,
            strict,
            online,
            allow_write,
        } => validate::validate(&files, json, strict, online, &allow_write),
        Command::Serve(a) => serve::serve(a),
        Command::Mcp(a) => mcp::mcp(a),
        Command::Worker(a) => worker::worker(a),
        Command::Workers { json, store } => worker::workers(&store, json),
        Command::List { paths, json } => list::list(&paths, json),
        Command::Eval {
            file,
            dataset,
            metrics,
            min,
            json,
        } => test::eval(&file, &dataset, &metrics, min, json),
        Command::Replay {
            run_id,
            json,
            store,
        } => test::replay(&run_id, json, &store),
        Command::Test {
            record: Some(run),
            store,
            ..
        } => test::record(&run, &store),
        Command::Test {
            paths, junit, live, ..
        } => test::test(&paths, junit.as_deref(), live),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = args::Cli::command();
            clap_complete::generate(shell, &mut cmd, "marktoflow", &mut std::io::stdout());
            EXIT_OK
        }
        Command::Init { dir } => scaffold::init(&dir),
        Command::Doctor {
            paths,
            agent,
            model,
            offline,
            json,
            store,
        } => doctor::doctor(
            &paths,
            agent.as_deref(),
            model.as_deref(),
            offline,
            &store,
            json,
        ),
        Command::New {
            name,
            template,
            force,
        } => scaffold::new(&name, &template, force),
        Command::Schema => {
            print!("{}", crate::format::schema::schema_text());
            EXIT_OK
        }
        Command::Actions {
            name,
            json,
            markdown,
        } => {
            let shape = match (json, markdown) {
                (true, _) => crate::cli::actions::Shape::Json,
                (_, true) => crate::cli::actions::Shape::Markdown,
                _ => crate::cli::actions::Shape::Text,
            };
            crate::cli::actions::print(name.as_deref(), shape)
        }
        Command::Kb { command } => match command {
            KbSubcommand::Index {
                path,
                embed,
                force,
                index_dir,
                json,
            } => kb::kb(kb::KbCommand {
                method: "index",
                kb: &path,
                index_dir: index_dir.as_deref(),
                embed,
                force,
                json,
            }),
            KbSubcommand::Status {
                path,
                index_dir,
                json,
            } => kb::kb(kb::KbCommand {
                method: "status",
                kb: &path,
                index_dir: index_dir.as_deref(),
                embed: false,
                force: false,
                json,
            }),
        },
        Command::Model { command } => match command {
            ModelCommand::Install { names } => models::install(&names),
            ModelCommand::List { json } => models::list(json),
        },
        Command::Graph { file, format } => {
            let wf = match load(&file, &Registry::standard()) {
                Ok(w) => w,
                Err(code) => return code,
            };
            let g = crate::format::graph::Graph::of(&wf);
            let text = match format.as_str() {
                "dot" => g.dot(),
                "svg" => g.svg(),
                _ => g.mermaid(),
            };
            print!("{text}");
            EXIT_OK
        }
    }
}

/// Sub-workflows come from files, checked like the top-level one.
struct FileLoader(Registry);

impl crate::engine::WorkflowLoader for FileLoader {
    fn load(&self, path: &Path) -> Result<Workflow, Vec<Diagnostic>> {
        model::load_file(path, &self.0).map(|l| l.workflow)
    }
}

fn load(file: &Path, registry: &Registry) -> Result<Workflow, i32> {
    match crate::check::load::load_file(file, registry) {
        Ok(l) => {
            print_diagnostics(&l.warnings);
            Ok(l.workflow)
        }
        Err(diags) => {
            print_diagnostics(&diags);
            let n = diags.len();
            eprintln!("marktoflow: {n} error{} in `{}`", plural(n), file.display());
            Err(EXIT_USAGE)
        }
    }
}
