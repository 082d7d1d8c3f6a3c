//! What every action family builds on: the [`action`] contract, the
//! [`catalog`] of declared inputs, [`files`] helpers, calling out over HTTP
//! ([`net`]), sessions to MCP servers ([`mcp`]), the script runner and LLM
//! as traits ([`hosts`]), the filesystem [`sandbox`], [`mapped`] files, opening [`sqlite`]
//! files, the [`state`] folder, [`time`] (durations, one way) and the one
//! folder [`walk`]er.

pub mod action;
pub mod cache;
pub mod catalog;
pub mod confined;
pub mod files;
pub mod hosts;
pub mod mapped;
pub mod mcp;
pub mod models;
pub mod net;
pub mod sandbox;
pub mod sqlite;
pub mod state;
pub mod time;
pub mod walk;
pub mod yaml;
