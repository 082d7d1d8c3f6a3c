//! Checks short of running: authoring checks of one workflow ([`lint`]),
//! everything `validate`, `run` and `serve` verify before they start
//! ([`verify`]: sub-workflows, triggers as `serve` compiles them), and what
//! only the declared MCP servers can answer ([`online`], `validate --online`).

pub mod lint;
pub mod load;
pub mod online;
pub mod verify;
pub mod writes;
