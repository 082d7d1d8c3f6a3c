//! The command line's surface: commands, their arguments and options.

use super::state_dir;
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// Run a workflow pausing before steps: breakpoints, step/next/continue,
    /// print and change variables, see each step's rendered inputs.
    Debug {
        /// Pause before this step (its id; repeatable). Without any, the
        /// run pauses before its first step.
        #[arg(short, long = "break", value_name = "STEP")]
        breaks: Vec<String>,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Parse and check workflow files (or every workflow below a folder) without running them.
    Validate {
        /// Workflow files, or folders (every workflow below them).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Treat warnings (unknown variables, unused inputs, …) as errors.
        #[arg(long)]
        strict: bool,
        /// Also start the MCP servers the workflows declare: list their
        /// tools and check each call's tool and argument names.
        #[arg(long)]
        online: bool,
        /// Check `file.write` paths against these folders, as `run
        /// --allow-write DIR` would allow them (repeatable).
        #[arg(long, value_name = "DIR")]
        allow_write: Vec<PathBuf>,
    },
    /// Run the tests of workflows: each `NAME.test.md` below the folders
    /// (or named) holds cases — inputs, mocks, expectations. No key, no
    /// network: agent, HTTP and program calls must be mocked unless `--live`.
    Test {
        /// Test files, or folders (every `*.test.md` below them).
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
        /// Also write the outcomes as JUnit XML to this file.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Make the agent, HTTP and program calls no mock stands in for.
        #[arg(long)]
        live: bool,
        /// Instead of testing: add a stored run (its id, or the end of it
        /// `history` shows) as a case to its workflow's `NAME.test.md` —
        /// its inputs, what its agent, HTTP and program steps gave as
        /// mocks, its status and outputs as expected.
        #[arg(long, value_name = "RUN")]
        record: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Score a workflow on a dataset: each JSONL line's `inputs` run for
    /// real (models and services called), the outputs scored by the metrics
    /// against the line's `expected`, per case and in total.
    Eval {
        /// The workflow.
        file: PathBuf,
        /// The dataset: one `{"name"?, "inputs": {…}, "expected": {…}}` a line.
        dataset: PathBuf,
        /// `exact:OUTPUT`, `contains:OUTPUT`, `schema:OUTPUT=FILE` or
        /// `expr:CONDITION` (repeatable; at least one).
        #[arg(long = "metric", value_name = "METRIC", required = true)]
        metrics: Vec<String>,
        /// Exit 1 when a metric's share of passing cases is under this (0 to 1).
        #[arg(long, value_name = "SHARE")]
        min: Option<f64>,
        /// Print `{workflow, cases: [{name, status, duration_ms, outputs, error, metrics: {NAME: {pass, why}}}], totals: {NAME: {passed, counted, share}}}`.
        #[arg(long)]
        json: bool,
    },
    /// Run a stored run again offline: its agent, HTTP and program steps
    /// answer as they did, the rest runs as the workflow is now; shows,
    /// step by step, where it does otherwise (exit 1 when it does).
    Replay {
        /// The run: its id, or the end of it `history` shows.
        run_id: String,
        /// Print `{run_id, workflow, same, status, outputs, was_outputs, steps: [{id, same, was, now}]}`.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List the workflows below folders (or the files named): triggers and inputs.
    List {
        /// Folders (every workflow below them) or workflow files.
        #[arg(default_value = ".")]
        paths: Vec<PathBuf>,
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script: `marktoflow completions bash > ~/.local/share/bash-completion/completions/marktoflow`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the JSON Schema of the workflow format (for editors).
    Schema,
    /// Check this machine and project: LLM providers (asked a tiny question), models, the run store, routes.
    Doctor {
        /// Workflow files or folders: also check that they load and list what `serve` would serve.
        paths: Vec<PathBuf>,
        /// Check only this provider: anthropic, openai, ollama, local.
        #[arg(short, long, env = "MARKTOFLOW_AGENT")]
        agent: Option<String>,
        /// The model to ask.
        #[arg(short, long, env = "MARKTOFLOW_MODEL")]
        model: Option<String>,
        /// Ask no cloud provider (the local model still answers).
        #[arg(long)]
        offline: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Start a project: a sample workflow, `.env.example`, the state folder, editor wiring.
    Init {
        /// The project folder (created when missing).
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Write a new workflow from a template (`marktoflow new workflows/digest --template schedule`).
    New {
        /// The new file (`.md` is added when missing); its id and name come from it.
        name: String,
        /// basic, webhook, schedule, rag or agent.
        #[arg(short, long, default_value = "basic", value_parser = ["basic", "webhook", "schedule", "rag", "agent"])]
        template: String,
        /// Replace the file when it exists.
        #[arg(long)]
        force: bool,
    },
    /// List every action with its inputs, or show one (`marktoflow actions kb.search`).
    Actions {
        /// An action, `tool.method`.
        name: Option<String>,
        /// Print the catalog as JSON.
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print the catalog as Markdown tables (`docs/actions.md` is this
        /// output).
        #[arg(long)]
        markdown: bool,
    },
    /// Serve the workflows' webhook triggers over HTTP.
    Serve(ServeArgs),
    /// Execute runs queued in a shared (PostgreSQL) store for the workflows
    /// under PATHS, beside other workers and servers.
    Worker(WorkerArgs),
    /// List the live servers and workers of a shared (PostgreSQL) store.
    Workers {
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Serve workflows as MCP tools over stdio (for Claude Code, Cursor, …).
    Mcp(McpArgs),
    /// List recorded runs, newest first.
    History {
        /// Only runs of this workflow (its id).
        #[arg(long)]
        workflow: Option<String>,
        /// Only runs with this status: queued, running, waiting, completed,
        /// failed, cancelled, rejected.
        #[arg(long)]
        status: Option<String>,
        /// How many runs to list.
        #[arg(short = 'n', long, default_value_t = 20)]
        limit: usize,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show one recorded run: its steps, outputs and errors.
    Show {
        /// The run id (a unique prefix is enough).
        run_id: String,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Run a recorded run again from a top-level step, reusing the outputs of the steps before it.
    Retry {
        /// The run to retry: its id, or the end of it `history` shows.
        run_id: String,
        /// The top-level step to start from (its id); default: where the run stopped.
        #[arg(long, value_name = "STEP")]
        from: Option<String>,
        /// Retry although the workflow file changed since the run: steps are
        /// matched by id, and what changed is said.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        run: ExecArgs,
    },
    /// Answer a run that waits at a `wait` step (a form, an approval):
    /// the answer is checked, recorded once, and the run continues here.
    Answer(AnswerArgs),
    /// Pause a queued or running run before its next top-level step,
    /// whichever process runs it (a server, a worker, another terminal's
    /// `run`); it waits there until `marktoflow resume`.
    Pause {
        /// The run: its id, or the end of it `history` shows.
        run_id: String,
        /// Who pauses it (default: the login name, `$USER`).
        #[arg(long = "as", value_name = "NAME")]
        as_: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Resume a run paused from outside (`marktoflow pause`, `POST
    /// /runs/{id}/pause`, the console's Pause): it continues here from
    /// where it stopped.
    Resume {
        /// The paused run: its id, or the end of it `history` shows.
        run_id: String,
        /// Who resumes it (default: the login name, `$USER`).
        #[arg(long = "as", value_name = "NAME")]
        as_: Option<String>,
        #[command(flatten)]
        exec: ExecArgs,
    },
    /// Delete finished runs older than an age (`30d`, `12h`).
    Prune {
        /// Delete the runs that finished longer ago than this (`30d`,
        /// `12h`, `90m`, `2w`); runs not finished are kept.
        #[arg(long, value_name = "AGE")]
        older_than: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Copy the finished runs of an SQLite store into a shared
    /// (PostgreSQL) one, with their steps; runs already there are skipped.
    CopyHistory {
        /// The SQLite store to read (`runs.db`).
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
        /// The shared store, `postgres://…`.
        #[arg(long, value_name = "URL")]
        to: String,
    },
    /// Print a workflow as a flowchart.
    Graph {
        /// The workflow file (.md).
        file: PathBuf,
        /// mermaid (for Markdown and GitHub), dot (Graphviz), or svg (a picture).
        #[arg(long, default_value = "mermaid", value_parser = ["mermaid", "dot", "svg"])]
        format: String,
    },
    /// The models marktoflow runs itself: the local chat model, the embedding model.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// A knowledge base (a folder of notes): index and embed it up front, or see how far that has got.
    Kb {
        #[command(subcommand)]
        command: KbSubcommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum KbSubcommand {
    /// Index the notes (only what changed), and with `--embed` give every chunk a vector, with progress; Ctrl-C keeps what was done.
    Index {
        /// The knowledge base folder.
        path: PathBuf,
        /// Also embed every chunk without a vector (needs `marktoflow model install all-minilm-l6-v2`).
        #[arg(long)]
        embed: bool,
        /// Rebuild the index from scratch.
        #[arg(long)]
        force: bool,
        /// Keep the index here instead of the state folder (as the step's `index_dir`).
        #[arg(long, value_name = "DIR")]
        index_dir: Option<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// How many notes are indexed and how many chunks have a vector; changes nothing.
    Status {
        /// The knowledge base folder.
        path: PathBuf,
        /// The index's folder, if it was given to `kb index --index-dir`.
        #[arg(long, value_name = "DIR")]
        index_dir: Option<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Fetch models into the models folder (all known ones when none is named); idempotent.
    Install {
        /// `qwen2.5-coder-0.5b` (the local chat model), `all-minilm-l6-v2` (embeddings).
        names: Vec<String>,
    },
    /// Show the installed models.
    List {
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Workflow files or folders (every `.md` below a folder with webhook triggers).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// The address to listen on (a loopback one unless an API token is set).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// 0 picks a free port (the address is printed on stderr).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_body: usize,
    /// How long a synchronous request waits for its run (seconds) before answering 504.
    #[arg(long, default_value_t = 300)]
    pub request_timeout: u64,
    /// Also serve the workflows as MCP tools at `/mcp` (Streamable HTTP).
    #[arg(long)]
    pub mcp: bool,
    /// Clients of `/mcp` must send `Authorization: Bearer $VAR` (required
    /// unless the server listens on a loopback address).
    #[arg(long, value_name = "VAR", requires = "mcp")]
    pub mcp_token_env: Option<String>,
    /// The console (`/console`) and the run API (`/runs`, `/workflows`,
    /// cancel, retry) need `Authorization: Bearer $VAR`; without it they
    /// are served on a loopback address only.
    #[arg(long, value_name = "VAR")]
    pub api_token_env: Option<String>,
    /// A tenant and the variable holding its token (repeatable): a request
    /// carrying `Authorization: Bearer $VAR` is that tenant's, and a
    /// workflow's `tenant: true` input is set to it (webhooks and `/mcp`).
    #[arg(long, value_name = "TENANT=VAR")]
    pub tenant_token: Vec<String>,
    /// Where people reach this server: the start of the links that answer
    /// waiting runs (`https://flows.example.com`); default: the address it
    /// listens on, or `MARKTOFLOW_PUBLIC_URL`.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// The request header a gateway in front sets to the signed-in person
    /// (`X-Forwarded-User`): who answers a wait through the API or console.
    #[arg(long, value_name = "NAME")]
    pub identity_header: Option<String>,
    /// Follow the files: load the workflows again when one is edited, added
    /// or removed. A file that does not load is reported and skipped (the
    /// console lists it with its error); the server keeps running.
    #[arg(long)]
    pub watch: bool,
    /// With a shared (PostgreSQL) store: accept runs and queue them for the
    /// workers (`marktoflow worker`) instead of executing them here.
    #[arg(long)]
    pub no_execute: bool,
    /// Serve in this one process. By default a small supervisor holds the
    /// port and starts the server again at once if it dies of a signal (an
    /// abort, the OOM killer); its runs are resumed.
    #[arg(long)]
    pub no_supervisor: bool,
    #[command(flatten)]
    pub server: ServerOpts,
}

/// What `serve` and `mcp` share: the sandbox, the providers, the limits and
/// the run store of the runs they start.
#[derive(Args, Debug)]
pub struct ServerOpts {
    /// (Fixed for the server's life: nothing in a request widens them.)
    #[command(flatten)]
    pub roots: RootArgs,
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
    #[command(flatten)]
    pub provider: ProviderArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Delete finished runs older than this at start and every hour (`30d`, `12h`).
    #[arg(long, value_name = "AGE")]
    pub retention: Option<String>,
    /// With a shared store: how long a run stays this process's without a
    /// heartbeat; a killed process's runs continue elsewhere after it.
    #[arg(long, value_name = "AGE", default_value = "10s")]
    pub lease: String,
}

impl RunArgs {
    /// A run of `file` as the store recorded it (its inputs come from the
    /// run): what `retry` and `answer` continue.
    pub fn of_file(file: PathBuf, exec: ExecArgs) -> RunArgs {
        RunArgs {
            strict: false,
            file,
            input: Vec::new(),
            inputs_file: None,
            event: None,
            header: Vec::new(),
            from: None,
            only: None,
            var: Vec::new(),
            dry_run: false,
            staged: false,
            budget: None,
            exec,
        }
    }
}

#[derive(Args, Debug)]
pub struct AnswerArgs {
    /// The waiting run: its id, or the end of it `history` shows.
    pub run_id: String,
    /// The step it waits at (default: the one it waits at).
    pub step: Option<String>,
    /// A field's value (repeatable).
    #[arg(short, long = "input", value_name = "NAME=VALUE")]
    pub input: Vec<String>,
    /// Approve (`mode: approval`).
    #[arg(long, conflicts_with = "reject")]
    pub approve: bool,
    /// Reject (`mode: approval`).
    #[arg(long)]
    pub reject: bool,
    /// A comment kept with the decision.
    #[arg(long)]
    pub comment: Option<String>,
    /// Who answers (default: the login name, `$USER`).
    #[arg(long = "as", value_name = "NAME")]
    pub as_: Option<String>,
    #[command(flatten)]
    pub exec: ExecArgs,
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Workflow files or folders: the worker executes queued runs of these
    /// (matched by the version of the workflow the run was accepted with:
    /// its frontmatter and steps, not its prose).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Serve `/health` and `/metrics` on this port (none by default).
    #[arg(long)]
    pub port: Option<u16>,
    /// The address for `--port`.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// `/metrics` needs `Authorization: Bearer $VAR`; without it, it is
    /// served on a loopback address only.
    #[arg(long, value_name = "VAR")]
    pub api_token_env: Option<String>,
    #[command(flatten)]
    pub server: ServerOpts,
}

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Workflow files (each is a tool) or folders (their workflows with a
    /// `type: mcp` trigger are tools).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Follow the files: when a workflow changes, is added or removed, the
    /// tool list changes and clients are told (`tools/list_changed`).
    #[arg(long)]
    pub watch: bool,
    /// Every call is this tenant's: tools' `tenant: true` input is set to
    /// it, and a call naming another tenant is refused.
    #[arg(long, value_name = "TENANT")]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub server: ServerOpts,
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
    /// Run a webhook workflow on a saved request body (a JSON file), as its
    /// trigger would: its `inputMapping` applies, its authentication does
    /// not; the run sees the body as `trigger.body` (`--input` wins).
    #[arg(long, value_name = "FILE")]
    pub event: Option<PathBuf>,
    /// A request header of the `--event`, `NAME=VALUE` or `NAME: VALUE`
    /// (repeatable), as the sender would send it: `X-GitHub-Event=issues`
    /// says which event a GitHub payload is.
    #[arg(
        long = "header",
        short = 'H',
        value_name = "NAME=VALUE",
        requires = "event"
    )]
    pub header: Vec<String>,
    /// Start at this top-level step (its id), the steps before it not run;
    /// give what they would have set with `--var`.
    #[arg(long, value_name = "STEP", conflicts_with = "only")]
    pub from: Option<String>,
    /// Run only this top-level step (its id), with `--var` for what it reads.
    #[arg(long, value_name = "STEP")]
    pub only: Option<String>,
    /// A variable for `--from`/`--only`, `name=value` (repeatable); the value
    /// is JSON when it parses (`hits=[1,2]`, `n=3`), else text.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub var: Vec<String>,
    /// Render every step and show what would be called, calling nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Make every read and model call but hold back the writes (`file.write`,
    /// memory stores, HTTP other than GET/HEAD) and list them at the end;
    /// the run is not recorded.
    #[arg(long, conflicts_with = "dry_run")]
    pub staged: bool,
    /// The most the run's model calls may spend, in tokens (`50000`) or US
    /// dollars (`'$0.50'`), over the file's `budget:`: a request that would
    /// pass it is not made.
    #[arg(long, value_name = "TOKENS|$USD", value_parser = parse_budget)]
    pub budget: Option<BudgetArg>,
    /// Treat authoring warnings as errors: nothing runs when there are any.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub exec: ExecArgs,
}

/// How a run is shown, what it may use and where it is recorded: the
/// options `run` and `retry` share.
#[derive(Args, Debug, Clone)]
pub struct ExecArgs {
    /// Print one JSON object with the outputs, status and every step.
    #[arg(long)]
    pub json: bool,
    /// Show step outputs and debug logs on stderr.
    #[arg(short, long)]
    pub verbose: bool,
    /// Show no progress on stderr (errors still show).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    #[command(flatten)]
    pub provider: ProviderArgs,
    #[command(flatten)]
    pub roots: RootArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Which LLM provider and model agent steps use (`run`, `serve`, `worker`,
/// `mcp`, …).
#[derive(Args, Debug, Clone)]
pub struct ProviderArgs {
    /// Use this LLM provider for every agent tool: anthropic, openai, ollama, local (or any sdk name).
    #[arg(short, long, env = "MARKTOFLOW_AGENT")]
    pub agent: Option<String>,
    /// The model for agent steps that name none (and for every step when --agent switches provider).
    #[arg(short, long, env = "MARKTOFLOW_MODEL")]
    pub model: Option<String>,
}

impl ProviderArgs {
    pub fn overrides(&self) -> marktoflow_steps::agent::AgentOverrides {
        marktoflow_steps::agent::AgentOverrides {
            agent: self.agent.clone(),
            model: self.model.clone(),
        }
    }
}

/// What runs may read, write and call.
#[derive(Args, Debug, Clone)]
pub struct RootArgs {
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
}

/// Where runs are recorded.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// The run store: an SQLite file, or `postgres://…` for a store shared
    /// by many servers and workers; default `runs.db` in the state folder:
    /// the nearest `.marktoflow/` above the workflow (or the current folder
    /// for `history`, `show`, `prune`), else the per-user data folder.
    #[arg(long, value_name = "FILE|URL", env = "MARKTOFLOW_STORE")]
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

    /// `--store` when it names a PostgreSQL store.
    pub fn url(&self) -> Option<&str> {
        self.store
            .as_deref()
            .and_then(Path::to_str)
            .filter(|s| crate::store::postgres::is_url(s))
    }

    /// The opened store, or None with `--no-store`. A store that cannot be
    /// opened is an error: runs must not go unrecorded silently. `shared`
    /// says how this process takes part when the store is PostgreSQL.
    pub fn open_as(
        &self,
        start: &Path,
        shared: crate::store::PgOptions,
    ) -> Result<Option<Arc<dyn crate::store::RunStore>>, crate::store::StoreError> {
        if self.no_store {
            return Ok(None);
        }
        if let Some(url) = self.url() {
            return Ok(Some(Arc::new(crate::store::PgStore::open(url, shared)?)));
        }
        let s = crate::store::SqliteStore::open(&self.path(start))?;
        Ok(Some(Arc::new(s)))
    }

    /// [`StoreArgs::open_as`] for a process that records its own runs.
    pub fn open(
        &self,
        start: &Path,
    ) -> Result<Option<Arc<dyn crate::store::RunStore>>, crate::store::StoreError> {
        self.open_as(start, crate::store::PgOptions::default())
    }

    /// For recording one run: its journal beside the store (see
    /// [`crate::store::journal`]), or None with `--no-store`. A shared
    /// store is written directly.
    pub fn open_journal(
        &self,
        start: &Path,
    ) -> Result<Option<Arc<dyn crate::store::RunStore>>, crate::store::StoreError> {
        if self.no_store {
            return Ok(None);
        }
        if self.url().is_some() {
            return self.open(start);
        }
        let s = crate::store::journal::JournalStore::open(&self.path(start))?;
        Ok(Some(Arc::new(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// `--help` describes every argument of every command (`retry --help`
    /// listed `RUN_ID` and `--older-than` with nothing beside them).
    #[test]
    fn every_argument_has_a_description() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_hide_set() {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() && sub.get_long_about().is_none() {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "marktoflow", &mut missing);
        assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
    }
}

/// `--budget`: tokens, or US dollars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BudgetArg {
    Tokens(u64),
    Usd(f64),
}

fn parse_budget(s: &str) -> Result<BudgetArg, String> {
    let t = s.trim();
    let usd = t
        .strip_prefix('$')
        .or_else(|| t.strip_suffix("usd").map(str::trim_end));
    match usd {
        Some(x) => x
            .parse::<f64>()
            .ok()
            .filter(|x| *x > 0.0 && x.is_finite())
            .map(BudgetArg::Usd)
            .ok_or_else(|| format!("`{s}` is not an amount of US dollars above 0 (like `$0.50`)")),
        None => t
            .parse::<u64>()
            .ok()
            .filter(|n| *n >= 1)
            .map(BudgetArg::Tokens)
            .ok_or_else(|| {
                format!("`{s}` is neither a number of tokens (like `50000`) nor US dollars (like `$0.50`)")
            }),
    }
}
