//! The seed retrieval systems rebuilt as workflows (`workflows/atlas`,
//! `workflows/conhub`, `workflows/memoryscope`), run by the real binary on
//! their example data (`examples/<seed>`, copied to a temporary folder so the
//! index is private to the test).

use crate::fake_llm::FakeLlm;
use crate::support::{cmd, copy_dir, repo, run, serve, tempdir, Run};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A private copy of `examples/<name>`.
fn example_kb(dir: &Path, name: &str) -> PathBuf {
    let kb = dir.join(name);
    copy_dir(&repo().join("examples").join(name), &kb);
    kb
}

/// Runs `workflows/<wf>` from the repository root on the knowledge base `kb`.
fn run_wf(wf: &str, kb: &Path, inputs: &[&str], env: &[(&str, &str)], read: &[&Path]) -> Run {
    let mut c = cmd(&repo());
    c.args(["run", &format!("workflows/{wf}"), "--json", "--quiet"]);
    c.arg("--input")
        .arg(format!("knowledge_base={}", kb.display()));
    for i in inputs {
        c.args(["--input", i]);
    }
    for r in read {
        c.arg("--allow-read").arg(r);
    }
    c.envs(env.iter().copied());
    let r = run(&mut c);
    assert_eq!(r.code, 0, "{wf}: {r:?}");
    r
}

fn paths(docs: &Value, field: &str) -> Vec<String> {
    docs.as_array()
        .unwrap_or_else(|| panic!("not a list: {docs}"))
        .iter()
        .map(|d| d["metadata"][field].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn seed_workflows_validate_strict() {
    for wf in [
        "workflows/atlas/retrieve.md",
        "workflows/atlas/versions.md",
        "workflows/atlas/topic.md",
        "workflows/conhub/graph-ask.md",
        "workflows/conhub/memory-search.md",
        "workflows/conhub/robot-search.md",
        "workflows/conhub/robot-context.md",
        "workflows/memoryscope/retrieve.md",
    ] {
        let r = run(cmd(&repo()).args(["validate", "--strict", wf]));
        assert_eq!(r.code, 0, "{wf}: {r:?}");
        assert!(r.stdout.contains("0 warnings"), "{wf}: {r:?}");
    }
}

#[test]
fn atlas_retrieve_filters_by_version_and_where() {
    let d = tempdir();
    let kb = example_kb(d.path(), "atlas");
    let go = |inputs: &[&str]| {
        run_wf("atlas/retrieve.md", &kb, inputs, &[], &[]).json()["outputs"].clone()
    };
    // No filter: both versions of the methodology, in the seed's format.
    let out = go(&["query=What is the trimodal methodology?"]);
    assert_eq!(out["mode"], "keyword");
    let docs = &out["documents"];
    let versions = paths(docs, "version");
    assert!(
        versions.contains(&"1".into()) && versions.contains(&"3".into()),
        "{out}"
    );
    let first = &docs[0];
    assert!(
        first["content"].as_str().unwrap().contains("Trimodal"),
        "{first}"
    );
    assert!(first["relevance_score"].as_f64().unwrap() > 0.0, "{first}");
    assert_eq!(first["metadata"]["file_name"], "trimodal.md");
    assert!(first["metadata"]["section_title"].is_string(), "{first}");
    // version_filter is the seed's where clause on `version`.
    let out = go(&[
        "query=What is the trimodal methodology?",
        "version_filter=3",
    ]);
    let docs = &out["documents"];
    assert!(out["count"].as_u64().unwrap() >= 1, "{out}");
    assert!(paths(docs, "version").iter().all(|v| v == "3"), "{out}");
    assert!(docs[0]["content"].as_str().unwrap().contains("three modes"));
    // Other metadata filters through `where`, and n_results.
    let out = go(&["query=knowledge graph", r#"where={"type": "guide"}"#]);
    assert_eq!(
        paths(&out["documents"], "path"),
        ["v5/knowledge-graph.md"],
        "{out}"
    );
    let out = go(&["query=knowledge graph retrieval", "n_results=1"]);
    assert_eq!(out["count"], 1, "{out}");
    // A version that does not exist gives no documents, not an error.
    let out = go(&["query=trimodal", "version_filter=9"]);
    assert_eq!(out["count"], 0, "{out}");
    assert_eq!(out["documents"], json!([]));
}

#[test]
fn atlas_retrieve_semantic_and_hybrid() {
    let Some(model) = crate::support::embed_model() else {
        return;
    };
    let d = tempdir();
    let kb = example_kb(d.path(), "atlas");
    let m = model.to_str().unwrap();
    let go = |inputs: &[&str]| {
        run_wf(
            "atlas/retrieve.md",
            &kb,
            inputs,
            &[("MARKTOFLOW_EMBED_MODEL", m)],
            &[&model],
        )
        .json()["outputs"]
            .clone()
    };
    // No word in common with the knowledge graph notes: meaning only.
    let out = go(&[
        "query=how are ideas connected to each other",
        "mode=semantic",
        "n_results=3",
    ]);
    assert_eq!(out["mode"], "semantic");
    let top = paths(&out["documents"], "path");
    assert!(top[0].ends_with("knowledge-graph.md"), "{out}");
    let s = out["documents"][0]["relevance_score"].as_f64().unwrap();
    assert!(s > 0.0 && s <= 1.0, "a cosine: {out}");
    // The version filter applies to the dense search as well.
    let out = go(&[
        "query=how are ideas connected to each other",
        "mode=semantic",
        "version_filter=5",
    ]);
    let v = paths(&out["documents"], "version");
    assert!(!v.is_empty() && v.iter().all(|v| v == "5"), "{out}");
    // Hybrid: both lists fused by RRF.
    let out = go(&[
        "query=how are concepts connected in the graph",
        "mode=hybrid",
        "n_results=3",
    ]);
    assert_eq!(out["count"], 3, "{out}");
    assert!(
        paths(&out["documents"], "path")[0].ends_with("knowledge-graph.md"),
        "{out}"
    );
    let s = out["documents"][0]["relevance_score"].as_f64().unwrap();
    assert!(s < 0.1, "an RRF score: {out}");
}

#[test]
fn atlas_versions_lists_the_versions_sorted() {
    let d = tempdir();
    let kb = example_kb(d.path(), "atlas");
    let out = run_wf("atlas/versions.md", &kb, &[], &[], &[]).json()["outputs"].clone();
    assert_eq!(out["versions"], json!(["1", "3", "5"]), "{out}");
    assert_eq!(out["counts"], json!({"1": 2, "3": 2, "5": 3}), "{out}");
    // A new version appears on the next call (the index refreshes).
    std::fs::create_dir_all(kb.join("v10")).unwrap();
    std::fs::write(
        kb.join("v10/intro.md"),
        "---\nversion: \"10\"\ntype: guide\n---\n\n# Intro\n\nVersion ten.\n",
    )
    .unwrap();
    let out = run_wf("atlas/versions.md", &kb, &[], &[], &[]).json()["outputs"].clone();
    assert_eq!(out["versions"], json!(["1", "3", "5", "10"]), "{out}");
}

#[test]
fn atlas_topic_by_tag_type_and_version() {
    let d = tempdir();
    let kb = example_kb(d.path(), "atlas");
    let go =
        |inputs: &[&str]| run_wf("atlas/topic.md", &kb, inputs, &[], &[]).json()["outputs"].clone();
    let out = go(&["topic=Knowledge Graph", "n_results=3"]);
    assert_eq!(out["matched_by"], "tag");
    let mut p = paths(&out["documents"], "path");
    p.sort();
    assert_eq!(
        p,
        ["v3/knowledge-graph.md", "v5/knowledge-graph.md"],
        "{out}"
    );
    let out = go(&["topic=Knowledge Graph", "type=guide"]);
    assert_eq!(
        paths(&out["documents"], "path"),
        ["v5/knowledge-graph.md"],
        "{out}"
    );
    let out = go(&["topic=knowledge-graph", "version_filter=3"]);
    assert_eq!(
        paths(&out["documents"], "path"),
        ["v3/knowledge-graph.md"],
        "{out}"
    );
    // No note has the tag `interfaces`: the text search finds the mentions.
    let out = go(&["topic=interfaces"]);
    assert_eq!(out["matched_by"], "text");
    assert!(
        paths(&out["documents"], "path").contains(&"v3/trimodal.md".into()),
        "{out}"
    );
}

// --- ConHub ---------------------------------------------------------------

/// The model's env and read access for the runs, when it is configured.
fn model_args() -> (Vec<(String, String)>, Vec<PathBuf>) {
    match std::env::var_os("MARKTOFLOW_EMBED_MODEL") {
        Some(m) => (
            vec![(
                "MARKTOFLOW_EMBED_MODEL".into(),
                m.to_string_lossy().into_owned(),
            )],
            vec![PathBuf::from(m)],
        ),
        None => (vec![], vec![]),
    }
}

fn conhub(kb: &Path, inputs: &[&str]) -> Value {
    let (env, read) = model_args();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let read: Vec<&Path> = read.iter().map(PathBuf::as_path).collect();
    let mut all = vec!["today=2026-11-23", "include_debug=true"];
    all.extend_from_slice(inputs);
    run_wf("conhub/memory-search.md", kb, &all, &env, &read).json()["outputs"].clone()
}

fn sources(out: &Value) -> Vec<String> {
    out["blocks"]
        .as_array()
        .unwrap_or_else(|| panic!("no blocks: {out}"))
        .iter()
        .map(|b| b["source_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn conhub_query_kind_selects_the_strategy() {
    let d = tempdir();
    let kb = example_kb(d.path(), "conhub");
    // EpisodicLookup: the time window of "last week" and a strong recency bias.
    let out = conhub(
        &kb,
        &["query=What happened with the billing deploy last week?"],
    );
    assert_eq!(out["query_kind"], "episodic_lookup", "{out}");
    assert_eq!(out["strategy_used"], "recent");
    assert_eq!(
        out["debug"]["time"],
        json!({"from": "2026-11-16", "to": "2026-11-22", "expression": "last week"})
    );
    let s = sources(&out);
    assert_eq!(s[0], "chat/2026-11-17-billing-deploy.md", "{out}");
    assert!(
        !s.iter().any(|p| p.contains("AUTH-77")),
        "outside the window: {out}"
    );
    // TopologyQuestion: GraphOnly, the edge that states the relationship,
    // at its line.
    let out = conhub(&kb, &["query=Who owns the billing service?"]);
    assert_eq!(out["query_kind"], "topology_question", "{out}");
    assert_eq!(out["strategy_used"], "graph");
    assert_eq!(sources(&out)[0], "docs/ownership.md", "{out}");
    assert_eq!(out["blocks"][0]["id"], "docs/ownership.md#L11", "{out}");
    assert_eq!(out["debug"]["graph_results"], 1, "{out}");
    assert!(
        out["context"].as_str().unwrap().contains("Payments team"),
        "{out}"
    );
    // HowTo → hybrid; the docs modality is boosted.
    let out = conhub(&kb, &["query=How do I configure billing?"]);
    assert_eq!(out["query_kind"], "how_to", "{out}");
    assert_eq!(out["strategy_used"], "hybrid");
    assert_eq!(out["debug"]["modality_hint"], "docs");
    assert_eq!(sources(&out)[0], "docs/billing-setup.md", "{out}");
    // Aggregation over the source type it names.
    let out = conhub(&kb, &["query=List all billing tickets"]);
    assert_eq!(out["query_kind"], "aggregation", "{out}");
    assert_eq!(sources(&out), ["tickets/BILL-142.md"], "{out}");
    assert_eq!(out["blocks"][0]["source_type"], "tickets");
    // Troubleshooting, and a forced strategy.
    let out = conhub(
        &kb,
        &[
            "query=Why did the billing deploy fail?",
            "force_strategy=keyword",
        ],
    );
    assert_eq!(out["query_kind"], "troubleshooting", "{out}");
    assert_eq!(out["strategy_used"], "keyword");
    assert_eq!(
        sources(&out)[0],
        "chat/2026-11-17-billing-deploy.md",
        "{out}"
    );
    // FactLookup → semantic: vectors with the model, else keyword search.
    let out = conhub(&kb, &["query=What is the signing key used for?"]);
    assert_eq!(out["query_kind"], "fact_lookup", "{out}");
    assert_eq!(out["strategy_used"], "semantic");
    assert_eq!(sources(&out)[0], "code/auth-middleware.md", "{out}");
    let vectors = out["debug"]["vector_results"].as_u64().unwrap();
    assert_eq!(
        vectors > 0,
        std::env::var_os("MARKTOFLOW_EMBED_MODEL").is_some(),
        "{out}"
    );
}

#[test]
fn conhub_filters_rerank_and_token_budget() {
    let d = tempdir();
    let kb = example_kb(d.path(), "conhub");
    let out = conhub(
        &kb,
        &[
            "query=How does the billing module work?",
            r#"sources=["code","docs"]"#,
            r#"filters={"repos": ["billing"]}"#,
        ],
    );
    assert_eq!(out["query_kind"], "explainer", "{out}");
    assert_eq!(out["debug"]["modality_hint"], "code");
    let blocks = out["blocks"].as_array().unwrap();
    assert!(!blocks.is_empty(), "{out}");
    for b in blocks {
        assert!(
            ["code", "docs"].contains(&b["source_type"].as_str().unwrap()),
            "{b}"
        );
        assert_eq!(b["metadata"]["repo"], "billing", "{b}");
        assert!(b["token_count"].as_u64().unwrap() > 0, "{b}");
        assert!(b["score"].as_f64().unwrap() >= 0.0, "{b}");
    }
    assert_eq!(
        out["debug"]["collections_searched"],
        json!(["code", "docs"])
    );
    // Each chunk once.
    let mut ids: Vec<&str> = blocks.iter().map(|b| b["id"].as_str().unwrap()).collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "{out}");
    // The token budget and block limit hold.
    let out = conhub(
        &kb,
        &["query=How does the billing module work?", "max_tokens=80"],
    );
    assert!(out["debug"]["tokens"].as_u64().unwrap() <= 80, "{out}");
    assert!(out["blocks"].as_array().unwrap().len() < 4, "{out}");
    let out = conhub(&kb, &["query=billing", "max_blocks=2"]);
    assert_eq!(out["blocks"].as_array().unwrap().len(), 2, "{out}");
    // An unknown source is an error that names it.
    let mut c = cmd(&repo());
    c.args(["run", "workflows/conhub/memory-search.md", "--quiet"])
        .args(["--input", "query=billing", "--input", r#"sources=["wiki"]"#])
        .arg("--input")
        .arg(format!("knowledge_base={}", kb.display()));
    let r = run(&mut c);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("unknown source \"wiki\""), "{r:?}");
}

/// POSTs JSON; answers (status, body). The server closes the connection.
fn post(addr: &str, path: &str, body: &Value) -> (u16, Value) {
    let body = body.to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, mut rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut body = String::new();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || tail.len() < n {
                break;
            }
            body.push_str(&tail[..n]);
            rest = tail[n..].trim_start_matches("\r\n");
        }
    } else {
        body = rest.to_string();
    }
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, v)
}

#[test]
fn conhub_serves_api_memory_search() {
    let d = tempdir();
    let kb = example_kb(d.path(), "conhub");
    let (env, read) = model_args();
    let mut args = vec!["workflows/conhub".to_string(), "--allow-read".into()];
    args.push(d.path().to_string_lossy().into_owned());
    for r in &read {
        args.push("--allow-read".into());
        args.push(r.to_string_lossy().into_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The embedding model reaches the server only as `model_args` passes it
    // (the one it reads from this process's environment).
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = serve(&repo(), &args, &env);
    // The seed's request body, plus where the notes are.
    let (status, body) = post(
        &server.addr,
        "/api/memory/search",
        &json!({
            "tenant_id": "00000000-0000-0000-0000-000000000001",
            "user_id": "00000000-0000-0000-0000-000000000002",
            "query": "How do I configure billing?",
            "sources": ["code", "docs"],
            "filters": {"repos": ["billing"]},
            "max_blocks": 3,
            "max_tokens": 800,
            "include_debug": true,
            "today": "2026-11-23",
            "knowledge_base": kb.to_string_lossy(),
        }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "completed", "{body}");
    let out = &body["outputs"];
    assert_eq!(out["query_kind"], "how_to", "{out}");
    assert_eq!(out["strategy_used"], "hybrid");
    let blocks = out["blocks"].as_array().unwrap();
    assert!(!blocks.is_empty() && blocks.len() <= 3, "{out}");
    assert_eq!(blocks[0]["source_id"], "docs/billing-setup.md", "{out}");
    assert!(out["took_ms"].is_number(), "{out}");
    assert_eq!(
        out["debug"]["tenant_id"],
        "00000000-0000-0000-0000-000000000001"
    );
    // Missing query: 400 naming the input.
    let (status, body) = post(&server.addr, "/api/memory/search", &json!({"sources": []}));
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("query"), "{body}");
    // A strategy the table does not know: 400 from the input's enum.
    let (status, body) = post(
        &server.addr,
        "/api/memory/search",
        &json!({"query": "billing", "force_strategy": "neo4j"}),
    );
    assert_eq!(status, 400, "{body}");
}

// --- MemoryScope ------------------------------------------------------------

/// A fake ranker: scores each `[n] memory` line of the prompt by its words.
fn ranker() -> FakeLlm {
    FakeLlm::start(Arc::new(|req| {
        let prompt = req.prompt();
        let mut scores = Vec::new();
        for line in prompt.lines() {
            let Some(rest) = line.trim().strip_prefix('[') else {
                continue;
            };
            let Some((n, text)) = rest.split_once(']') else {
                continue;
            };
            let Ok(n) = n.parse::<u32>() else { continue };
            let score = if text.contains("went for a run") {
                0.9
            } else if text.contains("three times a week") {
                0.8
            } else if text.contains("half marathon") {
                0.7
            } else {
                0.05
            };
            scores.push(json!({"index": n, "score": score}));
        }
        (
            200,
            format!("```json\n{}\n```", json!({ "scores": scores })),
        )
    }))
}

fn memoryscope(kb: &Path, llm: &FakeLlm, inputs: &[&str]) -> Value {
    let mut all = vec!["timestamp=2026-11-23"];
    all.extend_from_slice(inputs);
    run_wf(
        "memoryscope/retrieve.md",
        kb,
        &all,
        &[
            ("ANTHROPIC_BASE_URL", &llm.base),
            ("ANTHROPIC_API_KEY", "test"),
        ],
        &[],
    )
    .json()["outputs"]
        .clone()
}

fn memory_paths(out: &Value) -> Vec<String> {
    out["memories"]
        .as_array()
        .unwrap_or_else(|| panic!("no memories: {out}"))
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn memoryscope_rank_fuse_with_type_ratios_and_time() {
    let d = tempdir();
    let kb = example_kb(d.path(), "memoryscope");
    let llm = ranker();
    let out = memoryscope(&kb, &llm, &["query=How was my run last week?"]);
    // extract_time_op: last week before 2026-11-23.
    assert_eq!(out["time"]["from"], "2026-11-16", "{out}");
    assert_eq!(out["time"]["to"], "2026-11-22", "{out}");
    // The LLM ranked the recalled memories once, all of them in the prompt.
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1, "one semantic rank call");
    let prompt = reqs[0].prompt();
    assert!(
        prompt.contains("Query: \"How was my run last week?\""),
        "{prompt}"
    );
    assert!(prompt.contains("[1] "), "{prompt}");
    // fuse_rerank_op: insight 0.7 × 2.0 = 1.4; the conversation of last week
    // 0.9 × 0.5 × 2.0 (time) = 0.9; the observation 0.8 × 1 = 0.8; the
    // concert (0.05) is under the threshold.
    assert_eq!(
        memory_paths(&out),
        [
            "fitness-goal.md",
            "2026-11-16-park-run.md",
            "running-habit.md"
        ],
        "{out}"
    );
    let m = &out["memories"];
    assert!(
        (m[0]["score"].as_f64().unwrap() - 1.4).abs() < 1e-6,
        "{out}"
    );
    assert!(
        (m[1]["score"].as_f64().unwrap() - 0.9).abs() < 1e-6,
        "{out}"
    );
    assert_eq!(m[1]["time_matched"], true);
    assert_eq!(m[0]["time_matched"], false);
    assert_eq!(m[0]["type"], "insight");
    let answer = out["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("1 [2026-09-01] User cares a lot about fitness"),
        "{answer}"
    );
    // Other ratios and output size.
    let out = memoryscope(
        &kb,
        &llm,
        &[
            "query=How was my run last week?",
            r#"fuse_ratio_dict={"conversation": 4, "insight": 1}"#,
            "output_memory_max_count=1",
        ],
    );
    assert_eq!(memory_paths(&out), ["2026-11-16-park-run.md"], "{out}");
    // Without a time in the query there is no time boost.
    let out = memoryscope(&kb, &llm, &["query=Does the user like running?"]);
    assert_eq!(out["time"], Value::Null, "{out}");
    assert!(out["memories"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["time_matched"] == false));
}

#[test]
fn memoryscope_without_ranker_and_with_a_bad_reply() {
    let d = tempdir();
    let kb = example_kb(d.path(), "memoryscope");
    let llm = ranker();
    // enable_ranker=false: retrieval scores, scaled; the LLM is not called.
    let out = memoryscope(
        &kb,
        &llm,
        &["query=How was my run last week?", "enable_ranker=false"],
    );
    assert!(llm.requests().is_empty());
    let p = memory_paths(&out);
    assert_eq!(p[0], "2026-11-16-park-run.md", "{out}");
    // Nothing recalled: no LLM call, no memories.
    let out = memoryscope(&kb, &llm, &["query=zeppelin maintenance"]);
    assert!(llm.requests().is_empty());
    assert_eq!(out["memories"], json!([]), "{out}");
    // A reply that is not JSON fails the run with the reply quoted.
    let bad = FakeLlm::start(Arc::new(|_| (200, "I cannot rank these.".to_string())));
    let mut c = cmd(&repo());
    c.args(["run", "workflows/memoryscope/retrieve.md", "--quiet"])
        .args(["--input", "query=my run", "--input", "timestamp=2026-11-23"])
        .arg("--input")
        .arg(format!("knowledge_base={}", kb.display()))
        .env("ANTHROPIC_BASE_URL", &bad.base)
        .env("ANTHROPIC_API_KEY", "test");
    let r = run(&mut c);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("not JSON: I cannot rank these."), "{r:?}");
}
