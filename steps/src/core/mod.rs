//! What every action family builds on: the [`action`] contract, the
//! [`catalog`] of declared inputs, [`files`] helpers, calling out over HTTP
//! ([`net`]), sessions to MCP servers ([`mcp`]), the script runner and LLM
//! as traits ([`action::hosts`]), what a model is asked to [`reading`], how actions fail ([`error`]), [`signals`]
//! (logs, progress, cancel), declared [`tool`]s, the filesystem [`sandbox`], [`mapped`] files, opening [`sqlite`]
//! files, the [`state`] folder, [`time`] (durations, one way) and the one
//! folder [`walk`]er.

pub mod action;
pub mod approval;
pub mod args;
pub mod background;
pub mod blame;
pub mod cache;
pub mod catalog;
pub mod confined;
pub mod error;
pub mod files;
pub mod hash;
pub mod js;
pub mod mapped;
pub mod mcp;
pub mod models;
pub mod net;
pub mod reading;
pub mod sandbox;
pub mod signals;
pub mod sqlite;
pub mod state;
pub mod time;
pub mod tool;
pub mod walk;
pub mod yaml;
pub mod yamlpos;
