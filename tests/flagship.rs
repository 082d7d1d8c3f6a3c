//! The LifeOS retrieval workflow: the user's seed file verbatim, and our
//! bundled copy, against the fake LLM server in all three wire formats.

use crate::fake_llm::{lifeos_reply, FakeLlm};
use crate::support::{cmd, repo, run, shared, Run};
use serde_json::json;
use std::path::PathBuf;

const ANSWER: &str = "Answer: The API key for Apollo is APOLLO-KEY-7f3a-EXAMPLE.\nSources: [Work/Projects/Apollo/Overview.md]\nConfidence: high";

fn seed() -> PathBuf {
    shared()
        .expect("../shared must sit beside the repository (it holds the seed workflow)")
        .join("seeds/000_fd4e5c8ba954ba6b.txt")
}

fn kb() -> String {
    repo().join("examples/lifeos").display().to_string()
}

fn run_flagship(file: &PathBuf, llm: &FakeLlm, query: &str, extra: &[&str]) -> Run {
    run(cmd(&repo())
        .arg("run")
        .arg(file)
        .args(["--json", "--quiet", "--input"])
        .arg(format!("query={query}"))
        .arg("--input")
        .arg(format!("knowledge_base={}", kb()))
        .args(extra)
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "test-key"))
}

fn assert_apollo_answer(r: &Run) {
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["status"], "completed");
    let out = &j["outputs"];
    assert_eq!(
        out["answer"],
        "The API key for Apollo is APOLLO-KEY-7f3a-EXAMPLE."
    );
    assert_eq!(out["confidence"], json!(90));
    let sources: Vec<&str> = out["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(!sources.is_empty() && sources.len() <= 5, "{sources:?}");
    assert!(
        sources[0].starts_with("Work/Projects/Apollo/"),
        "the Apollo notes rank first: {sources:?}"
    );
    assert_eq!(
        out.as_object().unwrap().len(),
        3,
        "exactly the declared outputs: {out}"
    );
}

#[test]
fn the_seed_runs_verbatim() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let r = run_flagship(&seed(), &llm, "What is the API key for Apollo?", &[]);
    assert_apollo_answer(&r);
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2, "analysis + answer");
    // Step 1's `model: haiku` is honoured; step 4 uses the tool's sonnet.
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].model(), "claude-haiku-4-5-20251001");
    assert_eq!(reqs[1].model(), "claude-sonnet-4-5-20250929");
    assert_eq!(reqs[0].header("x-api-key"), Some("test-key"));
    assert!(reqs[0]
        .prompt()
        .contains("Query: \"What is the API key for Apollo?\""));
    // The answer prompt carries the retrieved notes, rendered by the {% for %} loop.
    let p = reqs[1].prompt();
    assert!(p.contains("### Work/Projects/Apollo/"), "{p}");
    assert!(
        p.contains("APOLLO-KEY"),
        "the Apollo note's text reaches the prompt"
    );
    assert!(!p.contains("{%") && !p.contains("{{"), "fully rendered");
    // Every step ran and is reported.
    let j = r.json();
    let ids: Vec<&str> = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    for id in [
        "analyze_query_intent",
        "parse_query_analysis",
        "search_knowledge_base",
        "has_results",
        "set_outputs",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
}

#[test]
fn the_bundled_workflow_matches_the_seed() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let r = run_flagship(
        &repo().join("workflows/lifeos/retrieval.md"),
        &llm,
        "What is the API key for Apollo?",
        &[],
    );
    assert_apollo_answer(&r);
    assert_eq!(llm.requests().len(), 2);
}

#[test]
fn no_results_take_the_else_branch() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let r = run_flagship(&seed(), &llm, "Where did I park the zeppelin?", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    assert!(
        out["answer"]
            .as_str()
            .unwrap()
            .starts_with("I couldn't find any information"),
        "{out}"
    );
    assert_eq!(out["sources"], json!([]));
    assert_eq!(out["confidence"], json!(0));
    assert_eq!(llm.requests().len(), 1, "no answer call without results");
}

#[test]
fn a_non_json_analysis_falls_back_to_the_query_words() {
    let llm = FakeLlm::start(lifeos_reply(false, ANSWER));
    let r = run_flagship(&seed(), &llm, "What is the API key for Apollo?", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let analysis = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "parse_query_analysis")
        .unwrap()["output"]
        .clone();
    assert_eq!(
        analysis["search_terms"],
        json!(["What", "the", "API", "key", "for", "Apollo?"])
    );
    assert_eq!(analysis["entities"], json!([]));
    assert_eq!(j["outputs"]["confidence"], json!(90));
    assert_eq!(llm.requests().len(), 2);
}

#[test]
fn openai_and_ollama_formats_with_agent_override() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let r = run(cmd(&repo())
        .arg("run")
        .arg(seed())
        .args([
            "--json",
            "--quiet",
            "--agent",
            "openai",
            "--model",
            "gpt-test",
            "--input",
            "query=What is the API key for Apollo?",
        ])
        .arg("--input")
        .arg(format!("knowledge_base={}", kb()))
        .env("OPENAI_BASE_URL", format!("{}/v1", llm.base))
        .env("OPENAI_API_KEY", "sk-test"));
    assert_apollo_answer(&r);
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        reqs.iter()
            .all(|q| q.path == "/v1/chat/completions" && q.model() == "gpt-test"),
        "{reqs:?}"
    );
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-test"));

    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let r = run(cmd(&repo())
        .arg("run")
        .arg(seed())
        .args([
            "--json",
            "--quiet",
            "--agent",
            "ollama",
            "--model",
            "llama-test",
            "--input",
            "query=What is the API key for Apollo?",
        ])
        .arg("--input")
        .arg(format!("knowledge_base={}", kb()))
        .env("OLLAMA_HOST", &llm.base));
    assert_apollo_answer(&r);
    let reqs = llm.requests();
    assert!(
        reqs.iter()
            .all(|q| q.path == "/api/chat" && q.model() == "llama-test"),
        "{reqs:?}"
    );
}

#[test]
fn without_a_provider_nothing_runs_and_the_message_says_what_to_set() {
    let r = run(cmd(&repo())
        .arg("run")
        .arg(seed())
        .args(["--input", "query=hi"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("ANTHROPIC_API_KEY"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("running"),
        "no step may start: {}",
        r.stderr
    );
    assert!(r.stdout.is_empty());
}

#[test]
fn dry_run_shows_prompts_and_models_and_calls_nothing() {
    let llm = FakeLlm::start(lifeos_reply(true, ANSWER));
    let r = run(cmd(&repo())
        .arg("run")
        .arg(seed())
        .args([
            "--dry-run",
            "--input",
            "query=What is the API key for Apollo?",
        ])
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "test-key"));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("claude-haiku-4-5-20251001"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("Query: \"What is the API key for Apollo?\""),
        "{}",
        r.stdout
    );
    assert_eq!(llm.requests().len(), 0);
}
