#!/usr/bin/env python3
"""The server's backstops, measured (issue 49): how long until `/health`
answers again after the server aborts (the supervisor starts it again),
and how long `/health` takes while 1,100 connections that send nothing
are open at a descriptor limit of 1,024. Prints figures; asserts nothing.

    cargo build --release
    python3 bench/backstop.py
"""
import os, re, resource, socket, subprocess, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "marktoflow")
WORK = tempfile.mkdtemp()
with open(os.path.join(WORK, "hook.md"), "w") as f:
    f.write("---\nworkflow: {id: hook}\ntriggers: [{type: webhook, path: /h}]\n---\n\n```yaml\naction: workflow.noop\n```\n")
def start(extra, limit_fds=None):
    def pre():
        if limit_fds:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit_fds, limit_fds))
    p = subprocess.Popen([BIN, "serve", "hook.md", "--port", "0", "--no-store"] + extra, cwd=WORK,
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, preexec_fn=pre, text=True)
    while True:
        line = p.stderr.readline()
        m = re.search(r"on http://([\d.]+):(\d+)", line)
        if m: return p, (m.group(1), int(m.group(2)))
def health(addr, timeout=30):
    t = time.time()
    s = socket.create_connection(addr, timeout=timeout)
    s.settimeout(timeout)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = s.recv(100)
    s.close()
    return data.startswith(b"HTTP/1.1 200"), time.time() - t
# 1. restart after an abort
p, addr = start([])
times = []
for i in range(5):
    child = int(open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()[0])
    t = time.time(); os.kill(child, 6)
    while True:
        try:
            c2 = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
            if c2 and int(c2[0]) != child:
                ok, _ = health(addr)
                if ok: break
        except Exception: pass
        time.sleep(0.005)
    times.append(time.time() - t)
    time.sleep(0.5)
p.terminate(); p.wait()
print("restart after SIGABRT to /health 200 (s):", ", ".join(f"{x:.2f}" for x in times))
# 2. silent connections at 1,024 descriptors
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
for extra, name in [([], "now")]:
    p, addr = start(["--no-supervisor"], limit_fds=1024)
    conns = [socket.create_connection(addr) for _ in range(1100)]
    lat = [health(addr)[1] for _ in range(5)]
    print(f"/health with 1,100 silent connections open, fd limit 1,024 ({name}):", ", ".join(f"{x*1000:.0f} ms" for x in lat))
    for c in conns: c.close()
    p.kill(); p.wait()
