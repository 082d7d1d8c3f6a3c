#!/usr/bin/env python3
"""Retrieval quality on ../shared/eval/msmarco-5k: prints figures, asserts nothing.

    cargo build --release && MARKTOFLOW_EMBED_MODEL=/path/to/model python3 bench/eval_msmarco.py

The 5,000 passages become one Markdown note each (`# title` then the text)
in a temporary folder; `marktoflow run bench/msmarco_eval.md` indexes them
(kb.index), then ranks every query with kb.search (BM25), kb.vector_search
(all-MiniLM-L6-v2) and rank.fuse (RRF k=60, and a convex combination of
min-max normalised scores; equal weights, untuned). This
script scores the rankings: nDCG@10 with linear gains (trec_eval style) and
recall@100 over the judged queries. It also reports the cold indexing and
embedding times and the per-query latencies the steps measured.

Weighted fusion: the same rank.fuse with more weight on the dense list
(VARIANTS: RRF, convex min-max, and convex with theoretical min-max
normalisation, `normalize: tm2c2`). Choosing a weight on the test queries themselves would flatter
it, so the weight is chosen by two-fold cross-validation (queries split by
id; the weight that scores best on one half is scored on the other) and the
held-out figure is the one to quote (one per family, and over all variants
at once). The whole sweep is printed too.

--kb DIR keeps the work folder (notes, index, vectors) so that later runs
skip the cold start; --dump FILE writes both ranked lists with their scores
for offline experiments (bench/fusion_lab.py).
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(REPO), "shared", "eval", "msmarco-5k")
BIN = os.environ.get("MARKTOFLOW_BIN", os.path.join(REPO, "target", "release", "marktoflow"))


def ndcg10(ranked, rels):
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rels.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall100(ranked, rels):
    relevant = {d for d, g in rels.items() if g > 0}
    return len(relevant & set(ranked[:100])) / len(relevant) if relevant else 0.0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


# family: the weight is chosen within each family by cross-validation.
# tm2c2: theoretical min-max (Bruch et al. 2023), floors BM25 0 and cosine -1.
VARIANTS = [{"name": f"rrf dense×{w}", "family": "rrf", "method": "rrf", "normalize": "minmax",
             "bm25": 1, "dense": w} for w in (1.5, 2, 3, 4)] + \
    [{"name": f"convex dense {a}", "family": "convex min-max", "method": "convex", "normalize": "minmax",
      "bm25": round(1 - a, 2), "dense": a} for a in (0.6, 0.7, 0.8, 0.9)] + \
    [{"name": f"tm2c2 dense {a}", "family": "convex tm2c2", "method": "convex", "normalize": "tm2c2",
      "bm25": round(1 - a, 2), "dense": a} for a in (0.6, 0.7, 0.8, 0.9)]


def dump(args, work, kb, model, queries, qrels, env):
    """Both lists per query, `dump_depth` deep, with their scores (for fusion experiments)."""
    wf = os.path.join(work, "dump.md")
    with open(wf, "w") as f:
        f.write("---\nworkflow: {id: msmarco-dump}\ninputs:\n  kb: {type: string}\n  queries: {type: array}\n"
                "  depth: {type: integer}\n---\n\n```yaml\ntype: for_each\nitems: '{{ inputs.queries }}'\n"
                "item_variable: q\noutput_variable: runs\nsteps:\n"
                "  - action: kb.search\n    inputs: {kb: '{{ inputs.kb }}', query: '{{ q.text }}', top_k: '{{ inputs.depth }}', "
                "operators: false, refresh: never, snippet_chars: 0}\n    output_variable: bm25\n"
                "  - action: kb.vector_search\n    inputs: {kb: '{{ inputs.kb }}', query: '{{ q.text }}', top_k: '{{ inputs.depth }}', "
                "operators: false, refresh: never, snippet_chars: 0}\n    output_variable: dense\n"
                "  - action: core.set\n    inputs:\n      id: '{{ q.id }}'\n"
                "      bm25: \"{{ bm25.hits | map(attribute='path') | list }}\"\n"
                "      bm25_scores: \"{{ bm25.hits | map(attribute='score') | list }}\"\n"
                "      dense: \"{{ dense.hits | map(attribute='path') | list }}\"\n"
                "      dense_scores: \"{{ dense.hits | map(attribute='score') | list }}\"\n"
                "    output_variable: summary\n```\n\n```yaml\naction: workflow.set_outputs\ninputs: {runs: '{{ runs }}'}\n```\n")
    inputs = os.path.join(work, "dump-inputs.json")
    with open(inputs, "w") as f:
        json.dump({"kb": kb, "queries": queries, "depth": args.dump_depth}, f)
    out = subprocess.run([BIN, "run", wf, "--json", "--quiet", "--no-store", "--inputs-file", inputs,
                          "--allow-read", kb, "--allow-read", model],
                         check=True, env=env, cwd=work, capture_output=True, text=True).stdout
    runs = [r[-1] if isinstance(r, list) else r for r in json.loads(out)["outputs"]["runs"]]
    for r in runs:
        r["qrels"] = qrels[r["id"]]
    with open(args.dump, "w") as f:
        json.dump(runs, f)
    print(f"wrote {len(runs)} queries, {args.dump_depth} hits per list, to {args.dump}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", nargs="?", default=DATA, help="the BEIR-format folder")
    ap.add_argument("--kb", help="work folder to keep and reuse (notes, index, vectors): later runs skip the 200 s cold start")
    ap.add_argument("--dump", help="write every query's BM25 and dense lists, with scores, as JSON here, then stop")
    ap.add_argument("--dump-depth", type=int, default=1000, help="hits per list in --dump (5000: the whole corpus)")
    args = ap.parse_args()
    data = args.data
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    model = os.environ.get("MARKTOFLOW_EMBED_MODEL")
    if not model:
        sys.exit("set MARKTOFLOW_EMBED_MODEL to the all-MiniLM-L6-v2 folder (see docs/reference.md, dense search)")
    qrels = {}
    with open(os.path.join(data, "qrels", "test.tsv")) as f:
        for line in f:
            parts = line.strip().split("\t")
            if len(parts) < 3 or not parts[2].isdigit():
                continue
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    queries = []
    with open(os.path.join(data, "queries.jsonl")) as f:
        for line in f:
            q = json.loads(line)
            if q["_id"] in qrels:
                queries.append({"id": q["_id"], "text": q["text"]})
    work = os.path.abspath(args.kb) if args.kb else tempfile.mkdtemp(prefix="mtf-msmarco-")
    try:
        kb = os.path.join(work, "kb")
        os.makedirs(kb, exist_ok=True)
        n = 0
        with open(os.path.join(data, "corpus.jsonl")) as f:
            for line in f:
                d = json.loads(line)
                title = (d.get("title") or "").strip()
                body = (f"# {title}\n\n" if title else "") + d["text"].strip() + "\n"
                note = os.path.join(kb, d["_id"] + ".md")
                # A kept folder keeps its files (and their mtimes): the index stays fresh.
                if not (args.kb and os.path.exists(note)):
                    with open(note, "w") as out:
                        out.write(body)
                n += 1
        env = dict(os.environ, NO_COLOR="1")
        t = time.perf_counter()
        idx = os.path.join(work, "index.md")
        with open(idx, "w") as f:
            f.write("---\nworkflow: {id: idx}\ninputs:\n  kb: {type: string}\n---\n\n"
                    "```yaml\naction: kb.index\ninputs: {kb: '{{ inputs.kb }}'}\n```\n\n"
                    "```yaml\naction: kb.vector_search\ninputs: {kb: '{{ inputs.kb }}', query: warm up, top_k: 1}\n```\n")
        subprocess.run([BIN, "run", idx, "--quiet", "--no-store", "--input", f"kb={kb}", "--allow-read", kb,
                        "--allow-read", model], check=True, env=env, cwd=work, stdout=subprocess.DEVNULL)
        cold = time.perf_counter() - t
        if args.dump:
            dump(args, work, kb, model, queries, qrels, env)
            return
        inputs = os.path.join(work, "inputs.json")
        with open(inputs, "w") as f:
            json.dump({"kb": kb, "queries": queries, "variants": VARIANTS}, f)
        t = time.perf_counter()
        out = subprocess.run([BIN, "run", os.path.join(REPO, "bench", "msmarco_eval.md"), "--json", "--quiet",
                              "--no-store", "--inputs-file", inputs, "--allow-read", kb, "--allow-read", model],
                             check=True, env=env, cwd=work, capture_output=True, text=True).stdout
        warm = time.perf_counter() - t
        if os.environ.get("MTF_EVAL_DUMP"):
            with open(os.environ["MTF_EVAL_DUMP"], "w") as f:
                f.write(out)
        # Per query, the outputs of its steps: the last is the summary.
        runs = [r[-1] if isinstance(r, list) else r for r in json.loads(out)["outputs"]["runs"]]
    finally:
        if not args.kb:
            shutil.rmtree(work, ignore_errors=True)

    def ids(paths):
        seen, out = set(), []
        for p in paths:
            d = os.path.splitext(os.path.basename(p))[0]
            if d not in seen:
                seen.add(d)
                out.append(d)
        return out

    print(f"MS MARCO subset: {n} passages, {len(queries)} judged queries")
    print(f"cold: index + embed every passage {cold:.1f} s; then all queries three ways {warm:.1f} s")
    print(f"{'system':28} {'nDCG@10':>8} {'R@100':>8}")
    for key, name in (("bm25", "kb.search (BM25)"), ("dense", "kb.vector_search (MiniLM)"),
                      ("fused", "rank.fuse (RRF k=60)"), ("convex", "rank.fuse (convex, min-max)")):
        nd = statistics.mean(ndcg10(ids(r[key]), qrels[r["id"]]) for r in runs)
        rc = statistics.mean(recall100(ids(r[key]), qrels[r["id"]]) for r in runs)
        print(f"{name:28} {nd:8.3f} {rc:8.3f}")
    # Weighted fusion: per query, each variant's ranking.
    def variant_paths(r):
        out = {}
        for it in r.get("variants") or []:
            last = it[-1] if isinstance(it, list) else it
            out[last["name"]] = last["paths"]
        return out

    per_q = {}
    for r in runs:
        rels = qrels[r["id"]]
        row = {"dense": ndcg10(ids(r["dense"]), rels)}
        for name, paths in variant_paths(r).items():
            row[name] = ndcg10(ids(paths), rels)
        per_q[r["id"]] = row
    names = [v["name"] for v in VARIANTS]
    print("weighted fusion sweep over all queries (tuned on the test set; do not quote):")
    for name in names:
        nd = statistics.mean(per_q[q][name] for q in per_q)
        rc = statistics.mean(recall100(ids(variant_paths(r)[name]), qrels[r["id"]]) for r in runs)
        print(f"  {name:26} {nd:8.3f} {rc:8.3f}")
    qs = sorted(per_q)
    folds = [qs[0::2], qs[1::2]]
    families = {"all variants": names}
    for v in VARIANTS:
        families.setdefault(v["family"], []).append(v["name"])
    by_name = {r["id"]: variant_paths(r) for r in runs}
    for fam, members in families.items():
        held, held_r, dense_held = [], [], []
        for i in (0, 1):
            tune, test = folds[i], folds[1 - i]
            best = max(members, key=lambda n: statistics.mean(per_q[q][n] for q in tune))
            held += [per_q[q][best] for q in test]
            held_r += [recall100(ids(by_name[q][best]), qrels[q]) for q in test]
            dense_held += [per_q[q]["dense"] for q in test]
            print(f"  {fam}, fold {i + 1}: chosen on {len(tune)} queries: {best}")
        print(f"{fam + ', weight by 2-fold CV':40} {statistics.mean(held):8.3f} {statistics.mean(held_r):8.3f}"
              f"   (dense on the same queries {statistics.mean(dense_held):.3f})")
    for key, name in (("bm25_ms", "kb.search"), ("dense_ms", "kb.vector_search")):
        xs = [float(r[key]) for r in runs]
        print(f"{name} per query (top 100, in the step): p50 {pct(xs, 0.5):.2f} ms, p99 {pct(xs, 0.99):.2f} ms")


if __name__ == "__main__":
    main()
