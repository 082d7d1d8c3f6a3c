//! `marktoflow serve`: the real binary on 127.0.0.1, real HTTP requests.

use crate::fake_llm::{lifeos_reply, FakeLlm};
use crate::support::{
    bin, cmd, copy_dir, http, post, repo, serve, serve_supervised, shared, tempdir, wait_for,
    Server,
};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ANSWER: &str = "Answer: The key is APOLLO-KEY-7f3a-EXAMPLE.\nSources: [Work/Projects/Apollo/Overview.md]\nConfidence: high";

fn seed_server(llm: &FakeLlm, extra: &[&str]) -> Server {
    let seed = shared()
        .expect("../shared beside the repository")
        .join("seeds/000_fd4e5c8ba954ba6b.txt");
    let mut args = vec![seed.to_str().unwrap().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    serve(
        &repo(),
        &args,
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
    )
}

#[test]
fn the_seed_trigger_answers_a_post_with_the_answer() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let s = seed_server(&llm, &[]);
    let r = post(
        &s.addr,
        "/lifeos/query",
        json!({"query": "What is the API key for Apollo?", "knowledge_base": "examples/lifeos", "max_results": "3"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j["status"], "completed");
    assert_eq!(
        j["outputs"]["answer"],
        "The key is APOLLO-KEY-7f3a-EXAMPLE."
    );
    assert_eq!(j["outputs"]["confidence"], json!(90));
    let sources = j["outputs"]["sources"].as_array().unwrap();
    assert!(
        !sources.is_empty() && sources.len() <= 3,
        "max_results \"3\" became the number 3: {sources:?}"
    );
    assert_eq!(llm.requests()[0].model(), "claude-haiku-4-5-20251001");

    // The run is queryable afterwards.
    let id = j["run_id"].as_str().unwrap();
    let r = http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "completed");

    let r = http(&s.addr, "GET", "/health", &[], b"");
    assert_eq!(r.json()["status"], "ok");
    let r = http(&s.addr, "GET", "/workflows", &[], b"");
    let w = &r.json()["workflows"][0];
    assert_eq!(
        (w["method"].as_str(), w["path"].as_str()),
        (Some("POST"), Some("/lifeos/query"))
    );
    let query = &w["inputs"][0];
    assert_eq!(
        [
            &query["name"],
            &query["type"],
            &query["required"],
            &query["default"],
            &query["description"]
        ],
        [
            &json!("query"),
            &json!("string"),
            &json!(true),
            &Value::Null,
            &json!("The question to answer")
        ]
    );
    assert_eq!(w["routes"][0]["path"], "/lifeos/query");
}

#[test]
fn a_request_cannot_widen_the_sandbox() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let s = seed_server(&llm, &[]);
    let r = post(
        &s.addr,
        "/lifeos/query",
        json!({"query": "What is the API key for Apollo?", "knowledge_base": "/etc"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(
        j["outputs"]["sources"],
        json!([]),
        "nothing under /etc was read"
    );
    assert_eq!(llm.requests().len(), 1, "no answer call: nothing was found");
}

#[test]
fn status_codes_for_bad_requests() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let s = seed_server(&llm, &["--max-body", "2000"]);
    let r = post(&s.addr, "/nope", json!({}));
    assert_eq!(r.status, 404);
    let r = http(&s.addr, "GET", "/lifeos/query", &[], b"");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
    let r = http(
        &s.addr,
        "POST",
        "/lifeos/query",
        &[("Content-Type", "application/json")],
        b"{\"query\": ",
    );
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));
    let r = post(&s.addr, "/lifeos/query", json!({"max_results": "many"}));
    assert_eq!(r.status, 400, "{}", r.body);
    let fields: Vec<String> = r.json()["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["input"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(fields, ["max_results", "query"], "{}", r.body);
    // A request is told how to send the missing input, not the CLI's flag.
    let hint = r.json()["fields"][1]["hint"].as_str().unwrap().to_string();
    assert!(
        hint.starts_with(
            "send it as `\"query\": <string>` in the JSON body, or `?query=` in the query"
        ),
        "{hint}"
    );
    assert!(!hint.contains("--input"), "{hint}");
    let big = json!({"query": "x".repeat(5000)});
    let r = post(&s.addr, "/lifeos/query", big);
    assert_eq!(r.status, 413);
    assert_eq!(llm.requests().len(), 0, "no bad request ran anything");
}

#[test]
fn async_runs_answer_202_and_stream_their_events() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let s = seed_server(&llm, &[]);
    let r = http(
        &s.addr,
        "POST",
        "/lifeos/query",
        &[
            ("Content-Type", "application/json"),
            ("Prefer", "respond-async"),
        ],
        json!({"query": "What is the API key for Apollo?", "knowledge_base": "examples/lifeos"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let start = Instant::now();
    let done = loop {
        let j = http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json();
        if j["status"] != "running" && j["status"] != "queued" {
            break j;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "run never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(done["status"], "completed");
    assert_eq!(done["outputs"]["confidence"], json!(90));
    let r = http(&s.addr, "GET", &format!("/runs/{id}/events"), &[], b"");
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let kinds: Vec<String> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| {
            serde_json::from_str::<Value>(d).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished"));
    assert_eq!(
        kinds.iter().filter(|k| *k == "step_started").count(),
        kinds.iter().filter(|k| *k == "step_finished").count()
    );
    let r = http(&s.addr, "GET", "/runs/no-such-run", &[], b"");
    assert_eq!(r.status, 404);
}

#[test]
fn signed_triggers_need_a_valid_hmac() {
    let d = tempdir();
    let wf = include_str!("fixtures/server/signed.md");
    std::fs::write(d.path().join("signed.md"), wf).unwrap();
    let s = serve(d.path(), &["."], &[("HOOK_SECRET", "s3cret")]);
    let body = br#"{"n": 21}"#;
    let r = http(&s.addr, "POST", "/signed", &[], body);
    assert_eq!(r.status, 401, "missing signature");
    let r = http(
        &s.addr,
        "POST",
        "/signed",
        &[("X-Hub-Signature-256", "sha256=00")],
        body,
    );
    assert_eq!(r.status, 401, "bad signature");
    let sig = hmac_sha256_hex(b"s3cret", body);
    let r = http(
        &s.addr,
        "POST",
        "/signed",
        &[("X-Hub-Signature-256", &format!("sha256={sig}"))],
        body,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["outputs"]["out"], json!({"doubled": 42}));
}

#[test]
fn webhook_events_select_which_requests_start_a_run() {
    let d = tempdir();
    let wf = include_str!("fixtures/server/pr.md");
    std::fs::write(d.path().join("pr.md"), wf).unwrap();
    let s = serve(d.path(), &["."], &[]);
    let send = |event: &str, body: Value| {
        http(
            &s.addr,
            "POST",
            "/github",
            &[
                ("Content-Type", "application/json"),
                ("X-GitHub-Event", event),
            ],
            body.to_string().as_bytes(),
        )
    };
    // GitHub's ping, and an action not listed: accepted, nothing runs.
    let r = send("ping", json!({"zen": "Keep it simple."}));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["ignored"], true);
    assert_eq!(r.json()["event"], "ping");
    let r = send("pull_request", json!({"action": "closed", "number": 7}));
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["event"], "pull_request.closed");
    // Listed: `pull_request.opened` exactly, `issues` with any action.
    let r = send("pull_request", json!({"action": "opened", "number": 7}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["outputs"]["out"], json!({"seen": 7}));
    let r = send("issues", json!({"action": "labeled", "number": 9}));
    assert_eq!(r.status, 200, "{}", r.body);
    // Without the header, the body's `type` names the event.
    let r = post(&s.addr, "/github", json!({"type": "deployment"}));
    assert_eq!(r.status, 202, "{}", r.body);
}

#[test]
fn duplicate_routes_are_a_startup_error_naming_both_files() {
    let d = tempdir();
    let wf = |id: &str| {
        format!("---\nworkflow: {{id: {id}}}\ntriggers:\n  - {{type: webhook, path: /same}}\n---\n\n```yaml\naction: workflow.noop\n```\n")
    };
    std::fs::write(d.path().join("a.md"), wf("a")).unwrap();
    std::fs::write(d.path().join("b.md"), wf("b")).unwrap();
    let out = Command::new(bin())
        .current_dir(d.path())
        .args(["serve", ".", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("b.md:") && err.contains("route `POST /same` is already served by `./a.md`"),
        "{err}"
    );
}

/// HMAC-SHA256 by openssl, so the test does not trust the server's own code.
fn hmac_sha256_hex(key: &[u8], msg: &[u8]) -> String {
    let out = Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac"])
        .arg(std::str::from_utf8(key).unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(msg)?;
            c.wait_with_output()
        })
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.trim().rsplit(' ').next().unwrap().to_string()
}

#[test]
fn an_idempotency_key_returns_the_same_run() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let s = seed_server(&llm, &[]);
    let body =
        json!({"query": "What is the API key for Apollo?", "knowledge_base": "examples/lifeos"})
            .to_string();
    let send = |key: &str| {
        http(
            &s.addr,
            "POST",
            "/lifeos/query",
            &[
                ("Content-Type", "application/json"),
                ("Idempotency-Key", key),
            ],
            body.as_bytes(),
        )
        .json()
    };
    let a = send("order-42");
    let b = send("order-42");
    assert_eq!(a["run_id"], b["run_id"]);
    assert_eq!(b["outputs"]["confidence"], json!(90));
    assert_eq!(llm.requests().len(), 2, "the second request ran nothing");
    let c = send("order-43");
    assert_ne!(a["run_id"], c["run_id"]);
    assert_eq!(llm.requests().len(), 4);
}

#[test]
fn schedules_are_checked_at_start() {
    let d = tempdir();
    let wf = include_str!("fixtures/server/nightly.md");
    std::fs::write(d.path().join("nightly.md"), wf).unwrap();
    let s = serve(d.path(), &["."], &[]);
    let r = http(&s.addr, "GET", "/health", &[], b"");
    assert_eq!(
        r.json()["status"],
        "ok",
        "a server with only schedule triggers runs"
    );
    drop(s);
    std::fs::write(
        d.path().join("nightly.md"),
        wf.replace("0 3 * * *", "0 25 * * *"),
    )
    .unwrap();
    let out = Command::new(bin())
        .current_dir(d.path())
        .args(["serve", ".", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nightly.md:4:5: error: invalid cron expression: `25` is out of range for the hour (0-23)"), "{err}");
}

/// A webhook workflow that sleeps `ms` milliseconds; `limit` runs at once.
fn sleeper(dir: &Path, limit: u32) {
    let wf = format!(
        "---\nworkflow: {{id: slow}}\ntriggers:\n  - type: webhook\n    path: /slow\n    max_concurrent: {limit}\ninputs:\n  ms: {{type: number, default: 400}}\n---\n\n```yaml\naction: workflow.sleep\ninputs: {{duration: '{{{{ inputs.ms }}}}ms'}}\n```\n\n```yaml\naction: core.set\ninputs: {{done: true}}\n```\n"
    );
    std::fs::write(dir.join("slow.md"), wf).unwrap();
}

fn sigterm(s: &Server) {
    let ok = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn exit_code_within(s: &mut Server, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            return st.code();
        }
        assert!(start.elapsed() < limit, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn runs_beyond_a_workflow_limit_wait_in_a_bounded_queue() {
    let d = tempdir();
    sleeper(d.path(), 1);
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let s = serve(
        d.path(),
        &[".", "--max-queue", "2"],
        &[("MARKTOFLOW_STORE", store_env.as_str())],
    );
    let ids: Vec<String> = (0..3)
        .map(|_| {
            let r = post(&s.addr, "/slow?async=true", json!({"ms": 1500}));
            assert_eq!(r.status, 202, "{}", r.body);
            r.json()["run_id"].as_str().unwrap().to_string()
        })
        .collect();
    let status =
        |id: &str| http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json()["status"].clone();
    // One of them (whichever got the slot) runs; the other two wait.
    wait_for("a run starts", || {
        ids.iter().any(|id| status(id) == "running")
    });
    let mut states: Vec<String> = ids
        .iter()
        .map(|id| status(id).as_str().unwrap().to_string())
        .collect();
    states.sort();
    assert_eq!(states, ["queued", "queued", "running"]);
    // The queue holds two: a fourth request is turned away, not dropped later.
    let r = post(&s.addr, "/slow?async=true", json!({"ms": 1500}));
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("1"));
    // Never more than one run of the workflow at a time, until all complete.
    let mut seen_queued = Vec::new();
    wait_for("every run completes", || {
        let h = http(&s.addr, "GET", "/health", &[], b"").json();
        assert!(h["running"].as_u64().unwrap() <= 1, "{h}");
        seen_queued.push(h["queued"].as_u64().unwrap());
        ids.iter().all(|id| status(id) == "completed")
    });
    assert!(
        seen_queued.windows(2).all(|w| w[1] <= w[0]),
        "{seen_queued:?}"
    );
    // The refused request left no trace: three runs in the store, all done.
    let h = store_history(d.path(), &store);
    let runs = h["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{h}");
    assert!(runs.iter().all(|r| r["status"] == "completed"), "{h}");
}

#[test]
fn sigterm_lets_runs_in_flight_finish() {
    let d = tempdir();
    sleeper(d.path(), 4);
    let mut s = serve(d.path(), &[".", "--grace-period", "20"], &[]);
    let addr = s.addr.clone();
    let pending = std::thread::spawn(move || post(&addr, "/slow", json!({"ms": 800})));
    wait_for("the run starts", || {
        http(&s.addr, "GET", "/health", &[], b"").json()["running"] == 1
    });
    sigterm(&s);
    let r = pending.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "completed", "{}", r.body);
    assert_eq!(r.json()["steps"].as_array().unwrap().len(), 2);
    assert_eq!(exit_code_within(&mut s, Duration::from_secs(20)), Some(0));
}

#[test]
fn sigterm_cancels_runs_past_the_grace_period() {
    let d = tempdir();
    sleeper(d.path(), 4);
    let mut s = serve(d.path(), &[".", "--grace-period", "1"], &[]);
    let addr = s.addr.clone();
    let pending = std::thread::spawn(move || post(&addr, "/slow", json!({"ms": 60000})));
    wait_for("the run starts", || {
        http(&s.addr, "GET", "/health", &[], b"").json()["running"] == 1
    });
    sigterm(&s);
    let r = pending.join().unwrap();
    assert_eq!(r.status, 500, "{}", r.body);
    assert_eq!(r.json()["status"], "cancelled", "{}", r.body);
    assert_eq!(exit_code_within(&mut s, Duration::from_secs(20)), Some(0));
}

#[test]
fn file_watch_runs_the_workflow_with_the_changed_paths() {
    let d = tempdir();
    std::fs::create_dir_all(d.path().join("notes/sub")).unwrap();
    std::fs::create_dir_all(d.path().join("out")).unwrap();
    let wf = include_str!("fixtures/server/on-change.md");
    std::fs::write(d.path().join("watch.md"), wf).unwrap();
    let out = d.path().join("out");
    let _s = serve(
        d.path(),
        &["watch.md", "--allow-write", out.to_str().unwrap()],
        &[],
    );
    // Give the watcher a moment to be in place before the first change.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(d.path().join("notes/a.md"), "# A").unwrap();
    std::fs::write(d.path().join("notes/sub/b.md"), "# B").unwrap();
    std::fs::write(d.path().join("notes/c.txt"), "not markdown").unwrap();
    let read = |n: usize| -> Option<Value> {
        let text = std::fs::read_to_string(out.join(format!("run-{n}.json"))).ok()?;
        serde_json::from_str(&text).ok()
    };
    wait_for("the first run", || read(0).is_some());
    assert_eq!(
        read(0).unwrap(),
        json!(["notes/a.md", "notes/sub/b.md"]),
        "one run for the burst of changes"
    );
    std::fs::write(d.path().join("notes/a.md"), "# A, again").unwrap();
    wait_for("the second run", || read(1).is_some());
    assert_eq!(read(1).unwrap(), json!(["notes/a.md"]));
    // No run without a change: the next run is the next change's alone.
    std::fs::write(d.path().join("notes/d.md"), "# D").unwrap();
    wait_for("the third run", || read(2).is_some());
    assert_eq!(read(2).unwrap(), json!(["notes/d.md"]));
}

#[test]
fn file_watch_triggers_are_checked_at_start() {
    let d = tempdir();
    let wf = include_str!("fixtures/server/w.md");
    std::fs::write(d.path().join("w.md"), wf).unwrap();
    let out = Command::new(bin())
        .current_dir(d.path())
        .args(["serve", "w.md", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("w.md:4:5: error: `missing/*.md`: the folder"),
        "{err}"
    );
    std::fs::create_dir(d.path().join("missing")).unwrap();
    let out = Command::new(bin())
        .current_dir(d.path())
        .args(["serve", "w.md", "--port", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("w.md:4:5: error: the input `changed_paths` receives the changed paths, so it must be `type: array`, not `string`"), "{err}");
}

#[test]
fn serve_says_at_start_which_file_writes_will_be_refused() {
    let d = tempdir();
    let wf = include_str!("fixtures/server/nightly-2.md");
    std::fs::write(d.path().join("nightly.md"), wf).unwrap();
    // Without `--allow-write`: said now, not at 07:00 when the step runs.
    let s = serve(d.path(), &["nightly.md"], &[]);
    assert!(
        s.banner.contains(
            "nightly.md:9:16: warning: `file.write` to `reports/daily.md` will be refused"
        ) && s.banner.contains("run with `--allow-write reports`"),
        "{}",
        s.banner
    );
    drop(s);
    let s = serve(d.path(), &["nightly.md", "--allow-write", "reports"], &[]);
    assert!(!s.banner.contains("will be refused"), "{}", s.banner);
}

/// Appends `{tag}-1`, waits `ms`, appends `{tag}-3`: a step that ran twice
/// would show twice in `log.txt`.
fn chain(dir: &Path) {
    let wf = r#"---
workflow: {id: chain}
triggers:
  - {type: webhook, path: /chain, response: async, max_concurrent: 1}
inputs:
  tag: {type: string}
  ms: {type: number, default: 1500}
---

## One

```yaml
action: file.write
inputs: {path: 'log.txt', content: "{{ inputs.tag }}-1\n", append: true}
```

## Two

```yaml
action: workflow.sleep
inputs: {duration: '{{ inputs.ms }}'}
```

## Three

```yaml
action: file.write
inputs: {path: 'log.txt', content: "{{ inputs.tag }}-3\n", append: true}
```
"#;
    std::fs::write(dir.join("chain.md"), wf).unwrap();
}

fn log_lines(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(dir.join("log.txt"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    v.sort();
    v
}

/// How many runs in `store` have a committed checkpoint before top-level
/// step `next_step` (0-based), read straight from the file.
fn checkpoints_before(store: &Path, next_step: usize) -> i64 {
    let Ok(c) =
        rusqlite::Connection::open_with_flags(store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    c.query_row(
        "SELECT count(*) FROM checkpoints WHERE next_step = ?1",
        [next_step as i64],
        |r| r.get(0),
    )
    .unwrap_or(0)
}

fn store_history(dir: &Path, store: &Path) -> Value {
    let out = Command::new(bin())
        .current_dir(dir)
        .args(["history", "--json", "--store"])
        .arg(store)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_killed_server_resumes_accepted_runs_without_repeating_finished_steps() {
    let d = tempdir();
    chain(d.path());
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let env = [("MARKTOFLOW_STORE", store_env.as_str())];
    let args = ["chain.md", "--allow-write", dir.as_str()];
    let s = serve(d.path(), &args, &env);
    let a = post(&s.addr, "/chain", json!({"tag": "a"}));
    let b = post(&s.addr, "/chain", json!({"tag": "b"}));
    assert_eq!((a.status, b.status), (202, 202));
    let (a, b) = (a.json()["run_id"].clone(), b.json()["run_id"].clone());
    // Accepted means committed: both are in the store before any step ran.
    let h = store_history(d.path(), &store);
    assert_eq!(h["runs"].as_array().unwrap().len(), 2, "{h}");
    // Whichever got the slot first has done step one; the other waits.
    wait_for("a first step", || log_lines(d.path()).len() == 1);
    // Once the checkpoint after step one is committed, kill -9 mid-step-two.
    wait_for("the checkpoint after step one", || {
        checkpoints_before(&store, 1) == 1
    });
    drop(s);
    let h = store_history(d.path(), &store);
    let shown: Vec<&str> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(shown, ["interrupted", "interrupted"], "{h}");
    // A new server finishes both: a from step two, b from the start.
    let s = serve(d.path(), &args, &env);
    wait_for("both runs finish", || log_lines(d.path()).len() == 4);
    assert_eq!(
        log_lines(d.path()),
        ["a-1", "a-3", "b-1", "b-3"],
        "every step exactly once"
    );
    for id in [&a, &b] {
        let id = id.as_str().unwrap();
        wait_for("completed", || {
            http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json()["status"] == "completed"
        });
    }
    let out = Command::new(bin())
        .current_dir(d.path())
        .args(["show", a.as_str().unwrap(), "--json", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "completed", "{shown}");
    let steps: Vec<&str> = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step_id"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["one", "two", "three"], "{shown}");
}

/// How many times a process died while running `run_id`, read straight
/// from the store's file.
fn deaths_of(store: &Path, run_id: &str) -> i64 {
    let Ok(c) =
        rusqlite::Connection::open_with_flags(store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    c.query_row("SELECT deaths FROM runs WHERE id = ?1", [run_id], |r| {
        r.get(0)
    })
    .unwrap_or(0)
}

/// Writes what a process that aborted inside `run_id` leaves in its owner
/// lock file (`store::death`), for the owner of that run in the store.
fn aborted_inside(store: &Path, run_id: &str) {
    let c =
        rusqlite::Connection::open_with_flags(store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let owner: String = c
        .query_row("SELECT owner FROM runs WHERE id = ?1", [run_id], |r| {
            r.get(0)
        })
        .unwrap();
    let file = store.with_file_name("runs.db.owners").join(owner);
    assert!(file.exists(), "the dead owner's lock file stays");
    std::fs::write(file, format!("run {run_id}\n")).unwrap();
}

#[test]
fn a_run_that_aborted_its_process_twice_is_failed_and_the_runs_beside_it_are_not() {
    let d = tempdir();
    chain(d.path());
    let wf = std::fs::read_to_string(d.path().join("chain.md")).unwrap();
    std::fs::write(
        d.path().join("chain.md"),
        wf.replace("max_concurrent: 1", "max_concurrent: 2"),
    )
    .unwrap();
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let env = [("MARKTOFLOW_STORE", store_env.as_str())];
    let args = ["chain.md", "--allow-write", dir.as_str()];
    let s = serve(d.path(), &args, &env);
    let run = |tag: &str, ms: u64| {
        let r = post(&s.addr, "/chain", json!({"tag": tag, "ms": ms}));
        assert_eq!(r.status, 202);
        r.json()["run_id"].as_str().unwrap().to_string()
    };
    // One after the other: both append to one log file.
    let culprit = run("a", 600000);
    wait_for("the culprit in step two", || {
        checkpoints_before(&store, 1) == 1
    });
    let beside = run("b", 15000);
    wait_for("both in step two", || checkpoints_before(&store, 1) == 2);
    let status_of = |s: &Server, id: &str| {
        http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json()["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    // A death the culprit is blamed for (its process aborted inside it, as
    // its owner file says), with the other run executing beside it.
    drop(s);
    aborted_inside(&store, &culprit);
    let s = serve(d.path(), &args, &env);
    wait_for("the death counted", || deaths_of(&store, &culprit) == 2);
    wait_for("both resumed", || {
        status_of(&s, &culprit) == "running" && status_of(&s, &beside) == "running"
    });
    assert_eq!(
        deaths_of(&store, &beside),
        0,
        "the run beside it is not blamed"
    );
    // The second: the culprit is failed, the other run resumed again.
    drop(s);
    aborted_inside(&store, &culprit);
    let s = serve(d.path(), &args, &env);
    wait_for("the culprit failed", || status_of(&s, &culprit) == "failed");
    let shown = http(&s.addr, "GET", &format!("/runs/{culprit}"), &[], b"").json();
    assert_eq!(
        shown["error"]["message"],
        "not resumed: the process died while running it too often (it aborted inside this run twice, or was killed four times)",
        "{shown}"
    );
    assert_eq!(status_of(&s, &beside), "running");
    assert_eq!(deaths_of(&store, &beside), 0);
    // A death nobody is to blame for (kill -9) weighs 1: still resumed.
    drop(s);
    let s = serve(d.path(), &args, &env);
    wait_for("the unexplained death counted", || {
        deaths_of(&store, &beside) == 1
    });
    wait_for("the run beside it completes", || {
        status_of(&s, &beside) == "completed"
    });
    assert_eq!(status_of(&s, &culprit), "failed");
    drop(s);
    // The culprit never got past step one; the other run finished.
    let mut lines = log_lines(d.path());
    lines.sort();
    assert_eq!(lines, ["a-1", "b-1", "b-3"]);
}

#[test]
fn shutdown_keeps_queued_runs_for_the_next_start() {
    let d = tempdir();
    chain(d.path());
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let env = [("MARKTOFLOW_STORE", store_env.as_str())];
    let args = [
        "chain.md",
        "--allow-write",
        dir.as_str(),
        "--grace-period",
        "1",
    ];
    let mut s = serve(d.path(), &args, &env);
    assert_eq!(
        post(&s.addr, "/chain", json!({"tag": "a", "ms": 60000})).status,
        202
    );
    assert_eq!(
        post(&s.addr, "/chain", json!({"tag": "b", "ms": 10})).status,
        202
    );
    wait_for("run a starts", || log_lines(d.path()) == ["a-1"]);
    sigterm(&s);
    assert_eq!(exit_code_within(&mut s, Duration::from_secs(20)), Some(0));
    let h = store_history(d.path(), &store);
    let mut states: Vec<String> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_string())
        .collect();
    states.sort();
    // a ran past the grace period and was cancelled; b never started.
    assert_eq!(states, ["cancelled", "interrupted"], "{h}");
    drop(s);
    let _s = serve(d.path(), &args, &env);
    wait_for("b runs after the restart", || {
        log_lines(d.path()).len() == 3
    });
    assert_eq!(log_lines(d.path()), ["a-1", "b-1", "b-3"]);
}

#[test]
fn luka_memory_workflows_answer_webhooks() {
    let d = tempdir();
    copy_dir(&repo().join("workflows/luka"), &d.path().join("luka"));
    copy_dir(&repo().join("examples/luka/notes"), &d.path().join("notes"));
    let s = serve(d.path(), &["luka"], &[]);
    let r = post(
        &s.addr,
        "/luka/remember",
        json!({"text": "The staging database password rotates every Monday", "kind": "fact", "importance": "0.9", "tags": "ops, staging"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["outputs"]["count"], 1);
    // The default database is in the state folder (no `.marktoflow/` above
    // the served folder here: the per-user one, which the test points at).
    assert!(d.path().join(".marktoflow/memory.db").is_file());
    assert!(!d.path().join("luka/.marktoflow").exists());
    let r = post(
        &s.addr,
        "/luka/recall",
        json!({"query": "when does the staging password rotate", "notes": "notes"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let out = &r.json()["outputs"];
    assert!(
        out["hits"][0]["text"]
            .as_str()
            .unwrap()
            .contains("every Monday"),
        "{out}"
    );
    assert_eq!(out["hits"][0]["query_count"], 1);
    // A request cannot point the database outside the write roots.
    let r = post(
        &s.addr,
        "/luka/remember",
        json!({"text": "x", "db": "/tmp/luka-escape.db"}),
    );
    assert_eq!(r.status, 500, "{}", r.body);
    assert!(r.body.contains("--allow-write"), "{}", r.body);
    assert!(!Path::new("/tmp/luka-escape.db").exists());
}

/// Sleeps `ms`, then fails when asked; guarded by a bearer token.
const GUARDED: &str = r#"---
workflow: {id: guarded}
triggers:
  - {type: webhook, path: /guarded, token_env: HOOK_TOKEN}
inputs:
  ms: {type: number, default: 0}
  fail: {type: boolean, default: false}
---

## Wait

```yaml
action: workflow.sleep
inputs: {duration: '{{ inputs.ms }}'}
```

## Maybe fail

```yaml
type: if
condition: '{{ inputs.fail }}'
then:
  - id: refuse
    action: workflow.fail
    inputs: {message: asked to fail}
```
"#;

#[test]
fn bearer_tokens_failed_runs_and_request_timeouts() {
    let d = tempdir();
    std::fs::write(d.path().join("guarded.md"), GUARDED).unwrap();
    let s = serve(
        d.path(),
        &["guarded.md", "--request-timeout", "1"],
        &[("HOOK_TOKEN", "s3cret")],
    );
    let send = |token: Option<&str>, body: Value| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        http(
            &s.addr,
            "POST",
            "/guarded",
            &headers,
            body.to_string().as_bytes(),
        )
    };
    assert_eq!(send(None, json!({})).status, 401);
    let r = send(Some("s3cret-not"), json!({}));
    assert_eq!(r.status, 401);
    assert!(r.body.contains("bearer token"), "{}", r.body);
    let r = send(Some("s3cret"), json!({}));
    assert_eq!((r.status, &r.json()["status"]), (200, &json!("completed")));
    // The scheme's case does not matter (RFC 9110); the token's does.
    for (auth, want) in [
        ("bearer s3cret", 200),
        ("BEARER s3cret", 200),
        ("bearer S3CRET", 401),
    ] {
        let r = http(
            &s.addr,
            "POST",
            "/guarded",
            &[
                ("Content-Type", "application/json"),
                ("Authorization", auth),
            ],
            b"{}",
        );
        assert_eq!(r.status, want, "{auth}: {}", r.body);
    }
    // A body declared larger than the limit is refused before it is sent.
    let mut raw = TcpStream::connect(&s.addr).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    raw.write_all(b"POST /guarded HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Length: 99999999999\r\n\r\n")
        .unwrap();
    let mut head = [0u8; 12];
    raw.read_exact(&mut head).unwrap();
    assert_eq!(
        &head, b"HTTP/1.1 413",
        "answered without waiting for the body"
    );
    // A failed run: 500, naming the step and where it is.
    let r = send(Some("s3cret"), json!({"fail": true}));
    assert_eq!(r.status, 500, "{}", r.body);
    let err = &r.json()["error"];
    assert_eq!(err["step"], "refuse", "{err}");
    assert!(err["message"].as_str().unwrap().contains("asked to fail"));
    assert_eq!(
        (err["line"].as_u64(), &err["file"]),
        (Some(24), &json!("guarded.md")),
        "{err}"
    );
    // Slower than --request-timeout: 504, and the run goes on to complete.
    let r = send(Some("s3cret"), json!({"ms": 2500}));
    assert_eq!(r.status, 504, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    wait_for("the slow run completes", || {
        http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json()["status"] == "completed"
    });
}

#[test]
fn schedules_fire_with_their_inputs_and_are_recorded() {
    let d = tempdir();
    // Every second (six fields, the seconds first).
    let wf = include_str!("fixtures/server/every-minute.md");
    std::fs::write(d.path().join("tick.md"), wf).unwrap();
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let _s = serve(
        d.path(),
        &["tick.md", "--allow-write", dir.as_str()],
        &[("MARKTOFLOW_STORE", store_env.as_str())],
    );
    let fired = d.path().join("fired.txt");
    wait_for("a tick", || {
        std::fs::read_to_string(&fired).is_ok_and(|t| t.starts_with("quick"))
    });
    // Each tick wrote the trigger's input (the text's trailing newline is
    // trimmed by the template).
    let text = std::fs::read_to_string(&fired).unwrap();
    assert!(text.replace("quick", "").trim().is_empty(), "{text}");
    wait_for("a run recorded as completed", || {
        let h = store_history(d.path(), &store);
        h["runs"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["status"] == "completed"))
    });
    let h = store_history(d.path(), &store);
    for r in h["runs"].as_array().unwrap() {
        assert_eq!(r["trigger"], "schedule", "{h}");
        assert_eq!(r["workflow"], "every-minute", "{h}");
    }
}

#[test]
fn the_readme_serve_command_starts_and_answers_the_flagship() {
    // `marktoflow serve workflows/`, as the README says, with every shipped
    // workflow: no two claim a route, and the flagship answers at its path.
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let s = serve(
        &repo(),
        &["workflows/"],
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
    );
    let r = post(
        &s.addr,
        "/lifeos/query",
        json!({"query": "What is the API key for Apollo?"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["outputs"]["answer"],
        "The key is APOLLO-KEY-7f3a-EXAMPLE."
    );
    let r = http(&s.addr, "GET", "/workflows", &[], b"");
    let paths: Vec<String> = r.json()["workflows"]
        .as_array()
        .unwrap()
        .iter()
        // Workflows served without a webhook (schedules, sub-workflows) have none.
        .filter_map(|w| w["path"].as_str().map(str::to_string))
        .collect();
    assert!(
        paths.contains(&"/lifeos/query-indexed".to_string()),
        "{paths:?}"
    );
}

#[test]
fn a_trigger_whose_secret_is_unset_refuses_to_start() {
    // Authentication that cannot be had fails closed: the server does not
    // start, naming the variable (it used to serve the route unauthenticated).
    let d = tempdir();
    for (name, auth) in [
        ("secret.md", "secret: '${HOOK_SECRET}'"),
        ("token.md", "token_env: HOOK_TOKEN"),
    ] {
        let wf = format!("---\nworkflow: {{id: {}}}\ntriggers:\n  - type: webhook\n    path: /{}\n    {auth}\n---\n\n```yaml\naction: workflow.noop\n```\n", &name[..name.len() - 3], &name[..name.len() - 3]);
        std::fs::write(d.path().join(name), wf).unwrap();
        let out = Command::new(bin())
            .current_dir(d.path())
            .args(["serve", name, "--port", "0"])
            .env_remove("HOOK_SECRET")
            .env_remove("HOOK_TOKEN")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        let var = if name == "secret.md" {
            "`HOOK_SECRET`"
        } else {
            "`HOOK_TOKEN`"
        };
        assert!(err.contains(var) && err.contains("is not set"), "{err}");
        // `validate` says the same.
        let v = Command::new(bin())
            .current_dir(d.path())
            .args(["validate", name])
            .env_remove("HOOK_SECRET")
            .env_remove("HOOK_TOKEN")
            .output()
            .unwrap();
        assert_eq!(v.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&v.stderr).contains(var));
    }
    // Set, the same file serves.
    let s = serve(d.path(), &["secret.md"], &[("HOOK_SECRET", "s3cret")]);
    let r = http(&s.addr, "POST", "/secret", &[], b"{}");
    assert_eq!(r.status, 401, "unsigned requests are refused");
}

#[test]
fn serving_a_folder_without_an_api_key_leaves_out_only_the_agent_workflows() {
    // A new user's `serve workflows/` with no key: the workflows that need
    // a model are left out (saying so); the others answer.
    let s = serve(&repo(), &["workflows/"], &[]);
    let r = post(&s.addr, "/atlas/versions", json!({}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "completed");
    let r = post(&s.addr, "/lifeos/query", json!({"query": "x"}));
    assert_eq!(r.status, 404, "{}", r.body);
    // Named on the command line, an agent workflow without a provider is an error.
    // (`cmd` clears the provider variables and any local model.)
    let out = cmd(&repo())
        .args(["serve", "workflows/lifeos/retrieval.md", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ANTHROPIC_API_KEY"));
}

/// Templates driven by request data run where they cannot stop the server:
/// while runs are busy rendering, `/health` answers (and sees them running).
#[test]
fn runs_busy_rendering_do_not_stop_the_server_from_answering() {
    let d = tempdir();
    let wf = include_str!("fixtures/server/heavy.md");
    std::fs::write(d.path().join("heavy.md"), wf).unwrap();
    let s = serve(
        d.path(),
        &[
            "heavy.md",
            "--max-concurrent",
            "4",
            "--max-concurrent-per-workflow",
            "4",
        ],
        &[],
    );
    // More busy runs than the machine has cores; each ends when its
    // template's fuel runs out.
    let ids: Vec<String> = (0..4)
        .map(|_| {
            // 10^10 iterations: far more than the fuel allows.
            let r = post(&s.addr, "/heavy", json!({"n": 100_000}));
            assert_eq!(r.status, 202, "{}", r.body);
            r.json()["run_id"].as_str().unwrap().to_string()
        })
        .collect();
    // Answered while at least two runs render (as many as a small machine
    // has cores): the threads that answer are not the ones that render.
    wait_for("an answer while two runs render", || {
        http(&s.addr, "GET", "/health", &[], b"").json()["running"].as_u64() >= Some(2)
    });
    for id in &ids {
        wait_for("the run ends", || {
            let j = http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json();
            j["status"] == "failed"
        });
        let j = http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json();
        assert!(j["error"].to_string().contains("too much work"), "{j}");
    }
}

/// A template in a request that would build a text of gigabytes (or abort
/// the process when the allocation fails) fails its run with the cap named,
/// and the server goes on answering.
#[test]
fn a_request_that_grows_a_text_or_an_integer_past_the_cap_is_refused_and_the_server_lives() {
    let d = tempdir();
    let wf = include_str!("fixtures/server/letter.md");
    std::fs::write(d.path().join("letter.md"), wf).unwrap();
    let s = serve(d.path(), &["letter.md"], &[]);
    for t in [
        "{{ 'x'.padStart(100000000000) }}",
        "{{ 'ab'.repeat(40000000) }}",
        "{{ 'x'.repeat(1000000) | regex_replace('/x/g', '$&$&$&$&$&$&$&$&$&$&$&$&$&$&$&$&$&$&$&$&$&') }}",
        "{{ 'abc'.replaceAll('', 'y'.repeat(10000000)) }}",
    ] {
        let r = post(&s.addr, "/letter", json!({ "t": t }));
        assert_eq!(r.status, 500, "{t}: {}", r.body);
        let msg = r.json()["error"]["message"].as_str().unwrap_or("").to_string();
        assert!(msg.contains("over the 16 MiB one template text may hold"), "{t}: {msg}");
        assert_eq!(http(&s.addr, "GET", "/health", &[], b"").status, 200);
    }
    let r = post(
        &s.addr,
        "/letter",
        json!({"t": "{{ 'ok'.padStart(4, '-') }}"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // A number too large for an integer input is refused, not clamped.
    let r = post(&s.addr, "/letter", json!({"t": "x", "n": 1e308}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("is out of range for an integer"),
        "{}",
        r.body
    );
    let r = post(&s.addr, "/letter", json!({"t": "x", "n": 9e18}));
    assert_eq!(r.status, 200, "{}", r.body);
}

/// A server killed with -9 and not yet reaped (a zombie, whose process id
/// still exists) owns nothing: a server started right after resumes its
/// accepted runs at once, because ownership is a lock the kernel dropped.
#[test]
fn a_restart_right_after_kill_9_resumes_even_while_the_old_process_is_a_zombie() {
    let d = tempdir();
    chain(d.path());
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let env = [("MARKTOFLOW_STORE", store_env.as_str())];
    let args = ["chain.md", "--allow-write", dir.as_str()];
    let old = serve(d.path(), &args, &env);
    let a = post(&old.addr, "/chain", json!({"tag": "a"}));
    assert_eq!(a.status, 202, "{}", a.body);
    wait_for("a first step", || log_lines(d.path()).len() == 1);
    // kill -9, and no wait: the old process stays a zombie meanwhile.
    let killed = Command::new("kill")
        .args(["-9", &old.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(
        std::path::Path::new(&format!("/proc/{}", old.child.id())).exists(),
        "still a zombie"
    );
    let new = serve(d.path(), &args, &env);
    let id = a.json()["run_id"].as_str().unwrap().to_string();
    wait_for("the run is resumed and completes", || {
        http(&new.addr, "GET", &format!("/runs/{id}"), &[], b"").json()["status"] == "completed"
    });
    assert_eq!(
        log_lines(d.path()),
        ["a-1", "a-3"],
        "every step exactly once"
    );
    drop(old);
}

/// Keys are kept with their runs in the store: after a restart, a repeated
/// request gets the run it started, and nothing runs twice.
#[test]
fn an_idempotency_key_survives_a_restart() {
    let d = tempdir();
    let wf = include_str!("fixtures/server/once.md");
    std::fs::write(d.path().join("once.md"), wf).unwrap();
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let env = [("MARKTOFLOW_STORE", store_env.as_str())];
    let args = ["once.md", "--allow-write", dir.as_str()];
    let send = |addr: &str, key: &str| {
        http(
            addr,
            "POST",
            "/once",
            &[
                ("Content-Type", "application/json"),
                ("Idempotency-Key", key),
            ],
            b"{}",
        )
    };
    let mut s = serve(d.path(), &args, &env);
    let first = send(&s.addr, "pay-7");
    assert_eq!(first.status, 200, "{}", first.body);
    // Stopped as a supervisor stops it: what is queued for the store is written.
    sigterm(&s);
    assert_eq!(exit_code_within(&mut s, Duration::from_secs(30)), Some(0));
    drop(s);
    let s = serve(d.path(), &args, &env);
    let again = send(&s.addr, "pay-7");
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["run_id"], first.json()["run_id"]);
    assert_eq!(again.json()["outputs"], json!({"done": true}));
    assert_eq!(
        std::fs::read_to_string(d.path().join("ran.txt")).unwrap(),
        "x",
        "ran once"
    );
    // Another key is another run.
    assert_eq!(send(&s.addr, "pay-8").status, 200);
    assert_eq!(
        std::fs::read_to_string(d.path().join("ran.txt")).unwrap(),
        "xx"
    );
}

/// Sixteen requests with one key at once, spread over two servers of one
/// store: exactly one run executes, and every caller gets its answer.
#[test]
fn concurrent_requests_with_one_idempotency_key_run_once_across_servers() {
    let d = tempdir();
    crate::support::once_workflow(d.path());
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let env = [("MARKTOFLOW_STORE", store_env.as_str())];
    let args = ["once.md", "--allow-write", dir.as_str()];
    let a = serve(d.path(), &args, &env);
    let b = serve(d.path(), &args, &env);
    let answers = crate::support::post_once_at_once(&[&a.addr, &b.addr]);
    assert_eq!(
        std::fs::read_to_string(d.path().join("ran.txt")).unwrap(),
        "x",
        "one execution"
    );
    let first = &answers[0];
    assert_eq!(first["status"], "completed", "{first}");
    assert_eq!(first["outputs"], json!({"done": true}));
    for other in &answers {
        assert_eq!(other, first, "every caller gets the same answer");
    }
    let h = store_history(d.path(), &store);
    assert_eq!(h["runs"].as_array().unwrap().len(), 1, "{h}");
}

/// A client that never finishes its headers is cut off (after 10 s), not
/// kept for ever.
#[test]
fn a_client_that_sends_headers_slowly_is_cut_off() {
    let d = tempdir();
    sleeper(d.path(), 1);
    let s = serve(d.path(), &["."], &[]);
    let mut slow = TcpStream::connect(&s.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    slow.write_all(b"POST /slow HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // The server still answers others meanwhile.
    assert_eq!(http(&s.addr, "GET", "/health", &[], b"").status, 200);
    // The server closes it (this socket's 60 s timeout would be an error).
    let mut buf = Vec::new();
    let r = slow.read_to_end(&mut buf);
    assert!(r.is_ok(), "the connection was held: {r:?}");
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
}

#[test]
fn a_webhook_run_sees_its_request_but_no_credentials() {
    let d = tempdir();
    std::fs::write(
        d.path().join("ctx.md"),
        r#"---
workflow: {id: ctx}
triggers:
  - type: webhook
    path: /ctx
    token_env: CTX_TOKEN
inputs:
  n: {type: integer, default: 1}
---

## Look

```yaml
action: script
inputs:
  code: |
    const t = context.trigger;
    return { method: t.method, path: t.path, agent: t.headers["user-agent"], id: t.headers["x-request-id"],
             names: Object.keys(t.headers).sort(), q: t.query.tag, extra: t.body.extra, type: t.type };
output_variable: seen
```
"#,
    )
    .unwrap();
    let s = serve(d.path(), &["ctx.md"], &[("CTX_TOKEN", "tok-123")]);
    let r = http(
        &s.addr,
        "POST",
        "/ctx?tag=blue",
        &[
            ("Authorization", "Bearer tok-123"),
            ("User-Agent", "tester/1.0"),
            ("X-Request-Id", "req-7"),
            ("Cookie", "session=secret"),
        ],
        br#"{"n": 2, "extra": "kept"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let seen = &r.json()["outputs"]["seen"];
    assert_eq!(seen["method"], "POST");
    assert_eq!(seen["path"], "/ctx");
    assert_eq!(seen["agent"], "tester/1.0");
    assert_eq!(seen["id"], "req-7");
    assert_eq!(seen["q"], "blue");
    assert_eq!(seen["extra"], "kept", "the whole body, not only the inputs");
    assert_eq!(seen["type"], "webhook");
    let names: Vec<&str> = seen["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"authorization") && !names.contains(&"cookie"),
        "{names:?}"
    );
    assert!(!r.body.contains("tok-123") && !r.body.contains("session=secret"));
}

#[test]
fn workflow_exit_chooses_the_webhook_answer() {
    let s = serve(&repo(), &["examples/webhook.md"], &[]);
    let r = post(
        &s.addr,
        "/hooks/release",
        json!({"release": {"tag_name": "v3.0.0-rc1", "prerelease": true}, "sender": {"login": "sam"}}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"skipped": true, "reason": "pre-release v3.0.0-rc1"})
    );
    let r = post(
        &s.addr,
        "/hooks/release",
        json!({"release": {"tag_name": "v3.0.0"}, "sender": {"login": "sam"}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["outputs"]["announcement"], "sam released v3.0.0");
    drop(s);
    let d = tempdir();
    std::fs::write(
        d.path().join("text.md"),
        include_str!("fixtures/server/text.md"),
    )
    .unwrap();
    let s = serve(d.path(), &["text.md"], &[]);
    let r = post(&s.addr, "/t", json!({}));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body, "made it");
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    // A status that is not HTTP's fails the step, saying so.
    let r = post(&s.addr, "/t", json!({"code": 700}));
    assert_eq!(r.status, 500, "{}", r.body);
    assert!(r.body.contains("from 100 to 599"), "{}", r.body);
}

#[test]
fn a_workflow_that_exits_with_an_error_status_is_shown_rejected_not_completed() {
    let d = tempdir();
    std::fs::write(
        d.path().join("text.md"),
        include_str!("fixtures/server/text.md"),
    )
    .unwrap();
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let s = serve(
        d.path(),
        &["text.md"],
        &[("MARKTOFLOW_STORE", store_env.as_str())],
    );
    let key = [("Idempotency-Key", "k-422")];
    let body = serde_json::to_vec(&json!({"code": 422})).unwrap();
    let r = http(&s.addr, "POST", "/t", &key, &body);
    assert_eq!((r.status, r.body.as_str()), (422, "made it"));
    let id = r.header("x-run-id").map(str::to_string);
    let runs = http(&s.addr, "GET", "/runs", &[], b"").json();
    let run = &runs["runs"][0];
    assert_eq!(run["status"], "rejected", "{runs}");
    let id = id.unwrap_or_else(|| {
        run["run_id"]
            .as_str()
            .or(run["id"].as_str())
            .unwrap()
            .to_string()
    });
    let shown = http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json();
    assert_eq!(shown["status"], "rejected", "{shown}");
    assert_eq!(
        shown["error"]["message"], "the workflow answered 422",
        "{shown}"
    );
    // A 2xx exit is a completed run, as before.
    let ok = http(&s.addr, "POST", "/t", &[], b"{}");
    assert_eq!(ok.status, 201);
    drop(s);
    // The history says so too, and a replay of the key is a client error.
    let h = store_history(d.path(), &store);
    let states: Vec<&str> = h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["completed", "rejected"], "{h}");
    let s = serve(
        d.path(),
        &["text.md"],
        &[("MARKTOFLOW_STORE", store_env.as_str())],
    );
    let again = http(&s.addr, "POST", "/t", &key, &body);
    assert_eq!(again.status, 400, "{}", again.body);
    assert_eq!(again.json()["status"], "rejected", "{}", again.body);
}

/// Polls `GET /workflows` until `done` holds (or fails after 20 s).
fn workflows_until(addr: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let j = http(addr, "GET", "/workflows", &[], b"").json();
        if done(&j) {
            return j;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{what}: {j}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn serve_watch_follows_the_files_and_skips_what_does_not_load() {
    let d = tempdir();
    let hook = |id: &str, path: &str| {
        format!("---\nworkflow: {{id: {id}}}\ntriggers: [{{type: webhook, path: {path}}}]\n---\n\n```yaml\naction: workflow.set_outputs\ninputs: {{who: {id}}}\n```\n")
    };
    std::fs::write(d.path().join("a.md"), hook("a", "/a")).unwrap();
    // Broken from the start: reported, skipped, the server starts.
    std::fs::write(
        d.path().join("bad.md"),
        include_str!("fixtures/server/bad.md"),
    )
    .unwrap();
    let s = serve(d.path(), &[".", "--watch"], &[]);
    let ids = |j: &Value| -> Vec<String> {
        j["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["workflow"].as_str().unwrap().to_string())
            .collect()
    };
    let j = http(&s.addr, "GET", "/workflows", &[], b"").json();
    assert_eq!(ids(&j), ["a"]);
    assert_eq!(j["broken"][0]["file"], "./bad.md");
    assert_eq!(j["broken"][0]["line"], 6);

    // A new file is served; its route answers.
    std::fs::write(d.path().join("b.md"), hook("b", "/b")).unwrap();
    workflows_until(&s.addr, "b is added", |j| ids(j).contains(&"b".to_string()));
    let r = post(&s.addr, "/b", json!({}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["outputs"]["who"], "b");

    // An edit that takes another's route: that file is skipped, saying
    // why; the others go on being served.
    std::fs::write(d.path().join("b.md"), hook("b", "/a")).unwrap();
    let j = workflows_until(&s.addr, "b conflicts", |j| {
        !ids(j).contains(&"b".to_string())
    });
    let broken = j["broken"].to_string();
    assert!(broken.contains("is already served by"), "{broken}");
    assert_eq!(post(&s.addr, "/a", json!({})).json()["outputs"]["who"], "a");
    assert_eq!(post(&s.addr, "/b", json!({})).status, 404);

    // Fixed, and the broken file fixed too: all three are served.
    std::fs::write(d.path().join("b.md"), hook("b", "/b")).unwrap();
    std::fs::write(d.path().join("bad.md"), hook("bad", "/bad")).unwrap();
    let j = workflows_until(&s.addr, "all load", |j| ids(j).len() == 3);
    assert_eq!(j["broken"], json!([]));
    // A removed file is no longer served.
    std::fs::remove_file(d.path().join("a.md")).unwrap();
    workflows_until(&s.addr, "a is removed", |j| {
        !ids(j).contains(&"a".to_string())
    });
    assert_eq!(post(&s.addr, "/a", json!({})).status, 404);
    assert_eq!(http(&s.addr, "GET", "/health", &[], b"").status, 200);
}

#[test]
fn serve_watch_keeps_the_last_good_version_of_a_broken_edit() {
    // Issue 49 item 14: a typo saved into a served workflow took its live
    // route offline (404). The last good version stays served and the
    // error is reported (the run API's `broken`, `/health`'s count).
    let d = tempdir();
    let hook = |who: &str| {
        format!("---\nworkflow: {{id: a}}\ntriggers: [{{type: webhook, path: /a}}]\n---\n\n```yaml\naction: workflow.set_outputs\ninputs: {{who: {who}}}\n```\n")
    };
    std::fs::write(d.path().join("a.md"), hook("first")).unwrap();
    let s = serve(d.path(), &[".", "--watch"], &[]);
    assert_eq!(
        post(&s.addr, "/a", json!({})).json()["outputs"]["who"],
        "first"
    );
    let health = || http(&s.addr, "GET", "/health", &[], b"").json()["broken"].clone();
    assert_eq!(health(), json!(0));

    std::fs::write(
        d.path().join("a.md"),
        hook("second").replace(
            "action: workflow.set_outputs",
            "action: workflow.set_outptus",
        ),
    )
    .unwrap();
    let j = workflows_until(&s.addr, "the edit is reported", |j| {
        j["broken"].as_array().is_some_and(|b| !b.is_empty())
    });
    assert_eq!(j["broken"][0]["file"], "./a.md", "{j}");
    assert_eq!(j["workflows"][0]["workflow"], "a", "{j}");
    let r = post(&s.addr, "/a", json!({}));
    assert_eq!(
        (r.status, &r.json()["outputs"]["who"]),
        (200, &json!("first")),
        "{}",
        r.body
    );
    assert_eq!(health(), json!(1));

    std::fs::write(d.path().join("a.md"), hook("third")).unwrap();
    workflows_until(&s.addr, "the fix is served", |j| j["broken"] == json!([]));
    assert_eq!(
        post(&s.addr, "/a", json!({})).json()["outputs"]["who"],
        "third"
    );
    assert_eq!(health(), json!(0));
}

/// `serve --watch`: a file added later that claims a served route is the
/// one refused, at its own trigger, whatever the names' order; the route
/// stays with the workflow that had it.
#[test]
fn serve_watch_keeps_a_route_with_the_workflow_that_had_it() {
    let d = tempdir();
    let hook = |id: &str| {
        format!("---\nworkflow: {{id: {id}}}\ntriggers: [{{type: webhook, path: /shared}}]\n---\n\n```yaml\naction: workflow.set_outputs\ninputs: {{who: {id}}}\n```\n")
    };
    std::fs::write(d.path().join("z.md"), hook("z")).unwrap();
    let s = serve(d.path(), &[".", "--watch"], &[]);
    assert_eq!(
        post(&s.addr, "/shared", json!({})).json()["outputs"]["who"],
        "z"
    );
    // `a.md` sorts before `z.md`: it still does not take the route.
    std::fs::write(d.path().join("a.md"), hook("a")).unwrap();
    let j = workflows_until(&s.addr, "a.md is refused", |j| {
        j["broken"].as_array().is_some_and(|b| !b.is_empty())
    });
    assert_eq!(j["broken"][0]["file"], "./a.md", "{j}");
    assert_eq!(j["broken"][0]["line"], 3, "{j}");
    assert_eq!(
        j["broken"][0]["message"],
        "route `POST /shared` is already served by `./z.md`"
    );
    assert_eq!(
        post(&s.addr, "/shared", json!({})).json()["outputs"]["who"],
        "z"
    );
}

#[test]
fn a_concurrency_key_runs_one_users_runs_one_at_a_time() {
    let d = crate::support::tempdir();
    std::fs::write(
        d.path().join("keyed.md"),
        std::fs::read_to_string(crate::support::repo().join("examples/concurrency.md")).unwrap(),
    )
    .unwrap();
    let s = crate::support::serve(d.path(), &["keyed.md"], &[]);
    let users = ["ana", "bo"];
    let mut ids = Vec::new();
    for i in 0..8 {
        let user = users[i % 2];
        let r = post(&s.addr, "/keyed?async=true", json!({"user": user}));
        assert_eq!(r.status, 202, "{}", r.body);
        ids.push((
            user.to_string(),
            r.json()["run_id"].as_str().unwrap().to_string(),
        ));
    }
    let start = std::time::Instant::now();
    let mut runs = Vec::new();
    for (user, id) in &ids {
        loop {
            let j = http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json();
            if j["status"] == "completed" {
                runs.push((user.clone(), j["outputs"].clone()));
                break;
            }
            assert_ne!(j["status"], "failed", "{j}");
            assert!(start.elapsed() < std::time::Duration::from_secs(60), "{j}");
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
    }
    let by = crate::postgres::intervals_by_user(&runs);
    for (user, spans) in &by {
        assert_eq!(spans.len(), 4);
        for pair in spans.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "two runs of `{user}` at once: {spans:?}"
            );
        }
    }
    // Not one at a time overall: another user's run went meanwhile.
    let (a, b) = (&by["ana"], &by["bo"]);
    assert!(
        a.iter().any(|x| b.iter().any(|y| x.0 < y.1 && y.0 < x.1)),
        "different users must not wait for each other: {a:?} {b:?}"
    );
}

/// A run resumed after `kill -9` re-runs the interrupted top-level step; the
/// agent calls inside it that had already been answered are not paid again.
#[test]
fn a_resumed_run_recalls_the_agent_replies_it_already_paid_for() {
    let llm = FakeLlm::start(std::sync::Arc::new(|_| (200, "noted".to_string())));
    let d = tempdir();
    std::fs::write(
        d.path().join("each.md"),
        r#"---
workflow: {id: each}
tools:
  agent: {sdk: anthropic}
triggers:
  - {type: webhook, path: /each, method: POST, response: async}
---

## Each
```yaml
type: for_each
items: [1, 2]
item_variable: n
steps:
  - action: agent.run
    inputs: {prompt: 'note {{ n }}'}
    output_variable: said
  - action: script.execute
    inputs:
      context: {n: '{{ n }}'}
      code: |
        if (context.n == 2) { const t = Date.now(); while (Date.now() - t < 3000) {} }
        return context.n;
```
"#,
    )
    .unwrap();
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let env = [
        ("MARKTOFLOW_STORE", store_env.as_str()),
        ("ANTHROPIC_BASE_URL", llm.base.as_str()),
        ("ANTHROPIC_API_KEY", "test-key"),
    ];
    let s = serve(d.path(), &["each.md"], &env);
    let r = post(&s.addr, "/each", json!({}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    // Both replies are in, the second item's script is busy: kill -9 (once
    // the replies are committed).
    wait_for("two agent calls", || llm.requests().len() == 2);
    wait_for("the replies recorded", || {
        rusqlite::Connection::open(&store)
            .and_then(|c| c.query_row("SELECT count(*) FROM replies", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(0)
            == 2
    });
    drop(s);
    let s = serve(d.path(), &["each.md"], &env);
    wait_for("the resumed run completes", || {
        http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"").json()["status"] == "completed"
    });
    assert_eq!(llm.requests().len(), 2, "no reply was paid twice");
}

#[test]
fn a_huge_result_count_is_refused_and_the_server_stays_up() {
    // `max_results` sized kb.search's collector: 1e9 asked for 64 GB and
    // aborted `serve` (issue 49). The flagship bounds it (1 to 50) and
    // kb.search bounds `top_k` (1 to 10000) whatever a workflow passes.
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let s = serve(
        &repo(),
        &["workflows/lifeos/retrieval-indexed.md", "--no-store"],
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
    );
    let r = post(
        &s.addr,
        "/lifeos/query-indexed",
        json!({"query": "What is the API key for Apollo?", "max_results": 1_000_000_000u64}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let j = r.json();
    let fields: Vec<&str> = j["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["input"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["max_results"], "{}", r.body);
    let r = post(
        &s.addr,
        "/lifeos/query-indexed",
        json!({"query": "What is the API key for Apollo?", "max_results": 3}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["outputs"]["found"], json!(true), "{}", r.body);

    let d = tempdir();
    let wf = d.path().join("huge.md");
    std::fs::write(
        &wf,
        "---\nworkflow: {id: huge}\n---\n\n```yaml\naction: kb.search\ninputs:\n  kb: notes\n  query: apollo\n  top_k: 1000000000\n```\n",
    )
    .unwrap();
    std::fs::create_dir(d.path().join("notes")).unwrap();
    std::fs::write(d.path().join("notes/a.md"), "# Apollo\n\nA note.\n").unwrap();
    assert_run_fails_with(
        d.path(),
        "huge.md",
        "huge.md:6:9: error: step `step_1` failed: input `top_k` of `kb.search`: must be a whole number from 1 to 10000, got 1000000000",
    );
}

/// `marktoflow run FILE --no-store` in `dir` exits 1 and its error line
/// about `FILE` is `line`.
fn assert_run_fails_with(dir: &Path, file: &str, line: &str) {
    let out = cmd(dir).args(["run", file, "--no-store"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.lines().find(|l| l.starts_with(&format!("{file}:"))),
        Some(line),
        "{err}"
    );
}

#[test]
fn hostile_templates_from_a_request_fail_their_run_and_the_server_stays_up() {
    // Issue 49 items 3, 4 and 13: a 60,000-term chain overflowed the run
    // thread's stack (exit 134); a list that doubles asked for gigabytes;
    // 100,000 comments took minutes to prepare; `{#{%e.length%}#}`
    // panicked the rewrite. Each now fails its own run, under a 4 GiB
    // address space, and the server answers the next request.
    let d = tempdir();
    std::fs::write(
        d.path().join("render.md"),
        "---\nworkflow: {id: render}\ntriggers:\n  - {type: webhook, path: /render}\n---\n\n```yaml\naction: core.template\ninputs:\n  template: '{{ trigger.body.t }}'\noutput_variable: text\n```\n",
    )
    .unwrap();
    let s = crate::support::serve_within(d.path(), &["."], &[], 4 << 30);
    let chain = |link: &str| format!("{{{{ a{} }}}}", link.repeat(60_000));
    let chained = "in the template from `{{ trigger.body.t }}`: this expression chains 60000 operators; one tag may hold at most 1000: compute the value in steps (`{% set %}`) or in a script step";
    let cases = [
        (chain(".b"), chained),
        (chain(" and a"), chained),
        (chain("+a"), chained),
        (chain("|length"), chained),
        (chain("[0]"), chained),
        (
            "{% set ns = namespace(l=[1, 2, 3, 4]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}".to_string(),
            "in the template from `{{ trigger.body.t }}`: invalid operation: +: the result would be over the 1048576 items one template list may hold",
        ),
    ];
    for (t, error) in &cases {
        let r = post(&s.addr, "/render", json!({ "t": t }));
        let j = r.json();
        let expected = json!({
            "message": format!("template error: {error}"),
            "step": "step_1", "file": "./render.md", "line": 10, "column": 13,
        });
        assert_eq!(
            (r.status, &j["status"], &j["error"]),
            (500, &json!("failed"), &expected),
            "{}",
            &r.body[..r.body.len().min(600)]
        );
    }
    for (t, text) in [
        ("{# c #}".repeat(100_000), ""),
        ("{#{%e.length%}#}!".to_string(), "!"),
    ] {
        let r = post(&s.addr, "/render", json!({ "t": t }));
        assert_eq!(r.status, 200, "{}", &r.body[..r.body.len().min(600)]);
        assert_eq!(r.json()["outputs"]["text"], json!(text), "{}", r.body);
    }
    let r = http(&s.addr, "GET", "/health", &[], b"");
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn hostile_notes_cost_one_question_not_the_server() {
    // Issue 49 items 1 and 2, under a 2 GiB address space: a 2.3 MB
    // one-line transcript gave each of its 140,000 sentences a copy of the
    // line (24 GB), and a 1 MB heading made indexing quadratic (1.5 GB, 24 s; 2 MB: 5.6 GB);
    // either aborted `serve`.
    let d = tempdir();
    let notes = d.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    let sentences: Vec<String> = (0..140_000)
        .map(|i| format!("Speaker {} said the budget is {} on Monday.", i % 7, i))
        .collect();
    std::fs::write(
        notes.join("call.md"),
        format!("# Call\n\n{}\n", sentences.join(" ")),
    )
    .unwrap();
    std::fs::write(
        notes.join("heading.md"),
        format!(
            "# {}\n\nThe budget owner is Dana.\n",
            "heading word ".repeat(75_000)
        ),
    )
    .unwrap();
    std::fs::write(
        d.path().join("ask.md"),
        "---\nworkflow: {id: ask}\ntriggers:\n  - {type: webhook, path: /ask}\ninputs:\n  q: {type: string}\n---\n\n```yaml\naction: kb.search\ninputs: {kb: notes, query: '{{ inputs.q }}'}\noutput_variable: hits\n```\n\n```yaml\naction: kb.evidence\ninputs: {kb: notes, question: '{{ inputs.q }}', hits: '{{ hits }}'}\noutput_variable: evidence\n```\n",
    )
    .unwrap();
    let s = crate::support::serve_within(d.path(), &["."], &[], 2 << 30);
    for (q, first) in [
        (
            "What did speaker 3 say about the budget?",
            "Speaker 3 said the budget is 3 on Monday.",
        ),
        ("What does Dana own?", "The budget owner is Dana."),
    ] {
        let r = post(&s.addr, "/ask", json!({ "q": q }));
        assert_eq!(r.status, 200, "{}", &r.body[..r.body.len().min(600)]);
        let j = r.json();
        let got = j["outputs"]["evidence"]["evidence"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // Which of the transcript's look-alike sentences comes first is the
        // embedding model's to say; without one, any of them will do.
        let lexical_only = std::env::var_os("MARKTOFLOW_EMBED_MODEL").is_none();
        let a_call_sentence = got.starts_with("Speaker ") && got.ends_with(" on Monday.");
        assert!(
            got == first || (lexical_only && first.starts_with("Speaker") && a_call_sentence),
            "{got}: {}",
            &r.body[..r.body.len().min(600)]
        );
    }
    let r = http(&s.addr, "GET", "/health", &[], b"");
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_question_past_two_thousand_characters_is_refused() {
    // Issue 49 item 5: a 300 KB question took 14 s per answer step (each
    // word a term scored against every line) on the server's workers.
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let s = serve(
        &repo(),
        &["workflows/lifeos/retrieval-indexed.md", "--no-store"],
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
    );
    let long = "why ".repeat(501);
    let r = post(&s.addr, "/lifeos/query-indexed", json!({ "query": long }));
    assert_eq!(r.status, 400, "{}", r.body);
    let j = r.json();
    let fields: Vec<&str> = j["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["input"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["query"], "{}", r.body);

    let d = tempdir();
    std::fs::create_dir(d.path().join("notes")).unwrap();
    std::fs::write(d.path().join("notes/a.md"), "# Apollo\n\nThe key is K-1.\n").unwrap();
    std::fs::write(
        d.path().join("long.md"),
        format!("---\nworkflow: {{id: long}}\n---\n\n```yaml\naction: kb.evidence\ninputs:\n  kb: notes\n  question: '{}'\n  hits: {{hits: []}}\n```\n", "why ".repeat(600)),
    )
    .unwrap();
    assert_run_fails_with(
        d.path(),
        "long.md",
        "long.md:6:9: error: step `step_1` failed: input `question` of `kb.evidence`: a question is at most 2000 characters long, got 2400",
    );
}

#[test]
fn a_finished_step_with_a_large_output_is_not_run_again_after_a_crash() {
    // Issue 49 item 11: the next step started before the checkpoint of a
    // step with a 3 MB output was durable, so kill -9 then made the restart
    // resume from before the finished step (its side effect repeated 5
    // times in 5 tries). Here the next step calls the test, which kills
    // the server the moment the call arrives: the restart must resume at
    // that next step, never before the finished one.
    let d = tempdir();
    let hook = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    hook.set_nonblocking(true).unwrap();
    let port = hook.local_addr().unwrap().port();
    std::fs::write(
        d.path().join("big.md"),
        format!(
            r#"---
workflow: {{id: big}}
triggers:
  - {{type: webhook, path: /big, response: async}}
---

```yaml
action: script.execute
inputs:
  code: |
    require('fs').appendFileSync('ran.txt', 'x');
    return Array.from({{length: 400000}}, (_, i) => i);
output_variable: big
```

```yaml
action: http.post
inputs: {{url: 'http://127.0.0.1:{port}/', body: {{n: 1}}}}
```
"#
        ),
    )
    .unwrap();
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let env = [("MARKTOFLOW_STORE", store_env.as_str())];
    let args = ["big.md", "--allow-write", dir.as_str()];
    // Two deaths: a third start would fail the run (the crash-loop rule).
    for round in 0..2 {
        let s = serve(d.path(), &args, &env);
        if round == 0 {
            assert_eq!(post(&s.addr, "/big", json!({})).status, 202);
        }
        let start = Instant::now();
        loop {
            if hook.accept().is_ok() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "step two was not called (round {round}): {}",
                http(&s.addr, "GET", "/runs", &[], b"").body
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(s); // kill -9, the moment step two began
    }
    let ran = std::fs::read_to_string(d.path().join("ran.txt")).unwrap();
    assert_eq!(ran, "x", "the finished step ran again");
}

#[test]
fn a_flood_of_silent_connections_does_not_keep_health_out() {
    // This test holds 1,100 connections of its own.
    let mut mine = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct they are given.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut mine) == 0 && {
            mine.rlim_cur = mine.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &mine) == 0
        }
    };
    if !raised || mine.rlim_cur < 1_500 {
        eprintln!("skipped: this process may not open 1,500 files");
        return;
    }
    let d = tempdir();
    std::fs::write(
        d.path().join("text.md"),
        include_str!("fixtures/server/text.md"),
    )
    .unwrap();
    // The default soft limit of most systems, as the hard limit too.
    let s =
        crate::support::serve_limited(d.path(), &["text.md"], &[], &[(libc::RLIMIT_NOFILE, 1024)]);
    let silent: Vec<TcpStream> = (0..1_100)
        .map(|_| TcpStream::connect(&s.addr).unwrap())
        .collect();
    // Each check is one connection after the flood: it is let in, and
    // answered, while every silent connection is still held open here.
    // Before, it waited behind them until their header deadline (10 s).
    for _ in 0..3 {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        let read = c.read_to_string(&mut answer);
        assert!(read.is_ok(), "no answer within 5 s: {read:?}");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let r = post(&s.addr, "/t", json!({}));
        assert_eq!((r.status, r.body.as_str()), (201, "made it"));
    }
    drop(silent);
}

#[test]
fn a_supervised_server_that_dies_is_started_again_on_the_same_port_and_resumes_its_runs() {
    let d = tempdir();
    chain(d.path());
    let store = d.path().join("runs.db");
    let store_env = store.to_str().unwrap().to_string();
    let dir = d.path().to_str().unwrap().to_string();
    let env = [("MARKTOFLOW_STORE", store_env.as_str())];
    let s = serve_supervised(d.path(), &["chain.md", "--allow-write", dir.as_str()], &env);
    let r = post(&s.addr, "/chain", json!({"tag": "a", "ms": 2000}));
    assert_eq!(r.status, 202);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    wait_for("step two", || checkpoints_before(&store, 1) == 1);
    // The server (the supervisor's child) aborts, as a failed allocation would.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", s.child.id())).unwrap();
    let server: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: a signal to the server process this test started.
    assert_eq!(unsafe { libc::kill(server, libc::SIGABRT) }, 0);
    // The same address answers again, and the run finishes where it stood.
    wait_for("the run completed after the restart", || {
        let r = http(&s.addr, "GET", &format!("/runs/{id}"), &[], b"");
        r.status == 200 && r.json()["status"] == "completed"
    });
    assert_eq!(log_lines(d.path()), ["a-1", "a-3"]);
    let h = http(&s.addr, "GET", "/health", &[], b"");
    assert_eq!(h.status, 200, "{}", h.body);
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", s.child.id())).unwrap();
    let again: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    assert_ne!(again, server, "a new server process");
    // SIGTERM to the supervisor stops the server gracefully; nothing is left.
    sigterm(&s);
    let mut s = s;
    assert_eq!(exit_code_within(&mut s, Duration::from_secs(20)), Some(0));
    assert!(
        !Path::new(&format!("/proc/{again}")).exists(),
        "the server ended with its supervisor"
    );
}
