//! marktoflow: run workflows written as Markdown.
//!
//! Data flows one way: file → [`document`] → [`model`] → [`engine`] → actions
//! (in `marktoflow-steps`) → run events → (terminal printer | JSON | store).

pub mod actions;
pub mod cli;
pub mod cli_store;
pub mod core_ops;
pub mod cron;
pub mod diag;
pub mod document;
pub mod engine;
pub mod graph;
pub mod inputs;
pub mod lint;
pub mod model;
pub mod plan;
pub mod schema;
pub mod server;
pub mod store;
pub mod template;
pub mod verify;
pub mod watch;
pub mod yamlpos;
