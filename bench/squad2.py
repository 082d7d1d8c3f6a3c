#!/usr/bin/env python3
"""SQuAD 2.0 (answering *and* abstaining) for `answer.read`, scored with the
official metric (exact match and F1, on answerable and unanswerable
questions). Prints figures; asserts nothing.

The data are the dataset authors' pages: the `gh-pages` branch of
rajpurkar/SQuAD-explorer, `explore/v2.0/dev/`, one HTML page per article
(`--pages` is a git repository holding that branch, or a folder of the
pages). SQuAD dev is a test set: the reader's decision is fitted
(`bench/fit_reader.py`) only on readings of the 12 articles of FIT; figures are reported on a fixed sample of whole
paragraphs from the 23 others (seed 48, at least --sample questions), never
fitted or tuned on.

Settings:
- `paragraph`: the question's own paragraph is the only evidence
  (bench/workflows/read-passage.md; the questions of one paragraph are read
  in one pass).
- `open`: the flagship (workflows/lifeos/retrieval-indexed.md) over a vault
  of every report article, one note each: search, evidence, then reading.

    cargo build --release
    python3 bench/squad2.py --pages PATH --split fit --sample 600   # readings to fit on (bench/fit_reader.py)
    python3 bench/squad2.py --pages PATH                            # report: paragraph setting
    python3 bench/squad2.py --pages PATH --setting open --sample 200

Results are cached per question in --out (default /tmp/squad2) and reused;
--fresh drops them. `--rescore` scores cached signals with the fit in
reader_fit.json (the same formula as the runner) without running again.
"""
import argparse
import collections
import html
import json
import math
import os
import random
import re
import statistics
import string
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIT_FILE = os.path.join(REPO, "steps", "src", "retrieval", "answer", "reader_fit.json")
READ_FLOW = os.path.join("bench", "workflows", "read-passage.md")
FLAGSHIP = os.path.join("workflows", "lifeos", "retrieval-indexed.md")

# The only articles the decision is fitted or tuned on (issue 48).
FIT = ["1973_oil_crisis", "Black_Death", "Computational_complexity_theory", "Construction",
       "Ctenophora", "Economic_inequality", "French_and_Indian_War", "Geology", "Huguenot",
       "Immune_system", "Islamism", "Jacksonville,_Florida"]


# ---------------------------------------------------------------- the data

def page_names(pages):
    if os.path.isdir(os.path.join(pages, "objects")) or pages.endswith(".git") or \
            os.path.isdir(os.path.join(pages, ".git")):
        out = subprocess.run(["git", "-C", pages, "ls-tree", "--name-only", "gh-pages:explore/v2.0/dev/"],
                             capture_output=True, text=True, check=True).stdout.split()
        return [n[:-5] for n in out if n.endswith(".html") and n != "index.html"]
    return [n[:-5] for n in os.listdir(pages) if n.endswith(".html") and n != "index.html"]


def page(pages, name):
    path = os.path.join(pages, name + ".html")
    if os.path.isfile(path):
        return open(path, encoding="utf-8").read()
    return subprocess.run(["git", "-C", pages, "show", f"gh-pages:explore/v2.0/dev/{name}.html"],
                          capture_output=True, check=True).stdout.decode("utf-8")


PARA = re.compile(r'<div class="para-wrap">.*?<pre>(.*?)</pre>(.*?)(?=<div class="para-wrap">|$)', re.S)
QA = re.compile(r'<div class="qa-wrap" data-id="([^"]+)">.*?<strong class="question">(.*?)</strong>(.*?)</ul>', re.S)
ANSWER = re.compile(r'<span class="answer">(.*?)</span>', re.S)


def article(pages, name):
    """[{context, qas: [{id, question, answers, impossible}]}] of one page."""
    paras = []
    for m in PARA.finditer(page(pages, name)):
        qas = []
        for q in QA.finditer(m.group(2)):
            answers = [html.unescape(a) for a in ANSWER.findall(q.group(3))]
            qas.append({"id": q.group(1), "question": html.unescape(q.group(2)).strip(),
                        "answers": answers, "impossible": not answers})
        paras.append({"context": html.unescape(m.group(1)), "qas": qas})
    return paras


def load(pages, split, sample):
    """(title, paragraph) pairs: every paragraph of the fit articles, or a
    fixed sample of whole paragraphs of the report articles."""
    names = sorted(page_names(pages))
    missing = [n for n in FIT if n not in names]
    if missing:
        sys.exit(f"the pages lack fit articles: {missing}")
    chosen = FIT if split == "fit" else [n for n in names if n not in FIT]
    paras = [(n, p) for n in chosen for p in article(pages, n) if p["qas"]]
    if split == "fit" and not sample:
        return paras
    rng = random.Random(48)
    rng.shuffle(paras)
    out, n = [], 0
    for t, p in paras:
        if n >= sample:
            break
        out.append((t, p))
        n += len(p["qas"])
    return out


# ---------------------------------------------------------------- the metric
# The official SQuAD 2.0 metric: answers compared after lower-casing and
# removing punctuation, articles and extra spaces; F1 over words; an
# unanswerable question is right only when nothing is answered.

def normalize(s):
    s = s.lower()
    s = "".join(c for c in s if c not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def f1_of(pred, gold):
    p, g = normalize(pred).split(), normalize(gold).split()
    if not p or not g:
        return float(p == g)
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def scores(qa, pred):
    golds = [a for a in qa["answers"] if normalize(a)] or [""]
    em = max(float(normalize(pred) == normalize(g)) for g in golds)
    f1 = max(f1_of(pred, g) for g in golds)
    return em, f1


def official(rows):
    """{exact, f1, HasAns_*, NoAns_*} in percent, as the official script prints."""
    def mean(xs):
        return 100.0 * sum(xs) / len(xs) if xs else 0.0
    out = {"total": len(rows)}
    for key, sub in (("", rows), ("HasAns_", [r for r in rows if not r["qa"]["impossible"]]),
                     ("NoAns_", [r for r in rows if r["qa"]["impossible"]])):
        ems, f1s = zip(*[scores(r["qa"], r["pred"]) for r in sub]) if sub else ((), ())
        out[key + "exact"] = round(mean(ems), 2)
        out[key + "f1"] = round(mean(f1s), 2)
        out[key + "total"] = len(sub)
    return out


# ---------------------------------------------------------------- running

def env_for(args):
    env = dict(os.environ)
    if args.model:
        env["MARKTOFLOW_LOCAL_MODEL"] = args.model
    return env


def run_flow(args, flow, inputs, whole=False):
    path = os.path.join(args.out, "inputs.json")
    with open(path, "w") as f:
        json.dump(inputs, f)
    cmd = [args.bin, "run", flow, "--json", "-q", "--no-store", "--inputs-file", path]
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, env=env_for(args), capture_output=True, text=True)
    secs = time.perf_counter() - t
    try:
        j = json.loads(r.stdout)
    except json.JSONDecodeError:
        sys.exit(f"no JSON from {flow}: exit {r.returncode}\n{r.stderr[-3000:]}")
    if j.get("status") != "completed":
        sys.exit(f"{flow} did not complete: {json.dumps(j.get('error'))}\n{r.stderr[-3000:]}")
    return (j if whole else j["outputs"]), secs


def cached(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            r = json.loads(line)
            out[r["id"]] = r
    return out


def row_of(qa, out, secs):
    reader = out.get("reader") or {}
    return {"id": qa["id"], "found": out.get("found") is True,
            "answer": out.get("answer") if out.get("found") is True else "",
            "span": reader.get("span") or "", "signals": reader.get("signals") or {},
            "probability": reader.get("probability"), "confidence": out.get("confidence"),
            "secs": secs}


def paragraph_setting(args, paras):
    path = os.path.join(args.out, f"paragraph-{args.split}.jsonl")
    done = cached(path)
    with open(path, "a") as log:
        for k, (title, p) in enumerate(paras):
            todo = [qa for qa in p["qas"] if qa["id"] not in done]
            if not todo:
                continue
            outs, secs = run_flow(args, READ_FLOW, {"title": title.replace("_", " "), "passage": p["context"],
                                                    "questions": [qa["question"] for qa in todo]})
            for qa, out in zip(todo, outs["answers"]):
                r = row_of(qa, out, secs / len(todo))
                done[qa["id"]] = r
                log.write(json.dumps(r) + "\n")
            log.flush()
            print(f"  paragraph {k + 1}/{len(paras)}: {len(todo)} questions in {secs:.1f}s", file=sys.stderr)
    return done


def write_vault(args, pages):
    """One note per article of the split (the fit articles, or the report
    articles)."""
    vault = os.path.join(args.out, "vault" if args.split == "report" else "vault-fit")
    if os.path.isdir(vault):
        return vault
    os.makedirs(vault)
    for name in sorted(n for n in page_names(pages) if (n in FIT) == (args.split == "fit")):
        paras = article(pages, name)
        title = name.replace("_", " ")
        with open(os.path.join(vault, name.replace(",", "") + ".md"), "w") as f:
            f.write(f"# {title}\n\n" + "\n\n".join(p["context"] for p in paras) + "\n")
    return vault


def open_setting(args, pages, paras):
    vault = write_vault(args, pages)
    path = os.path.join(args.out, f"open-{args.split}.jsonl")
    done = cached(path)
    qas = [qa for _, p in paras for qa in p["qas"]][: args.sample]
    with open(path, "a") as log:
        for k, qa in enumerate(qas):
            if qa["id"] in done:
                continue
            j, secs = run_flow(args, FLAGSHIP, {"query": qa["question"], "knowledge_base": vault,
                                                "reader": "model"}, whole=True)
            out = dict(j["outputs"])
            # The reader's signals are in its step's output, not the flow's.
            for step in j.get("steps") or []:
                o = step.get("output")
                if isinstance(o, dict) and isinstance(o.get("reader"), dict) and "signals" in o["reader"]:
                    out["reader"] = o["reader"]
            r = row_of(qa, out, secs)
            done[qa["id"]] = r
            log.write(json.dumps(r) + "\n")
            log.flush()
            if k % 20 == 0:
                print(f"  question {k + 1}/{len(qas)}: {secs:.1f}s", file=sys.stderr)
    return {q["id"]: done[q["id"]] for q in qas if q["id"] in done}


# ---------------------------------------------------------------- the decision

def words(text):
    """The runner's word split (read.rs `words`): as written, lower case,
    without the punctuation around them."""
    out = []
    for w in text.split():
        i, j = 0, len(w)
        while i < j and not w[i].isalnum():
            i += 1
        while j > i and not w[j - 1].isalnum():
            j -= 1
        if i < j:
            out.append(w[i:j].lower())
    return out


def refresh(row, qa):
    """The signals that depend only on the span and the question, computed
    again (results cached by an earlier build are scored as this one
    would)."""
    sig = row["signals"]
    if not row["span"] or sig.get("chose_none") == 1 and not row["span"]:
        return row
    sw, qw = words(row["span"]), words(qa["question"])
    sig.pop("span_tokens", None)
    sig["span_words"] = math.log1p(len(sw))
    sig["span_in_question"] = sum(1 for w in sw if w in qw) / len(sw) if sw else 0.0
    return row


def load_fit(model=None):
    """The runner's fit for the model file `model` (its default model's when
    None or when the model has none of its own)."""
    fits = json.load(open(FIT_FILE))
    name = os.path.basename(model or "").removesuffix(".gguf")
    return fits["fits"].get(name) or fits["fits"][fits["default"]]


def probability(fit, signals):
    z = fit["bias"]
    for name, w, m, s in zip(fit["features"], fit["weights"], fit["mean"], fit["scale"]):
        z += w * (signals.get(name, 0.0) - m) / (s if s > 0 else 1.0)
    return 1.0 / (1.0 + math.exp(-z))


def span_answer(row):
    """The span as the runner tidies it (the answer when given; the raw span
    otherwise, trimmed the same simple way)."""
    if row["found"] and row["answer"]:
        return row["answer"]
    return row["span"].strip().strip(".,;: ")


def decided(fit, row):
    return span_answer(row) if probability(fit, row["signals"]) >= fit["threshold"] else ""


# ---------------------------------------------------------------- reporting

def report(name, rows, qas, fit=None):
    scored = []
    for r in rows:
        pred = decided(fit, r) if fit else (r["answer"] if r["found"] else "")
        scored.append({"qa": qas[r["id"]], "pred": pred, "row": r})
    o = official(scored)
    print(f"\n== {name}: {o['total']} questions ({o['HasAns_total']} answerable, {o['NoAns_total']} not)")
    print(f"exact {o['exact']:.1f}  F1 {o['f1']:.1f}   HasAns exact {o['HasAns_exact']:.1f} F1 {o['HasAns_f1']:.1f}"
          f"   NoAns accuracy {o['NoAns_exact']:.1f}")
    given = [s for s in scored if s["pred"]]
    words = [len(s["pred"].split()) for s in given]
    print(f"answers given {len(given)}; words per answer: mean {statistics.fmean(words) if words else 0:.1f}")
    secs = [r["secs"] for r in rows]
    print(f"seconds per question: median {statistics.median(secs):.2f}, p90 {sorted(secs)[int(0.9 * len(secs))]:.2f}")
    print("reliability (answers given): confidence  count  right (F1 >= 0.5)")
    for lo, hi in [(0, 49), (50, 69), (70, 89), (90, 100)]:
        b = [s for s in given if lo <= round(100 * (probability(fit, s["row"]["signals"]) if fit else
                                                    (s["row"]["probability"] or 0))) <= hi]
        ok = sum(1 for s in b if scores(s["qa"], s["pred"])[1] >= 0.5)
        print(f"  {lo:>3}-{hi:<3}  {len(b):>5}  {ok:>5}  {ok / len(b):.2f}" if b else f"  {lo:>3}-{hi:<3}      0      -")
    return o


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", required=True, help="SQuAD-explorer git repository (gh-pages) or a folder of its dev pages")
    ap.add_argument("--setting", choices=["paragraph", "open"], default="paragraph")
    ap.add_argument("--split", choices=["fit", "report"], default="report")
    ap.add_argument("--sample", type=int, default=1000, help="questions (whole paragraphs) sampled; 0 with --split fit: all")
    ap.add_argument("--bin", default=os.environ.get("MARKTOFLOW_BIN", os.path.join(REPO, "target", "release", "marktoflow")))
    ap.add_argument("--model", help="a GGUF to read with instead of the installed default")
    ap.add_argument("--out", default="/tmp/squad2")
    ap.add_argument("--rescore", action="store_true", help="score cached results with reader_fit.json, running nothing")
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args()
    if args.out and args.model:
        args.out = os.path.join(args.out, os.path.basename(args.model))
    os.makedirs(args.out, exist_ok=True)
    if args.fresh:
        for f in os.listdir(args.out):
            if f.endswith(".jsonl"):
                os.remove(os.path.join(args.out, f))
    paras = load(args.pages, args.split, args.sample)
    qas = {qa["id"]: qa for _, p in paras for qa in p["qas"]}
    if args.rescore:
        path = os.path.join(args.out, f"{args.setting}-{args.split}.jsonl")
        results = {k: v for k, v in cached(path).items() if k in qas}
    elif args.setting == "paragraph":
        results = paragraph_setting(args, paras)
    else:
        results = open_setting(args, args.pages, paras)
    rows = [refresh(results[i], qas[i]) for i in qas if i in results]
    report(f"{args.setting} / {args.split} (as the runner decided)", rows, qas)
    if args.rescore:
        report(f"{args.setting} / {args.split} (reader_fit.json applied to the signals)", rows, qas, load_fit(args.model))


if __name__ == "__main__":
    main()
