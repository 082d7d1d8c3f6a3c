//! The MCP server: each exposed workflow is a tool. A call runs the
//! workflow as a webhook request does — inputs checked and converted, the
//! server's sandbox and limits, recorded in the run store with trigger
//! `mcp` — and answers with the outputs (`structuredContent` and text) or
//! the positioned failure (`isError`). Run events become progress
//! notifications; a client's cancellation cancels the run.

use super::elicit;
use super::tools::WorkflowTool;
use crate::engine::{Event, RunEvent, RunResult, RunStatus};
use crate::format::inputs::{self, Supplied};
use crate::serve::tenants::{apply, tenant_input, Caller};
use crate::serve::{start_new, ServerState};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, NumberOrString, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The server: the workflows it offers and the state runs share. Clones
/// (one per HTTP session) share the tool list and the clients to tell when
/// it changes.
#[derive(Clone)]
pub struct McpServer {
    state: Arc<ServerState>,
    tools: Arc<RwLock<Arc<Vec<WorkflowTool>>>>,
    /// Whether the list may change (`--watch`): said to clients, who are
    /// then told of each change.
    list_changes: bool,
    clients: Arc<Mutex<Vec<Peer<RoleServer>>>>,
    /// Over stdio: the one tenant every call is for (`mcp --tenant`).
    tenant: Option<String>,
}

/// Marks an `/mcp` request that carried the MCP token (`--mcp-token-env`):
/// the operator's, who may name any tenant.
#[derive(Debug, Clone, Copy)]
pub struct McpOperator;

impl McpServer {
    pub fn new(state: Arc<ServerState>, tools: Vec<WorkflowTool>) -> Self {
        McpServer {
            state,
            tools: Arc::new(RwLock::new(Arc::new(tools))),
            list_changes: false,
            clients: Arc::default(),
            tenant: None,
        }
    }

    /// Every call is for `tenant`: its tools' tenant input is set to it,
    /// and calls naming another are refused (`marktoflow mcp --tenant`).
    pub fn for_tenant(mut self, tenant: Option<String>) -> Self {
        self.tenant = tenant;
        self
    }

    /// The tokens that grant tenants, as the server was given them.
    pub fn tenants(&self) -> &crate::serve::tenants::Tenants {
        &self.state.tenants
    }

    /// Who makes a call: the stdio session's tenant, else the tenant an
    /// HTTP request's token grants; and whether it is the operator's.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> (Caller, bool) {
        if let Some(t) = &self.tenant {
            return (Caller::Tenant(t.clone()), false);
        }
        match ctx.extensions.get::<axum::http::request::Parts>() {
            Some(parts) => (
                self.state.tenants.caller(&parts.headers),
                parts.extensions.get::<McpOperator>().is_some(),
            ),
            // Over stdio the one client is whoever started the server.
            None => (Caller::Open, true),
        }
    }

    /// A server whose list follows the files: [`McpServer::replace_tools`].
    pub fn watching(mut self) -> Self {
        self.list_changes = true;
        self
    }

    fn tools(&self) -> Arc<Vec<WorkflowTool>> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Offers `tools` from now on (calls already running finish with the
    /// workflow they started with) and tells every client the list changed,
    /// when it did.
    pub async fn replace_tools(&self, tools: Vec<WorkflowTool>) -> bool {
        let changed = self.swap_tools(tools);
        if changed {
            self.tell_list_changed().await;
        }
        changed
    }

    /// Offers `tools` from now on; whether the list changed (clients are
    /// not told: [`McpServer::tell_list_changed`]).
    pub fn swap_tools(&self, tools: Vec<WorkflowTool>) -> bool {
        let same = |a: &[WorkflowTool], b: &[WorkflowTool]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| {
                    x.name == y.name
                        && x.description == y.description
                        && x.input_schema == y.input_schema
                        && x.output_schema == y.output_schema
                        && x.workflow.source.text == y.workflow.source.text
                })
        };
        {
            let mut current = self.tools.write().unwrap_or_else(|e| e.into_inner());
            if same(&current, &tools) {
                return false;
            }
            *current = Arc::new(tools);
        }
        true
    }

    /// Tells every client the tool list changed.
    pub async fn tell_list_changed(&self) {
        let clients: Vec<Peer<RoleServer>> = {
            let mut c = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            c.retain(|p| !p.is_transport_closed());
            c.clone()
        };
        for peer in clients {
            let _ = peer.notify_tool_list_changed().await;
        }
    }

    /// The tools as MCP describes them.
    pub fn tool_list(&self) -> Vec<Tool> {
        self.tools()
            .iter()
            .map(|t| {
                let tool = Tool::new(
                    t.name.clone(),
                    t.description.clone(),
                    Arc::new(t.input_schema.clone()),
                )
                .with_title(t.workflow.meta.name.clone());
                match &t.output_schema {
                    Some(o) => tool.with_raw_output_schema(Arc::new(o.clone())),
                    None => tool,
                }
            })
            .collect()
    }

    async fn call(
        &self,
        name: &str,
        args: Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let tools = self.tools();
        let Some(tool) = tools.iter().find(|t| t.name == name) else {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            let hint = match crate::diag::did_you_mean(name, &names) {
                Some(c) => format!("did you mean `{c}`?"),
                None => format!("tools: {}", names.join(", ")),
            };
            return Err(McpError::invalid_params(
                format!("no tool `{name}`; {hint}"),
                None,
            ));
        };
        let wf = tool.workflow.clone();
        let mut supplied = args
            .into_iter()
            .map(|(k, v)| (k, Supplied::Json(v)))
            .collect();
        let (caller, operator) = self.caller(ctx);
        if matches!(caller, Caller::Tenant(_)) && tenant_input(&wf).is_none() {
            return Ok(rejected(format!(
                "tool `{name}` does not keep tenants apart: a tenant's token cannot call it"
            )));
        }
        if let Err(refused) = apply(&wf, &self.state.tenants, &caller, operator, &mut supplied) {
            return Ok(rejected(refused.to_string()));
        }
        let inputs = match inputs::resolve(&wf, supplied, &self.state.caps.env) {
            Ok(i) => i,
            Err(errors) => {
                // Each with its hint: a "did you mean", or how to pass it.
                let msgs: Vec<String> = errors
                    .iter()
                    .map(|e| {
                        let hint = match &e.missing {
                            Some(m) => Some(format!("pass the argument `{}` ({})", e.name, m.ty)),
                            None => e.hint.clone(),
                        };
                        match hint {
                            Some(h) => format!("{e} ({h})"),
                            None => e.to_string(),
                        }
                    })
                    .collect();
                return Ok(rejected(msgs.join("; ")));
            }
        };
        let started = match start_new(
            &self.state,
            wf.clone(),
            inputs,
            crate::engine::RunTrigger::Mcp,
        ) {
            Ok(s) => s,
            Err(refused) => return Ok(rejected(refused.to_string())),
        };
        let mut run = Following::of(started);
        let mut asked = 0;
        let mut problem: Option<String> = None;
        loop {
            let outcome = self.follow(&run, ctx).await?;
            let Some(w) = outcome.waiting.as_ref().filter(|_| {
                outcome.status == RunStatus::Waiting && asked < MAX_ASKS && can_elicit(&ctx.peer)
            }) else {
                return Ok(answer(&outcome, &wf, problem.as_deref()));
            };
            // The client that called the tool asked for the run: it is not
            // asked to approve it where the step wants someone else.
            let by = self.identity(ctx);
            let not_theirs = w.mode == crate::format::model::AskMode::Approval
                && (!w.self_approval || (!w.approvers.is_empty() && !w.approvers.contains(&by)));
            let params = elicit::request(w, problem.as_deref()).filter(|_| !not_theirs);
            let Some(params) = params else {
                return Ok(answer(&outcome, &wf, None));
            };
            asked += 1;
            let replied = tokio::select! {
                r = ctx.peer.create_elicitation(params) => r,
                _ = ctx.ct.cancelled() => return Ok(answer(&outcome, &wf, None)),
            };
            let given = match replied.map(elicit::reply) {
                Ok(elicit::Reply::Answer(given)) => given,
                // Declined, dismissed, or the client could not ask: the
                // run waits for the link, the console or the CLI.
                Ok(elicit::Reply::NotNow) | Err(_) => return Ok(answer(&outcome, &wf, None)),
            };
            let at = (outcome.run_id.as_str(), w.step_id.as_str());
            let taken = crate::serve::answer_from(&self.state, at, given, by, "mcp").await;
            match taken {
                Ok(v) if v["status"] == "resumed" => {
                    problem = None;
                    match Following::resumed(&self.state, &outcome.run_id) {
                        Some(next) => run = next,
                        // On a shared store a worker goes on with it.
                        None => return Ok(resumed_elsewhere(&outcome.run_id)),
                    }
                }
                // Counted (more approvals needed) or refused: the run waits.
                Ok(v) => {
                    let need = v["needed"].as_u64().unwrap_or(0);
                    let have = v["approvals"].as_u64().unwrap_or(0);
                    let note = format!("your approval is counted: {have} of {need}");
                    return Ok(answer(&outcome, &wf, Some(&note)));
                }
                // A value the step does not take: asked again, with why.
                Err(n) if n.0 == axum::http::StatusCode::UNPROCESSABLE_ENTITY => {
                    problem = Some(n.message());
                }
                Err(n) => return Ok(answer(&outcome, &wf, Some(&n.message()))),
            }
        }
    }

    /// Who answers through this client: the gateway's identity header on
    /// `serve --mcp` when the server names one, else `mcp`.
    fn identity(&self, ctx: &RequestContext<RoleServer>) -> String {
        let header = self.state.api.identity_header.as_deref();
        header
            .and_then(|h| {
                let parts = ctx.extensions.get::<axum::http::request::Parts>()?;
                parts.headers.get(h)?.to_str().ok()
            })
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .unwrap_or("mcp")
            .to_string()
    }

    /// Waits for `run` to end, telling the client of each top-level step
    /// when it asked for progress; the client's cancellation cancels it.
    async fn follow(
        &self,
        run: &Following,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Arc<RunResult>, McpError> {
        let token = progress_token(ctx);
        let mut result = run.result.clone();
        let mut sent = 0usize;
        let mut progress = Progress::default();
        loop {
            // Whatever happened so far, then the result if there is one, so
            // a quick run still reports its steps.
            let finished = result.borrow().clone();
            if let Some(token) = &token {
                let batch: Vec<Event> = run
                    .events
                    .lock()
                    .map(|e| e[sent.min(e.len())..].to_vec())
                    .unwrap_or_default();
                sent += batch.len();
                for e in batch {
                    if let Some(p) = progress.step(&e) {
                        let _ = ctx.peer.notify_progress(p.into_param(token.clone())).await;
                    }
                }
            }
            if let Some(r) = finished {
                return Ok(r);
            }
            tokio::select! {
                _ = ctx.ct.cancelled() => {
                    run.cancel.cancel();
                    // The run ends `cancelled` at its next step or await.
                    let _ = tokio::time::timeout(Duration::from_secs(5), result.changed()).await;
                    return Err(McpError::internal_error(format!("run {} cancelled by the client", run.run_id), None));
                }
                _ = tokio::time::timeout(Duration::from_millis(100), result.changed()) => {}
            }
        }
    }
}

/// How many times one call asks its user (waits in a row, or a reply asked
/// again because a value was not taken).
const MAX_ASKS: usize = 8;

/// Whether the client said it can show a form.
fn can_elicit(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&rmcp::service::ElicitationMode::Form)
}

/// A run this call waits for: its result, its events and how to cancel it.
struct Following {
    run_id: String,
    result: tokio::sync::watch::Receiver<Option<Arc<RunResult>>>,
    events: Arc<Mutex<Vec<Event>>>,
    cancel: marktoflow_steps::core::signals::Cancel,
}

impl Following {
    fn of(s: crate::serve::Started) -> Self {
        Following {
            run_id: s.run_id,
            result: s.result,
            events: s.events,
            cancel: s.cancel,
        }
    }

    /// The run again, once an answer resumed it in this process (None: it
    /// did not start again here: a worker, or the next start, goes on).
    fn resumed(state: &ServerState, run_id: &str) -> Option<Self> {
        state
            .started(run_id)
            .filter(|s| s.result.borrow().is_none())
            .map(Self::of)
    }
}

/// An answered run that goes on elsewhere: a worker of the shared store,
/// or this server's next start when it could not start it now.
fn resumed_elsewhere(run_id: &str) -> CallToolResult {
    let text = format!(
        "Answered. The run goes on elsewhere (a worker, or the server's next start); see `marktoflow show {run_id}` for its outputs."
    );
    let mut res = CallToolResult::structured(json!({"run_id": run_id, "status": "resumed"}));
    res.content = vec![ContentBlock::text(text)];
    res
}

/// Top-level steps as units of progress.
#[derive(Default)]
struct Progress {
    total: usize,
    done: usize,
}

/// One progress notification's numbers and message.
struct Tick {
    done: usize,
    total: usize,
    message: String,
}

impl Tick {
    fn into_param(self, token: ProgressToken) -> ProgressNotificationParam {
        let p = ProgressNotificationParam::new(token, self.done as f64).with_message(self.message);
        if self.total > 0 {
            p.with_total(self.total as f64)
        } else {
            p
        }
    }
}

impl Progress {
    /// The notification an event makes, if any: a top-level step ending.
    fn step(&mut self, e: &Event) -> Option<Tick> {
        match &e.kind {
            RunEvent::RunStarted { total_steps, .. } => {
                self.total = *total_steps;
                None
            }
            RunEvent::StepFinished {
                name,
                depth: 0,
                status,
                ..
            } => {
                self.done += 1;
                let status = status.as_str();
                Some(Tick {
                    done: self.done,
                    total: self.total,
                    message: format!("{name}: {status}"),
                })
            }
            _ => None,
        }
    }
}

/// A call the server did not run (its arguments do not fit the inputs, or
/// the server is full or stopping).
fn rejected(message: String) -> CallToolResult {
    let mut res = CallToolResult::structured_error(json!({
        "status": "rejected",
        "error": {"message": message},
    }));
    res.content = vec![ContentBlock::text(message)];
    res
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The client's progress token, when it asked for progress.
fn progress_token(ctx: &RequestContext<RoleServer>) -> Option<ProgressToken> {
    let raw = ctx.meta.get("progressToken")?;
    serde_json::from_value::<NumberOrString>(raw.clone())
        .ok()
        .map(ProgressToken)
}

/// A finished run as a tool result; `note` says what became of the user's
/// answer to a wait it still waits at.
fn answer(
    r: &RunResult,
    wf: &crate::format::model::Workflow,
    note: Option<&str>,
) -> CallToolResult {
    match r.status {
        RunStatus::Completed => {
            let outputs = match &r.outputs {
                Value::Object(_) => r.outputs.clone(),
                other => json!({ "result": other }),
            };
            let text = serde_yaml::to_string(&outputs).unwrap_or_else(|_| outputs.to_string());
            let mut res = CallToolResult::structured(outputs);
            res.content = vec![ContentBlock::text(text)];
            res
        }
        // Not an error: the run goes on once a person answers (the link,
        // or `marktoflow answer`); the client may tell its user.
        RunStatus::Waiting => {
            let w = r.waiting.as_ref();
            let step = w.map(|w| w.step_id.clone()).unwrap_or_default();
            let asked = w.and_then(|w| w.title.clone().or(w.prompt.clone()));
            let link = w.and_then(|w| w.link.clone());
            let text = format!(
                "{}The run waits for a person at step `{step}`{}. {}",
                note.map(|n| format!("{}. ", capitalized(n)))
                    .unwrap_or_default(),
                asked.map(|a| format!(" ({a})")).unwrap_or_default(),
                match &link {
                    Some(l) => format!(
                        "Answer it at {l}, or with `marktoflow answer {} {step}`.",
                        r.run_id
                    ),
                    None => format!("Answer it with `marktoflow answer {} {step}`.", r.run_id),
                }
            );
            let mut shown = json!({
                "run_id": r.run_id,
                "status": "waiting",
                "step": step,
                "title": w.and_then(|w| w.title.clone()),
                "prompt": w.and_then(|w| w.prompt.clone()),
                "fields": w.map(|w| w.fields.clone()),
                "link": link,
            });
            if let Some(n) = note {
                shown["note"] = json!(n);
            }
            let mut res = CallToolResult::structured(shown);
            res.content = vec![ContentBlock::text(text)];
            res
        }
        _ => {
            let (message, place) = match &r.error {
                Some(f) => {
                    let d = f.diagnostic(wf);
                    (
                        d.to_string(),
                        d.pos.map(|p| json!({"line": p.line, "col": p.col})),
                    )
                }
                None => (format!("the run ended {}", r.status.as_str()), None),
            };
            let mut res = CallToolResult::structured_error(json!({
                "run_id": r.run_id,
                "status": r.status,
                "error": {"message": message, "file": wf.source.path.display().to_string(), "at": place},
            }));
            res.content = vec![ContentBlock::text(message)];
            res
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder().enable_tools();
        let caps = if self.list_changes {
            caps.enable_tool_list_changed().build()
        } else {
            caps.build()
        };
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("marktoflow", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Each tool runs a marktoflow workflow with the given inputs and returns its outputs.",
            )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.list_changes {
            let mut c = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            c.retain(|p| !p.is_transport_closed());
            c.push(context.peer);
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut list = self.tool_list();
        // A tenant is offered the tools that keep tenants apart, no others.
        if let (Caller::Tenant(_), _) = self.caller(&context) {
            let tools = self.tools();
            list.retain(|t| {
                tools
                    .iter()
                    .any(|w| w.name == t.name && tenant_input(&w.workflow).is_some())
            });
        }
        Ok(ListToolsResult::with_all_items(list))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        self.call(&request.name, args, &context)
            .await
            .map(Into::into)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_list().into_iter().find(|t| t.name == name)
    }
}
