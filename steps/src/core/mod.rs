//! What every action family builds on: the [`action`] contract, the
//! [`catalog`] of declared inputs, [`files`] helpers, the HTTP retry rules ([`net`]), the script runner and LLM as traits ([`hosts`]), the filesystem [`sandbox`], opening [`sqlite`] files, the
//! [`state`] folder, [`time`] (durations, one way) and the one folder [`walk`]er.

pub mod action;
pub mod cache;
pub mod catalog;
pub mod confined;
pub mod files;
pub mod hosts;
pub mod models;
pub mod net;
pub mod sandbox;
pub mod sqlite;
pub mod state;
pub mod time;
pub mod walk;
pub mod yaml;
