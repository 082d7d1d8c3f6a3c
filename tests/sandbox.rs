//! Scripts cannot read or write outside their roots, and runaway scripts are
//! stopped at their limit while the run goes on.

use crate::support::{output, run, tempdir, Run};
use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn script_wf(code: &str, extra: &str) -> String {
    let indented: String = code.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "---\nworkflow: {{id: sbx}}\n---\n\n## Try it\n\n```yaml\naction: script.execute\n{extra}inputs:\n  code: |\n{indented}output_variable: result\n```\n\n## After\n\n```yaml\naction: core.set\ninputs: {{ran: true}}\noutput_variable: after\n```\n"
    )
}

/// Runs the binary, killing it if it outlives `limit` (then the test fails).
fn run_bounded(cwd: &Path, args: &[&str], limit: Duration) -> Run {
    let mut c = crate::support::cmd(cwd);
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return output(child.wait_with_output().unwrap());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("marktoflow {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_script(dir: &Path, code: &str, args: &[&str]) -> Run {
    fs::write(dir.join("wf.md"), script_wf(code, "")).unwrap();
    let mut all = vec!["run", "wf.md", "--json", "--quiet"];
    all.extend_from_slice(args);
    run_bounded(dir, &all, Duration::from_secs(60))
}

#[test]
fn reading_outside_the_roots_is_refused() {
    let d = tempdir();
    let root = d.path().join("root");
    fs::create_dir_all(&root).unwrap();
    fs::write(d.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(d.path().join("secret.txt"), root.join("link.txt")).unwrap();
    fs::write(root.join("ok.txt"), "fine").unwrap();

    let r = run_script(
        &root,
        "return require('fs').readFileSync('ok.txt', 'utf8');",
        &[],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["result"], "fine");

    for path in [
        "/etc/passwd",
        "../secret.txt",
        "link.txt",
        "./sub/../../secret.txt",
    ] {
        let code = format!("return require('fs').readFileSync('{path}', 'utf8');");
        let r = run_script(&root, &code, &[]);
        assert_eq!(r.code, 1, "{path}: {r:?}");
        let err = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(err.contains("access denied"), "{path}: {err}");
        assert!(
            !r.stdout.contains("top secret") && !r.stdout.contains("root:x:0"),
            "{path} leaked"
        );
    }
    // A caught denial is an ordinary JS error with a code.
    let r = run_script(
        &root,
        "try { require('fs').readFileSync('/etc/passwd'); } catch (e) { return [e.code, require('fs').existsSync('/etc/passwd')]; }",
        &[],
    );
    assert_eq!(
        r.json()["outputs"]["result"],
        serde_json::json!(["EACCES", false]),
        "{r:?}"
    );
}

#[test]
fn allow_read_and_allow_write_widen_the_roots() {
    let d = tempdir();
    let root = d.path().join("root");
    let data = d.path().join("data");
    let out = d.path().join("out");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&data).unwrap();
    fs::create_dir_all(&out).unwrap();
    fs::write(data.join("n.md"), "# Note").unwrap();
    let code = format!(
        "const fs = require('fs');\nconst t = fs.readFileSync('{}/n.md', 'utf8');\nfs.writeFileSync('{}/copy.md', t);\nreturn t;",
        data.display(),
        out.display()
    );
    let r = run_script(&root, &code, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let r = run_script(&root, &code, &["--allow-read", data.to_str().unwrap()]);
    assert_eq!(r.code, 1, "write must still be refused: {r:?}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allow-write"),
        "{r:?}"
    );
    let r = run_script(
        &root,
        &code,
        &[
            "--allow-read",
            data.to_str().unwrap(),
            "--allow-write",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(fs::read_to_string(out.join("copy.md")).unwrap(), "# Note");
    // Writing into the working directory needs --allow-write too.
    let r = run_script(
        &root,
        "require('fs').writeFileSync('x.txt', 'x'); return 1;",
        &[],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!root.join("x.txt").exists());
}

#[test]
fn a_path_given_as_an_input_is_readable() {
    let d = tempdir();
    let root = d.path().join("root");
    let kb = d.path().join("kb");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&kb).unwrap();
    fs::write(kb.join("a.md"), "hello").unwrap();
    let wf = include_str!("fixtures/sandbox/kb.md");
    fs::write(root.join("wf.md"), wf).unwrap();
    let r = run(crate::support::cmd(&root)
        .args(["run", "wf.md", "--json", "--quiet", "--input"])
        .arg(format!("knowledge_base={}", kb.display())));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["files"], serde_json::json!(["a.md"]));
}

#[test]
fn an_endless_loop_is_stopped_at_its_timeout_and_the_run_goes_on() {
    let d = tempdir();
    let wf = script_wf("while (true) {}", "timeout: 1s\non_error: continue\n");
    fs::write(d.path().join("wf.md"), wf).unwrap();
    let r = run_bounded(
        d.path(),
        &["run", "wf.md", "--json", "--quiet"],
        Duration::from_secs(60),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["steps"][0]["status"], "failed");
    assert!(
        j["steps"][0]["error"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{j}"
    );
    assert_eq!(j["outputs"]["after"], serde_json::json!({"ran": true}));
}

#[test]
fn deep_recursion_and_huge_allocations_fail_cleanly() {
    let d = tempdir();
    let r = run_script(
        d.path(),
        "function f(n) { return f(n + 1) + 1; }\nreturn f(0);",
        &[],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(msg.contains("recursion") || msg.contains("stack"), "{msg}");

    let r = run_script(d.path(), "let s = 'x'; while (true) { s = s + s; }", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let msg = r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(
        msg.contains("memory")
            || msg.contains("too long")
            || msg.contains("invalid string length")
            || msg.contains("range"),
        "{msg}"
    );
}

#[test]
fn scripts_cannot_reach_the_host_process() {
    let d = tempdir();
    let r = run_script(
        d.path(),
        "const out = [];\nfor (const name of ['child_process', 'http', 'net']) { try { require(name); out.push('loaded ' + name); } catch (e) { out.push(String(e.message)); } }\nout.push(typeof process, typeof Buffer);\ntry { out.push(String(context.constructor.constructor('return typeof process')())); } catch (e) { out.push('blocked'); }\nreturn out;",
        &[],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out = r.json()["outputs"]["result"].clone();
    let items: Vec<String> = out
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap_or("").to_string())
        .collect();
    assert!(items.iter().all(|s| !s.starts_with("loaded")), "{items:?}");
    assert_eq!(&items[3..5], ["undefined", "undefined"], "{items:?}");
    assert!(
        items[5] == "undefined" || items[5] == "blocked",
        "{items:?}"
    );
}

/// One branch keeps swapping `ws/d` for a symlink to a folder outside the
/// roots while the other reads and writes through `ws/d`: the open itself is
/// confined, so no read sees the outside file and nothing lands outside.
#[test]
fn swapping_a_folder_for_a_symlink_mid_run_never_leads_out() {
    let d = tempdir();
    let ws = d.path().join("ws");
    fs::create_dir_all(ws.join("d")).unwrap();
    fs::create_dir_all(d.path().join("outside")).unwrap();
    fs::write(ws.join("d/secret.txt"), "inside").unwrap();
    fs::write(d.path().join("outside/secret.txt"), "OUTSIDE").unwrap();
    std::os::unix::fs::symlink(d.path().join("outside"), ws.join("evil")).unwrap();
    let swapper = "const fs = require('fs');\nfor (let i = 0; i < 3000; i++) {\n  fs.renameSync('d', 'real');\n  fs.renameSync('evil', 'd');\n  fs.renameSync('d', 'evil');\n  fs.renameSync('real', 'd');\n}\nreturn 'swapped';";
    let reader = "const fs = require('fs');\nconst seen = {};\nfor (let i = 0; i < 3000; i++) {\n  let got = 'error';\n  try { got = fs.readFileSync('d/secret.txt', 'utf8'); } catch (e) {}\n  seen[got] = (seen[got] || 0) + 1;\n  try { fs.writeFileSync('d/planted.txt', 'x'); } catch (e) {}\n  try { fs.appendFileSync('d/planted2.txt', 'x'); } catch (e) {}\n}\nreturn seen;";
    let reads = "{% for i in range(300) %}x{% endfor %}";
    let ind = |code: &str| -> String {
        code.lines()
            .map(|l| format!("              {l}\n"))
            .collect()
    };
    let wf = format!(
        "---\nworkflow: {{id: race}}\n---\n\n```yaml\ntype: parallel\nbranches:\n  - id: swap\n    steps:\n      - action: script.execute\n        inputs:\n          code: |\n{}        output_variable: swapped\n  - id: read\n    steps:\n      - action: script.execute\n        inputs:\n          code: |\n{}        output_variable: seen\n  - id: files\n    steps:\n      - type: for_each\n        items: \"{{{{ range(200) | list }}}}\"\n        steps:\n          - action: file.read\n            inputs: {{path: d/secret.txt}}\n            on_error: continue\n            output_variable: last\n          - action: file.write\n            inputs: {{path: d/planted3.txt, content: \"{reads}\"}}\n            on_error: continue\n```\n",
        ind(swapper),
        ind(reader)
    );
    fs::write(ws.join("race.md"), wf).unwrap();
    // `run` reads the output as it comes (the JSON of 400 steps is larger
    // than a pipe holds).
    let r = run(crate::support::cmd(&ws).args([
        "run",
        "race.md",
        "--json",
        "--quiet",
        "--no-store",
        "--allow-write",
        ".",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = r.json();
    assert_eq!(out["outputs"]["swap"]["swapped"], "swapped", "{out}");
    let seen = out["outputs"]["read"]["seen"].as_object().unwrap();
    assert!(seen.get("OUTSIDE").is_none(), "a read leaked out: {seen:?}");
    assert!(seen.get("inside").is_some(), "the reads ran: {seen:?}");
    for name in ["planted.txt", "planted2.txt", "planted3.txt"] {
        assert!(
            !d.path().join("outside").join(name).exists(),
            "{name} was written outside"
        );
    }
    // The run's file.read steps saw only the inside file (or failed).
    let steps = out["steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .all(|s| !s["output"].to_string().contains("OUTSIDE")),
        "a file.read leaked out"
    );
}

/// The issue's attack, through a server: one webhook workflow reads the file
/// its input names, another writes one (`--allow-write .`). Neither reaches
/// `.env`, the project's state folder, the run store or its journals.
#[test]
fn a_served_workflow_never_reaches_env_files_the_state_folder_or_the_run_store() {
    use crate::support::{http, serve};
    use serde_json::json;
    let d = tempdir();
    let dir = d.path();
    fs::create_dir_all(dir.join(".marktoflow")).unwrap();
    fs::write(dir.join(".env"), "SECRET_TOKEN=s3cr3t\n").unwrap();
    fs::write(dir.join("notes.md"), "fine").unwrap();
    std::os::unix::fs::symlink(dir.join(".env"), dir.join("innocent.txt")).unwrap();
    fs::write(
        dir.join("read.md"),
        include_str!("fixtures/sandbox/reader.md"),
    )
    .unwrap();
    fs::write(
        dir.join("write.md"),
        include_str!("fixtures/sandbox/writer.md"),
    )
    .unwrap();
    fs::write(
        dir.join("script.md"),
        include_str!("fixtures/sandbox/scripted.md"),
    )
    .unwrap();
    let s = serve(
        dir,
        &["read.md", "write.md", "script.md", "--allow-write", "."],
        &[("MARKTOFLOW_STORE", ".marktoflow/runs.db")],
    );
    let post = |path: &str, body: serde_json::Value| {
        http(
            &s.addr,
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
    };
    // A first run, so the store and its files exist.
    let ok = post("/read", json!({"path": "notes.md"}));
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["outputs"]["text"]["content"], "fine");
    assert!(dir.join(".marktoflow/runs.db").exists());
    for path in [
        ".env",
        "innocent.txt",
        ".marktoflow/runs.db",
        ".marktoflow/runs.db-wal",
        "sub/../.marktoflow/runs.db",
    ] {
        for route in ["/read", "/script"] {
            let r = post(route, json!({"path": path}));
            assert_eq!(r.status, 500, "{route} {path}: {}", r.body);
            assert!(!r.body.contains("s3cr3t"), "{route} {path}: {}", r.body);
            let message = r.json()["error"]["message"]
                .as_str()
                .unwrap_or("")
                .to_string();
            assert!(
                message.contains("no workflow reads or writes it"),
                "{route} {path}: {message}"
            );
        }
    }
    let forged = "{\"run\": \"forged\"}";
    for path in [
        ".env",
        ".marktoflow/runs.db.pending/forged.jsonl",
        ".marktoflow/memory.db",
    ] {
        let r = post("/write", json!({"path": path, "content": forged}));
        assert_eq!(r.status, 500, "{path}: {}", r.body);
    }
    assert_eq!(
        fs::read_to_string(dir.join(".env")).unwrap(),
        "SECRET_TOKEN=s3cr3t\n"
    );
    assert!(!dir
        .join(".marktoflow/runs.db.pending/forged.jsonl")
        .exists());
    // An ordinary file is written as before.
    let r = post("/write", json!({"path": "out.txt", "content": "ok"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(fs::read_to_string(dir.join("out.txt")).unwrap(), "ok");
}

/// `writeFileSync` and `copyFileSync` replace a file by a rename, never by
/// truncating it in place: the old file stays whole for whoever holds it
/// open or mapped (a served index), and its permissions are kept.
#[test]
fn script_writes_replace_files_whole_never_in_place() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let d = tempdir();
    let dir = d.path();
    fs::write(dir.join("data.txt"), "old contents").unwrap();
    fs::write(dir.join("copied.txt"), "old copy").unwrap();
    fs::set_permissions(dir.join("data.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    let held = fs::File::open(dir.join("data.txt")).unwrap();
    let before = (
        fs::metadata(dir.join("data.txt")).unwrap().ino(),
        fs::metadata(dir.join("copied.txt")).unwrap().ino(),
    );
    let r = run_script(
        dir,
        "const fs = require('fs');\nfs.writeFileSync('data.txt', 'new');\nfs.copyFileSync('data.txt', 'copied.txt');\nfs.appendFileSync('log.txt', 'a');\nfs.appendFileSync('log.txt', 'b');\nreturn fs.readFileSync('copied.txt', 'utf8');",
        &["--allow-write", "."],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["result"], "new");
    let after = fs::metadata(dir.join("data.txt")).unwrap();
    assert_ne!(after.ino(), before.0, "replaced by a rename");
    assert_ne!(
        fs::metadata(dir.join("copied.txt")).unwrap().ino(),
        before.1
    );
    assert_eq!(after.permissions().mode() & 0o777, 0o640);
    // The file held open still reads whole.
    let mut old = String::new();
    std::io::Read::read_to_string(&mut &held, &mut old).unwrap();
    assert_eq!(old, "old contents");
    assert_eq!(fs::read_to_string(dir.join("log.txt")).unwrap(), "ab");
    // No temporary file is left behind.
    let names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}
