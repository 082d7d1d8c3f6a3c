//! `kb.vector_search` with the real embedding model (all-MiniLM-L6-v2).
//! The model comes from `MARKTOFLOW_EMBED_MODEL`; CI installs it. Elsewhere
//! the model tests are skipped when it is not set, and say so (see
//! `support::missing`).

use crate::support::{cmd, run, tempdir};
use std::path::Path;

fn vault(dir: &Path) {
    let notes = [
        ("Work/Apollo.md", "# Apollo access\n\nThe API key for Apollo is APOLLO-KEY-7f3a. Ask John for access.\n"),
        ("Work/Garden.md", "# Garden plan\n\nPlant tomatoes in May and water them every morning.\n"),
        ("Personal/Bread.md", "# Banana bread\n\nMash three ripe bananas, add flour, sugar and an egg, bake for an hour.\n"),
        ("Personal/Trip.md", "# Lisbon trip\n\nFlights booked for June; the hotel is near the river.\n"),
    ];
    for (p, text) in notes {
        let f = dir.join("kb").join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }
    std::fs::write(dir.join("vs.md"), include_str!("fixtures/dense/vs.md")).unwrap();
}

#[test]
fn vector_search_finds_meaning_not_words() {
    let Some(model) = crate::support::embed_model() else {
        return;
    };
    let d = tempdir();
    vault(d.path());
    let go = |q: &str| {
        let r = run(cmd(d.path())
            .env("MARKTOFLOW_EMBED_MODEL", &model)
            .args(["run", "vs.md", "--json", "--quiet", "--allow-read"])
            .arg(&model)
            .args(["--input", &format!("q={q}")]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()["outputs"]["r"].clone()
    };
    // No word in common with the note: only meaning connects them.
    let r = go("how do I make a cake from fruit");
    assert_eq!(r["hits"][0]["path"], "Personal/Bread.md", "{r}");
    assert_eq!(r["embedded"], 4, "the first search embeds every chunk");
    let r = go("credentials for the service");
    assert_eq!(r["hits"][0]["path"], "Work/Apollo.md", "{r}");
    assert_eq!(r["embedded"], 0, "vectors are reused from the cache file");
    // Operators filter as in kb.search.
    let r = go("in:Personal credentials for the service");
    assert!(
        r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["path"].as_str().unwrap().starts_with("Personal/")),
        "{r}"
    );
    // A changed note is embedded again, alone.
    std::fs::write(
        d.path().join("kb/Work/Garden.md"),
        "# Garden plan\n\nPlant roses in April.\n",
    )
    .unwrap();
    let r = go("flowers in spring");
    assert_eq!(r["hits"][0]["path"], "Work/Garden.md", "{r}");
    assert_eq!(r["embedded"], 1);
    // Filters still name the right rows once the index has more than one
    // segment (the edit wrote a new one and deleted from the old).
    let r = go("in:Work how do I make a cake from fruit");
    let paths: Vec<&str> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 2, "{r}");
    assert!(paths.iter().all(|p| p.starts_with("Work/")), "{r}");
    assert_eq!(r["embedded"], 0);
}

#[test]
fn without_a_model_the_error_says_how_to_get_one() {
    let d = tempdir();
    vault(d.path());
    let r = run(cmd(d.path()).env_remove("MARKTOFLOW_EMBED_MODEL").args([
        "run",
        "vs.md",
        "--input",
        "q=anything",
    ]));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("no embedding model is configured"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("marktoflow model install all-minilm-l6-v2"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("MARKTOFLOW_EMBED_MODEL"), "{}", r.stderr);
    // kb.search needs no model.
    std::fs::write(d.path().join("s.md"), include_str!("fixtures/dense/s.md")).unwrap();
    let r = run(cmd(d.path())
        .env_remove("MARKTOFLOW_EMBED_MODEL")
        .args(["run", "s.md", "--json", "--quiet"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["outputs"]["r"]["hits"][0]["path"],
        "Personal/Bread.md"
    );
}

/// `kb.search` over the vault with `dense` set as given.
fn hybrid_flow(dir: &Path, dense: &str) {
    std::fs::write(
        dir.join("hy.md"),
        format!("---\nworkflow: {{id: hy}}\ninputs:\n  q: {{type: string}}\n---\n\n```yaml\naction: kb.search\ninputs: {{kb: kb, query: '{{{{ inputs.q }}}}', top_k: 2, per_file: true, dense: {dense}}}\noutput_variable: r\n```\n"),
    )
    .unwrap();
}

#[test]
fn hybrid_search_finds_by_meaning_what_words_miss() {
    let Some(model) = crate::support::embed_model() else {
        return;
    };
    let d = tempdir();
    vault(d.path());
    hybrid_flow(d.path(), "auto");
    let go = |q: &str| {
        let r = run(cmd(d.path()).env("MARKTOFLOW_EMBED_MODEL", &model).args([
            "run",
            "hy.md",
            "--json",
            "--quiet",
            "--input",
            &format!("q={q}"),
        ]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()["outputs"]["r"].clone()
    };
    // No word of the note ("Lisbon", "flights") is in the question; the
    // model named by the environment needs no --allow-read.
    let r = go("When do I fly to Portugal?");
    assert_eq!(r["ranking"]["dense"], true, "{r}");
    assert_eq!(r["hits"][0]["path"], "Personal/Trip.md", "{r}");
    assert!(r["hits"][0]["dense_score"].is_number(), "{r}");
    // Words still count: an exact key finds its note first.
    let r = go("APOLLO-KEY-7f3a");
    assert_eq!(r["hits"][0]["path"], "Work/Apollo.md", "{r}");
    assert!(r["hits"][0]["bm25_score"].is_number(), "{r}");
}

/// The first vector file or journal (`vectors-*.bin`, `vectors-*.add`)
/// below `dir`: what a dense search writes as it embeds.
fn vectors_file(dir: &Path) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = vectors_file(&p) {
                return Some(f);
            }
        } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n.starts_with("vectors-") && (n.ends_with(".bin") || n.ends_with(".add"))
        }) {
            return Some(p);
        }
    }
    None
}

/// SIGTERM while a run embeds a vault stops the embedding (the process
/// ends instead of embedding on), and what was embedded is kept: the next
/// run embeds only the rest.
#[test]
fn sigterm_stops_embedding_and_keeps_what_was_done() {
    let Some(model) = crate::support::embed_model() else {
        return;
    };
    let d = tempdir();
    const NOTES: usize = 400;
    for i in 0..NOTES {
        let f = d.path().join(format!("kb/n{i:03}.md"));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(
            f,
            format!("# Note {i}\n\nItem {i}: a line about topic number {i}.\n"),
        )
        .unwrap();
    }
    std::fs::write(d.path().join("vs.md"), include_str!("fixtures/dense/vs.md")).unwrap();
    let go = || {
        let mut c = cmd(d.path());
        c.env("MARKTOFLOW_EMBED_MODEL", &model)
            .args(["run", "vs.md", "--json", "--quiet", "--allow-read"])
            .arg(&model)
            .args(["--input", "q=topic"]);
        c
    };
    let mut child = go()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The journal is first written after the first part: embedding is under way.
    while vectors_file(d.path()).is_none() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before embedding"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: the child's pid, a process this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cancelled"), "{err}");
    // The next run reuses what the stopped one embedded.
    let r = run(&mut go());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let embedded = r.json()["outputs"]["r"]["embedded"].as_u64().unwrap() as usize;
    assert!(
        embedded > 0 && embedded < NOTES,
        "embedded {embedded} of {NOTES}"
    );
}

/// A vault of `notes` notes of three sections each, and one note that
/// answers "what is the API key for Apollo".
fn big_vault(dir: &Path, notes: usize) {
    for i in 0..notes {
        let f = dir.join(format!("kb/Notes/n{i:04}.md"));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(
            f,
            format!(
                "# Note {i}\n\n## Plan\n\nItem {i}: plan the garden bed number {i}.\n\n\
                 ## Log\n\nWatered bed {i} on day {i}.\n\n## Ideas\n\nTry herbs in bed {i}.\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("kb/Apollo.md"),
        "# Apollo access\n\nThe API key for Apollo is APOLLO-KEY-7f3a. Ask John for access.\n",
    )
    .unwrap();
    std::fs::write(dir.join("now.md"), include_str!("fixtures/dense/now.md")).unwrap();
}

/// With more chunks lacking a vector than `embed_limit`, `kb.search`
/// answers at once from the best notes' chunks and what is embedded so
/// far; `kb index --embed` embeds the rest; edits and deletions after that
/// embed only what changed.
#[test]
fn a_search_answers_before_the_vault_is_embedded_and_kb_index_embeds_the_rest() {
    let Some(model) = crate::support::embed_model() else {
        return;
    };
    let d = tempdir();
    big_vault(d.path(), 60);
    let go = |args: &[&str]| {
        let r = run(cmd(d.path())
            .env("MARKTOFLOW_EMBED_MODEL", &model)
            .args(args)
            .args(["--allow-read"])
            .arg(&model));
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        r
    };
    let ask = |q: &str| {
        let r = go(&[
            "run",
            "now.md",
            "--json",
            "--quiet",
            "--input",
            &format!("q={q}"),
        ]);
        r.json()["outputs"]["r"].clone()
    };
    let r = ask("What is the API key for Apollo?");
    assert_eq!(r["hits"][0]["path"], "Apollo.md", "{r}");
    let ranking = &r["ranking"];
    let coverage = ranking["dense_coverage"].as_f64().unwrap();
    let embedded = ranking["embedded"].as_u64().unwrap();
    assert!(coverage > 0.0 && coverage < 0.5, "{ranking}");
    assert!(embedded > 0 && embedded <= 64, "{ranking}");
    // Another question embeds its own candidates; the first's are kept.
    let r = ask("garden bed 17");
    let more = r["ranking"]["dense_coverage"].as_f64().unwrap();
    assert!(more > coverage, "{} then {more}", coverage);
    // `kb status` counts without changing anything.
    let status = |json: bool| {
        let mut args = vec!["kb", "status", "kb"];
        if json {
            args.push("--json");
        }
        let r = run(cmd(d.path())
            .env("MARKTOFLOW_EMBED_MODEL", &model)
            .args(&args));
        assert_eq!(r.code, 0, "{}", r.stderr);
        r
    };
    let s = status(true).json();
    let chunks = s["chunks"].as_u64().unwrap();
    assert_eq!(
        (s["files"].as_u64(), s["indexed"].as_bool()),
        (Some(61), Some(true))
    );
    assert_eq!(s["vectors"]["chunks"].as_u64(), Some(chunks), "{s}");
    let covered = s["vectors"]["covered"].as_u64().unwrap();
    assert!(
        (covered as f64 / chunks as f64 - more).abs() < 1e-4,
        "{more}: {s}"
    );
    assert_eq!(
        status(true).json()["vectors"]["covered"].as_u64(),
        Some(covered)
    );
    // `kb index --embed` embeds the rest, and says so.
    let r = run(cmd(d.path())
        .env("MARKTOFLOW_EMBED_MODEL", &model)
        .args(["kb", "index", "kb", "--embed", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json()["vectors"].clone();
    assert_eq!(v["embedded"].as_u64(), Some(chunks - covered), "{v}");
    assert_eq!(v["covered"].as_u64(), Some(chunks), "{v}");
    assert!(
        status(false)
            .stdout
            .contains(&format!("{chunks} of {chunks} chunks (100.0 %)")),
        "{}",
        status(false).stdout
    );
    let r = ask("What is the API key for Apollo?");
    assert_eq!(r["ranking"]["dense_coverage"], 1.0, "{r}");
    assert_eq!(r["ranking"]["embedded"], 0, "{r}");
    // An edit is embedded alone, a deleted note is gone from the results.
    std::fs::write(
        d.path().join("kb/Notes/n0005.md"),
        "# Note 5\n\nThe zeppelin hangar is now a greenhouse.\n",
    )
    .unwrap();
    std::fs::remove_file(d.path().join("kb/Notes/n0009.md")).unwrap();
    let r = ask("Where is the greenhouse?");
    assert_eq!(r["hits"][0]["path"], "Notes/n0005.md", "{r}");
    assert_eq!(r["ranking"]["embedded"], 1, "only the edited chunk: {r}");
    assert_eq!(r["ranking"]["dense_coverage"], 1.0, "{r}");
    let r = ask("garden bed number 9");
    let paths: Vec<&str> = r["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert!(!paths.contains(&"Notes/n0009.md"), "{paths:?}");
}

/// `serve` embeds the rest of the vault in the background after a search
/// found chunks without a vector, shows its progress on `/metrics`, and a
/// server killed midway (SIGKILL) resumes where it stopped.
#[test]
fn serve_embeds_in_the_background_and_resumes_after_a_kill() {
    let Some(model) = crate::support::embed_model() else {
        return;
    };
    let d = tempdir();
    big_vault(d.path(), 150);
    let model_s = model.to_string_lossy().to_string();
    let env = [("MARKTOFLOW_EMBED_MODEL", model_s.as_str())];
    let metric = |addr: &str, name: &str| -> Option<f64> {
        let text = crate::support::http(addr, "GET", "/metrics", &[], b"").body;
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    let mut s = crate::support::serve(d.path(), &["now.md", "--allow-read", &model_s], &env);
    let r = crate::support::post(
        &s.addr,
        "/ask",
        serde_json::json!({"q": "API key for Apollo"}),
    );
    let out = r.json();
    assert_eq!(out["outputs"]["r"]["hits"][0]["path"], "Apollo.md", "{out}");
    assert!(
        out["outputs"]["r"]["ranking"]["dense_coverage"]
            .as_f64()
            .unwrap()
            < 1.0
    );
    // Background embedding is under way: its first part reaches the journal.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let journal = loop {
        if let Some(j) =
            vectors_file(d.path()).filter(|p| p.extension().is_some_and(|e| e == "add"))
        {
            if std::fs::metadata(&j).is_ok_and(|m| m.len() > 100_000) {
                break j;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no background embedding"
        );
        assert!(metric(&s.addr, "marktoflow_background_total").is_some());
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // The task shows 0 of 0 until it reports its first part, which may be
    // after that part reached the journal: its total, once reported.
    let mut total = 0.0;
    crate::support::wait_for("the embedding reports its total", || {
        total = metric(&s.addr, "marktoflow_background_total").unwrap_or(0.0);
        total > 0.0
    });
    // The console's list says so too, with that total.
    let mut listed = serde_json::Value::Null;
    crate::support::wait_for("the console lists the embedding with its total", || {
        let w = crate::support::http(&s.addr, "GET", "/workflows", &[], b"").json();
        listed = w["background"].clone();
        listed.as_array().into_iter().flatten().any(|t| {
            t["running"] == true
                && t["task"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("embedding "))
                && t["total"].as_u64().is_some_and(|n| n > 0)
        })
    });
    assert!(listed.as_array().is_some_and(|l| !l.is_empty()), "{listed}");
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let kept = std::fs::metadata(&journal).unwrap().len();
    // A new server: the first search starts the rest, not everything.
    let s = crate::support::serve(d.path(), &["now.md", "--allow-read", &model_s], &env);
    crate::support::post(&s.addr, "/ask", serde_json::json!({"q": "garden"}));
    // A note edited while the rest is embedded: found with its new text,
    // at once, never with the old.
    std::fs::write(
        d.path().join("kb/Notes/n0042.md"),
        "# Note 42\n\nThe quokka colony moved to the greenhouse.\n",
    )
    .unwrap();
    // The server re-reads the folder at most once a second.
    let asked = std::time::Instant::now();
    let hit = loop {
        let r = crate::support::post(
            &s.addr,
            "/ask",
            serde_json::json!({"q": "Where did the quokka colony move?"}),
        );
        let hits = r.json()["outputs"]["r"]["hits"].clone();
        let found = hits
            .as_array()
            .and_then(|h| h.iter().find(|h| h["path"] == "Notes/n0042.md").cloned());
        if let Some(h) = found {
            break h;
        }
        assert!(
            asked.elapsed().as_secs() < 10,
            "the edit was not found: {hits}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        hit["text"].as_str().unwrap().contains("greenhouse"),
        "{hit}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while metric(&s.addr, "marktoflow_background_running") != Some(0.0) {
        assert!(
            std::time::Instant::now() < deadline,
            "background embedding did not end"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let resumed = metric(&s.addr, "marktoflow_background_total").unwrap();
    assert!(
        resumed < total,
        "resumed with {resumed} left of {total} ({kept} bytes kept)"
    );
    assert_eq!(metric(&s.addr, "marktoflow_background_done"), Some(resumed));
    drop(s);
    let r = run(cmd(d.path())
        .env("MARKTOFLOW_EMBED_MODEL", &model)
        .args(["kb", "status", "kb", "--json"]));
    let v = r.json()["vectors"].clone();
    assert_eq!(v["covered"], v["chunks"], "{v}");
}

/// A vector file cut short under a server is not read as zeros: the search
/// that meets it fails, saying so (retryable), and the next one answers as
/// before (issue 49, item 9).
#[test]
fn a_vector_file_cut_short_under_a_server_fails_one_search_clearly() {
    let Some(model) = crate::support::embed_model() else {
        return;
    };
    let d = tempdir();
    vault(d.path());
    let model_s = model.to_str().unwrap().to_string();
    // Embedded once, by a run: the server maps the file it wrote.
    let r = run(cmd(d.path())
        .env("MARKTOFLOW_EMBED_MODEL", &model)
        .args([
            "run",
            "vs.md",
            "--json",
            "--quiet",
            "--allow-read",
            &model_s,
        ])
        .args(["--input", "q=credentials for the service"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::write(
        d.path().join("hook.md"),
        include_str!("fixtures/dense/vs.md").replace(
            "workflow: {id: vs}",
            "workflow: {id: hook}\ntriggers: [{type: webhook, path: /vs}]",
        ),
    )
    .unwrap();
    let s = crate::support::serve(
        d.path(),
        &["hook.md", "--allow-read", &model_s],
        &[("MARKTOFLOW_EMBED_MODEL", model_s.as_str())],
    );
    let ask = || {
        crate::support::post(
            &s.addr,
            "/vs",
            serde_json::json!({"q": "credentials for the service"}),
        )
    };
    let first = ask();
    assert_eq!(first.status, 200, "{}", first.body);
    let top = first.json()["outputs"]["r"]["hits"][0]["path"].clone();
    assert_eq!(top, "Work/Apollo.md");
    let mut cut = 0;
    let mut dirs = vec![d.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                dirs.push(p);
            } else if name.starts_with("vectors-") && name.ends_with(".bin") {
                let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
                f.set_len(0).unwrap();
                cut += 1;
            }
        }
    }
    assert!(cut > 0, "a vector file was written");
    let damaged = ask();
    assert_eq!(damaged.status, 500, "{}", damaged.body);
    let message = damaged.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("were found damaged"), "{message}");
    let again = ask();
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["outputs"]["r"]["hits"][0]["path"], top);
}
