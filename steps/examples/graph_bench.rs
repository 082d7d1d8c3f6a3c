//! Times the knowledge graph's build over a folder of notes, in parts: the
//! notes read into memory, their edges read (one thread), and the graph
//! written from nothing and read back; prints each.
//!
//!     cargo run --release -p marktoflow-steps --example graph_bench -- VAULT
//!
//! `GRAPH_BENCH_SCALING=1` (no vault) instead reads notes of odd shapes
//! (one line of thousands of sentences, a paragraph of thousands of lines,
//! a sentence of thousands of clauses, a line of thousands of links…) at
//! two sizes, the second twice the first: a time ratio near 2 is a
//! reading in linear time, near 4 a quadratic one.

use marktoflow_steps::retrieval::graph::{
    extract,
    store::{GraphStore, ReadNote},
};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

// The binary's allocator (runner/src/main.rs; not its arenas' size).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).expect("read the folder") {
        let p = e.expect("a folder entry").path();
        if p.is_dir() {
            walk(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read_to_string(&p).unwrap_or_default()));
        }
    }
}

/// Notes of odd shapes, `n` parts each: name and text.
fn odd_notes(n: usize) -> Vec<(&'static str, String)> {
    let each = |f: &dyn Fn(usize) -> String, sep: &str| (0..n).map(f).collect::<Vec<_>>().join(sep);
    vec![
        (
            "sentences on one line",
            each(
                &|i| format!("S{i} depends on S{}. It is owned by T{}.", i + 1, i % 50),
                " ",
            ),
        ),
        (
            "lines of one paragraph",
            each(&|i| format!("S{i} depends on S{}.", i + 1), "\n"),
        ),
        (
            "clauses of one sentence",
            format!("Alpha {}.", each(&|i| format!("depends on S{i}"), " and ")),
        ),
        (
            "names of one list",
            format!("Alpha depends on {}.", each(&|i| format!("S{i}"), ", ")),
        ),
        (
            "links on one line",
            format!("Alpha depends on {}.", each(&|i| format!("[[S{i}]]"), " ")),
        ),
        (
            "items under a label",
            format!("Dependencies:\n{}", each(&|i| format!("- [[S{i}]]"), "\n")),
        ),
        (
            "rows of a table",
            format!(
                "| Service | Owner |\n|---|---|\n{}",
                each(&|i| format!("| S{i} | T{} |", i % 50), "\n")
            ),
        ),
        ("key lines", each(&|i| format!("Owner: T{i}"), "\n")),
        ("headings", each(&|i| format!("## Depends on S{i}"), "\n\n")),
        (
            "a frontmatter list",
            format!(
                "---\ndepends_on: [{}]\n---\n",
                each(&|i| format!("S{i}"), ", ")
            ),
        ),
        ("one word, repeated", "owns ".repeat(n * 4)),
    ]
}

/// Each odd shape read at `n` and `2n` parts: the seconds, and their ratio.
fn scaling() {
    let n = 20_000;
    let time = |text: &str| {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            std::hint::black_box(extract::note("odd.md", &format!("# Odd\n\n{text}\n")));
            best = best.min(t.elapsed().as_secs_f64());
        }
        best
    };
    for ((what, small), (_, big)) in odd_notes(n).into_iter().zip(odd_notes(2 * n)) {
        let (a, b) = (time(&small), time(&big));
        println!(
            "{what:<26} {:>7.1} KB {a:.4} s, {:>7.1} KB {b:.4} s, ratio {:.2}",
            small.len() as f64 / 1e3,
            big.len() as f64 / 1e3,
            b / a.max(1e-9)
        );
    }
}

fn main() {
    if std::env::var_os("GRAPH_BENCH_SCALING").is_some() {
        return scaling();
    }
    let vault = std::env::args().nth(1).expect("usage: graph_bench VAULT");
    let root = Path::new(&vault);
    let mut notes = Vec::new();
    walk(root, root, &mut notes);
    notes.sort();
    let bytes: usize = notes.iter().map(|(_, t)| t.len()).sum();
    println!("{} notes, {:.1} MB", notes.len(), bytes as f64 / 1e6);

    // Every edge as read, a line each, to compare two builds' readings.
    if let Some(out) = std::env::var_os("GRAPH_BENCH_DUMP") {
        let mut lines = String::new();
        for (p, t) in &notes {
            let g = extract::note(p, t);
            lines.push_str(&format!("{p}\t{}\t{:?}\t{}\n", g.name, g.aliases, g.tenant));
            for e in g.edges {
                lines.push_str(&format!(
                    "{p}:{}\t{}\t{}\t{}\t{}\t{}\n",
                    e.line, e.from, e.rel, e.to, e.how, e.text
                ));
            }
        }
        std::fs::write(out, lines).expect("write the dump");
        return;
    }
    // The best of five: the machine is shared.
    let mut best = f64::MAX;
    let mut edges = 0;
    for _ in 0..5 {
        let t = Instant::now();
        edges = notes
            .iter()
            .map(|(p, t)| extract::note(p, t).edges.len())
            .sum();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("read the edges, one thread: {best:.3} s (best of 5), {edges} edges");
    if std::env::var_os("GRAPH_BENCH_EXTRACT_ONLY").is_some() {
        return;
    }

    let texts: HashMap<&str, &str> = notes
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let files: Vec<(String, String)> = notes
        .iter()
        .map(|(p, t)| (p.clone(), format!("{:x}", t.len())))
        .collect();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let t = Instant::now();
    let mut g = GraphStore::open(Some(dir.path())).expect("open the graph");
    let s = g
        .sync(&files, &|p| texts.get(p).map(|t| t.to_string()), &|| false)
        .expect("sync")
        .expect("not stopped");
    println!(
        "built from nothing (read on threads, written): {:.3} s, {} edges",
        t.elapsed().as_secs_f64(),
        s.edges
    );
    let size: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    println!("on disk: {:.1} MB", size as f64 / 1e6);
    let t = Instant::now();
    let mut m = GraphStore::open(None).expect("open a graph in memory");
    m.sync(&files, &|p| texts.get(p).map(|t| t.to_string()), &|| false)
        .expect("sync")
        .expect("not stopped");
    println!(
        "built from nothing in memory: {:.3} s",
        t.elapsed().as_secs_f64()
    );
    // As `kb index` builds it: each note read ahead on one thread (its
    // edges and their keys), then the graph made from them.
    let t = Instant::now();
    let ahead: Vec<ReadNote> = notes
        .iter()
        .zip(&files)
        .map(|((p, text), (_, h))| ReadNote::read(p, h, text))
        .collect();
    let read_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut m = GraphStore::open(None).expect("open a graph in memory");
    m.sync_with(&files, ahead, &|_| None, &|| false)
        .expect("sync")
        .expect("not stopped");
    println!(
        "read ahead, one thread: {read_s:.3} s; the graph made from what was read ahead: {:.3} s",
        t.elapsed().as_secs_f64()
    );
    // One note changed: read again alone, the file written again.
    let mut changed = files.clone();
    changed[0].1.push('x');
    let t = Instant::now();
    let s = g
        .sync(&changed, &|p| texts.get(p).map(|t| t.to_string()), &|| {
            false
        })
        .expect("sync")
        .expect("not stopped");
    println!(
        "one note changed: {:.3} s ({} read)",
        t.elapsed().as_secs_f64(),
        s.read
    );
    let t = Instant::now();
    let g = GraphStore::open(Some(dir.path())).expect("open the graph");
    let n = g.edges_at(&["apollo".to_string()], true).len();
    println!(
        "opened and one node's edges: {:.4} s ({n} edges)",
        t.elapsed().as_secs_f64()
    );
}
