#!/usr/bin/env python3
"""Waiting runs cost their row, not memory (issue 50): a server's resident
memory idle, then with 10,000 runs stopped at a `wait` for an approval
(each started by a webhook request), and the time to answer one of them.
Prints figures; asserts nothing.

    cargo build --release
    python3 bench/waits.py [N]
"""
import json, os, re, subprocess, sys, tempfile, time, http.client
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "marktoflow")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
WORK = tempfile.mkdtemp()
os.mkdir(os.path.join(WORK, ".marktoflow"))
with open(os.path.join(WORK, "ask.md"), "w") as f:
    f.write("""---
workflow: {id: ask}
triggers: [{type: webhook, path: /ask}]
inputs: {n: {type: integer, default: 0}}
---

```yaml
id: review
type: wait
mode: approval
title: 'Request {{ inputs.n }}'
fields: {note: {type: string}}
```
""")
p = subprocess.Popen([BIN, "serve", "ask.md", "--port", "0", "--no-supervisor", "--max-queue", "100000"],
                     cwd=WORK, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
while True:
    m = re.search(r"on http://([\d.]+):(\d+)", p.stderr.readline())
    if m:
        host, port = m.group(1), int(m.group(2))
        break

def rss_mb():
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

def post(path, body):
    c = http.client.HTTPConnection(host, port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data

time.sleep(1)
idle = rss_mb()
t = time.time()
with ThreadPoolExecutor(8) as ex:
    codes = list(ex.map(lambda i: post("/ask", {"n": i})[0], range(N)))
took = time.time() - t
waiting_count = sum(1 for c in codes if c == 202)
time.sleep(2)
after = rss_mb()
status, body = post("/ask", {"n": -1})
run = json.loads(body)["run_id"]
t = time.time()
status, _ = post(f"/runs/{run}/steps/review/answer", {"decision": "approve"})
answered = time.time() - t
print(f"runs waiting: {waiting_count} of {N} (started in {took:.1f} s, {N / took:.0f}/s)")
print(f"resident memory: idle {idle:.1f} MB, with {waiting_count} waiting runs {after:.1f} MB "
      f"(+{after - idle:.1f} MB)")
print(f"answering one of them: HTTP {status} in {answered * 1000:.0f} ms")
p.terminate()
p.wait()
