//! How an action fails, and the words its messages use for JSON types.

use serde_json::Value;
use std::time::Duration;

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ActionError {
    /// The inputs do not fit the action (missing field, wrong type).
    #[error("{0}")]
    Input(String),
    /// The action ran and failed; `retryable` tells the engine a retry may help.
    #[error("{message}")]
    Failed { message: String, retryable: bool },
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("cancelled")]
    Cancelled,
    /// The workflow failed itself (`workflow.fail`): the author's message
    /// as written, and their error code, if any, beside it.
    #[error("{message}")]
    Raised {
        message: String,
        code: Option<String>,
    },
    /// Code the action ran (a script) failed at a place inside it: 1-based
    /// `line`/`column` within that code, for the caller to map into its file.
    #[error("{message}")]
    At {
        message: String,
        line: u32,
        column: u32,
    },
    /// An agent asked to call a tool that needs a person's approval, and
    /// nobody has decided yet: the run waits for the decision.
    #[error("the call of `{}` needs a person's approval", .0.tool)]
    NeedsApproval(Box<ApprovalAsk>),
}

/// A tool call that waits for a person (see [`ActionError::NeedsApproval`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAsk {
    /// Names this call in the run, the same when the step runs again.
    pub id: String,
    /// `server.tool`.
    pub tool: String,
    pub args: serde_json::Map<String, serde_json::Value>,
}

impl ActionError {
    pub fn failed(message: impl Into<String>) -> Self {
        ActionError::Failed {
            message: message.into(),
            retryable: false,
        }
    }
    pub fn retryable(message: impl Into<String>) -> Self {
        ActionError::Failed {
            message: message.into(),
            retryable: true,
        }
    }

    /// The error code the workflow's author gave (`workflow.fail`'s `code`).
    pub fn code(&self) -> Option<&str> {
        match self {
            ActionError::Raised { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

/// The JSON type name of a value, as used in messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
