//! Workflows as MCP tools, driven by a real MCP client outside our code:
//! the Python SDK (`pip install mcp`, which `.ci/run` installs), over stdio
//! (`marktoflow mcp`) and Streamable HTTP (`marktoflow serve --mcp`).

use crate::fake_llm::{lifeos_reply, FakeLlm};
use crate::support::{bin, repo, tempdir, try_serve, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ANSWER: &str = "Answer: The API key for Apollo is APOLLO-KEY-7f3a-EXAMPLE.\nSources: [Work/Projects/Apollo/Apollo API Key and Access.md]\nConfidence: high";

/// Whether the Python MCP SDK is installed; CI installs it, so there its
/// absence fails the test.
fn have_client() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import mcp, httpx2"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok && std::env::var_os("CI").is_some() {
        panic!("the Python `mcp` package is not installed (`.ci/run` installs it)");
    }
    if !ok {
        eprintln!("skipped: pip install mcp");
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

fn client(mut c: Command, env: &[(&str, &str)]) -> Vec<Value> {
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

const GREET: &str = "---\nworkflow: {id: greet, name: Greeter, description: Greets someone.}\ninputs:\n  who: {type: string, required: true, description: Whom to greet}\n  times: {type: integer, min: 1, max: 3, default: 1}\n  tone: {type: string, enum: [warm, dry], default: warm}\noutputs:\n  greeting: {type: string, description: The greeting}\n---\n\n```yaml\naction: workflow.set_outputs\ninputs: {greeting: \"{{ ((inputs.tone ~ ' hello ' ~ inputs.who ~ '. ') * inputs.times) | trim }}\"}\n```\n";

const SLOW: &str = "---\nworkflow: {id: slow}\ninputs:\n  ms: {type: integer, default: 30000}\n---\n\n```yaml\nid: nap\ntype: wait\nduration: \"{{ inputs.ms }}\"\n```\n";

const BROKEN: &str = "---\nworkflow: {id: broken}\n---\n\n```yaml\nid: boom\naction: workflow.fail\ninputs: {message: the service is down}\n```\n";

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
        "---\nworkflow: {id: hidden}\n---\n\n```yaml\naction: workflow.noop\n```\n",
    );
    write(d.path().join("more").as_path(), "shown.md", "---\nworkflow: {id: shown}\ntriggers:\n  - type: mcp\n    name: notes.count\n    description: Counts notes.\n---\n\n```yaml\naction: workflow.set_outputs\ninputs: {count: 3}\n```\n");
    let store = d.path().join("runs.db");
    let out = stdio(
        d.path(),
        json!([
            {"do": "list"},
            {"do": "call", "name": "greet", "arguments": {"who": "Ada", "times": 2}, "progress": true},
            {"do": "call", "name": "greet", "arguments": {"times": 9}},
            {"do": "call", "name": "broken"},
            {"do": "call", "name": "notes.count"}
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
        json!({"type": "object", "properties": {"greeting": {"type": "string", "description": "The greeting"}}})
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
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let out = stdio(
        &repo(),
        json!([{"do": "call", "name": "lifeos-retrieval-indexed",
                "arguments": {"query": "What is the API key for Apollo?"}, "progress": true}]),
        &["workflows/lifeos/retrieval-indexed.md", "--no-store"],
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
    );
    let r = &out[0]["result"];
    assert_eq!(r["isError"], false, "{r}");
    let s = &r["structuredContent"];
    assert_eq!(
        s["answer"],
        "The API key for Apollo is APOLLO-KEY-7f3a-EXAMPLE."
    );
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

#[test]
fn serve_mounts_mcp_over_http_behind_its_token() {
    if !have_client() {
        return;
    }
    let d = tempdir();
    write(d.path(), "greet.md", GREET);
    let s = serve_mcp(
        d.path(),
        &["greet.md", "--mcp-token-env", "MCP_TOKEN"],
        &[("MCP_TOKEN", "s3cret")],
    )
    .unwrap();
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
