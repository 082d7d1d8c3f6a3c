#!/usr/bin/env python3
"""What JavaScript's locale data (boa's `intl` feature, with ICU's data
compiled in, and our number styles, dates and formatToParts in front of
it) costs: binary size, and the cold start of one-step runs, two binaries
side by side in one run, alternating (the machine is shared). Prints
figures, asserts nothing.

    cp target/release/marktoflow /tmp/before      # a build without it
    cargo build --release                         # a build with it
    python3 bench/intl_cost.py --before /tmp/before --after target/release/marktoflow

With --locale-before-too, the before binary also runs the toLocaleString
step (for a before build that has boa's Intl).
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

STEPS = {
    "core.set": "action: core.set\ninputs: {greeting: hello}\noutput_variable: out\n",
    "script.execute (1 + 1)": "action: script.execute\ninputs:\n  code: return 1 + 1\noutput_variable: out\n",
    "script.execute (a date)": "action: script.execute\ninputs:\n  code: return new Date(Date.UTC(2024, 2, 5)).toISOString()\noutput_variable: out\n",
}
LOCALE_STEP = ("script.execute (toLocaleString of a number and a date)",
               "action: script.execute\ninputs:\n  code: \"return [(1234567.891).toLocaleString('en-US'), "
               "new Date(0).toLocaleDateString('en-US', {weekday: 'long', timeZone: 'UTC'})]\"\noutput_variable: out\n")
# Run by the "after" binary only where the "before" one refuses it.
STYLED_STEP = ("script.execute (a percent, a currency, a unit, a numeric date, a zone's name)",
               "action: script.execute\ninputs:\n  code: \"return [(0.256).toLocaleString('en-US', {style: 'percent'}), "
               "(1234.5).toLocaleString('de-DE', {style: 'currency', currency: 'EUR'}), "
               "(12).toLocaleString('en-US', {style: 'unit', unit: 'kilometer-per-hour'}), "
               "new Date(0).toLocaleDateString('en-US', {timeZone: 'UTC'}), "
               "new Date(0).toLocaleString('en-US', {timeZone: 'America/New_York', timeZoneName: 'short'})]\"\n"
               "output_variable: out\n")


def wall(argv, cwd):
    start = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(argv)}\n{p.stderr.decode()}")
    return (time.perf_counter() - start) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="marktoflow built without the locale data")
    ap.add_argument("--after", required=True, help="marktoflow built with it")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--locale-before-too", action="store_true",
                    help="run the toLocaleString step on the before binary too (one that has Intl)")
    a = ap.parse_args()
    bins = {"before": os.path.abspath(a.before), "after": os.path.abspath(a.after)}
    for name, b in bins.items():
        print(f"{name}: {b}, {os.path.getsize(b) / 1e6:.1f} MB")
    growth = os.path.getsize(bins["after"]) / os.path.getsize(bins["before"]) - 1
    print(f"binary size: {growth * 100:+.1f} %")
    work = tempfile.mkdtemp(prefix="mtf-intl-")
    steps = dict(STEPS)
    only_after = [STYLED_STEP] if a.locale_before_too else [LOCALE_STEP, STYLED_STEP]
    if a.locale_before_too:
        steps[LOCALE_STEP[0]] = LOCALE_STEP[1]
    for label, step in list(steps.items()) + only_after:
        with open(os.path.join(work, f"{abs(hash(label))}.md"), "w") as f:
            f.write(f"---\nworkflow: {{id: one}}\n---\n\n```yaml\n{step}```\n")
    for label, _ in list(steps.items()) + only_after:
        wf = os.path.join(work, f"{abs(hash(label))}.md")
        which = bins if label in steps else {"after": bins["after"]}
        times = {k: [] for k in which}
        for i in range(a.runs):
            # Each goes first half the time: the second of a pair runs warmer.
            order = list(which.items())
            for k, b in order if i % 2 == 0 else order[::-1]:
                times[k].append(wall([b, "run", wf, "--quiet", "--no-store"], work))
        med = {k: statistics.median(v) for k, v in times.items()}
        line = ", ".join(f"{k} median {v:.1f} ms" for k, v in med.items())
        if len(med) == 2:
            line += f" ({(med['after'] / med['before'] - 1) * 100:+.1f} %)"
        print(f"cold one-step run, {label} ({a.runs} runs each, alternating): {line}")


if __name__ == "__main__":
    main()
