//! What the CLI prints, pinned whole: `tests/transcripts/NAME.txt` holds
//! commands (`$ marktoflow ARGS`) each followed by the standard output it
//! must print, and `[exit N]` when it exits with another code than 0. They
//! run in order, in a fresh copy of `tests/transcripts/project/` (its own
//! run store), so `history` sees the runs before it; `$RUN` stands for the
//! first run id printed. What changes from run to run is written as a
//! placeholder: `<dir>` (the project), `<uuid>` and `<id>` (run ids, whole
//! and short), `<hex>` (owners, versions), `<time>`, `<n>` (epoch ms, pids,
//! durations in JSON) and `<dur>` (durations in text).
//! `MARKTOFLOW_BLESS=1` writes what the commands print now.

use crate::support::{case_files, cmd, copy_dir, repo, run, tempdir};
use regex::Regex;
use std::fs;
use std::path::Path;

/// A run id; its last group ends in the short id `history` shows.
const UUID: &str = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-([0-9a-f]{12})";

struct Case {
    args: String,
    expected: String,
}

fn parse(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for line in text.lines() {
        if let Some(args) = line.strip_prefix("$ marktoflow ") {
            cases.push(Case {
                args: args.to_string(),
                expected: String::new(),
            });
        } else if let Some(c) = cases.last_mut() {
            c.expected.push_str(line);
            c.expected.push('\n');
        }
    }
    cases
}

/// Words as a shell splits them, with '…' quoting.
fn words(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut word, mut quoted, mut any) = (String::new(), false, false);
    for ch in args.chars() {
        match ch {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

/// Placeholders for what differs between runs (see the module docs);
/// `shorts` gathers the short forms of the run ids seen so far, since a
/// table lists them without the whole id.
fn normalize(text: &str, dir: &Path, shorts: &mut Vec<String>) -> String {
    let mut t = text.to_string();
    for root in [dir.canonicalize().unwrap(), dir.to_path_buf()] {
        t = t.replace(root.to_str().unwrap(), "<dir>");
    }
    let uuid = Regex::new(UUID).unwrap();
    for c in uuid.captures_iter(&t) {
        let short = c[1][4..].to_string();
        if !shorts.contains(&short) {
            shorts.push(short);
        }
    }
    t = uuid.replace_all(&t, "<uuid>").into_owned();
    for s in shorts.iter() {
        t = Regex::new(&format!(r"\b{s}\b"))
            .unwrap()
            .replace_all(&t, "<id>")
            .into_owned();
    }
    let rules = [
        (r"\b[0-9a-f]{32,64}\b", "<hex>"),
        (
            // A zone's abbreviation goes with it (CET in winter, CEST in summer).
            r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?( [A-Z]{3,5}\b)?",
            "<time>",
        ),
        (r#""(\w+_ms|\w+_at|pid)": \d+(\.\d+)?"#, r#""$1": <n>"#),
        (r"\b\d+(\.\d+)? ?(ms|s)\b", "<dur>"),
        // Table columns pad a duration to their width: one space is kept.
        (r" +<dur>", " <dur>"),
    ];
    for (pattern, with) in rules {
        t = Regex::new(pattern)
            .unwrap()
            .replace_all(&t, with)
            .into_owned();
    }
    t
}

#[test]
fn the_cli_prints_what_its_transcripts_say() {
    let dir = repo().join("tests/transcripts");
    let bless = std::env::var_os("MARKTOFLOW_BLESS").is_some();
    let files = case_files(&dir, "txt", 3);
    let uuid = Regex::new(UUID).unwrap();
    let mut failures = Vec::new();
    for file in &files {
        let work = tempdir();
        let root = work.path();
        copy_dir(&dir.join("project"), root);
        fs::create_dir_all(root.join(".marktoflow")).unwrap();
        let text = fs::read_to_string(file).unwrap();
        let mut head = text
            .lines()
            .take_while(|l| !l.starts_with("$ "))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        let mut first_run: Option<String> = None;
        let mut shorts = Vec::new();
        for case in parse(&text) {
            let args = match &first_run {
                Some(id) => case.args.replace("$RUN", id),
                None => case.args.clone(),
            };
            let r = run(cmd(root).args(words(&args)));
            if first_run.is_none() {
                first_run = uuid.find(&r.stdout).map(|m| m.as_str().to_string());
            }
            let mut actual = normalize(&r.stdout, root, &mut shorts);
            if !actual.is_empty() && !actual.ends_with('\n') {
                actual.push('\n');
            }
            if r.code != 0 {
                actual.push_str(&format!("[exit {}]\n", r.code));
            }
            head.push_str(&format!("$ marktoflow {}\n{actual}", case.args));
            if !bless && actual != case.expected {
                failures.push(format!(
                    "--- {}: $ marktoflow {}\nexpected:\n{}actual:\n{actual}stderr:\n{}",
                    file.display(),
                    case.args,
                    case.expected,
                    r.stderr
                ));
            }
        }
        if bless {
            fs::write(file, head).unwrap();
        }
    }
    assert!(
        failures.is_empty(),
        "{} command(s) print otherwise (MARKTOFLOW_BLESS=1 rewrites):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn placeholders_hide_only_what_changes() {
    let d = tempdir();
    let text = format!(
        "{}/a.md 01a220e8-f7fe-7040-9253-e93399d91447 99d91447 \"duration_ms\": 16, took 12 ms at 2026-11-28 06:47:48 \"pid\": 42 step_3 next 2026-07-06 07:00 CEST;",
        d.path().display()
    );
    assert_eq!(
        normalize(&text, d.path(), &mut Vec::new()),
        "<dir>/a.md <uuid> <id> \"duration_ms\": <n>, took <dur> at <time> \"pid\": <n> step_3 next <time>;"
    );
    assert_eq!(
        words("run 'a b.md' --input x=1"),
        ["run", "a b.md", "--input", "x=1"]
    );
}

/// The keys of `v` and of the items one level down (the first of a list,
/// the values of a mapping), as the reference's `--json` table names them;
/// a run's inputs and outputs are the workflow's data, not looked into.
fn keys_of(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>, depth: usize) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                // A workflow's own data, not the shape.
                let data = ["inputs", "outputs", "output", "default"].contains(&k.as_str());
                if depth > 0 && !data {
                    keys_of(x, out, depth - 1);
                }
            }
        }
        Value::Array(a) => {
            if let Some(first) = a.first() {
                keys_of(first, out, depth);
            }
        }
        _ => {}
    }
}

/// Every command that takes `--json` has a row in the reference's `--json`
/// table, and every key a command prints is named in its row.
#[test]
fn every_json_shape_is_in_the_reference() {
    use clap::CommandFactory as _;
    let doc = fs::read_to_string(repo().join("docs/reference.md")).unwrap();
    let start = doc
        .find("### `--json` output")
        .expect("the `--json` section");
    let table: Vec<&str> = doc[start..]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .collect();
    let row = |command: &str| -> String {
        table
            .iter()
            .find(|l| l.contains(&format!("`{command} --json`")))
            .unwrap_or_else(|| panic!("no row for `{command} --json` in the reference"))
            .to_string()
    };
    // Every command with a `--json` flag has its row.
    fn with_json(c: &clap::Command, path: &str, out: &mut Vec<String>) {
        if c.get_arguments().any(|a| a.get_id() == "json") {
            out.push(path.trim().to_string());
        }
        for s in c.get_subcommands() {
            with_json(s, &format!("{path} {}", s.get_name()), out);
        }
    }
    let mut commands = Vec::new();
    with_json(&marktoflow::cli::Cli::command(), "", &mut commands);
    assert!(commands.len() >= 8, "{commands:?}");
    for c in &commands {
        row(c);
    }
    // What they print now: each key is named in its row.
    let d = tempdir();
    copy_dir(&repo().join("tests/transcripts/project"), d.path());
    let json_of = |args: &[&str]| -> serde_json::Value {
        let r = run(cmd(d.path()).args(args));
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {r:?}"))
    };
    let first_run = json_of(&["run", "hello.md", "--json", "-q"]);
    let id = first_run["run_id"].as_str().unwrap().to_string();
    let cases: Vec<(&str, serde_json::Value)> = vec![
        ("run", first_run),
        ("validate", json_of(&["validate", ".", "--json"])),
        ("list", json_of(&["list", "--json"])),
        ("actions", json_of(&["actions", "--json"])),
        ("history", json_of(&["history", "--json"])),
        ("show", json_of(&["show", &id, "--json"])),
        ("model list", json_of(&["model", "list", "--json"])),
        ("kb index", {
            fs::create_dir_all(d.path().join("notes")).unwrap();
            fs::write(d.path().join("notes/a.md"), "# A\n\nA note.\n").unwrap();
            json_of(&["kb", "index", "notes", "--json"])
        }),
        ("kb status", json_of(&["kb", "status", "notes", "--json"])),
    ];
    let mut missing = Vec::new();
    for (command, v) in &cases {
        let text = if *command == "show" {
            row("history")
        } else {
            row(command)
        };
        let mut keys = std::collections::BTreeSet::new();
        // `actions`' inputs are a JSON Schema, named as such, not key by key.
        let depth = if *command == "actions" { 0 } else { 1 };
        keys_of(v, &mut keys, depth);
        for k in keys {
            let named =
                Regex::new(&format!(r"[{{\[(,: `]{}[,:}}\]) ?`]", regex::escape(&k))).unwrap();
            if !named.is_match(&text) {
                missing.push(format!(
                    "`{command} --json` prints `{k}`, which its row does not name"
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/reference.md `--json` table:\n{}",
        missing.join("\n")
    );
}
