#!/usr/bin/env python3
"""Does a run that computes hold up the others? Prints figures, asserts nothing.

    cargo build --release && python3 bench/stall.py
    python3 bench/stall.py --bin OTHER/marktoflow --heavy 4

A fresh `marktoflow serve` (run store in a temporary folder) serves two
webhooks: `/noop` (one `workflow.noop` step) and `/heavy` (six
`core.transform` steps mapping a list of 40,000 items, a few seconds of
CPU). The script measures `/noop` alone, then again while `--heavy`
requests to `/heavy` are running at once, and prints the median and worst
`/noop` latency of each phase, the heavy requests' durations, and whether
SIGTERM with `--grace-period 2` ended the server within the grace period
while heavy runs were busy (issue 49, item 5: a no-op webhook took 15.7 to
33 s while two or three heavy requests ran, and SIGTERM took 28 s).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HEAVY = """---
workflow: {id: heavy}
triggers:
  - {type: webhook, path: /heavy, method: POST}
inputs:
  items: {type: array}
---
""" + "".join(
    f"""
```yaml
action: core.transform
inputs:
  input: '{{{{ inputs.items }}}}'
  operation: map
  expression: '{{{{ item.id * {n} + item.id % 7 }}}}'
output_variable: mapped{n}
```
"""
    for n in range(2, 8)
)

NOOP = """---
workflow: {id: noop}
triggers:
  - {type: webhook, path: /noop, method: POST}
---

```yaml
action: workflow.noop
```
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def post(port, path, body, timeout=300):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        r.read()
        status = r.status
    return status, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "marktoflow"))
    ap.add_argument("--heavy", type=int, default=3, help="heavy requests at once")
    ap.add_argument("--items", type=int, default=40_000)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="stall-")
    open(os.path.join(d, "heavy.md"), "w").write(HEAVY)
    open(os.path.join(d, "noop.md"), "w").write(NOOP)
    port = free_port()
    env = dict(os.environ, MARKTOFLOW_STORE=os.path.join(d, "runs.db"), MARKTOFLOW_HOME=d)
    server = subprocess.Popen(
        [args.bin, "serve", ".", "--port", str(port), "--grace-period", "2"],
        cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                post(port, "/noop", {})
                break
            except OSError:
                time.sleep(0.1)
        alone = [post(port, "/noop", {})[1] for _ in range(20)]
        items = [{"id": i} for i in range(args.items)]
        heavy_times = []

        def heavy():
            heavy_times.append(post(port, "/heavy", {"items": items}))

        threads = [threading.Thread(target=heavy) for _ in range(args.heavy)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        busy = []
        while any(t.is_alive() for t in threads):
            busy.append(post(port, "/noop", {})[1])
            time.sleep(0.1)
        for t in threads:
            t.join()
        all_heavy = time.perf_counter() - started
        heavy_times = list(heavy_times)
        measured = list(heavy_times)
        # SIGTERM while heavy runs compute.
        threads = [threading.Thread(target=lambda: _quiet(heavy)) for _ in range(args.heavy)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        term = time.perf_counter()
        server.terminate()
        server.wait(timeout=120)
        stopped = time.perf_counter() - term
    finally:
        if server.poll() is None:
            server.kill()
    ms = lambda xs: f"median {statistics.median(xs) * 1000:.1f} ms, worst {max(xs) * 1000:.1f} ms"
    print(f"binary: {args.bin}")
    print(f"/noop alone ({len(alone)}): {ms(alone)}")
    print(f"/noop during {args.heavy} heavy requests ({len(busy)}): {ms(busy) if busy else 'none sent'}")
    print("heavy requests: " + ", ".join(f"{s} in {t:.1f} s" for s, t in measured) + f" (all done in {all_heavy:.1f} s)")
    print(f"SIGTERM with --grace-period 2 while heavy runs computed: exited in {stopped:.1f} s")


def _quiet(f):
    try:
        f()
    except Exception:
        pass


if __name__ == "__main__":
    main()
