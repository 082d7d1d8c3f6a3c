#!/usr/bin/env python3
"""The hybrid LifeOS flagship on a big vault (default 40,000 notes): prints
figures, asserts nothing.

    python3 bench/big_vault.py --model DIR [--bin B] [--before OLD_BIN]

DIR is the all-MiniLM-L6-v2 folder (`marktoflow model install
all-minilm-l6-v2`; default $MARKTOFLOW_EMBED_MODEL). Parts:

1. The vault (bench/gen_kb.py, in /tmp): notes, bytes, generation time.
2. Cold BM25 index (`marktoflow kb index`): time and peak RSS.
3. The flagship hybrid on the fresh vault (nothing embedded, no index): the
   first answer, one fresh process, then one fresh process per question,
   each with `ranking.dense_coverage`. `--before OLD_BIN` runs the first
   answer with another binary too, stopped after `--before-limit` seconds.
4. `marktoflow kb status`: time, coverage.
5. `marktoflow serve` on the same state folder: one question starts the
   background embedding; for `--serve-seconds` a question is asked every
   10 s (latency) while `/metrics` and the server's RSS are sampled; then
   edit-to-searchable (a unique word appended to a note, asked for until a
   source is that note) and delete-to-gone, five of each.

Every figure comes from one run of this script on this machine; the fake
LLM answers at once, so times are the runner's.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kb_bench import FakeLlm, QUESTIONS, du, pct, run_rss  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGSHIP = "workflows/lifeos/retrieval-indexed.md"


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def ask_fresh(binary, kb, q, env, timeout=None):
    """One `marktoflow run` of the flagship: (wall s, its search step's output)."""
    t = time.perf_counter()
    try:
        p = subprocess.run([binary, "run", FLAGSHIP, "--input", f"query={q}", "--input", f"knowledge_base={kb}",
                            "--json", "--quiet", "--no-store", "--allow-read", kb],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, None
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"the flagship failed ({p.returncode}):\n{p.stderr[-2000:]}")
    doc = json.loads(p.stdout)
    search = next(s for s in doc["steps"] if s.get("output") and "ranking" in s["output"])
    return wall, search["output"]


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"(marktoflow_background_\w+)\{[^}]*\} (\S+)", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def post(port, q, kb):
    body = json.dumps({"query": q, "knowledge_base": kb}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/lifeos/query-indexed", data=body,
                                 headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        doc = json.loads(r.read())
    return time.perf_counter() - t, doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=40000)
    ap.add_argument("--kb", default=None, help="vault folder (default /tmp/mtf-big-NOTES)")
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "marktoflow"))
    ap.add_argument("--before", default=None, help="another binary for the first answer, side by side")
    ap.add_argument("--before-limit", type=float, default=120.0)
    ap.add_argument("--model", default=os.environ.get("MARKTOFLOW_EMBED_MODEL"))
    ap.add_argument("--serve-seconds", type=float, default=180.0)
    a = ap.parse_args()
    if not a.model:
        sys.exit("--model DIR (all-MiniLM-L6-v2) is needed")
    binary = os.path.abspath(a.bin)
    kb = a.kb or f"/tmp/mtf-big-{a.notes}"
    if not os.path.isdir(kb):
        t = time.perf_counter()
        subprocess.run([sys.executable, os.path.join(REPO, "bench", "gen_kb.py"), kb, "--notes", str(a.notes),
                        "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
        print(f"generated in {time.perf_counter() - t:.1f} s")
    print(f"vault: {kb}, {a.notes} notes, {du(kb) / 1e6:.1f} MB")
    work = tempfile.mkdtemp(prefix="mtf-big-")
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeLlm)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "MARKTOFLOW_"))}
    base.update(NO_COLOR="1", ANTHROPIC_BASE_URL=f"http://127.0.0.1:{srv.server_address[1]}",
                ANTHROPIC_API_KEY="bench", MARKTOFLOW_EMBED_MODEL=os.path.abspath(a.model))
    try:
        # 2. Cold BM25 index.
        env = dict(base, MARKTOFLOW_HOME=os.path.join(work, "bm25"))
        wall, rss, out = run_rss([binary, "kb", "index", kb, "--json"], REPO, env)
        o = json.loads(out)
        print(f"cold BM25 index: {o['files']} notes, {o['chunks']} chunks in {o['duration_ms'] / 1000:.1f} s "
              f"(process {wall / 1000:.1f} s, peak RSS {rss:.0f} MB)")

        # 3. The flagship hybrid, fresh vault.
        home = os.path.join(work, "home")
        env = dict(base, MARKTOFLOW_HOME=home)
        if a.before:
            before_env = dict(base, MARKTOFLOW_HOME=os.path.join(work, "before"))
            wall, _ = ask_fresh(os.path.abspath(a.before), kb, QUESTIONS[0], before_env, a.before_limit)
            shown = f"{wall:.1f} s" if wall else f"not answered after {a.before_limit:.0f} s (stopped)"
            print(f"first hybrid answer, fresh vault, before ({a.before}): {shown}")
        wall, o = ask_fresh(binary, kb, QUESTIONS[0], env)
        r = o["ranking"]
        print(f"first hybrid answer, fresh vault (index built, {r['embedded']} chunks embedded): {wall:.1f} s, "
              f"dense coverage {r['dense_coverage']:.4f}")
        walls = []
        for q in QUESTIONS[1:]:
            wall, o = ask_fresh(binary, kb, q, env)
            walls.append(wall)
            print(f"  next question, fresh process: {wall:.2f} s (embedded {o['ranking']['embedded']}, "
                  f"coverage {o['ranking']['dense_coverage']:.4f})")
        print(f"next questions, fresh process: median {statistics.median(walls):.2f} s")

        # 4. kb status.
        t = time.perf_counter()
        p = subprocess.run([binary, "kb", "status", kb, "--json"], cwd=REPO, env=env, capture_output=True, text=True)
        st = json.loads(p.stdout)
        print(f"kb status: {time.perf_counter() - t:.2f} s; {st['vectors']['covered']} of "
              f"{st['vectors']['chunks']} chunks have a vector")

        # 5. Served: background embedding, latency, memory, edits.
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
        proc = subprocess.Popen([binary, "serve", FLAGSHIP, "--port", str(port), "--no-store", "--allow-read", kb],
                                cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(400):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            wall, _ = post(port, QUESTIONS[0], kb)
            print(f"served, first question (starts the background embedding): {wall:.2f} s")
            start = time.time()
            lat, peak, samples = [], 0.0, []
            i = 1
            while time.time() - start < a.serve_seconds:
                wall, _ = post(port, QUESTIONS[i % len(QUESTIONS)], kb)
                lat.append(wall)
                i += 1
                m = metrics(port)
                samples.append((time.time() - start, m.get("marktoflow_background_done", 0)))
                peak = max(peak, rss_mb(proc.pid))
                while time.time() - start < 10 * i - 10 and time.time() - start < a.serve_seconds:
                    time.sleep(0.5)
                    peak = max(peak, rss_mb(proc.pid))
            m = metrics(port)
            (t0, d0), (t1, d1) = samples[0], samples[-1]
            rate = (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0
            total = m.get("marktoflow_background_total", 0)
            print(f"served while embedding ({len(lat)} questions over {a.serve_seconds:.0f} s): latency median "
                  f"{statistics.median(lat):.2f} s, max {max(lat):.2f} s; peak RSS {peak:.0f} MB")
            print(f"background embedding: {d1:.0f} of {total:.0f} chunks after {t1:.0f} s, {rate:.1f} chunks/s "
                  f"(ETA by /metrics {m.get('marktoflow_background_eta_seconds', 0) / 60:.0f} min)")
            # Edits: a unique word appended to a note, asked for until found.
            notes = sorted(os.path.join(d, f) for d, _, fs in os.walk(kb) for f in fs if f.endswith(".md"))
            edits, gone, saved = [], [], {}
            for k in range(5):
                note = notes[1000 + 97 * k]
                saved[note] = open(note, "rb").read()
                word = f"zebrafinch{k}quokka"
                with open(note, "a") as f:
                    f.write(f"\nThe {word} nests on the balcony.\n")
                t = time.perf_counter()
                while True:
                    _, doc = post(port, f"Where does the {word} nest?", kb)
                    if any(os.path.abspath(os.path.join(kb, s)) == note or s.endswith(os.path.relpath(note, kb))
                           for s in doc["outputs"].get("sources") or []):
                        break
                    if time.perf_counter() - t > 60:
                        break
                edits.append(time.perf_counter() - t)
                os.remove(note)
                t = time.perf_counter()
                while True:
                    _, doc = post(port, f"Where does the {word} nest?", kb)
                    if not any(s.endswith(os.path.relpath(note, kb)) for s in doc["outputs"].get("sources") or []):
                        break
                    if time.perf_counter() - t > 60:
                        break
                gone.append(time.perf_counter() - t)
            print(f"edit to searchable: p50 {statistics.median(edits):.2f} s, p95 {pct(edits, 0.95):.2f} s; "
                  f"delete to gone: p50 {statistics.median(gone):.2f} s, p95 {pct(gone, 0.95):.2f} s "
                  f"(5 each, while embedding in the background)")
            for note, text in saved.items():
                with open(note, "wb") as f:
                    f.write(text)
            t = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            print(f"SIGTERM to exit while embedding: {time.perf_counter() - t:.2f} s")
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        srv.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
