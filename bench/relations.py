#!/usr/bin/env python3
"""A learned relation reader, measured against the graph's rules: can a
classifier over the local encoder's token states (all-MiniLM-L6-v2, frozen)
read "who owns / depends on / reports to … what" from prose written by
others better than the rules of `steps/src/retrieval/graph/extract.rs`?

    cargo build --release
    cargo build --release -p marktoflow-steps --example relation_features --example graph_bench
    pip install numpy
    python3 bench/relations.py [--bin target/release/marktoflow] [--tau 0.2]
    python3 bench/relations.py --rules-only   # the rules alone, all seven writers

The training text is `bench/relations/writer{1,2,3}.jsonl`: 390 snippets of
team, system and operations notes (wiki lines, meeting notes, status
updates, bullets; 36 domains, none of the topology keys' own), written by
three writers who never saw our code, rules, vaults or keys, each listing
every named thing in its snippet and every relation the snippet states as
true (`facts`, read "subject rel object", in the graph's relations:
owns, depends_on, reports_to, deployed_to, blocked_by, supplied_by,
part_of, leads). Relations denied, ended, planned or asked about are not
facts; about a quarter of the snippets hold such traps. Every pair of
names in a snippet is an example: the relation and its direction in text
order, or none.

It prints, in turn:

1. the rules on the writers' snippets, each snippet a note of its own
   (`graph_bench`'s dump): precision and recall of their edges against the
   facts (an edge to a name the writer did not list counts as wrong);
2. the classifier, trained on two writers and tested on the third, at
   several thresholds on its probability: the same precision and recall,
   on text by a writer it never saw;
3. trained on all three, on the direct questions of every topology key
   (`bench/topology`): the subject, relation and direction as
   `workflows/conhub/graph-ask.md` reads the question, every sentence of
   the notes that names the subject (or, in the subject's own note, any
   sentence), every other name in it (the graph's nodes and capitalised
   or hyphenated words), and each name the classifier reads as the
   relation asked; right / wrong / unanswered, scored as
   `bench/topology.py` scores (exactly the key's names), for the keys that
   may be read and the held-out ones apart (figures only): the graph
   alone, the classifier alone, the classifier where the graph has no
   answer, and the classifier as a check on the graph's names read from
   prose (dropped when no sentence reads as the relation at `--tau`).
"""

import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:  # --rules-only does without it
    np = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import topology as T  # noqa: E402

RELS = ["owns", "depends_on", "reports_to", "deployed_to", "blocked_by", "supplied_by", "part_of", "leads"]
CLASSES = ["none"] + [r + d for r in RELS for d in (">", "<")]
WRITERS = ["writer1", "writer2", "writer3"]
ALL_WRITERS = [f"writer{i}" for i in range(1, 8)]
READ = ["writer1", "writer4"]
MEASURED = ["writer2", "writer3", "writer5", "writer6", "writer7"]
HELD = {"questions8.jsonl", "questions9.jsonl", "questions13.jsonl", "questions14.jsonl",
        "questions16.jsonl", "questions17.jsonl", "questions18.jsonl"}
KEYS = [("vault", "questions.jsonl")] + [(f"vault{i}", f"questions{i}.jsonl") for i in range(2, 19)]


def features(tool, model_dir, items):
    """Token states pooled over the first name, the second, the words
    between them, and the whole text: one row of 4 × 384 per item."""
    lines = [json.dumps({"text": t, "spans": [list(a), list(b), [a[1], max(a[1], b[0])]]}) for t, a, b in items]
    r = subprocess.run([tool, model_dir], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    return np.array([np.concatenate([d["feats"][0], d["feats"][1], d["feats"][2], d["mean"]]) for d in rows], np.float32)


def occurrences(text, name):
    out, i = [], 0
    while (j := text.find(name, i)) >= 0:
        out.append((j, j + len(name)))
        i = j + 1
    return out


def snippet_pairs(d):
    """A snippet's examples: (text, first name's span, second's, class)."""
    text, names = d["text"], d["names"]
    occ = {n: occurrences(text, n) for n in names}
    spans = {}
    for n in names:
        # Its first occurrence that is not inside a longer listed name's.
        for s in occ[n]:
            if not any(m != n and len(m) > len(n) and any(a <= s[0] and s[1] <= b for a, b in occ[m]) for m in names):
                spans[n] = s
                break
    facts = {(f["subject"], f["object"]): f["rel"] for f in d.get("facts", [])}
    listed = [n for n in names if n in spans]
    out = []
    for i, x in enumerate(listed):
        for y in listed[i + 1:]:
            x1, y1 = sorted([x, y], key=lambda n: spans[n][0])
            if spans[x1][1] > spans[y1][0]:
                continue
            label = facts.get((x1, y1), None)
            label = label + ">" if label else (facts[(y1, x1)] + "<" if (y1, x1) in facts else "none")
            out.append((text, spans[x1], spans[y1], label))
    return out


def train(X, y, l2=1e-3, iters=400, lr=0.05):
    """Softmax regression on standardised rows, classes weighted evenly
    (none is most pairs), full batch, Adam: deterministic."""
    mu, sd = X.mean(0), X.std(0) + 1e-6
    Z = (X - mu) / sd
    n, k = len(Z), len(CLASSES)
    W, b = np.zeros((Z.shape[1], k), np.float32), np.zeros(k, np.float32)
    Y = np.zeros((n, k), np.float32)
    Y[np.arange(n), y] = 1
    cw = 1.0 / np.maximum(Y.sum(0), 1)
    sw = (cw / cw[y].mean())[y]
    state = [(np.zeros_like(W), np.zeros_like(W)), (np.zeros_like(b), np.zeros_like(b))]
    for t in range(1, iters + 1):
        P = predict((mu, sd, W, b), X)
        G = (P - Y) * sw[:, None] / n
        for g, (m, v), p in ((Z.T @ G + l2 * W, state[0], W), (G.sum(0), state[1], b)):
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            p -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return mu, sd, W, b


def predict(model, X):
    mu, sd, W, b = model
    L = ((X - mu) / sd) @ W + b
    L -= L.max(1, keepdims=True)
    P = np.exp(L)
    return P / P.sum(1, keepdims=True)


def dump(graph_bench, folder, out):
    env = dict(os.environ, GRAPH_BENCH_EXTRACT_ONLY="1", GRAPH_BENCH_DUMP=out)
    subprocess.run([graph_bench, folder], env=env, capture_output=True, check=True)
    return [line.rstrip("\n").split("\t") for line in open(out)]


def rules_on_writers(graph_bench, snippets, tmp, writers=WRITERS, by_relation=None):
    """Each excerpt a note of its own ("# Snippet 001" above it, unless it
    opens with a heading or frontmatter of its own); the rules' edges
    against the writer's facts, per writer; with `by_relation` (a
    Counter), counted per relation too."""
    for w in writers:
        folder = os.path.join(tmp, w)
        os.makedirs(folder)
        for i, s in enumerate(snippets[w]):
            head = "" if s["text"].startswith(("# ", "---")) else f"# Snippet {i:03d}\n\n"
            with open(f"{folder}/s{i:03d}.md", "w") as f:
                f.write(f"{head}{s['text']}\n")
        edges = collections.defaultdict(set)
        for p in dump(graph_bench, folder, folder + ".tsv"):
            if len(p) >= 5 and p[2] in RELS:
                edges[int(p[0].split("/")[-1][1:4])].add((T.norm(p[1]), p[2], T.norm(p[3])))
        tp = said = facts = 0
        for i, s in enumerate(snippets[w]):
            gold = {(T.norm(f["subject"]), f["rel"], T.norm(f["object"])) for f in s.get("facts", [])}
            # Edges about the note itself ("Snippet 001") are the note's, not the text's.
            own = ("snippet", f"s{i:03d}")
            got = {e for e in edges[i] if not e[0].startswith(own) and not e[2].startswith(own)}
            tp += len(got & gold)
            said += len(got)
            facts += len(gold)
            if by_relation is not None:
                for e in gold:
                    by_relation[e[1], "facts"] += 1
                    by_relation[e[1], "right"] += e in got
                for e in got:
                    by_relation[e[1], "edges"] += 1
        print(f"  {w}: {facts} facts, {said} edges, precision {tp / max(said, 1):.2f}, recall {tp / max(facts, 1):.2f}")


def rules_only(graph_bench):
    """The rules on all seven writers: those whose misses were read while
    the rules were changed (1 and 4) apart from those only measured."""
    tmp = tempfile.mkdtemp(prefix="relations-")
    snippets = {w: [json.loads(line) for line in open(f"{HERE}/relations/{w}.jsonl") if line.strip()]
                for w in ALL_WRITERS}
    for title, group in (("read while the rules were changed", READ), ("only measured", MEASURED)):
        print(f"The rules on the writers {title}:")
        c = collections.Counter()
        rules_on_writers(graph_bench, snippets, tmp, group, c)
        for r in RELS + ["all"]:
            n = {k: sum(c[x, k] for x in RELS) if r == "all" else c[r, k] for k in ("facts", "edges", "right")}
            print(f"    {r:12s} {n['facts']:4d} facts, {n['edges']:4d} edges, precision "
                  f"{n['right'] / max(n['edges'], 1):.2f}, recall {n['right'] / max(n['facts'], 1):.2f}")


MENTION = re.compile(r"\b(?:[A-Z][\w&'’.]*[\w&]|[A-Z])(?:[ -](?:[A-Z0-9][\w&'’.]*[\w&]|of|and|&|[A-Z0-9]))*\b"
                     r"|\b[a-z0-9]+(?:-[a-z0-9]+)+\b|\b[A-Z]{2,}-\d+\b")


def mentions(text, nodes):
    """Names in a sentence: the graph's nodes, and capitalised or hyphenated
    words (one capitalised word opening the sentence is its first word,
    unless the graph knows it); the longest, none overlapping."""
    found, low = [], text.lower()
    for n in nodes:
        for s, e in occurrences(low, n):
            if (s == 0 or not low[s - 1].isalnum()) and (e == len(low) or not low[e].isalnum()):
                found.append((s, e))
    for m in MENTION.finditer(text):
        s, e = m.span()
        opens = s == 0 or text[:s].rstrip().endswith(":")
        if opens and " " not in m.group() and "-" not in m.group() and m.group().lower() not in nodes:
            continue
        found.append((s, e))
    taken = []
    for s, e in sorted(set(found), key=lambda x: (x[0] - x[1], x[0])):
        if all(e <= a or s >= b for a, b in taken):
            taken.append((s, e))
    return sorted(taken)


def sentences_of(folder):
    """Each note: its name, its file name, and the sentences of its body
    (links shown as their text; frontmatter, headings and code left out)."""
    out = []
    for path in glob.glob(f"{folder}/**/*.md", recursive=True):
        src = open(path, encoding="utf-8").read()
        body, title = src, None
        if src.startswith("---") and (end := src.find("\n---", 3)) > 0:
            m = re.search(r"^title:\s*(.+)$", src[3:end], re.M)
            title = m.group(1).strip().strip("\"'") if m else None
            body = src[end + 4:]
        if not title and (m := re.search(r"^# (.+)$", body, re.M)):
            title = m.group(1).strip()
        stem = os.path.splitext(os.path.basename(path))[0]
        said = []
        for line in body.split("\n"):
            t = line.strip().lstrip("-*+ ").strip()
            if not t or t.startswith("#") or t.startswith("```"):
                continue
            t = re.sub(r"\[\[([^\]|#]+)(?:[#|][^\]]*)?\]\]", r"\1", t)
            t = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", t)
            said += [s for s in re.split(r"(?<=[.!?])\s+", t.replace("**", "").replace("`", "")) if len(s) > 3]
        out.append((title or stem, stem, said))
    return out


def candidates(subject, rel, direction, nodes, notes):
    """(text, first span, second span, the class that means "yes", the other name)."""
    items, sk = [], T.norm(subject)
    pattern = re.compile(r"(?<![a-z0-9])" + re.escape(subject).replace(r"\ ", r"[\s_-]+") + r"(?![a-z0-9])")
    for title, stem, said in notes:
        own = sk in (T.norm(title), T.norm(stem))
        for s in said:
            m = pattern.search(s.lower())
            if m:
                text, at = s, m.span()
            elif own:
                text, at = f"{title}: {s}", (0, len(title))
            else:
                continue
            for a, b in mentions(text, nodes):
                if not (b <= at[0] or a >= at[1]) or T.norm(text[a:b]) == sk:
                    continue
                first = at[0] < a
                want = rel + (">" if (direction == "out") == first else "<")
                items.append((text, at, (a, b), want, text[a:b]) if first else (text, (a, b), at, want, text[a:b]))
    return items


def category(names, q):
    if not names:
        return "right" if not q["expect"] else "none"
    return "right" if T.matches(names, q) else "wrong"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="target/release/marktoflow")
    ap.add_argument("--examples", default="target/release/examples")
    ap.add_argument("--model", default=os.path.expanduser("~/.local/share/marktoflow/models/all-minilm-l6-v2"))
    ap.add_argument("--tau", type=float, default=0.2)
    ap.add_argument("--rules-only", action="store_true",
                    help="only the rules, on all seven writers (needs only the graph_bench example)")
    a = ap.parse_args()
    tool = os.path.join(a.examples, "relation_features")
    graph_bench = os.path.join(a.examples, "graph_bench")
    if a.rules_only:
        return rules_only(graph_bench)
    if np is None:
        raise SystemExit("bench/relations.py needs numpy: pip install numpy")
    snippets = {w: [json.loads(line) for line in open(f"{HERE}/relations/{w}.jsonl") if line.strip()] for w in WRITERS}
    pairs = {w: [p for s in snippets[w] for p in snippet_pairs(s)] for w in WRITERS}
    tmp = tempfile.mkdtemp(prefix="relations-")

    print("1. The rules on the writers' snippets (edges against facts):")
    rules_on_writers(graph_bench, snippets, tmp)

    X = {w: features(tool, a.model, [(t, x, y) for t, x, y, _ in pairs[w]]) for w in WRITERS}
    y = {w: np.array([CLASSES.index(p[3]) for p in pairs[w]]) for w in WRITERS}
    print("2. The classifier, trained on two writers, on the third's pairs:")
    for held in WRITERS:
        others = [w for w in WRITERS if w != held]
        model = train(np.concatenate([X[w] for w in others]), np.concatenate([y[w] for w in others]))
        P, truth = predict(model, X[held]), y[held]
        facts = (truth != 0).sum()
        print(f"  {held} ({len(truth)} pairs, {facts} facts):", end="")
        for th in (0.5, 0.7, 0.8, 0.9):
            pred = np.where(P[:, 1:].max(1) >= th, P[:, 1:].argmax(1) + 1, 0)
            tp = ((pred == truth) & (truth != 0)).sum()
            print(f"  at {th}: precision {tp / max((pred != 0).sum(), 1):.2f}, recall {tp / max(facts, 1):.2f}", end="")
        print()

    model = train(np.concatenate([X[w] for w in WRITERS]), np.concatenate([y[w] for w in WRITERS]))
    wf = os.path.join(HERE, "..", "workflows", "conhub", "graph-ask.md")
    counts = {h: collections.Counter() for h in (False, True)}
    for vault, key in KEYS:
        folder = os.path.join(HERE, "topology", vault)
        # The graph's nodes: each note's name, each edge's ends (tags aside).
        nodes = set()
        for p in dump(graph_bench, folder, os.path.join(tmp, vault + ".tsv")):
            nodes.update([p[1], p[3]] if len(p) >= 5 else p[1:2])
        nodes = {n.lower() for n in nodes if len(n) >= 2 and not n.startswith("#")}
        notes = sentences_of(folder)
        for line in open(os.path.join(HERE, "topology", key)):
            q = json.loads(line)
            if q["kind"] != "direct":
                continue
            _, out = T.run(a.bin, wf, {"question": q["question"], "knowledge_base": folder, "reader": "none"})
            o = out["outputs"]
            read, graph = o.get("read") or {}, o["names"]
            learned, best = [], {}
            if read.get("relation") in RELS and read.get("direction") in ("in", "out") and read.get("nodes"):
                items = candidates(read["nodes"][0], read["relation"], read["direction"], nodes, notes)
                if items:
                    P = predict(model, features(tool, a.model, [(t, x, z) for t, x, z, _, _ in items]))
                    for (_, _, _, want, name), p in zip(items, P):
                        k = CLASSES.index(want)
                        best[T.norm(name)] = max(best.get(T.norm(name), 0.0), float(p[k]))
                        if p.argmax() == k and T.norm(name) not in map(T.norm, learned):
                            learned.append(name)
            # A name the graph read from prose only, which no sentence reads as the relation asked.
            def prose_only(n):
                es = [e for e in o.get("edges") or [] if T.norm(n) in (T.norm(e["from"]), T.norm(e["to"]))]
                return es and all(e["how"] == "statement" for e in es)
            checked = [n for n in graph if not (prose_only(n) and best.get(T.norm(n), 1.0) < a.tau)]
            c = counts[key in HELD]
            c["graph", category(graph, q)] += 1
            c["classifier", category(learned, q)] += 1
            c["graph, else the classifier", category(graph or learned, q)] += 1
            c[f"graph, checked at {a.tau}", category(checked, q)] += 1
    print("3. Direct questions of the topology keys, right / wrong / unanswered:")
    for held in (False, True):
        c = counts[held]
        ways = list(dict.fromkeys(w for w, _ in c))
        print(f"  {'held out' if held else 'may be read'}: " + "; ".join(
            f"{w} {c[w, 'right']}/{c[w, 'wrong']}/{c[w, 'none']}" for w in ways))


if __name__ == "__main__":
    main()
