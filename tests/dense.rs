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

/// The first `vectors-*.bin` below `dir`: the cache a dense search saves
/// as it embeds.
fn vectors_file(dir: &Path) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = vectors_file(&p) {
                return Some(f);
            }
        } else if p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("vectors-") && n.ends_with(".bin"))
        {
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
    // The cache is first saved after the first part: embedding is under way.
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
