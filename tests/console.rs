//! The run console in a real browser: headless Chromium (Debian's
//! `chromium`) driven by Playwright (npm `playwright-core`), against the
//! real server with a fake LLM. `tests/console/console.mjs` does what a
//! person would; its screenshots are kept in `target/console-screenshots`.

use crate::fake_llm::{evidence_reply, FakeLlm};
use crate::support::{repo, serve, tempdir};
use std::path::PathBuf;
use std::process::Command;

const ANSWER: &str = "The key is APOLLO-KEY-7f3a-EXAMPLE.";

/// The browser and the `node_modules` holding `playwright-core`; in CI
/// (which installs both) their absence fails the test.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let chromium = std::env::var_os("MARKTOFLOW_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    let modules = std::env::var_os("MARKTOFLOW_NODE_MODULES").map(PathBuf::from);
    let ok = chromium.is_file()
        && modules
            .as_ref()
            .is_some_and(|m| m.join("playwright-core").is_dir());
    if !ok {
        crate::support::missing(
            "the console's browser test",
            "install Chromium (MARKTOFLOW_CHROMIUM, default /usr/bin/chromium) and set MARKTOFLOW_NODE_MODULES to a node_modules with playwright-core (`.ci/run` installs both)",
        );
        return None;
    }
    modules.map(|m| (chromium, m))
}

#[test]
fn the_console_starts_watches_retries_and_cancels_runs_in_a_browser() {
    let Some((chromium, modules)) = browser() else {
        return;
    };
    let llm = FakeLlm::start(evidence_reply("APOLLO-KEY-7f3a-EXAMPLE", ANSWER));
    let tmp = tempdir();
    let flag = tmp.path().join("flag.txt");
    let watched = tmp.path().join("watched");
    std::fs::create_dir_all(&watched).unwrap();
    let s = serve(
        &repo(),
        &[
            "workflows/lifeos/retrieval-indexed.md",
            "tests/console/flaky.md",
            "tests/console/slow.md",
            "examples/approval.md",
            "tests/fixtures/approvals/long.md",
            watched.to_str().unwrap(),
            "--watch",
            "--allow-read",
            tmp.path().to_str().unwrap(),
        ],
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
    );
    let shots = repo().join("target/console-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let out = Command::new("node")
        .arg(repo().join("tests/console/console.mjs"))
        .env("BASE", format!("http://{}", s.addr))
        .env("MODULES", &modules)
        .env("CHROMIUM", &chromium)
        .env("SHOTS", &shots)
        .env("FLAG", &flag)
        .env("WATCHED", &watched)
        .output()
        .expect("node runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("console: all checks passed"), "{text}");
    for name in [
        "01-workflows",
        "03-flagship-run",
        "05-retried-run",
        "08-broken-file",
        "10-phone",
        "11-waiting",
    ] {
        assert!(shots.join(format!("{name}.png")).is_file(), "{name}.png");
    }
}
