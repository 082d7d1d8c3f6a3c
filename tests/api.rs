//! The run API (`/runs`, `/workflows`, cancel, retry) on the real server:
//! what the console uses, used on its own, and who may use it.

use crate::support::{http, post, repo, serve, tempdir, try_serve, Resp};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn get(addr: &str, path: &str) -> Resp {
    http(addr, "GET", path, &[], b"")
}

/// Polls `GET /runs/{id}` until the run has ended.
fn ended(addr: &str, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let j = get(addr, &format!("/runs/{id}")).json();
        if !["queued", "running"].contains(&j["status"].as_str().unwrap_or("")) {
            return j;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "run {id} did not end: {j}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start(addr: &str, workflow: &str, inputs: Value) -> String {
    let r = post(addr, &format!("/workflows/{workflow}/runs"), inputs);
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["run_id"].as_str().unwrap().to_string()
}

fn console_server(
    extra: &[&str],
    env: &[(&str, &str)],
) -> (crate::support::Server, tempfile::TempDir) {
    let tmp = tempdir();
    let mut args = vec![
        "tests/console/flaky.md",
        "tests/console/slow.md",
        "examples/hello.md",
        "--allow-read",
    ];
    let dir = tmp.path().to_str().unwrap().to_string();
    args.push(&dir);
    args.extend(extra);
    (serve(&repo(), &args, env), tmp)
}

#[test]
fn runs_are_listed_filtered_paged_and_shown_with_their_steps() {
    let (s, tmp) = console_server(&[], &[]);
    let flag = tmp.path().join("flag.txt");
    let failed = start(&s.addr, "console-flaky", json!({"flag": flag}));
    let failed_run = ended(&s.addr, &failed);
    assert_eq!(failed_run["status"], "failed");
    let mut ok = Vec::new();
    for name in ["a", "b", "c"] {
        ok.push(start(&s.addr, "hello", json!({"name": name})));
    }
    for id in &ok {
        assert_eq!(ended(&s.addr, id)["status"], "completed");
    }

    // Filters, newest first, paged with a link to the next page.
    let all = get(&s.addr, "/runs").json();
    assert_eq!(all["total"], 4);
    assert_eq!(all["runs"][0]["run_id"], ok[2].as_str());
    let page = get(&s.addr, "/runs?workflow=hello&limit=2").json();
    assert_eq!(page["total"], 3);
    assert_eq!(page["runs"].as_array().unwrap().len(), 2);
    let next = page["next"].as_str().expect("a next page");
    let rest = get(&s.addr, next).json();
    assert_eq!(rest["runs"][0]["run_id"], ok[0].as_str());
    assert!(rest["next"].is_null(), "{rest}");
    let failed_only = get(&s.addr, "/runs?status=failed").json();
    assert_eq!(failed_only["runs"][0]["run_id"], failed.as_str());
    assert_eq!(failed_only["total"], 1);
    assert_eq!(
        get(&s.addr, "/runs?trigger=api&since=1h").json()["total"],
        4
    );
    assert_eq!(get(&s.addr, "/runs?until=2020-01-01").json()["total"], 0);
    // Each run with its inputs and a line of its outputs; found by them.
    assert_eq!(
        (
            all["runs"][0]["inputs"].clone(),
            all["runs"][0]["outputs"].clone()
        ),
        (json!("name: c"), json!("greeting: Hello, C!"))
    );
    let found = get(&s.addr, "/runs?q=HELLO,%20c").json();
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["runs"][0]["run_id"], ok[2].as_str());
    let bad = get(&s.addr, "/runs?status=lost");
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"]
        .as_str()
        .unwrap()
        .contains("status=lost"));

    // One run: inputs, the error where it is written, every step with the
    // loop's iterations under it.
    let run = get(&s.addr, &format!("/runs/{failed}")).json();
    assert_eq!(run["inputs"]["flag"], flag.to_str().unwrap());
    assert_eq!(run["trigger"], "api");
    assert_eq!(run["error"]["step"], "check");
    let place = &run["error"]["place"];
    assert_eq!(place["file"], "tests/console/flaky.md");
    assert!(
        place["source"].as_str().unwrap().contains("file.read"),
        "{place}"
    );
    let steps = run["steps"].as_array().unwrap();
    let ids: Vec<&str> = steps.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["prepare", "each_item", "check"]);
    let kids = steps[1]["children"].as_array().unwrap();
    assert_eq!(kids.len(), 3);
    assert_eq!(kids[2]["iteration"], 3);
    assert_eq!(kids[2]["output"], "C");
    // An action's inputs as it was called, beside its output or error.
    assert_eq!(
        steps[2]["inputs"],
        json!({"path": flag.to_str().unwrap()}),
        "{run}"
    );
    assert_eq!(
        run["retry_from"],
        json!(["prepare", "each_item", "check", "finish"])
    );

    // The workflow: its inputs as a form would need them, and its graph.
    let wf = get(&s.addr, "/workflows/console-flaky").json();
    assert_eq!(wf["inputs"][0]["required"], true);
    assert_eq!(wf["inputs"][1]["default"], json!(["a", "b", "c"]));
    assert!(wf["graph"]["svg"].as_str().unwrap().starts_with("<svg"));
    assert!(wf["graph"]["mermaid"]
        .as_str()
        .unwrap()
        .starts_with("flowchart"));
    assert_eq!(get(&s.addr, "/workflows/nope").status, 404);
    // Inputs are checked as on the command line.
    let r = post(
        &s.addr,
        "/workflows/console-slow/runs",
        json!({"seconds": 0}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["fields"][0]["input"], "seconds");
    let r = post(&s.addr, "/workflows/hello/runs", json!({"nmae": "x"}));
    assert_eq!(r.status, 400);
    assert!(r.body.contains("no input `nmae`"), "{}", r.body);
}

#[test]
fn a_run_is_retried_from_a_step_and_cancelled() {
    let (s, tmp) = console_server(&["--max-concurrent", "1"], &[]);
    let flag = tmp.path().join("flag.txt");
    let failed = start(&s.addr, "console-flaky", json!({"flag": flag}));
    assert_eq!(ended(&s.addr, &failed)["status"], "failed");
    let r = http(
        &s.addr,
        "POST",
        &format!("/runs/{failed}/retry?from=nope"),
        &[],
        b"",
    );
    assert_eq!(r.status, 400);
    assert!(r.body.contains("is not a top-level step"), "{}", r.body);
    std::fs::write(&flag, "ok\n").unwrap();
    let r = http(
        &s.addr,
        "POST",
        &format!("/runs/{failed}/retry?from=check"),
        &[],
        b"",
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let j = r.json();
    assert_eq!(
        (j["from"].clone(), j["reused_steps"].clone()),
        (json!("check"), json!(2))
    );
    let retry = ended(&s.addr, j["run_id"].as_str().unwrap());
    assert_eq!(retry["status"], "completed", "{retry}");
    assert_eq!(retry["outputs"]["result"], "checked: ok");
    assert_eq!(retry["retry_of"], failed.as_str());
    let reused: Vec<bool> = retry["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reused"].as_bool().unwrap())
        .collect();
    assert_eq!(reused, [true, true, false, false]);
    // A run that is still going cannot be retried.

    // Cancel: the running run stops; the one queued behind it (one slot)
    // never starts.
    let slow = start(&s.addr, "console-slow", json!({"seconds": 60}));
    let queued = start(&s.addr, "console-slow", json!({"seconds": 60}));
    let t = Instant::now();
    while get(&s.addr, &format!("/runs/{slow}")).json()["status"] != "running" {
        assert!(t.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        get(&s.addr, &format!("/runs/{queued}")).json()["status"],
        "queued"
    );
    let r = http(&s.addr, "POST", &format!("/runs/{slow}/retry"), &[], b"");
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("still running"), "{}", r.body);
    let r = http(&s.addr, "POST", &format!("/runs/{queued}/cancel"), &[], b"");
    assert_eq!(r.status, 202, "{}", r.body);
    let q = ended(&s.addr, &queued);
    assert_eq!(q["status"], "cancelled");
    assert!(q["steps"].as_array().unwrap().is_empty(), "{q}");
    let r = http(&s.addr, "POST", &format!("/runs/{slow}/cancel"), &[], b"");
    assert_eq!(r.status, 202, "{}", r.body);
    let run = ended(&s.addr, &slow);
    assert_eq!(run["status"], "cancelled");
    assert!(t.elapsed() < Duration::from_secs(30), "cancelled at once");
    let r = http(&s.addr, "POST", &format!("/runs/{slow}/cancel"), &[], b"");
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(
        get(&s.addr, "/runs?status=cancelled").json()["total"],
        2,
        "both are recorded as cancelled"
    );
}

#[test]
fn only_the_owner_uses_the_run_api() {
    // On loopback without a token: open to local callers, closed to a page
    // elsewhere (DNS rebinding: another Host; a cross-site form: another Origin).
    let (s, _tmp) = console_server(&[], &[]);
    let id = start(&s.addr, "hello", json!({}));
    ended(&s.addr, &id);
    let r = http(&s.addr, "GET", "/runs", &[("Host", "evil.example:80")], b"");
    assert_eq!(r.status, 403, "{}", r.body);
    let r = http(
        &s.addr,
        "POST",
        "/workflows/hello/runs",
        &[("Origin", "http://evil.example")],
        b"{}",
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let origin = format!("http://{}", s.addr);
    let r = http(
        &s.addr,
        "POST",
        "/workflows/hello/runs",
        &[("Origin", &origin)],
        b"{}",
    );
    assert_eq!(r.status, 202, "same origin: {}", r.body);
    // A caller holding a run id (a webhook's async answer) still reads its
    // status and outputs, not its inputs or steps.
    let r = http(
        &s.addr,
        "GET",
        &format!("/runs/{id}"),
        &[("Host", "evil.example")],
        b"",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "completed");
    assert!(r.json().get("inputs").is_none(), "{}", r.body);
    assert!(r.json().get("steps").is_none(), "{}", r.body);
    assert!(r.json().get("logs").is_none(), "{}", r.body);
    // Its event stream (every step's output and log lines) is the API's.
    let r = http(
        &s.addr,
        "GET",
        &format!("/runs/{id}/events"),
        &[("Host", "evil.example")],
        b"",
    );
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(!r.body.contains("Hello"), "{}", r.body);
    let r = get(&s.addr, &format!("/runs/{id}/events"));
    assert_eq!(r.status, 200, "the owner reads it: {}", r.body);
    // The console's page itself holds no data: served to anyone.
    let r = get(&s.addr, "/console");
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-security-policy")
        .unwrap()
        .contains("script-src 'self'"));
    assert_eq!(get(&s.addr, "/").status, 303, "/ leads to the console");
    drop(s);

    // With a token: every caller must bring it.
    let (s, _tmp) = console_server(
        &["--api-token-env", "API_TOKEN"],
        &[("API_TOKEN", "s3cret-token")],
    );
    let r = get(&s.addr, "/runs");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let r = http(
        &s.addr,
        "GET",
        "/runs",
        &[("Authorization", "Bearer wrong")],
        b"",
    );
    assert_eq!(r.status, 401);
    let r = http(
        &s.addr,
        "GET",
        "/runs",
        &[("Authorization", "Bearer s3cret-token")],
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // A run id without the token: status and outputs, no steps, no events.
    let r = http(
        &s.addr,
        "POST",
        "/workflows/hello/runs",
        &[("Authorization", "Bearer s3cret-token")],
        b"{}",
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let owner = [("Authorization", "Bearer s3cret-token")];
    let start_wait = Instant::now();
    while http(&s.addr, "GET", &format!("/runs/{id}"), &owner, b"").json()["status"] != "completed"
    {
        assert!(
            start_wait.elapsed() < Duration::from_secs(60),
            "the run did not complete"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = get(&s.addr, &format!("/runs/{id}"));
    assert_eq!(
        (r.status, &r.json()["status"]),
        (200, &json!("completed")),
        "{}",
        r.body
    );
    assert!(
        r.json().get("steps").is_none() && r.json().get("inputs").is_none(),
        "{}",
        r.body
    );
    let full = http(&s.addr, "GET", &format!("/runs/{id}"), &owner, b"");
    assert!(
        full.json()["steps"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{}",
        full.body
    );
    for auth in [None, Some("Bearer wrong")] {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let r = http(&s.addr, "GET", &format!("/runs/{id}/events"), &headers, b"");
        assert_eq!(r.status, 401, "{auth:?}: {}", r.body);
    }
    let r = http(&s.addr, "GET", &format!("/runs/{id}/events"), &owner, b"");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("data: "), "{}", r.body);
    drop(s);

    // A token variable that is not set: the server does not start open.
    let err = try_serve(
        &repo(),
        &["examples/hello.md", "--api-token-env", "NOT_SET_ANYWHERE"],
        &[],
    )
    .err()
    .expect("refused");
    assert!(err.contains("`NOT_SET_ANYWHERE` is not set"), "{err}");

    // On every address without a token: webhooks are served, the run API is not.
    let (s, _tmp) = console_server(&["--host", "0.0.0.0"], &[]);
    let addr = s.addr.replace("0.0.0.0", "127.0.0.1");
    let r = get(&addr, "/runs");
    assert_eq!(r.status, 403);
    assert!(r.body.contains("--api-token-env"), "{}", r.body);
    assert_eq!(get(&addr, "/health").status, 200);
}

#[test]
fn without_a_store_the_runs_in_memory_are_listed() {
    let (s, _tmp) = console_server(&["--no-store"], &[]);
    let a = start(&s.addr, "hello", json!({"name": "a"}));
    let b = start(&s.addr, "console-slow", json!({"seconds": 1}));
    assert_eq!(ended(&s.addr, &a)["status"], "completed");
    assert_eq!(ended(&s.addr, &b)["status"], "completed");
    let all = get(&s.addr, "/runs").json();
    assert_eq!(all["total"], 2, "{all}");
    assert_eq!(all["runs"][0]["run_id"], b.as_str(), "newest first");
    let one = get(&s.addr, "/runs?workflow=hello&status=completed&trigger=api").json();
    assert_eq!(one["total"], 1);
    assert_eq!(one["runs"][0]["run_id"], a.as_str());
    let page = get(&s.addr, "/runs?limit=1").json();
    assert_eq!(page["next"], "/runs?limit=1&offset=1");
    let found = get(&s.addr, "/runs?q=hello,%20A").json();
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["runs"][0]["run_id"], a.as_str());
    // The detail still has the inputs; a retry needs the store.
    assert_eq!(
        get(&s.addr, &format!("/runs/{a}")).json()["inputs"]["name"],
        "a"
    );
    let r = http(&s.addr, "POST", &format!("/runs/{a}/retry"), &[], b"");
    assert_eq!(r.status, 409);
    assert!(r.body.contains("--no-store"), "{}", r.body);
}

#[test]
fn the_workflow_list_has_each_latest_run_and_next_schedule() {
    let d = tempdir();
    std::fs::write(
        d.path().join("nightly.md"),
        include_str!("fixtures/api/nightly.md"),
    )
    .unwrap();
    std::fs::write(
        d.path().join("plain.md"),
        include_str!("fixtures/api/plain.md"),
    )
    .unwrap();
    let s = serve(d.path(), &["nightly.md", "plain.md"], &[]);
    let list = |id: &str| -> Value {
        let all = get(&s.addr, "/workflows").json();
        all["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["workflow"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {all}"))
    };
    let nightly = list("nightly");
    let now = chrono::Utc::now().timestamp_millis();
    let at = nightly["next"]["at"].as_i64().expect("a next time");
    assert!(at > now && at <= now + 24 * 3600 * 1000, "{nightly}");
    assert!(
        nightly["next"]["shown"]
            .as_str()
            .unwrap()
            .starts_with("Europe/Paris, next "),
        "{nightly}"
    );
    assert_eq!(nightly["last_run"], Value::Null);
    let plain = list("plain");
    assert_eq!(
        (&plain["next"], &plain["last_run"]),
        (&Value::Null, &Value::Null)
    );
    // A workflow without `version:` has none (it was shown as 1.0.0).
    assert_eq!(
        get(&s.addr, "/workflows/plain").json()["version"],
        Value::Null
    );
    let id = start(&s.addr, "plain", json!({}));
    ended(&s.addr, &id);
    let last = &list("plain")["last_run"];
    assert_eq!(
        (&last["run_id"], &last["status"]),
        (&json!(id), &json!("completed"))
    );
}

#[test]
fn a_webhook_workflow_starts_from_a_request_body_with_its_headers() {
    let d = tempdir();
    std::fs::write(
        d.path().join("issues.md"),
        "---\nworkflow: {id: issues}\ntriggers:\n  - type: webhook\n    path: /hooks/issues\n    events: [issues.opened]\n    secret: '${HOOK_SECRET}'\n    inputMapping: {title: payload.issue.title}\ninputs:\n  title: {type: string, default: none}\n---\n\n```yaml\naction: workflow.set_outputs\ninputs: {said: '{{ trigger.event }}: {{ inputs.title }}'}\n```\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("plain.md"),
        "---\nworkflow: {id: plain}\n---\n\n```yaml\naction: workflow.noop\n```\n",
    )
    .unwrap();
    let s = serve(
        d.path(),
        &["issues.md", "plain.md"],
        &[("HOOK_SECRET", "s3cret")],
    );
    let body = json!({"action": "opened", "issue": {"title": "Crash on save"}});
    // The event's header, as GitHub sends it: the trigger takes the request
    // (its secret is not asked: the API's own access guards this).
    let r = post(
        &s.addr,
        "/workflows/issues/replay",
        json!({"body": body, "headers": {"X-GitHub-Event": "issues"}}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let run = ended(&s.addr, &id);
    assert_eq!(
        run["outputs"]["said"], "issues.opened: Crash on save",
        "{run}"
    );
    // Without the header the trigger would ignore it; a workflow without a
    // webhook has nothing to replay; a body must be an object.
    let r = post(&s.addr, "/workflows/issues/replay", json!({"body": body}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("(its event: none)"), "{}", r.body);
    let r = post(&s.addr, "/workflows/plain/replay", json!({"body": {}}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("has no webhook trigger"), "{}", r.body);
    let r = post(&s.addr, "/workflows/issues/replay", json!({"body": [1]}));
    assert_eq!(r.status, 400, "{}", r.body);
}

#[test]
fn a_secret_from_the_environment_is_masked_in_everything_a_run_shows() {
    // Issue 49 item 8: a token read with `{{ env.MY_API_TOKEN }}` was in
    // clear in the log, `--json`, `show`, the store, the API and the events.
    let d = tempdir();
    std::fs::write(
        d.path().join("tok.md"),
        "---\nworkflow: {id: tok}\ntriggers: [{type: webhook, path: /tok}]\n---\n\n```yaml\naction: core.set\ninputs:\n  header: 'Bearer {{ env.MY_API_TOKEN }}'\noutput_variable: auth\n```\n\n```yaml\naction: workflow.log\ninputs: {message: 'using {{ env.MY_API_TOKEN }}'}\n```\n\n```yaml\naction: workflow.fail\ninputs: {message: 'refused: {{ env.MY_API_TOKEN }}'}\n```\n",
    )
    .unwrap();
    let token = "tok-s3cr3t-9f2";
    let store = d.path().join("runs.db");
    let store = store.to_str().unwrap();
    let env = [("MY_API_TOKEN", token), ("MARKTOFLOW_STORE", store)];
    let s = serve(d.path(), &["."], &env);
    let r = post(&s.addr, "/tok", json!({}));
    assert_eq!(r.status, 500, "{}", r.body);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(r.json()["error"]["message"], "refused: ***", "{}", r.body);
    let run = ended(&s.addr, &id);
    let events = get(&s.addr, &format!("/runs/{id}/events")).body;
    assert!(events.contains("Bearer ***"), "{events}");
    drop(s);

    let run_cli = |args: &[&str]| {
        let out = crate::support::cmd(d.path())
            .args(args)
            .envs(env)
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let shown = [
        r.body.clone(),
        run.to_string(),
        events,
        run_cli(&["run", "tok.md"]),
        run_cli(&["run", "tok.md", "--json"]),
        run_cli(&["run", "tok.md", "--dry-run"]),
        run_cli(&["show", &id]),
        run_cli(&["show", &id, "--json"]),
    ];
    for (i, text) in shown.iter().enumerate() {
        assert!(!text.contains(token), "view {i} shows the token: {text}");
        assert!(text.contains("***"), "view {i} shows no mask: {text}");
    }
    let mut kept = Vec::new();
    for e in std::fs::read_dir(d.path()).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().contains("runs.db") && p.is_file() {
            kept.extend(std::fs::read(&p).unwrap());
        }
    }
    assert!(!kept.is_empty());
    assert!(
        !kept.windows(token.len()).any(|w| w == token.as_bytes()),
        "the store keeps the token"
    );
}
