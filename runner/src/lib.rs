//! marktoflow: run workflows written as Markdown.
//!
//! Data flows one way: file → [`format`] (document → model) → [`engine`] →
//! actions (in `marktoflow-steps`) → run events → (terminal printer | JSON |
//! [`store`] | server response).
//!
//! Layers, each using only those before it: [`diag`] (positioned messages),
//! [`template`] (minijinja), [`format`], [`engine`], [`store`], [`serve`]
//! (HTTP, schedules, file watches), [`mcp`] (workflows as MCP tools),
//! [`check`] (what `validate` verifies), [`cli`] (the `marktoflow` command,
//! a thin edge).

pub mod check;
pub mod cli;
pub mod diag;
pub mod engine;
pub mod format;
pub mod mcp;
pub mod serve;
pub mod store;
pub mod template;

#[cfg(test)]
mod layers {
    /// Each layer imports only the layers before it (no cycles, no reaching up).
    #[test]
    fn modules_only_use_lower_layers() {
        const ORDER: &[&str] = &[
            "diag", "template", "format", "engine", "store", "serve", "mcp", "check", "cli",
        ];
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
                let Some(me) = ORDER.iter().position(|l| *l == top) else {
                    continue;
                };
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, _) in text.match_indices("crate::") {
                    let name: String = text[i + 7..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if let Some(other) = ORDER.iter().position(|l| *l == name) {
                        if other > me {
                            bad.push(format!("{rel} uses crate::{name}"));
                        }
                    }
                }
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }
}
