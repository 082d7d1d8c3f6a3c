#!/usr/bin/env python3
"""Servers and workers on one PostgreSQL, against one SQLite server: prints
figures, asserts nothing.

    cargo build --release && python3 bench/cluster_bench.py
    python3 bench/cluster_bench.py --seconds 10 --connections 16 --lease 5

Starts a PostgreSQL of its own (Debian's `initdb` and `pg_ctl`, as the
`postgres` user when run as root) in a temporary folder, and in one run,
side by side on this machine:

1. Recorded runs of a one-step `core.set` webhook workflow, requests that
   wait for their run (`wrk`, closed loop, `--connections` at once):
   - `sqlite`: one `serve` with its SQLite store (the default deployment);
   - `pg 1w`: `serve --no-execute` and one `worker`;
   - `pg 2w`: `serve --no-execute` and two `worker`s;
   - `pg exec`: one `serve` that executes (a worker too).
   Each reports requests/s, p50/p99 latency, errors, and how many runs the
   store holds completed (every answered request must be one).
2. Failover: two workers take 40 runs of a workflow whose step busy-waits
   2 s; one is killed (`kill -9`) while it holds runs; reported is the time
   from the kill to each of its runs being claimed by the other worker
   (target: within the lease + 1 s), and that all 40 complete.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "marktoflow")

ONE_STEP = """---
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
"""

SLOW = """---
workflow: {id: bench-slow}
triggers:
  - {type: webhook, path: /slow, method: POST}
---

```yaml
action: script
inputs:
  code: "const t = Date.now(); while (Date.now() - t < 2000) {} return 1;"
output_variable: waited
```
"""

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


def pg_bin():
    for d in sorted(os.listdir("/usr/lib/postgresql"), reverse=True) if os.path.isdir("/usr/lib/postgresql") else []:
        b = os.path.join("/usr/lib/postgresql", d, "bin")
        if os.path.exists(os.path.join(b, "initdb")):
            return b
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    sys.exit("needs PostgreSQL: apt-get install postgresql")


class Postgres:
    def __init__(self, root):
        self.bin = pg_bin()
        self.user = "postgres" if os.geteuid() == 0 else None
        self.dir = tempfile.mkdtemp(prefix="mtf-pg-", dir="/tmp")
        self.data = os.path.join(self.dir, "data")
        if self.user:
            subprocess.run(["chown", "-R", self.user, self.dir], check=True)
        self.run([os.path.join(self.bin, "initdb"), "-A", "trust", "-U", "marktoflow", "-E", "UTF8",
                  "--no-sync", "-D", self.data])
        self.port = free_port()
        # Durable commits as in production (fsync on): the store's real cost.
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=300" + os.environ.get("PG_EXTRA", "")
        self.run([os.path.join(self.bin, "pg_ctl"), "-w", "-o", opts, "-l",
                  os.path.join(self.dir, "log"), "-D", self.data, "start"])
        self.n = 0

    def run(self, argv):
        if self.user:
            argv = ["runuser", "-u", self.user, "--"] + argv
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)

    def fresh_db(self):
        self.n += 1
        name = f"bench{self.n}"
        self.sql("postgres", f"CREATE DATABASE {name}")
        return name, f"postgres://marktoflow@127.0.0.1:{self.port}/{name}"

    def sql(self, db, query):
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "marktoflow", "-d", db,
                              "-At", "-F", "\t", "-c", query], capture_output=True, text=True, check=True)
        return [line.split("\t") for line in out.stdout.splitlines() if line]

    def stop(self):
        try:
            self.run([os.path.join(self.bin, "pg_ctl"), "-m", "immediate", "-D", self.data, "stop"])
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def start(d, argv, port=None):
    env = dict(os.environ, NO_COLOR="1", MARKTOFLOW_HOME=os.path.join(d, ".home"))
    return subprocess.Popen([BIN] + argv + (["--port", str(port)] if port else []), cwd=d, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_up(port):
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("the server did not start")


def to_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    v, unit = float(m.group(1)), m.group(2)
    return {"us": v / 1000.0, "ms": v, "s": v * 1000.0, "m": v * 60000.0}[unit]


def wrk(d, url, args):
    subprocess.run(["wrk", "-t2", "-c4", "-d1s", "-s", "post.lua", url], cwd=d, capture_output=True)
    out = subprocess.run(["wrk", "-t2", f"-c{args.connections}", f"-d{args.seconds}s", "--latency",
                          "-s", "post.lua", url], cwd=d, capture_output=True, text=True).stdout
    if "requests in" not in out:
        sys.exit(f"wrk printed no result:\n{out}")
    total = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = to_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = to_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = sum(int(x) for x in m.groups()) if m else 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors += int(m.group(1)) if m else 0
    return total, rps, p50, p99, errors


def report(name, figures, completed):
    total, rps, p50, p99, errors = figures
    print(f"{name:8} {total:>7} req  {rps:>7.0f} req/s  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  "
          f"errors {errors}  completed in store {completed}")
    sys.stdout.flush()
    return rps


def throughput(pg, args):
    results = {}
    d = tempfile.mkdtemp(prefix="mtf-cluster-bench-")
    try:
        with open(os.path.join(d, "bench.md"), "w") as f:
            f.write(ONE_STEP)
        with open(os.path.join(d, "post.lua"), "w") as f:
            f.write(LUA)
        # SQLite, one process.
        port = free_port()
        srv = start(d, ["serve", "bench.md", "--store", os.path.join(d, "runs.db")], port)
        try:
            wait_up(port)
            figures = wrk(d, f"http://127.0.0.1:{port}/bench", args)
        finally:
            srv.terminate()
            srv.wait()
        import sqlite3
        con = sqlite3.connect(os.path.join(d, "runs.db"))
        done = con.execute("select count(*) from runs where status = 'completed'").fetchone()[0]
        con.close()
        results["sqlite"] = report("sqlite", figures, done)
        for name, workers, execute in [("pg 1w", 1, False), ("pg 2w", 2, False), ("pg exec", 0, True)]:
            db, url = pg.fresh_db()
            port = free_port()
            argv = ["serve", "bench.md", "--store", url] + ([] if execute else ["--no-execute"])
            procs = [start(d, argv, port)]
            try:
                wait_up(port)
                for _ in range(workers):
                    procs.append(start(d, ["worker", "bench.md", "--store", url]))
                time.sleep(0.5)
                figures = wrk(d, f"http://127.0.0.1:{port}/bench", args)
            finally:
                for p in procs:
                    p.terminate()
                for p in procs:
                    p.wait()
            done = int(pg.sql(db, "select count(*) from runs where status = 'completed'")[0][0])
            commits = int(pg.sql(db, f"select xact_commit from pg_stat_database where datname = '{db}'")[0][0])
            results[name] = report(name, figures, done)
            print(f"{'':8} {commits / max(done, 1):.2f} commits per run (all processes, incl. heartbeats and reads)")
        base = results["sqlite"]
        print("ratios to sqlite: " + ", ".join(f"{k} {v / base:.2f}" for k, v in results.items() if k != "sqlite"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def failover(pg, args):
    d = tempfile.mkdtemp(prefix="mtf-failover-")
    db, url = pg.fresh_db()
    procs = []
    try:
        with open(os.path.join(d, "slow.md"), "w") as f:
            f.write(SLOW)
        port = free_port()
        procs.append(start(d, ["serve", "slow.md", "--store", url, "--no-execute"], port))
        wait_up(port)
        lease = f"{args.lease}s"
        victim = start(d, ["worker", "slow.md", "--store", url, "--lease", lease, "--max-concurrent", "8"])
        # The survivor has room for the victim's runs: what is measured is
        # the lease and the reaper, not a full worker.
        other = start(d, ["worker", "slow.md", "--store", url, "--lease", lease, "--max-concurrent", "64"])
        procs += [victim, other]
        for _ in range(40):
            req = urllib.request.Request(f"http://127.0.0.1:{port}/slow?async=true", data=b"{}",
                                         headers={"Content-Type": "application/json"}, method="POST")
            urllib.request.urlopen(req, timeout=10).read()
        deadline = time.time() + 60
        held = []
        while time.time() < deadline:
            held = [r[0] for r in pg.sql(db, f"select id from runs where pid = {victim.pid} and status = 'running'")]
            if held:
                break
            time.sleep(0.02)
        if not held:
            sys.exit("the victim never ran anything")
        victim.kill()
        killed = time.time()
        victim.wait()
        ids = ",".join(f"'{i}'" for i in held)
        claimed = {}
        while len(claimed) < len(held) and time.time() - killed < args.lease * 4 + 30:
            for (rid,) in pg.sql(db, f"select id from runs where id in ({ids}) and pid = {other.pid}"):
                claimed.setdefault(rid, time.time() - killed)
            time.sleep(0.02)
        deadline = time.time() + 180
        while time.time() < deadline:
            done = int(pg.sql(db, "select count(*) from runs where status = 'completed'")[0][0])
            if done == 40:
                break
            time.sleep(0.2)
        dup = pg.sql(db, "select count(*) from (select run_id, step_id from steps group by 1, 2 having count(*) > 1) x")
        times = sorted(claimed.values())
        print(f"failover: lease {args.lease}s, {len(held)} runs held by the killed worker; claimed elsewhere "
              f"{len(times)} of them, {times[0]:.2f}–{times[-1]:.2f} s after kill -9 "
              f"(target ≤ {args.lease + 1} s); completed {done}/40; steps journaled twice: {dup[0][0]}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--lease", type=int, default=5)
    args = ap.parse_args()
    if not os.path.exists(BIN):
        sys.exit("build first: cargo build --release")
    if not shutil.which("wrk"):
        sys.exit("needs wrk: apt-get install wrk")
    print(f"{os.cpu_count()} cores; wrk -t2 -c{args.connections} -d{args.seconds}s, requests wait for their run")
    pg = Postgres(REPO)
    try:
        throughput(pg, args)
        failover(pg, args)
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
