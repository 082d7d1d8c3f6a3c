//! The run store through the CLI: `run` records, `history`, `show`, `retry`,
//! `prune`, on a real SQLite file.

use crate::support::{cmd, run, tempdir};
use serde_json::{json, Value};
use std::path::Path;

/// Step one counts its runs in `count.txt`; step two fails unless `FIXED`
/// is set; step three reports.
const COUNTER: &str = r#"---
workflow: {id: counter}
---

## First

```yaml
action: script.execute
inputs:
  code: |
    const fs = require('fs');
    const n = fs.existsSync('count.txt') ? Number(fs.readFileSync('count.txt', 'utf8')) : 0;
    fs.writeFileSync('count.txt', String(n + 1));
    return n + 1;
output_variable: first
```

## Second

```yaml
action: workflow.fail
conditions: ['{{ not env.FIXED }}']
inputs: {message: second failed}
```

## Third

```yaml
action: core.set
inputs: {first: '{{ first }}'}
output_variable: result
```
"#;

fn mtf(dir: &Path, args: &[&str]) -> crate::support::Run {
    run(cmd(dir).args(args).env_remove("FIXED"))
}

/// Whether a run was recorded in the store `runs.db` of `dir`: in the file,
/// or as a journal beside it that the next reader moves in.
fn recorded_in(dir: &Path) -> bool {
    let journals = std::fs::read_dir(dir.join("runs.db.pending"))
        .map(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        })
        .unwrap_or(false);
    journals || dir.join("runs.db").is_file()
}

fn count(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("count.txt")).unwrap_or_default()
}

#[test]
fn runs_are_recorded_and_a_retry_reuses_finished_steps() {
    let d = tempdir();
    let p = d.path();
    std::fs::write(p.join("c.md"), COUNTER).unwrap();
    let r = mtf(p, &["run", "c.md", "--allow-write", ".", "-q"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(recorded_in(&p.join(".marktoflow")), "the default store");
    let h: Value = serde_json::from_str(&mtf(p, &["history", "--json"]).stdout).unwrap();
    // The reader moved the run's journal into the database and deleted it.
    assert!(p.join(".marktoflow/runs.db").is_file());
    assert!(recorded_in(&p.join(".marktoflow")));
    let left = std::fs::read_dir(p.join(".marktoflow/runs.db.pending"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .count();
    assert_eq!(left, 0, "a finished run's journal is deleted once moved");
    let first = &h["runs"][0];
    assert_eq!(first["status"], "failed");
    assert_eq!(first["trigger"], "cli");
    assert_eq!(first["error_step"], "second");
    let id = first["id"].as_str().unwrap().to_string();
    // `show` takes a prefix and lists each step.
    // `history` shows the end of the id (its start is the time); `show`
    // takes that, as it takes a unique start.
    let short = &id[id.len() - 8..];
    assert!(mtf(p, &["history"]).stdout.contains(short));
    let show = mtf(p, &["show", short]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("completed first"), "{}", show.stdout);
    assert!(
        show.stdout.contains("error: second failed"),
        "{}",
        show.stdout
    );
    // Retry after fixing the cause: continues at `second`; `first` is not run again.
    let r = run(cmd(p)
        .args(["retry", &id[..8], "--allow-write", ".", "--json", "-q"])
        .env("FIXED", "1"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["outputs"]["result"]["first"], 1);
    assert_eq!(count(p), "1", "the first step ran once");
    let h: Value = serde_json::from_str(&mtf(p, &["history", "--json"]).stdout).unwrap();
    let retried = &h["runs"][0];
    assert_eq!(
        (retried["status"].as_str(), retried["trigger"].as_str()),
        (Some("completed"), Some("retry"))
    );
    assert_eq!(retried["retry_of"], id.as_str());
    let shown: Value =
        serde_json::from_str(&mtf(p, &["show", retried["id"].as_str().unwrap(), "--json"]).stdout)
            .unwrap();
    let steps: Vec<(String, bool)> = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step_id"].as_str().unwrap().to_string(),
                s["reused"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(steps[0], ("first".to_string(), true), "{shown}");
    // --from a step runs it and everything after it again.
    let r = run(cmd(p)
        .args(["retry", &id, "--from", "first", "--allow-write", ".", "-q"])
        .env("FIXED", "1"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(count(p), "2");
    // Filters and errors.
    let h: Value =
        serde_json::from_str(&mtf(p, &["history", "--json", "--status", "failed"]).stdout).unwrap();
    assert_eq!(h["runs"].as_array().unwrap().len(), 1);
    let r = mtf(p, &["retry", &id, "--from", "nope"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("`nope` is not a top-level step"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("first, second, third"), "{}", r.stderr);
    let r = mtf(p, &["show", "zzzz"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no run `zzzz`"), "{}", r.stderr);
    // An edit of the prose only (no step, no frontmatter changed) keeps
    // the workflow the same version: retried without `--force`.
    std::fs::write(
        p.join("c.md"),
        COUNTER.replace(
            "## Third\n",
            "## Third\n\nSets the result, now explained.\n",
        ),
    )
    .unwrap();
    let before = count(p);
    let r = run(cmd(p)
        .args(["retry", &id, "--allow-write", ".", "--json", "-q"])
        .env("FIXED", "1"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("changed since run"), "{}", r.stderr);
    assert_eq!(count(p), before, "`first` is reused, not run again");
    // A changed step is not retried with old outputs.
    std::fs::write(
        p.join("c.md"),
        COUNTER.replace("second failed", "2nd failed"),
    )
    .unwrap();
    let r = mtf(p, &["retry", &id]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("changed since run"), "{}", r.stderr);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    // `--force` retries anyway: steps matched by id (a step inserted before
    // the failed one shifts positions), saying what changed.
    std::fs::write(
        p.join("c.md"),
        COUNTER.replace(
            "## Second",
            "## Inserted\n\n```yaml\naction: core.set\ninputs: {extra: 1}\noutput_variable: extra\n```\n\n## Second",
        ),
    )
    .unwrap();
    let before = count(p);
    let r = run(cmd(p)
        .args([
            "retry",
            &id,
            "--force",
            "--allow-write",
            ".",
            "--json",
            "-q",
        ])
        .env("FIXED", "1"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("changed since run"), "{}", r.stderr);
    assert!(r.stderr.contains("added: `inserted`"), "{}", r.stderr);
    assert!(r.stderr.contains("retrying from `second`"), "{}", r.stderr);
    assert_eq!(count(p), before, "`first` is reused, not run again");
    assert_eq!(r.json()["outputs"]["result"]["first"], 1);
    let r = mtf(p, &["retry", &id, "--force", "--from", "inserted"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("not a step run"), "{}", r.stderr);
}

/// CLI runs started while readers create the store (moving the first
/// run's journal in): none refuses it as "not a run store", every run is
/// recorded.
#[test]
fn runs_started_while_the_store_is_created_all_record() {
    let d = tempdir();
    std::fs::write(d.path().join("wf.md"), include_str!("fixtures/store/t.md")).unwrap();
    let spawn = |args: &[&str]| {
        cmd(d.path())
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    for round in 0..10 {
        let store = format!("fresh-{round}.db");
        // A journal waits beside a store file that does not exist yet.
        assert_eq!(
            mtf(d.path(), &["run", "wf.md", "-q", "--store", &store]).code,
            0
        );
        let mut children = Vec::new();
        for _ in 0..6 {
            children.push(spawn(&["history", "--json", "--store", &store]));
            children.push(spawn(&["run", "wf.md", "--quiet", "--store", &store]));
        }
        for c in children {
            let out = c.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("not a run store"), "round {round}: {err}");
        }
        let listed = mtf(d.path(), &["history", "--json", "--store", &store]);
        assert_eq!(listed.code, 0, "{listed:?}");
        let runs: Value = serde_json::from_str(&listed.stdout).unwrap();
        assert_eq!(runs["runs"].as_array().map(Vec::len), Some(7), "{runs}");
    }
}

#[test]
fn run_from_or_only_a_step_with_given_variables() {
    let d = tempdir();
    let p = d.path();
    std::fs::write(p.join("c.md"), COUNTER).unwrap();
    // `--only third` with what `first` would have set: nothing else runs.
    let r = run(cmd(p).args([
        "run", "c.md", "--only", "third", "--var", "first=41", "--json", "-q",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["outputs"]["result"]["first"], 41);
    assert_eq!(count(p), "", "`first` did not run");
    assert_eq!(r.json()["steps"].as_array().unwrap().len(), 1);
    // Without it, a warning names the variable the step reads.
    let r = run(cmd(p).args(["run", "c.md", "--only", "third", "-q"]));
    assert!(r.stderr.contains("reads `first`"), "{}", r.stderr);
    // `--from second` runs second and third.
    let r = run(cmd(p)
        .args([
            "run",
            "c.md",
            "--from",
            "second",
            "--var",
            "first={\"n\": 2}",
            "--json",
            "-q",
        ])
        .env("FIXED", "1"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["outputs"]["result"]["first"], json!({"n": 2}));
    assert_eq!(r.json()["steps"].as_array().unwrap().len(), 2);
    // Mistakes: an unknown step, `--var` alone.
    let r = run(cmd(p).args(["run", "c.md", "--from", "fourth"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("they are first, second, third"),
        "{}",
        r.stderr
    );
    let r = run(cmd(p).args(["run", "c.md", "--var", "x=1"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("`--var` gives variables to"),
        "{}",
        r.stderr
    );
}

#[test]
fn store_options_and_pruning() {
    let d = tempdir();
    let p = d.path();
    std::fs::write(p.join("h.md"), include_str!("fixtures/store/h.md")).unwrap();
    let r = mtf(p, &["run", "h.md", "-q", "--no-store"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !p.join(".marktoflow").exists(),
        "--no-store records nothing"
    );
    let r = mtf(p, &["history"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no run store at"), "{}", r.stderr);
    let r = run(cmd(p)
        .args(["run", "h.md", "-q"])
        .env("MARKTOFLOW_STORE", "elsewhere/runs.db"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(recorded_in(&p.join("elsewhere")));
    // A store that cannot be opened stops the run before it starts.
    std::fs::write(p.join("not-a-db"), "hello, this is not SQLite").unwrap();
    let r = mtf(p, &["run", "h.md", "--store", "not-a-db"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--no-store"), "{}", r.stderr);
    let r = run(cmd(p)
        .args(["prune", "--older-than", "0s"])
        .env("MARKTOFLOW_STORE", "elsewhere/runs.db"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "pruned 1 run");
    let r = mtf(
        p,
        &[
            "prune",
            "--older-than",
            "soon",
            "--store",
            "elsewhere/runs.db",
        ],
    );
    assert_eq!(r.code, 2);
}

#[test]
fn state_is_found_like_git_finds_its_folder() {
    let home = tempdir();
    let d = tempdir();
    let p = d.path();
    let flows = p.join("project/flows/sub");
    std::fs::create_dir_all(&flows).unwrap();
    std::fs::create_dir_all(p.join("project/.marktoflow")).unwrap();
    std::fs::create_dir_all(p.join("project/docs")).unwrap();
    std::fs::create_dir_all(p.join("project/notes")).unwrap();
    std::fs::write(
        p.join("project/notes/a.md"),
        "# Apollo\n\nThe launch is in May.\n",
    )
    .unwrap();
    std::fs::write(flows.join("wf.md"), include_str!("fixtures/store/found.md")).unwrap();
    let at =
        |cwd: &Path, args: &[&str]| run(cmd(cwd).env("MARKTOFLOW_HOME", home.path()).args(args));
    // Run from the project root: the run, the index and nothing else land in
    // the project's `.marktoflow/`.
    let r = at(
        &p.join("project"),
        &["run", "flows/sub/wf.md", "--json", "-q"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["hits"]["count"], 1);
    assert!(recorded_in(&p.join("project/.marktoflow")));
    assert!(p.join("project/.marktoflow/kb").is_dir());
    assert!(
        !p.join("project/notes/.marktoflow").exists(),
        "the notes stay as they were"
    );
    assert!(!flows.join(".marktoflow").exists());
    assert_eq!(
        std::fs::read_dir(home.path()).unwrap().count(),
        0,
        "nothing in the per-user folder"
    );
    // `history` from any folder of the project finds it.
    let h = at(&p.join("project/docs"), &["history", "--json"]);
    assert_eq!(h.code, 0, "{h:?}");
    assert_eq!(h.json()["runs"][0]["workflow"], "found");

    // Outside any project: the per-user folder, and `history` there too.
    std::fs::create_dir_all(p.join("loose")).unwrap();
    std::fs::write(
        p.join("loose/one.md"),
        include_str!("fixtures/store/loose.md"),
    )
    .unwrap();
    let r = at(&p.join("loose"), &["run", "one.md", "-q"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(recorded_in(home.path()));
    assert!(
        !p.join("loose/.marktoflow").exists(),
        "a run does not litter the folder"
    );
    let h = at(&p.join("loose"), &["history", "--json"]);
    assert_eq!(h.json()["runs"][0]["workflow"], "loose");
}

/// A folder named by an `--input` is readable in the run, and again when
/// the run is retried (its inputs are the stored ones).
#[test]
fn a_retry_keeps_the_folders_its_inputs_name_readable() {
    let d = tempdir();
    let p = d.path();
    let notes = tempdir();
    std::fs::write(notes.path().join("n.md"), "# Note\n\nhello").unwrap();
    std::fs::write(p.join("r.md"), include_str!("fixtures/store/reads.md")).unwrap();
    let dir = notes.path().to_str().unwrap();
    let r = mtf(p, &["run", "r.md", "--input", &format!("dir={dir}"), "-q"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("not yet"), "{}", r.stderr);
    let h: Value = serde_json::from_str(&mtf(p, &["history", "--json"]).stdout).unwrap();
    let id = h["runs"][0]["id"].as_str().unwrap().to_string();
    let r = run(cmd(p)
        .args(["retry", &id, "--json", "-q"])
        .env("FIXED", "1"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["outputs"]["note"]["content"], "# Note\n\nhello");
}

/// A 2 MB variable set by the first of 21 steps; step `s12` fails unless
/// `FIXED` is set; the last step reports what every earlier step set.
fn big_state_workflow() -> String {
    let mut wf = String::from(include_str!("fixtures/store/big-state.md"));
    for i in 2..=20 {
        let fail = if i == 12 {
            "conditions: ['{{ not env.FIXED }}']\naction: workflow.fail\ninputs: {message: s12 failed}\n".to_string()
        } else {
            format!("action: core.set\ninputs: {{n: {i}}}\noutput_variable: v{i}\n")
        };
        wf.push_str(&format!("\n## s{i}\n\n```yaml\nid: s{i}\n{fail}```\n"));
    }
    wf.push_str("\n## s21\n\n```yaml\nid: s21\naction: core.set\ninputs:\n  big: '{{ big | length }}'\n  sum: '{{ v2.n + v11.n + v13.n + v20.n }}'\noutput_variable: report\n```\n");
    wf
}

#[test]
fn checkpoints_store_each_value_once_and_still_resume_every_step() {
    let d = tempdir();
    let p = d.path();
    std::fs::write(p.join("big.md"), big_state_workflow()).unwrap();
    let r = mtf(p, &["run", "big.md", "-q"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let h: Value = serde_json::from_str(&mtf(p, &["history", "--json"]).stdout).unwrap();
    let id = h["runs"][0]["id"].as_str().unwrap().to_string();
    // Eleven checkpoints of a state holding the 2 MB value three times (the
    // variable, `steps.s1.output`, the last output): whole, they took 66 MB.
    let db = rusqlite::Connection::open(p.join(".marktoflow/runs.db")).unwrap();
    let (rows, bytes): (i64, i64) = db
        .query_row(
            "SELECT count(*), sum(length(state)) FROM checkpoints WHERE run_id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(rows, 11, "one before each step after the first");
    assert!(bytes < 6_100_000, "checkpoints took {bytes} bytes");
    // A retry continues at s12 with the state the deltas fold back to.
    let r = run(cmd(p)
        .args(["retry", &id, "--json", "-q"])
        .env("FIXED", "1"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = &r.json()["outputs"]["report"];
    assert_eq!(report["big"], 2_000_000, "{report}");
    assert_eq!(report["sum"], 2 + 11 + 13 + 20, "{report}");
    // Its checkpoints: after s12 … s20; none after the last step of a run
    // that ended (nothing resumes it, `--from` starts before a step).
    let retry_id = r.json()["run_id"].as_str().unwrap().to_string();
    mtf(p, &["history"]);
    let steps_saved: Vec<i64> = db
        .prepare("SELECT next_step FROM checkpoints WHERE run_id = ?1 ORDER BY next_step")
        .unwrap()
        .query_map([&retry_id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(steps_saved, (12..=20).collect::<Vec<i64>>());
    // And from a step in the middle of the deltas.
    let r = run(cmd(p)
        .args(["retry", &id, "--from", "s7", "--json", "-q"])
        .env("FIXED", "1"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["outputs"]["report"]["big"], 2_000_000);
    let steps = r.json()["steps"].as_array().unwrap().len();
    assert_eq!(steps, 15, "s7..s21 ran again");
}

/// `big.md` in `p` (with `frontmatter` added to its own), whose first step
/// reads `big.txt`, 50 MB, and whose second notes its size.
fn big_workflow(p: &Path, frontmatter: &str) {
    let line = "x".repeat(99) + "\n";
    std::fs::write(p.join("big.txt"), line.repeat(500_000)).unwrap();
    std::fs::write(
        p.join("big.md"),
        format!("---\nworkflow: {{id: big}}\n{frontmatter}---\n\n## Read\n\n```yaml\naction: file.read\ninputs: {{path: big.txt}}\noutput_variable: big\n```\n\n## Size\n\n```yaml\naction: core.set\ninputs: {{bytes: '{{{{ big.size }}}}'}}\noutput_variable: size\n```\n"),
    )
    .unwrap();
}

/// A run whose step returns 50 MB leaves the store small once it completed
/// (issue: one run left 550 MB): each stored value is capped at 1 MiB with
/// a visible marker, a completed run's large checkpoints are dropped, and
/// no WAL stays behind once the last process exits.
#[test]
fn a_fifty_megabyte_output_leaves_the_store_under_its_bound() {
    let d = tempdir();
    let p = d.path();
    big_workflow(p, "");
    let r = run(cmd(p)
        .args(["run", "big.md", "--store", "runs.db", "-q", "--json"])
        .stdout(std::process::Stdio::piped()));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["outputs"]["big"]["content"].as_str().map(str::len),
        Some(50_000_000),
        "the run itself has the whole value"
    );
    assert_eq!(r.json()["outputs"]["size"]["bytes"], 50_000_000);
    // A reader moves the journal in, then exits.
    let h = mtf(p, &["history", "--json", "--store", "runs.db"]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let id = serde_json::from_str::<Value>(&h.stdout).unwrap()["runs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = mtf(p, &["show", &id, "--json", "--store", "runs.db"]);
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    let read = &shown["steps"][0]["output"];
    assert_eq!(read["truncated"], true, "{}", &shown.to_string()[..400]);
    assert!(read["bytes"].as_u64().unwrap() > 50_000_000);
    assert!(read["preview"]
        .as_str()
        .unwrap()
        .starts_with("{\"content\":\"xxx"));
    assert_eq!(shown["outputs"]["truncated"], true);
    let size = |name: &str| {
        std::fs::metadata(p.join(name))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    let total = size("runs.db") + size("runs.db-wal");
    assert!(total < 8 << 20, "the store holds {total} bytes");
    assert_eq!(size("runs.db-wal"), 0, "no WAL left behind");
    let journals = std::fs::read_dir(p.join("runs.db.pending"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(journals, 0);
}

/// The same through a server, whose run commits its checkpoints as it goes
/// (for a restart) and drops them at its end.
#[test]
fn a_served_fifty_megabyte_output_leaves_the_store_under_its_bound() {
    use crate::support::{http, serve};
    let d = tempdir();
    let p = d.path();
    big_workflow(
        p,
        "triggers:\n  - {type: webhook, path: /big}\noutputs:\n  size: '{{ size }}'\n",
    );
    let store = p.join("served.db");
    let store_env = store.to_str().unwrap().to_string();
    let mut s = serve(p, &["big.md"], &[("MARKTOFLOW_STORE", store_env.as_str())]);
    let r = http(
        &s.addr,
        "POST",
        "/big",
        &[("Content-Type", "application/json")],
        b"{}",
    );
    assert_eq!(r.status, 200, "{}", &r.body[..r.body.len().min(300)]);
    // Stopped as a supervisor stops it.
    let pid = s.child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let _ = s.child.wait();
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let total = size(&store) + size(&p.join("served.db-wal"));
    assert!(
        total < 8 << 20,
        "the store holds {total} bytes ({} in its WAL)",
        size(&p.join("served.db-wal"))
    );
}
