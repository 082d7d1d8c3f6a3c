//! The MCP server: each exposed workflow is a tool. A call runs the
//! workflow as a webhook request does — inputs checked and converted, the
//! server's sandbox and limits, recorded in the run store with trigger
//! `mcp` — and answers with the outputs (`structuredContent` and text) or
//! the positioned failure (`isError`). Run events become progress
//! notifications; a client's cancellation cancels the run.

use super::tools::WorkflowTool;
use crate::engine::{Event, RunEvent, RunResult, RunStatus};
use crate::format::inputs::{self, Supplied};
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
}

impl McpServer {
    pub fn new(state: Arc<ServerState>, tools: Vec<WorkflowTool>) -> Self {
        McpServer {
            state,
            tools: Arc::new(RwLock::new(Arc::new(tools))),
            list_changes: false,
            clients: Arc::default(),
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
        let clients: Vec<Peer<RoleServer>> = {
            let mut c = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            c.retain(|p| !p.is_transport_closed());
            c.clone()
        };
        for peer in clients {
            let _ = peer.notify_tool_list_changed().await;
        }
        true
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
        let supplied = args
            .into_iter()
            .map(|(k, v)| (k, Supplied::Json(v)))
            .collect();
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
        let started = match start_new(&self.state, wf.clone(), inputs, "mcp") {
            Ok(s) => s,
            Err(refused) => return Ok(rejected(refused.to_string())),
        };
        let token = progress_token(ctx);
        let mut result = started.result.clone();
        let mut sent = 0usize;
        let mut progress = Progress::default();
        let outcome: Arc<RunResult> = loop {
            // Whatever happened so far, then the result if there is one, so
            // a quick run still reports its steps.
            let finished = result.borrow().clone();
            if let Some(token) = &token {
                let batch: Vec<Event> = started
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
                break r;
            }
            tokio::select! {
                _ = ctx.ct.cancelled() => {
                    started.cancel.cancel();
                    // The run ends `cancelled` at its next step or await.
                    let _ = tokio::time::timeout(Duration::from_secs(5), result.changed()).await;
                    return Err(McpError::internal_error(format!("run {} cancelled by the client", started.run_id), None));
                }
                _ = tokio::time::timeout(Duration::from_millis(100), result.changed()) => {}
            }
        };
        Ok(answer(&outcome, &wf))
    }
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
                let status = serde_json::to_value(status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
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

/// The client's progress token, when it asked for progress.
fn progress_token(ctx: &RequestContext<RoleServer>) -> Option<ProgressToken> {
    let raw = ctx.meta.get("progressToken")?;
    serde_json::from_value::<NumberOrString>(raw.clone())
        .ok()
        .map(ProgressToken)
}

/// A finished run as a tool result.
fn answer(r: &RunResult, wf: &crate::format::model::Workflow) -> CallToolResult {
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
                "The run waits for a person at step `{step}`{}. {}",
                asked.map(|a| format!(" ({a})")).unwrap_or_default(),
                match &link {
                    Some(l) => format!(
                        "Answer it at {l}, or with `marktoflow answer {} {step}`.",
                        r.run_id
                    ),
                    None => format!("Answer it with `marktoflow answer {} {step}`.", r.run_id),
                }
            );
            let mut res = CallToolResult::structured(json!({
                "run_id": r.run_id,
                "status": "waiting",
                "step": step,
                "title": w.and_then(|w| w.title.clone()),
                "prompt": w.and_then(|w| w.prompt.clone()),
                "fields": w.map(|w| w.fields.clone()),
                "link": link,
            }));
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
                None => (format!("the run ended {:?}", r.status).to_lowercase(), None),
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tool_list()))
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
