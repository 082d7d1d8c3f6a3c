#!/usr/bin/env python3
"""Offline fusion experiments on a dump from `eval_msmarco.py --dump FILE`.

    python3 bench/fusion_lab.py /tmp/fuse-dump5k.json

Scores nDCG@10 / R@100 exactly as eval_msmarco.py does, and for every method
with a free parameter the two-fold cross-validated figure (queries sorted by
id, split even/odd; the parameter best on one half is scored on the other;
held-out scores pooled over all queries) — the one to quote.
"""
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_msmarco import ndcg10, recall100  # noqa: E402  (one definition of the metrics)


def pid(p):
    return os.path.splitext(os.path.basename(p))[0]


runs = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/fuse-dump5k.json"))
for r in runs:
    r["b"] = [(pid(p), float(s)) for p, s in zip(r["bm25"], r["bm25_scores"])]
    r["d"] = [(pid(p), float(s)) for p, s in zip(r["dense"], r["dense_scores"])]
QS = sorted(r["id"] for r in runs)
BY = {r["id"]: r for r in runs}
FOLDS = [QS[0::2], QS[1::2]]


def order(scores, first):
    """Sort by score desc; ties keep first-seen order (rank.fuse is stable)."""
    return [d for d, _ in sorted(((d, scores[d]) for d in first), key=lambda x: -x[1])]


def seen_order(lists):
    out, seen = [], set()
    for l in lists:
        for d, _ in l:
            if d not in seen:
                seen.add(d)
                out.append(d)
    return out


def rrf(r, depth, k=60, wd=1.0, wb=1.0):
    b, d = r["b"][:depth], r["d"][:depth]
    s = {}
    for w, l in ((wb, b), (wd, d)):
        for i, (x, _) in enumerate(l):
            s[x] = s.get(x, 0.0) + w / (k + i + 1)
    return order(s, seen_order([b, d]))[:depth]


def norm_fn(l, how, kind):
    xs = [s for _, s in l]
    if not xs:
        return lambda s: 0.0
    lo, hi = min(xs), max(xs)
    if how == "minmax":
        return lambda s: (s - lo) / (hi - lo) if hi > lo else 1.0
    if how.startswith("tm2c2"):
        # theoretical min: BM25 0; cosine 0 (tm2c2) or -1 (tm2c2-1)
        tmin = 0.0 if kind == "b" else (-1.0 if how == "tm2c2-1" else 0.0)
        return lambda s: (s - tmin) / (hi - tmin) if hi > tmin else 1.0
    if how == "z":
        mu = statistics.mean(xs)
        sd = statistics.pstdev(xs) or 1.0
        return lambda s: (s - mu) / sd
    raise ValueError(how)


def convex(r, depth, alpha, how, fill="listmin"):
    """alpha = dense weight; missing raw score -> the list's minimum at depth
    (fill='listmin'), or the theoretical minimum (fill='tmin': 0 / 0)."""
    b, d = r["b"][:depth], r["d"][:depth]
    nb, nd = norm_fn(b, how, "b"), norm_fn(d, how, "d")
    bm = dict(b)
    dm = dict(d)
    bmin = min(bm.values()) if bm else 0.0
    dmin = min(dm.values()) if dm else 0.0
    if fill == "tmin":
        bmin, dmin = 0.0, (-1.0 if how == "tm2c2-1" else 0.0)
    if fill == "zero":  # rank.fuse today: a missing hit contributes 0 after normalisation
        s = {}
        for x in seen_order([b, d]):
            s[x] = (1 - alpha) * (nb(bm[x]) if x in bm else 0.0) + alpha * (nd(dm[x]) if x in dm else 0.0)
        return order(s, seen_order([b, d]))[:depth]
    s = {x: (1 - alpha) * nb(bm.get(x, bmin)) + alpha * nd(dm.get(x, dmin)) for x in seen_order([b, d])}
    return order(s, seen_order([b, d]))[:depth]


def full_convex(r, alpha, how, depth):
    """Candidates = union of the two top-`depth` lists, but each scored with its
    exact score from the whole-corpus lists (BM25 0 where no term matches)."""
    ball, dall = dict(r["b"]), dict(r["d"])
    b, d = r["b"][:depth], r["d"][:depth]
    nb, nd = norm_fn(b, how, "b"), norm_fn(d, how, "d")
    cand = seen_order([b, d])
    s = {x: (1 - alpha) * nb(ball.get(x, 0.0)) + alpha * nd(dall[x]) for x in cand}
    return order(s, cand)[:depth]


def dense_union(r, depth_b, depth_d):
    """Union of BM25 top-depth_b and dense top-depth_d, ordered by exact cosine."""
    dall = dict(r["d"])
    cand = seen_order([r["b"][:depth_b], r["d"][:depth_d]])
    return order({x: dall[x] for x in cand}, cand)


def evaluate(fn):
    """fn(run) -> ranked ids. Returns per-query (ndcg, recall)."""
    return {q: (ndcg10(fn(BY[q]), BY[q]["qrels"]), recall100(fn(BY[q]), BY[q]["qrels"])) for q in QS}


def mean(per, qs=None, i=0):
    qs = qs or QS
    return statistics.mean(per[q][i] for q in qs)


def cv(grid):
    """grid: list of (label, per-query dict). Two-fold CV as eval_msmarco.py."""
    held_n, held_r, chosen = [], [], []
    for i in (0, 1):
        tune, test = FOLDS[i], FOLDS[1 - i]
        best = max(grid, key=lambda g: mean(g[1], tune))
        chosen.append(best[0])
        held_n += [best[1][q][0] for q in test]
        held_r += [best[1][q][1] for q in test]
    return statistics.mean(held_n), statistics.mean(held_r), chosen


rows = []


def report(name, per, cvd=None):
    line = f"{name:48} {mean(per):.3f} {mean(per, i=1):.3f}"
    print(line, flush=True)


print(f"{len(QS)} queries; folds {len(FOLDS[0])}/{len(FOLDS[1])}")
print(f"{'method':48} nDCG@10 R@100")
dense = evaluate(lambda r: [x for x, _ in r["d"]])
bm25 = evaluate(lambda r: [x for x, _ in r["b"]])
report("dense", dense)
report("bm25", bm25)
for depth in (100, 1000):
    report(f"rrf k=60 depth {depth}", evaluate(lambda r: rrf(r, depth)))
report("convex min-max a=.5 depth 100, missing->0 (rank.fuse)", evaluate(lambda r: convex(r, 100, 0.5, "minmax", "zero")))
print("dense on fold halves:", f"{mean(dense, FOLDS[0]):.3f} {mean(dense, FOLDS[1]):.3f}")

ALPHAS = [round(0.05 * i, 2) for i in range(1, 20)]  # 0.05..0.95: fusion only, dense alone excluded
COARSE = [0.6, 0.7, 0.8, 0.9]
sweeps = {}


def sweep(name, mk, params, fmt=lambda p: f"{p}"):
    grid = [(fmt(p), evaluate(mk(p))) for p in params]
    sweeps[name] = grid
    n, rc, ch = cv(grid)
    best = max(grid, key=lambda g: mean(g[1]))
    print(f"{name:48} CV {n:.3f} {rc:.3f}  chosen {ch}; best-on-all {best[0]} {mean(best[1]):.3f} (dense {mean(dense):.3f})", flush=True)
    return grid


print("\n-- parameterised (CV figure = quotable; best-on-all = tuned on test, do not quote)")
for depth in (100, 1000):
    sweep(f"rrf k=60 dense×w depth {depth}", lambda w: (lambda r: rrf(r, depth, 60, w)), [1, 1.5, 2, 3, 4, 6, 8])
    sweep(f"rrf k sweep (equal w) depth {depth}", lambda k: (lambda r: rrf(r, depth, k)), [1, 5, 10, 20, 40, 60, 100])
for depth in (100, 1000):
    for how in ("minmax", "tm2c2", "tm2c2-1", "z"):
        for fill in ("listmin", "tmin") if how.startswith("tm2c2") else ("listmin",):
            sweep(f"convex {how} fill={fill} depth {depth}", lambda a: (lambda r: convex(r, depth, a, how, fill)), ALPHAS)
            sweep(f"  coarse grid .6-.9", lambda a: (lambda r: convex(r, depth, a, how, fill)), COARSE)
print("\n-- exact scores (whole-corpus dump) over the depth-100 union")
for how in ("minmax", "tm2c2", "z"):
    sweep(f"convex {how} exact-scores depth 100", lambda a: (lambda r: full_convex(r, a, how, 100)), ALPHAS)
print("\n-- dense rescoring of the union (no parameter)")
for db, dd in ((100, 100), (1000, 100), (100, 1000)):
    report(f"dense over union bm25@{db} ∪ dense@{dd}", evaluate(lambda r: dense_union(r, db, dd)))

if os.environ.get("SWEEP"):
    print("\n-- full sweeps (tuned on test; information only)")
    for name, grid in sweeps.items():
        print(name)
        for lab, per in grid:
            print(f"    {lab:>6} {mean(per):.3f} {mean(per, i=1):.3f}  A {mean(per, FOLDS[0]):.3f} B {mean(per, FOLDS[1]):.3f}")
