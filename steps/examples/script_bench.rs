//! Times the seed workflow's search step (its JavaScript verbatim) over a
//! generated knowledge base, in boa (through `ScriptHost`, i.e. a worker
//! process) and in `node`, and prints both.
//!
//!     cargo run --release -p marktoflow-steps --example script_bench -- [notes] [runs]
//!
//! The seed is read from `../shared/seeds/000_fd4e5c8ba954ba6b.txt` beside the
//! repository (override with MTF_SEED=path); node from PATH (or MTF_NODE).

use marktoflow_steps::core::sandbox::Sandbox;
use marktoflow_steps::core::signals::{Cancel, LogLine};
use marktoflow_steps::script::{worker_main, ScriptHost, ScriptJob, WORKER_ARG};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const WORDS: &[&str] = &[
    "the", "project", "meeting", "notes", "team", "plan", "weekly", "update", "status", "design",
    "customer", "feature", "release", "sprint", "goal", "idea", "research", "draft", "summary",
    "action", "item", "follow", "up", "email", "call", "review", "budget", "deadline", "launch",
    "roadmap", "metric", "quarter", "hiring", "travel", "health", "reading", "book", "habit",
];
const RARE: &[&str] = &["Apollo", "Priya"];

fn seed_search_code(seed: &Path) -> String {
    let text = std::fs::read_to_string(seed)
        .unwrap_or_else(|e| panic!("cannot read the seed {}: {e}", seed.display()));
    let block = text
        .split("## Step 3: Search Knowledge Base")
        .nth(1)
        .expect("step 3");
    let body = block.split("```yaml\n").nth(1).expect("yaml block");
    let body = body
        .split("\noutput_variable: search_results")
        .next()
        .unwrap();
    let code = body.split("  code: |\n").nth(1).expect("code");
    code.split('\n')
        .map(|l| l.strip_prefix("    ").unwrap_or(l.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `notes` markdown files of 1–3 KB in nested folders. The search terms are
/// common words, but `review`/`budget`/`deadline` are rare enough (and the
/// entities rarer) that the search walks the whole tree, as in the worst case.
fn generate(dir: &Path, notes: usize) {
    let _ = std::fs::remove_dir_all(dir);
    let mut rng = fastrand::Rng::with_seed(1);
    let folders = [
        "Work/Projects/Apollo",
        "Work/Projects/Hermes",
        "Work/Meetings",
        "Work/Clients",
        "Personal/Journal",
        "Personal/Health",
        "Personal/Books",
        "Inbox",
        "Archive/2023",
        "Archive/2024",
        "Areas/Finance",
        "Areas/Home",
    ];
    for i in 0..notes {
        let folder = folders[i % folders.len()];
        let d = dir.join(folder);
        std::fs::create_dir_all(&d).unwrap();
        let target = 1024 + rng.usize(..2048);
        let mut text = format!("# Note {i} {}\n\n", WORDS[rng.usize(..WORDS.len())]);
        while text.len() < target {
            let w = if rng.usize(..4000) == 0 {
                RARE[rng.usize(..RARE.len())]
            } else {
                let w = WORDS[rng.usize(..WORDS.len())];
                // Keep the search terms rare.
                if matches!(w, "review" | "budget" | "deadline") && rng.usize(..50) != 0 {
                    "note"
                } else {
                    w
                }
            };
            text.push_str(w);
            text.push(if rng.usize(..12) == 0 { '\n' } else { ' ' });
        }
        std::fs::write(d.join(format!("note-{i:05}.md")), text).unwrap();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(WORKER_ARG) {
        std::process::exit(worker_main());
    }
    let notes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let runs: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(15);
    let seed = std::env::var_os("MTF_SEED")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/seeds/000_fd4e5c8ba954ba6b.txt")
        });
    let code = seed_search_code(&seed);
    let work = std::env::temp_dir().join(format!("mtf-script-bench-{}", std::process::id()));
    let kb = work.join("kb");
    generate(&kb, notes);
    // Two queries: the bench's terms (the walk stops once 10 notes matched),
    // and terms found nowhere (every note is read and scanned).
    for (label, terms, entities) in [
        (
            "typical query",
            json!(["deadline", "budget", "review"]),
            json!(["Apollo", "Priya"]),
        ),
        (
            "no match: full walk",
            json!(["zebra", "quokka"]),
            json!(["Nobody"]),
        ),
    ] {
        let context = json!({
            "inputs": {"knowledge_base": kb.to_string_lossy(), "search_scope": "all", "max_results": 5},
            "query_analysis": {"search_terms": terms, "entities": entities,
                               "query_type": "factual", "expected_location": null}
        });
        println!("== {label}, {notes} notes");
        compare(&code, &context, &work, &kb, runs);
    }
    let _ = std::fs::remove_dir_all(&work);
}

fn compare(code: &str, context: &serde_json::Value, work: &Path, kb: &Path, runs: usize) {
    let code = code.to_string();

    // boa, through the worker pool.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let host = ScriptHost::new(std::env::current_exe().unwrap());
    let sandbox = Sandbox::new(work.to_path_buf(), vec![kb.to_path_buf()], vec![]);
    let run_once = || {
        let job = ScriptJob {
            globals: Default::default(),
            code: code.clone(),
            context: context.clone(),
            sandbox: sandbox.clone(),
            timeout: None,
        };
        let t = Instant::now();
        let r = rt.block_on(host.run(job, &|_l: LogLine| {}, &Cancel::default()));
        (t.elapsed(), r.expect("search step failed"))
    };
    let (cold, first) = run_once();
    let mut boa = Vec::new();
    for _ in 0..runs {
        boa.push(run_once().0);
    }
    println!(
        "boa (marktoflow worker): first run incl. worker spawn {:.1} ms; warm median {:.1} ms over {runs} runs; count={} found={}",
        cold.as_secs_f64() * 1e3,
        median(boa.clone()).as_secs_f64() * 1e3,
        first["count"],
        first["found"],
    );

    // node, same code and context.
    let node = std::env::var("MTF_NODE").unwrap_or_else(|_| "node".into());
    let js = work.join("search.js");
    std::fs::write(
        &js,
        format!(
            "const {{ performance }} = require('perf_hooks');\nconst context = {context};\n\
             const t0 = performance.now();\n(async function() {{\n{code}\n}})().then(r => {{\n\
             console.log(JSON.stringify({{ms: performance.now() - t0, count: r.count}}));\n}});\n"
        ),
    )
    .unwrap();
    let mut inproc = Vec::new();
    let mut whole = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let out = std::process::Command::new(&node).arg(&js).output();
        let Ok(out) = out else {
            println!("node not found: no comparison");
            break;
        };
        whole.push(t.elapsed());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("node output");
        inproc.push(Duration::from_secs_f64(v["ms"].as_f64().unwrap() / 1e3));
    }
    if !inproc.is_empty() {
        let n = median(inproc).as_secs_f64() * 1e3;
        let w = median(whole).as_secs_f64() * 1e3;
        let b = median(boa).as_secs_f64() * 1e3;
        println!("node: script alone median {n:.1} ms; whole process {w:.1} ms");
        println!(
            "ratio boa/node: {:.2}x (script alone), {:.2}x (boa warm run vs node whole process)",
            b / n,
            b / w
        );
    }
}
