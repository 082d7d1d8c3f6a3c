//! The real local model (llama.cpp in-process, the default GGUF): checks of
//! structure, not wording. Skipped without `MARKTOFLOW_LOCAL_MODEL` outside
//! CI; `.ci/run` installs the model and sets it.

use crate::support::{cmd, embed_model, local_model, repo, run, tempdir};
use serde_json::Value;

const ANALYSIS: &str = r#"---
workflow: {id: analysis, name: Analysis}
tools:
  ai: {sdk: local}
inputs:
  q: {type: string}
---
## Analyze
```yaml
action: ai.run
inputs:
  max_tokens: 200
  prompt: |
    Extract search parameters from this question: "{{ inputs.q }}"
    search_terms: its key words; entities: the names it mentions;
    query_type: factual, list, summary or exploratory.
  output_schema:
    type: object
    properties:
      search_terms: {type: array, items: {type: string}, minItems: 1, maxItems: 6}
      entities: {type: array, items: {type: string}, maxItems: 6}
      query_type: {enum: [factual, list, summary, exploratory]}
    required: [search_terms, entities, query_type]
output_variable: raw
```
"#;

#[test]
fn the_analysis_step_returns_json_that_follows_its_schema() {
    let Some(model) = local_model() else { return };
    let d = tempdir();
    std::fs::write(d.path().join("a.md"), ANALYSIS).unwrap();
    for q in [
        "When is the Apollo deadline?",
        "list every task due before Friday",
        "what did Priya say about the rollout at last week's sync",
    ] {
        let r = run(cmd(d.path())
            .args(["run", "a.md", "--json", "--quiet", "--input"])
            .arg(format!("q={q}"))
            .env("MARKTOFLOW_LOCAL_MODEL", &model));
        assert_eq!(r.code, 0, "{r:?}");
        // The reply is the value its schema describes, not text.
        let v = r.json()["steps"][0]["output"].clone();
        let terms = v["search_terms"].as_array().expect("search_terms");
        assert!((1..=6).contains(&terms.len()), "{v}");
        assert!(terms.iter().all(Value::is_string), "{v}");
        assert!(
            v["entities"].as_array().is_some_and(|e| e.len() <= 6),
            "{v}"
        );
        assert!(
            ["factual", "list", "summary", "exploratory"]
                .contains(&v["query_type"].as_str().unwrap_or("")),
            "{v}"
        );
    }
}

#[test]
fn the_agent_template_gives_its_action_items_as_data_with_no_key() {
    let Some(model) = local_model() else { return };
    let d = tempdir();
    let r = run(cmd(d.path()).args(["new", "ask", "--template", "agent"]));
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(cmd(d.path())
        .args([
            "run", "ask.md", "--json", "--quiet", "--agent", "local", "--input",
        ])
        .arg("text=Priya will book the room. Sam must send the agenda by Friday.")
        .env("MARKTOFLOW_LOCAL_MODEL", &model));
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    assert!(
        out["summary"]
            .as_str()
            .is_some_and(|s| !s.trim().is_empty()),
        "{out}"
    );
    let actions = out["actions"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {out}"));
    assert!(actions.iter().all(Value::is_string), "{out}");
}

fn flagship(query: &str) -> crate::support::Run {
    let model = local_model().expect("checked by the caller");
    let mut c = cmd(&repo());
    c.arg("run")
        .arg(repo().join("workflows/lifeos/retrieval-indexed.md"))
        .args(["--json", "--input", "phrase=true", "--input"])
        .arg(format!("query={query}"))
        .arg("--input")
        .arg(format!(
            "knowledge_base={}",
            repo().join("examples/lifeos").display()
        ))
        .env("MARKTOFLOW_LOCAL_MODEL", &model);
    if let Some(e) = embed_model() {
        c.env("MARKTOFLOW_EMBED_MODEL", e);
    }
    run(&mut c)
}

#[test]
fn the_flagship_answers_from_the_notes_with_no_key() {
    if local_model().is_none() {
        return;
    }
    let r = flagship("What is the API key for Apollo?");
    assert_eq!(r.code, 0, "{r:?}");
    // No key is set: the local model stands in, and says so once.
    assert_eq!(
        r.stderr.matches("agent steps use the local model").count(),
        1,
        "{}",
        r.stderr
    );
    let out = &r.json()["outputs"];
    assert!(
        out["answer"]
            .as_str()
            .unwrap()
            .contains("APOLLO-KEY-7f3a-EXAMPLE"),
        "{out}"
    );
    // The answer stands on the cited line that holds the key.
    assert_eq!(out["found"], true, "{out}");
    assert!(
        out["citations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["quote"]
                .as_str()
                .unwrap()
                .contains("APOLLO-KEY-7f3a-EXAMPLE")),
        "{out}"
    );
    let sources: Vec<&str> = out["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        sources.contains(&"Work/Projects/Apollo/Apollo API Key and Access.md"),
        "{sources:?}"
    );
}

#[test]
fn a_question_no_note_touches_is_answered_honestly() {
    if local_model().is_none() {
        return;
    }
    let r = flagship("How tall is the Eiffel tower in metres?");
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    assert_eq!(out["found"], false, "{out}");
    assert!(
        out["answer"]
            .as_str()
            .unwrap()
            .starts_with("Your notes don't say."),
        "{out}"
    );
    assert_eq!(out["confidence"], 0);
}

#[test]
fn generation_stops_at_the_step_time_limit() {
    let Some(model) = local_model() else { return };
    let d = tempdir();
    std::fs::write(
        d.path().join("long.md"),
        r#"---
workflow: {id: long, name: Long}
tools:
  ai: {sdk: local}
---
## Write
```yaml
action: ai.run
timeout: 2s
inputs:
  max_tokens: 4000
  prompt: Write a very long story about a lighthouse keeper, chapter by chapter.
```
"#,
    )
    .unwrap();
    let r = run(cmd(d.path())
        .args(["run", "long.md", "--json", "--quiet"])
        .env("MARKTOFLOW_LOCAL_MODEL", &model));
    assert_eq!(r.code, 1, "{r:?}");
    let err = r.json()["error"]["message"].as_str().unwrap().to_string();
    // The step's limit stops it (4000 tokens take far longer on any CPU).
    assert!(err.contains("timed out after 2s"), "{err}");
}

#[test]
fn a_question_the_notes_only_brush_against_is_not_answered() {
    if local_model().is_none() || embed_model().is_none() {
        return;
    }
    // Words of it match notes (a name, "my"), but no line says it: the
    // answer says the notes don't, whatever the model would have made up.
    for q in ["What is the name of my dog?", "What is my passport number?"] {
        let r = flagship(q);
        assert_eq!(r.code, 0, "{r:?}");
        let out = &r.json()["outputs"];
        assert_eq!(out["found"], false, "{q}: {out}");
        assert_eq!(out["confidence"], 0, "{q}: {out}");
    }
}

const READ: &str = r#"---
workflow: {id: read, name: Read}
inputs:
  questions: {type: array}
---
## Read
```yaml
action: answer.read
inputs:
  questions: '{{ inputs.questions }}'
  evidence:
    - id: E1
      path: Work/Atlas.md
      lines: '3'
      start_line: 3
      heading_path: [Atlas Migration, People]
      text: Daniel Okafor owns the Atlas Migration. Priya Natarajan advises on the schema.
    - id: E2
      path: Work/Limits.md
      lines: '7'
      start_line: 7
      heading_path: [API Limits, Proposal]
      text: We propose a default limit of 600 requests per minute for each partner.
output_variable: read
```
"#;

/// `answer.read` on the real model: every answer is a verbatim span of the
/// item it cites, and its fields are those the reference documents.
#[test]
fn answer_read_copies_a_span_of_the_line_it_cites() {
    let Some(model) = local_model() else { return };
    let d = tempdir();
    std::fs::write(d.path().join("read.md"), READ).unwrap();
    let questions = [
        "Who owns the Atlas migration?",
        "What default request limit are we proposing?",
        "What is Daniel Okafor's phone number?",
    ];
    let r = run(cmd(d.path())
        .args(["run", "read.md", "--json", "--quiet", "--input"])
        .arg(format!("questions={}", serde_json::json!(questions)))
        .env("MARKTOFLOW_LOCAL_MODEL", &model));
    assert_eq!(r.code, 0, "{r:?}");
    let answers = r.json()["steps"][0]["output"]["answers"].clone();
    let answers = answers.as_array().expect("answers");
    assert_eq!(answers.len(), questions.len());
    let texts = [
        "Daniel Okafor owns the Atlas Migration. Priya Natarajan advises on the schema.",
        "We propose a default limit of 600 requests per minute for each partner.",
    ];
    for a in answers {
        let reader = &a["reader"];
        assert_eq!(reader["model"], "qwen2.5-coder-0.5b-instruct-q4_k_m", "{a}");
        // Decided by that model's own fit.
        assert_eq!(reader["fit"], "qwen2.5-coder-0.5b-instruct-q4_k_m", "{a}");
        assert_eq!(reader["fit_is_the_models"], true, "{a}");
        let span = reader["span"].as_str().expect("a span");
        let cited = a["citations"][0]["id"].as_str().expect("a citation");
        let text = texts[if cited == "E1" { 0 } else { 1 }];
        assert!(text.contains(span), "{span:?} is not in {cited}: {a}");
        let p = reader["probability"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p), "{a}");
        let confidence = a["confidence"].as_u64().unwrap();
        match a["found"].as_bool().unwrap() {
            true => {
                assert_eq!(confidence, (p * 100.0).round() as u64, "{a}");
                assert!(text.contains(a["answer"].as_str().unwrap()), "{a}");
            }
            false => {
                assert_eq!(confidence, 0, "{a}");
                assert!(
                    a["answer"]
                        .as_str()
                        .unwrap()
                        .starts_with("Your notes don't say."),
                    "{a}"
                );
            }
        }
    }
    // The easy questions are answered with the span a person would give.
    assert_eq!(answers[0]["answer"], "Daniel Okafor", "{}", answers[0]);
    assert_eq!(answers[0]["citations"][0]["id"], "E1");
    assert_eq!(answers[1]["citations"][0]["id"], "E2");
    assert!(
        answers[1]["reader"]["span"]
            .as_str()
            .unwrap()
            .contains("600"),
        "{}",
        answers[1]
    );
}
