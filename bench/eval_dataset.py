#!/usr/bin/env python3
"""The answer benchmark's questions (bench/lifeos_questions.jsonl, or the
file given) as a `marktoflow eval` dataset, on stdout:

    python3 bench/eval_dataset.py > /tmp/lifeos.jsonl
    marktoflow eval workflows/lifeos/retrieval-indexed.md /tmp/lifeos.jsonl \
        --metric contains:answer --metric exact:found

Each question's accepted answers (groups of alternatives: each group must
be in the answer, any one of its alternatives) become `expected.answer`;
whether the notes answer it becomes `expected.found`. Near misses expect
`found: false` and nothing of the answer.
"""

import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "bench/lifeos_questions.jsonl"
with open(path) as f:
    for line in f:
        if not line.strip():
            continue
        q = json.loads(line)
        expected = {"found": bool(q.get("answerable"))}
        if q.get("answerable"):
            expected["answer"] = q.get("answer", [])
        print(json.dumps({"name": q["q"], "inputs": {"query": q["q"]}, "expected": expected}))
