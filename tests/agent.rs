//! Agent steps against the fake provider: retries, errors, per-step models.

use crate::fake_llm::FakeLlm;
use crate::support::{cmd, repo, run};
use serde_json::json;
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
    assert!(msg.contains("failed after 4 requests"), "{msg}");
    assert_eq!(llm.requests().len(), 4, "1 attempt + 3 retries");
    // One call, resent: one key, so a provider that honours it acts once.
    let run_id = r.json()["run_id"].as_str().unwrap().to_string();
    let keys: Vec<String> = llm
        .requests()
        .iter()
        .map(|q| {
            q.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("idempotency-key"))
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        })
        .collect();
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    assert!(
        keys[0].starts_with(&format!("{run_id}:")) && keys[0].ends_with(":1"),
        "{keys:?}"
    );
    assert!(
        r.stderr
            .contains("examples/agent.md:30:9: error: step `Summarise` failed"),
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

const STRUCTURED: &str = r#"---
workflow: {id: structured, name: Structured}
tools:
  ai: {sdk: openai, options: {model: gpt-test}}
---
## Ask
```yaml
action: ai.run
inputs:
  prompt: Give me the terms.
  output_schema:
    type: object
    properties:
      terms: {type: array, items: {type: string}}
    required: [terms]
output_variable: raw
```
"#;

#[test]
fn a_reply_that_breaks_the_output_schema_fails_the_step() {
    let d = crate::support::tempdir();
    std::fs::write(d.path().join("s.md"), STRUCTURED).unwrap();
    let replies = Arc::new(AtomicUsize::new(0));
    let n = replies.clone();
    let llm = FakeLlm::start(Arc::new(move |_| match n.fetch_add(1, Ordering::SeqCst) {
        0 => (200, "```json\n{\"terms\": [\"apollo\"]}\n```".into()),
        1 => (200, "{\"words\": [\"apollo\"]}".into()),
        _ => (200, "Sure! Here are the terms: apollo".into()),
    }));
    let go = || {
        run(cmd(d.path())
            .args(["run", "s.md", "--json", "--quiet"])
            .env("OPENAI_BASE_URL", format!("{}/v1", llm.base)))
    };
    // Conforming JSON (its Markdown fence removed) is the step's output,
    // as the value it is.
    let r = go();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["raw"], json!({"terms": ["apollo"]}));
    let body = &llm.requests()[0].body;
    assert_eq!(body["response_format"]["type"], "json_schema", "{body}");
    // JSON of another shape, or no JSON at all, fails with the reason.
    let r = go();
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("`terms` is missing"), "{msg}");
    let r = go();
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("the reply is not JSON"), "{msg}");
}

#[test]
fn without_a_key_or_a_local_model_the_error_says_how_to_get_either() {
    let r = run(cmd(&repo()).args([
        "run",
        "workflows/lifeos/retrieval-indexed.md",
        "--input",
        "query=x",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("ANTHROPIC_API_KEY is not set"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("marktoflow model install"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_local_model_that_is_not_a_gguf_is_refused_naming_the_file() {
    let d = crate::support::tempdir();
    let fake = d.path().join("model.gguf");
    std::fs::write(&fake, "not a model").unwrap();
    let r = run(cmd(&repo())
        .args([
            "run",
            "examples/agent.md",
            "--json",
            "--quiet",
            "--agent",
            "local",
            "--model",
        ])
        .arg(&fake));
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains(&fake.display().to_string()) && msg.contains("is not a GGUF model"),
        "{msg}"
    );
    // A name that is no file and no installed model is refused before the run.
    let r = run(cmd(&repo()).args([
        "run",
        "examples/agent.md",
        "--agent",
        "local",
        "--model",
        "no-such-model",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("`no-such-model` (--model) is not installed"),
        "{}",
        r.stderr
    );
}

#[test]
fn model_list_shows_the_models_folder() {
    let d = crate::support::tempdir();
    std::fs::write(d.path().join("tiny.gguf"), b"GGUF....").unwrap();
    let r = run(cmd(d.path())
        .args(["model", "list", "--json"])
        .env("MARKTOFLOW_MODELS_DIR", d.path()));
    assert_eq!(r.code, 0, "{r:?}");
    let list = r.json();
    assert_eq!(list[0]["name"], "tiny");
    assert_eq!(list[0]["bytes"], 8);
    let r = run(cmd(d.path())
        .args(["model", "list"])
        .env("MARKTOFLOW_MODELS_DIR", d.path()));
    assert!(
        r.stdout
            .contains("not installed: qwen2.5-coder-0.5b, all-minilm-l6-v2"),
        "{}",
        r.stdout
    );
    let r = run(cmd(d.path()).args(["model", "install", "gpt-5"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("known models: qwen2.5-coder-0.5b"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_model_file_the_workflow_names_must_be_readable_by_the_run() {
    let models = crate::support::tempdir();
    let model = models.path().join("m.gguf");
    std::fs::write(&model, "GGUF and then nothing").unwrap();
    let d = crate::support::tempdir();
    std::fs::write(
        d.path().join("w.md"),
        format!(
            "---\nworkflow: {{id: w, name: W}}\ntools:\n  ai: {{sdk: local, options: {{model: '{}'}}}}\n---\n## Ask\n```yaml\naction: ai.run\ninputs: {{prompt: hi}}\n```\n",
            model.display()
        ),
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["run", "w.md", "--json", "--quiet"]));
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("outside the allowed read roots"), "{msg}");
    // Allowed, the file is read (and refused for what it is).
    let r = run(cmd(d.path())
        .args(["run", "w.md", "--json", "--quiet", "--allow-read"])
        .arg(models.path()));
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("llama.cpp could not load"), "{msg}");
}

#[test]
fn openai_style_chat_completions_and_list_models() {
    let d = crate::support::tempdir();
    std::fs::write(d.path().join("c.md"), include_str!("fixtures/agent/c.md")).unwrap();
    let llm = FakeLlm::start(Arc::new(|req| (200, format!("hi from {}", req.model()))));
    let r = run(cmd(d.path())
        .args(["run", "c.md", "--json", "--quiet"])
        .env("BASE", format!("{}/v1", llm.base)));
    assert_eq!(r.code, 0, "{r:?}");
    let o = &r.json()["outputs"];
    assert_eq!(o["ids"], json!(["fake-small", "fake-large"]));
    assert_eq!(o["owner"], "fake-lab");
    // The input `model` picks the model, as the peer's method does.
    assert_eq!(o["text"], "hi from fake-large");
    let reqs = llm.requests();
    assert_eq!(reqs[0].path, "/v1/models");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer dummy"));
    assert_eq!(reqs[1].body["messages"][0]["content"], "Be brief.");
}

#[test]
fn an_undeclared_agent_tool_uses_the_provider_whose_key_is_set() {
    let d = crate::support::tempdir();
    std::fs::write(d.path().join("a.md"), include_str!("fixtures/agent/a.md")).unwrap();
    let llm = FakeLlm::start(Arc::new(|_| (200, "pong".into())));
    let r = run(cmd(d.path())
        .args(["run", "a.md", "--json", "--quiet"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", llm.base)));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"]["reply"]["choices"][0]["message"]["content"],
        "pong"
    );
    // No model named and a server of one's own: the first it lists is used.
    let reqs = llm.requests();
    assert_eq!(reqs[0].path, "/v1/models");
    assert_eq!(reqs[1].path, "/v1/chat/completions");
    assert_eq!(reqs[1].model(), "fake-small");
}

/// The peer's `parallel.spawn` and `parallel.map`: each agent is a
/// `<provider>.chat.completions` call with its prompt rendered; the results
/// come in the peer's shapes.
#[test]
fn parallel_spawn_and_map_call_each_agent() {
    let d = crate::support::tempdir();
    std::fs::write(
        d.path().join("s.md"),
        include_str!("fixtures/agent/spawn.md"),
    )
    .unwrap();
    let llm = FakeLlm::start(Arc::new(|req| match req.model() {
        "m-broken" => (400, "bad request".into()),
        m => (200, format!("{m} says: {}", req.prompt())),
    }));
    let r = run(cmd(d.path())
        .args(["run", "s.md", "--json", "--quiet"])
        .env("BASE", format!("{}/v1", llm.base))
        .env("SLOW", &llm.base));
    assert_eq!(r.code, 0, "{r:?}");
    let o = &r.json()["outputs"];
    assert_eq!(o["successful"], json!(["security", "style"]));
    assert_eq!(o["failed"], json!(["broken"]));
    assert_eq!(o["security"], "m-sec says: Security of tides");
    assert_eq!(o["broken_success"], false);
    assert!(o["broken_error"].as_str().unwrap().contains("400"), "{o}");
    assert_eq!(
        o["keys"],
        json!(["results", "successful", "failed", "timing", "costs"])
    );
    assert_eq!(
        o["mapped"],
        json!([
            "m-map says: Item 0: a",
            "m-map says: Item 1: b",
            "m-map says: Item 2: c"
        ])
    );
    let prompts: Vec<String> = llm.requests().iter().map(|q| q.prompt()).collect();
    assert!(
        prompts.contains(&"Style of TIDES".to_string()),
        "{prompts:?}"
    );
}

/// `onError: fail` (the default) fails the step naming the agent; `wait:
/// any` returns with the first agent that finished.
#[test]
fn parallel_spawn_fails_by_default_and_waits_for_any() {
    let d = crate::support::tempdir();
    let wf = |on_error: &str, wait: &str| {
        format!(
            "---\nworkflow: {{id: w}}\ntools:\n  fast: {{sdk: openai-compatible, auth: {{base_url: '${{BASE}}', api_key: dummy}}}}\n---\n\
```yaml\nid: both\naction: parallel.spawn\ninputs:\n  agents:\n    - {{id: ok, provider: fast, model: m-ok, prompt: hi}}\n    - {{id: bad, provider: fast, model: m-bad, prompt: hi}}\n  {on_error}\n  {wait}\noutput_variable: both\n```\n\
```yaml\naction: workflow.set_outputs\ninputs:\n  got: '{{{{ both.results | list }}}}'\n```\n"
        )
    };
    // `bad` answers only once the test lets it: `wait: any` must return
    // while it is still out.
    let release = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (rel, ans) = (release.clone(), answered.clone());
    let llm = FakeLlm::start(Arc::new(move |req| match req.model() {
        "m-bad" => {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !rel.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            ans.fetch_add(1, Ordering::SeqCst);
            (400, "no".into())
        }
        _ => (200, "yes".into()),
    }));
    std::fs::write(d.path().join("a.md"), wf("", "wait: any")).unwrap();
    let r = run(cmd(d.path())
        .args(["run", "a.md", "--json", "--quiet"])
        .env("BASE", format!("{}/v1", llm.base)));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["got"], json!(["ok"]));
    assert_eq!(
        answered.load(Ordering::SeqCst),
        0,
        "the run waited for `bad`"
    );
    release.store(true, Ordering::SeqCst);
    std::fs::write(d.path().join("f.md"), wf("", "")).unwrap();
    let r = run(cmd(d.path())
        .args(["run", "f.md", "--json", "--quiet"])
        .env("BASE", format!("{}/v1", llm.base)));
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.starts_with("Parallel execution failed: bad: "), "{msg}");
}
