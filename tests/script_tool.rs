//! External script tools (`sdk: script` with `options.path`), run by the
//! real binary: what their process may see, and that timeouts, cancellation
//! and the sandbox bound them.

use crate::support::{cmd, run, tempdir};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn tool(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

fn workflow(dir: &Path, path: &str, step: &str) {
    fs::write(
        dir.join("wf.md"),
        format!(
            "---\nworkflow: {{id: t}}\ntools:\n  t:\n    sdk: script\n    options: {{path: '{path}'}}\n---\n\n```yaml\nid: call\naction: t.run\n{step}output_variable: out\n```\n"
        ),
    )
    .unwrap();
}

#[test]
fn the_tool_never_sees_the_runs_environment() {
    let d = tempdir();
    tool(
        d.path(),
        "env.sh",
        r#"printf '{"key": "%s", "secret": "%s", "path": "%s"}' "${OPENAI_API_KEY:-}" "${MY_SECRET:-}" "$PATH""#,
    );
    workflow(d.path(), "./env.sh", "");
    let r = run(cmd(d.path())
        .args(["run", "wf.md", "--json", "--quiet"])
        .env("OPENAI_API_KEY", "sk-should-not-leak")
        .env("MY_SECRET", "hunter2"));
    assert_eq!(r.code, 0, "{r:?}");
    let out = &r.json()["outputs"]["out"];
    assert_eq!(out["key"], "", "{out}");
    assert_eq!(out["secret"], "", "{out}");
    assert_eq!(out["path"], "/usr/local/bin:/usr/bin:/bin", "{out}");
}

#[test]
fn a_step_timeout_kills_the_tool_and_what_it_started() {
    let d = tempdir();
    let marker = d.path().join("survived");
    // The tool starts a child that would write the marker after 2 s.
    tool(
        d.path(),
        "slow.sh",
        &format!(
            "(sleep 2; touch '{}') &\necho $! > '{}'\nsleep 30",
            marker.display(),
            d.path().join("child.pid").display()
        ),
    );
    workflow(d.path(), "./slow.sh", "timeout: 300ms\n");
    let started = std::time::Instant::now();
    let r = run(cmd(d.path()).args(["run", "wf.md", "--json", "--quiet"]));
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{r:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // The child is gone (not a zombie), so its timer can never fire.
    let pid = std::fs::read_to_string(d.path().join("child.pid")).unwrap();
    let gone = || {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).map_or(true, |st| {
            st.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    };
    let waited = std::time::Instant::now();
    while !gone() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(10),
            "the tool's child {pid} outlived the timeout"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!marker.exists(), "the tool's child outlived the timeout");
}

#[test]
fn the_tool_file_must_lie_under_a_read_root_and_be_executable() {
    let outside = tempdir();
    tool(outside.path(), "evil.sh", "echo '{\"ran\": true}'");
    let d = tempdir();
    let target = outside.path().join("evil.sh");
    workflow(d.path(), &target.to_string_lossy(), "");
    let r = run(cmd(d.path()).args(["run", "wf.md", "--json", "--quiet"]));
    assert_ne!(r.code, 0, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("cannot run") && msg.contains("read roots"),
        "{msg}"
    );

    // A symlink inside the roots that leads out is refused the same way.
    std::os::unix::fs::symlink(&target, d.path().join("link.sh")).unwrap();
    workflow(d.path(), "./link.sh", "");
    let r = run(cmd(d.path()).args(["run", "wf.md", "--json", "--quiet"]));
    assert_ne!(r.code, 0, "{r:?}");

    fs::write(d.path().join("plain.sh"), "#!/bin/sh\necho hi\n").unwrap();
    workflow(d.path(), "./plain.sh", "");
    let r = run(cmd(d.path()).args(["run", "wf.md", "--json", "--quiet"]));
    assert_ne!(r.code, 0, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("not executable"), "{msg}");
}

#[test]
fn operations_listed_in_the_yaml_are_the_only_ones() {
    let d = tempdir();
    tool(d.path(), "ops.sh", "echo \"\\\"$1\\\"\"");
    fs::write(
        d.path().join("ops.yaml"),
        "operations:\n  run: {}\n  other: {}\n",
    )
    .unwrap();
    workflow(d.path(), "./ops.sh", "");
    let r = run(cmd(d.path()).args(["run", "wf.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["outputs"]["out"], "run");

    fs::write(d.path().join("ops.yaml"), "operations:\n  other: {}\n").unwrap();
    let r = run(cmd(d.path()).args(["run", "wf.md", "--json", "--quiet"]));
    assert_ne!(r.code, 0, "{r:?}");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("no operation `run`"), "{msg}");
}

#[test]
fn an_argument_with_a_nul_byte_is_refused_not_cut_off() {
    let d = tempdir();
    let marker = d.path().join("ran");
    tool(
        d.path(),
        "echo.sh",
        &format!(
            "touch '{}'; printf '{{\"args\": \"%s\"}}' \"$*\"",
            marker.display()
        ),
    );
    // The value comes from data (an inputs file, as a request body would).
    workflow(
        d.path(),
        "./echo.sh",
        "inputs: {name: '{{ inputs.name }}'}\n",
    );
    fs::write(d.path().join("in.json"), r#"{"name": "abc\u0000def"}"#).unwrap();
    let r = run(cmd(d.path()).args([
        "run",
        "wf.md",
        "--json",
        "--quiet",
        "--inputs-file",
        "in.json",
    ]));
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("holds a NUL byte") || r.stderr.contains("holds a NUL byte"),
        "{r:?}"
    );
    assert!(!marker.exists(), "the tool ran with a shortened argument");
}
