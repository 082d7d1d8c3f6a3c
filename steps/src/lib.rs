//! Actions for the marktoflow runner.
//!
//! An action takes rendered JSON inputs plus [`action::Capabilities`] (sandbox
//! roots, log sink, cancellation, script host, agent hub) and returns JSON. It
//! never parses workflows or renders templates: that is the runner's job.

pub mod action;
pub mod agent;
pub mod builtin;
pub mod catalog;
pub mod context;
pub mod embed;
pub mod kb;
pub mod memory;
pub mod query;
pub mod rank;
pub mod registry;
pub mod sandbox;
pub mod script;
pub mod state;

pub use action::{Action, ActionError, Call, Capabilities, LogLevel, LogLine, LogSink, ToolConfig};
pub use registry::Registry;
pub use sandbox::Sandbox;
