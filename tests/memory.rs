//! `memory.*` end to end: the real binary on a real SQLite file, and the
//! `workflows/luka/` workflows (remember, recall, decay, cleanup).

use crate::support::{cmd, repo, run, tempdir, Run};
use serde_json::{json, Value};
use std::path::Path;

/// Writes a workflow of one step `action` with `inputs` (YAML flow) into `dir`
/// and runs it there.
fn step(dir: &Path, action: &str, inputs: &str) -> Run {
    let wf = format!(
        "---\nworkflow: {{id: t}}\n---\n\n```yaml\naction: {action}\ninputs: {inputs}\noutput_variable: out\n```\n"
    );
    std::fs::write(dir.join("wf.md"), wf).unwrap();
    run(cmd(dir).args(["run", "wf.md", "--json", "--quiet", "--no-store"]))
}

fn output(r: &Run) -> Value {
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["steps"][0]["output"].clone()
}

const NOW: &str = "2026-11-20T12:00:00Z";

fn remember(dir: &Path, text: &str, kind: &str, importance: f64, extra: &str) -> Value {
    output(&step(
        dir,
        "memory.remember",
        &format!("{{text: '{text}', kind: {kind}, importance: {importance}, now: '{NOW}'{extra}}}"),
    ))
}

#[test]
fn remember_recall_decay_cleanup_stats() {
    let d = tempdir();
    let dir = d.path();
    let first = remember(
        dir,
        "Phase 7.2 delegation complete: 89% token savings",
        "insight",
        0.9,
        ", tags: [delegation, tokens], metadata: {successRate: 0.95}, source: report",
    );
    assert_eq!(first["created"], true);
    let id = first["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 36, "a uuid: {id}");
    remember(
        dir,
        "Token budget for the nightly report is 4000",
        "fact",
        0.4,
        "",
    );
    remember(
        dir,
        "Buy oat milk",
        "todo",
        0.1,
        ", created_at: '2026-06-01'",
    );
    remember(dir, "Savings account number ends in 42", "fact", 0.2, "");
    // The default database: `.marktoflow/memory.db` beside the workflow, with
    // no `--allow-write`.
    let db = dir.join(".marktoflow/memory.db");
    assert!(db.is_file());
    assert!(first["db"]
        .as_str()
        .unwrap()
        .ends_with(".marktoflow/memory.db"));

    let r = output(&step(
        dir,
        "memory.recall",
        &format!("{{query: 'token savings', top_k: 3, now: '{NOW}'}}"),
    ));
    assert_eq!(r["count"], 3, "{r}");
    let top = &r["hits"][0];
    assert_eq!(top["id"], id.as_str(), "{r}");
    assert_eq!(top["query_count"], 1);
    assert_eq!(top["tags"], json!(["delegation", "tokens"]));
    assert_eq!(top["metadata"]["successRate"], 0.95);
    for f in [
        "score",
        "text",
        "kind",
        "importance",
        "created_at",
        "last_access",
    ] {
        assert!(!top[f].is_null(), "{f} in {top}");
    }
    // Hostile FTS5 syntax is just words.
    let r = output(&step(
        dir,
        "memory.recall",
        "{query: 'NEAR(\"token\" OR savings* AND -milk) ^col:x', kind: insight}",
    ));
    assert_eq!(r["hits"][0]["id"], id.as_str(), "{r}");
    assert_eq!(r["hits"][0]["query_count"], 2);

    let s = output(&step(dir, "memory.stats", "{}"));
    assert_eq!(s["count"], 4);
    assert_eq!(s["by_kind"], json!({"fact": 2, "insight": 1, "todo": 1}));
    assert_eq!(s["avg_importance"], 0.4);
    assert_eq!(s["oldest"]["text"], "Buy oat milk");
    assert_eq!(s["most_recalled"]["id"], id.as_str());

    // 60 days without use at a 30-day half-life: a quarter.
    let later = "2027-01-19T12:00:00Z";
    let dec = output(&step(
        dir,
        "memory.decay",
        &format!("{{half_life_days: 30, now: '{later}', kind: fact}}"),
    ));
    assert_eq!(dec["decayed"], 2, "{dec}");
    let afters: Vec<f64> = dec["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["after"].as_f64().unwrap())
        .collect();
    assert!(
        (afters[0] - 0.1).abs() < 1e-3 && (afters[1] - 0.05).abs() < 1e-3,
        "{dec}"
    );

    let dry = output(&step(
        dir,
        "memory.cleanup",
        &format!("{{max_age_days: 90, min_importance: 0.3, dry_run: true, now: '{NOW}'}}"),
    ));
    assert_eq!(
        (dry["matched"].clone(), dry["removed"].clone()),
        (json!(3), json!(0)),
        "{dry}"
    );
    assert_eq!(
        dry["reasons"],
        json!({"too_old": 0, "low_importance": 2, "combined": 1})
    );
    assert_eq!(output(&step(dir, "memory.stats", "{}"))["count"], 4);
    let real = output(&step(
        dir,
        "memory.cleanup",
        &format!("{{max_age_days: 90, min_importance: 0.3, now: '{NOW}'}}"),
    ));
    assert_eq!(
        (real["removed"].clone(), real["kept"].clone()),
        (json!(3), json!(1))
    );
    let s = output(&step(dir, "memory.stats", "{}"));
    assert_eq!(s["count"], 1);
    assert_eq!(s["by_kind"], json!({"insight": 1}));
    let r = output(&step(dir, "memory.recall", "{query: 'milk'}"));
    assert_eq!(r["found"], false);
}

#[test]
fn errors_name_the_field_and_writes_stay_in_the_sandbox() {
    let d = tempdir();
    let dir = d.path();
    // A missing input is found when the workflow loads: nothing runs.
    let r = step(dir, "memory.remember", "{importance: 0.5}");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("`memory.remember` needs the input `text`"),
        "{r:?}"
    );
    let r = step(dir, "memory.remember", "{text: x, importance: 3}");
    assert!(r.stdout.contains("`importance`"), "{r:?}");
    let r = step(dir, "memory.cleanup", "{dry_run: true}");
    assert!(r.stdout.contains("max_age_days"), "{r:?}");
    assert!(
        !dir.join(".marktoflow").exists(),
        "bad inputs never open the file"
    );
    // A `.marktoflow` symlinked out of the folder is not a state folder: the
    // default database goes to the per-user folder, never through the link.
    let outside = tempdir();
    let home = tempdir();
    std::os::unix::fs::symlink(outside.path(), dir.join(".marktoflow")).unwrap();
    std::fs::write(dir.join("wf.md"), include_str!("fixtures/memory/t.md")).unwrap();
    let r = run(cmd(dir).env("MARKTOFLOW_HOME", home.path()).args([
        "run",
        "wf.md",
        "--json",
        "--quiet",
        "--no-store",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!outside.path().join("memory.db").exists());
    assert!(home.path().join("memory.db").is_file());
    std::fs::remove_file(dir.join(".marktoflow")).unwrap();
    // An explicit `db` needs a write root.
    let elsewhere = tempdir();
    let db = elsewhere.path().join("m.db");
    let r = step(dir, "memory.stats", &format!("{{db: '{}'}}", db.display()));
    assert_ne!(r.code, 0);
    assert!(r.stdout.contains("--allow-write"), "{r:?}");
    assert!(!db.exists());
    let wf = format!(
        "---\nworkflow: {{id: t}}\n---\n\n```yaml\naction: memory.remember\ninputs: {{text: hello, db: '{}'}}\n```\n",
        db.display()
    );
    std::fs::write(dir.join("wf.md"), wf).unwrap();
    let r = run(cmd(dir)
        .args(["run", "wf.md", "--json", "--quiet", "--allow-write"])
        .arg(elsewhere.path()));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(db.is_file());
}

fn luka(name: &str, db: &Path, inputs: &[(&str, &str)]) -> Run {
    let mut c = cmd(&repo());
    c.args([
        "run",
        &format!("workflows/luka/{name}.md"),
        "--json",
        "--quiet",
    ])
    .arg("--input")
    .arg(format!("db={}", db.display()))
    .arg("--allow-write")
    .arg(db.parent().unwrap());
    for (k, v) in inputs {
        c.arg("--input").arg(format!("{k}={v}"));
    }
    run(&mut c)
}

fn outputs(r: &Run) -> Value {
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["outputs"].clone()
}

#[test]
fn luka_workflows_end_to_end() {
    let d = tempdir();
    let db = d.path().join("luka.db");
    let out = outputs(&luka(
        "remember",
        &db,
        &[("seed_file", "examples/luka/memories.json")],
    ));
    assert_eq!(out["loaded"], 6, "{out}");
    assert_eq!(out["count"], 6);
    // Loading the same file again updates rather than duplicates.
    let out = outputs(&luka(
        "remember",
        &db,
        &[("seed_file", "examples/luka/memories.json")],
    ));
    assert_eq!(out["count"], 6, "{out}");
    let out = outputs(&luka(
        "remember",
        &db,
        &[
            ("text", "Recall should mark memories as used"),
            ("kind", "decision"),
            ("tags", "memory, recall"),
            ("importance", "0.75"),
        ],
    ));
    assert_eq!(out["count"], 7);
    assert_eq!(out["id"].as_str().unwrap().len(), 36);

    let out = outputs(&luka(
        "recall",
        &db,
        &[("query", "delegation token savings"), ("top_k", "4")],
    ));
    let hits = out["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 4, "{out}");
    // Both sources fused: the memory and the report note about delegation.
    let paths: Vec<&str> = hits.iter().filter_map(|h| h["path"].as_str()).collect();
    assert!(paths.contains(&"delegation-phase-7.md"), "{paths:?}");
    assert!(paths.iter().any(|p| p.starts_with("memory:")), "{paths:?}");
    assert!(
        hits[0]["text"].as_str().unwrap().contains("89%"),
        "the important, relevant one first: {out}"
    );
    let ctx = out["context"].as_str().unwrap();
    assert!(ctx.starts_with("[1] "), "{ctx}");
    assert!(ctx.contains("89%"), "{ctx}");
    assert!(out["memories_found"].as_u64().unwrap() >= 2);

    let out = outputs(&luka(
        "decay",
        &db,
        &[("now", "2027-06-01"), ("dry_run", "true")],
    ));
    assert_eq!(out["decayed"], 7, "{out}");
    assert_eq!(out["dry_run"], true);

    let out = outputs(&luka("cleanup", &db, &[]));
    assert_eq!(out["dry_run"], true);
    assert_eq!(out["removed"], 0);
    assert_eq!(out["remaining"], 7);
    let gone: Vec<&str> = out["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert!(gone.contains(&"Buy oat milk"), "{out}");
    let n = out["matched"].as_u64().unwrap();
    let out = outputs(&luka("cleanup", &db, &[("dry_run", "false")]));
    assert_eq!(out["removed"].as_u64().unwrap(), n);
    assert_eq!(out["remaining"].as_u64().unwrap(), 7 - n);
}
