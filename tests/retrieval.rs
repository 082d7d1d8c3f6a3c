//! Retrieval steps end to end: `kb.index` / `kb.search` / `kb.facets` on
//! real folders with the real binary, and the indexed LifeOS flagship
//! against the fake LLM.

use crate::fake_llm::{evidence_reply, FakeLlm};
use crate::support::{cmd, repo, run, tempdir, Run};
use serde_json::{json, Value};
use std::path::Path;

fn flagship(llm: &FakeLlm, query: &str) -> Run {
    run(cmd(&repo())
        .args([
            "run",
            "workflows/lifeos/retrieval-indexed.md",
            "--json",
            "--quiet",
            "--input",
            "phrase=true",
        ])
        .arg("--input")
        .arg(format!("query={query}"))
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "test-key"))
}

/// The index folder of `<root>/kb` (the only knowledge base indexed
/// under `root`'s state folder).
fn index_dir(root: &Path) -> std::path::PathBuf {
    let kb = root.join(".marktoflow/kb");
    let dirs: Vec<_> = std::fs::read_dir(&kb)
        .unwrap_or_else(|e| panic!("{}: {e}", kb.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("kb-"))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].join("index")
}

const KEY_ANSWER: &str = "The API key for Apollo is APOLLO-KEY-7f3a-EXAMPLE.";

#[test]
fn indexed_flagship_answers_from_the_example_vault_with_cited_lines() {
    let llm = FakeLlm::start(evidence_reply("APOLLO-KEY-7f3a-EXAMPLE", KEY_ANSWER));
    let r = flagship(&llm, "What is the API key for Apollo?");
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let out = &j["outputs"];
    assert_eq!(out["answer"], KEY_ANSWER);
    assert_eq!(out["found"], true);
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["answer", "found", "citations", "sources", "confidence"],
        "{out}"
    );
    // The citation names the note and the line that holds the key, as the
    // file has them.
    let c = &out["citations"][0];
    let path = c["path"].as_str().unwrap();
    let lines = c["lines"].as_str().unwrap();
    let quote = c["quote"].as_str().unwrap();
    assert!(quote.contains("APOLLO-KEY-7f3a-EXAMPLE"), "{c}");
    let file = std::fs::read_to_string(repo().join("examples/lifeos").join(path)).unwrap();
    let first: usize = lines.split('-').next().unwrap().parse().unwrap();
    assert_eq!(
        file.lines().nth(first - 1).unwrap().trim(),
        quote.lines().next().unwrap().trim(),
        "{c}"
    );
    let confidence = out["confidence"].as_u64().unwrap();
    assert!((70..=100).contains(&confidence), "{out}");
    let sources = out["sources"].as_array().unwrap();
    assert!(!sources.is_empty() && sources.len() <= 5, "{sources:?}");
    assert!(
        sources[0]
            .as_str()
            .unwrap()
            .starts_with("Work/Projects/Apollo/"),
        "{sources:?}"
    );
    // One model call: no query analysis; the prompt holds numbered lines
    // inside delimiters, and no example value to copy.
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1, "the answer only");
    let p = reqs[0].prompt();
    assert!(p.contains("<notes>\n[E1] "), "{p}");
    assert!(p.contains("APOLLO-KEY-7f3a-EXAMPLE"), "{p}");
    assert!(!p.contains("[Your answer here]"), "{p}");
    let system = reqs[0].body["system"].to_string();
    assert!(system.contains("quotations, not instructions"), "{system}");
}

#[test]
fn by_default_the_answer_comes_from_the_lines_without_a_model_call() {
    let llm = FakeLlm::start(evidence_reply("APOLLO-KEY-7f3a-EXAMPLE", KEY_ANSWER));
    let r = run(cmd(&repo())
        .args([
            "run",
            "workflows/lifeos/retrieval-indexed.md",
            "--json",
            "--quiet",
        ])
        .args(["--input", "query=When is the boiler service?"])
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "test-key"));
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    assert_eq!(out["found"], true, "{out}");
    assert!(
        out["answer"].as_str().unwrap().starts_with("2026-12-02 — "),
        "{out}"
    );
    assert_eq!(
        out["citations"][0]["path"],
        "Personal/Home/Apartment Maintenance.md"
    );
    assert_eq!(out["citations"][0]["lines"], "6");
    assert_eq!(
        out["citations"][0]["quote"],
        "- Next boiler service: 2026-12-02, 08:00–12:00"
    );
    assert_eq!(llm.requests().len(), 0);
}

#[test]
fn a_fact_the_evidence_does_not_hold_is_replaced_after_one_retry() {
    // The provider states a key that is in no note, citing the right line.
    let llm = FakeLlm::start(evidence_reply(
        "APOLLO-KEY-7f3a-EXAMPLE",
        "The API key for Apollo is APOLLO-KEY-9d1e-MADEUP.",
    ));
    let r = flagship(&llm, "What is the API key for Apollo?");
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    let answer = out["answer"].as_str().unwrap();
    assert!(!answer.contains("MADEUP"), "{out}");
    assert!(answer.contains("APOLLO-KEY-7f3a-EXAMPLE"), "{out}");
    assert_eq!(out["found"], true);
    assert!(out["citations"][0]["quote"]
        .as_str()
        .unwrap()
        .contains("APOLLO-KEY-7f3a-EXAMPLE"));
    // Asked once more, told what was wrong.
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2, "one retry");
    let again = reqs[1].prompt();
    assert!(
        again.contains("“APOLLO-KEY-9d1e-MADEUP” is not in the cited lines"),
        "{again}"
    );
}

#[test]
fn a_question_the_notes_do_not_answer_gets_found_false_and_no_model_call() {
    let llm = FakeLlm::start(evidence_reply("APOLLO-KEY-7f3a-EXAMPLE", KEY_ANSWER));
    for q in [
        "What is the API key for Zephyr?",
        "What is my passport number?",
        "What is Priya's phone number?",
    ] {
        let r = flagship(&llm, q);
        assert_eq!(r.code, 0, "{r:?}");
        let out = &r.json()["outputs"];
        assert_eq!(out["found"], false, "{q}: {out}");
        assert_eq!(out["confidence"], 0, "{q}: {out}");
        assert!(
            out["answer"]
                .as_str()
                .unwrap()
                .starts_with("Your notes don't say."),
            "{q}: {out}"
        );
        assert!(
            !out["answer"].as_str().unwrap().contains("APOLLO-KEY"),
            "{q}: {out}"
        );
    }
    assert_eq!(llm.requests().len(), 0, "nothing to phrase");
}

#[test]
fn indexed_flagship_says_so_when_nothing_matches() {
    let llm = FakeLlm::start(evidence_reply("APOLLO-KEY-7f3a-EXAMPLE", KEY_ANSWER));
    let r = flagship(&llm, "Qwxzv flarbnogs?");
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    assert_eq!(out["confidence"], json!(0));
    assert_eq!(out["found"], false);
    assert_eq!(out["sources"], json!([]));
    assert_eq!(out["citations"], json!([]));
    assert_eq!(llm.requests().len(), 0, "no answer call without results");
}

/// Writes a workflow of one step `action` with `inputs` (YAML flow) into `dir`.
/// Without an installed model `answer.read` answers as `answer.extract`
/// does, and says which reader answered.
#[test]
fn answer_read_without_a_model_answers_by_rules_and_says_so() {
    let d = tempdir();
    let evidence = r#"[{id: E1, path: Home.md, lines: '2', start_line: 2, text: 'Next boiler service: 2026-12-02, 08:00–12:00', units: [{line: 2, text: 'Next boiler service: 2026-12-02, 08:00–12:00', kind: meta}]}]"#;
    let inputs = format!("{{question: 'When is the boiler service?', evidence: {evidence}}}");
    step(d.path(), "answer.read", &inputs);
    // Not quiet: the warning is shown.
    let read = run(cmd(d.path()).args(["run", "wf.md", "--json"]));
    let mut out = output(&read);
    assert_eq!(out["reader"], json!({"model": "rules"}), "{out}");
    assert_eq!(
        read.stderr
            .matches("no local model is installed, so the answer is chosen by rules")
            .count(),
        1,
        "{}",
        read.stderr
    );
    out.as_object_mut().unwrap().remove("reader");
    let extracted = output(&step(d.path(), "answer.extract", &inputs));
    assert_eq!(out, extracted);
    assert_eq!(out["found"], true, "{out}");
}

fn step(dir: &Path, action: &str, inputs: &str) -> Run {
    let wf = format!(
        "---\nworkflow: {{id: t}}\n---\n\n```yaml\naction: {action}\ninputs: {inputs}\noutput_variable: out\n```\n"
    );
    let f = dir.join("wf.md");
    std::fs::write(&f, wf).unwrap();
    run(cmd(dir).args(["run", "wf.md", "--json", "--quiet"]))
}

fn output(r: &Run) -> Value {
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["steps"][0]["output"].clone()
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn vault(root: &Path) {
    write(
        root,
        "kb/Work/Tasks/Fix Rate Limit.md",
        "---\ntype: task\ntags: [urgent, apollo]\ndate: 2026-11-18\nstatus: open\n---\n# Fix the rate limit\n\nThe gateway rate limit drops partner requests after deployment.\n\n## Notes\n\nMarcus suggested a token bucket.\n",
    );
    write(
        root,
        "kb/Work/Meetings/2026-11-02 Planning.md",
        "# Planning\n\n- Type: meeting\n- Tags: #planning\n\nWe talked about the limit of the rate card and deployments.\n",
    );
    write(
        root,
        "kb/Personal/Health/Running.md",
        "# Running log\n\n- Type: log\n- Date: 2026-10-05\n\nRan along the river; no rate limit on my legs. Deployed new shoes.\n",
    );
    write(
        root,
        "kb/Personal/ignored/secret.md",
        "# Secret\n\nrate limit secret\n",
    );
    write(root, "kb/.marktoflowignore", "ignored/\n");
    write(root, "kb/notes.txt", "rate limit in a text file\n");
}

fn paths(out: &Value) -> Vec<String> {
    out["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn kb_index_is_incremental_and_repairs_a_damaged_index() {
    let dir = tempdir();
    let root = dir.path();
    vault(root);
    let out = output(&step(root, "kb.index", "{kb: kb}"));
    assert_eq!(
        (
            out["files"].clone(),
            out["added"].clone(),
            out["unchanged"].clone()
        ),
        (json!(3), json!(3), json!(0)),
        "{out}"
    );
    // The index is in the state folder, named after the knowledge base; the
    // notes folder is left as it was.
    let idx = std::path::PathBuf::from(out["index_dir"].as_str().unwrap());
    assert_eq!(idx, index_dir(root));
    assert!(idx.starts_with(root.join(".marktoflow/kb")), "{idx:?}");
    assert!(!root.join("kb/.marktoflow").exists());
    // Nothing changed: nothing redone (a new process reads the manifest back).
    let out = output(&step(root, "kb.index", "{kb: kb}"));
    assert_eq!(
        (out["added"].clone(), out["unchanged"].clone()),
        (json!(0), json!(3))
    );
    // Edit one, delete one, add one; touching a file without changing it is no change.
    write(
        root,
        "kb/Work/Tasks/Fix Rate Limit.md",
        "# Fix the rate limit\n\nDone: raised to 500.\n",
    );
    std::fs::remove_file(root.join("kb/Personal/Health/Running.md")).unwrap();
    write(root, "kb/Work/New.md", "# New note\n\nfresh words\n");
    let planning = root.join("kb/Work/Meetings/2026-11-02 Planning.md");
    let text = std::fs::read(&planning).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&planning, text).unwrap();
    let out = output(&step(root, "kb.index", "{kb: kb}"));
    assert_eq!(
        [
            &out["added"],
            &out["updated"],
            &out["removed"],
            &out["unchanged"],
            &out["files"]
        ],
        [&json!(1), &json!(1), &json!(1), &json!(1), &json!(3)],
        "{out}"
    );
    let out = output(&step(root, "kb.search", "{kb: kb, query: 'rate limit'}"));
    assert!(
        !paths(&out).contains(&"Personal/Health/Running.md".to_string()),
        "{out}"
    );
    let out = output(&step(root, "kb.search", "{kb: kb, query: 'raised'}"));
    assert_eq!(paths(&out), ["Work/Tasks/Fix Rate Limit.md"]);

    // A damaged last commit (as after a crash while writing it): rebuilt.
    std::fs::write(index_dir(root).join("meta.json"), "{not json").unwrap();
    let out = output(&step(root, "kb.search", "{kb: kb, query: 'fresh'}"));
    assert_eq!(paths(&out), ["Work/New.md"], "{out}");
    assert_eq!(out["indexed"]["added"], 3);
    // A lost manifest (and a note deleted meanwhile): rebuilt, nothing stale kept.
    let idx = index_dir(root);
    let manifests: Vec<_> = std::fs::read_dir(&idx)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("kb-manifest-")
        })
        .collect();
    assert_eq!(
        manifests.len(),
        1,
        "old manifests are cleaned up: {manifests:?}"
    );
    std::fs::remove_file(&manifests[0]).unwrap();
    std::fs::remove_file(root.join("kb/Work/New.md")).unwrap();
    let out = output(&step(root, "kb.search", "{kb: kb, query: fresh}"));
    assert_eq!(out["found"], false, "{out}");
    // Searching a changed folder re-indexes it first.
    write(root, "kb/Work/Later.md", "# Later\n\nzebra crossing\n");
    let out = output(&step(root, "kb.search", "{kb: kb, query: zebra}"));
    assert_eq!(paths(&out), ["Work/Later.md"]);
}

#[test]
fn kb_index_brings_the_graph_up_to_date_with_it() {
    let dir = tempdir();
    let root = dir.path();
    vault(root);
    write(
        root,
        "kb/Work/Billing.md",
        "# Billing service\n\nThe billing service relies on [[Ledger]] and is owned by the Payments team.\n",
    );
    output(&step(root, "kb.index", "{kb: kb}"));
    assert!(index_dir(root).join("graph.bin").exists());
    // The question finds the graph ready: no note is read again.
    let ask = "{kb: kb, question: 'What does the billing service depend on?'}";
    let out = output(&step(root, "kb.graph", ask));
    let to = |out: &Value| -> Vec<String> {
        out["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{} {} {} {}#L{}",
                    e["from"], e["relation"], e["to"], e["path"], e["line"]
                )
                .replace('"', "")
            })
            .collect()
    };
    assert_eq!(
        (
            out["graph"]["read"].clone(),
            out["graph"]["notes"].clone(),
            to(&out)
        ),
        (
            json!(0),
            json!(4),
            vec!["Billing service depends_on Ledger Work/Billing.md#L3".to_string()]
        ),
        "{out}"
    );
    // An edited note: its edges change with the index, and only then.
    write(
        root,
        "kb/Work/Billing.md",
        "# Billing service\n\nThe billing service uses Postgres.\n",
    );
    output(&step(root, "kb.index", "{kb: kb}"));
    let out = output(&step(root, "kb.graph", ask));
    assert_eq!(
        (out["graph"]["read"].clone(), to(&out)),
        (
            json!(0),
            vec!["Billing service depends_on Postgres Work/Billing.md#L3".to_string()]
        ),
        "{out}"
    );
}

#[test]
fn kb_search_ranks_filters_and_reads_operators() {
    let dir = tempdir();
    let root = dir.path();
    vault(root);
    // Title matches outrank body matches; the ignored folder and .txt are skipped.
    let out = output(&step(
        root,
        "kb.search",
        "{kb: kb, query: 'rate limit', per_file: true}",
    ));
    let p = paths(&out);
    assert_eq!(p[0], "Work/Tasks/Fix Rate Limit.md", "{out}");
    assert_eq!(p.len(), 3, "{p:?}");
    assert_eq!(out["found"], true);
    let hit = &out["hits"][0];
    assert_eq!(hit["title"], "Fix the rate limit");
    assert_eq!(hit["metadata"]["tags"], json!(["urgent", "apollo"]));
    assert!(
        hit["snippet"]
            .as_str()
            .unwrap()
            .contains("**rate** **limit**"),
        "{hit}"
    );
    assert!(hit["id"]
        .as_str()
        .unwrap()
        .starts_with("Work/Tasks/Fix Rate Limit.md#"));

    let q = |query: &str| {
        paths(&output(&step(
            root,
            "kb.search",
            &format!("{{kb: kb, per_file: true, query: '{query}'}}"),
        )))
    };
    // Phrases need the words together; stemming makes "deployed" match "deployment".
    assert_eq!(
        q(r#""rate limit" in:work"#),
        ["Work/Tasks/Fix Rate Limit.md"]
    );
    assert_eq!(q("deployment in:personal"), ["Personal/Health/Running.md"]);
    assert_eq!(
        q("type:meeting rate"),
        ["Work/Meetings/2026-11-02 Planning.md"]
    );
    assert_eq!(q("tag:urgent"), ["Work/Tasks/Fix Rate Limit.md"]);
    assert_eq!(
        q("rate date:2026-11"),
        [
            "Work/Tasks/Fix Rate Limit.md",
            "Work/Meetings/2026-11-02 Planning.md"
        ]
    );
    assert_eq!(q("rate date:<2026-11-01"), ["Personal/Health/Running.md"]);
    // Exclusion drops chunks (the task's Notes section still matches by title).
    assert_eq!(
        q("rate limit -gateway -legs -bucket"),
        ["Work/Meetings/2026-11-02 Planning.md"]
    );
    assert_eq!(q("plann*"), ["Work/Meetings/2026-11-02 Planning.md"]);

    let out = output(&step(
        root,
        "kb.search",
        "{kb: kb, query: rate, filters: {type: {in: [task, log]}, date: {from: 2026-10-01, to: 2026-10-31}}}",
    ));
    assert_eq!(paths(&out), ["Personal/Health/Running.md"]);
    let out = output(&step(
        root,
        "kb.search",
        "{kb: kb, query: rate, scope: work, per_file: true, filters: {status: {not: open}}}",
    ));
    assert_eq!(paths(&out), ["Work/Meetings/2026-11-02 Planning.md"]);
    let out = output(&step(
        root,
        "kb.search",
        "{kb: kb, query: 'rate limit', top_k: 1, threshold: 0.001}",
    ));
    assert_eq!(out["count"], 1);
    let out = output(&step(
        root,
        "kb.search",
        "{kb: kb, query: 'rate limit', threshold: 1000}",
    ));
    assert_eq!(
        (out["found"].clone(), out["count"].clone()),
        (json!(false), json!(0))
    );

    let out = output(&step(root, "kb.facets", "{kb: kb, field: type}"));
    assert_eq!(
        out["values"],
        json!([{"value": "log", "count": 1}, {"value": "meeting", "count": 1}, {"value": "task", "count": 1}])
    );
    let out = output(&step(
        root,
        "kb.facets",
        "{kb: kb, field: type, query: 'date:2026-11'}",
    ));
    assert_eq!(
        out["values"],
        json!([{"value": "meeting", "count": 1}, {"value": "task", "count": 1}])
    );
    let out = output(&step(root, "kb.facets", "{kb: kb, field: folder}"));
    assert_eq!(
        out["values"],
        json!([{"value": "Work", "count": 2}, {"value": "Personal", "count": 1}])
    );
}

#[test]
fn kb_inputs_and_sandbox_errors_are_clear() {
    let dir = tempdir();
    let root = dir.path();
    vault(root);
    let r = step(root, "kb.search", "{kb: kb, query: 'date:someday'}");
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("`date:someday`"), "{}", r.stderr);
    let r = step(root, "kb.search", "{query: x}");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("`kb.search` needs the input `kb`"),
        "{}",
        r.stderr
    );
    let r = step(root, "kb.search", "{kb: /etc, query: x}");
    assert!(r.stderr.contains("access denied"), "{}", r.stderr);
    let r = step(root, "kb.index", "{kb: kb, index_dir: idx}");
    assert!(r.stderr.contains("--allow-write"), "{}", r.stderr);
    // With a write root, the index goes there.
    let r = run(cmd(root).args(["run", "wf.md", "--json", "--quiet", "--allow-write", "idx"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(root.join("idx/meta.json").is_file());
    // Rebuilding a damaged index in a shared folder removes only index files.
    write(root, "idx/keep.txt", "mine");
    std::fs::write(root.join("idx/meta.json"), "{broken").unwrap();
    let r = run(cmd(root).args(["run", "wf.md", "--json", "--quiet", "--allow-write", "idx"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("idx/keep.txt")).unwrap(),
        "mine"
    );
    // A `.marktoflow` inside a knowledge base is never written through: the
    // index is not kept there.
    write(root, "elsewhere/x.txt", "x");
    write(root, "kb2/a.md", "# A\n");
    std::os::unix::fs::symlink(root.join("elsewhere"), root.join("kb2/.marktoflow")).unwrap();
    let r = step(root, "kb.index", "{kb: kb2}");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        std::fs::read_dir(root.join("elsewhere")).unwrap().count(),
        1,
        "nothing written through the link"
    );
}

/// Every family reads its inputs by the catalog's one rule (numbers and
/// booleans may come as text, as templates render them) and takes the
/// defaults the catalog lists: `kb.*` once refused `'true'` where
/// `memory.*` and `file.*` took it.
#[test]
fn every_family_reads_inputs_by_the_catalogs_rule() {
    let dir = tempdir();
    let root = dir.path();
    vault(root);
    let hits = output(&step(
        root,
        "kb.search",
        "{kb: kb, query: rate limit, per_file: 'true', top_k: '1', operators: 'false'}",
    ));
    assert_eq!(hits["count"], 1, "{hits}");
    // The catalog's default snippet length (160), not a reader's own.
    let out = output(&step(root, "kb.search", "{kb: kb, query: rate limit}"));
    let longest = out["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["snippet"].as_str().unwrap().chars().count())
        .max()
        .unwrap();
    assert!(longest <= 161, "{out}");
    let out = output(&step(
        root,
        "memory.remember",
        "{text: Deploy on Fridays, importance: '0.7', dedupe: 'true', tags: 'ops, #deploy'}",
    ));
    assert_eq!(out["memory"]["importance"], 0.7, "{out}");
    assert_eq!(out["memory"]["tags"], serde_json::json!(["ops", "deploy"]));
    let out = output(&step(
        root,
        "memory.recall",
        "{query: deploy, touch: 'false', topK: '2'}",
    ));
    assert_eq!(out["count"], 1, "{out}");
    let out = output(&step(
        root,
        "file.list",
        "{path: kb, include_hidden: 'false', recursive: 'true'}",
    ));
    assert!(out["count"].as_u64().unwrap() >= 3, "{out}");
    // A value outside the rule is refused the same way by every family,
    // written (when the file loads) or rendered (when the step runs).
    for (action, inputs, input) in [
        (
            "kb.search",
            "{kb: kb, query: x, per_file: 'yes'}",
            "per_file",
        ),
        ("memory.recall", "{query: x, touch: 'yes'}", "touch"),
        ("file.list", "{include_hidden: 'yes'}", "include_hidden"),
        (
            "kb.search",
            "{kb: kb, query: x, per_file: \"{{ 'yes' }}\"}",
            "per_file",
        ),
        (
            "memory.recall",
            "{query: x, touch: \"{{ 'yes' }}\"}",
            "touch",
        ),
    ] {
        let r = step(root, action, inputs);
        assert_ne!(r.code, 0, "{r:?}");
        let want = format!("input `{input}` of `{action}` must be a boolean, got text");
        assert!(r.stderr.contains(&want), "{action}: {}", r.stderr);
    }
}

#[test]
fn concurrent_indexers_and_searchers_leave_one_consistent_index() {
    let dir = tempdir();
    let root = dir.path();
    for i in 0..40 {
        write(
            root,
            &format!("kb/n{i:02}.md"),
            &format!("# Note {i}\n\nshared words and marker{i}\n"),
        );
    }
    let wf = |name: &str, action: &str, inputs: &str| {
        let f = root.join(name);
        std::fs::write(
            &f,
            format!("---\nworkflow: {{id: t}}\n---\n\n```yaml\naction: {action}\ninputs: {inputs}\noutput_variable: out\n```\n"),
        )
        .unwrap();
    };
    wf("index.md", "kb.index", "{kb: kb}");
    wf(
        "search.md",
        "kb.search",
        "{kb: kb, query: shared, top_k: 100}",
    );
    let children: Vec<_> = (0..4)
        .map(|i| {
            let file = if i % 2 == 0 { "index.md" } else { "search.md" };
            cmd(root)
                .args(["run", file, "--json", "--quiet"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // Every note once: no duplicates from indexers that raced.
    let out = output(&step(
        root,
        "kb.search",
        "{kb: kb, query: shared, top_k: 100}",
    ));
    assert_eq!(out["count"], 40, "{out}");
}

#[test]
fn an_indexer_killed_midway_leaves_an_index_the_next_run_completes() {
    let dir = tempdir();
    let root = dir.path();
    for i in 0..1500 {
        write(
            root,
            &format!("kb/d{}/n{i:04}.md", i % 30),
            &format!(
                "# Note {i}\n\nbody text for note{i} {}\n",
                "filler words ".repeat(40)
            ),
        );
    }
    std::fs::write(
        root.join("index.md"),
        include_str!("fixtures/retrieval/t.md"),
    )
    .unwrap();
    // Killed at a known point of the work (its progress lines say where),
    // never by a timer that may fire before or after it.
    for kill_at in ["files indexed: 100/1500", "files indexed: 1400/1500"] {
        use std::io::BufRead;
        let _ = std::fs::remove_dir_all(root.join(".marktoflow/kb"));
        let mut child = cmd(root)
            .args(["run", "index.md", "--json", "--verbose"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut seen = false;
        for line in err.lines() {
            if line.unwrap().contains(kill_at) {
                seen = true;
                break;
            }
        }
        assert!(seen, "no `{kill_at}` progress line");
        // SIGKILL: no destructors, no cleanup, like a crash. The run had not
        // finished: 1500 files were still being indexed.
        assert!(child.try_wait().unwrap().is_none(), "killed mid-work");
        child.kill().unwrap();
        child.wait().unwrap();
        let out = output(&run(
            cmd(root).args(["run", "index.md", "--json", "--quiet"])
        ));
        assert_eq!(out["files"], 1500, "{out}");
        let out = output(&step(root, "kb.search", "{kb: kb, query: note1234}"));
        assert_eq!(paths(&out), ["d4/n1234.md"], "{out}");
        let out = output(&step(
            root,
            "kb.search",
            "{kb: kb, query: filler, top_k: 5000}",
        ));
        assert_eq!(out["total"], 1500, "each note once");
    }
}

#[test]
fn long_indexing_shows_progress() {
    let d = tempdir();
    let kb = d.path().join("kb");
    std::fs::create_dir(&kb).unwrap();
    for i in 0..250 {
        std::fs::write(
            kb.join(format!("n{i}.md")),
            format!("# Note {i}\n\nbody {i}\n"),
        )
        .unwrap();
    }
    let wf = include_str!("fixtures/retrieval/t-2.md");
    std::fs::write(d.path().join("wf.md"), wf).unwrap();
    // Not a terminal: counts appear as log lines with --verbose only.
    let r = run(cmd(d.path()).args(["run", "wf.md", "--verbose", "--no-store"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("files indexed: 100/250"), "{r:?}");
    assert!(r.stderr.contains("files indexed: 250/250"), "{r:?}");
    assert!(!r.stderr.contains("\x1b[2K"), "{r:?}");
    // On a terminal (a pseudo-terminal from util-linux `script`): a bar drawn
    // in place, and removed before the step's line.
    std::fs::remove_dir_all(d.path().join(".marktoflow/kb")).unwrap();
    let line = format!("{} run wf.md --no-store", crate::support::bin().display());
    let out = std::process::Command::new("script")
        .current_dir(d.path())
        .env("NO_COLOR", "1")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .expect("util-linux `script`");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let bar = text.find("] 100% 250/250 files indexed").expect(&text);
    let step = text.find("✓").expect(&text);
    assert!(text[..bar].contains("\r\x1b[2K    [###"), "{text:?}");
    assert!(text[bar..step].contains("\r\x1b[2K"), "{text:?}");
}

#[test]
fn kb_search_without_a_model_says_so_once_and_ranks_by_words() {
    let d = crate::support::tempdir();
    let kb = d.path().join("kb");
    std::fs::create_dir_all(kb.join("Travel")).unwrap();
    std::fs::create_dir_all(kb.join("Tasks")).unwrap();
    std::fs::write(
        kb.join("Travel/Lisbon.md"),
        "# Lisbon trip\n\n## Flights\n\nThe flight leaves at 09:40 on 2027-03-11.\n",
    )
    .unwrap();
    // Question words everywhere: "What", "time", "my" must not outrank the flight.
    for i in 0..4 {
        std::fs::write(
            kb.join(format!("Tasks/Task {i}.md")),
            format!("# Task {i}\n\n## What\n\nWhat my time goes to: what I did and what I do.\n"),
        )
        .unwrap();
    }
    std::fs::write(
        kb.join("Tasks/Cutover.md"),
        "# Database move\n\nThe switchover happens on Tuesday.\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("s.md"),
        include_str!("fixtures/retrieval/s.md"),
    )
    .unwrap();
    let go = |q: &str| {
        let r = run(cmd(d.path()).env_remove("MARKTOFLOW_EMBED_MODEL").args([
            "run",
            "s.md",
            "--json",
            "--input",
            &format!("q={q}"),
        ]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        r
    };
    let r = go("What time is my flight?");
    let a = &r.json()["outputs"]["a"];
    assert_eq!(a["ranking"]["dense"], false, "{a}");
    assert_eq!(a["hits"][0]["path"], "Travel/Lisbon.md", "{a}");
    assert_eq!(
        r.stderr.matches("no embedding model").count(),
        1,
        "said once for two searches: {}",
        r.stderr
    );
    // A hyphenated word also matches the word written together.
    let r = go("when is the switch-over");
    let hit = &r.json()["outputs"]["a"]["hits"][0];
    assert_eq!(hit["path"], "Tasks/Cutover.md", "{hit}");
    // Its only chunk is headed by the title: counted as the title, not again
    // as a section.
    assert_eq!(
        (&hit["title"], &hit["section"]),
        (&json!("Database move"), &json!(""))
    );
}

#[test]
fn a_notes_short_intro_brings_its_best_section_along() {
    let d = crate::support::tempdir();
    let kb = d.path().join("kb");
    std::fs::create_dir_all(&kb).unwrap();
    std::fs::write(
        kb.join("Boiler.md"),
        "# Boiler service\n\n- Type: home\n- Company: Visser Heating\n- Date: 2026-12-02\n\n## Before the engineer comes\n\nClear the hallway cupboard so the engineer can reach the boiler.\n\n## History\n\nLast serviced in 2025.\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("s.md"),
        include_str!("fixtures/retrieval/s-2.md"),
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["run", "s.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let hits = r.json()["outputs"]["r"]["hits"].clone();
    assert_eq!(
        hits.as_array().unwrap().len(),
        1,
        "one hit per note: {hits}"
    );
    let text = hits[0]["text"].as_str().unwrap();
    assert!(text.contains("Type: home"), "the intro: {text}");
    assert!(
        text.contains("Clear the hallway cupboard"),
        "and its best section: {text}"
    );
    assert!(!text.contains("Last serviced"), "not every section: {text}");
    assert_eq!(hits[0]["section"], "Before the engineer comes");
    assert_eq!(hits[0]["merged"].as_array().unwrap().len(), 2);
}

#[test]
fn kb_search_can_read_the_question_first() {
    let d = crate::support::tempdir();
    let kb = d.path().join("kb");
    std::fs::create_dir_all(&kb).unwrap();
    for (day, text) in [
        ("2026-11-17", "Talked about the launch plan."),
        ("2026-11-24", "Talked about the launch budget."),
    ] {
        std::fs::write(
            kb.join(format!("{day} Sync.md")),
            format!("# {day} Sync\n\n- Date: {day}\n\n## Notes\n\n{text}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        d.path().join("s.md"),
        include_str!("fixtures/retrieval/s-3.md"),
    )
    .unwrap();
    let paths = |analyze: bool| -> Vec<String> {
        let r = run(cmd(d.path()).args([
            "run",
            "s.md",
            "--json",
            "--quiet",
            "--input",
            &format!("analyze={analyze}"),
        ]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()["outputs"]["r"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(paths(false).len(), 2, "both syncs match the words");
    assert_eq!(
        paths(true),
        ["2026-11-17 Sync.md"],
        "the day the question names"
    );
}

/// Index files a server has mapped are cut to nothing under it (by another
/// program): the server neither dies nor stops answering, the search that
/// meets the damage says so (it answered from zero pages, silently: issue
/// 49, item 9), and the next search has the index built again.
#[test]
fn a_mapped_index_cut_short_under_a_server_does_not_kill_it() {
    use crate::support::{http, serve};
    let d = tempdir();
    let dir = d.path();
    crate::support::copy_dir(&repo().join("examples/lifeos"), &dir.join("notes"));
    std::fs::write(
        dir.join("search.md"),
        include_str!("fixtures/retrieval/search.md"),
    )
    .unwrap();
    let s = serve(dir, &["search.md", "--allow-write", "idx"], &[]);
    let ask = || {
        http(
            &s.addr,
            "POST",
            "/search",
            &[("Content-Type", "application/json")],
            br#"{"q": "Apollo API key"}"#,
        )
    };
    let first = ask();
    assert_eq!(first.status, 200, "{}", first.body);
    // Every file of the index, cut to nothing in place.
    let mut cut = 0;
    for e in walk_files(&dir.join("idx")) {
        let f = std::fs::OpenOptions::new().write(true).open(&e).unwrap();
        f.set_len(0).unwrap();
        cut += 1;
    }
    assert!(cut > 3, "{cut} files");
    let ids = |r: &crate::support::Resp| -> Vec<String> {
        r.json()["outputs"]["found"]["hits"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|h| h["id"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let damaged = ask();
    assert_eq!(damaged.status, 500, "{}", damaged.body);
    let message = damaged.json()["error"]["message"].clone();
    assert!(
        message
            .as_str()
            .unwrap_or_default()
            .contains("was found damaged"),
        "{message}"
    );
    let again = ask();
    assert_eq!(again.status, 200, "{}", again.body);
    assert!(!ids(&first).is_empty());
    assert_eq!(ids(&again), ids(&first));
    let health = http(&s.addr, "GET", "/health", &[], b"");
    assert_eq!(health.status, 200, "the server lives");
    let metrics = http(&s.addr, "GET", "/metrics", &[], b"").body;
    let faults: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("marktoflow_mapped_file_faults_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(faults > 0, "{metrics}");
}

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}
