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
pub mod mcp;
pub mod memory;
pub mod registry;
pub mod retrieval;
pub mod script;

pub use crate::core::action::{
    Action, ActionError, Call, Capabilities, LogLevel, LogLine, LogSink, ToolConfig,
};
pub use crate::core::sandbox::Sandbox;
pub use registry::Registry;

#[cfg(test)]
mod layers {
    /// `core` uses no action family; a family uses `core` and itself only;
    /// the registry sits on top.
    #[test]
    fn families_use_core_only() {
        const FAMILIES: &[&str] = &["script", "agent", "builtin", "retrieval", "memory", "mcp"];
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut bad = Vec::new();
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let rel = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
                let top = rel.split('/').next().unwrap().trim_end_matches(".rs");
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, _) in text.match_indices("crate::") {
                    let used: String = text[i + 7..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    let reaches_up = match top {
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
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }
}
