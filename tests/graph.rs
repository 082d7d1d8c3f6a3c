//! `marktoflow graph`: every example's and shipped workflow's Mermaid
//! output parses in the real Mermaid (npm `mermaid` with `jsdom`, which
//! `.ci/run` installs and names in `MARKTOFLOW_NODE_MODULES`).

use crate::support::{cmd, repo, run};
use serde_json::json;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The `node_modules` folder that holds `mermaid` and `jsdom`; in CI its
/// absence fails the test.
fn mermaid_modules() -> Option<PathBuf> {
    let dir = std::env::var_os("MARKTOFLOW_NODE_MODULES").map(PathBuf::from);
    let ok = dir
        .as_ref()
        .is_some_and(|d| d.join("mermaid").is_dir() && d.join("jsdom").is_dir());
    if !ok {
        crate::support::missing(
            "the Mermaid test",
            "set MARKTOFLOW_NODE_MODULES to a node_modules with mermaid and jsdom (`.ci/run` installs them)",
        );
    }
    dir.filter(|_| ok)
}

#[test]
fn every_workflows_mermaid_graph_parses_in_mermaid() {
    let Some(modules) = mermaid_modules() else {
        return;
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in crate::support::SHIPPED_DIRS {
        files.extend(crate::support::workflows_in(&repo().join(dir)));
    }
    files.sort();
    let diagrams: Vec<_> = files
        .iter()
        .map(|f| {
            let r = run(cmd(&repo())
                .arg("graph")
                .arg(f)
                .args(["--format", "mermaid"]));
            assert_eq!(r.code, 0, "{}: {r:?}", f.display());
            json!({"name": f.strip_prefix(repo()).unwrap(), "text": r.stdout})
        })
        .collect();
    // The script finds its modules from a copy beside them.
    let script = modules
        .parent()
        .unwrap()
        .join("marktoflow-parse-mermaid.mjs");
    std::fs::copy(repo().join("tests/graph/parse.mjs"), &script).unwrap();
    let mut child = Command::new("node")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node");
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        serde_json::to_string(&diagrams).unwrap().as_bytes(),
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), diagrams.len(), "{stdout}");
    let failed: Vec<&&str> = lines.iter().filter(|l| !l.starts_with("ok ")).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}
