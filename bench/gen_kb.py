#!/usr/bin/env python3
"""Generates a synthetic LifeOS-like knowledge base for benchmarks.

    python3 bench/gen_kb.py OUT_DIR --notes 2000 [--seed 1]

Deterministic for a given seed: Work/Projects/<P>/, Work/Meetings/<year>/,
Work/Tasks/, Personal/<area>/<year>/ folders 2-4 levels deep, notes of
1-3 KB of English-like text with project names, people and dates, each
starting with an H1 title.
"""
import argparse
import os
import random

PROJECTS = ["Apollo", "Hermes", "Zephyr", "Atlas", "Orion", "Vega", "Lyra", "Juno", "Helios", "Nova"]
PEOPLE = ["John Carter", "Priya Natarajan", "Marcus Lee", "Sofia Alvarez", "Dana Whitfield",
          "Omar Haddad", "Mei Chen", "Lukas Berg", "Aisha Bello", "Tom Novak"]
AREAS = ["Health", "Finance", "Travel", "Reading", "Journal", "Home", "Recipes", "Goals"]
WORDS = ("the a review deadline budget launch plan risk customer api key service deploy "
         "release migration schema database latency test design meeting action item decision "
         "owner status pending done blocked follow up weekly sync roadmap quarter estimate "
         "partner contract security incident metric dashboard query index search note idea "
         "travel run book recipe garden family weekend morning evening report draft").split()


def sentence(rng):
    n = rng.randint(8, 18)
    words = [rng.choice(WORDS) for _ in range(n)]
    if rng.random() < 0.4:
        words.insert(rng.randrange(n), rng.choice(PROJECTS))
    if rng.random() < 0.3:
        words.insert(rng.randrange(n), rng.choice(PEOPLE))
    return " ".join(words).capitalize() + "."


def note(rng, title, kind):
    date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    lines = [f"# {title}", "", f"- Type: {kind}", f"- Date: {date}",
             f"- Owner: {rng.choice(PEOPLE)}", f"- Tags: #{rng.choice(PROJECTS).lower()} #{rng.choice(WORDS)}", ""]
    target = rng.randint(1000, 3000)
    size = sum(len(l) + 1 for l in lines)
    while size < target:
        para = " ".join(sentence(rng) for _ in range(rng.randint(2, 5)))
        if rng.random() < 0.2:
            para = f"## {sentence(rng)[:40].rstrip('.')}\n\n{para}"
        lines.append(para)
        lines.append("")
        size += len(para) + 2
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    total = 0
    for i in range(a.notes):
        r = rng.random()
        if r < 0.35:
            p = rng.choice(PROJECTS)
            folder = os.path.join("Work", "Projects", p, rng.choice(["Notes", "Specs", "Reviews"]))
            title, kind = f"{p} {rng.choice(['design', 'status', 'review', 'plan'])} {i}", "project"
        elif r < 0.55:
            folder = os.path.join("Work", "Meetings", str(rng.choice([2025, 2026])))
            title, kind = f"Meeting {i} with {rng.choice(PEOPLE)}", "meeting"
        elif r < 0.7:
            folder = os.path.join("Work", "Tasks")
            title, kind = f"Task {i}: {sentence(rng)[:30].rstrip('.')}", "task"
        else:
            area = rng.choice(AREAS)
            folder = os.path.join("Personal", area, str(rng.choice([2025, 2026])))
            title, kind = f"{area} note {i}", area.lower()
        d = os.path.join(a.out, folder)
        os.makedirs(d, exist_ok=True)
        text = note(rng, title, kind)
        with open(os.path.join(d, f"note-{i:05d}.md"), "w") as f:
            f.write(text)
        total += len(text)
    print(f"{a.notes} notes, {total / 1e6:.1f} MB in {a.out}")


if __name__ == "__main__":
    main()
