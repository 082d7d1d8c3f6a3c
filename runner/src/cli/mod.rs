//! The `marktoflow` command: a thin layer over the engine. All printing
//! happens here: data on stdout, progress and diagnostics on stderr.

pub mod actions;
pub mod store;

use crate::cli::store::RetryArgs;
use crate::diag::Diagnostic;
use crate::engine::{Engine, RunConfig, RunEvent, RunResult, RunStatus, StepStatus};
use crate::format::inputs::{self, Supplied};
use crate::format::model::{self, Workflow};
use clap::{Args, Parser, Subcommand};
use marktoflow_steps::agent::{AgentHub, AgentOverrides};
use marktoflow_steps::core::action::{Cancel, Capabilities, LogLevel};
use marktoflow_steps::script::ScriptHost;
use marktoflow_steps::{Registry, Sandbox};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Exit codes.
pub const EXIT_OK: i32 = 0;
pub const EXIT_RUN_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

#[derive(Parser, Debug)]
#[command(name = "marktoflow", version, about = "Run workflows written as Markdown", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a workflow file.
    Run(RunArgs),
    /// Parse and check workflow files (or every workflow below a folder) without running them.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Treat warnings (unknown variables, unused inputs, …) as errors.
        #[arg(long)]
        strict: bool,
    },
    /// Print the JSON Schema of the workflow format (for editors).
    Schema,
    /// List every action with its inputs, or show one (`marktoflow actions kb.search`).
    Actions {
        /// An action, `tool.method`.
        name: Option<String>,
        /// Print the catalog as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve the workflows' webhook triggers over HTTP.
    Serve(ServeArgs),
    /// List recorded runs, newest first.
    History {
        /// Only runs of this workflow (its id).
        #[arg(long)]
        workflow: Option<String>,
        /// Only runs with this status: queued, running, completed, failed, cancelled.
        #[arg(long)]
        status: Option<String>,
        /// How many runs to list.
        #[arg(short = 'n', long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show one recorded run: its steps, outputs and errors.
    Show {
        /// The run id (a unique prefix is enough).
        run_id: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Run a recorded run again from a top-level step, reusing the outputs of the steps before it.
    Retry {
        run_id: String,
        /// The top-level step to start from (its id); default: where the run stopped.
        #[arg(long, value_name = "STEP")]
        from: Option<String>,
        #[command(flatten)]
        run: RetryArgs,
    },
    /// Delete finished runs older than an age (`30d`, `12h`).
    Prune {
        #[arg(long, value_name = "AGE")]
        older_than: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print a workflow as a flowchart.
    Graph {
        file: PathBuf,
        /// mermaid (for Markdown and GitHub), dot (Graphviz), or svg (a picture).
        #[arg(long, default_value = "mermaid", value_parser = ["mermaid", "dot", "svg"])]
        format: String,
    },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Workflow files or folders (every `.md` below a folder with webhook triggers).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// 0 picks a free port (the address is printed on stderr).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Let scripts and file actions read below DIR (fixed for the server's life).
    #[arg(long, value_name = "DIR")]
    pub allow_read: Vec<PathBuf>,
    /// Let scripts and file actions write below DIR.
    #[arg(long, value_name = "DIR")]
    pub allow_write: Vec<PathBuf>,
    /// Let http actions call only these hosts.
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_body: usize,
    /// How long a synchronous request waits for its run (seconds) before answering 504.
    #[arg(long, default_value_t = 300)]
    pub request_timeout: u64,
    /// Runs executing at once over all workflows; more wait in the queue.
    #[arg(long, default_value_t = 64)]
    pub max_concurrent: usize,
    /// Runs of one workflow executing at once (a trigger's `max_concurrent:` may lower it).
    #[arg(long, default_value_t = 16)]
    pub max_concurrent_per_workflow: usize,
    /// Runs that may wait for a slot; beyond it requests are answered 503.
    #[arg(long, default_value_t = 1000)]
    pub max_queue: usize,
    /// On SIGTERM or Ctrl-C: how long executing runs may take to finish (seconds) before they are cancelled.
    #[arg(long, default_value_t = 30)]
    pub grace_period: u64,
    #[arg(short, long, env = "MARKTOFLOW_AGENT")]
    pub agent: Option<String>,
    #[arg(short, long, env = "MARKTOFLOW_MODEL")]
    pub model: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Delete finished runs older than this at start and every hour (`30d`, `12h`).
    #[arg(long, value_name = "AGE")]
    pub retention: Option<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The workflow file (.md).
    pub file: PathBuf,
    /// An input, `name=value` (repeatable). Values are converted to the input's declared type.
    #[arg(short = 'i', long = "input", value_name = "NAME=VALUE")]
    pub input: Vec<String>,
    /// A JSON file with an object of inputs (`--input` wins on the same name).
    #[arg(long, value_name = "FILE")]
    pub inputs_file: Option<PathBuf>,
    /// Print one JSON object with the outputs, status and every step.
    #[arg(long)]
    pub json: bool,
    /// Show step outputs and debug logs on stderr.
    #[arg(short, long)]
    pub verbose: bool,
    /// Show no progress on stderr (errors still show).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Render every step and show what would be called, calling nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Use this LLM provider for every agent tool: anthropic, openai, ollama (or any sdk name).
    #[arg(short, long, env = "MARKTOFLOW_AGENT")]
    pub agent: Option<String>,
    /// The model for agent steps that name none (and for every step when --agent switches provider).
    #[arg(short, long, env = "MARKTOFLOW_MODEL")]
    pub model: Option<String>,
    /// Let scripts and file actions read below DIR (repeatable).
    #[arg(long, value_name = "DIR")]
    pub allow_read: Vec<PathBuf>,
    /// Let scripts and file actions write below DIR (repeatable; also readable).
    #[arg(long, value_name = "DIR")]
    pub allow_write: Vec<PathBuf>,
    /// Let http actions call only these hosts (`api.example.com`, `*.example.com`,
    /// `127.0.0.1:8080`; repeatable). Replaces the workflow's `permissions.hosts`.
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Treat authoring warnings as errors: nothing runs when there are any.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Where runs are recorded.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// The run store (SQLite file); default `runs.db` in the state folder:
    /// the nearest `.marktoflow/` above the workflow (or the current folder
    /// for `history`, `show`, `prune`), else the per-user data folder.
    #[arg(long, value_name = "FILE", env = "MARKTOFLOW_STORE")]
    pub store: Option<PathBuf>,
    /// Do not record this run.
    #[arg(long)]
    pub no_store: bool,
}

impl StoreArgs {
    /// The store file: `--store`, else the state folder's for `start`.
    pub fn path(&self, start: &Path) -> PathBuf {
        match &self.store {
            Some(p) => p.clone(),
            None => state_dir(start).runs_db(),
        }
    }

    /// The opened store, or None with `--no-store`. A store that cannot be
    /// opened is an error: runs must not go unrecorded silently.
    pub fn open(
        &self,
        start: &Path,
    ) -> Result<Option<Arc<dyn crate::store::RunStore>>, crate::store::StoreError> {
        if self.no_store {
            return Ok(None);
        }
        let s = crate::store::SqliteStore::open(&self.path(start))?;
        Ok(Some(Arc::new(s)))
    }

    /// For recording one run: its journal beside the store (see
    /// [`crate::store::journal`]), or None with `--no-store`.
    pub fn open_journal(
        &self,
        start: &Path,
    ) -> Result<Option<Arc<dyn crate::store::RunStore>>, crate::store::StoreError> {
        if self.no_store {
            return Ok(None);
        }
        let s = crate::store::journal::JournalStore::open(&self.path(start))?;
        Ok(Some(Arc::new(s)))
    }
}

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
    match cli.command {
        Command::Run(a) => run(a, None),
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
        Command::Retry { run_id, from, run } => {
            match crate::cli::store::retry_plan(&run, &run_id, from.as_deref()) {
                Ok((args, plan)) => self::run(args, Some(plan)),
                Err(code) => code,
            }
        }
        Command::Prune { older_than, store } => crate::cli::store::prune(&store, &older_than),
        Command::Validate {
            files,
            json,
            strict,
        } => validate(&files, json, strict),
        Command::Serve(a) => serve(a),
        Command::Schema => {
            print!("{}", crate::format::schema::schema_text());
            EXIT_OK
        }
        Command::Actions { name, json } => crate::cli::actions::print(name.as_deref(), json),
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

struct Style {
    color: bool,
}

impl Style {
    fn stderr() -> Self {
        Style {
            color: std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
}

pub fn print_diagnostics(diags: &[Diagnostic]) {
    let style = Style::stderr();
    let mut err = std::io::stderr().lock();
    for d in diags {
        let text = d.render();
        let text = match d.severity {
            crate::diag::Severity::Error => text.replacen(
                ": error:",
                &format!(": {}:", style.paint("1;31", "error")),
                1,
            ),
            crate::diag::Severity::Warning => text.replacen(
                ": warning:",
                &format!(": {}:", style.paint("1;33", "warning")),
                1,
            ),
        };
        let _ = writeln!(err, "{text}");
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
    match model::load_file(file, registry) {
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

fn validate(files: &[PathBuf], as_json: bool, strict: bool) -> i32 {
    let registry = Registry::standard();
    let templates = crate::template::Templates::new();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let env = environment(&cwd);
    let (found, mut errors) = discover(files, &registry);
    // (file, steps when it loaded, diagnostics)
    let mut entries: Vec<(PathBuf, Option<usize>, Vec<Diagnostic>)> = Vec::new();
    let mut loaded = Vec::new();
    for (f, l) in found {
        let mut diags = l.warnings;
        diags.extend(crate::check::verify::verify(
            &l.workflow,
            &registry,
            &templates,
        ));
        diags.extend(crate::check::verify::verify_triggers(
            &[Arc::new(l.workflow.clone())],
            &env,
        ));
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
    let mut failed = entries.is_empty();
    if entries.is_empty() {
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
        let mut entry = json!({"file": f, "ok": ok, "diagnostics": diags});
        if let Some(n) = steps {
            entry["steps"] = json!(n);
        }
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
        // Folders hold READMEs and notes too: below a folder, only files
        // with a workflow's frontmatter count.
        if !named {
            let src = crate::diag::Source::new(&f, &text);
            if crate::format::document::parse_document(src)
                .frontmatter
                .is_none()
            {
                continue;
            }
        }
        match model::load_file(&f, registry) {
            Ok(l) => found.push((f, l)),
            Err(d) => errors.extend(d),
        }
    }
    (found, errors)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The process environment, with `.env` files (cwd, then the workflow's
/// folder) filling in what is not set.
fn environment(workflow_dir: &Path) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    for dir in [PathBuf::from("."), workflow_dir.to_path_buf()] {
        if let Ok(text) = std::fs::read_to_string(dir.join(".env")) {
            for (k, v) in parse_dotenv(&text) {
                env.entry(k).or_insert(v);
            }
        }
    }
    env
}

/// `KEY=value` lines; `#` comments, `export ` prefixes and quotes allowed.
pub fn parse_dotenv(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let l = l.strip_prefix("export ").unwrap_or(l);
            let (k, v) = l.split_once('=')?;
            let v = v.trim();
            let v = if v.len() >= 2
                && ((v.starts_with('"') && v.ends_with('"'))
                    || (v.starts_with('\'') && v.ends_with('\'')))
            {
                &v[1..v.len() - 1]
            } else {
                v
            };
            Some((k.trim().to_string(), v.to_string()))
        })
        .collect()
}

fn supplied_inputs(a: &RunArgs) -> Result<Vec<(String, Supplied)>, String> {
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

/// What `retry` continues: the run it retries, its inputs, and where.
pub struct RetryPlan {
    pub of: String,
    pub inputs: Map<String, Value>,
    pub checkpoint: crate::engine::Checkpoint,
    /// Top-level steps reused from the earlier run.
    pub reused: usize,
}

fn run(a: RunArgs, retry: Option<RetryPlan>) -> i32 {
    let registry = Registry::standard();
    let wf = match load(&a.file, &registry) {
        Ok(w) => w,
        Err(code) => return code,
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
    if !a.quiet || crate::check::verify::has_errors(&diags) {
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
    let supplied = match &retry {
        // A retry runs with the inputs the run had.
        Some(p) => p
            .inputs
            .iter()
            .map(|(k, v)| (k.clone(), Supplied::Json(v.clone())))
            .collect(),
        None => match supplied_inputs(&a) {
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
        if let Supplied::Text(s) = v {
            let p = cwd.join(s);
            if !s.is_empty() && s.len() < 4096 && p.exists() {
                read_roots.push(p);
            }
        }
    }
    read_roots.extend(a.allow_read.iter().cloned());
    let inputs = match inputs::resolve(&wf, supplied, &env) {
        Ok(i) => i,
        Err(errs) => {
            let diags: Vec<Diagnostic> = errs.iter().map(|e| e.diagnostic(&wf)).collect();
            print_diagnostics(&diags);
            return EXIT_USAGE;
        }
    };
    let sandbox = Sandbox::new(cwd, read_roots, a.allow_write.clone());
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("marktoflow"));
    let caps = Capabilities {
        clock: Arc::new(marktoflow_steps::core::time::SystemClock),
        caches: Default::default(),
        state: Arc::new(state_dir(&wf_dir)),
        sandbox: Arc::new(sandbox),
        log: Arc::new(|_| {}),
        progress: marktoflow_steps::core::action::no_progress(),
        cancel: Cancel::default(),
        scripts: Arc::new(ScriptHost::new(exe)),
        agents: Arc::new(AgentHub::new(AgentOverrides {
            agent: a.agent.clone(),
            model: a.model.clone(),
        })),
        env: Arc::new(env),
        allowed_hosts: if a.allow_host.is_empty() {
            wf.allowed_hosts.clone().map(Arc::new)
        } else {
            Some(Arc::new(a.allow_host.clone()))
        },
    };
    let engine = Engine::new();
    if a.dry_run {
        let plan = crate::engine::plan::dry_run(&engine, &wf, &inputs, &caps);
        print_plan(&wf, &plan, a.json);
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
    let store = match a.store.open_journal(&wf_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            eprintln!("  = hint: `--store FILE` records runs elsewhere; `--no-store` does not record this run");
            return EXIT_USAGE;
        }
    };
    let run_id = uuid::Uuid::new_v4().to_string();
    // The run's row is committed while the first step runs (nobody waits
    // for an answer, unlike a webhook); its outcome is checked at the end.
    let created = store.as_ref().map(|store| {
        let mut new = crate::store::NewRun::new(run_id.clone(), &wf, inputs.clone(), "cli");
        if let Some(p) = &retry {
            new.trigger = "retry".into();
            new.retry_of = Some((p.of.clone(), p.reused));
        }
        store.submit_run(new)
    });
    let printer = Arc::new(Progress::new(&a));
    let sink = printer.clone();
    let cfg = RunConfig {
        run_id,
        caps: caps.clone(),
        events: Arc::new(move |e: &crate::engine::Event| sink.event(&e.kind)),
        loader: Some(Arc::new(FileLoader(registry))),
        callers: Vec::new(),
    };
    let checkpoint = retry.map(|p| p.checkpoint).unwrap_or_default();
    let cancel = caps.cancel.clone();
    let result = rt.block_on(async {
        let interrupt = async {
            let _ = tokio::signal::ctrl_c().await;
            cancel.cancel();
            // A second Ctrl-C is not waited for: the run is asked to stop.
            std::future::pending::<()>().await
        };
        let go = async {
            match &store {
                Some(store) => {
                    crate::store::resume_from(store, &engine, &wf, inputs, cfg, checkpoint).await
                }
                None => engine.resume(&wf, inputs, cfg, checkpoint).await,
            }
        };
        tokio::select! {
            r = go => r,
            _ = interrupt => unreachable!("the interrupt future never completes"),
        }
    });
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
    print_result(&wf, &result, a.json);
    match result.status {
        RunStatus::Completed => EXIT_OK,
        _ => EXIT_RUN_FAILED,
    }
}

fn serve(a: ServeArgs) -> i32 {
    use crate::serve::{
        router, routes_of, run_file_watches, run_schedules, schedules_of, ServeConfig, ServerState,
    };
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
    let mut routes = match routes_of(&workflows, &env) {
        Ok(r) if errors.is_empty() => r,
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
    let mut schedules = match schedules_of(&workflows) {
        Ok(s) => s,
        Err(d) => {
            print_diagnostics(&d);
            return EXIT_USAGE;
        }
    };
    let mut watches = match crate::serve::file_watch::file_watches_of(&workflows, &cwd) {
        Ok(w) => w,
        Err(d) => {
            print_diagnostics(&d);
            return EXIT_USAGE;
        }
    };
    if routes.is_empty() && schedules.is_empty() && watches.is_empty() {
        let paths: Vec<String> = a
            .paths
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect();
        eprintln!(
            "error: no webhook, schedule or file_watch triggers found under {}",
            paths.join(", ")
        );
        eprintln!("  = hint: add `triggers: [{{type: webhook, path: /my-hook, method: POST}}]` to a workflow's frontmatter");
        return EXIT_USAGE;
    }
    // Roots are fixed now: nothing in a request can widen them.
    let mut read_roots = vec![cwd.clone()];
    for w in &workflows {
        if let Some(d) = w.source.path.parent() {
            read_roots.push(cwd.join(d));
        }
    }
    read_roots.extend(a.allow_read.iter().cloned());
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("marktoflow"));
    let caps = Capabilities {
        clock: Arc::new(marktoflow_steps::core::time::SystemClock),
        caches: Default::default(),
        state: Arc::new(state_dir(&serve_root)),
        sandbox: Arc::new(Sandbox::new(cwd, read_roots, a.allow_write.clone())),
        log: Arc::new(|_| {}),
        progress: marktoflow_steps::core::action::no_progress(),
        cancel: Cancel::default(),
        // A server runs scripts concurrently: keep enough warm workers that
        // requests do not pay for process starts.
        scripts: Arc::new(ScriptHost::with_limits(
            exe,
            marktoflow_steps::script::ScriptLimits {
                max_idle_workers: 16,
                ..Default::default()
            },
        )),
        agents: Arc::new(AgentHub::new(AgentOverrides {
            agent: a.agent.clone(),
            model: a.model.clone(),
        })),
        env: Arc::new(env),
        allowed_hosts: (!a.allow_host.is_empty()).then(|| Arc::new(a.allow_host.clone())),
    };
    // A workflow named on the command line must be servable; one found in a
    // folder whose agent steps have no provider is left out, saying so, and
    // the others are served (`serve workflows/` without an API key).
    let mut problems = Vec::new();
    let mut left_out = Vec::new();
    for w in &workflows {
        if let Err(d) = crate::engine::plan::preflight(w, &caps) {
            if a.paths.contains(&w.source.path) {
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
        routes.retain(|r| served(&r.workflow));
        schedules.retain(|s| served(&s.workflow));
        watches.retain(|w| served(&w.workflow));
        workflows.retain(|w| served(w));
        if routes.is_empty() && schedules.is_empty() && watches.is_empty() {
            eprintln!("marktoflow: not serving: every workflow found needs an LLM provider");
            return EXIT_USAGE;
        }
    }
    let config = ServeConfig {
        max_body: a.max_body,
        request_timeout: std::time::Duration::from_secs(a.request_timeout),
        max_concurrent: a.max_concurrent,
        max_concurrent_per_workflow: a.max_concurrent_per_workflow,
        max_queue: a.max_queue,
    };
    let grace = std::time::Duration::from_secs(a.grace_period);
    let n = routes.len();
    let mut listing: Vec<String> = routes
        .iter()
        .map(|r| format!("  {} {} → {}", r.method, r.path, r.workflow.source.name))
        .collect();
    listing.extend(
        schedules
            .iter()
            .map(|s| format!("  schedule `{}` (UTC) → {}", s.expr, s.workflow.source.name)),
    );
    listing.extend(watches.iter().map(|w| {
        format!(
            "  file_watch `{}` → {}",
            w.patterns.join("`, `"),
            w.workflow.source.name
        )
    }));
    let retention = match a
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
    let store = match a.store.open(&serve_root) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            eprintln!("  = hint: `--store FILE` records runs elsewhere; `--no-store` keeps them in memory only");
            return EXIT_USAGE;
        }
    };
    let state = Arc::new(
        ServerState::new(routes, caps, Arc::new(FileLoader(registry)), config)
            .with_store(store.clone()),
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    rt.block_on(async move {
        let addr = format!("{}:{}", a.host, a.port);
        let listener = match tokio::net::TcpListener::bind(&addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {addr}: {e}");
                return EXIT_USAGE;
            }
        };
        let local = listener.local_addr().map(|a| a.to_string()).unwrap_or(addr);
        eprintln!(
            "marktoflow: serving {n} route{} on http://{local}",
            plural(n)
        );
        for l in &listing {
            eprintln!("{l}");
        }
        let (drained_tx, drained_rx) = tokio::sync::oneshot::channel::<()>();
        let draining = state.clone();
        let shutdown = async move {
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
                    match store.prune(age) {
                        Ok(0) => {}
                        Ok(n) => eprintln!("marktoflow: pruned {n} run{} older than the retention", plural(n)),
                        Err(e) => eprintln!("marktoflow: pruning runs failed: {e}"),
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                }
            });
        }
        crate::serve::resume_stored_runs(&state, &workflows);
        tokio::spawn(run_schedules(state.clone(), schedules));
        tokio::spawn(run_file_watches(state.clone(), watches));
        let served = axum::serve(listener, router(state))
            .with_graceful_shutdown(shutdown)
            .await;
        let _ = drained_rx.await;
        if let Some(store) = store.clone() {
            // `flush` blocks: not on the async threads.
            match tokio::task::spawn_blocking(move || store.flush()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => eprintln!("marktoflow: not every run event was recorded: {e}"),
                Err(e) => eprintln!("marktoflow: not every run event was recorded: {e}"),
            }
        }
        match served {
            Ok(()) => {
                eprintln!("marktoflow: stopped");
                EXIT_OK
            }
            Err(e) => {
                eprintln!("error: server failed: {e}");
                EXIT_RUN_FAILED
            }
        }
    })
}

fn print_plan(wf: &Workflow, plan: &[crate::engine::plan::PlannedStep], as_json: bool) {
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"workflow": wf.meta.id, "dry_run": true, "steps": plan})
            )
            .unwrap_or_default()
        );
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "Dry run of `{}` ({}): nothing is called.\n",
        wf.meta.id, wf.source.name
    );
    for p in plan {
        let pad = "  ".repeat(p.depth);
        let what = match (&p.action, &p.target, &p.condition) {
            (Some(a), Some(t), _) => format!("{a} → {t}"),
            (Some(a), None, _) => a.clone(),
            (None, _, Some(c)) => format!("{} {c}", p.kind),
            _ => p.kind.to_string(),
        };
        let _ = writeln!(out, "{pad}• {} [{what}]", p.name);
        if let Value::Object(m) = &p.inputs {
            for (k, v) in m {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string_pretty(other).unwrap_or_default(),
                };
                let mut lines = text.lines();
                let first = lines.next().unwrap_or("");
                let _ = writeln!(out, "{pad}    {k}: {first}");
                for l in lines {
                    let _ = writeln!(out, "{pad}      {l}");
                }
            }
        }
        if let Some(v) = &p.output_variable {
            let _ = writeln!(out, "{pad}    → {v}");
        }
    }
}

fn print_result(wf: &Workflow, r: &RunResult, as_json: bool) {
    if let Some(f) = &r.error {
        print_diagnostics(&[f.diagnostic(wf)]);
    }
    if as_json {
        let steps: Vec<Value> = r
            .steps
            .iter()
            .map(|s| json!({"id": s.id, "name": s.name, "status": s.status, "output": s.output, "error": s.error, "duration_ms": s.duration_ms, "retries": s.retries}))
            .collect();
        let error = r.error.as_ref().map(|f| {
            json!({"message": f.message, "step": f.step_id, "file": f.file, "line": f.pos.map(|p| p.line), "column": f.pos.map(|p| p.col)})
        });
        let doc = json!({
            "run_id": r.run_id,
            "workflow": r.workflow,
            "status": r.status,
            "outputs": r.outputs,
            "steps": steps,
            "error": error,
            "duration_ms": r.duration_ms,
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return;
    }
    if r.status == RunStatus::Completed {
        print!("{}", human_outputs(&r.outputs));
    }
}

/// Outputs as readable YAML (strings stay multi-line).
fn human_outputs(v: &Value) -> String {
    match v {
        Value::Object(m) if m.is_empty() => String::new(),
        _ => serde_yaml::to_string(v).unwrap_or_else(|_| format!("{v}\n")),
    }
}

/// Step progress on stderr.
struct Progress {
    style: Style,
    quiet: bool,
    verbose: bool,
    total: std::sync::atomic::AtomicUsize,
    /// A progress bar is drawn in place only on a terminal.
    terminal: bool,
    /// When the bar was last drawn; None while no bar is on screen.
    bar: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Progress {
    fn new(a: &RunArgs) -> Self {
        Progress {
            style: Style::stderr(),
            quiet: a.quiet,
            verbose: a.verbose,
            total: Default::default(),
            terminal: std::io::stderr().is_terminal(),
            bar: Default::default(),
        }
    }

    /// Draws `what done/total` as a bar, at most every 100 ms.
    fn draw_bar(&self, err: &mut impl Write, what: &str, done: u64, total: u64) {
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if bar.is_some_and(|t| now.duration_since(t).as_millis() < 100) && done < total {
            return;
        }
        *bar = Some(now);
        const WIDTH: u64 = 30;
        let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH) as usize;
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        let _ = write!(
            err,
            "\r\x1b[2K    [{}{}] {pct:>3}% {done}/{total} {what}",
            "#".repeat(filled),
            " ".repeat(WIDTH as usize - filled)
        );
        let _ = err.flush();
    }

    /// Removes the bar before other output.
    fn clear_bar(&self, err: &mut impl Write) {
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if bar.take().is_some() {
            let _ = write!(err, "\r\x1b[2K");
        }
    }

    fn event(&self, e: &RunEvent) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        let s = &self.style;
        if let RunEvent::Progress {
            what, done, total, ..
        } = e
        {
            if self.terminal {
                self.draw_bar(&mut err, what, *done, *total);
            } else if self.verbose {
                let _ = writeln!(
                    err,
                    "    │ {} {what}: {done}/{total}",
                    s.paint("2", "debug")
                );
            }
            return;
        }
        self.clear_bar(&mut err);
        match e {
            RunEvent::RunStarted {
                workflow,
                total_steps,
                ..
            } => {
                self.total
                    .store(*total_steps, std::sync::atomic::Ordering::Relaxed);
                let _ = writeln!(err, "{} {workflow}", s.paint("1", "▶ running"));
            }
            RunEvent::StepStarted {
                name,
                depth,
                index,
                detail,
                ..
            } => {
                if self.verbose {
                    let pad = "  ".repeat(*depth + 1);
                    let d = detail
                        .as_deref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default();
                    let counter = if *index > 0 {
                        format!(
                            "[{index}/{}] ",
                            self.total.load(std::sync::atomic::Ordering::Relaxed)
                        )
                    } else {
                        String::new()
                    };
                    let _ = writeln!(err, "{pad}{} {counter}{name}{d}", s.paint("2", "…"));
                }
            }
            RunEvent::Log { level, message, .. } => {
                if *level == LogLevel::Debug && !self.verbose {
                    return;
                }
                let tag = match level {
                    LogLevel::Warn => s.paint("33", "warn"),
                    LogLevel::Error => s.paint("31", "error"),
                    LogLevel::Debug => s.paint("2", "debug"),
                    LogLevel::Info => s.paint("2", "log"),
                };
                for line in message.lines() {
                    let _ = writeln!(err, "    │ {tag} {line}");
                }
            }
            RunEvent::StepRetry {
                id,
                attempt,
                error,
                delay_ms,
            } => {
                let _ = writeln!(
                    err,
                    "    {} `{id}` failed ({error}); retry {attempt} in {delay_ms} ms",
                    s.paint("33", "↻")
                );
            }
            RunEvent::StepFinished {
                name,
                depth,
                status,
                duration_ms,
                output,
                error,
                ..
            } => {
                let pad = "  ".repeat(*depth + 1);
                let (mark, color) = match status {
                    StepStatus::Completed => ("✓", "32"),
                    StepStatus::Failed => ("✗", "31"),
                    StepStatus::Skipped => ("-", "2"),
                };
                let tail = match status {
                    StepStatus::Skipped => "skipped".to_string(),
                    _ => format!("{duration_ms} ms"),
                };
                let _ = writeln!(
                    err,
                    "{pad}{} {name} {}",
                    s.paint(color, mark),
                    s.paint("2", &format!("({tail})"))
                );
                if self.verbose {
                    if let Some(e) = error {
                        let _ = writeln!(err, "{pad}  {e}");
                    } else if !output.is_null() {
                        let text = output.to_string();
                        let shown: String = text.chars().take(300).collect();
                        let more = if text.chars().count() > 300 {
                            " …"
                        } else {
                            ""
                        };
                        let _ = writeln!(err, "{pad}  {} {shown}{more}", s.paint("2", "→"));
                    }
                }
            }
            RunEvent::Checkpoint(_) | RunEvent::Progress { .. } => {}
            RunEvent::RunFinished {
                status,
                duration_ms,
            } => {
                let text = match status {
                    RunStatus::Completed => s.paint("1;32", "✔ completed"),
                    RunStatus::Failed => s.paint("1;31", "✖ failed"),
                    RunStatus::Cancelled => s.paint("1;33", "✖ cancelled"),
                };
                let _ = writeln!(err, "{text} in {duration_ms} ms");
            }
        }
    }
}
