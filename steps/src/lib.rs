//! Actions for the marktoflow runner.
//!
//! An action takes rendered JSON inputs plus [`Capabilities`] (sandbox roots,
//! log sink, cancellation, a script runner, an LLM client, the state folder)
//! and returns JSON. It never parses workflows or renders templates: that is
//! the runner's job.
//!
//! Layers, each using only those before it: [`core`] (the action contract,
//! the catalog, the sandbox, state), the action families ([`script`],
//! [`agent`], [`builtin`], [`retrieval`], [`memory`], [`mcp`]), and the [`registry`]
//! that puts them together.

pub mod agent;
pub mod builtin;
pub mod core;
pub mod integrations;
pub mod mcp;
pub mod memory;
pub mod registry;
pub mod retrieval;
pub mod script;

pub use crate::core::sandbox::Sandbox;
pub use crate::core::{
    action::{Action, Call, Capabilities},
    error::ActionError,
    signals::{LogLevel, LogLine, LogSink},
    tool::ToolConfig,
};
pub use registry::Registry;

#[cfg(test)]
#[path = "../../tests/layers/scan.rs"]
mod scan;

#[cfg(test)]
mod layers {
    /// `core` uses no action family; a family uses `core` and itself only;
    /// the registry sits on top. Any path counts (`crate::{x, y}`,
    /// `super::super::x`).
    #[test]
    fn families_use_core_only() {
        const FAMILIES: &[&str] = &["script", "agent", "builtin", "retrieval", "memory", "mcp"];
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut bad = Vec::new();
        for (rel, top, names) in super::scan::uses(&src) {
            for used in names {
                let reaches_up = match top.as_str() {
                    "core" => used != "core",
                    t if FAMILIES.contains(&t) => {
                        used != t && (FAMILIES.contains(&used.as_str()) || used == "registry")
                    }
                    _ => false,
                };
                if reaches_up {
                    bad.push(format!("{rel} uses crate::{used}"));
                }
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }
    /// No two sibling modules reach each other, directly or round a loop:
    /// a file's dependencies read in one direction.
    #[test]
    fn no_circles_between_siblings() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let circles = super::scan::circles(&src);
        assert!(circles.is_empty(), "{circles:#?}");
    }
}
