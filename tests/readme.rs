//! The README's first-screen command runs as written (with the fake
//! provider standing in for Anthropic).

use crate::fake_llm::{evidence_reply, FakeLlm};
use crate::support::{cmd, repo, run};

/// Splits a shell command line into words (double quotes only, as the README uses).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn the_readme_run_command_works() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let block = readme
        .split("```sh\n")
        .nth(1)
        .expect("a ```sh block")
        .split("```")
        .next()
        .unwrap();
    let line = block
        .lines()
        .find(|l| l.contains("marktoflow run"))
        .expect("the run command");
    assert!(
        line.starts_with("bash scripts/setup.sh && "),
        "the first command sets up a fresh machine: {line}"
    );
    assert!(repo().join("scripts/setup.sh").is_file());
    let cmdline = line
        .split("./target/release/marktoflow ")
        .nth(1)
        .expect("runs the release binary");
    let args = words(cmdline);
    assert_eq!(args[..2], ["run", "workflows/lifeos/retrieval-indexed.md"]);
    let llm = FakeLlm::start(evidence_reply(
        "APOLLO-KEY-7f3a-EXAMPLE",
        "APOLLO-KEY-7f3a-EXAMPLE",
    ));
    let r = run(cmd(&repo())
        .args(&args)
        .arg("--json")
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "test-key"));
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    // Answered from the lines (no model call by default), with the line cited.
    assert!(
        out["answer"]
            .as_str()
            .unwrap()
            .starts_with("APOLLO-KEY-7f3a-EXAMPLE — "),
        "{out}"
    );
    assert!(out["citations"][0]["quote"]
        .as_str()
        .unwrap()
        .contains("APOLLO-KEY-7f3a-EXAMPLE"));
    assert!(
        out["sources"][0]
            .as_str()
            .unwrap()
            .starts_with("Work/Projects/Apollo/"),
        "{out}"
    );
    // The test command is the one CI runs.
    let test_block = readme.split("```sh\n").nth(2).unwrap();
    assert!(test_block.starts_with("cargo test --workspace"));
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(
        ci.contains("cargo test --workspace"),
        ".ci/run must run the README's test command"
    );
}
