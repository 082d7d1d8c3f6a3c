//! MCP servers a workflow uses as tools (`tools.<name>: {sdk: mcp, …}`):
//! their configuration, and the client sessions to them.
//!
//! A server is started on the first call that needs it and kept in
//! [`McpServers`] for the life of the [`Capabilities`] (one `marktoflow run`,
//! or one server process), then stopped by [`McpServers::shutdown`]. A
//! stdio server's process gets only the declared `env` (plus `PATH` and
//! `HOME`, so that `npx`/`uvx` work), never the run's secrets, and runs in
//! its own process group, killed whole when the session ends.
//!
//! [`Capabilities`]: crate::core::action::Capabilities

use crate::core::approval::ApprovalRule;
use crate::core::{
    error::{type_name, ActionError},
    signals::Cancel,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::ServiceExt;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The keys a `sdk: mcp` tool may have besides `sdk`, `description`, `auth`
/// and `options` (they may also be written inside `options`).
pub const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "allowed",
    "timeout",
    "call_timeout",
    "approval",
    "writes",
];

/// How long a server may take to start and answer `initialize`, unless the
/// tool sets `timeout`.
const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one call may wait for its answer, unless the tool sets
/// `call_timeout` (a step's own `timeout` cancels it sooner): a server that
/// never answers cannot hold a run for ever.
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest message a stdio server may send (as rmcp's transport): a
/// longer reply fails the calls waiting on the server instead of being
/// dropped unseen.
const MAX_MESSAGE: usize = 16 << 20;
/// The last part of a stdio server's stderr kept for messages.
const STDERR_TAIL: usize = 2048;

/// How to reach one MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Transport {
    /// A program speaking MCP on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// A declared MCP server, checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerConfig {
    pub transport: Transport,
    /// The only tools the workflow may call, when listed.
    pub allowed: Option<Vec<String>>,
    pub start_timeout: Duration,
    pub call_timeout: Duration,
    /// Which of an agent's calls of its tools wait for a person's approval
    /// (see [`ApprovalRule`]).
    pub approval: Option<ApprovalRule>,
    /// The tools that change things outside the run (a staged run holds
    /// their calls back); None: none is marked.
    pub writes: Option<Vec<String>>,
}

/// A field of a `sdk: mcp` tool that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// The key at fault (`command`, `args`, …); empty when one is missing.
    pub field: &'static str,
    pub message: String,
}

fn config_err(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        message: message.into(),
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn string_map(
    options: &Map<String, Value>,
    field: &'static str,
) -> Result<BTreeMap<String, String>, ConfigError> {
    match options.get(field) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                scalar(v).map(|s| (k.clone(), s)).ok_or_else(|| {
                    config_err(
                        field,
                        format!("`{field}.{k}` must be a string, got {}", type_name(v)),
                    )
                })
            })
            .collect(),
        Some(other) => Err(config_err(
            field,
            format!(
                "`{field}` must be a mapping of names to values, got {}",
                type_name(other)
            ),
        )),
    }
}

fn string_list(
    options: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<Vec<String>>, ConfigError> {
    match options.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                scalar(v).ok_or_else(|| {
                    config_err(
                        field,
                        format!("`{field}` items must be strings, got {}", type_name(v)),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(config_err(
            field,
            format!(
                "`{field}` must be a list of strings, got {}",
                type_name(other)
            ),
        )),
    }
}

impl ServerConfig {
    /// Reads a `sdk: mcp` tool's options (with `${VAR}`s already filled in).
    pub fn from_options(options: &Map<String, Value>) -> Result<ServerConfig, ConfigError> {
        let text = |field: &'static str| match options.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(other) => Err(config_err(
                field,
                format!(
                    "`{field}` must be a non-empty string, got {}",
                    type_name(other)
                ),
            )),
        };
        let transport = match (text("command")?, text("url")?) {
            (Some(_), Some(_)) => {
                return Err(config_err(
                    "url",
                    "give either `command` (a server on stdio) or `url` (Streamable HTTP), not both",
                ))
            }
            (None, None) => {
                return Err(config_err(
                    "",
                    "an MCP tool needs `command:` (a program speaking MCP on stdio, e.g. `npx`) or `url:` (a Streamable HTTP endpoint)",
                ))
            }
            (Some(command), None) => {
                if let Some(field) = ["headers"].into_iter().find(|f| options.contains_key(*f)) {
                    return Err(config_err(
                        field,
                        format!("`{field}` is for servers reached by `url`, not by `command`"),
                    ));
                }
                Transport::Stdio {
                    command,
                    args: string_list(options, "args")?.unwrap_or_default(),
                    env: string_map(options, "env")?,
                    cwd: text("cwd")?,
                }
            }
            (None, Some(url)) => {
                let started_only = ["args", "env", "cwd"];
                if let Some(field) = started_only.into_iter().find(|f| options.contains_key(*f)) {
                    return Err(config_err(
                        field,
                        format!("`{field}` is for servers started by `command`, not reached by `url`"),
                    ));
                }
                match reqwest::Url::parse(&url) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                    _ => {
                        return Err(config_err(
                            "url",
                            format!("`url` must be an http:// or https:// address, got `{url}`"),
                        ))
                    }
                }
                let headers = string_map(options, "headers")?;
                for (k, v) in &headers {
                    if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                        || reqwest::header::HeaderValue::from_str(v).is_err()
                    {
                        return Err(config_err("headers", format!("`headers.{k}` is not a valid HTTP header")));
                    }
                }
                Transport::Http { url, headers }
            }
        };
        Ok(ServerConfig {
            transport,
            allowed: string_list(options, "allowed")?,
            start_timeout: seconds(options, "timeout", DEFAULT_START_TIMEOUT)?,
            call_timeout: seconds(options, "call_timeout", DEFAULT_CALL_TIMEOUT)?,
            approval: match options.get("approval") {
                None => None,
                Some(v) => ApprovalRule::parse(v).map_err(|e| config_err("approval", e))?,
            },
            writes: string_list(options, "writes")?,
        })
    }

    /// Whether the workflow marks tool `name` as one that writes.
    pub fn writes(&self, name: &str) -> bool {
        self.writes
            .as_ref()
            .is_some_and(|list| list.iter().any(|w| w == name))
    }

    /// Whether the workflow may call tool `name` of this server.
    pub fn allows(&self, name: &str) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|list| list.iter().any(|a| a == name))
    }

    /// `npx -y server` or the URL, for messages.
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

/// A duration option of a server: a bare number is seconds, as the other
/// MCP clients write it; else `30s`, `2m`.
fn seconds(
    options: &Map<String, Value>,
    key: &'static str,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match options.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e7)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                config_err(key, format!("`{key}` must be a positive number of seconds"))
            }),
        Some(v) => crate::core::time::parse_duration(v).map_err(|e| config_err(key, e)),
    }
}

/// One connected server.
pub struct Session {
    service: RunningService<RoleClient, ClientConfig>,
    /// Set when a call finds the server gone: the next call starts it again.
    gone: std::sync::atomic::AtomicBool,
    tools: tokio::sync::OnceCell<Vec<Tool>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    described: String,
    call_timeout: Duration,
    /// Told when the server sent a message over [`MAX_MESSAGE`].
    oversized: Arc<Oversized>,
}

/// Whether a server sent a message over [`MAX_MESSAGE`] (its calls then
/// fail at once, saying so).
#[derive(Default)]
struct Oversized {
    seen: std::sync::atomic::AtomicBool,
    told: tokio::sync::Notify,
}

impl Oversized {
    fn seen(&self) -> bool {
        self.seen.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn set(&self) {
        self.seen.store(true, std::sync::atomic::Ordering::SeqCst);
        self.told.notify_waiters();
    }
}

impl Session {
    /// The server's tools (asked once per session).
    pub async fn tools(&self) -> Result<&[Tool], ActionError> {
        self.tools
            .get_or_try_init(|| async {
                self.service
                    .peer()
                    .list_all_tools()
                    .await
                    .map_err(|e| self.failure(format!("listing its tools failed: {e}")))
            })
            .await
            .map(Vec::as_slice)
    }

    /// Calls tool `name`; an error the tool reports is a failed call.
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        cancel: &Cancel,
    ) -> Result<CallToolResult, ActionError> {
        let mut params = CallToolRequestParams::new(name.to_string());
        params.arguments = Some(arguments);
        let too_big = || {
            self.failure(format!(
                "calling `{name}` failed: the server sent a message over {} MiB, more than an MCP message may hold here",
                MAX_MESSAGE >> 20
            ))
        };
        let oversized = self.oversized.told.notified();
        if self.oversized.seen() {
            self.gone.store(true, std::sync::atomic::Ordering::SeqCst);
            return Err(too_big());
        }
        // Dropping the request on cancellation tells the server so.
        tokio::select! {
            _ = oversized => {
                self.gone.store(true, std::sync::atomic::Ordering::SeqCst);
                Err(too_big())
            }
            r = tokio::time::timeout(self.call_timeout, self.service.peer().call_tool(params)) => {
                let Ok(r) = r else {
                    return Err(self.failure(format!(
                        "calling `{name}` got no answer within {} (raise the tool's `call_timeout`)",
                        crate::core::time::human(self.call_timeout)
                    )));
                };
                r.map_err(|e| {
                    if matches!(e, rmcp::ServiceError::TransportClosed) {
                        self.gone.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    if self.oversized.seen() {
                        return too_big();
                    }
                    self.failure(format!("calling `{name}` failed: {e}"))
                })
            }
            _ = cancel.cancelled() => Err(ActionError::Cancelled),
        }
    }

    /// Whether the server has exited or its connection is closed.
    fn is_gone(&self) -> bool {
        self.gone.load(std::sync::atomic::Ordering::SeqCst)
            || self.service.is_closed()
            || self.service.peer().is_transport_closed()
    }

    fn failure(&self, message: String) -> ActionError {
        let tail = stderr_tail(&self.stderr);
        ActionError::failed(format!("MCP server `{}`: {message}{tail}", self.described))
    }
}

fn stderr_tail(buf: &Mutex<Vec<u8>>) -> String {
    let buf = buf.lock().unwrap_or_else(|e| e.into_inner());
    let text = String::from_utf8_lossy(&buf);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("; its stderr ends: {text}")
    }
}

/// A session being started, or started (once, however many calls wait).
type Starting = Arc<tokio::sync::OnceCell<Arc<Session>>>;

/// The servers started so far, by tool name and configuration.
#[derive(Default)]
pub struct McpServers {
    sessions: Mutex<HashMap<(String, ServerConfig), Starting>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.sessions.lock().map(|s| s.len()).unwrap_or(0);
        write!(f, "McpServers({n})")
    }
}

/// What starting a server needs from the run.
pub struct StartContext<'a> {
    /// The run's environment: only `PATH` and `HOME` are taken from it.
    pub env: &'a BTreeMap<String, String>,
    /// Where a relative `cwd` (and the default one) is.
    pub base_dir: &'a std::path::Path,
    pub cancel: &'a Cancel,
}

impl McpServers {
    /// The session to tool `name`'s server, started now if it is not running.
    pub async fn session(
        &self,
        name: &str,
        config: &ServerConfig,
        cx: &StartContext<'_>,
    ) -> Result<Arc<Session>, ActionError> {
        let key = (name.to_string(), config.clone());
        let cell = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let cell = sessions.entry(key.clone()).or_default();
            // A server that exited is started again.
            if cell.get().is_some_and(|s| s.is_gone()) {
                *cell = Default::default();
            }
            cell.clone()
        };
        let start = cell.get_or_try_init(|| async {
            tokio::time::timeout(config.start_timeout, start(config, cx))
                .await
                .unwrap_or_else(|_| {
                    Err(ActionError::failed(format!(
                        "MCP server `{}` did not start within {} (raise the tool's `timeout`)",
                        config.describe(),
                        crate::core::time::human(config.start_timeout)
                    )))
                })
                .map(Arc::new)
        });
        tokio::select! {
            s = start => s.cloned(),
            _ = cx.cancel.cancelled() => Err(ActionError::Cancelled),
        }
    }

    /// Stops every server started (a stdio server's stdin is closed, then it
    /// is signalled, then killed).
    pub async fn shutdown(&self) {
        let cells: Vec<_> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            sessions.drain().map(|(_, c)| c).collect()
        };
        let mut closing = tokio::task::JoinSet::new();
        for cell in cells {
            let Some(session) = cell.get().cloned() else {
                continue;
            };
            drop(cell);
            // Side by side; a session a run still holds ends when it drops it.
            closing.spawn(async move {
                if let Ok(mut s) = Arc::try_unwrap(session) {
                    let _ = s.service.close_with_timeout(Duration::from_secs(5)).await;
                }
            });
        }
        while closing.join_next().await.is_some() {}
    }
}

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("marktoflow", env!("CARGO_PKG_VERSION")),
    )
}

async fn start(config: &ServerConfig, cx: &StartContext<'_>) -> Result<Session, ActionError> {
    let described = config.describe();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let oversized = Arc::new(Oversized::default());
    let failed = |what: String, stderr: &Mutex<Vec<u8>>| {
        ActionError::failed(format!(
            "MCP server `{described}` {what}{}",
            stderr_tail(stderr)
        ))
    };
    let service = match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            use process_wrap::tokio::{CommandWrap, ProcessGroup};
            // `marktoflow` is this very binary, wherever it is installed.
            let program = match command.as_str() {
                "marktoflow" => std::env::current_exe().unwrap_or_else(|_| command.into()),
                _ => command.into(),
            };
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args).env_clear();
            for var in ["PATH", "HOME"] {
                if let Some(v) = cx.env.get(var) {
                    cmd.env(var, v);
                }
            }
            cmd.envs(env);
            cmd.current_dir(match cwd {
                Some(d) => cx.base_dir.join(d),
                None => cx.base_dir.to_path_buf(),
            });
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut wrapped = CommandWrap::from(cmd);
            wrapped.wrap(ProcessGroup::leader());
            let mut child = wrapped
                .spawn()
                .map_err(|e| failed(format!("could not be started: {e}"), &stderr))?;
            let (Some(out), Some(input)) = (child.stdout().take(), child.stdin().take()) else {
                return Err(failed("has no stdin or stdout".into(), &stderr));
            };
            if let Some(err) = child.stderr().take() {
                tokio::spawn(keep_tail(err, stderr.clone()));
            }
            let transport = ChildTransport {
                inner: rmcp::transport::async_rw::AsyncRwTransport::new(
                    Bounded {
                        inner: out,
                        line: 0,
                        oversized: oversized.clone(),
                    },
                    input,
                )
                // Ours says no first, and says so.
                .with_max_line_length(MAX_MESSAGE + 1),
                child: Some(child),
            };
            client_info()
                .serve(transport)
                .await
                .map_err(|e| failed(format!("did not complete the MCP handshake: {e}"), &stderr))?
        }
        Transport::Http { url, headers } => {
            use rmcp::transport::streamable_http_client::{
                StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
            };
            let client = crate::core::net::client_builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| failed(format!("cannot start the HTTP client: {e}"), &stderr))?;
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let mut custom = HashMap::new();
            for (k, v) in headers {
                match (
                    k.eq_ignore_ascii_case("authorization"),
                    v.strip_prefix("Bearer "),
                ) {
                    (true, Some(token)) => config = config.auth_header(token.trim()),
                    _ => {
                        // Checked when the tool was read.
                        if let (Ok(k), Ok(v)) = (
                            reqwest::header::HeaderName::from_bytes(k.as_bytes()),
                            reqwest::header::HeaderValue::from_str(v),
                        ) {
                            custom.insert(k, v);
                        }
                    }
                }
            }
            let transport =
                StreamableHttpClientTransport::with_client(client, config.custom_headers(custom));
            client_info()
                .serve(transport)
                .await
                .map_err(|e| failed(format!("did not complete the MCP handshake: {e}"), &stderr))?
        }
    };
    Ok(Session {
        service,
        gone: Default::default(),
        tools: Default::default(),
        stderr,
        described,
        call_timeout: config.call_timeout,
        oversized,
    })
}

/// A stdio server's stdout, cut off (an error, which closes the session)
/// at a message over [`MAX_MESSAGE`], with `oversized` set to say why.
struct Bounded<R> {
    inner: R,
    /// Bytes of the current line so far.
    line: usize,
    oversized: Arc<Oversized>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Bounded<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = &polled {
            let new = &buf.filled()[before..];
            // The longest line these bytes end or hold, and the one they
            // leave open.
            let mut longest = 0;
            let mut line = self.line;
            for part in new.split_inclusive(|b| *b == b'\n') {
                line += part.len();
                longest = longest.max(line);
                if part.ends_with(b"\n") {
                    line = 0;
                }
            }
            self.line = line;
            if longest > MAX_MESSAGE + 1 {
                self.oversized.set();
                return std::task::Poll::Ready(Err(std::io::Error::other(
                    "the server sent a message over the size limit",
                )));
            }
        }
        polled
    }
}

/// The transport to a stdio server: its process group is killed when the
/// session closes or is dropped.
struct ChildTransport {
    inner: rmcp::transport::async_rw::AsyncRwTransport<
        RoleClient,
        Bounded<tokio::process::ChildStdout>,
        tokio::process::ChildStdin,
    >,
    child: Option<Box<dyn process_wrap::tokio::ChildWrapper>>,
}

impl rmcp::transport::Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleClient>>> + Send
    {
        self.inner.receive()
    }

    /// Closes its stdin, waits a little for it to exit, then kills its group.
    async fn close(&mut self) -> Result<(), Self::Error> {
        let _ = self.inner.close().await;
        if let Some(mut child) = self.child.take() {
            let waited = tokio::time::timeout(Duration::from_secs(3), child.wait()).await;
            if waited.is_err() {
                let _ = Box::into_pin(child.kill()).await;
            }
        }
        Ok(())
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The whole group, and reaped (not left a zombie).
            let _ = child.start_kill();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = Box::into_pin(child.kill()).await;
                });
            }
        }
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes a server writes to stderr.
async fn keep_tail(mut err: tokio::process::ChildStderr, tail: Arc<Mutex<Vec<u8>>>) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    while let Ok(n) = err.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
        t.extend_from_slice(&buf[..n]);
        if t.len() > STDERR_TAIL {
            let cut = t.len() - STDERR_TAIL;
            t.drain(..cut);
        }
    }
}

/// A tool's result as a step's output: its `structuredContent` when it
/// gives one; else its text, parsed when the text is a JSON object or list;
/// else (images, resources) `{content: [...]}`. An error the tool reports
/// is `Err` with its text.
pub fn result_value(r: &CallToolResult) -> Result<Value, String> {
    let text = result_text(r);
    if r.is_error == Some(true) {
        return Err(if text.is_empty() {
            "the tool reported an error".into()
        } else {
            text
        });
    }
    if let Some(v) = &r.structured_content {
        return Ok(v.clone());
    }
    let all_text = r.content.iter().all(|c| c.as_text().is_some());
    if !all_text {
        return Ok(
            serde_json::json!({ "content": serde_json::to_value(&r.content).unwrap_or_default() }),
        );
    }
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            return Ok(v);
        }
    }
    Ok(Value::String(text))
}

/// The text parts of a result, joined by newlines.
pub fn result_text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The argument names tool `tool` declares, when its schema lists them.
pub fn argument_names(tool: &Tool) -> Option<Vec<&str>> {
    tool.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
}

/// The arguments tool `tool` requires.
pub fn required_arguments(tool: &Tool) -> Vec<&str> {
    tool.input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn reads_stdio_and_http_servers() {
        let c = ServerConfig::from_options(&options(json!({
            "command": "npx", "args": ["-y", "server", 3], "env": {"A": "1"}, "allowed": ["read"]
        })))
        .unwrap();
        assert_eq!(c.describe(), "npx -y server 3");
        assert!(c.allows("read") && !c.allows("write"));
        let c = ServerConfig::from_options(&options(json!({
            "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}, "timeout": 5
        })))
        .unwrap();
        assert_eq!(c.start_timeout, Duration::from_secs(5));
        assert!(c.allows("anything"));
    }

    #[test]
    fn names_the_field_at_fault() {
        let field = |v: Value| ServerConfig::from_options(&options(v)).unwrap_err().field;
        assert_eq!(field(json!({})), "");
        assert_eq!(field(json!({"command": "a", "url": "http://x"})), "url");
        assert_eq!(field(json!({"command": "a", "args": "x"})), "args");
        assert_eq!(field(json!({"command": "a", "env": {"A": []}})), "env");
        assert_eq!(field(json!({"url": "ftp://x"})), "url");
        assert_eq!(field(json!({"url": "http://x", "args": []})), "args");
        assert_eq!(
            field(json!({"url": "http://x", "headers": {"bad name": "v"}})),
            "headers"
        );
        assert_eq!(field(json!({"command": "a", "timeout": -1})), "timeout");
        assert_eq!(field(json!({"command": "a", "allowed": [{}]})), "allowed");
    }

    #[test]
    fn results_become_values() {
        let text = |t: &str| CallToolResult::success(vec![rmcp::model::ContentBlock::text(t)]);
        assert_eq!(result_value(&text("hello")), Ok(json!("hello")));
        assert_eq!(result_value(&text("{\"a\": 1}")), Ok(json!({"a": 1})));
        assert_eq!(result_value(&text("[1, 2")), Ok(json!("[1, 2")));
        let structured = CallToolResult::structured(json!({"n": 2}));
        assert_eq!(result_value(&structured), Ok(json!({"n": 2})));
        let err = CallToolResult::error(vec![rmcp::model::ContentBlock::text("no such file")]);
        assert_eq!(result_value(&err), Err("no such file".into()));
    }
}
