//! The seed retrieval systems rebuilt as workflows (`workflows/atlas`,
//! `workflows/conhub`, `workflows/memoryscope`), run by the real binary on
//! their example data (`examples/<seed>`, copied to a temporary folder so the
//! index is private to the test).

use crate::support::{cmd, repo, run, tempdir, Run};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The embedding model, when `MARKTOFLOW_EMBED_MODEL` names one (CI does).
fn model() -> Option<PathBuf> {
    match std::env::var_os("MARKTOFLOW_EMBED_MODEL") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must set MARKTOFLOW_EMBED_MODEL (see .ci/run)"
            );
            eprintln!("skipped: set MARKTOFLOW_EMBED_MODEL to run the dense search parts");
            None
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            copy_dir(&e.path(), &to.join(&name));
        } else if ty.is_file() {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

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
    assert_eq!(out["documents"], serde_json::json!([]));
}

#[test]
fn atlas_retrieve_semantic_and_hybrid() {
    let Some(model) = model() else { return };
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
    assert_eq!(out["versions"], serde_json::json!(["1", "3", "5"]), "{out}");
    assert_eq!(
        out["counts"],
        serde_json::json!({"1": 2, "3": 2, "5": 3}),
        "{out}"
    );
    // A new version appears on the next call (the index refreshes).
    std::fs::create_dir_all(kb.join("v10")).unwrap();
    std::fs::write(
        kb.join("v10/intro.md"),
        "---\nversion: \"10\"\ntype: guide\n---\n\n# Intro\n\nVersion ten.\n",
    )
    .unwrap();
    let out = run_wf("atlas/versions.md", &kb, &[], &[], &[]).json()["outputs"].clone();
    assert_eq!(
        out["versions"],
        serde_json::json!(["1", "3", "5", "10"]),
        "{out}"
    );
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
