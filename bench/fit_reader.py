#!/usr/bin/env python3
"""Fits `answer.read`'s decision (give the span the model read, or say the
notes don't say) on one reading model's readings of public data, and
writes it as that model's fit in `steps/src/retrieval/answer/reader_fit.json`
(`--model`, the GGUF's file name without `.gguf`). Prints figures; asserts
nothing.

The readings come from the benches, which cache every question's span and
signals:

- `--squad FILE` (repeatable): a `bench/squad2.py --split fit` cache
  (`/tmp/squad2/paragraph-fit.jsonl`, `/tmp/squad2/open-fit.jsonl`): the 12
  fit articles of SQuAD 2.0 dev only; a span is right when its F1 with a
  gold answer is at least 0.5, and never for an unanswerable question.
- `--notes FILE` (repeatable): a `bench/lifeos_answers.py --reader model
  --dump FILE` of a notes vault's *tune* questions (never its holdout, never
  the LifeOS bench set): a span is right when it holds every fact of the
  answer, and never for a near miss.

Each source weighs the same in the fit however many questions it has
(`--weights` changes that), so the decision is not fitted to one kind of
evidence. The model is a logistic regression (L2, Newton's method) over the
standardised signals; the threshold is the one that maximises the mean
score over the sources (F1 for SQuAD, right-or-honest for notes).

    python3 bench/squad2.py --pages PATH --split fit --sample 600
    python3 bench/squad2.py --pages PATH --split fit --setting open --sample 450
    python3 bench/lifeos_answers.py --questions bench/til_questions.jsonl --kb /tmp/til \\
        --reader model --split tune --dump /tmp/til-tune.jsonl
    python3 bench/fit_reader.py --pages PATH --squad /tmp/squad2/paragraph-fit.jsonl \\
        --squad /tmp/squad2/open-fit.jsonl --notes /tmp/til-tune.jsonl

(with `--model GGUF`, squad2.py caches in `/tmp/squad2/<file name>/`; give
the same readings' model to `--model` here).
    cargo build --release        # the runner reads the new fit
"""
import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import squad2  # noqa: E402  (the data, the metric and the runner's formula)

FIT_FILE = squad2.FIT_FILE
FEATURES = squad2.load_fit()["features"]


def solve(A, b):
    n = len(b)
    M = [row[:] + [b[i]] for i, row in enumerate(A)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(M[r][c]))
        M[c], M[p] = M[p], M[c]
        for r in range(n):
            if r != c and M[c][c] != 0:
                f = M[r][c] / M[c][c]
                M[r] = [a - f * b for a, b in zip(M[r], M[c])]
    return [M[i][n] / M[i][i] if M[i][i] else 0.0 for i in range(n)]


def squad_rows(path, qas):
    """(signals, label, score(answer or "") -> float) per cached question."""
    out = []
    for r in squad2.cached(path).values():
        qa = qas.get(r["id"])
        if qa is None:
            continue
        squad2.refresh(r, qa)
        span = squad2.span_answer(r)
        label = 0.0 if qa["impossible"] else float(squad2.scores(qa, span)[1] >= 0.5)
        out.append((r["signals"], label, span, (lambda a, qa=qa: squad2.scores(qa, a)[1])))
    return out


def has_fact(text, alternatives):
    t = text.lower()
    return any(a.lower() in t for a in alternatives)


def notes_rows(path):
    out = []
    for line in open(path):
        d = json.loads(line)
        q, o = d["question"], d["outputs"]
        if q.get("split") == "holdout":
            sys.exit(f"{path}: holds held-out questions; fit on the tune split only")
        reader = o.get("reader")
        if not isinstance(reader, dict) or not reader.get("signals"):
            continue  # answered without a span (a summary, a list read by rules)
        span = (reader.get("span") or "").strip().strip(".,;: ")
        answerable = q.get("answerable", True)
        right = answerable and bool(span) and all(has_fact(span, f) for f in q["answer"])

        def score(a, q=q, answerable=answerable):
            if not answerable:
                return float(a == "")
            return float(bool(a) and all(has_fact(a, f) for f in q["answer"]))
        out.append((reader["signals"], float(right), span, score))
    return out


def fit(sources, weights, lam=1.0):
    rows = [(s, y, w / len(rs)) for rs, w in zip(sources, weights) for s, y, _, _ in rs]
    names = FEATURES
    X = [[s.get(n, 0.0) for n in names] for s, _, _ in rows]
    y = [t for _, t, _ in rows]
    c = [w for _, _, w in rows]
    total = sum(c)
    c = [w * len(rows) / total for w in c]
    d = len(names)
    mean = [sum(ci * x[i] for ci, x in zip(c, X)) / sum(c) for i in range(d)]
    scale = [math.sqrt(sum(ci * (x[i] - mean[i]) ** 2 for ci, x in zip(c, X)) / sum(c)) or 1.0
             for i in range(d)]
    Z = [[(x[i] - mean[i]) / scale[i] for i in range(d)] + [1.0] for x in X]
    w = [0.0] * (d + 1)
    for _ in range(40):
        g = [0.0] * (d + 1)
        H = [[0.0] * (d + 1) for _ in range(d + 1)]
        for z, t, ci in zip(Z, y, c):
            p = 1.0 / (1.0 + math.exp(-sum(a * b for a, b in zip(w, z))))
            for i in range(d + 1):
                g[i] += ci * (p - t) * z[i]
                for j in range(d + 1):
                    H[i][j] += ci * p * (1 - p) * z[i] * z[j]
        for i in range(d):
            g[i] += lam * w[i]
            H[i][i] += lam
        step = solve(H, g)
        w = [a - b for a, b in zip(w, step)]
        if max(abs(s) for s in step) < 1e-7:
            break
    return {"features": names, "weights": [round(v, 5) for v in w[:d]], "bias": round(w[d], 5),
            "mean": [round(v, 5) for v in mean], "scale": [round(v, 5) for v in scale]}


def mean_score(fit_, rows, t):
    return statistics.fmean(score(span if squad2.probability(fit_, s) >= t else "")
                            for s, _, span, score in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", required=True, help="SQuAD-explorer (as for bench/squad2.py)")
    ap.add_argument("--squad", action="append", default=[], help="a bench/squad2.py --split fit cache")
    ap.add_argument("--notes", action="append", default=[], help="a bench/lifeos_answers.py --dump of tune questions")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m",
                    help="the reading model the readings are of (its file name without .gguf): the fit is its own")
    ap.add_argument("--weights", help="comma-separated weight per source, in the order given (default: equal)")
    ap.add_argument("--dry-run", action="store_true", help="print the fit, write nothing")
    args = ap.parse_args()
    paras = squad2.load(args.pages, "fit", 0)
    qas = {qa["id"]: qa for _, p in paras for qa in p["qas"]}
    names = [*args.squad, *args.notes]
    sources = [squad_rows(p, qas) for p in args.squad] + [notes_rows(p) for p in args.notes]
    for n, rs in zip(names, sources):
        if not rs:
            sys.exit(f"{n}: no readings")
    weights = [float(w) for w in args.weights.split(",")] if args.weights else [1.0] * len(sources)
    if len(weights) != len(sources):
        sys.exit("--weights: one per source")
    f = fit(sources, weights)
    best = (-1.0, 0.5)
    for t in [i / 100 for i in range(5, 96)]:
        m = sum(w * mean_score(f, rs, t) for rs, w in zip(sources, weights)) / sum(weights)
        if m > best[0]:
            best = (m, t)
    f["threshold"] = best[1]
    f["fitted_on"] = "bench/fit_reader.py: " + "; ".join(
        f"{os.path.basename(n)} ({len(rs)} readings, {int(sum(y for _, y, _, _ in rs))} right spans)"
        for n, rs in zip(names, sources))
    print(f"threshold {f['threshold']}  (mean score over the sources {best[0]:.3f})")
    for n, rs in zip(names, sources):
        given = [(s, y) for s, y, _, _ in rs if squad2.probability(f, s) >= f["threshold"]]
        right = sum(y for _, y in given)
        print(f"  {os.path.basename(n):<24} {len(rs):>5} readings  score {mean_score(f, rs, f['threshold']):.3f}"
              f"  answered {len(given)}, right spans {int(right)}")
    for name, w in zip(f["features"], f["weights"]):
        print(f"  {name:<20} {w:+.3f}")
    if not args.dry_run:
        fits = json.load(open(FIT_FILE))
        fits["fits"][args.model.removesuffix(".gguf")] = f
        with open(FIT_FILE, "w") as out:
            json.dump(fits, out, indent=2)
            out.write("\n")
        print(f"wrote {FIT_FILE} (the fit of {args.model})")


if __name__ == "__main__":
    main()
