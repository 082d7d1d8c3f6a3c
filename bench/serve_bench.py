#!/usr/bin/env python3
"""`marktoflow serve` under load: prints figures, asserts nothing.

    cargo build --release && python3 bench/serve_bench.py
    python3 bench/serve_bench.py --requests 100000 --connections 32

For each workflow (a one-step `core.set`, and one small `script.execute`
step) a fresh server is started on 127.0.0.1 with its run store in a
temporary folder, `wrk` (Debian package `wrk`) sends POSTs until at least
`--requests` have completed, and the script reports:

- sustained requests/s and p50/p99 latency (from wrk's latency distribution),
- errors: socket errors and non-2xx answers,
- peak RSS of the server (VmHWM from /proc),
- runs recorded in the store afterwards (every answered request must be one
  completed run there), when the server records runs. Rows still `queued`
  are requests wrk abandoned at its deadline that were waiting for a slot
  when the server was stopped: kept for the next start, as accepted runs are.
"""
import argparse
import os
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "marktoflow")

WORKFLOWS = {
    "core.set": """---
workflow: {id: bench-set}
triggers:
  - {type: webhook, path: /bench, method: POST}
inputs:
  n: {type: number, default: 1}
---

```yaml
action: core.set
inputs: {doubled: '{{ inputs.n * 2 }}'}
output_variable: result
```
""",
    "script": """---
workflow: {id: bench-script}
triggers:
  - {type: webhook, path: /bench, method: POST}
inputs:
  n: {type: number, default: 1}
---

```yaml
action: script.execute
inputs:
  code: |
    const words = ['alpha', 'beta', 'gamma'];
    return { doubled: context.inputs.n * 2, joined: words.join('-') };
output_variable: result
```
""",
}

LUA = """wrk.method = "POST"
wrk.body = '{"n": 21}'
wrk.headers["Content-Type"] = "application/json"
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_up(port, proc):
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited: {proc.stderr.read().decode(errors='replace')}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("the server did not start")


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def to_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    if not m:
        sys.exit(f"cannot read wrk's latency {text!r}")
    v, unit = float(m.group(1)), m.group(2)
    return {"us": v / 1000.0, "ms": v, "s": v * 1000.0, "m": v * 60000.0}[unit]


def store_counts(db):
    if not os.path.exists(db):
        return None
    con = sqlite3.connect(db)
    try:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        if "runs" not in tables:
            return None
        return dict(con.execute("select status, count(*) from runs group by status").fetchall())
    finally:
        con.close()


def bench(name, wf, args, extra):
    d = tempfile.mkdtemp(prefix="mtf-serve-bench-")
    try:
        with open(os.path.join(d, "bench.md"), "w") as f:
            f.write(wf)
        with open(os.path.join(d, "post.lua"), "w") as f:
            f.write(LUA)
        db = os.path.join(d, "runs.db")
        port = free_port()
        env = dict(os.environ, MARKTOFLOW_STORE=db, NO_COLOR="1")
        argv = [BIN, "serve", "bench.md", "--port", str(port)] + extra
        proc = subprocess.Popen(argv, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_up(port, proc)
            url = f"http://127.0.0.1:{port}/bench"
            # Warm up (script workers, SQLite pages), then measure.
            subprocess.run(["wrk", "-t2", "-c8", "-d2s", "-s", "post.lua", url], cwd=d, capture_output=True)
            # Long enough for --requests at the rate the warm-up suggests.
            probe = subprocess.run(["wrk", "-t2", f"-c{args.connections}", "-d3s", "-s", "post.lua", url],
                                   cwd=d, capture_output=True, text=True).stdout
            rate = float(re.search(r"Requests/sec:\s+([\d.]+)", probe).group(1))
            secs = max(5, int(args.requests / max(rate, 1.0) * 1.15) + 1)
            out = subprocess.run(["wrk", "-t2", f"-c{args.connections}", f"-d{secs}s", "--latency",
                                  "-s", "post.lua", url], cwd=d, capture_output=True, text=True).stdout
            rss = peak_rss_mb(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if "requests in" not in out:
            sys.exit(f"wrk printed no result:\n{out}")
        total = int(re.search(r"(\d+) requests in", out).group(1))
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        # Anchored: a "+/- Stdev" of 9.99% would match a bare "99%".
        p50 = to_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
        p99 = to_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        sock = sum(int(x) for x in m.groups()) if m else 0
        m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        non2xx = int(m.group(1)) if m else 0
        counts = store_counts(db)
        print(f"{name:9} {total:>8} req in {secs:>3}s  {rps:>9.0f} req/s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
              f"errors {sock + non2xx}  peak RSS {rss:5.1f} MB  "
              f"recorded {counts if counts is not None else 'n/a (no store)'}")
        sys.stdout.flush()
        return rps
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--only", choices=list(WORKFLOWS))
    ap.add_argument("--compare-store", action="store_true",
                    help="the core.set workflow recorded and with --no-store, alternating (--reps each), and the ratio of their medians")
    ap.add_argument("--reps", type=int, default=5,
                    help="with --compare-store: how many of each (default 5; this kind of machine varies by 30%% from one to the next)")
    ap.add_argument("--bin", default=None, help="the marktoflow binary (default target/release)")
    ap.add_argument("serve_args", nargs="*", help="extra `serve` flags after --")
    args = ap.parse_args()
    global BIN
    if args.bin:
        BIN = os.path.abspath(args.bin)
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    if not shutil.which("wrk"):
        sys.exit("needs wrk: apt-get install wrk")
    print(f"marktoflow serve, wrk -t2 -c{args.connections}, >= {args.requests} requests each, "
          f"{os.cpu_count()} cores")
    if args.compare_store:
        recorded, unrecorded = [], []
        for _ in range(max(1, args.reps)):
            recorded.append(bench("recorded", WORKFLOWS["core.set"], args, args.serve_args))
            unrecorded.append(bench("no-store", WORKFLOWS["core.set"], args, args.serve_args + ["--no-store"]))
        r, u = statistics.median(recorded), statistics.median(unrecorded)
        pairs = sorted(a / b for a, b in zip(recorded, unrecorded))
        print(f"recorded / --no-store throughput, medians of {len(recorded)}: {r:.0f} / {u:.0f} req/s = {r / u:.2f} "
              f"(each pair: {' '.join(f'{p:.2f}' for p in pairs)})")
        return
    for name, wf in WORKFLOWS.items():
        if args.only and name != args.only:
            continue
        bench(name, wf, args, args.serve_args)


if __name__ == "__main__":
    main()
