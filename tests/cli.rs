//! The command line: inputs, outputs, exit codes, `--json`, `validate`.

use crate::support::{cmd, run, tempdir};
use serde_json::json;
use std::fs;
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

const TYPED: &str = r#"---
workflow:
  id: typed
inputs:
  n:
    type: number
    required: true
  flag:
    type: boolean
    default: false
  tags:
    type: array
    default: []
  level:
    type: integer
    default: 2
    min: 1
    max: 5
outputs:
  next:
    type: number
  kinds:
    type: object
---

```yaml
action: core.set
inputs:
  value: '{{ inputs.n + 1 }}'
output_variable: next_raw
```

```yaml
action: script.execute
inputs:
  code: |
    return {
      next: context.next_raw.value,
      kinds: {
        n: typeof context.inputs.n,
        flag: typeof context.inputs.flag,
        tags: Array.isArray(context.inputs.tags),
        level: context.inputs.level,
      },
    };
output_variable: result
```
"#;

#[test]
fn inputs_are_coerced_to_their_declared_types() {
    let d = tempdir();
    let wf = write(d.path(), "typed.md", TYPED);
    let r = run(cmd(d.path())
        .args([
            "run", "typed.md", "--json", "--input", "n=3", "--input", "flag=yes", "--input",
            "tags=a,b",
        ])
        .arg("--quiet"));
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["outputs"]["next"], json!(4));
    assert_eq!(
        j["outputs"]["kinds"],
        json!({"n": "number", "flag": "boolean", "tags": true, "level": 2})
    );
    assert_eq!(j["status"], "completed");
    assert_eq!(j["workflow"], "typed");
    let steps = j["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for key in ["id", "name", "status", "output", "error", "duration_ms"] {
        assert!(
            steps[0].get(key).is_some(),
            "step lacks {key}: {}",
            steps[0]
        );
    }
    assert!(j["run_id"].as_str().unwrap().len() >= 32);
    drop(wf);
}

#[test]
fn inputs_file_and_range_checks() {
    let d = tempdir();
    write(d.path(), "typed.md", TYPED);
    write(d.path(), "in.json", r#"{"n": 10, "level": 5}"#);
    let r = run(cmd(d.path()).args([
        "run",
        "typed.md",
        "--json",
        "--quiet",
        "--inputs-file",
        "in.json",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["next"], json!(11));

    let r = run(cmd(d.path()).args(["run", "typed.md", "--input", "n=1", "--input", "level=9"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("input `level`: must be at most 5"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("typed.md:"), "{}", r.stderr);

    write(d.path(), "bad.json", "{\"n\": ");
    let r = run(cmd(d.path()).args(["run", "typed.md", "--inputs-file", "bad.json"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("bad.json:1:"), "{}", r.stderr);
}

#[test]
fn human_output_is_readable_yaml_on_stdout() {
    let d = tempdir();
    write(d.path(), "typed.md", TYPED);
    let r = run(cmd(d.path()).args(["run", "typed.md", "--input", "n=1"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.stdout,
        "next: 2\nkinds:\n  n: number\n  flag: boolean\n  tags: true\n  level: 2\n"
    );
    // Progress goes to stderr, never to stdout.
    assert!(r.stderr.contains("completed"), "{}", r.stderr);
    assert!(!r.stdout.contains("completed"));
}

#[test]
fn the_allocator_takes_address_space_64_mib_at_a_time() {
    // runner/src/main.rs sets mimalloc's option by its number; mimalloc
    // prints its options by name, so a renumbered option fails here.
    let d = tempdir();
    let r = run(cmd(d.path())
        .arg("--version")
        .env_remove("MIMALLOC_ARENA_RESERVE")
        .env("MIMALLOC_VERBOSE", "1"));
    assert_eq!(r.code, 0, "{r:?}");
    let options: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("option 'arena_reserve'"))
        .collect();
    assert_eq!(
        options,
        ["option 'arena_reserve': 65536 KiB"],
        "{}",
        r.stderr
    );
    // A default: the variable mimalloc reads still wins.
    let r = run(cmd(d.path())
        .arg("--version")
        .env("MIMALLOC_ARENA_RESERVE", "128m")
        .env("MIMALLOC_VERBOSE", "1"));
    assert!(
        r.stderr.contains("option 'arena_reserve': 131072 KiB"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_reader_that_stops_early_is_no_panic() {
    // `run … --json | head -c 1`: stdout is closed before the result is
    // written; the run is over, so it exits as it ended, without a panic.
    let d = tempdir();
    write(d.path(), "typed.md", TYPED);
    let mut child = cmd(d.path())
        .args(["run", "typed.md", "--input", "n=1", "--json", "--no-store"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        (out.status.code(), stderr.contains("panicked")),
        (Some(0), false),
        "{stderr}"
    );
}

#[test]
fn outputs_come_from_set_outputs_anywhere_last_call_wins() {
    let d = tempdir();
    write(
        d.path(),
        "o.md",
        r#"---
workflow: {id: outs}
outputs:
  ignored: {type: string}
---

```yaml
action: workflow.set_outputs
inputs: {answer: first}
```

```yaml
type: if
condition: 'inputs.deep or true'
then:
  - action: workflow.set_outputs
    inputs:
      answer: from inside the if
      n: 2
```
"#,
    );
    let r = run(cmd(d.path()).args(["run", "o.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"],
        json!({"answer": "from inside the if", "n": 2})
    );
}

#[test]
fn without_set_outputs_all_variables_are_the_outputs() {
    let d = tempdir();
    write(d.path(), "v.md", include_str!("fixtures/cli/vars.md"));
    let r = run(cmd(d.path()).args(["run", "v.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"],
        json!({"x": {"a": 1}, "y": {"b": true}})
    );
}

#[test]
fn a_failed_run_exits_1_and_names_the_step_and_its_place() {
    let d = tempdir();
    write(d.path(), "f.md", include_str!("fixtures/cli/fails.md"));
    let r = run(cmd(d.path()).args(["run", "f.md", "--input", "who=bob", "--json"]));
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["status"], "failed");
    assert_eq!(j["error"]["message"], "nothing to do for bob");
    assert_eq!(j["error"]["step"], "give_up");
    assert_eq!(j["error"]["line"], 8);
    assert_eq!(
        j["steps"].as_array().unwrap().len(),
        1,
        "the step after the failure never ran"
    );
    assert!(
        r.stderr
            .contains("f.md:8:9: error: step `Give up` failed: nothing to do for bob"),
        "{}",
        r.stderr
    );
}

#[test]
fn on_error_continue_keeps_going_and_step_status_is_visible() {
    let d = tempdir();
    write(
        d.path(),
        "c.md",
        r#"---
workflow: {id: cont}
---

```yaml
id: flaky
action: workflow.fail
inputs: {message: boom}
on_error: continue
```

```yaml
action: core.set
inputs:
  saw: '{{ steps.flaky.status }}'
  why: '{{ steps.flaky.error }}'
output_variable: report
```
"#,
    );
    let r = run(cmd(d.path()).args(["run", "c.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"]["report"],
        json!({"saw": "failed", "why": "boom"})
    );
}

#[test]
fn validate_checks_several_files() {
    let d = tempdir();
    write(d.path(), "good.md", TYPED);
    write(d.path(), "bad.md", include_str!("fixtures/cli/b.md"));
    let r = run(cmd(d.path()).args(["validate", "good.md", "bad.md"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stdout.contains("good.md: ok (2 steps"), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("bad.md:6:9: error: unknown action `core.nope`"),
        "{}",
        r.stderr
    );
    let r = run(cmd(d.path()).args(["validate", "good.md"]));
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn usage_errors_exit_2() {
    let d = tempdir();
    let r = run(cmd(d.path()).args(["run"]));
    assert_eq!(r.code, 2);
    let r = run(cmd(d.path()).args(["run", "missing.md"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("missing.md: error: cannot read workflow file: no such file"),
        "{}",
        r.stderr
    );
}

#[test]
fn steps_may_live_in_the_frontmatter_and_conditions_skip() {
    let d = tempdir();
    write(
        d.path(),
        "fm.md",
        r#"---
workflow: {id: fm}
inputs:
  mode: {type: string, default: quick}
steps:
  - id: always
    action: core.set
    inputs: {a: 1}
    output_variable: a
  - id: only_slow
    action: core.set
    conditions: ["inputs.mode == 'slow'"]
    inputs: {b: 2}
    output_variable: b
---

The body is documentation when the frontmatter has `steps:`:

```yaml
action: workflow.fail
inputs: {message: never runs}
```
"#,
    );
    let r = run(cmd(d.path()).args(["run", "fm.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["outputs"], json!({"a": {"a": 1}}));
    assert_eq!(j["steps"][1]["status"], "skipped");
    let r = run(cmd(d.path()).args(["run", "fm.md", "--json", "--quiet", "--input", "mode=slow"]));
    assert_eq!(r.json()["outputs"], json!({"a": {"a": 1}, "b": {"b": 2}}));
}

#[test]
fn validate_takes_folders_like_serve() {
    // Every shipped workflow and example validates, found by folder.
    let r = run(cmd(&crate::support::repo()).args(["validate", "workflows", "examples"]));
    assert_eq!(r.code, 0, "{r:?}");
    for f in [
        "retrieval.md",
        "retrieval-indexed.md",
        "memory-search.md",
        "hello.md",
    ] {
        assert!(r.stdout.contains(f), "{f} not validated: {r:?}");
    }
    // Notes in the example knowledge base are not workflows: not listed.
    assert!(!r.stdout.contains("examples/lifeos/"), "{r:?}");
    let r = run(cmd(&crate::support::repo()).args(["validate", "no/such/folder"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no/such/folder"), "{r:?}");
}

#[test]
fn strict_validation_reports_not_ok_and_run_strict_runs_nothing() {
    let d = tempdir();
    write(d.path(), "warn.md", include_str!("fixtures/cli/warn.md"));
    let r = run(cmd(d.path()).args(["validate", "warn.md", "--json"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()[0]["ok"], json!(true));
    let r = run(cmd(d.path()).args(["validate", "warn.md", "--json", "--strict"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(r.json()[0]["ok"], json!(false));
    assert_eq!(r.json()[0]["diagnostics"][0]["severity"], "warning");
    // `run` prints the warning, positioned, before it starts; --strict stops it.
    let r = run(cmd(d.path()).args(["run", "warn.md", "--strict", "--allow-write", "."]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("warn.md:7:"), "{r:?}");
    assert!(!d.path().join("out.txt").exists(), "nothing ran");
}

#[test]
fn a_template_error_stops_the_run_before_its_first_step() {
    let d = tempdir();
    write(d.path(), "wf.md", include_str!("fixtures/cli/late-typo.md"));
    let r = run(cmd(d.path()).args(["run", "wf.md", "--allow-write", "."]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("wf.md:16:23: error: template error: unknown filter"),
        "{r:?}"
    );
    assert!(r.stderr.contains("did you mean `length`?"), "{r:?}");
    assert!(
        !d.path().join("first.txt").exists(),
        "the first step did not run"
    );
}

#[test]
fn actions_lists_the_catalog() {
    let d = tempdir();
    let r = run(cmd(d.path()).args(["actions"]));
    assert_eq!(r.code, 0, "{r:?}");
    for name in [
        "core.set",
        "file.read",
        "kb.search",
        "memory.recall",
        "agent.run",
        "http.post",
    ] {
        assert!(r.stdout.contains(name), "{name}: {r:?}");
    }
    assert!(
        r.stdout
            .contains("inputs: path*, format, encoding, max_bytes"),
        "{r:?}"
    );
    let r = run(cmd(d.path()).args(["actions", "kb.search", "--json"]));
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["name"], "kb.search");
    assert_eq!(j["inputs"]["required"], json!(["kb"]));
    assert!(j["inputs"]["properties"]["top_k"].is_object(), "{j}");
    let r = run(cmd(d.path()).args(["actions", "kb.serch"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("did you mean `kb.search`?"), "{r:?}");
    // The schema carries the same contract, for editors.
    let r = run(cmd(d.path()).args(["schema"]));
    let schema: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let per_action = schema["$defs"]["step"]["allOf"].as_array().unwrap();
    let file_read = per_action
        .iter()
        .find(|c| c["if"]["properties"]["action"]["const"] == "file.read")
        .expect("file.read in the schema");
    assert_eq!(
        file_read["then"]["properties"]["inputs"]["additionalProperties"],
        json!(false)
    );
}

/// Rendering cannot be interrupted, but a template that runs past its step's
/// (or the workflow's) timeout makes the step time out, not complete.
#[test]
fn timeouts_bound_template_rendering() {
    let d = tempdir();
    let heavy = "{% for i in range(500) %}{% for j in range(1000) %}{% endfor %}{% endfor %}ok";
    write(
        d.path(),
        "step.md",
        &format!("---\nworkflow: {{id: s}}\n---\n\n```yaml\naction: core.set\ninputs: {{x: \"{heavy}\"}}\ntimeout: 10ms\n```\n"),
    );
    let r = run(cmd(d.path()).args(["run", "step.md", "--no-store"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("timed out after 10ms"), "{}", r.stderr);
    write(
        d.path(),
        "wf.md",
        &format!("---\nworkflow: {{id: w}}\ntimeout: 10ms\n---\n\n```yaml\ntype: if\ncondition: \"{{{{ '{heavy}' | length > 0 }}}}\"\nthen:\n  - action: core.set\n    inputs: {{x: \"{heavy}\"}}\n```\n"),
    );
    let r = run(cmd(d.path()).args(["run", "wf.md", "--no-store"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("workflow timed out after 10ms"),
        "{}",
        r.stderr
    );
}

/// SIGTERM (a supervisor, `timeout`) cancels a run as Ctrl-C does: it is
/// recorded `cancelled`, not left `interrupted`.
#[test]
fn sigterm_cancels_a_run_and_records_it() {
    let d = tempdir();
    write(d.path(), "slow.md", include_str!("fixtures/cli/slow.md"));
    let mut child = cmd(d.path())
        .args(["run", "slow.md", "--verbose"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the step runs (its start is printed), then ask it to stop.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0 {
        if line.contains("workflow.sleep") {
            break;
        }
        line.clear();
    }
    assert!(line.contains("workflow.sleep"), "the step never started");
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let h = run(cmd(d.path()).args(["history", "--json"]));
    assert_eq!(h.json()["runs"][0]["status"], "cancelled", "{}", h.stdout);
}

#[test]
fn a_loops_iterations_are_not_kept_again_in_the_step_list() {
    let d = crate::support::tempdir();
    // 30 iterations, each returning 10 KB.
    std::fs::write(d.path().join("big.md"), include_str!("fixtures/cli/big.md")).unwrap();
    let r = run(cmd(d.path()).args(["run", "big.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    // What the docs promise: the outputs and the loop's own output, whole.
    assert_eq!(j["outputs"]["all"].as_array().unwrap().len(), 30);
    // Each iteration gives the outputs of its steps that set a variable.
    assert_eq!(j["outputs"]["all"][29][0].as_str().unwrap().len(), 10_000);
    let steps = j["steps"].as_array().unwrap();
    let inner: Vec<&serde_json::Value> = steps.iter().filter(|s| s["id"] != "step_1").collect();
    assert_eq!(inner.len(), 30, "every iteration is listed");
    for s in &inner {
        assert_eq!(s["status"], "completed");
        let note = s["output"]["omitted"]
            .as_str()
            .unwrap_or_else(|| panic!("{s}"));
        assert!(note.contains("10002 bytes"), "{note}");
    }
    // Each 10 KB piece twice (outputs, the loop's step), not three times.
    assert!(
        r.stdout.len() < 2 * 30 * 10_000 + 40_000,
        "{} bytes",
        r.stdout.len()
    );
}

#[test]
fn list_shows_each_workflow_with_its_triggers_and_inputs() {
    let d = tempdir();
    fs::create_dir(d.path().join("flows")).unwrap();
    write(
        &d.path().join("flows"),
        "hook.md",
        include_str!("fixtures/cli/hook.md"),
    );
    write(
        &d.path().join("flows"),
        "README.md",
        "# Notes, not a workflow\n",
    );
    let r = run(cmd(d.path()).args(["list", "flows"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("flows/hook.md  Hook (hook)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("triggers: webhook POST /hook; schedule 0 9 * * 1"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("inputs: q: string, n?: integer"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.ends_with("1 workflow\n"), "{}", r.stdout);

    let r = run(cmd(d.path()).args(["list", "flows", "--json"]));
    let v = r.json();
    assert_eq!(v["workflows"][0]["id"], "hook");
    assert_eq!(
        v["workflows"][0]["inputs"][0],
        json!({"name": "q", "type": "string", "required": true, "default": null, "description": null})
    );

    // A file that does not load is named, the others are still listed.
    write(
        &d.path().join("flows"),
        "broken.md",
        include_str!("fixtures/cli/broken.md"),
    );
    let r = run(cmd(d.path()).args(["list", "flows"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stdout.contains("flows/hook.md"), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("flows/broken.md:3:1: error: invalid YAML"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("1 file did not load"), "{}", r.stderr);
}

#[test]
fn completions_are_scripts_the_shell_reads() {
    let d = tempdir();
    let r = run(cmd(d.path()).args(["completions", "bash"]));
    assert_eq!(r.code, 0, "{r:?}");
    let script = write(d.path(), "marktoflow.bash", &r.stdout);
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(checked.success(), "bash cannot read the completions");
    // Every command is completed.
    for c in ["run", "validate", "serve", "mcp", "list", "history"] {
        assert!(r.stdout.contains(c), "{c} is not completed");
    }
    for shell in ["zsh", "fish"] {
        let r = run(cmd(d.path()).args(["completions", shell]));
        assert_eq!(r.code, 0, "{r:?}");
        assert!(r.stdout.contains("marktoflow"));
    }
    let r = run(cmd(d.path()).args(["completions", "tcsh"]));
    assert_eq!(r.code, 2, "{r:?}");
}

#[test]
fn init_and_new_give_workflows_that_validate_and_run() {
    let d = tempdir();
    let proj = d.path().join("proj");
    let r = run(cmd(d.path()).args(["init", "proj"]));
    assert_eq!(r.code, 0, "{r:?}");
    for f in [
        "workflows/hello.md",
        ".env.example",
        ".marktoflow/workflow.schema.json",
        ".vscode/tasks.json",
    ] {
        assert!(proj.join(f).is_file(), "{f}: {}", r.stderr);
    }
    let ignore = fs::read_to_string(proj.join(".gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == ".env"), "{ignore}");
    // The schema is the one `marktoflow schema` prints.
    let schema = run(cmd(d.path()).arg("schema")).stdout;
    assert_eq!(
        fs::read_to_string(proj.join(".marktoflow/workflow.schema.json")).unwrap(),
        schema
    );
    // The VS Code task's problem matcher reads our diagnostics.
    let tasks: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(proj.join(".vscode/tasks.json")).unwrap())
            .unwrap();
    let re = tasks["tasks"][0]["problemMatcher"]["pattern"]["regexp"]
        .as_str()
        .unwrap();
    assert!(
        re.starts_with("^(.+?):(\\d+):(\\d+): (error|warning)"),
        "{re}"
    );
    // The sample runs, and its runs are the project's (`.marktoflow/runs.db`).
    let r = run(cmd(&proj).args([
        "run",
        "workflows/hello.md",
        "--input",
        "name=Ada",
        "--json",
        "-q",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"],
        json!({"greeting": "Hello, Ada!", "letters": 3})
    );
    let h = run(cmd(&proj).args(["history", "--json"]));
    assert_eq!(h.json()["runs"].as_array().unwrap().len(), 1, "{h:?}");
    // Again: nothing is overwritten.
    fs::write(proj.join("workflows/hello.md"), "mine").unwrap();
    let r = run(cmd(d.path()).args(["init", "proj"]));
    assert_eq!(r.code, 0);
    assert!(
        r.stderr.contains("kept  workflows/hello.md"),
        "{}",
        r.stderr
    );
    assert_eq!(
        fs::read_to_string(proj.join("workflows/hello.md")).unwrap(),
        "mine"
    );
    let again = fs::read_to_string(proj.join(".gitignore")).unwrap();
    assert_eq!(again, ignore, "no line is added twice");

    // Every template gives a workflow that validates without warnings.
    for t in ["basic", "webhook", "schedule", "rag", "agent"] {
        let name = format!("workflows/my {t}");
        let r = run(cmd(&proj).args(["new", &name, "--template", t]));
        assert_eq!(r.code, 0, "{t}: {r:?}");
        let file = format!("workflows/my-{t}.md");
        assert_eq!(r.stdout.trim(), file);
        let text = fs::read_to_string(proj.join(&file)).unwrap();
        assert!(text.contains(&format!("id: my-{t}")), "{text}");
        let v = run(cmd(&proj).args(["validate", "--strict", &file]));
        assert_eq!(v.code, 0, "{t}: {v:?}");
        // With no `notes/` here, the command it suggests names the folder.
        if t == "schedule" {
            let shown = format!("marktoflow run {file} --input folder=DIR");
            assert!(r.stderr.contains(&shown), "{}", r.stderr);
        }
    }
    // The ones that need no model run as they are.
    let r = run(cmd(&proj).args([
        "run",
        "workflows/my-webhook.md",
        "--input",
        "message=ship it today",
        "--json",
        "-q",
    ]));
    assert_eq!(r.json()["outputs"]["words"], 3, "{r:?}");
    fs::create_dir_all(proj.join("notes")).unwrap();
    fs::write(proj.join("notes/a.md"), "# A\n").unwrap();
    let r = run(cmd(&proj).args(["run", "workflows/my-schedule.md", "--json", "-q"]));
    assert_eq!(r.json()["outputs"]["changed"], json!(["a.md"]), "{r:?}");
    // The agent template against a provider: its JSON step's reply is data,
    // so the declared `actions` output is the list (it was null).
    let llm = crate::fake_llm::FakeLlm::start(std::sync::Arc::new(|req| {
        if req.prompt().starts_with("List the action items") {
            (
                200,
                "{\"actions\": [\"book the room\", \"send the agenda\"]}".into(),
            )
        } else {
            (200, "The team will meet on Friday.".into())
        }
    }));
    let r = run(cmd(&proj)
        .args(["run", "workflows/my-agent.md", "--json", "-q", "--input"])
        .arg("text=Book the room and send the agenda; we meet on Friday.")
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "k"));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"],
        json!({"summary": "The team will meet on Friday.",
               "actions": ["book the room", "send the agenda"]}),
        "{r:?}"
    );
    // The basic template as it is, and the rag template on a note.
    let r = run(cmd(&proj).args([
        "run",
        "workflows/my-basic.md",
        "--input",
        "name=ada",
        "--json",
        "-q",
    ]));
    assert_eq!(
        r.json()["outputs"],
        json!({"greeting": "Hello, Ada!", "letters": 3}),
        "{r:?}"
    );
    fs::write(
        proj.join("notes/apollo.md"),
        "# Apollo\n\nThe Apollo deadline is 2026-12-15.\n",
    )
    .unwrap();
    let llm = crate::fake_llm::FakeLlm::start(std::sync::Arc::new(|_| {
        (200, "The deadline is 2026-12-15 [1].".into())
    }));
    let r = run(cmd(&proj)
        .args(["run", "workflows/my-rag.md", "--json", "-q", "--input"])
        .arg("question=When is the Apollo deadline?")
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "k"));
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"];
    assert_eq!(out["answer"], "The deadline is 2026-12-15 [1].", "{out}");
    assert!(out["sources"].to_string().contains("apollo.md"), "{out}");
    assert!(
        llm.requests()[0].prompt().contains("2026-12-15"),
        "the passage reached the model"
    );
    // An existing file is kept; an unknown template is refused.
    let r = run(cmd(&proj).args(["new", "workflows/my-basic"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("exists; nothing was written"),
        "{}",
        r.stderr
    );
    let r = run(cmd(&proj).args(["new", "x", "--template", "nope"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("webhook"), "{}", r.stderr);
}

#[test]
fn run_event_runs_a_webhook_workflow_on_a_saved_body() {
    let repo = crate::support::repo();
    let r = run(cmd(&repo).args([
        "run",
        "examples/webhook.md",
        "--event",
        "examples/events/release.json",
        "--json",
        "-q",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    // `inputMapping` took the version and author from the body.
    assert_eq!(
        r.json()["outputs"],
        json!({"announcement": "priya released v2.4.0", "via": "webhook", "agent": "none"})
    );
    // `--input` wins over the body.
    let r = run(cmd(&repo).args([
        "run",
        "examples/webhook.md",
        "--event",
        "examples/events/release.json",
        "--input",
        "version=v9",
        "--json",
        "-q",
    ]));
    assert_eq!(r.json()["outputs"]["announcement"], "priya released v9");
    // A workflow without a webhook trigger, and a body that is not JSON.
    let r = run(cmd(&repo).args([
        "run",
        "examples/hello.md",
        "--event",
        "examples/events/release.json",
    ]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("has no webhook trigger"), "{}", r.stderr);
    let d = tempdir();
    let bad = write(d.path(), "bad.json", "{\n  \"a\": 1,\n}\n");
    let r = run(cmd(&repo)
        .args(["run", "examples/webhook.md", "--event"])
        .arg(&bad));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("bad.json:3:1: the event is not valid JSON"),
        "{}",
        r.stderr
    );
}

#[test]
fn run_event_takes_the_headers_a_sender_would_send() {
    let d = tempdir();
    write(
        d.path(),
        "issues.md",
        r#"---
workflow: {id: issues}
triggers:
  - type: webhook
    path: /hooks/issues
    events: [issues.opened]
    inputMapping: {title: payload.issue.title}
inputs:
  title: {type: string, default: none}
outputs:
  said: {type: string}
---
```yaml
action: core.set
inputs:
  said: '{{ trigger.event }}: {{ inputs.title }} ({{ trigger.headers["x-delivery"] }})'
```
"#,
    );
    write(
        d.path(),
        "issue.json",
        r#"{"action": "opened", "issue": {"title": "Crash on save"}}"#,
    );
    let go = |headers: &[&str]| {
        let mut c = cmd(d.path());
        c.args(["run", "issues.md", "--event", "issue.json", "--json", "-q"]);
        for h in headers {
            c.args(["--header", h]);
        }
        run(&mut c)
    };
    // A GitHub payload names its event in a header only: without it the
    // trigger would ignore the request, and the error says how to pass it.
    let r = go(&[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("(its event: none)")
            && r.stderr.contains("--header X-GitHub-Event=issues"),
        "{}",
        r.stderr
    );
    // With it (either spelling), the run sees the event and the headers.
    let r = go(&["X-GitHub-Event=issues", "X-Delivery: 42"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["outputs"]["said"],
        "issues.opened: Crash on save (42)"
    );
    // Another event is refused; a header that cannot be one is an error.
    let r = go(&["X-GitHub-Event=push"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("(its event: push.opened)"),
        "{}",
        r.stderr
    );
    let r = go(&["no separator"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("expected NAME=VALUE"), "{}", r.stderr);
    let r = go(&["bad name=1"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("is not a header name"), "{}", r.stderr);
    // `--header` belongs to `--event`.
    let r = run(cmd(d.path()).args(["run", "issues.md", "--header", "A=b"]));
    assert_eq!(r.code, 2, "{r:?}");
}

#[test]
fn doctor_asks_each_provider_and_checks_store_and_routes() {
    use crate::fake_llm::FakeLlm;
    let llm = FakeLlm::start(std::sync::Arc::new(|_| (200, "OK".to_string())));
    let repo = crate::support::repo();
    let d = tempdir();
    let r = run(cmd(&repo)
        .args(["doctor", "examples/webhook.md", "--json"])
        .env("ANTHROPIC_BASE_URL", &llm.base)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("MARKTOFLOW_STORE", d.path().join("runs.db")));
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let says = |section: &str| -> Vec<String> {
        j["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["section"] == section)
            .map(|c| format!("{} {}", c["ok"], c["message"].as_str().unwrap()))
            .collect()
    };
    assert!(
        says("providers")[0].starts_with("true anthropic"),
        "{:?}",
        says("providers")
    );
    assert!(says("providers")[0].contains("answered `OK`"));
    assert_eq!(llm.requests().len(), 1, "one tiny request");
    assert!(
        says("routes")[0].contains("POST /hooks/release → examples/webhook.md"),
        "{:?}",
        says("routes")
    );
    assert!(!says("store").is_empty());

    // A provider that fails is a problem: exit 1, saying why.
    let bad = FakeLlm::start(std::sync::Arc::new(|_| {
        (401, "invalid x-api-key".to_string())
    }));
    let r = run(cmd(&repo)
        .arg("doctor")
        .env("ANTHROPIC_BASE_URL", &bad.base)
        .env("ANTHROPIC_API_KEY", "wrong")
        .env("MARKTOFLOW_STORE", d.path().join("runs.db")));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("FAIL anthropic"), "{}", r.stdout);
    assert!(r.stdout.contains("1 problem found"), "{}", r.stdout);
}

#[test]
fn workflow_exit_with_an_error_status_ends_the_run_rejected() {
    let d = tempdir();
    std::fs::write(
        d.path().join("text.md"),
        include_str!("fixtures/server/text.md"),
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["run", "text.md", "--input", "code=403", "--json", "-q"]));
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(
        (&j["status"], &j["error"]["message"], &j["error"]["code"]),
        (
            &json!("rejected"),
            &json!("the workflow answered 403"),
            &json!("403")
        ),
        "{j}"
    );
    let r = run(cmd(d.path()).args(["run", "text.md", "--input", "code=403"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("✖ rejected"), "{}", r.stderr);
    let r = run(cmd(d.path()).args(["run", "text.md", "--json", "-q"]));
    assert_eq!((r.code, &r.json()["status"]), (0, &json!("completed")));
}

#[test]
fn workflow_exit_ends_the_run_completed_from_inside_loops_and_tries() {
    let d = tempdir();
    let f = write(
        d.path(),
        "exit.md",
        r#"---
workflow: {id: exiting}
inputs:
  stop_at: {type: integer, default: 2}
---

## Before
```yaml
action: core.set
inputs: {seen: before}
output_variable: before
```

## Loop
```yaml
type: for_each
items: [1, 2, 3]
item_variable: n
steps:
  - type: try
    id: guard
    try:
      - type: if
        condition: '{{ n == inputs.stop_at }}'
        then:
          - action: workflow.exit
            id: stop
            inputs:
              message: 'stopping at {{ n }}'
              outputs: {stopped_at: '{{ n }}', before: '{{ before.seen }}'}
    catch:
      - action: core.set
        inputs: {caught: true}
        output_variable: caught
```

## After
```yaml
action: file.write
inputs: {path: after.txt, content: should not exist}
```
"#,
    );
    let r = run(cmd(d.path())
        .args(["run"])
        .arg(&f)
        .args(["--json", "-q", "--allow-write", "."]));
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["status"], "completed");
    assert_eq!(j["outputs"], json!({"stopped_at": 2, "before": "before"}));
    assert!(
        !d.path().join("after.txt").exists(),
        "no step after the exit runs"
    );
    let ids: Vec<&str> = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(
        !ids.contains(&"after") && !ids.contains(&"caught"),
        "{ids:?}"
    );
    // The first iteration's `if` was skipped; nothing failed.
    assert!(
        j["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] != "failed"),
        "{j}"
    );
    let last = j["steps"].as_array().unwrap().last().unwrap();
    assert_eq!(
        (last["id"].as_str(), last["status"].as_str()),
        (Some("loop"), Some("completed"))
    );
    // Past the last item, the run goes on as usual.
    let r = run(cmd(d.path()).args(["run"]).arg(&f).args([
        "--input",
        "stop_at=9",
        "--json",
        "-q",
        "--allow-write",
        ".",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(d.path().join("after.txt").exists());
}

/// Runs `marktoflow ARGS` in a pseudo-terminal (`tests/debug/drive.py`),
/// typing each line once its expected text appears.
fn in_terminal(cwd: &Path, args: &[&str], steps: &[(&str, &str)]) -> (i32, String) {
    use std::io::Write;
    let mut c = std::process::Command::new("python3");
    c.arg(crate::support::repo().join("tests/debug/drive.py"))
        .arg(crate::support::bin())
        .args(args)
        .current_dir(cwd)
        .env("MARKTOFLOW_HOME", crate::support::state_home(cwd))
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = c.spawn().expect("python3");
    let steps: Vec<[&str; 2]> = steps.iter().map(|(a, b)| [*a, *b]).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&steps).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).replace('\r', ""),
    )
}

#[test]
fn debug_steps_through_a_run_in_a_terminal() {
    let d = tempdir();
    let f = write(
        d.path(),
        "dbg.md",
        r#"---
workflow: {id: dbg}
inputs:
  items: {type: array, default: [a, b]}
---

## Count
```yaml
action: core.set
inputs: {n: '{{ inputs.items | length }}'}
output_variable: count
```

## Each
```yaml
type: for_each
items: '{{ inputs.items }}'
steps:
  - id: shout
    action: core.template
    inputs: {template: '{{ item | upper }}'}
```

## Report
```yaml
action: core.template
inputs: {template: 'n={{ count.n }}'}
output_variable: report
```
"#,
    );
    let file = f.to_str().unwrap();
    // Breakpoint on `report`; at the pause, print, change a variable, see
    // the rendered inputs change with it, and let the run finish.
    let (code, out) = in_terminal(
        d.path(),
        &["debug", file, "--break", "shout", "--json", "-q"],
        &[
            ("paused before `shout`", "inputs"),
            ("(debug) ", "p item"),
            ("(debug) ", "d shout"),
            ("(debug) ", "b report"),
            ("(debug) ", "c"),
            ("paused before `report`", "p count.n"),
            ("(debug) ", "set count = {\"n\": 41}"),
            ("(debug) ", "inputs"),
            ("(debug) ", "c"),
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("template: '{{ item | upper }}'") || out.contains("template: A"),
        "{out}"
    );
    // Typed lines and answers may interleave on the terminal: look at lines.
    assert!(
        out.lines().any(|l| l == "a" || l == "(debug) a"),
        "`p item` prints the loop's item: {out}"
    );
    assert!(out.contains("count = {\"n\":41}"), "{out}");
    assert!(
        out.contains("template: n=41"),
        "the inputs follow the change: {out}"
    );
    assert!(
        out.contains("\"report\": \"n=41\""),
        "the run used it: {out}"
    );
    assert_eq!(
        out.matches("paused before `shout`").count(),
        1,
        "deleted after the first: {out}"
    );
    // `next` steps over the loop's inside; `quit` stops the run, cancelled.
    let (code, out) = in_terminal(
        d.path(),
        &["debug", file],
        &[
            ("paused before `count`", "n"),
            ("paused before `each`", "next"),
            ("paused before `report`", "q"),
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains("paused before `shout`"), "{out}");
    assert!(out.contains("cancelled"), "{out}");
    // A breakpoint on no step is refused before anything runs.
    let r = run(cmd(d.path()).args(["debug", file, "--break", "nope"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no step `nope`"), "{}", r.stderr);
}

/// `.env` files are read from the workflow's folder up to the project root
/// (the folder holding `.marktoflow/`), whatever the current folder, the
/// nearest winning; a `.env` above the project is not the workflow's.
#[test]
fn dotenv_files_are_read_up_to_the_project_root_from_any_folder() {
    let d = crate::support::tempdir();
    let project = d.path().join("proj");
    let sub = project.join("flows/daily");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(project.join(".marktoflow")).unwrap();
    std::fs::write(d.path().join(".env"), "MTF_OUTSIDE=leaked\n").unwrap();
    std::fs::write(project.join(".env"), "MTF_ROOT=root\nMTF_BOTH=root\n").unwrap();
    std::fs::write(sub.join(".env"), "MTF_BOTH=near\n").unwrap();
    std::fs::write(sub.join("wf.md"), include_str!("fixtures/cli/envs.md")).unwrap();
    let elsewhere = crate::support::tempdir();
    let r = crate::support::run(
        crate::support::cmd(elsewhere.path())
            .arg("run")
            .arg(sub.join("wf.md"))
            .args(["--json", "--quiet", "--no-store"]),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["outputs"],
        serde_json::json!({"seen": {"root": "root", "both": "near", "outside": "unset"}})
    );
}

/// `run --json`, `history --json` and `show --json` name a run's id
/// `run_id` and a step's `id`, as the API does.
#[test]
fn run_history_and_show_speak_one_json_vocabulary() {
    let d = crate::support::tempdir();
    std::fs::write(
        d.path().join("wf.md"),
        include_str!("fixtures/cli/vocab.md"),
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["run", "wf.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ran = r.json();
    let run_id = ran["run_id"].as_str().unwrap().to_string();
    assert_eq!(ran["steps"][0]["id"], "first");
    let h = run(cmd(d.path()).args(["history", "--json"])).json();
    assert_eq!(h["runs"][0]["run_id"], run_id.as_str(), "{h}");
    let s = run(cmd(d.path()).args(["show", &run_id, "--json"])).json();
    assert_eq!(s["run_id"], run_id.as_str(), "{s}");
    assert_eq!(s["steps"][0]["id"], "first", "{s}");
    // The former names, printed for one more release.
    assert_eq!(s["id"], run_id.as_str());
    assert_eq!(s["steps"][0]["step_id"], "first");
}

#[test]
fn a_loops_steps_are_numbered_by_iteration_in_progress_and_history() {
    let d = tempdir();
    write(
        d.path(),
        "loop.md",
        r#"---
workflow: {id: loop}
inputs:
  names: {type: array, default: [ada, bob]}
---
## Greet them
```yaml
type: for_each
items: '{{ inputs.names }}'
item_variable: name
steps:
  - id: greet
    action: core.log
    inputs: {message: 'hi {{ name }}'}
```
"#,
    );
    let r = run(cmd(d.path()).args(["run", "loop.md"]));
    assert_eq!(r.code, 0, "{r:?}");
    // The progress tells the iterations apart: each child says which it is.
    let first = r.stderr.find("greet [1/2]").expect(&r.stderr);
    let second = r.stderr.find("greet [2/2]").expect(&r.stderr);
    assert!(first < second, "{}", r.stderr);
    let h = run(cmd(d.path()).args(["history", "--json"]));
    let id = h.json()["runs"][0]["id"].as_str().unwrap().to_string();
    let s = run(cmd(d.path()).args(["show", &id]));
    assert!(
        s.stdout.contains("completed greet [1/2] (")
            && s.stdout.contains("completed greet [2/2] ("),
        "{}",
        s.stdout
    );
}
