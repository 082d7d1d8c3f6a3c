//! OpenTelemetry traces on the real binary, received by a real OTLP/HTTP
//! receiver (`tests/otlp/receiver.py`, decoding with OpenTelemetry's own
//! protobuf definitions: `pip install opentelemetry-proto`, which `.ci/run`
//! installs): spans of runs, steps and model calls with their parents; a
//! webhook's `traceparent` continued, `http.*` steps sending theirs, and a
//! run that waits kept in one trace.

use crate::fake_llm::{FakeLlm, RAW};
use crate::support::{cmd, http, repo, run, serve, tempdir, wait_for};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A receiver on 127.0.0.1 writing the spans it gets to a file.
struct Receiver {
    child: Child,
    endpoint: String,
    spans: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// None (the test is skipped, or fails in CI) without `opentelemetry-proto`.
    fn start(dir: &Path) -> Option<Receiver> {
        let ok = Command::new("python3")
            .args([
                "-c",
                "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
            ])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            crate::support::missing(
                "the trace tests",
                "pip install opentelemetry-proto (`.ci/run` installs it)",
            );
            return None;
        }
        let spans = dir.join("spans.jsonl");
        let mut child = Command::new("python3")
            .arg(repo().join("tests/otlp/receiver.py"))
            .arg(&spans)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().strip_prefix("listening ").expect("listening");
        Some(Receiver {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            spans,
        })
    }

    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.spans)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The spans once `done` says they are all there.
    fn wait_until(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        wait_for(what, || done(&self.spans()));
        self.spans()
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.endpoint.clone()),
            // Sent within a tenth of a second (a server's batches).
            ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
        ]
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no span `{name}` in {spans:#?}"))
}

/// A fake provider whose replies took 1,200 tokens in and 300 out, and a
/// service that answers its first request with 404 and then 200: both
/// record what they were sent.
fn services() -> (FakeLlm, FakeLlm) {
    let llm = FakeLlm::start(Arc::new(|_| {
        (
            RAW,
            json!({"content": [{"type": "text", "text": "summary"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 1200, "output_tokens": 300}})
            .to_string(),
        )
    }));
    let n = Arc::new(AtomicUsize::new(0));
    let api = FakeLlm::start(Arc::new(move |_| match n.fetch_add(1, Ordering::SeqCst) {
        0 => (404, "not yet".into()),
        _ => (RAW, json!({"ok": true}).to_string()),
    }));
    (llm, api)
}

const TRACED: &str = "---
workflow: {id: traced, name: Traced}
tools:
  agent: {sdk: anthropic, options: {model: claude-sonnet-4-20250514}}
triggers:
  - {type: webhook, path: /traced}
inputs:
  url: {type: string, required: true}
---

```yaml
id: fetch
name: Fetch the page
action: http.get
inputs: {url: '{{ inputs.url }}/page', fail_on_error: true}
error_handling: {max_retries: 1, retry_delay_seconds: 0}
```

```yaml
id: choose
type: if
condition: '{{ steps.fetch.output.status == 200 }}'
then:
  - id: summarize
    action: agent.run
    inputs: {prompt: Summarize the page}
```
";

#[test]
fn a_run_its_steps_and_its_model_calls_arrive_as_spans_with_their_parents() {
    let d = tempdir();
    let Some(rx) = Receiver::start(d.path()) else {
        return;
    };
    let (llm, api) = services();
    std::fs::write(d.path().join("traced.md"), TRACED).unwrap();
    let input = format!("url={}", api.base);
    let r = run(cmd(d.path())
        .args(["run", "traced.md", "--quiet", "--input", &input])
        .envs(rx.env())
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "k"));
    assert_eq!(r.code, 0, "{r:?}");
    // The CLI sends its spans before it exits: they are all there now.
    let spans = rx.spans();
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        {
            let mut n = names.clone();
            n.sort();
            n
        },
        [
            "Fetch the page",
            "chat claude-sonnet-4-20250514",
            "choose",
            "run traced",
            "summarize"
        ],
        "{spans:#?}"
    );
    let root = named(&spans, "run traced");
    let fetch = named(&spans, "Fetch the page");
    let choose = named(&spans, "choose");
    let summarize = named(&spans, "summarize");
    let chat = named(&spans, "chat claude-sonnet-4-20250514");
    assert!(spans.iter().all(|s| s["trace_id"] == root["trace_id"]));
    assert!(spans.iter().all(|s| s["service"] == "marktoflow"));
    assert_eq!(
        root["parent_span_id"], "",
        "a run started by hand is a root"
    );
    assert_eq!(root["attributes"]["marktoflow.workflow"], "traced");
    assert_eq!(root["attributes"]["marktoflow.run.status"], "completed");
    assert_eq!(root["attributes"]["marktoflow.trigger"], "cli");
    // Steps nest as they ran: the branch's step under the branch.
    assert_eq!(fetch["parent_span_id"], root["span_id"]);
    assert_eq!(choose["parent_span_id"], root["span_id"]);
    assert_eq!(summarize["parent_span_id"], choose["span_id"]);
    assert_eq!(chat["parent_span_id"], summarize["span_id"]);
    // The HTTP step: its action, target host, one retry (the 404), and the
    // `traceparent` it sent naming its own span.
    let host = api.base.trim_start_matches("http://");
    assert_eq!(
        fetch["attributes"],
        json!({"marktoflow.step.id": "fetch", "marktoflow.step.kind": "action",
               "marktoflow.action": "http.get", "marktoflow.step.status": "completed",
               "marktoflow.step.retries": 1, "server.address": host})
    );
    assert_eq!(fetch["events"][0]["name"], "retry");
    let sent: Vec<String> = api
        .requests()
        .iter()
        .map(|q| q.header("traceparent").unwrap_or("").to_string())
        .collect();
    assert_eq!(sent.len(), 2);
    for tp in &sent {
        assert_eq!(
            tp,
            &format!(
                "00-{}-{}-01",
                root["trace_id"].as_str().unwrap(),
                fetch["span_id"].as_str().unwrap()
            )
        );
    }
    // The model call, by the GenAI conventions, and its step's sums.
    // 1,200 in at $3 and 300 out at $15 a million: $0.0081.
    assert_eq!(chat["kind"], 3, "SPAN_KIND_CLIENT");
    let a = &chat["attributes"];
    assert_eq!(a["gen_ai.operation.name"], "chat");
    assert_eq!(a["gen_ai.provider.name"], "anthropic");
    assert_eq!(a["gen_ai.request.model"], "claude-sonnet-4-20250514");
    assert_eq!(a["gen_ai.usage.input_tokens"], 1200);
    assert_eq!(a["gen_ai.usage.output_tokens"], 300);
    assert!((a["marktoflow.cost_usd"].as_f64().unwrap() - 0.0081).abs() < 1e-9);
    assert_eq!(summarize["attributes"]["gen_ai.usage.input_tokens"], 1200);
    let within = |inner: &Value, outer: &Value| {
        inner["start_ns"].as_u64() >= outer["start_ns"].as_u64()
            && inner["end_ns"].as_u64() <= outer["end_ns"].as_u64()
    };
    assert!(within(chat, summarize) && within(summarize, choose) && within(fetch, root));
}

const WAITS: &str = "---
workflow: {id: review}
triggers:
  - {type: webhook, path: /review}
---

```yaml
id: ask
type: wait
mode: approval
title: Ship it?
```

```yaml
id: done
action: core.log
inputs: {message: shipped}
```
";

#[test]
fn a_webhooks_traceparent_is_continued_and_a_run_that_waits_stays_in_its_trace() {
    let d = tempdir();
    let Some(rx) = Receiver::start(d.path()) else {
        return;
    };
    std::fs::write(d.path().join("review.md"), WAITS).unwrap();
    let store = d.path().join("runs.db");
    let mut env = rx.env();
    env.push(("MARKTOFLOW_STORE", store.display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let s = serve(d.path(), &["review.md"], &env);
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let tp = format!("00-{caller_trace}-{caller_span}-01");
    let r = http(
        &s.addr,
        "POST",
        "/review",
        &[("Content-Type", "application/json"), ("traceparent", &tp)],
        b"{}",
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let has = |spans: &[Value], name: &str, n: usize| {
        spans.iter().filter(|s| s["name"] == name).count() >= n
    };
    let spans = rx.wait_until("the first part's span", |s| has(s, "run review", 1));
    let first = named(&spans, "run review");
    assert_eq!(first["trace_id"], caller_trace);
    assert_eq!(first["parent_span_id"], caller_span);
    assert_eq!(first["kind"], 2, "SPAN_KIND_SERVER");
    assert_eq!(first["attributes"]["marktoflow.run.status"], "waiting");
    assert_eq!(first["events"][0]["name"], "waiting");
    // Answered: the run goes on in a second span of the same trace, under
    // its first part and linked to it across the gap.
    let a = http(
        &s.addr,
        "POST",
        &format!("/runs/{id}/steps/ask/answer"),
        &[("Content-Type", "application/json")],
        br#"{"decision": "approve"}"#,
    );
    assert_eq!(a.status, 202, "{}", a.body);
    let spans = rx.wait_until("the second part's spans", |s| {
        has(s, "run review", 2) && has(s, "done", 1)
    });
    let parts: Vec<&Value> = spans.iter().filter(|s| s["name"] == "run review").collect();
    assert_eq!(parts.len(), 2, "{spans:#?}");
    let later = parts[1];
    assert_eq!(later["trace_id"], caller_trace);
    assert_eq!(later["parent_span_id"], first["span_id"]);
    assert_eq!(
        later["links"],
        json!([{"trace_id": caller_trace, "span_id": first["span_id"],
                "attributes": {"marktoflow.link": "resumed"}}])
    );
    assert_eq!(later["attributes"]["marktoflow.run.segment"], "resumed");
    assert_eq!(later["attributes"]["marktoflow.run.status"], "completed");
    assert_eq!(later["attributes"]["marktoflow.trigger"], "webhook");
    let done = named(&spans, "done");
    assert_eq!(done["parent_span_id"], later["span_id"]);
    assert_eq!(done["trace_id"], caller_trace);
    // A retry of the run is a new run in the same trace, linked to it.
    let retry = http(
        &s.addr,
        "POST",
        &format!("/runs/{id}/retry?from=done"),
        &[],
        b"",
    );
    assert_eq!(retry.status, 202, "{}", retry.body);
    let spans = rx.wait_until("the retry's span", |s| has(s, "run review", 3));
    let again = spans
        .iter()
        .filter(|s| s["name"] == "run review")
        .nth(2)
        .unwrap();
    assert_eq!(again["trace_id"], caller_trace);
    assert_eq!(again["parent_span_id"], first["span_id"]);
    assert_eq!(again["attributes"]["marktoflow.retry_of"], id.as_str());
    assert_eq!(again["attributes"]["marktoflow.run.segment"], "retry");
    assert_eq!(again["links"][0]["attributes"]["marktoflow.link"], "retry");
}
