#!/usr/bin/env python3
"""Validates every workflow of the TypeScript marktoflow's `examples/` folder
with our runner and sorts the outcomes: valid, refused only for naming a
service integration we do not ship, or refused for other reasons (each
listed with its errors).

    python3 bench/peer_examples.py PEER_CHECKOUT/examples [--bin target/release/marktoflow]

The peer's repository is public (github.com/marktoflow/marktoflow); nothing
of it is kept here.
"""

import argparse
import os
import re
import subprocess
import sys

ERROR = re.compile(r"^(\S+?):(\d+):(\d+): error: (.*)$")
INTEGRATION = ("an integration of the TypeScript marktoflow that this runner does not ship",
               "an MCP server, which this runner does not load")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("examples")
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "marktoflow"))
    args = ap.parse_args()
    binary = os.path.abspath(args.bin)
    files = []
    for root, _, names in os.walk(args.examples):
        for n in names:
            if n.endswith(".md") and n not in ("README.md", "TESTING.md"):
                files.append(os.path.join(root, n))
    files.sort()
    valid, services, other = [], [], []
    for f in files:
        rel = os.path.relpath(f, args.examples)
        r = subprocess.run([binary, "validate", os.path.basename(f)], cwd=os.path.dirname(f),
                           capture_output=True, text=True)
        # A sub-workflow's errors come after the line naming it.
        errors = [m.group(4) for line in r.stderr.splitlines()
                  if (m := ERROR.match(line)) and not m.group(4).endswith("does not load:")]
        if r.returncode == 0:
            valid.append(rel)
        elif errors and all(any(i in e for i in INTEGRATION) for e in errors):
            sdks = sorted({re.search(r"sdk `([^`]+)`", e).group(1) for e in errors})
            services.append((rel, sdks))
        else:
            other.append((rel, errors or [r.stderr.strip().splitlines()[0] if r.stderr.strip() else f"exit {r.returncode}"]))
    print(f"{len(files)} workflows: {len(valid)} valid, {len(services)} refused only for service "
          f"integrations, {len(other)} refused for other reasons\n")
    print("valid:")
    for f in valid:
        print(f"  {f}")
    print("\nrefused only for service integrations (sdk named once per tool):")
    for f, sdks in services:
        print(f"  {f}: {', '.join(sdks)}")
    print("\nrefused for other reasons:")
    for f, errs in other:
        print(f"  {f}:")
        for e in errs:
            print(f"    - {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
