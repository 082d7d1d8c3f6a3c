//! `script.execute`: JavaScript in boa, isolated in worker processes.
//!
//! Why processes: boa cannot be interrupted from outside (no interrupt hook),
//! so an endless loop could only be stopped by killing whatever runs it, and
//! a huge allocation aborts the process it happens in. Each script therefore
//! runs in a child process — the host binary started as `<exe> __script-worker`,
//! which calls [`worker_main`] — with an address-space limit; on timeout or
//! cancellation the host SIGKILLs the child and carries on. Idle workers are
//! kept in a small pool and reused, with a fresh boa `Context` per script, so
//! no state leaks from one script to the next.
//!
//! Protocol: one JSON object per line over the child's stdin (the request:
//! code, context, sandbox, limits) and stdout (zero or more log lines, then
//! the result or the error). See `protocol.rs`.
//!
//! What scripts see: `context` (JSON from the caller), `console.*` (streamed
//! back as log lines), the standard builtins, timers (`setTimeout` & co.),
//! and `require()` of `fs`, `fs/promises` and `path` (also `node:`-prefixed),
//! all confined to the run's [`Sandbox`]. There is no `process`, no network
//! and no child processes. `fs` has no `Buffer`: reads return strings.

pub mod external;
mod fast;
mod fs;
mod inspect;
pub mod intl;
mod js;
mod legacy_date;
mod path;
mod protocol;
mod runtime;
mod worker;

pub use runtime::syntax_error;
pub use worker::worker_main;

use crate::core::{
    action::{Action, Call},
    args::Args,
    error::ActionError,
    signals::{Cancel, LogLine},
};
use async_trait::async_trait;
use protocol::{EngineLimits, Failure, Reply, Request};
use serde_json::Value;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The argument that makes the host binary act as a script worker.
pub const WORKER_ARG: &str = "__script-worker";

/// Limits applied to every script of a [`ScriptHost`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptLimits {
    /// Used when the job gives no timeout (default 30 s).
    pub timeout: Duration,
    /// Address-space cap of each worker process (`RLIMIT_AS`); `None` = no cap.
    pub memory_bytes: Option<u64>,
    /// Maximum depth of nested calls before a `RangeError`-like failure.
    pub recursion: usize,
    /// Maximum number of values on boa's VM stack.
    pub stack_size: usize,
    /// Idle workers kept for reuse.
    pub max_idle_workers: usize,
    /// A worker is retired after this many scripts (bounds slow leaks).
    pub jobs_per_worker: usize,
}

impl Default for ScriptLimits {
    fn default() -> Self {
        ScriptLimits {
            timeout: Duration::from_secs(30),
            memory_bytes: Some(2 << 30),
            recursion: 10_000,
            stack_size: 1 << 20,
            max_idle_workers: 2,
            jobs_per_worker: 1000,
        }
    }
}

pub use crate::core::action::hosts::{ScriptError, ScriptJob};

impl From<Failure> for ScriptError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Compile {
                message,
                line,
                column,
            } => ScriptError::Compile {
                message,
                line,
                column,
            },
            Failure::Thrown { message } => ScriptError::Thrown(message),
            Failure::Internal { message } => ScriptError::Internal(message),
        }
    }
}

/// Bytes of a worker's stderr kept, and characters of it shown in errors.
const STDERR_TAIL: usize = 16384;
const STDERR_SHOWN: usize = 2000;
/// What Rust's default allocation-error handler prints before aborting.
const OOM_MARK: &[u8] = b"memory allocation of ";

/// A running worker process.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    /// Set when the worker printed Rust's allocation-failure message.
    out_of_memory: Arc<AtomicBool>,
    stderr_task: tokio::task::JoinHandle<()>,
    jobs: usize,
}

impl Worker {
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// Explains an unexpected exit, once the process is gone.
    async fn death(mut self, memory: Option<u64>) -> ScriptError {
        let status = self.child.wait().await;
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut self.stderr_task).await;
        let tail = {
            let t = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
            String::from_utf8_lossy(&t.iter().copied().collect::<Vec<u8>>()).into_owned()
        };
        if let Some(limit) = memory {
            if self.out_of_memory.load(Ordering::SeqCst) {
                return ScriptError::MemoryLimit(limit);
            }
        }
        let status = match status {
            Ok(s) => s.to_string(),
            Err(e) => format!("unknown exit status ({e})"),
        };
        let mut msg = status;
        if tail.contains("has overflowed its stack") {
            msg.push_str("; native stack overflow (too deeply nested code or data)");
        }
        let tail = tail.trim();
        let tail = match tail.char_indices().rev().nth(STDERR_SHOWN) {
            Some((i, _)) => &tail[i..],
            None => tail,
        };
        if !tail.is_empty() {
            msg.push_str("; stderr: ");
            msg.push_str(tail);
        }
        ScriptError::WorkerDied(msg)
    }
}

/// Runs scripts in a pool of worker processes.
pub struct ScriptHost {
    /// The executable started as `<worker_exe> __script-worker`.
    pub worker_exe: PathBuf,
    limits: ScriptLimits,
    idle: Mutex<Vec<Worker>>,
}

#[async_trait]
impl crate::core::action::hosts::ScriptRunner for ScriptHost {
    async fn run(
        &self,
        job: ScriptJob,
        log: &(dyn Fn(LogLine) + Send + Sync),
        cancel: &Cancel,
    ) -> Result<Value, ScriptError> {
        ScriptHost::run(self, job, log, cancel).await
    }
}

impl ScriptHost {
    pub fn new(worker_exe: PathBuf) -> Self {
        ScriptHost::with_limits(worker_exe, ScriptLimits::default())
    }

    pub fn with_limits(worker_exe: PathBuf, limits: ScriptLimits) -> Self {
        ScriptHost {
            worker_exe,
            limits,
            idle: Mutex::new(Vec::new()),
        }
    }

    pub fn limits(&self) -> &ScriptLimits {
        &self.limits
    }

    /// Number of idle workers in the pool.
    pub fn idle_workers(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn spawn(&self) -> Result<Worker, ScriptError> {
        let mut cmd = Command::new(&self.worker_exe);
        cmd.arg(WORKER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Keep a crash's stderr short (the allocation-failure line matters).
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            // The default locale of `Intl`, as Node would take it.
            .envs(intl::default_locale_env())
            // Own process group: a terminal's Ctrl-C goes to the runner, which
            // cancels scripts itself, not straight to the workers.
            .process_group(0);
        let memory = self.limits.memory_bytes;
        // SAFETY: only async-signal-safe calls (setrlimit, prctl) between
        // fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(bytes) = memory {
                    let lim = libc::rlimit {
                        rlim_cur: bytes as libc::rlim_t,
                        rlim_max: bytes as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                let no_core = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                #[cfg(target_os = "linux")]
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| ScriptError::Spawn(format!("{}: {e}", self.worker_exe.display())))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut stderr = child.stderr.take().expect("piped stderr");
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
        let tail2 = tail.clone();
        let oom = Arc::new(AtomicBool::new(false));
        let oom2 = oom.clone();
        let stderr_task = tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut t = tail2.lock().unwrap_or_else(|e| e.into_inner());
                t.extend(&buf[..n]);
                // Look for the marker in the new bytes (and just before them,
                // in case it straddles two reads).
                let from = t.len().saturating_sub(n + OOM_MARK.len());
                let recent: Vec<u8> = t.range(from..).copied().collect();
                if recent.windows(OOM_MARK.len()).any(|w| w == OOM_MARK) {
                    oom2.store(true, Ordering::SeqCst);
                }
                let excess = t.len().saturating_sub(STDERR_TAIL);
                t.drain(..excess);
            }
        });
        Ok(Worker {
            child,
            stdin,
            stdout,
            stderr_tail: tail,
            out_of_memory: oom,
            stderr_task,
            jobs: 0,
        })
    }

    /// An idle live worker, or a new one.
    fn checkout(&self) -> Result<(Worker, bool), ScriptError> {
        loop {
            let w = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match w {
                Some(mut w) => {
                    if w.alive() {
                        return Ok((w, true));
                    }
                    // dead while idle: dropped (and reaped by tokio)
                }
                None => return Ok((self.spawn()?, false)),
            }
        }
    }

    fn checkin(&self, mut w: Worker) {
        w.jobs += 1;
        if w.jobs >= self.limits.jobs_per_worker {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.limits.max_idle_workers {
            idle.push(w);
        }
    }

    /// Runs one script; `log` receives its console lines as they are printed.
    /// Dropping the returned future kills the worker running it.
    pub async fn run(
        &self,
        job: ScriptJob,
        log: &(dyn Fn(LogLine) + Send + Sync),
        cancel: &Cancel,
    ) -> Result<Value, ScriptError> {
        if cancel.is_cancelled() {
            return Err(ScriptError::Cancelled);
        }
        let timeout = job.timeout.unwrap_or(self.limits.timeout);
        let req = Request {
            code: job.code,
            context: job.context,
            globals: job.globals,
            sandbox: job.sandbox,
            limits: EngineLimits {
                recursion: self.limits.recursion,
                stack_size: self.limits.stack_size,
            },
        };
        let mut line = serde_json::to_string(&req)
            .map_err(|e| ScriptError::Internal(format!("cannot encode the script request: {e}")))?;
        line.push('\n');

        // A pooled worker may have died while idle (its pipe is then closed):
        // retry once with a fresh one.
        let (mut worker, reused) = self.checkout()?;
        if let Err(e) = send(&mut worker, &line).await {
            if !reused {
                return Err(worker_gone(worker, e, self.limits.memory_bytes).await);
            }
            drop(worker);
            worker = self.spawn()?;
            if let Err(e) = send(&mut worker, &line).await {
                return Err(worker_gone(worker, e, self.limits.memory_bytes).await);
            }
        }

        let deadline = tokio::time::Instant::now() + timeout;
        let mut buf = String::new();
        enum Event {
            Line(std::io::Result<usize>),
            Timeout,
            Cancel,
        }
        loop {
            buf.clear();
            // One reply (or log line) at most MAX_REPLY_BYTES: a script
            // returning more must not take the run's memory with it.
            let mut bounded = (&mut worker.stdout).take(MAX_REPLY_BYTES as u64 + 1);
            let ev = tokio::select! {
                r = bounded.read_line(&mut buf) => Event::Line(r),
                _ = tokio::time::sleep_until(deadline) => Event::Timeout,
                _ = cancel.cancelled() => Event::Cancel,
            };
            match ev {
                Event::Timeout => {
                    worker.kill().await;
                    return Err(ScriptError::Timeout(timeout));
                }
                Event::Cancel => {
                    worker.kill().await;
                    return Err(ScriptError::Cancelled);
                }
                Event::Line(Ok(0)) | Event::Line(Err(_)) => {
                    return Err(worker.death(self.limits.memory_bytes).await);
                }
                Event::Line(Ok(_)) => {}
            }
            if buf.len() > MAX_REPLY_BYTES {
                worker.kill().await;
                return Err(ScriptError::TooLarge(MAX_REPLY_BYTES));
            }
            let reply: Reply = match serde_json::from_str(buf.trim_end()) {
                Ok(r) => r,
                Err(e) => {
                    worker.kill().await;
                    return Err(ScriptError::Internal(format!(
                        "unreadable reply from the script worker ({e}): {}",
                        buf.chars().take(200).collect::<String>()
                    )));
                }
            };
            match reply {
                Reply::Log { level, msg } => log(LogLine {
                    level,
                    message: msg,
                }),
                Reply::Ok { value } => {
                    self.checkin(worker);
                    return Ok(value);
                }
                Reply::Err(f) => {
                    if matches!(f, Failure::Internal { .. }) {
                        worker.kill().await;
                    } else {
                        self.checkin(worker);
                    }
                    return Err(f.into());
                }
            }
        }
    }
}

/// The most a script may return (its value as JSON), or log in one line.
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

async fn send(w: &mut Worker, line: &str) -> std::io::Result<()> {
    w.stdin.write_all(line.as_bytes()).await?;
    w.stdin.flush().await
}

async fn worker_gone(w: Worker, e: std::io::Error, memory: Option<u64>) -> ScriptError {
    match w.death(memory).await {
        ScriptError::WorkerDied(msg) => {
            ScriptError::WorkerDied(format!("cannot send it the script ({e}); {msg}"))
        }
        other => other,
    }
}

/// `script.execute` / `script.run`.
pub struct ScriptAction;

/// `inputs.timeout` in milliseconds (a number or a numeric string).
fn timeout_input(a: &Args) -> Result<Option<Duration>, ActionError> {
    let Some(ms) = a.positive("timeout")? else {
        return Ok(None);
    };
    crate::core::time::from_secs(ms / 1000.0)
        .map(Some)
        .ok_or_else(|| a.invalid("timeout", "is too long"))
}

#[async_trait]
impl Action for ScriptAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        let a = Args::of(SPECS, call, &inputs)?;
        let code = a.str("code")?.ok_or_else(|| a.missing("code"))?.to_string();
        let timeout = timeout_input(&a)?.or(call.timeout);
        let context = a
            .get("context")
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        let job = ScriptJob {
            code,
            context,
            globals: call.globals.cloned().unwrap_or_default(),
            sandbox: (*call.caps.sandbox).clone(),
            timeout,
        };
        let log = call.caps.log.clone();
        let sink = move |l: LogLine| log(l);
        match call.caps.scripts.run(job, &sink, &call.caps.cancel).await {
            Ok(v) => Ok(v),
            Err(ScriptError::Timeout(d)) => Err(ActionError::Timeout(d)),
            Err(ScriptError::Cancelled) => Err(ActionError::Cancelled),
            Err(
                e @ ScriptError::Compile {
                    line: Some(line),
                    column: Some(column),
                    ..
                },
            ) => Err(ActionError::At {
                message: e.to_string(),
                line,
                column,
            }),
            Err(e) => Err(ActionError::failed(e.to_string())),
        }
    }
}

use crate::core::catalog::{input, spec, Spec, MAPPING, NUMBER, STRING, WAITS};

const SCRIPT: Spec = spec(
    "script",
    "execute",
    "Runs JavaScript (boa) in a sandboxed worker.",
)
.inputs(&[
    input(
        "code",
        STRING,
        "The body of an async function; its return value is the output.",
    )
    .required(),
    input(
        "context",
        MAPPING,
        "What the script sees as `context` (default: the variables and `inputs`).",
    ),
    input(
        "timeout",
        NUMBER,
        "Milliseconds before the script is stopped (default the step's timeout, else 30000).",
    ),
])
.returns("the script's return value, as JSON")
.traits(WAITS);

/// The contracts of `script.*`.
pub const SPECS: &[Spec] = &[
    SCRIPT,
    Spec {
        method: "run",
        doc: "Same as `script.execute`.",
        ..SCRIPT
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts() {
        assert_eq!(
            ScriptError::Timeout(Duration::from_secs(30)).to_string(),
            "script timed out after 30s"
        );
        assert_eq!(
            ScriptError::Timeout(Duration::from_millis(300)).to_string(),
            "script timed out after 300ms"
        );
        assert_eq!(
            ScriptError::Compile {
                message: "unexpected token".into(),
                line: Some(2),
                column: Some(5)
            }
            .to_string(),
            "script compilation failed: unexpected token (line 2, column 5 of the script)"
        );
        assert_eq!(
            ScriptError::MemoryLimit(2 << 30).to_string(),
            "script exceeded its memory limit (2048 MiB)"
        );
    }

    #[test]
    fn timeout_inputs() {
        use serde_json::json;
        let timeout_input = |v: &Value| timeout_input(&Args::new(&SPECS[0], v).unwrap());
        assert_eq!(timeout_input(&json!({})).unwrap(), None);
        assert_eq!(
            timeout_input(&json!({"timeout": 1500})).unwrap(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            timeout_input(&json!({"timeout": "250"})).unwrap(),
            Some(Duration::from_millis(250))
        );
        assert!(timeout_input(&json!({"timeout": -1})).is_err());
        assert!(timeout_input(&json!({"timeout": true})).is_err());
    }
}
