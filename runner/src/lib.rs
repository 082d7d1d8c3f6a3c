//! marktoflow: run workflows written as Markdown.
//!
//! Data flows one way: file → [`format`] (document → model) → [`engine`] →
//! actions (in `marktoflow-steps`) → run events → (terminal printer | JSON |
//! [`store`] | server response).
//!
//! Layers, each using only those before it: [`diag`] (positioned messages),
//! [`template`] (minijinja), [`format`], [`engine`], [`telemetry`] (traces
//! of runs, from their events), [`store`], [`serve`]
//! (HTTP, schedules, file watches), [`mcp`] (workflows as MCP tools),
//! [`check`] (what `validate` verifies), [`testing`] (`marktoflow test`),
//! [`cli`] (the `marktoflow` command, a thin edge).

pub mod check;
pub mod cli;
pub mod diag;
pub mod engine;
pub mod format;
pub mod mcp;
pub mod serve;
pub mod store;
pub mod telemetry;
pub mod template;
pub mod testing;

#[cfg(test)]
#[path = "../../tests/layers/scan.rs"]
mod scan;

#[cfg(test)]
mod layers {
    /// Each layer imports only the layers before it (no reaching up), by
    /// any path: `crate::x`, `crate::{x, y}`, `super::super::x`.
    #[test]
    fn modules_only_use_lower_layers() {
        const ORDER: &[&str] = &[
            "diag",
            "template",
            "format",
            "engine",
            "telemetry",
            "store",
            "serve",
            "mcp",
            "check",
            "testing",
            "cli",
        ];
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut bad = Vec::new();
        for (rel, top, names) in super::scan::uses(&src) {
            let Some(me) = ORDER.iter().position(|l| *l == top) else {
                continue;
            };
            for name in names {
                if ORDER
                    .iter()
                    .position(|l| *l == name)
                    .is_some_and(|o| o > me)
                {
                    bad.push(format!("{rel} uses crate::{name}"));
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
