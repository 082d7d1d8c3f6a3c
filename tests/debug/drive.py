"""Drives a program in a pseudo-terminal, as a person at a terminal would:
waits for each expected text, then types the line that follows it.

    python3 drive.py PROGRAM ARGS... < steps.json

steps.json is a list of [expected text, line to type]. Prints everything
the program wrote (the terminal's view), then exits with its exit code;
exits 124 when an expected text does not come within 30 seconds."""
import json
import os
import pty
import select
import sys
import time

steps = json.load(sys.stdin)
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])

seen = b""
done = 0


def read_some(deadline):
    global seen
    left = deadline - time.time()
    if left <= 0:
        return False
    r, _, _ = select.select([fd], [], [], left)
    if not r:
        return False
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        return None
    if not chunk:
        return None
    seen += chunk
    return True


for expected, line in steps:
    want = expected.encode()
    deadline = time.time() + 30
    while want not in seen[done:]:
        got = read_some(deadline)
        if not got:
            sys.stdout.write(seen.decode(errors="replace"))
            sys.stdout.write(f"\n[drive] never saw {expected!r}\n")
            os.kill(pid, 9)
            sys.exit(124)
    done = seen.index(want, done) + len(want)
    os.write(fd, line.encode() + b"\n")
    # Past the terminal's echo of the line: what follows is the answer.
    echo = line.encode()
    deadline = time.time() + 30
    while echo not in seen[done:]:
        if not read_some(deadline):
            break
    if echo in seen[done:]:
        done = seen.index(echo, done) + len(echo)

deadline = time.time() + 30
while read_some(deadline):
    pass
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
