#!/usr/bin/env python3
"""MCP tool-call throughput and latency: a one-step workflow called N times
in a row over stdio (`marktoflow mcp`) and Streamable HTTP (`serve --mcp`),
with the Python MCP SDK as the client, beside `marktoflow run` of the same
workflow (a process per run); and the other direction, a workflow calling
that tool N times through `sdk: mcp` (our client, one server for the run).
Prints figures; asserts nothing.

    python3 bench/mcp_bench.py [--bin target/release/marktoflow] [--calls 500]
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

WORKFLOW = """---
workflow: {id: echo}
inputs:
  text: {type: string, default: hi}
---

```yaml
action: workflow.set_outputs
inputs: {echo: "{{ inputs.text }}"}
```
"""


CLIENT = """---
workflow: {{id: caller}}
tools:
  srv: {{sdk: mcp, command: marktoflow, args: [mcp, {wf}, --no-store]}}
inputs:
  n: {{type: integer, default: 10}}
---

```yaml
action: srv.echo
inputs: {{text: warm}}
```

```yaml
type: for_each
items: "{{{{ range(inputs.n) }}}}"
item_variable: i
steps:
  - action: srv.echo
    inputs: {{text: "call {{{{ i }}}}"}}
```
"""


async def timed_calls(session, n):
    await session.initialize()
    for _ in range(20):  # warm up
        await session.call_tool("echo", {"text": "warm"})
    lat = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        r = await session.call_tool("echo", {"text": f"call {i}"})
        lat.append(time.perf_counter() - t)
        assert not r.is_error, r
    return time.perf_counter() - start, lat


def report(name, total, lat):
    lat_ms = sorted(x * 1000 for x in lat)
    p = lambda q: lat_ms[min(len(lat_ms) - 1, int(q * len(lat_ms)))]
    print(f"{name:>18}: {len(lat) / total:8.0f} calls/s   median {statistics.median(lat_ms):6.2f} ms"
          f"   p95 {p(0.95):6.2f} ms   p99 {p(0.99):6.2f} ms")
    return statistics.median(lat_ms)


async def over_stdio(binary, wf, n):
    params = StdioServerParameters(command=binary, args=["mcp", wf, "--no-store"], env=dict(os.environ))
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            return await timed_calls(s, n)


async def over_http(url, n):
    async with httpx2.AsyncClient(timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as (r, w, *_):
            async with ClientSession(r, w) as s:
                return await timed_calls(s, n)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "marktoflow"))
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    d = tempfile.mkdtemp()
    wf = os.path.join(d, "echo.md")
    with open(wf, "w") as f:
        f.write(WORKFLOW)
    print(f"binary {binary}; {a.calls} sequential calls of a one-step workflow, no run store")
    total, lat = anyio.run(over_stdio, binary, wf, a.calls)
    stdio_med = report("MCP over stdio", total, lat)
    port = free_port()
    srv = subprocess.Popen([binary, "serve", wf, "--mcp", "--port", str(port), "--no-store"],
                           stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        while "on http://" not in srv.stderr.readline():
            pass
        total, lat = anyio.run(over_http, f"http://127.0.0.1:{port}/mcp", a.calls)
        report("MCP over HTTP", total, lat)
    finally:
        srv.terminate()
        srv.wait()
    runs = []
    for _ in range(a.runs):
        t = time.perf_counter()
        subprocess.run([binary, "run", wf, "--quiet", "--no-store", "--input", "text=x"],
                       stdout=subprocess.DEVNULL, check=True, cwd=d)
        runs.append(time.perf_counter() - t)
    run_med = report("marktoflow run", sum(runs), runs)
    caller = os.path.join(d, "caller.md")
    with open(caller, "w") as f:
        f.write(CLIENT.format(wf=wf))
    timed = {}
    for n in (0, a.calls):
        t = time.perf_counter()
        subprocess.run([binary, "run", caller, "--quiet", "--no-store", "--input", f"n={n}"],
                       stdout=subprocess.DEVNULL, check=True, cwd=d)
        timed[n] = time.perf_counter() - t
    per_call = (timed[a.calls] - timed[0]) / a.calls * 1000
    print(f"{'sdk: mcp client':>18}: {a.calls / (timed[a.calls] - timed[0]):8.0f} calls/s   "
          f"{per_call:6.2f} ms per call from a workflow (server start and first call: {timed[0] * 1000:.0f} ms)")
    print(f"\nan MCP call over stdio (served warm) takes {stdio_med:.2f} ms; a `marktoflow run` "
          f"process {run_med:.2f} ms ({run_med / stdio_med:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
