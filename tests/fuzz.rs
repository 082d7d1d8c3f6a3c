//! A mutation fuzzer over the workflow parser and `validate`, bounded by
//! count (`MARKTOFLOW_FUZZ_INPUTS`, default 30,000, about 12 s of a debug
//! build) and time (`MARKTOFLOW_FUZZ_SECS`, default 60), whichever ends
//! first; a longer session sets both higher. The corpus is every workflow
//! we ship (`examples/`, `workflows/`) plus the seeds in `tests/fuzz/`
//! (extreme numbers, deep YAML, hostile templates). Inputs are mutated
//! deterministically (`MARKTOFLOW_FUZZ_SEED`). No input may panic or take
//! more than 10 s in process; every 100th goes through the real binary's
//! `validate`, which must exit 0, 1 or 2 within 10 s. A second target
//! grows the shapes that broke the third hardening round in size, not only
//! in shape (`MARKTOFLOW_FUZZ_GROWTH`).

use crate::support::{cmd, repo, tempdir};
use marktoflow::check::verify::verify;
use marktoflow::format::model::load_str;
use marktoflow::template::Templates;
use marktoflow_steps::Registry;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Tokens that have broken parsers before, spliced in by the mutator.
const TOKENS: &[&str] = &[
    "{{",
    "}}",
    "{%",
    "%}",
    "1e308",
    "-1e308",
    "inf",
    "NaN",
    "99999999999999999999d",
    "18446744073709551616",
    "-0",
    "0x",
    "? ",
    "[",
    "]",
    "{",
    "}",
    "\u{0}",
    "---\n",
    "```\n",
    "```yaml\n",
    "\n",
    "    ",
    "\t",
    "${UNSET}",
    "&a ",
    "*a",
    "!!binary ",
    "'",
    "\"",
    "#",
    ": ",
    "- ",
    "timeout: 1e308\n",
    "type: parallel\n",
    "branches: [",
    "action: ",
    "inputs: {",
    "| lenght",
    "range(99999999)",
    "\u{feff}",
    "é",
    "\r\n",
    "...\n",
    "<<: *a\n",
];

fn corpus() -> Vec<String> {
    let root = repo();
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["examples", "workflows", "tests/fuzz"] {
        let walk = marktoflow_steps::core::walk::walk(
            &root.join(dir),
            &marktoflow_steps::core::walk::WalkOptions {
                extensions: vec!["md".into()],
                ..Default::default()
            },
        )
        .unwrap();
        files.extend(walk.into_iter().map(|e| e.abs_path));
    }
    let texts: Vec<String> = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter(|t| t.starts_with("---"))
        .collect();
    assert!(texts.len() >= 10, "the corpus is the shipped workflows");
    texts
}

fn mutate(rng: &mut fastrand::Rng, corpus: &[String]) -> String {
    let mut s: Vec<u8> = corpus[rng.usize(..corpus.len())].clone().into_bytes();
    for _ in 0..rng.usize(1..6) {
        let at = if s.is_empty() {
            0
        } else {
            rng.usize(..s.len())
        };
        match rng.u8(..7) {
            0 => {
                let t = TOKENS[rng.usize(..TOKENS.len())].as_bytes();
                s.splice(at..at, t.iter().copied());
            }
            1 if !s.is_empty() => {
                let end = (at + rng.usize(1..64)).min(s.len());
                s.drain(at..end);
            }
            2 if !s.is_empty() => s[at] = rng.u8(..),
            3 => {
                // A line repeated, as deep nesting or long lists do.
                let start = s[..at]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                let end = s[at..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(s.len(), |i| at + i + 1);
                let line = s[start..end].to_vec();
                for _ in 0..rng.usize(1..50) {
                    s.splice(end..end, line.iter().copied());
                }
            }
            4 => {
                // Splice in part of another file.
                let other = corpus[rng.usize(..corpus.len())].as_bytes();
                let from = rng.usize(..other.len().max(1));
                let to = (from + rng.usize(1..400)).min(other.len());
                s.splice(at..at, other[from..to].iter().copied());
            }
            5 => s.truncate(at),
            _ => {
                // A number made extreme.
                let t = ["1e308", "-1", "0", "99999999999999999999"][rng.usize(..4)];
                if let Some(p) = s[at..].iter().position(u8::is_ascii_digit) {
                    let i = at + p;
                    s.splice(i..i + 1, t.bytes());
                }
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

/// Loads and verifies `text` as `validate` does; any outcome but a panic is fine.
fn check_one(text: &str) {
    let registry = Registry::standard();
    if let Ok(l) = load_str(Path::new("fuzz.md"), text, &registry) {
        let _ = verify(&l.workflow, &registry, &Templates::new());
    }
}

#[test]
fn mutated_workflows_never_panic_hang_or_exit_oddly() {
    let secs: u64 = std::env::var("MARKTOFLOW_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("MARKTOFLOW_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6d61726b);
    let inputs_max: u64 = std::env::var("MARKTOFLOW_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000);
    let corpus = corpus();
    let d = tempdir();
    let mut rng = fastrand::Rng::with_seed(seed);
    // One worker checks inputs; this thread watches that each ends in time.
    let (to_worker, inputs) = mpsc::channel::<String>();
    let (done_tx, done) = mpsc::channel::<Result<(), String>>();
    std::thread::spawn(move || {
        for text in inputs {
            let r = std::panic::catch_unwind(|| check_one(&text)).map_err(|p| {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                format!("panicked ({what}) on:\n{text}")
            });
            if done_tx.send(r).is_err() {
                return;
            }
        }
    });
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(secs) && n < inputs_max {
        let text = mutate(&mut rng, &corpus);
        to_worker.send(text.clone()).unwrap();
        match done.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("input {n} (seed {seed}): {e}"),
            Err(_) => panic!("input {n} (seed {seed}) took over 10 s:\n{text}"),
        }
        if n.is_multiple_of(100) {
            let f = d.path().join("fuzz.md");
            std::fs::write(&f, &text).unwrap();
            let mut c = cmd(d.path());
            c.args(["validate", "fuzz.md"]);
            exits_within(
                c,
                Duration::from_secs(10),
                None,
                &format!("`validate` of input {n} (seed {seed}):\n{text}\n"),
            );
        }
        n += 1;
    }
    eprintln!("fuzz: {n} inputs in {secs} s (seed {seed})");
    assert!(n > 100, "the fuzzer ran only {n} inputs");
}

/// Bodies for the webhook and the run API, seeds for the mutator: typical
/// ones and the hostile cases found in review (numbers past every range,
/// NUL bytes, template text as data, growth methods as data, deep nesting).
const BODIES: &[&str] = &[
    r#"{"s": "hello", "n": 3, "x": 1.5, "b": true, "l": ["a", "b"], "o": {"k": "v"}, "e": "red"}"#,
    r#"{"n": 1e308}"#,
    r#"{"n": -1e308, "x": 1e999}"#,
    r#"{"n": 18446744073709551616}"#,
    r#"{"s": "a\u0000b"}"#,
    r#"{"s": "{{ range(99999999) | join }}"}"#,
    r#"{"s": "{{ 'x'.padStart(100000000000) }}"}"#,
    r#"{"s": "{{ 'ab' | regex_replace('(.)', '$&$&$&$&$&$&$&$&') }}"}"#,
    r#"{"e": "purple", "l": "not a list", "o": [1, 2]}"#,
    r#"{"b": "true", "n": "12", "x": "NaN"}"#,
    r#"{"__proto__": {"polluted": true}, "constructor": {"prototype": {}}}"#,
    r#"[1, 2, 3]"#,
    r#""just text""#,
    r#"{"s": "\ud800"}"#,
    "{\"s\": \"é\u{feff}\"}",
];

/// JSON-RPC messages for `/mcp`, seeds for the mutator.
const MCP_MESSAGES: &[&str] = &[
    r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#,
    r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hook", "arguments": {"s": "hi", "n": 1}}}"#,
    r#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "hook", "arguments": {"n": 1e308}}}"#,
    r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope"}}"#,
    r#"{"jsonrpc": "2.0", "id": null, "method": "ping"}"#,
    r#"{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}"#,
    r#"[{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 6, "method": "ping"}]"#,
    r#"{"jsonrpc": "1.0", "id": {}, "method": 7}"#,
    r#"{"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": "file:///etc/passwd"}}"#,
];

/// Mutates a JSON text: tokens spliced in, bytes changed or cut, nesting
/// deepened.
fn mutate_json(rng: &mut fastrand::Rng, seeds: &[&str]) -> Vec<u8> {
    const JSON_TOKENS: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "1e308",
        "-0",
        "null",
        "true",
        "\\u0000",
        "\\ud800",
        "{{ x }}",
        "99999999999999999999999",
    ];
    let mut s = seeds[rng.usize(..seeds.len())].as_bytes().to_vec();
    for _ in 0..rng.usize(1..5) {
        let at = rng.usize(..=s.len());
        match rng.u8(..5) {
            0 => {
                let t = JSON_TOKENS[rng.usize(..JSON_TOKENS.len())].as_bytes();
                s.splice(at..at, t.iter().copied());
            }
            1 if at < s.len() => s[at] = rng.u8(..),
            2 => s.truncate(at),
            3 => {
                let depth = rng.usize(1..3000);
                let mut deep = "[".repeat(depth).into_bytes();
                deep.extend("]".repeat(depth).bytes());
                s.splice(at..at, deep);
            }
            _ => {
                let end = (at + rng.usize(1..16)).min(s.len());
                s.drain(at..end);
            }
        }
    }
    s
}

/// How many mutated requests each HTTP target gets (`MARKTOFLOW_FUZZ_HTTP`).
fn http_count() -> usize {
    std::env::var("MARKTOFLOW_FUZZ_HTTP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// Mutated JSON bodies to a webhook and the run API, and mutated MCP
/// messages to `/mcp`, against the real server: every request is answered
/// (no dropped connection), `/health` keeps answering, the process lives.
#[test]
fn mutated_api_bodies_and_mcp_messages_never_kill_or_stall_the_server() {
    use crate::support::{http, serve};
    let d = tempdir();
    std::fs::write(
        d.path().join("hook.md"),
        include_str!("fixtures/fuzz/hook.md"),
    )
    .unwrap();
    let s = serve(
        d.path(),
        &["hook.md", "--mcp", "--mcp-token-env", "FUZZ_TOKEN"],
        &[("FUZZ_TOKEN", "fuzz")],
    );
    let seed: u64 = std::env::var("MARKTOFLOW_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6d61726b);
    let mut rng = fastrand::Rng::with_seed(seed);
    let json = [("Content-Type", "application/json")];
    let alive = |n: usize| {
        let h = http(&s.addr, "GET", "/health", &[], b"");
        assert_eq!(h.status, 200, "after request {n} (seed {seed}): {}", h.body);
    };
    let count = http_count();
    for n in 0..count {
        let body = mutate_json(&mut rng, BODIES);
        let path = if n % 2 == 0 {
            "/hook"
        } else {
            "/workflows/hook/runs"
        };
        let r = http(&s.addr, "POST", path, &json, &body);
        assert!(
            (200..600).contains(&r.status),
            "{path} request {n} (seed {seed}) got no answer: {}",
            String::from_utf8_lossy(&body)
        );
        if n % 50 == 0 {
            alive(n);
        }
    }
    // An MCP session, then mutated messages in it.
    let mcp_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", "Bearer fuzz"),
    ];
    let init = http(
        &s.addr,
        "POST",
        "/mcp",
        &mcp_headers,
        br#"{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}"#,
    );
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id"))
        .map(|(_, v)| v.clone())
        .expect("a session id");
    let mut in_session = mcp_headers.to_vec();
    in_session.push(("Mcp-Session-Id", session.as_str()));
    let _ = http(
        &s.addr,
        "POST",
        "/mcp",
        &in_session,
        br#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#,
    );
    for n in 0..count {
        let body = mutate_json(&mut rng, MCP_MESSAGES);
        let r = http(&s.addr, "POST", "/mcp", &in_session, &body);
        assert!(
            (200..600).contains(&r.status),
            "/mcp message {n} (seed {seed}) got no answer: {}",
            String::from_utf8_lossy(&body)
        );
        if n % 50 == 0 {
            alive(n);
        }
    }
    alive(count);
}

/// Shapes whose cost grows with their size, for
/// [`grown_expressions_and_notes_end_in_time_without_a_crash`]: each gives a
/// workflow (or a note) with `n` repetitions.
/// A named shape and how to grow it to `n` repetitions.
type Grown = (&'static str, fn(usize) -> String);

const GROWN_TEMPLATES: &[Grown] = &[
    ("chain", |n| format!("{{{{ a{} }}}}", ".b".repeat(n))),
    ("and", |n| format!("{{{{ a{} }}}}", " and a".repeat(n))),
    ("plus", |n| format!("{{{{ 1{} }}}}", " + a".repeat(n))),
    ("filters", |n| {
        format!("{{{{ a{} }}}}", " | length".repeat(n))
    }),
    ("index", |n| format!("{{{{ a{} }}}}", "[0]".repeat(n))),
    ("parens", |n| {
        format!("{{{{ {}a{} }}}}", "(".repeat(n), ")".repeat(n))
    }),
    ("comments", |n| "{# c #}".repeat(n)),
    ("raw", |n| "{% raw %}x{% endraw %}".repeat(n)),
    ("nested comment edits", |n| "{#{%e.length%}#}".repeat(n)),
    ("string", |n| format!("{{{{ '{}' }}}}", "x".repeat(n))),
];

const GROWN_NOTES: &[Grown] = &[
    ("one long line", |n| {
        format!("# Call\n\n{}\n", "The key is here. ".repeat(n))
    }),
    ("one long heading", |n| {
        format!("# {}\n\nThe key is here.\n", "key ".repeat(n))
    }),
    ("many headings", |n| "## key\n".repeat(n)),
    ("deep list", |n| {
        (0..n.min(5_000))
            .map(|i| format!("{}- key {i}\n", "  ".repeat(i % 200)))
            .collect()
    }),
    ("one wide table row", |n| {
        format!("| {} |\n|---|\n", "key | ".repeat(n))
    }),
];

/// Runs the real binary (under `address_space` bytes, when given): it must
/// end within `limit` with exit 0, 1 or 2 (never killed by a signal).
fn exits_within(
    mut c: std::process::Command,
    limit: Duration,
    address_space: Option<u64>,
    what: &str,
) {
    if let Some(bytes) = address_space {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            c.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let began = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if began.elapsed() > limit {
            let _ = child.kill();
            panic!("{what}: ran over {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(matches!(code, Some(0..=2)), "{what}: exited {code:?}");
}

/// The shapes that broke the third round, grown by factors of four until
/// they pass any limit (`MARKTOFLOW_FUZZ_GROWTH`, default 65,536 terms for
/// a template and 1 MiB for a note): `validate` of each template and a
/// question over a vault holding each note end in time, without a crash,
/// under a 2 GiB address space.
#[test]
fn grown_expressions_and_notes_end_in_time_without_a_crash() {
    let most: usize = std::env::var("MARKTOFLOW_FUZZ_GROWTH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(65_536);
    let d = tempdir();
    let sizes = || std::iter::successors(Some(16usize), |n| Some(n * 4)).take_while(|n| *n <= most);
    for (name, grow) in GROWN_TEMPLATES {
        for n in sizes() {
            let wf = format!(
                "---\nworkflow: {{id: grown}}\n---\n\n```yaml\naction: core.template\ninputs:\n  template: {}\n```\n",
                serde_json::to_string(&grow(n)).unwrap()
            );
            std::fs::write(d.path().join("grown.md"), &wf).unwrap();
            let mut c = cmd(d.path());
            c.args(["validate", "grown.md"]);
            exits_within(
                c,
                Duration::from_secs(20),
                Some(2 << 30),
                &format!("`validate` of {name} × {n}"),
            );
        }
    }
    let vault = d.path().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::write(
        d.path().join("ask.md"),
        "---\nworkflow: {id: ask}\n---\n\n```yaml\naction: kb.search\ninputs: {kb: vault, query: where is the key, top_k: 3, per_file: true}\noutput_variable: hits\n```\n\n```yaml\naction: kb.evidence\ninputs: {kb: vault, question: where is the key, hits: '{{ hits }}'}\noutput_variable: evidence\n```\n\n```yaml\naction: answer.extract\ninputs: {question: where is the key, evidence: '{{ evidence }}'}\n```\n",
    )
    .unwrap();
    for (name, grow) in GROWN_NOTES {
        for n in sizes() {
            let note = grow(n);
            if note.len() > most * 16 {
                break;
            }
            std::fs::write(vault.join("note.md"), &note).unwrap();
            let mut c = cmd(d.path());
            c.args(["run", "ask.md", "-q"]);
            exits_within(
                c,
                Duration::from_secs(20),
                Some(2 << 30),
                &format!("a question over {name} × {n} ({} bytes)", note.len()),
            );
        }
    }
}
