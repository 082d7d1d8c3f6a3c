//! `file.*` and `http.*` built-ins through the real binary: a temp folder
//! for files, a small HTTP server on 127.0.0.1 for requests.

use crate::support::{cmd, run, tempdir};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const FILES: &str = r#"---
workflow: {id: files}
---

```yaml
action: file.write
inputs: {path: out/notes.json, content: {a: 1, list: [x, y]}, create_dirs: true}
output_variable: written
```

```yaml
action: file.write
inputs: {path: out/log.txt, content: "one\n"}
```

```yaml
action: file.write
inputs: {path: out/log.txt, content: "two\n", append: true}
```

```yaml
action: file.read
inputs: {path: out/notes.json, format: json}
output_variable: notes
```

```yaml
action: file.read
inputs: {path: out/log.txt}
output_variable: log
```

```yaml
action: file.list
inputs: {path: ., pattern: "**/*.txt"}
output_variable: listed
```

```yaml
action: file.exists
inputs: {path: out/nope.md}
output_variable: nope
```

```yaml
action: workflow.set_outputs
inputs:
  a: '{{ notes.content.a }}'
  log: '{{ log.content }}'
  listed: '{{ listed.files }}'
  nope: '{{ nope.exists }}'
  bytes: '{{ written.bytes }}'
```
"#;

#[test]
fn file_actions_write_atomically_and_read_back_relative_to_the_working_directory() {
    let d = tempdir();
    let wf_dir = d.path().join("flows");
    std::fs::create_dir_all(wf_dir.join("data")).unwrap();
    std::fs::write(wf_dir.join("data/keep.txt"), "k").unwrap();
    std::fs::create_dir_all(d.path().join("elsewhere")).unwrap();
    std::fs::write(d.path().join("elsewhere/files.md"), FILES).unwrap();
    // The workflow lives elsewhere: relative paths are the working directory's.
    let r = run(cmd(&wf_dir).args([
        "run",
        "../elsewhere/files.md",
        "--json",
        "--quiet",
        "--allow-write",
        "out",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!d.path().join("elsewhere/out").exists());
    let o = &r.json()["outputs"];
    assert_eq!(o["a"], 1);
    assert_eq!(o["log"], "one\ntwo\n");
    assert_eq!(o["listed"], json!(["data/keep.txt", "out/log.txt"]));
    assert_eq!(o["nope"], false);
    let written = std::fs::read_to_string(wf_dir.join("out/notes.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&written).unwrap(),
        json!({"a": 1, "list": ["x", "y"]})
    );
    assert_eq!(o["bytes"], written.len());
    let leftovers: Vec<_> = std::fs::read_dir(wf_dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    // A path that is not there says where it looked.
    std::fs::write(
        wf_dir.join("missing.md"),
        include_str!("fixtures/builtins/m.md"),
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["run", "flows/missing.md", "--allow-read", "flows"]));
    assert_eq!(r.code, 1, "{r:?}");
    let looked = d.path().canonicalize().unwrap().join("data/gone.txt");
    assert!(
        r.stderr.contains(&format!(
            "`data/gone.txt` (resolved to `{}`)",
            looked.display()
        )),
        "{r:?}"
    );
}

#[test]
fn file_writes_outside_the_write_roots_are_refused() {
    let d = tempdir();
    std::fs::write(
        d.path().join("w.md"),
        include_str!("fixtures/builtins/w.md"),
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["run", "w.md", "--allow-write", "."]));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("access denied: `../escape.txt` is outside the allowed write roots"),
        "{}",
        r.stderr
    );
    assert!(!d.path().parent().unwrap().join("escape.txt").exists());
    // Without --allow-write nothing may be written, not even beside the workflow.
    std::fs::write(
        d.path().join("w.md"),
        include_str!("fixtures/builtins/w-2.md"),
    )
    .unwrap();
    let r = run(cmd(d.path()).args(["run", "w.md"]));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("allow it with `--allow-write DIR`"),
        "{}",
        r.stderr
    );
    assert!(!d.path().join("here.txt").exists());
}

/// A small HTTP server: `/echo` returns what it got as JSON, `/text` plain
/// text, `/flaky` fails with 503 (Retry-After: 0) before succeeding, others 404.
struct Server {
    base: String,
    flaky_hits: Arc<AtomicUsize>,
}

fn server() -> Server {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let h = h.clone();
            std::thread::spawn(move || {
                let _ = handle(s, &h);
            });
        }
    });
    Server {
        base,
        flaky_hits: hits,
    }
}

fn handle(mut s: TcpStream, hits: &AtomicUsize) -> std::io::Result<()> {
    let mut r = BufReader::new(s.try_clone()?);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("/").to_string();
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let mut headers = serde_json::Map::new();
        let mut len = 0;
        loop {
            let mut h = String::new();
            r.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    len = v.trim().parse().unwrap_or(0);
                }
                headers.insert(k, json!(v.trim()));
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body)?;
        let moved = |code: u16| {
            let to = format!("Location: {query}\r\n");
            (code, "text/plain", to, "moved".to_string())
        };
        let (status, ctype, extra, text) = match path {
            "/go302" => moved(302),
            "/go307" => moved(307),
            "/echo" => (
                200,
                "application/json",
                String::new(),
                json!({"method": method, "query": query, "headers": headers, "body": String::from_utf8_lossy(&body)}).to_string(),
            ),
            "/text" => (200, "text/plain", String::new(), "hello there".to_string()),
            "/flaky" if hits.fetch_add(1, Ordering::SeqCst) < 2 => (
                503,
                "text/plain",
                "Retry-After: 0\r\n".to_string(),
                "busy".to_string(),
            ),
            "/flaky" => (
                200,
                "application/json",
                String::new(),
                r#"{"ok":true}"#.to_string(),
            ),
            _ => (404, "text/plain", String::new(), "no such thing".to_string()),
        };
        write!(
            s,
            "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n{extra}Content-Length: {}\r\n\r\n{text}",
            text.len()
        )?;
    }
}

fn http_workflow(dir: &std::path::Path, steps: &str) {
    std::fs::write(
        dir.join("h.md"),
        format!("---\nworkflow: {{id: h}}\ninputs:\n  base: {{type: string}}\n---\n\n{steps}"),
    )
    .unwrap();
}

#[test]
fn http_requests_send_json_query_and_headers_and_parse_json_replies() {
    let srv = server();
    let d = tempdir();
    http_workflow(
        d.path(),
        "```yaml\naction: http.post\ninputs:\n  url: '{{ inputs.base }}/echo'\n  query: {q: a b, tag: [x, y]}\n  headers: {X-Trace: t-1}\n  body: {name: Ada}\noutput_variable: posted\n```\n\n```yaml\naction: http.request\ninputs: {method: get, url: '{{ inputs.base }}/text'}\noutput_variable: text\n```\n\n```yaml\naction: http.get\ninputs: {url: '{{ inputs.base }}/missing', fail_on_error: false}\noutput_variable: missing\n```\n",
    );
    let r = run(cmd(d.path()).args([
        "run",
        "h.md",
        "--json",
        "--quiet",
        "--input",
        &format!("base={}", srv.base),
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let o = &r.json()["outputs"];
    let echo = &o["posted"]["body"];
    assert_eq!(o["posted"]["status"], 200);
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["query"], "q=a+b&tag=x&tag=y");
    assert_eq!(echo["headers"]["x-trace"], "t-1");
    assert_eq!(echo["headers"]["content-type"], "application/json");
    // The run's key for the call: the same if the run is resumed elsewhere.
    let run_id = r.json()["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        echo["headers"]["idempotency-key"],
        format!("{run_id}:step_1:1")
    );
    assert_eq!(
        serde_json::from_str::<Value>(echo["body"].as_str().unwrap()).unwrap(),
        json!({"name": "Ada"})
    );
    assert_eq!(o["text"]["body"], "hello there");
    assert_eq!(o["text"]["headers"]["content-type"], "text/plain");
    assert_eq!(o["missing"]["status"], 404);
    assert_eq!(o["missing"]["ok"], false);
}

#[test]
fn http_failures_retry_on_503_and_fail_clearly_on_404() {
    let srv = server();
    let d = tempdir();
    http_workflow(
        d.path(),
        "```yaml\naction: http.get\ninputs: {url: '{{ inputs.base }}/flaky'}\noutput_variable: flaky\n```\n\n```yaml\naction: http.get\ninputs: {url: '{{ inputs.base }}/missing'}\n```\n",
    );
    let r = run(cmd(d.path()).args([
        "run",
        "h.md",
        "--json",
        "--input",
        &format!("base={}", srv.base),
    ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["steps"][0]["status"], "completed");
    assert_eq!(j["steps"][0]["output"]["body"], json!({"ok": true}));
    assert_eq!(
        srv.flaky_hits.load(Ordering::SeqCst),
        3,
        "two 503s, then success"
    );
    assert!(
        r.stderr.contains("returned HTTP 503"),
        "retries are logged: {}",
        r.stderr
    );
    let err = j["error"]["message"].as_str().unwrap();
    assert!(
        err.starts_with(&format!(
            "GET {}/missing returned HTTP 404 Not Found: no such thing",
            srv.base
        )),
        "{err}"
    );
    assert_eq!(
        (&j["error"]["line"], &j["error"]["column"]),
        (&json!(14), &json!(9)),
        "the failing step's position"
    );
}

#[test]
fn http_hosts_can_be_limited() {
    let srv = server();
    let d = tempdir();
    std::fs::write(
        d.path().join("h.md"),
        include_str!("fixtures/builtins/h.md"),
    )
    .unwrap();
    let base = format!("base={}", srv.base);
    let r = run(cmd(d.path()).args(["run", "h.md", "--input", &base]));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("the host `127.0.0.1` is not allowed (allowed: api.example.com)"),
        "{}",
        r.stderr
    );
    let port = srv.base.rsplit(':').next().unwrap().to_string();
    let r = run(cmd(d.path()).args([
        "run",
        "h.md",
        "--input",
        &base,
        "--allow-host",
        &format!("127.0.0.1:{port}"),
    ]));
    assert_eq!(
        r.code, 0,
        "--allow-host replaces the workflow's list: {}",
        r.stderr
    );
    assert_eq!(srv.flaky_hits.load(Ordering::SeqCst), 0);
}

#[test]
fn file_list_walks_as_the_one_walker_does() {
    let d = tempdir();
    let p = d.path();
    for f in [
        "a.txt",
        "sub/b.txt",
        "sub/deep/c.txt",
        "build/out.txt",
        ".hidden/h.txt",
    ] {
        std::fs::create_dir_all(p.join(f).parent().unwrap()).unwrap();
        std::fs::write(p.join(f), "x").unwrap();
    }
    std::fs::write(p.join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir_all(p.join(".marktoflow")).unwrap();
    std::fs::write(p.join(".marktoflow/state.txt"), "x").unwrap();
    let outside = tempdir();
    std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), p.join("escape")).unwrap();
    std::fs::write(
        p.join("l.md"),
        r#"---
workflow: {id: l}
---

```yaml
action: file.list
inputs: {path: .}
output_variable: top
```

```yaml
action: file.list
inputs: {path: ., recursive: true, include_dirs: true}
output_variable: all
```

```yaml
action: file.list
inputs: {path: ., pattern: "**/*.txt", respect_ignore_files: true}
output_variable: kept
```

```yaml
action: workflow.set_outputs
inputs: {top: '{{ top.files }}', all: '{{ all.files }}', kept: '{{ kept.files }}'}
```
"#,
    )
    .unwrap();
    let r = run(cmd(p).args(["run", "l.md", "--json", "-q"]));
    assert_eq!(r.code, 0, "{r:?}");
    let o = &r.json()["outputs"];
    // One level, no folders, no dot-files, nothing of `.marktoflow/`.
    assert_eq!(o["top"], json!(["a.txt", "l.md"]));
    // Folders listed and entered; the link out of the allowed folder is not.
    assert_eq!(
        o["all"],
        json!([
            "a.txt",
            "build",
            "build/out.txt",
            "l.md",
            "sub",
            "sub/b.txt",
            "sub/deep",
            "sub/deep/c.txt"
        ])
    );
    assert_eq!(o["kept"], json!(["a.txt", "sub/b.txt", "sub/deep/c.txt"]));
}

#[test]
fn redirects_are_followed_only_to_allowed_hosts() {
    let a = server();
    let b = server();
    let port_b = b.base.rsplit(':').next().unwrap().to_string();
    let d = tempdir();
    let wf = |url: &str, method: &str| {
        format!(
            "---\nworkflow: {{id: r}}\n---\n\n```yaml\naction: http.request\ninputs: {{url: '{url}', method: {method}, body: {{n: 1}}, retries: 0}}\noutput_variable: r\n```\n"
        )
    };
    // Within the allowed hosts: 307 keeps the method and body, 302 of a POST becomes a GET.
    for (code, method, body) in [("307", "POST", "{\"n\":1}"), ("302", "GET", "")] {
        let url = format!("{}/go{code}?{}/echo", a.base, a.base);
        std::fs::write(d.path().join("r.md"), wf(&url, "POST")).unwrap();
        let r =
            run(cmd(d.path()).args(["run", "r.md", "--json", "-q", "--allow-host", "127.0.0.1"]));
        assert_eq!(r.code, 0, "{r:?}");
        let got = &r.json()["outputs"]["r"]["body"];
        assert_eq!(
            (got["method"].as_str(), got["body"].as_str()),
            (Some(method), Some(body)),
            "{code}"
        );
    }
    // Off the allowed hosts (`localhost` is not `127.0.0.1`), for both codes.
    for code in ["302", "307"] {
        let url = format!("{}/go{code}?http://localhost:{port_b}/echo", a.base);
        std::fs::write(d.path().join("r.md"), wf(&url, "POST")).unwrap();
        let r = run(cmd(d.path()).args(["run", "r.md", "-q", "--allow-host", "127.0.0.1"]));
        assert_eq!(r.code, 1, "{code}: {r:?}");
        assert!(
            r.stderr.contains("redirected off the allowed hosts"),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr.contains("`localhost` is not allowed"),
            "{}",
            r.stderr
        );
        // Without an allow-list the same redirect is followed.
        let r = run(cmd(d.path()).args(["run", "r.md", "--json", "-q"]));
        assert_eq!(r.code, 0, "{r:?}");
    }
}

#[test]
fn a_tool_declared_with_an_http_client_sdk_is_the_builtin_http() {
    let srv = server();
    let d = tempdir();
    std::fs::write(
        d.path().join("x.md"),
        include_str!("fixtures/builtins/x.md"),
    )
    .unwrap();
    let r = run(cmd(d.path()).args([
        "run",
        "x.md",
        "--json",
        "--quiet",
        "--input",
        &format!("base={}", srv.base),
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let o = &r.json()["outputs"];
    // axios' names: `params` is the query, `data` the body and the reply.
    assert_eq!(o["page"]["data"]["query"], "page=2");
    assert_eq!(o["page"]["data"], o["page"]["body"]);
    assert_eq!(o["posted"]["data"]["method"], "POST");
    assert_eq!(
        serde_json::from_str::<Value>(o["posted"]["data"]["body"].as_str().unwrap()).unwrap(),
        json!({"job": "export"})
    );
}
