#!/usr/bin/env python3
"""The built-in local model, measured through the release binary.

Prints: model load time (memory-mapped, fresh process), prompt reading and
generation in tokens/s (a ~512-token prompt, 128 generated tokens, the
sizes llama-bench's pp512/tg128 use), peak RSS, and seconds per flagship
question end to end (fresh process each, no key: the local model answers).
With --llama-bench PATH, llama.cpp's own llama-bench runs the same model
with the same thread count in the same run (prompt reading at the same
length, generation at the same context depth), as the reference for how
close the integration is to the engine's own speed. llama-bench is not in
the crate's vendored sources; build it from a llama.cpp checkout (for
instance the one in PyPI's llama-cpp-python sdist) with the same CPU flags:
cmake -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
-DGGML_BMI2=ON -DCMAKE_C_FLAGS=-march=x86-64-v3 -DCMAKE_CXX_FLAGS=-march=x86-64-v3.

    python3 bench/local_model.py [--model GGUF] [--questions 5] [--llama-bench PATH]

Needs `cargo build --release` and `marktoflow model install`.
"""

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "marktoflow")
DEFAULT_MODEL = os.path.expanduser(
    "~/.local/share/marktoflow/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
)

WORKFLOW = """---
workflow: {{id: bench, name: Bench}}
tools:
  ai: {{sdk: local}}
---
## Ask
```yaml
action: ai.run
timeout: 10m
inputs:
  max_tokens: {max_tokens}
  prompt: {prompt}
```
"""


def child_peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_step(model, prompt, max_tokens):
    """One fresh process: (wall s, load s, prompt tokens, prompt s, reply tokens, reply s)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "b.md")
        with open(path, "w") as f:
            f.write(WORKFLOW.format(max_tokens=max_tokens, prompt=json.dumps(prompt)))
        env = dict(os.environ, MARKTOFLOW_LOCAL_MODEL=model, MARKTOFLOW_HOME=d, NO_COLOR="1")
        t0 = time.perf_counter()
        p = subprocess.run([BIN, "run", path, "-v"], capture_output=True, text=True, env=env, cwd=d)
        wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"run failed:\n{p.stderr}")
    ready = re.search(r"loaded in ([\d.]+)s", p.stderr)
    gen = re.search(r"local (\d+) prompt tokens in ([\d.]+)s, (\d+) reply tokens in ([\d.]+)s", p.stderr)
    if not (ready and gen):
        sys.exit(f"no timings in the log:\n{p.stderr}")
    return (
        wall,
        float(ready.group(1)),
        int(gen.group(1)),
        float(gen.group(2)),
        int(gen.group(3)),
        float(gen.group(4)),
    )


def flagship(model, questions):
    times = []
    for q in questions:
        env = dict(os.environ, MARKTOFLOW_LOCAL_MODEL=model, NO_COLOR="1")
        env.pop("ANTHROPIC_API_KEY", None)
        t0 = time.perf_counter()
        p = subprocess.run(
            [BIN, "run", "workflows/lifeos/retrieval-indexed.md", "--json", "--quiet", "--input", "query=" + q],
            capture_output=True, text=True, env=env, cwd=ROOT,
        )
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit(f"flagship failed on {q!r}:\n{p.stderr}")
    return times


def llama_bench(path, model, threads, prompt_tokens, depth):
    """llama-bench's best of flash attention off/on: prompt reading at depth 0
    (as ours), generation at the depth our reply starts from."""
    def best(args):
        p = subprocess.run(
            [path, "-m", model, "-t", str(threads), "-r", "3", "-fa", "0,1", "-o", "json"] + args,
            capture_output=True, text=True,
        )
        if p.returncode != 0:
            sys.exit(f"llama-bench failed:\n{p.stderr}")
        return max(r["avg_ts"] for r in json.loads(p.stdout))
    return {
        "pp": best(["-p", str(prompt_tokens), "-n", "0"]),
        "tg": best(["-p", "0", "-n", "128", "-d", str(depth)]),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("MARKTOFLOW_LOCAL_MODEL", DEFAULT_MODEL))
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--llama-bench", default=None)
    a = ap.parse_args()
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    if not os.path.exists(a.model):
        sys.exit(f"no model at {a.model}: marktoflow model install")
    threads = os.cpu_count()

    # ~512 prompt tokens (the template adds ~30), 128 generated: the
    # reply is asked to be long so that it does not end early.
    filler = " ".join(f"item{i}" for i in range(150))
    long_prompt = "Here is a list: " + filler + ". Now count upwards from 1 to 500, one number per line, and do not stop."
    loads, pps, tgs, walls = [], [], [], []
    for _ in range(a.repeat):
        wall, load, pt, ps, rt, rs = run_step(a.model, long_prompt, 128)
        loads.append(load)
        pps.append(pt / ps)
        tgs.append(rt / rs)
        walls.append(wall)
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(f"model: {a.model} ({os.path.getsize(a.model) / 1e6:.0f} MB), threads: {threads}")
    print(f"load (fresh process, memory-mapped): {med(loads) * 1000:.0f} ms")
    print(f"prompt reading: {med(pps):.1f} tokens/s ({pt} tokens)")
    print(f"generation:     {med(tgs):.1f} tokens/s ({rt} tokens)")
    print(f"one step, fresh process: {med(walls):.2f} s")
    print(f"peak RSS of one step: {child_peak_rss_mb():.0f} MB")

    if a.llama_bench:
        ref = llama_bench(a.llama_bench, a.model, threads, pt, pt)
        print(f"llama-bench (same model, {threads} threads, best of flash attention off/on): "
              f"pp{pt} {ref['pp']:.1f} tokens/s, tg128 at depth {pt} {ref['tg']:.1f} tokens/s")
        print(f"ours / llama-bench: prompt {med(pps) / ref['pp']:.2f}, generation {med(tgs) / ref['tg']:.2f}")

    qs = [json.loads(l)["q"] for l in open(os.path.join(ROOT, "bench", "lifeos_questions.jsonl"))][: a.questions]
    times = flagship(a.model, qs)
    print(f"flagship, {len(qs)} questions, fresh process each: mean {sum(times) / len(times):.1f} s, "
          f"min {min(times):.1f} s, max {max(times):.1f} s")
    print(f"peak RSS over all runs: {child_peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
