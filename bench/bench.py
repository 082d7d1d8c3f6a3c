#!/usr/bin/env python3
"""marktoflow benchmarks: prints figures, asserts nothing.

    python3 bench/bench.py            # builds release, runs everything
    python3 bench/bench.py --runs 30  # fewer repetitions

1. Cold `marktoflow run` of a one-step `core.set` workflow: wall time
   (median, p90) and peak RSS of the process.
2. The seed's search step (its JavaScript verbatim, taken from
   ../shared/seeds/000_fd4e5c8ba954ba6b.txt) over a generated 2,000-note
   knowledge base: marktoflow (boa) against `node` running the same code,
   side by side in one run, alternating. Both whole-process wall times and
   in-process times (the step's own duration vs. node's performance.now()).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = os.path.join(os.path.dirname(REPO), "shared", "seeds", "000_fd4e5c8ba954ba6b.txt")
BIN = os.path.join(REPO, "target", "release", "marktoflow")


def measure(argv, cwd, env=None):
    """Runs argv; returns (wall seconds, peak RSS in MB, stdout)."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {' '.join(argv)}")
    return wall, usage.ru_maxrss / 1024.0, out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def seed_search_code():
    text = open(SEED, encoding="utf-8").read()
    block = text.split("## Step 3: Search Knowledge Base", 1)[1]
    body = block.split("```yaml\n", 1)[1].split("\noutput_variable: search_results", 1)[0]
    code = body.split("  code: |\n", 1)[1]
    return "\n".join(line[4:] if line.startswith("    ") else line.strip() for line in code.split("\n"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--no-build", action="store_true")
    a = ap.parse_args()
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "marktoflow"], cwd=REPO, check=True)
    work = tempfile.mkdtemp(prefix="mtf-bench-")
    env = dict(os.environ, NO_COLOR="1")
    try:
        # 1. Cold start.
        wf = os.path.join(work, "one.md")
        with open(wf, "w") as f:
            f.write("---\nworkflow: {id: one}\n---\n\n```yaml\naction: core.set\ninputs: {greeting: hello}\noutput_variable: out\n```\n")
        # Alternating with the binary's own `--version` (the floor: process
        # start and exit) and with `--no-store`, so machine noise hits all alike.
        walls, rss, floor, unrecorded = [], [], [], []
        for _ in range(a.runs):
            w, _, _ = measure([BIN, "--version"], work, env)
            floor.append(w * 1000)
            w, r, _ = measure([BIN, "run", wf, "--quiet"], work, env)
            walls.append(w * 1000)
            rss.append(r)
            w, _, _ = measure([BIN, "run", wf, "--quiet", "--no-store"], work, env)
            unrecorded.append(w * 1000)
        print(f"cold run, one core.set step, recorded in the store ({a.runs} runs): median {statistics.median(walls):.2f} ms, "
              f"p90 {pct(walls, 0.9):.2f} ms, peak RSS {max(rss):.1f} MB (median {statistics.median(rss):.1f} MB)")
        print(f"  same run with --no-store: median {statistics.median(unrecorded):.2f} ms; "
              f"`marktoflow --version`: median {statistics.median(floor):.2f} ms")
        print(f"  ratio recorded run / --version: {statistics.median(walls) / statistics.median(floor):.2f}x "
              f"(unrecorded: {statistics.median(unrecorded) / statistics.median(floor):.2f}x)")

        # 2. The seed's search step, marktoflow vs node.
        node = shutil.which("node")
        kb = os.path.join(work, "kb")
        subprocess.run([sys.executable, os.path.join(REPO, "bench", "gen_kb.py"), kb, "--notes", str(a.notes), "--seed", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        code = seed_search_code()
        scenarios = [
            ("typical query (the walk stops after 10 matches)",
             {"search_terms": ["deadline", "budget", "review"], "entities": ["Apollo", "Priya"],
              "query_type": "factual", "expected_location": None}),
            ("no match (every note is read)",
             {"search_terms": ["zzqx-nothing"], "entities": [], "query_type": "factual", "expected_location": None}),
        ]
        indented = "\n".join("    " + l for l in code.split("\n"))
        runs = max(5, a.runs // 5)
        for label, analysis in scenarios:
            inputs = {"knowledge_base": kb, "search_scope": "all", "max_results": 5}
            ctx = dict(inputs=inputs, query_analysis=analysis)
            with open(os.path.join(work, "search.md"), "w") as f:
                f.write("---\nworkflow: {id: seed-search}\n---\n\n```yaml\naction: script.execute\ninputs:\n"
                        f"  context: {json.dumps(ctx)}\n  code: |\n{indented}\noutput_variable: search_results\n```\n")
            with open(os.path.join(work, "search.js"), "w") as f:
                f.write("const { performance } = require('perf_hooks');\n"
                        f"const context = {json.dumps(ctx)};\n"
                        "const t0 = performance.now();\n"
                        f"(async function() {{\n{code}\n}})().then(r => {{\n"
                        "  const ms = performance.now() - t0;\n"
                        "  console.log(JSON.stringify({ms, count: r.count}));\n});\n")
            ours, ours_step, theirs, theirs_inproc = [], [], [], []
            for _ in range(runs):
                w, _, out = measure([BIN, "run", "search.md", "--json", "--quiet", "--allow-read", kb], work, env)
                doc = json.loads(out)
                count = doc["outputs"]["search_results"]["count"]
                ours.append(w * 1000)
                ours_step.append(doc["steps"][0]["duration_ms"])
                if node:
                    w, _, out = measure([node, "search.js"], work, env)
                    theirs.append(w * 1000)
                    r = json.loads(out)
                    theirs_inproc.append(r["ms"])
                    assert r["count"] == count, "marktoflow and node disagree on the result"
            print(f"seed search step over {a.notes} notes, {label} ({runs} runs each, alternating; {count} results):")
            print(f"  marktoflow run (whole process): median {statistics.median(ours):.1f} ms; step alone {statistics.median(ours_step):.1f} ms")
            if node:
                print(f"  node search.js (whole process): median {statistics.median(theirs):.1f} ms; script alone {statistics.median(theirs_inproc):.1f} ms")
                print(f"  ratio marktoflow/node: whole process {statistics.median(ours) / statistics.median(theirs):.2f}x, "
                      f"script alone {statistics.median(ours_step) / statistics.median(theirs_inproc):.2f}x")
            else:
                print("  node not found: no comparison")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
