//! Agent steps against the fake provider: retries, errors, per-step models.

use crate::fake_llm::FakeLlm;
use crate::support::{cmd, repo, run};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn run_agent_example(llm: &FakeLlm) -> crate::support::Run {
    run(cmd(&repo())
        .args(["run", "examples/agent.md", "--json", "--quiet"])
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "test-key"))
}

#[test]
fn rate_limits_and_server_errors_are_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let llm = FakeLlm::start(Arc::new(move |_| match c.fetch_add(1, Ordering::SeqCst) {
        0 => (429, "slow down".into()),
        1 => (503, "overloaded".into()),
        _ => (200, "Third time lucky.".into()),
    }));
    let r = run_agent_example(&llm);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["summary"], "Third time lucky.");
    assert_eq!(llm.requests().len(), 3);
}

#[test]
fn an_auth_error_fails_at_once_with_a_hint() {
    let llm = FakeLlm::start(Arc::new(|_| (401, "invalid x-api-key".into())));
    let r = run_agent_example(&llm);
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("HTTP 401")
            && msg.contains("invalid x-api-key")
            && msg.contains("ANTHROPIC_API_KEY"),
        "{msg}"
    );
    assert!(
        !msg.contains("test-key"),
        "the key never appears in messages"
    );
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn retries_give_up_after_the_limit() {
    let llm = FakeLlm::start(Arc::new(|_| (500, "boom".into())));
    let r = run_agent_example(&llm);
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("after 4 attempts"), "{msg}");
    assert_eq!(llm.requests().len(), 4, "1 attempt + 3 retries");
    assert!(
        r.stderr
            .contains("examples/agent.md:24:9: error: step `Summarise` failed"),
        "{}",
        r.stderr
    );
}

/// The most requests the fake provider had in flight at once, for agent calls
/// made by `for_each` and `parallel` with `max_concurrent: 2`.
#[test]
fn max_concurrent_bounds_calls_in_flight() {
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (n2, p2) = (now.clone(), peak.clone());
    let llm = FakeLlm::start(Arc::new(move |_| {
        let cur = n2.fetch_add(1, Ordering::SeqCst) + 1;
        p2.fetch_max(cur, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(150));
        n2.fetch_sub(1, Ordering::SeqCst);
        (200, "ok".into())
    }));
    let d = crate::support::tempdir();
    let wf = r#"---
workflow: {id: fan-out}
tools:
  agent: {sdk: anthropic}
---

```yaml
type: for_each
items: [1, 2, 3, 4, 5]
max_concurrent: 2
steps:
  - action: agent.run
    inputs: {prompt: 'item {{ item }}'}
```

```yaml
type: parallel
max_concurrent: 2
branches:
  - {id: a, steps: [{action: agent.run, inputs: {prompt: a}}]}
  - {id: b, steps: [{action: agent.run, inputs: {prompt: b}}]}
  - {id: c, steps: [{action: agent.run, inputs: {prompt: c}}]}
```
"#;
    std::fs::write(d.path().join("fan.md"), wf).unwrap();
    let r = run(cmd(d.path())
        .args(["run", "fan.md", "--json", "--quiet"])
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "k"));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(llm.requests().len(), 8);
    assert_eq!(
        peak.load(Ordering::SeqCst),
        2,
        "exactly two calls were in flight at the peak"
    );
}
