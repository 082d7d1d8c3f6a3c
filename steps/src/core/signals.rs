//! What passes between a running action and whoever runs it, besides
//! inputs and outputs: log lines and progress out, cancellation in.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A log line produced by an action (`console.log`, `core.log`, provider retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: LogLevel,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn parse(s: &str) -> Option<LogLevel> {
        match s.to_ascii_lowercase().as_str() {
            "debug" | "trace" => Some(LogLevel::Debug),
            "info" | "log" => Some(LogLevel::Info),
            "warn" | "warning" => Some(LogLevel::Warn),
            "error" => Some(LogLevel::Error),
            _ => None,
        }
    }
}

/// Where actions send their log lines; the engine turns them into run events.
pub type LogSink = Arc<dyn Fn(LogLine) + Send + Sync>;

/// How far a long action has got (files indexed, passages embedded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// What is counted, e.g. `files indexed`.
    pub what: String,
    pub done: u64,
    pub total: u64,
}

/// Where actions report progress; the CLI draws a bar from it on a terminal.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// A sink that drops progress reports.
pub fn no_progress() -> ProgressSink {
    Arc::new(|_| {})
}

/// Set once to ask running actions to stop (Ctrl-C, workflow timeout).
#[derive(Clone, Default)]
pub struct Cancel(Arc<(AtomicBool, tokio::sync::Notify)>);

impl Cancel {
    pub fn cancel(&self) {
        self.0 .0.store(true, Ordering::SeqCst);
        self.0 .1.notify_waiters();
    }
    pub fn is_cancelled(&self) -> bool {
        self.0 .0.load(Ordering::SeqCst)
    }
    /// Resolves when cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0 .1.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}
