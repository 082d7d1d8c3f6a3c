#!/usr/bin/env python3
"""Retrieval benchmarks (kb.index / kb.search and the LifeOS flagship): prints
figures, asserts nothing.

    python3 bench/kb_bench.py                 # builds release, 10,000 notes
    python3 bench/kb_bench.py --notes 2000 --no-build

1. Cold `kb.index` of a generated vault (bench/gen_kb.py, in /tmp): the
   step's own time, the process's wall time and peak RSS, and the index size.
2. Re-index after one changed note, and after no change (walk + stat only).
3. `kb.search` latency in process (its `took_ms`): p50/p99 over a set of
   queries (words, phrases, prefixes, operators), with the freshness check
   off (`refresh: never`), then with `refresh: always` (adds walk + stat).
4. The flagship end to end against a fake LLM that answers at once (a
   local HTTP server): the indexed workflow
   (workflows/lifeos/retrieval-indexed.md) by words only (BM25) against
   the seed's file scan (workflows/lifeos/retrieval.md), first as one
   `marktoflow run` per question (a fresh process: start, open the index,
   walk + stat the folder), then served (`marktoflow serve`, one POST per
   question).
5. With `--model DIR` (all-MiniLM-L6-v2): the same flagship hybrid (BM25 +
   dense search over every chunk), fresh process and served. Its first run
   embeds the vault (about 40 minutes of two cores for 10,000 notes);
   `--home` keeps the state folder, vectors included, for the next time:

    python3 bench/kb_bench.py --model ~/.local/share/marktoflow/models/all-minilm-l6-v2 \
        --home /tmp/mtf-kb-home

Every part but 5 runs in a fresh state folder, so the index is built cold.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "marktoflow")

QUERIES = [
    "deadline", "Apollo rate limit", "Priya Natarajan", "\"design review\"", "migrat*",
    "budget estimate Hermes", "in:work type:task deadline", "tag:kepler status",
    "date:2026-04 journal", "security review webhook retry policy", "in:personal river",
    "what is the API key rotation plan for Zephyr", "load test latency", "sourdough",
    "type:meeting \"partner call\"", "Lukas Berg Orion roadmap", "-risky rollout plan",
    "database cutover rehearsal", "Kyoto", "incident report Atlas",
]

QUESTIONS = [
    "What is the deadline for the Apollo rollout plan?",
    "What did Priya Natarajan say about the Hermes budget?",
    "Summarize the Zephyr security review",
    "When is the database cutover for Atlas?",
    "What do I know about Mei Chen?",
]


def measure(argv, cwd, env=None):
    """Runs argv; returns (wall ms, stdout)."""
    start = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, capture_output=True, env=env)
    wall = (time.perf_counter() - start) * 1000
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {' '.join(argv)}\n{p.stderr.decode()[-2000:]}")
    return wall, p.stdout


def run_rss(argv, cwd, env):
    """Runs argv; returns (wall ms, peak RSS MB, stdout)."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(argv)}")
    return wall, usage.ru_maxrss / 1024.0, out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def du(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(d, f))
    return total


class FakeLlm(BaseHTTPRequestHandler):
    """Anthropic Messages API, answering at once: a JSON analysis for the
    flagship's step 1, a formatted answer otherwise."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = "".join(
            c["text"] if isinstance(c, dict) else c
            for m in body.get("messages", [])
            for c in (m["content"] if isinstance(m["content"], list) else [m["content"]])
        )
        if "Analyze this query" in prompt:
            q = prompt.split('Query: "', 1)[1].split('"', 1)[0]
            words = [w.strip("?.,") for w in q.split()]
            analysis = {
                "search_terms": [w.lower() for w in words if len(w) > 3][:5],
                "entities": [w for w in words[1:] if w[:1].isupper()],
                "time_context": None, "query_type": "factual", "expected_location": None,
            }
            text = "```json\n" + json.dumps(analysis) + "\n```"
        else:
            text = "Answer: from the notes.\nSources: [a.md]\nConfidence: high"
        out = json.dumps({"id": "m", "type": "message", "role": "assistant", "model": body.get("model"),
                          "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                          "usage": {"input_tokens": 1, "output_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def step_wf(path, action, inputs):
    with open(path, "w") as f:
        f.write("---\nworkflow: {id: b}\n---\n\n```yaml\naction: " + action + "\ninputs: "
                + json.dumps(inputs) + "\noutput_variable: out\n```\n")


def fresh_flagship(label, wfile, kb, args, env, per_question):
    """One `marktoflow run` per question; prints per-question wall times."""
    walls, steps = [], []
    for q in QUESTIONS:
        for _ in range(per_question):
            wall, out = measure([BIN, "run", wfile, "--input", f"query={q}", "--input", f"knowledge_base={kb}"] + args,
                                REPO, env)
            doc = json.loads(out)
            walls.append(wall)
            steps.append(sum(s["duration_ms"] for s in doc["steps"] if s["name"].startswith("Step 3")))
    print(f"flagship {label} ({len(walls)} runs, fake LLM): per question median {statistics.median(walls):.1f} ms, "
          f"p90 {pct(walls, 0.9):.1f} ms; search step median {statistics.median(steps):.1f} ms")


def served_flagship(label, wfile, route, kb, env, per_question):
    """`marktoflow serve` keeps the index (and vectors) open between requests
    (it re-checks the folder at most once a second); one POST per question."""
    import socket
    import urllib.request
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    proc = subprocess.Popen([BIN, "serve", wfile, "--port", str(port), "--allow-read", kb], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        walls = []
        for i in range(len(QUESTIONS) * per_question * 2):
            body = json.dumps({"query": QUESTIONS[i % len(QUESTIONS)], "knowledge_base": kb}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}{route}", data=body,
                                         headers={"Content-Type": "application/json"})
            t0 = time.perf_counter()
            with urllib.request.urlopen(req) as r:
                doc = json.loads(r.read())
            walls.append((time.perf_counter() - t0) * 1000)
            assert doc["status"] == "completed", doc
        warm = walls[1:]
        print(f"flagship {label} served ({len(warm)} requests after the first, fake LLM): per question median "
              f"{statistics.median(warm):.1f} ms, p90 {pct(warm, 0.9):.1f} ms, p99 {pct(warm, 0.99):.1f} ms; "
              f"first request {walls[0]:.1f} ms")
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10000)
    ap.add_argument("--kb", default=None, help="vault folder (default /tmp/mtf-kb-NOTES)")
    ap.add_argument("--bytes", default="3072-7168",
                    help="note size range for gen_kb.py (default 3072-7168: about 50 MB for 10,000 notes)")
    ap.add_argument("--rounds", type=int, default=10, help="passes over the query set")
    ap.add_argument("--questions", type=int, default=3, help="flagship runs per question")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--bin", default=None, help="the marktoflow binary (default target/release)")
    ap.add_argument("--model", default=None, help="the embedding model folder: adds the hybrid flagship")
    ap.add_argument("--home", default=None,
                    help="state folder for the hybrid flagship (default: a fresh one); kept, so its vectors are reused")
    a = ap.parse_args()
    global BIN
    if a.bin:
        BIN, a.no_build = os.path.abspath(a.bin), True
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "marktoflow"], cwd=REPO, check=True)
    kb = a.kb or f"/tmp/mtf-kb-{a.notes}-{a.bytes}"
    if not os.path.isdir(kb):
        subprocess.run([sys.executable, os.path.join(REPO, "bench", "gen_kb.py"), kb, "--notes", str(a.notes), "--seed", "1",
                        "--bytes", a.bytes],
                       check=True, stdout=subprocess.DEVNULL)
    print(f"vault: {kb}, {a.notes} notes, {du(kb) / 1e6:.1f} MB")
    work = tempfile.mkdtemp(prefix="mtf-kbbench-")
    # A fresh state folder (the index is built cold) and no embedding model
    # (the flagship searches by words) unless part 5 asks for one.
    os.makedirs(os.path.join(work, "no-models"))
    env = {k: v for k, v in os.environ.items() if k != "MARKTOFLOW_EMBED_MODEL"}
    env.update(NO_COLOR="1", MARKTOFLOW_HOME=os.path.join(work, "home"),
               MARKTOFLOW_MODELS_DIR=os.path.join(work, "no-models"))
    args = ["--json", "--quiet", "--allow-read", kb]
    try:
        # 1. Cold index.
        wf = os.path.join(work, "index.md")
        step_wf(wf, "kb.index", {"kb": kb})
        wall, rss, out = run_rss([BIN, "run", wf] + args, work, env)
        o = json.loads(out)["steps"][0]["output"]
        print(f"cold kb.index: {o['files']} files, {o['chunks']} chunks in {o['duration_ms']:.0f} ms "
              f"(process {wall:.0f} ms, peak RSS {rss:.0f} MB); index size {du(o['index_dir']) / 1e6:.1f} MB")

        # 2. Re-index: one changed note, then no change.
        notes = sorted(os.path.join(d, f) for d, _, fs in os.walk(kb) if ".marktoflow" not in d for f in fs if f.endswith(".md"))
        changed, unchanged = [], []
        for i in range(5):
            with open(notes[i * 7], "a") as f:
                f.write(f"\nEdited for the benchmark, pass {i}.\n")
            wall, out = measure([BIN, "run", wf] + args, work, env)
            o = json.loads(out)["steps"][0]["output"]
            assert o["updated"] == 1, o
            changed.append(o["duration_ms"])
            wall2, out = measure([BIN, "run", wf] + args, work, env)
            unchanged.append(json.loads(out)["steps"][0]["output"]["duration_ms"])
        print(f"re-index after one changed note: median {statistics.median(changed):.1f} ms "
              f"(max {max(changed):.1f}); with no change (walk + stat): median {statistics.median(unchanged):.1f} ms")

        # 3. Search latency in process.
        for refresh in ["never", "always"]:
            qs = QUERIES * (a.rounds if refresh == "never" else 1)
            loop = os.path.join(work, "search.md")
            with open(loop, "w") as f:
                f.write("---\nworkflow: {id: s}\n---\n\n```yaml\ntype: for_each\nitems: " + json.dumps(qs)
                        + "\nitem_variable: q\nsteps:\n  - action: kb.search\n    inputs:\n"
                        + f"      kb: {json.dumps(kb)}\n      query: '{{{{ q }}}}'\n      top_k: 10\n"
                        + f"      refresh: {refresh}\n    output_variable: r\n"
                        + "  - action: script.execute\n    inputs:\n      code: |\n"
                        + "        const t = context.took || []; t.push(context.r.took_ms); return t;\n"
                        + "    output_variable: took\n```\n\n```yaml\naction: workflow.set_outputs\n"
                        + "inputs:\n  took: '{{ took }}'\n```\n")
            wall, rss, out = run_rss([BIN, "run", loop] + args, work, env)
            took = json.loads(out)["outputs"]["took"]
            warm = took[len(QUERIES):] if refresh == "never" and len(took) > len(QUERIES) else took
            print(f"kb.search, refresh: {refresh} ({len(warm)} searches, top_k 10): p50 {pct(warm, 0.5):.3f} ms, "
                  f"p99 {pct(warm, 0.99):.3f} ms, max {max(warm):.3f} ms; first search {took[0]:.2f} ms; "
                  f"process peak RSS {rss:.0f} MB")

        # 4. The flagship, indexed vs the seed's scan.
        srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeLlm)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        fenv = dict(env, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{srv.server_address[1]}", ANTHROPIC_API_KEY="bench")
        flagships = [("indexed", "workflows/lifeos/retrieval-indexed.md", "/lifeos/query-indexed"),
                     ("seed scan", "workflows/lifeos/retrieval.md", "/lifeos/query")]
        for label, wfile, _ in flagships:
            fresh_flagship(label, wfile, kb, args, fenv, a.questions)
        for label, wfile, route in flagships:
            served_flagship(label, wfile, route, kb, fenv, a.questions)

        # 5. The flagship hybrid: dense search over every chunk as well.
        if a.model:
            home = os.path.abspath(a.home) if a.home else os.path.join(work, "home-dense")
            henv = dict(fenv, MARKTOFLOW_HOME=home, MARKTOFLOW_EMBED_MODEL=os.path.abspath(a.model))
            wfile = flagships[0][1]
            first, out = measure([BIN, "run", wfile, "--input", f"query={QUESTIONS[0]}", "--input",
                                  f"knowledge_base={kb}"] + args, REPO, henv)
            doc = json.loads(out)
            search = next(s for s in doc["steps"] if s["name"].startswith("Step 3"))
            assert search["output"]["ranking"]["dense"], search["output"]["ranking"]
            print(f"flagship hybrid, first run (state folder {home}): {first / 1000:.1f} s")
            fresh_flagship("hybrid", wfile, kb, args, henv, a.questions)
            served_flagship("hybrid", wfile, flagships[0][2], kb, henv, a.questions)
        srv.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
