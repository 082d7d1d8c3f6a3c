#!/usr/bin/env python3
"""Answer quality of the LifeOS flagship: are the answers right, cited, and
honest when the notes are silent? Prints figures; asserts nothing.

Each question of `bench/lifeos_questions.jsonl` is asked of
`workflows/lifeos/retrieval-indexed.md` on `examples/lifeos`, in a fresh
process (`marktoflow run`) and, with --served, POSTed to `marktoflow serve`
(the model stays loaded). A question with `answer` (a list of facts, each a
list of accepted spellings) is answered correctly when `found` is true and
every fact appears in what the user reads first (`outputs.answer` before
` — from your notes: “…”`: a fact only in the quote does not count); a question with `answerable: false`
must get `found: false` — any other reply is a made-up answer, whatever its
confidence. Reported:

- accuracy on answerable questions, per expected type;
- made-up answers on unanswerable ones;
- citation precision: correct answers whose cited lines (`citations[].quote`)
  hold every fact;
- calibration: for each confidence bin, how many answers and how many right;
- seconds per question (median, p90), fresh and served.

`--split tune|holdout|all` picks the questions (default all; the held-out
slice was written before the rules and is not tuned on). By default the
answer comes from the lines by rules (`answer.extract`); `--reader model`
has the local model read it (`answer.read`); `--phrase` has the model
phrase it, verified.
`--questions FILE --kb DIR` asks another vault: `bench/til_questions.jsonl`
is about jbranchaud/til (a public notes collection nobody here wrote),
checked out at the commit its first line names (`til_commit`).
`--show` prints every wrong answer.

    cargo build --release
    python3 bench/lifeos_answers.py                 # the default setup, fresh processes
    python3 bench/lifeos_answers.py --served        # the same, served too
    python3 bench/lifeos_answers.py --phrase        # the model phrases, verified
    git clone https://github.com/jbranchaud/til /tmp/til && git -C /tmp/til checkout 453e9ed
    python3 bench/lifeos_answers.py --questions bench/til_questions.jsonl --kb /tmp/til
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUESTIONS = os.path.join(REPO, "bench", "lifeos_questions.jsonl")
FLOW = "workflows/lifeos/retrieval-indexed.md"


def has_fact(text, alternatives):
    t = text.lower()
    return any(a.lower() in t for a in alternatives)


def judge(q, out):
    """(correct, made_up, cites_facts) for one question's outputs."""
    found = out.get("found") is True
    # Scored strictly: what the user reads first, the answer's lead value
    # before the quote (`… — from your notes: “…”`).
    answer = (out.get("answer") or "").split(" — from your notes")[0]
    if not q.get("answerable", True):
        return (not found, found, None)
    correct = found and all(has_fact(answer, f) for f in q["answer"])
    quotes = " ".join((c.get("quote") or "") for c in out.get("citations") or [] if isinstance(c, dict))
    cites = correct and all(has_fact(quotes, f) for f in q["answer"])
    return (correct, False, cites)


def fresh(bin_, q, env, phrase, kb=None, reader=None):
    args = [bin_, "run", FLOW, "--json", "-q", "--no-store", "--input", f"query={q}",
            "--input", f"phrase={'true' if phrase else 'false'}"]
    if kb:
        args += ["--input", f"knowledge_base={kb}"]
    if reader:
        args += ["--input", f"reader={reader}"]
    t = time.perf_counter()
    r = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t
    try:
        j = json.loads(r.stdout)
    except json.JSONDecodeError:
        sys.exit(f"no JSON for {q!r}: exit {r.returncode}\n{r.stderr}")
    if j.get("status") != "completed":
        sys.exit(f"{q!r} did not complete: {json.dumps(j.get('error'))}\n{r.stderr}")
    out = dict(j["outputs"])
    # The model reader's span and signals are in its step's output (--dump).
    for step in j.get("steps") or []:
        o = step.get("output")
        if isinstance(o, dict) and isinstance(o.get("reader"), dict) and "signals" in o["reader"]:
            out["reader"] = o["reader"]
    return out, secs


class Server:
    def __init__(self, bin_, env, kb=None, reader=None):
        self.kb = kb
        self.reader = reader
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.proc = subprocess.Popen([bin_, "serve", FLOW, "--port", str(self.port), "--no-store"],
                                     cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while True:
            try:
                self.ask("warm up: what is the API key for Apollo?", True)
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    sys.exit("the server did not start")
                time.sleep(0.2)

    def ask(self, q, phrase):
        body = {"query": q, "phrase": phrase}
        if self.kb:
            body["knowledge_base"] = self.kb
        if self.reader:
            body["reader"] = self.reader
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/lifeos/query-indexed",
                                     data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        t = time.perf_counter()
        with urllib.request.urlopen(req, timeout=300) as r:
            j = json.loads(r.read())
        return j["outputs"], time.perf_counter() - t

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def report(name, qs, results, show):
    ans = [(q, r) for q, r in zip(qs, results) if q.get("answerable", True)]
    una = [(q, r) for q, r in zip(qs, results) if not q.get("answerable", True)]
    print(f"\n== {name}: {len(ans)} answerable, {len(una)} unanswerable questions")
    if ans:
        right = [judge(q, r[0])[0] for q, r in ans]
        print(f"accuracy (answerable)        {sum(right)}/{len(ans)} = {sum(right) / len(ans):.3f}")
        types = sorted({q["type"] for q, _ in ans})
        for t in types:
            sub = [judge(q, r[0])[0] for q, r in ans if q["type"] == t]
            print(f"  {t:<10} {sum(sub)}/{len(sub)}")
        cited = [judge(q, r[0])[2] for q, r in ans if judge(q, r[0])[0]]
        if cited:
            print(f"citation precision           {sum(cited)}/{len(cited)} = {sum(cited) / len(cited):.3f}"
                  " (correct answers whose cited lines hold every fact)")
        said_none = sum(1 for q, r in ans if r[0].get("found") is not True)
        print(f"answerable but 'not found'   {said_none}")
    if una:
        made = [judge(q, r[0])[1] for q, r in una]
        print(f"made-up answers (unanswerable) {sum(made)}/{len(una)} = {sum(made) / len(una):.3f}")
    # Calibration over every answer given (found: true).
    bins = [(0, 39), (40, 69), (70, 89), (90, 100)]
    print("calibration (answers given): confidence  count  right")
    for lo, hi in bins:
        given = [(q, r) for q, r in zip(qs, results)
                 if r[0].get("found") is True and lo <= (r[0].get("confidence") or 0) <= hi]
        ok = sum(1 for q, r in given if judge(q, r[0])[0] and q.get("answerable", True))
        frac = f"{ok / len(given):.2f}" if given else "-"
        print(f"  {lo:>3}-{hi:<3}  {len(given):>5}  {ok:>5}  {frac}")
    secs = sorted(r[1] for r in results)
    p90 = secs[min(len(secs) - 1, int(len(secs) * 0.9))]
    print(f"seconds per question         median {statistics.median(secs):.2f}  p90 {p90:.2f}  max {secs[-1]:.2f}")
    if show:
        for q, r in zip(qs, results):
            c, made, _ = judge(q, r[0])
            if not c:
                print(f"--- {q['q']}  [{q['type']}]")
                print(f"    want {q['answer'] if q.get('answerable', True) else 'found: false'}")
                print(f"    got  found={r[0].get('found')} conf={r[0].get('confidence')}: "
                      f"{(r[0].get('answer') or '')[:300]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "marktoflow"))
    ap.add_argument("--questions", default=QUESTIONS)
    ap.add_argument("--kb", help="the notes folder (default: the workflow's, examples/lifeos); with "
                    "bench/til_questions.jsonl, a checkout of jbranchaud/til at its til_commit")
    ap.add_argument("--reader", choices=["rules", "model"], help="who reads the answer (the workflow's `reader`; default rules)")
    ap.add_argument("--split", choices=["tune", "holdout", "all"], default="all")
    ap.add_argument("--phrase", action="store_true", help="the model phrases each answer (phrase=true), verified")
    ap.add_argument("--served", action="store_true", help="also ask a running `marktoflow serve`")
    ap.add_argument("--only-served", action="store_true", help="ask the server only")
    ap.add_argument("--limit", type=int, default=0, help="the first N questions only")
    ap.add_argument("--show", action="store_true", help="print every wrong answer")
    ap.add_argument("--dump", help="write each question's outputs (with the model reader's span and signals) "
                                   "to this JSONL file, for fitting the reader's decision")
    args = ap.parse_args()
    if not os.path.exists(args.bin):
        sys.exit("build first: cargo build --release")
    qs = [json.loads(line) for line in open(args.questions) if line.strip()]
    if args.split == "tune":
        qs = [q for q in qs if q.get("split") != "holdout"]
    elif args.split == "holdout":
        qs = [q for q in qs if q.get("split") == "holdout"]
    if args.limit:
        qs = qs[:args.limit]
    env = dict(os.environ)
    # No cloud key: the default setup, the local model.
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(k, None)
    phrase = args.phrase
    if not phrase:
        # No model is called, but a workflow with an agent step wants a
        # provider it could reach: one that answers nothing.
        env["ANTHROPIC_API_KEY"] = "unused"
        env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"
    # The state folder and the models are the user's own (the index is
    # built, or refreshed, by the first question).
    if not args.only_served:
        results = [fresh(args.bin, q["q"], env, phrase, args.kb, args.reader) for q in qs]
        report("fresh process" + (" (the model phrases)" if phrase else ""), qs, results, args.show)
        if args.dump:
            with open(args.dump, "w") as f:
                for q, (out, secs) in zip(qs, results):
                    f.write(json.dumps({"question": q, "outputs": out, "secs": secs}) + "\n")
    if args.served or args.only_served:
        srv = Server(args.bin, env, args.kb, args.reader)
        try:
            results = [srv.ask(q["q"], phrase) for q in qs]
        finally:
            srv.close()
        report("served" + (" (the model phrases)" if phrase else ""), qs, results, args.show)

if __name__ == "__main__":
    main()
