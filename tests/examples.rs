//! Every example under `examples/` runs, and gives the outputs its text promises.

use crate::fake_llm::FakeLlm;
use crate::support::{cmd, repo, run};
use serde_json::{json, Value};
use std::sync::Arc;

/// Outputs each example must produce (a subset of the outputs).
fn expected(name: &str) -> Option<Value> {
    Some(match name {
        "hello.md" => json!({"greeting": "Hello, World!"}),
        // Answered by `marktoflow answer` (see `every_example_runs`).
        "approval.md" => json!({"status": "approved", "refunded": 180, "reviewer": "ann"}),
        "concurrency.md" => json!({"held": {}}),
        "inputs.md" => {
            json!({"summary": {"doubled": 4, "label": "2 kg for ABC-1", "first_tag": "a"}})
        }
        "branching.md" => json!({"verdict": "pass", "band": "B", "took_then_branch": true}),
        "script.md" => json!({"stats": {"longest": "quick", "joined": "docs/a.md"}}),
        "loops.md" => json!({
            "seen": ["1/3 apple", "2/3 banana", "3/3 cherry"],
            "counter": 3,
            "recovery": "the service is down",
            "optional_status": "failed"
        }),
        "agent.md" => json!({"summary": "Apollo ships mid-December."}),
        // Against the fake GitHub and Slack of `every_example_runs`.
        "integrations.md" => json!({"count": 1, "ts": "1700000000.1"}),
        "structured.md" => json!({"deadline": "2026-12-15", "owner": "John Carter"}),
        "collections.md" => {
            json!({"billed": ["tea", "scone"], "grand_total": 13, "top": "tea", "units": 5, "out_of_stock": ["scone"]})
        }
        "parallel.md" => {
            json!({"facts": "Facts about tides", "questions": ["Why? (tides)", "When? (tides)"]})
        }
        "search.md" => json!({
            "top_path": "Work/Projects/Apollo/Apollo API Key and Access.md",
            "first_task": "task",
            "types": ["meeting", "task", "person"],
            "fused_top": "Work/Projects/Apollo/Apollo API Key and Access.md"
        }),
        "webhook.md" => json!({"announcement": "someone released v0.0.0", "via": "cli"}),
        "knowledge-graph.md" => json!({
            "owners": ["Payments team"],
            "depends_on": ["auth-service", "ledger-service", "Redis", "Postgres", "event bus"],
            "chain": ["ledger-service", "Postgres"]
        }),
        "answers.md" => json!({
            "found": true,
            "value": "09:40",
            "cited": "Personal/Travel/Lisbon Trip March 2027.md:12",
            "checked": false,
            "kept": "09:40 — from your notes: “Flights Amsterdam → Lisbon, 2027-03-11, 09:40, arriving 11:55 (booked 2026-11-02, 186 EUR return)”",
            // No model is installed for the examples: `answer.read` answers by rules.
            "read": "09:40 — from your notes: “Flights Amsterdam → Lisbon, 2027-03-11, 09:40, arriving 11:55 (booked 2026-11-02, 186 EUR return)”",
            "reader": "rules"
        }),
        "subworkflow.md" => json!({"greetings": ["Hello, Ada.", "Hello, Grace!"]}),
        "mcp-client.md" => json!({"words": 6, "longest": "workflows"}),
        "mcp-tool.md" => json!({"words": 5, "lines": 2, "characters": 33, "longest": "workflows,"}),
        "from-the-peer.md" => json!({
            "title": "RELEASE NOTES FOR THE APOLLO LAUNCH",
            "words": 6,
            "tool_status": "completed",
            "polls": 3,
            "notified": "Teams: web,api",
            "tally": "Total: 10",
            "empty_is_true": "yes",
            "version": "2.14.3",
            "is_feature": true,
            "budget": "$1,234,567.50",
            "share": "25.6%",
            "launch_day": "Tuesday, March 5 (3/5/2024)"
        }),
        "parallel-agents.md" => json!({
            "answered": ["risks", "owners"],
            "risks": "Apollo ships mid-December.",
            "milestones": 2
        }),
        "builtins.md" => json!({
            "report": "Apollo (John Carter): on track, with one dependency at risk.\nDeadline 2026-12-15, 22 days after 2026-11-23.\nNotes: Apollo API Key and Access; Apollo Architecture; Apollo Milestones and Deadline; Apollo Overview; Apollo Risks and Decisions",
            "deadline": "2026-12-15",
            "days_left": 22,
            "notes": 5
        }),
        _ => return None,
    })
}

/// `expected` must be contained in `actual` (objects by key, the rest equal).
fn contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|x| contains(x, v))),
        _ => actual == expected,
    }
}

#[test]
fn every_example_runs() {
    let dir = repo().join("examples");
    let llm = FakeLlm::start(Arc::new(|req| {
        // A step with `output_schema` asks for JSON in the system prompt.
        if req.body["system"]
            .as_str()
            .is_some_and(|s| s.contains("JSON"))
        {
            return (
                200,
                r#"{"deadline": "2026-12-15", "owner": "John Carter"}"#.to_string(),
            );
        }
        (200, "Apollo ships mid-December.".to_string())
    }));
    // `NAME.test.md` files are tests, run below.
    let names: Vec<String> = crate::support::workflows_in(&dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    // GitHub and Slack for `integrations.md`, as their APIs answer.
    let services = crate::fake_service::FakeService::start(Arc::new(|hit, _| {
        let body = if hit.path.starts_with("/github/repos/acme/app/pulls") {
            serde_json::json!([{"number": 7, "title": "Fix login"}])
        } else {
            serde_json::json!({"ok": true, "channel": "C1", "ts": "1700000000.1"})
        };
        (200, Vec::new(), body.to_string())
    }));
    for name in &names {
        let r = run(cmd(&repo())
            .args(["run", &format!("examples/{name}"), "--json", "--quiet"])
            .env("ANTHROPIC_BASE_URL", &llm.base)
            .env("ANTHROPIC_API_KEY", "test-key")
            .env(
                "MARKTOFLOW_GITHUB_BASE_URL",
                format!("{}/github", services.base),
            )
            .env(
                "MARKTOFLOW_SLACK_BASE_URL",
                format!("{}/slack", services.base),
            )
            .env("GITHUB_TOKEN", "ghp-example")
            .env("SLACK_BOT_TOKEN", "xoxb-example"));
        assert_eq!(r.code, 0, "{name}: {r:?}");
        // A run that waits for a person goes on once answered.
        let r = if r.json()["status"] == "waiting" {
            let id = r.json()["run_id"].as_str().unwrap().to_string();
            run(cmd(&repo()).args([
                "answer",
                &id,
                "--approve",
                "--input",
                "refund=180",
                "--as",
                "ann",
                "--json",
                "--quiet",
            ]))
        } else {
            r
        };
        assert_eq!(r.code, 0, "{name}: {r:?}");
        let want = expected(name).unwrap_or_else(|| {
            panic!("add the expected outputs of examples/{name} to tests/examples.rs")
        });
        let got = &r.json()["outputs"];
        assert!(
            contains(got, &want),
            "{name}: outputs {got:#} do not contain {want:#}"
        );
    }
    let reqs = llm.requests();
    assert_eq!(
        reqs.len(),
        6,
        "agent.md, structured.md and parallel-agents.md (4 agents) call the LLM"
    );
    assert!(reqs
        .iter()
        .all(|r| r.model() == "claude-haiku-4-5-20251001"));
}

#[test]
fn examples_and_shipped_workflows_validate_without_warnings() {
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["examples", "examples/lib", "workflows/lifeos"] {
        files.extend(crate::support::workflows_in(&repo().join(dir)));
    }
    let r = run(cmd(&repo()).arg("validate").arg("--strict").args(&files));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

#[test]
fn every_example_and_bundled_workflow_has_tests_that_pass_with_no_key_and_no_network() {
    let junit = crate::support::tempdir();
    let report = junit.path().join("report.xml");
    let r = run(cmd(&repo())
        .args(["test", "examples/", "workflows/", "--junit"])
        .arg(&report));
    assert_eq!(r.code, 0, "{r:?}");
    let summary = r.stdout.lines().last().unwrap_or_default().to_string();
    assert!(
        summary.starts_with("68 passed, 0 failed (68 cases in 40 files) in "),
        "{}",
        r.stdout
    );
    let xml = std::fs::read_to_string(&report).unwrap();
    assert!(
        xml.contains("<testsuites name=\"marktoflow test\" tests=\"68\" failures=\"0\">"),
        "{xml}"
    );
}

#[test]
fn every_example_and_bundled_workflow_has_a_test_file() {
    let mut missing = Vec::new();
    for dir in crate::support::SHIPPED_DIRS {
        for wf in crate::support::workflows_in(&repo().join(dir)) {
            if !wf.with_extension("test.md").exists() {
                missing.push(wf.strip_prefix(repo()).unwrap().display().to_string());
            }
        }
    }
    assert!(missing.is_empty(), "no NAME.test.md beside: {missing:?}");
}
