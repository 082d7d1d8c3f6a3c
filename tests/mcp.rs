//! Workflows as MCP tools, driven by a real MCP client outside our code:
//! the Python SDK (`pip install mcp`, which `.ci/run` installs), over stdio
//! (`marktoflow mcp`) and Streamable HTTP (`marktoflow serve --mcp`).

use crate::fake_llm::{evidence_reply, FakeLlm};
use crate::support::{bin, repo, tempdir, try_serve, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ANSWER: &str = "The API key for Apollo is APOLLO-KEY-7f3a-EXAMPLE.";

/// Whether the Python MCP SDK is installed; CI installs it, so there its
/// absence fails the test.
pub(crate) fn have_client() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import mcp, httpx2"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        crate::support::missing(
            "the MCP tests",
            "pip install mcp==2.3.0 (`.ci/run` installs it)",
        );
    }
    ok
}

/// Runs the client with `actions` against `marktoflow ARGS` over stdio in
/// `cwd`; one JSON value per action.
fn stdio(cwd: &Path, actions: Value, args: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
    let mut c = Command::new("python3");
    c.current_dir(cwd)
        .arg(repo().join("tests/mcp/client.py"))
        .arg("stdio")
        .arg(actions.to_string())
        .arg("--")
        .arg(bin())
        .arg("mcp")
        .args(args);
    client(c, env)
}

pub(crate) fn client(mut c: Command, env: &[(&str, &str)]) -> Vec<Value> {
    for v in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "MARKTOFLOW_AGENT",
    ] {
        c.env_remove(v);
    }
    crate::support::no_local_model(&mut c);
    let home = tempdir();
    c.env("MARKTOFLOW_HOME", home.path());
    c.envs(env.iter().copied());
    let out = c.output().expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

const GREET: &str = include_str!("fixtures/mcp/greet.md");

const SLOW: &str = include_str!("fixtures/mcp/slow.md");

const BROKEN: &str = include_str!("fixtures/mcp/broken.md");

#[test]
fn tools_have_schemas_from_inputs_and_calls_return_outputs_or_errors() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    write(d.path(), "greet.md", GREET);
    write(d.path(), "broken.md", BROKEN);
    // Below a folder, only workflows with a `type: mcp` trigger are tools.
    std::fs::create_dir(d.path().join("more")).unwrap();
    write(
        d.path().join("more").as_path(),
        "hidden.md",
        include_str!("fixtures/mcp/hidden.md"),
    );
    write(
        d.path().join("more").as_path(),
        "shown.md",
        include_str!("fixtures/mcp/shown.md"),
    );
    let store = d.path().join("runs.db");
    let out = stdio(
        d.path(),
        json!([
            {"do": "list"},
            {"do": "call", "name": "greet", "arguments": {"who": "Ada", "times": 2}, "progress": true},
            {"do": "call", "name": "greet", "arguments": {"times": 9}},
            {"do": "call", "name": "broken"},
            {"do": "call", "name": "notes.count"},
            {"do": "call", "name": "greet", "arguments": {"woh": "Ada"}},
            {"do": "call", "name": "gret", "arguments": {"who": "Ada"}}
        ]),
        &[
            "greet.md",
            "broken.md",
            "more",
            "--store",
            store.to_str().unwrap(),
        ],
        &[],
    );
    let tools = out[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["greet", "broken", "notes.count"]);
    let greet = &tools[0];
    assert_eq!(greet["description"], "Greets someone.");
    assert_eq!(
        greet["inputSchema"],
        json!({"type": "object", "properties": {
            "who": {"type": "string", "description": "Whom to greet"},
            "times": {"type": "integer", "default": 1, "minimum": 1, "maximum": 3},
            "tone": {"type": "string", "default": "warm", "enum": ["warm", "dry"]}},
            "required": ["who"], "additionalProperties": false})
    );
    assert_eq!(
        greet["outputSchema"],
        json!({"type": "object", "properties": {"greeting": {"type": ["string", "null"], "description": "The greeting"}}})
    );
    assert_eq!(tools[2]["description"], "Counts notes.");

    let ok = &out[1]["result"];
    assert_eq!(ok["isError"], false);
    assert_eq!(
        ok["structuredContent"],
        json!({"greeting": "warm hello Ada. warm hello Ada."})
    );
    assert!(ok["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("warm hello Ada."));
    // One notification per top-level step.
    assert_eq!(
        out[1]["progress"],
        json!([{"progress": 1.0, "total": 1.0, "message": "step_1: completed"}])
    );

    // Arguments are checked as a webhook's body is.
    let bad = &out[2]["result"];
    assert_eq!(bad["isError"], true);
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("must be at most 3"),
        "{bad}"
    );

    // A failing workflow: isError with the file, line and column.
    let failed = &out[3]["result"];
    assert_eq!(failed["isError"], true);
    let text = failed["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("broken.md:7:9: error: step `boom` failed: the service is down"),
        "{text}"
    );
    assert_eq!(
        failed["structuredContent"]["error"]["at"],
        json!({"line": 7, "col": 9})
    );
    assert_eq!(out[4]["result"]["structuredContent"], json!({"count": 3}));
    // A misspelt argument and a misspelt tool: each with its "did you mean".
    let typo = &out[5]["result"];
    assert_eq!(typo["isError"], true);
    let text = typo["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("input `woh`: this workflow has no such input (did you mean `who`?)")
            && text.contains("input `who`: a value is required (pass the argument `who` (string))"),
        "{text}"
    );
    let unknown = out[6]["error"].as_str().unwrap_or_default();
    assert!(
        unknown.contains("no tool `gret`; did you mean `greet`?"),
        "{:?}",
        out[6]
    );

    // Every call is in the run store, triggered by `mcp`.
    let h = crate::support::run(crate::support::cmd(d.path()).args([
        "history",
        "--json",
        "--store",
        store.to_str().unwrap(),
    ]));
    let runs = h.json();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs.iter().all(|r| r["trigger"] == "mcp"), "{runs:?}");
}

#[test]
fn the_flagship_answers_through_mcp_with_its_sources() {
    if !have_client() {
        return;
    }
    let llm = FakeLlm::start(evidence_reply("APOLLO-KEY-7f3a-EXAMPLE", ANSWER));
    let out = stdio(
        &repo(),
        json!([{"do": "call", "name": "lifeos-retrieval-indexed",
                "arguments": {"query": "What is the API key for Apollo?", "phrase": true}, "progress": true}]),
        &["workflows/lifeos/retrieval-indexed.md", "--no-store"],
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
    );
    let r = &out[0]["result"];
    assert_eq!(r["isError"], false, "{r}");
    let s = &r["structuredContent"];
    assert_eq!(s["answer"], ANSWER);
    // The structured output carries the cited lines.
    assert_eq!(s["found"], true, "{s}");
    assert!(
        s["citations"][0]["quote"]
            .as_str()
            .unwrap()
            .contains("APOLLO-KEY-7f3a-EXAMPLE"),
        "{s}"
    );
    assert!(s["citations"][0]["lines"].is_string(), "{s}");
    assert!(
        s["sources"][0]
            .as_str()
            .unwrap()
            .starts_with("Work/Projects/Apollo/"),
        "{s}"
    );
    let progress = out[0]["progress"].as_array().unwrap();
    assert!(progress.len() >= 4, "{progress:?}");
    assert_eq!(
        progress.last().unwrap()["progress"],
        progress.last().unwrap()["total"]
    );
}

#[test]
fn a_client_cancelling_a_call_cancels_the_run() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    write(d.path(), "slow.md", SLOW);
    let store = d.path().join("runs.db");
    let started = Instant::now();
    let out = stdio(
        d.path(),
        json!([{"do": "cancel", "name": "slow", "after": 1.0},
               {"do": "call", "name": "slow", "arguments": {"ms": 10}}]),
        &["slow.md", "--store", store.to_str().unwrap()],
        &[],
    );
    assert_eq!(out[0]["cancelled"], true);
    // The server answers the next call at once: the 30 s wait was stopped.
    assert_eq!(out[1]["result"]["isError"], false);
    assert!(started.elapsed() < Duration::from_secs(20));
    let h = crate::support::run(crate::support::cmd(d.path()).args([
        "history",
        "--json",
        "--store",
        store.to_str().unwrap(),
    ]));
    let statuses: Vec<String> = h.json()["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_string())
        .collect();
    assert!(statuses.contains(&"cancelled".to_string()), "{statuses:?}");
}

/// `marktoflow serve --mcp ARGS` (no run store).
fn serve_mcp(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Server, String> {
    let mut all = vec!["--mcp", "--no-store"];
    all.extend_from_slice(args);
    try_serve(cwd, &all, env)
}

/// `serve --mcp` of the greeter in `dir`, with the token `s3cret`.
fn greeter_behind_token(dir: &Path) -> Server {
    write(dir, "greet.md", GREET);
    serve_mcp(
        dir,
        &["greet.md", "--mcp-token-env", "MCP_TOKEN"],
        &[("MCP_TOKEN", "s3cret")],
    )
    .unwrap()
}

#[test]
fn serve_mounts_mcp_over_http_behind_its_token() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let s = greeter_behind_token(d.path());
    let url = format!("http://{}/mcp", s.addr);
    let mut c = Command::new("python3");
    c.arg(repo().join("tests/mcp/client.py"))
        .arg("http")
        .arg(json!([{"do": "list"}, {"do": "call", "name": "greet", "arguments": {"who": "Bo"}, "progress": true}]).to_string())
        .arg(&url)
        .arg("s3cret");
    let out = client(c, &[]);
    assert_eq!(out[0]["tools"][0]["name"], "greet");
    assert_eq!(
        out[1]["result"]["structuredContent"],
        json!({"greeting": "warm hello Bo."})
    );
    assert_eq!(out[1]["progress"].as_array().unwrap().len(), 1);

    // Without the token, or with a wrong one: 401, nothing runs.
    let mut c = Command::new("python3");
    c.arg(repo().join("tests/mcp/client.py"))
        .arg("http")
        .arg(json!([{"do": "list"}]).to_string())
        .arg(&url)
        .arg("wrong");
    assert!(!c.output().unwrap().status.success());

    // With the token, from a page of another site: refused (403); from a
    // page of this server, or from no page at all: answered.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string();
    let here = format!("http://{}", s.addr);
    for (origin, want) in [
        (Some("http://evil.example"), 403),
        (Some(here.as_str()), 200),
        (None, 200),
    ] {
        let mut headers = vec![
            ("Authorization", "Bearer s3cret"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        let r = crate::support::http(&s.addr, "POST", "/mcp", &headers, init.as_bytes());
        assert_eq!(r.status, want, "{origin:?}: {}", r.body);
    }

    // Sessions are capped: past the cap a new
    // one is refused with 503; closing one makes room.
    let headers = [
        ("Authorization", "Bearer s3cret"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let mut last = String::new();
    let mut refused = None;
    for i in 0..300 {
        let r = crate::support::http(&s.addr, "POST", "/mcp", &headers, init.as_bytes());
        if r.status == 503 {
            refused = Some((i, r));
            break;
        }
        assert_eq!(r.status, 200, "{}", r.body);
        last = r
            .header("mcp-session-id")
            .expect("a session id")
            .to_string();
    }
    let (opened, r) = refused.expect("a session past the cap is refused");
    // Two sessions of the Origin checks above are open, the Python
    // client's two may still be.
    assert!(
        (252..=254).contains(&opened),
        "the cap is 256 sessions: refused after {opened}"
    );
    assert_eq!(r.header("retry-after"), Some("60"));
    let mut del = headers.to_vec();
    del.push(("Mcp-Session-Id", &last));
    assert_eq!(
        crate::support::http(&s.addr, "DELETE", "/mcp", &del, b"").status,
        202
    );
    let r = crate::support::http(&s.addr, "POST", "/mcp", &headers, init.as_bytes());
    assert_eq!(r.status, 200, "room again after one closed: {}", r.body);

    // Misconfigured, it refuses to start: never open by accident.
    let e = serve_mcp(
        d.path(),
        &["greet.md", "--mcp-token-env", "UNSET_TOKEN"],
        &[],
    )
    .err()
    .unwrap();
    assert!(e.contains("`UNSET_TOKEN` is not set"), "{e}");
    let e = serve_mcp(d.path(), &["greet.md", "--host", "0.0.0.0"], &[])
        .err()
        .unwrap();
    assert!(e.contains("needs `--mcp-token-env VAR`"), "{e}");
}

/// A workflow calling tools of the Python SDK's server over stdio.
fn python_tools(dir: &Path, started: &Path, extra: &str, steps: &str) -> String {
    format!(
        "---\nworkflow: {{id: py-tools}}\ntools:\n  py:\n    sdk: mcp\n    command: python3\n    args: [{server}, --started, {started}]\n    env: {{SHOWN: shown-value}}\n{extra}---\n\n{steps}",
        server = repo().join("tests/mcp/server.py").display(),
        started = started.display(),
    )
    .replace("{dir}", &dir.display().to_string())
}

fn step(id: &str, action: &str, inputs: &str) -> String {
    format!("```yaml\nid: {id}\naction: {action}\ninputs: {inputs}\n```\n\n")
}

fn alive(pid: &str) -> bool {
    // A zombie has exited; only its entry is left.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[test]
fn a_workflow_calls_an_mcp_servers_tools_which_sees_only_declared_env() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let started = d.path().join("started");
    let steps = [
        step("sum", "py.add", "{a: 2, b: 3}"),
        step("secret", "py.getenv", "{name: RUN_SECRET}"),
        step("key", "py.getenv", "{name: ANTHROPIC_API_KEY}"),
        step("shown", "py.getenv", "{name: SHOWN}"),
        step(
            "loud",
            "py.echo",
            "{text: \"{{ steps.sum.output.sum }} apples\", shout: true}",
        ),
    ]
    .concat();
    write(
        d.path(),
        "wf.md",
        &python_tools(d.path(), &started, "", &steps),
    );
    let r = crate::support::run(
        crate::support::cmd(d.path())
            .args(["run", "wf.md", "--json", "--quiet", "--no-store"])
            .env("RUN_SECRET", "hunter2")
            .env("ANTHROPIC_API_KEY", "sk-not-for-servers"),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out: Vec<Value> = r.json()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["output"].clone())
        .collect();
    assert_eq!(out[0], json!({"sum": 5}));
    // The run's environment stays with the run.
    assert_eq!(out[1], json!({"result": ""}));
    assert_eq!(out[2], json!({"result": ""}));
    assert_eq!(out[3], json!({"result": "shown-value"}));
    assert_eq!(out[4], json!({"result": "5 APPLES"}));
    // One server for the whole run, stopped when the run ended.
    let pid = std::fs::read_to_string(&started).unwrap();
    assert!(!alive(&pid), "the server {pid} outlived the run");

    // A server that dies is started again by the next call.
    let steps = [
        step("before", "py.pid", "{}"),
        step("crash", "py.crash", "{}").replace("inputs: {}\n", "inputs: {}\non_error: continue\n"),
        step("after", "py.pid", "{}"),
    ]
    .concat();
    write(
        d.path(),
        "crash.md",
        &python_tools(d.path(), &started, "", &steps),
    );
    let r = crate::support::run(crate::support::cmd(d.path()).args([
        "run",
        "crash.md",
        "--json",
        "--quiet",
        "--no-store",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let steps = r.json()["steps"].clone();
    assert_eq!(steps[1]["status"], "failed", "{steps}");
    assert!(
        steps[1]["error"]
            .as_str()
            .unwrap()
            .contains("Transport closed"),
        "{steps}"
    );
    assert_ne!(
        steps[0]["output"], steps[2]["output"],
        "the same server answered: {steps}"
    );
    assert!(steps[2]["output"]["result"].as_i64().is_some(), "{steps}");

    // A tool's error fails the step, placed at its action.
    let steps = step("boom", "py.fail", "{message: disk full}");
    write(
        d.path(),
        "fail.md",
        &python_tools(d.path(), &started, "", &steps),
    );
    let r =
        crate::support::run(crate::support::cmd(d.path()).args(["run", "fail.md", "--no-store"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("fail.md:13:9: error: step `boom` failed: MCP tool `py.fail` failed"),
        "{}",
        r.stderr
    );
}

#[test]
fn validate_starts_servers_only_when_online_and_checks_calls_against_them() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let started = d.path().join("started");
    let steps = [
        step("one", "py.ad", "{a: 1, b: 2}"),
        step("two", "py.echo", "{txt: hi}"),
        step("three", "py.add", "{a: 1}"),
    ]
    .concat();
    write(
        d.path(),
        "wf.md",
        &python_tools(d.path(), &started, "", &steps),
    );
    let r = crate::support::run(crate::support::cmd(d.path()).args(["validate", "wf.md"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!started.exists(), "plain validate started the server");

    let r =
        crate::support::run(crate::support::cmd(d.path()).args(["validate", "--online", "wf.md"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(started.exists());
    for want in [
        "wf.md:13:9: error: `py.ad`: the MCP server of `py` has no tool `ad`",
        "did you mean `py.add`?",
        "wf.md:20:10: error: `py.echo` has no argument `txt`",
        "did you mean `text`?",
        "error: `py.add` needs argument `b`",
    ] {
        assert!(r.stderr.contains(want), "missing {want:?} in\n{}", r.stderr);
    }
    for want in [
        "tool `py`: MCP server `python3 ",
        "py.add(a, b)",
        "py.echo(text, shout?)",
    ] {
        assert!(r.stdout.contains(want), "missing {want:?} in\n{}", r.stdout);
    }
    let pid = std::fs::read_to_string(&started).unwrap();
    assert!(!alive(&pid), "validate left the server {pid} running");

    // `allowed` is checked without the server.
    let allowed = "    allowed: [echo]\n";
    let steps = step("one", "py.add", "{a: 1, b: 2}");
    write(
        d.path(),
        "limited.md",
        &python_tools(d.path(), &started, allowed, &steps),
    );
    std::fs::remove_file(&started).unwrap();
    let r = crate::support::run(crate::support::cmd(d.path()).args([
        "run",
        "limited.md",
        "--no-store",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("tool `add` is not in the `allowed` list of `py`"),
        "{}",
        r.stderr
    );
    assert!(!started.exists(), "a refused call started the server");
}

#[test]
fn a_workflow_calls_tools_over_streamable_http_within_the_allowed_hosts() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let s = greeter_behind_token(d.path());
    let caller = d.path().join("caller");
    std::fs::create_dir(&caller).unwrap();
    let wf = format!(
        "---\nworkflow: {{id: caller}}\ntools:\n  remote:\n    sdk: mcp\n    url: http://{}/mcp\n    headers: {{Authorization: \"Bearer ${{REMOTE_TOKEN}}\"}}\n---\n\n{}",
        s.addr,
        step("hi", "remote.greet", "{who: Ada, tone: dry}")
    );
    write(&caller, "caller.md", &wf);
    let run = |token: &str, extra: &[&str]| {
        crate::support::run(
            crate::support::cmd(&caller)
                .args(["run", "caller.md", "--json", "--quiet", "--no-store"])
                .args(extra)
                .env("REMOTE_TOKEN", token),
        )
    };
    let r = run("s3cret", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["steps"][0]["output"],
        json!({"greeting": "dry hello Ada."})
    );
    // A wrong token: the server refuses, the step says so.
    let r = run("wrong", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.json()["steps"][0]["error"]
            .as_str()
            .unwrap()
            .contains("MCP server `http://"),
        "{r:?}"
    );
    // The allowed hosts bound MCP servers as they bound `http.*`.
    let r = run("s3cret", &["--allow-host", "example.com"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.json()["steps"][0]["error"]
            .as_str()
            .unwrap()
            .contains("is not allowed"),
        "{r:?}"
    );
}

#[test]
fn conhubs_tools_are_served_under_the_seeds_names_with_its_fields() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    crate::support::copy_dir(&repo().join("examples/conhub"), &d.path().join("kb"));
    let conhub = repo().join("workflows/conhub");
    let store = json!({
        "text": "Decision: the retry queue moves to Redis streams in December; Carol owns the migration.",
        "source_type": "chat",
        "metadata": {"repo": "billing", "tags": ["decision"]},
        "today": "2026-11-23",
        "knowledge_base": "kb",
    });
    // The seed's example call, with its `strategy` argument.
    let search = json!({
        "query": "Who owns the retry queue migration?",
        "sources": ["chat", "docs"],
        "max_blocks": 10,
        "strategy": "keyword",
        "knowledge_base": "kb",
        "today": "2026-11-23",
    });
    let out = stdio(
        d.path(),
        json!([
            {"do": "list"},
            {"do": "call", "name": "memory.analyze_query", "arguments": {"query": "What happened with the billing deploy last week?", "today": "2026-11-23"}},
            {"do": "call", "name": "memory.store", "arguments": store},
            {"do": "call", "name": "memory.search", "arguments": search},
        ]),
        &[conhub.to_str().unwrap(), "--allow-write", "kb"],
        &[],
    );
    let tools = out[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "memory.analyze_query",
            "graph.ask",
            "memory.search",
            "memory.store",
            "memory.robot_context",
            "memory.robot_search"
        ],
        "{tools:?}"
    );
    let search_tool = &tools[2];
    for field in [
        "query",
        "sources",
        "filters",
        "max_blocks",
        "max_tokens",
        "strategy",
        "force_strategy",
        "include_debug",
        "tenant_id",
        "user_id",
    ] {
        assert!(
            search_tool["inputSchema"]["properties"]
                .get(field)
                .is_some(),
            "memory.search lacks `{field}`: {search_tool}"
        );
    }
    assert_eq!(search_tool["inputSchema"]["required"], json!(["query"]));

    let analysis = &out[1]["result"]["structuredContent"];
    assert_eq!(analysis["query_kind"], "episodic_lookup", "{analysis}");
    assert_eq!(analysis["strategy"], "recent");
    assert_eq!(analysis["time"]["from"], "2026-11-16");

    let stored = &out[2]["result"]["structuredContent"];
    assert_eq!(stored["stored"], true, "{}", out[2]);
    let note = stored["source_id"].as_str().unwrap();
    assert!(note.starts_with("stored/2026-11-23-decision-"), "{note}");
    assert!(d.path().join("kb").join(note).is_file());

    let found = &out[3]["result"]["structuredContent"];
    assert_eq!(found["strategy_used"], "keyword", "{found}");
    let first = &found["blocks"][0];
    assert_eq!(first["source_id"], note, "{found}");
    assert_eq!(first["source_type"], "chat");
    assert_eq!(first["metadata"]["repo"], "billing");
    for field in ["id", "text", "score", "token_count"] {
        assert!(first.get(field).is_some(), "block lacks `{field}`: {first}");
    }
    for field in ["total_results", "query_kind", "took_ms"] {
        assert!(
            found.get(field).is_some(),
            "response lacks `{field}`: {found}"
        );
    }
}

/// A workflow whose agent step may call the Python server's tools.
fn agent_with_tools(dir: &Path, started: &Path, sdk: &str, extra_inputs: &str) -> String {
    python_tools(
        dir,
        started,
        &format!("  llm: {{sdk: {sdk}, options: {{model: fake-model}}}}\n"),
        &step(
            "ask",
            "llm.run",
            &format!("{{prompt: \"What is 2 + 3?\", tools: [py.add, py.echo]{extra_inputs}}}"),
        ),
    )
}

#[test]
fn an_agent_step_calls_mcp_tools_in_the_providers_format() {
    if !have_client() {
        return;
    }
    use crate::fake_llm::RAW;
    let d = tempdir();
    let started = d.path().join("started");
    // Anthropic: a tool_use first, then the answer once the result is back.
    let llm = FakeLlm::start(std::sync::Arc::new(|req| {
        let msgs = req.body["messages"].as_array().unwrap();
        match msgs.last().unwrap()["content"][0]["type"].as_str() {
            Some("tool_result") => (
                200,
                format!(
                    "The sum is {}.",
                    msgs.last().unwrap()["content"][0]["content"]
                        .as_str()
                        .unwrap()
                ),
            ),
            _ => (
                RAW,
                json!({"content": [
                {"type": "text", "text": "I will add them."},
                {"type": "tool_use", "id": "tu_1", "name": "py__add", "input": {"a": 2, "b": 3}}
            ], "stop_reason": "tool_use"})
                .to_string(),
            ),
        }
    }));
    write(
        d.path(),
        "a.md",
        &agent_with_tools(d.path(), &started, "anthropic", ""),
    );
    let r = crate::support::run(
        crate::support::cmd(d.path())
            .args(["run", "a.md", "--json", "--quiet", "--no-store"])
            .env("ANTHROPIC_BASE_URL", &llm.base)
            .env("ANTHROPIC_API_KEY", "k"),
    );
    assert_eq!(r.code, 0, "{r:?}");
    // The server's text result (the Python SDK's JSON) went back to the model.
    let answer = r.json()["steps"][0]["output"].as_str().unwrap().to_string();
    assert!(
        answer.starts_with("The sum is {") && answer.contains("\"sum\": 5"),
        "{answer}"
    );
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    let offered: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["py__add", "py__echo"]);
    assert_eq!(
        reqs[0].body["tools"][0]["input_schema"]["required"],
        json!(["a", "b"])
    );
    assert_eq!(reqs[1].body["messages"][1]["content"][1]["id"], "tu_1");
    assert_eq!(reqs[1].body["messages"][2]["content"][0]["is_error"], false);

    // OpenAI: tool_calls with JSON-text arguments, results as `tool` messages;
    // a call of a tool not offered goes back to the model as an error.
    let llm = FakeLlm::start(std::sync::Arc::new(|req| {
        let msgs = req.body["messages"].as_array().unwrap();
        let tool_msgs: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
        if tool_msgs.is_empty() {
            return (RAW, json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "py__echo", "arguments": "{\"text\": \"hi\", \"shout\": true}"}},
                {"id": "c2", "type": "function", "function": {"name": "py__getenv", "arguments": "{\"name\": \"HOME\"}"}}
            ]}}]}).to_string());
        }
        (
            200,
            format!(
                "{} | {}",
                tool_msgs[0]["content"].as_str().unwrap(),
                tool_msgs[1]["content"].as_str().unwrap()
            ),
        )
    }));
    write(
        d.path(),
        "o.md",
        &agent_with_tools(d.path(), &started, "openai", ""),
    );
    let r = crate::support::run(
        crate::support::cmd(d.path())
            .args(["run", "o.md", "--json", "--quiet", "--no-store"])
            .env("OPENAI_BASE_URL", &llm.base)
            .env("OPENAI_API_KEY", "k"),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out = r.json()["steps"][0]["output"].as_str().unwrap().to_string();
    assert!(
        out.starts_with("HI | there is no tool `py__getenv`"),
        "{out}"
    );
    assert_eq!(
        llm.requests()[0].body["tools"][0]["function"]["name"],
        "py__add"
    );

    // A model that never stops calling tools is stopped at `max_turns`.
    let llm = FakeLlm::start(std::sync::Arc::new(|_| {
        (RAW, json!({"content": [{"type": "tool_use", "id": "t", "name": "py__add", "input": {"a": 1, "b": 1}}], "stop_reason": "tool_use"}).to_string())
    }));
    write(
        d.path(),
        "loop.md",
        &agent_with_tools(d.path(), &started, "anthropic", ", max_turns: 3"),
    );
    let r = crate::support::run(
        crate::support::cmd(d.path())
            .args(["run", "loop.md", "--no-store"])
            .env("ANTHROPIC_BASE_URL", &llm.base)
            .env("ANTHROPIC_API_KEY", "k"),
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("still calling tools after 3 requests"),
        "{}",
        r.stderr
    );
    assert_eq!(llm.requests().len(), 3);
}

#[test]
fn with_watch_the_tool_list_follows_the_files_and_clients_are_told() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let tools = d.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    let tool = |id: &str| {
        format!("---\nworkflow: {{id: {id}, description: The {id} tool.}}\ntriggers: [{{type: mcp}}]\n---\n\n```yaml\naction: workflow.set_outputs\ninputs: {{who: {id}}}\n```\n")
    };
    write(&tools, "one.md", &tool("one"));
    write(&tools, "notes.md", "# Not a workflow\n");
    let two = tools.join("two.md");
    let one = tools.join("one.md");
    let out = stdio(
        d.path(),
        json!([
            {"do": "list"},
            {"do": "write", "path": two, "text": tool("two")},
            {"do": "wait_list_changed", "within": 20},
            {"do": "list"},
            {"do": "call", "name": "two"},
            // A broken edit keeps the last list that loaded.
            {"do": "write", "path": one, "text": include_str!("fixtures/mcp/one.md")},
            {"do": "wait_list_changed", "within": 2},
            {"do": "call", "name": "one"},
            {"do": "remove", "path": two},
            {"do": "write", "path": one, "text": tool("one")},
            {"do": "wait_list_changed", "within": 20},
            {"do": "list"},
        ]),
        &["--watch", "tools"],
        &[],
    );
    let names = |v: &Value| -> Vec<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&out[0]), ["one"]);
    assert_eq!(out[2]["changed"], true, "{out:?}");
    assert_eq!(names(&out[3]), ["one", "two"]);
    assert_eq!(out[4]["result"]["structuredContent"], json!({"who": "two"}));
    assert_eq!(
        out[6]["changed"], false,
        "a file that does not load changed the list: {out:?}"
    );
    assert_eq!(out[7]["result"]["structuredContent"], json!({"who": "one"}));
    assert_eq!(out[10]["changed"], true, "{out:?}");
    assert_eq!(names(&out[11]), ["one"]);
}

/// A reply over the transport's 16 MiB fails the call with a clear error
/// (it was dropped unseen, and the call never ended); a call that gets no
/// answer ends at the tool's `call_timeout`.
#[test]
fn an_oversized_reply_or_no_reply_fails_the_call_clearly() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let started = d.path().join("started");
    let steps = [
        step("small", "py.big", "{mib: 1}"),
        step("large", "py.big", "{mib: 17}").replace(
            "inputs: {mib: 17}\n",
            "inputs: {mib: 17}\non_error: continue\n",
        ),
        step("again", "py.add", "{a: 1, b: 2}"),
        step("silent", "slow.hang", "{}"),
    ]
    .concat();
    let slow = format!(
        "  slow:\n    sdk: mcp\n    command: python3\n    args: [{}]\n    call_timeout: 2s\n",
        repo().join("tests/mcp/server.py").display()
    );
    write(
        d.path(),
        "wf.md",
        &python_tools(d.path(), &started, &slow, &steps),
    );
    let r = crate::support::run(crate::support::cmd(d.path()).args([
        "run",
        "wf.md",
        "--json",
        "--quiet",
        "--no-store",
    ]));
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    let steps = j["steps"].as_array().unwrap();
    assert_eq!(
        steps[0]["output"]["result"].as_str().map(str::len),
        Some(1 << 20)
    );
    let large = steps[1]["error"].as_str().unwrap_or_default();
    assert!(
        large.contains("calling `big` failed: the server sent a message over 16 MiB"),
        "{large}"
    );
    // The next call starts the server again.
    assert_eq!(steps[2]["output"], json!({"sum": 3}));
    let silent = j["error"]["message"].as_str().unwrap_or_default();
    assert!(
        silent.contains("calling `hang` got no answer within 2s"),
        "{silent}"
    );
    let pid = std::fs::read_to_string(&started).unwrap();
    assert!(!alive(&pid), "the server {pid} outlived the run");
}

#[test]
fn a_tool_whose_run_waits_for_a_person_says_how_to_answer_it() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    write(
        d.path(),
        "deploy.md",
        "---\nworkflow: {id: deploy, name: Deploy, description: Deploys once approved.}\noutputs: {deployed: {type: boolean}}\n---\n\n```yaml\nid: review\ntype: wait\nmode: approval\ntitle: 'Deploy to production?'\n```\n\n```yaml\naction: core.set\ninputs: {deployed: '{{ steps.review.output.approved }}'}\n```\n",
    );
    let store = d.path().join("runs.db");
    let out = stdio(
        d.path(),
        json!([{"do": "call", "name": "deploy"}]),
        &["deploy.md", "--store", store.to_str().unwrap()],
        &[("MARKTOFLOW_PUBLIC_URL", "https://flows.example.com")],
    );
    let r = &out[0]["result"];
    assert_eq!(r["isError"], false, "{r}");
    let s = &r["structuredContent"];
    assert_eq!(
        (s["status"].clone(), s["step"].clone(), s["title"].clone()),
        (
            json!("waiting"),
            json!("review"),
            json!("Deploy to production?")
        )
    );
    let link = s["link"].as_str().unwrap();
    assert!(
        link.starts_with("https://flows.example.com/answer/"),
        "{link}"
    );
    let id = s["run_id"].as_str().unwrap();
    let text = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        format!("The run waits for a person at step `review` (Deploy to production?). Answer it at {link}, or with `marktoflow answer {id} review`.")
    );
    let done = crate::support::run(crate::support::cmd(d.path()).args([
        "answer",
        id,
        "--approve",
        "--json",
        "--quiet",
        "--store",
        store.to_str().unwrap(),
    ]));
    assert_eq!(done.code, 0, "{done:?}");
    assert_eq!(done.json()["outputs"], json!({"deployed": true}));
}

#[test]
fn an_agents_tool_call_marked_for_approval_waits_and_goes_on_as_decided() {
    if !have_client() {
        return;
    }
    use crate::fake_llm::RAW;
    let d = tempdir();
    std::fs::create_dir(d.path().join(".marktoflow")).unwrap();
    let started = d.path().join("started");
    // A tool_use of `add`, then an answer quoting the tool's result.
    let llm = FakeLlm::start(std::sync::Arc::new(|req| {
        let msgs = req.body["messages"].as_array().unwrap();
        let last = &msgs.last().unwrap()["content"][0];
        match last["type"].as_str() {
            Some("tool_result") => (
                200,
                format!("Result: {}", last["content"].as_str().unwrap()),
            ),
            _ => (
                RAW,
                json!({"content": [
                    {"type": "tool_use", "id": "tu_1", "name": "py__add", "input": {"a": 2, "b": 3}}
                ], "stop_reason": "tool_use"})
                .to_string(),
            ),
        }
    }));
    let wf = python_tools(
        d.path(),
        &started,
        "    approval: [add]\n  llm: {sdk: anthropic, options: {model: fake-model}}\n",
        &step(
            "ask",
            "llm.run",
            "{prompt: \"What is 2 + 3?\", tools: [py.add, py.echo]}",
        ),
    );
    write(d.path(), "a.md", &wf);
    let run = |args: &[&str]| {
        crate::support::run(
            crate::support::cmd(d.path())
                .args(args)
                .env("ANTHROPIC_BASE_URL", &llm.base)
                .env("ANTHROPIC_API_KEY", "k"),
        )
    };
    let r = run(&["run", "a.md", "--json", "--quiet"]);
    assert_eq!(r.code, 0, "{r:?}");
    let w = &r.json()["waiting"];
    assert_eq!(r.json()["status"], "waiting", "{r:?}");
    assert_eq!(w["title"], "Allow `py.add`?");
    assert_eq!(w["mode"], "approval");
    assert_eq!(w["fields"][0]["name"], "arguments");
    assert_eq!(w["fields"][0]["default"], json!({"a": 2, "b": 3}));
    assert!(w["step_id"].as_str().unwrap().starts_with("tool:"), "{w}");
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(llm.requests().len(), 1);

    // Approved with other arguments: the recorded first turn is replayed
    // (not asked again), the call made as edited, the model answers.
    let ok = run(&[
        "answer",
        &id,
        "--approve",
        "--input",
        "arguments={\"a\": 20, \"b\": 3}",
        "--as",
        "ann",
        "--json",
        "--quiet",
    ]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(ok.json()["status"], "completed", "{ok:?}");
    let answer = ok.json()["steps"][0]["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(answer.contains("\"sum\": 23"), "{answer}");
    assert_eq!(
        llm.requests().len(),
        2,
        "the first turn was not asked again"
    );

    // Refused: the model is told so, by whom and why.
    let r = run(&["run", "a.md", "--json", "--quiet"]);
    let id = r.json()["run_id"].as_str().unwrap().to_string();
    let no = run(&[
        "answer",
        &id,
        "--reject",
        "--comment",
        "not today",
        "--as",
        "bob",
        "--json",
        "--quiet",
    ]);
    assert_eq!(no.code, 0, "{no:?}");
    assert_eq!(
        no.json()["steps"][0]["output"],
        "Result: bob refused this call of py.add: not today"
    );
}

/// A refund needing approval, with an amount the reviewer may change.
const REFUND: &str = "---\nworkflow: {id: refund, name: Refund, description: Refunds an order once approved.}\ninputs: {order: {type: string, required: true}}\noutputs: {refunded: {type: boolean}, amount: {type: number}, by: {type: string}, via: {type: string}, comment: {type: string}}\n---\n\n```yaml\nid: review\ntype: wait\nmode: approval\ntitle: 'Refund order {{ inputs.order }}?'\nprompt: The customer says it arrived broken.\nfields:\n  amount: {type: number, required: true, min: 0, max: 100, description: Euros}\n```\n\n```yaml\naction: core.set\ninputs:\n  refunded: '{{ steps.review.output.approved }}'\n  amount: '{{ steps.review.output.amount }}'\n  by: '{{ steps.review.output.answered_by }}'\n  via: '{{ steps.review.output.via }}'\n  comment: '{{ steps.review.output.comment }}'\n```\n";

/// Calls REFUND for `order` over stdio in `dir`, the client answering
/// its forms with `replies`: the call's output and the run store.
fn call_refund(dir: &Path, order: &str, replies: Value) -> (Value, std::path::PathBuf) {
    write(dir, "refund.md", REFUND);
    let store = dir.join("runs.db");
    let mut out = stdio(
        dir,
        json!([{"do": "call", "name": "refund", "arguments": {"order": order}, "elicit": replies}]),
        &["refund.md", "--store", store.to_str().unwrap()],
        &[],
    );
    (out.remove(0), store)
}

#[test]
fn a_waiting_tool_call_asks_the_clients_user_and_goes_on_with_the_answer() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    // The first reply is out of bounds and asked again with why; the
    // second decides.
    let (out, _) = call_refund(
        d.path(),
        "A-7",
        json!([
            {"action": "accept", "content": {"decision": "approve", "amount": 500}},
            {"action": "accept", "content": {"decision": "approve", "amount": 40, "comment": "photo checked"}},
        ]),
    );
    let r = &out["result"];
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        r["structuredContent"],
        json!({"refunded": true, "amount": 40, "by": "mcp", "via": "mcp", "comment": "photo checked"})
    );
    let mut asked = out["elicited"].as_array().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    // The SDK's own request metadata (a progress token) is not ours to pin.
    asked[0].as_object_mut().unwrap().remove("_meta");
    assert_eq!(
        asked[0],
        json!({
            "mode": "form",
            "message": "Refund order A-7?\n\nThe customer says it arrived broken.",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "title": "amount", "description": "Euros", "minimum": 0.0, "maximum": 100.0},
                    "comment": {"type": "string", "title": "Comment", "description": "Why (kept with the decision)"},
                    "decision": {"type": "string", "title": "Decision", "enum": ["approve", "reject"], "enumNames": ["Approve", "Reject"]},
                },
                "required": ["decision", "amount"],
            },
        })
    );
    assert_eq!(
        asked[1]["message"],
        "That answer was not taken: field `amount`: must be at most 100 (got 500).\n\nRefund order A-7?\n\nThe customer says it arrived broken."
    );
}

#[test]
fn a_declined_form_leaves_the_run_waiting_for_its_link() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let (out, store) = call_refund(d.path(), "A-8", json!([{"action": "decline"}]));
    let r = &out["result"];
    assert_eq!(r["isError"], false, "{r}");
    let s = &r["structuredContent"];
    assert_eq!(
        (&s["status"], &s["step"]),
        (&json!("waiting"), &json!("review"))
    );
    assert_eq!(out["elicited"].as_array().unwrap().len(), 1);
    // Still answerable elsewhere, once.
    let id = s["run_id"].as_str().unwrap();
    let done = crate::support::run(crate::support::cmd(d.path()).args([
        "answer",
        id,
        "--approve",
        "--input",
        "amount=10",
        "--as",
        "ann",
        "--json",
        "--quiet",
        "--store",
        store.to_str().unwrap(),
    ]));
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(
        done.json()["outputs"],
        json!({"refunded": true, "amount": 10, "by": "ann", "via": "cli", "comment": null})
    );
}

#[test]
fn over_http_only_a_listed_approver_is_asked_and_answers_as_the_gateway_says() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let listed = REFUND.replace("mode: approval\n", "mode: approval\napprovers: [ann]\n");
    write(d.path(), "refund.md", &listed);
    let store = d.path().join("runs.db");
    let s = try_serve(
        d.path(),
        &[
            "--mcp",
            "refund.md",
            "--mcp-token-env",
            "MCP_TOKEN",
            "--identity-header",
            "X-User",
            "--store",
            store.to_str().unwrap(),
        ],
        &[("MCP_TOKEN", "s3cret")],
    )
    .unwrap();
    let call_as = |who: &str, order: &str| {
        let approve = json!({"action": "accept", "content": {"decision": "approve", "amount": 5}});
        let mut c = Command::new("python3");
        c.arg(repo().join("tests/mcp/client.py"))
            .arg("http")
            .arg(
                json!([{"do": "call", "name": "refund", "arguments": {"order": order}, "elicit": [approve]}])
                    .to_string(),
            )
            .arg(format!("http://{}/mcp", s.addr))
            .arg("s3cret")
            .arg(format!("X-User={who}"));
        client(c, &[]).remove(0)
    };
    // Bob is not among the approvers: he is not asked, the run waits.
    let bob = call_as("bob", "A-9");
    assert_eq!(
        bob["result"]["structuredContent"]["status"], "waiting",
        "{bob}"
    );
    assert_eq!(bob["elicited"], json!([]));
    // Ann is: asked, her answer decides, recorded as hers.
    let ann = call_as("ann", "A-10");
    assert_eq!(ann["elicited"].as_array().unwrap().len(), 1);
    assert_eq!(
        ann["result"]["structuredContent"],
        json!({"refunded": true, "amount": 5, "by": "ann", "via": "mcp", "comment": null})
    );
}

#[test]
fn a_step_that_wants_someone_else_than_the_requester_is_not_asked_of_the_caller() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    let own = REFUND.replace(
        "mode: approval\n",
        "mode: approval\nrequester: '{{ inputs.order }}'\nself_approval: false\n",
    );
    let (out, _) = {
        write(d.path(), "refund.md", &own);
        let store = d.path().join("runs.db");
        let mut out = stdio(
            d.path(),
            json!([{"do": "call", "name": "refund", "arguments": {"order": "A-11"}, "elicit": [{"action": "accept", "content": {"decision": "approve", "amount": 5}}]}]),
            &["refund.md", "--store", store.to_str().unwrap()],
            &[],
        );
        (out.remove(0), store)
    };
    assert_eq!(
        out["result"]["structuredContent"]["status"], "waiting",
        "{out}"
    );
    assert_eq!(out["elicited"], json!([]));
}
