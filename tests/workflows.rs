//! A folder of workflows, each run with its expected outputs or error:
//! `tests/workflows/NAME.md` and `NAME.expected.json` (`{"status",
//! "outputs"}` or `{"status": "failed", "error", "code"?}`). Files without an
//! expectation (sub-workflows they call) are not run on their own.
//! `MARKTOFLOW_BLESS=1` rewrites the expectations. Key order counts (the
//! peer's objects iterate as JavaScript's do).

use crate::support::{case_files, cmd, repo, run};
use serde_json::{json, Value};
use std::fs;

#[test]
fn workflows_give_their_expected_results() {
    let dir = repo().join("tests/workflows");
    let bless = std::env::var_os("MARKTOFLOW_BLESS").is_some();
    let cases: Vec<_> = case_files(&dir, "md", 10)
        .into_iter()
        .filter(|p| p.with_extension("expected.json").exists())
        .collect();
    assert!(cases.len() >= 10, "{cases:?}");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_str().unwrap();
        let r = run(cmd(&dir).args(["run", name, "--json", "--quiet"]));
        let j = r.json();
        // Errors may name the sandbox roots; keep expectations free of this checkout's path.
        let mut actual = if j["status"] == "completed" {
            json!({"status": "completed", "outputs": j["outputs"]})
        } else {
            let mut failed = json!({"status": j["status"], "error": j["error"]["message"]});
            if let Some(code) = j["error"].get("code") {
                failed["code"] = code.clone();
            }
            failed
        };
        if let Some(msg) = actual["error"].as_str() {
            let mut msg = msg.to_string();
            for root in [dir.canonicalize().unwrap(), dir.clone()] {
                msg = msg.replace(root.to_str().unwrap(), "<dir>");
            }
            actual["error"] = json!(msg);
        }
        let path = case.with_extension("expected.json");
        if bless {
            fs::write(&path, serde_json::to_string(&actual).unwrap() + "\n").unwrap();
            continue;
        }
        let expected: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        let code_ok = (r.code == 0) == (expected["status"] == "completed");
        // As text: the order of an object's keys is part of what is pinned.
        let text = |v: &Value| serde_json::to_string(v).unwrap();
        if text(&expected) != text(&actual) || !code_ok {
            failures.push(format!(
                "{name}: exit {}\n  expected {expected}\n  actual   {actual}\n{}",
                r.code, r.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn parallel_waits(max_concurrent: usize, branches: usize, wait_ms: u64) -> u64 {
    let d = crate::support::tempdir();
    let lanes: String = (0..branches)
        .map(|i| {
            format!("  - id: b{i}\n    steps:\n      - type: wait\n        duration: {wait_ms}\n")
        })
        .collect();
    let wf = format!("---\nworkflow: {{id: p}}\n---\n\n```yaml\nid: fan\ntype: parallel\nmax_concurrent: {max_concurrent}\nbranches:\n{lanes}```\n");
    fs::write(d.path().join("p.md"), wf).unwrap();
    let r = run(cmd(d.path()).args(["run", "p.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let fan = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "fan")
        .unwrap()
        .clone();
    fan["duration_ms"].as_u64().unwrap()
}

#[test]
fn parallel_branches_overlap() {
    // Each branch's script says when it waited; side by side, each started
    // before the other ended (in turn, one would start after the other).
    let d = crate::support::tempdir();
    let lane = |i: usize| {
        format!("  - id: b{i}\n    steps:\n      - action: script.execute\n        inputs:\n          code: 'const s = Date.now(); await new Promise(r => setTimeout(r, 200)); return [s, Date.now()];'\n        output_variable: span\n")
    };
    let wf = format!(
        "---\nworkflow: {{id: p}}\n---\n\n```yaml\nid: fan\ntype: parallel\nmax_concurrent: 2\nbranches:\n{}{}output_variable: fan\n```\n",
        lane(0),
        lane(1)
    );
    fs::write(d.path().join("p.md"), wf).unwrap();
    let r = run(cmd(d.path()).args(["run", "p.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{r:?}");
    let fan = &r.json()["outputs"]["fan"];
    let span = |b: &str| -> (i64, i64) {
        let v = &fan[b]["variables"]["span"];
        (v[0].as_i64().unwrap(), v[1].as_i64().unwrap())
    };
    let ((s0, e0), (s1, e1)) = (span("b0"), span("b1"));
    assert!(s0 < e1 && s1 < e0, "the branches ran in turn: {fan}");
}

#[test]
fn parallel_max_concurrent_bounds_the_work_in_flight() {
    // Four 100 ms branches, two at a time: at least two rounds.
    let ms = parallel_waits(2, 4, 100);
    assert!(ms >= 200, "took {ms} ms: more than two ran at once");
    let ms = parallel_waits(1, 3, 100);
    assert!(ms >= 300, "took {ms} ms: more than one ran at once");
}
