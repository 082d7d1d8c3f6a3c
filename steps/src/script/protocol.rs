//! Messages exchanged between the host and a script worker: one JSON object
//! per line on the worker's stdin (requests) and stdout (replies).

use crate::core::sandbox::Sandbox;
use crate::core::signals::LogLevel;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Host → worker: run one script.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Request {
    pub code: String,
    pub context: Value,
    #[serde(default)]
    pub globals: serde_json::Map<String, Value>,
    pub sandbox: Sandbox,
    pub limits: EngineLimits,
}

/// Limits applied inside the engine (the memory cap is set on the process).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct EngineLimits {
    pub recursion: usize,
    pub stack_size: usize,
}

/// Worker → host. Zero or more `Log`, then exactly one `Ok` or `Err`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "lowercase")]
pub(crate) enum Reply {
    Log { level: LogLevel, msg: String },
    Ok { value: Value },
    Err(Failure),
}

/// How a script failed inside the worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum Failure {
    /// The code does not parse; line/column are relative to the code.
    Compile {
        message: String,
        line: Option<u32>,
        column: Option<u32>,
    },
    /// The script threw / its promise was rejected: `String(value)`.
    Thrown { message: String },
    /// The worker itself failed (engine panic, bad request); it exits after
    /// answering and must not be reused.
    Internal { message: String },
}
