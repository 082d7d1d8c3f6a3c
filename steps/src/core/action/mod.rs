//! The `Action` trait: what every step action implements, and what it is
//! given ([`Capabilities`], one [`Call`]); the script runner and the LLM it
//! may call are the [`hosts`].

pub mod hosts;

use crate::core::error::ActionError;
use crate::core::sandbox::Sandbox;
use crate::core::signals::{
    no_progress, Cancel, LogLevel, LogLine, LogSink, Progress, ProgressSink,
};
use crate::core::tool::ToolConfig;
use crate::core::{mcp, net};
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Everything an action may use besides its inputs. Built once per run.
#[derive(Clone)]
pub struct Capabilities {
    pub sandbox: Arc<Sandbox>,
    pub log: LogSink,
    pub progress: ProgressSink,
    pub cancel: Cancel,
    pub scripts: Arc<dyn hosts::ScriptRunner>,
    pub agents: Arc<dyn hosts::Llm>,
    /// Environment variables visible to the run (a snapshot: actions never read
    /// the process environment directly, so tests and servers can set it).
    pub env: Arc<std::collections::BTreeMap<String, String>>,
    /// Hosts `http.*` actions may call (`example.com`, `*.example.com`,
    /// `127.0.0.1:8080`); None allows any host.
    pub allowed_hosts: Option<Arc<Vec<String>>>,
    /// Where default state goes (kb indexes, memory databases): the
    /// project's `.marktoflow/` or the per-user folder.
    pub state: Arc<crate::core::state::StateDir>,
    /// The wall clock: `now()`, `core.datetime`, recency, event times.
    pub clock: Arc<dyn crate::core::time::Clock>,
    /// Open indexes, loaded models and vectors kept between runs.
    pub caches: Arc<crate::core::cache::Caches>,
    /// The MCP servers started for `sdk: mcp` tools; whoever made the
    /// capabilities stops them ([`McpServers::shutdown`]) when done.
    ///
    /// [`McpServers::shutdown`]: crate::core::mcp::McpServers::shutdown
    pub mcp: Arc<crate::core::mcp::McpServers>,
    /// Where agent steps' replies are recorded and recalled (None: not at
    /// all, as for a run that is not recorded).
    pub replies: Option<Arc<dyn hosts::Replies>>,
    /// Decisions about agents' tool calls that need a person (None: such a
    /// call stops the step, see [`crate::core::error::ActionError::NeedsApproval`]).
    pub approvals: Option<Arc<dyn hosts::Approvals>>,
    /// Workflow files an agent step may call as tools (the engine sets it
    /// for each step; None: not here).
    pub workflows: Option<Arc<dyn hosts::Workflows>>,
    /// What the run's model calls spend, and its budget (the engine sets
    /// it; None: not counted).
    pub usage: Option<Arc<dyn hosts::Usage>>,
    /// Where work may go on after its step returns (a server's; None for a
    /// one-off run, whose process ends with it).
    pub background: Option<Arc<crate::core::background::Background>>,
    /// The run's trace (None: not traced), and the step these capabilities
    /// were given to (the engine sets it for each step).
    pub trace: Option<Arc<dyn hosts::Trace>>,
    pub step: Option<Arc<str>>,
}

impl Capabilities {
    /// What every caller chooses (the roots, the state folder, how scripts
    /// and agents run, the environment, the allowed hosts), with the rest as
    /// a fresh process has it: the system clock, empty caches, no MCP server
    /// started, no replies recorded, logs and progress discarded, not
    /// cancelled. Change a field after (`Capabilities { clock, ..new }`).
    pub fn new(
        sandbox: Sandbox,
        state: crate::core::state::StateDir,
        scripts: Arc<dyn hosts::ScriptRunner>,
        agents: Arc<dyn hosts::Llm>,
        env: std::collections::BTreeMap<String, String>,
        allowed_hosts: Option<Vec<String>>,
    ) -> Self {
        Capabilities {
            sandbox: Arc::new(sandbox),
            log: Arc::new(|_| {}),
            progress: no_progress(),
            cancel: Cancel::default(),
            scripts,
            agents,
            env: Arc::new(env),
            allowed_hosts: allowed_hosts.map(Arc::new),
            state: Arc::new(state),
            clock: Arc::new(crate::core::time::SystemClock),
            caches: Default::default(),
            mcp: Default::default(),
            replies: None,
            approvals: None,
            workflows: None,
            usage: None,
            background: None,
            trace: None,
            step: None,
        }
    }

    /// The `traceparent` header for a request the step makes now, when
    /// the run is traced.
    pub fn traceparent(&self) -> Option<String> {
        self.trace.as_ref()?.traceparent(self.step.as_deref()?)
    }
}

/// One call of an action by one step.
pub struct Call<'a> {
    /// Full action name as written, e.g. `agent.run`.
    pub action: &'a str,
    /// The method part after the tool name, e.g. `run`.
    pub method: &'a str,
    /// The tool the action belongs to, when declared in the frontmatter.
    pub tool: Option<&'a ToolConfig>,
    /// Every tool the workflow declares (`${VAR}`s filled in): an agent step
    /// may offer MCP servers among them to its model.
    pub declared: &'a [ToolConfig],
    /// The step's `model:` field.
    pub model: Option<&'a str>,
    /// Step timeout, when one applies.
    pub timeout: Option<Duration>,
    /// Read-only globals a script step sees besides `context` (the peer's
    /// `variables`, `inputs`, `steps`); none for other actions.
    pub globals: Option<&'a serde_json::Map<String, Value>>,
    pub caps: &'a Capabilities,
    /// Sent as `Idempotency-Key` by `http.*` and to LLM providers: the same
    /// for a call made again after a crash or a retry of the same attempt
    /// (`run_id:step_id:attempt`), so a server that honours it acts once.
    pub idempotency_key: Option<&'a str>,
}

impl<'a> Call<'a> {
    /// A call made outside a run (a CLI command, a check before one): no
    /// step, so no model, timeout, globals or idempotency key.
    pub fn outside_a_run(
        action: &'a str,
        method: &'a str,
        tool: Option<&'a ToolConfig>,
        caps: &'a Capabilities,
    ) -> Call<'a> {
        Call {
            action,
            method,
            tool,
            declared: &[],
            model: None,
            timeout: None,
            globals: None,
            caps,
            idempotency_key: None,
        }
    }

    /// A copy to change a field of (`Call { model, ..call.reborrow() }`).
    pub fn reborrow(&self) -> Call<'a> {
        Call {
            action: self.action,
            method: self.method,
            tool: self.tool,
            declared: self.declared,
            model: self.model,
            timeout: self.timeout,
            globals: self.globals,
            caps: self.caps,
            idempotency_key: self.idempotency_key,
        }
    }

    pub fn progress(&self, what: &str, done: usize, total: usize) {
        (self.caps.progress)(Progress {
            what: what.to_string(),
            done: done as u64,
            total: total as u64,
        })
    }

    pub fn log(&self, level: LogLevel, message: impl Into<String>) {
        (self.caps.log)(LogLine {
            level,
            message: message.into(),
        })
    }

    /// Refuses `url` when the run's allowed hosts do not include its host.
    pub fn check_host(&self, url: &reqwest::Url) -> Result<(), ActionError> {
        net::check_host(
            url,
            self.caps.allowed_hosts.as_deref().map(Vec::as_slice),
            self.action,
        )
    }

    /// The session to tool `name`'s MCP server (started on first use), after
    /// checking that a server reached by URL is on the allowed hosts.
    pub async fn mcp_session(
        &self,
        name: &str,
        config: &mcp::ServerConfig,
    ) -> Result<Arc<mcp::Session>, ActionError> {
        if let mcp::Transport::Http { url, .. } = &config.transport {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| ActionError::Input(format!("tool `{name}`: invalid `url`: {e}")))?;
            self.check_host(&parsed)?;
        }
        let cx = mcp::StartContext {
            env: &self.caps.env,
            base_dir: &self.caps.sandbox.absolute("."),
            cancel: &self.caps.cancel,
        };
        self.caps.mcp.session(name, config, &cx).await
    }
}

#[async_trait]
pub trait Action: Send + Sync {
    /// The contract of each method this action answers to.
    fn specs(&self) -> &'static [crate::core::catalog::Spec];
    /// Runs the method with already-rendered inputs and returns its output.
    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError>;
}
