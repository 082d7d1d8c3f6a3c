//! Workflows as tools for coding agents, over the Model Context Protocol:
//! `marktoflow mcp` (stdio) and `/mcp` under `marktoflow serve` (Streamable
//! HTTP). A thin layer over the server's state, as `serve` is.
//!
//! - [`tools`]: which workflows are tools, their names and schemas;
//! - [`server`]: the MCP handler that runs them;
//! - [`elicit`]: asking the client's user when a run waits for a person;
//! - [`source`]: the tools as a trigger source of `serve --mcp`.

pub mod elicit;
pub mod http;
pub mod server;
pub mod source;
pub mod tools;

pub use http::mcp_router;
pub use server::McpServer;
pub use tools::{tool_of, tools_of, WorkflowTool};
