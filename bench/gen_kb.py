#!/usr/bin/env python3
"""Generates a synthetic LifeOS-like knowledge base for benchmarks.

    python3 bench/gen_kb.py OUT_DIR --notes 2000 [--seed 1]

The output depends only on --notes and --seed (same arguments, same bytes).
Folders are nested 2 to 4 levels deep:

    Work/Projects/<Project>/[Specs|Reviews|Notes/]   project notes
    Work/Meetings/<year>/[<month>/]                  dated meeting notes
    Work/Tasks/[Done/]                               tasks, pending or done
    Work/People/                                     colleagues
    Personal/<Area>/[<year>/[<month>/]]              health, finance, journal, ...

Every note is plain ASCII Markdown of 1 to 3 KB: an H1 title (the LifeOS
search gives a bonus for terms in it), a short bullet list of metadata, then
sections of English-like sentences and lists that mention project names,
people and dates. As in real vaults, a quarter of the notes open with YAML
frontmatter (title, date, tags, aliases) and two in five end with links to
other notes (`[[Apollo]]`, `[[Priya Natarajan]]`, `[spec](../Specs/x.md)`).
Those extras are drawn from a generator of their own, so the rest of each
note is the same as without them. 40,000 notes take about 10 s. Standard
library only.
"""
import argparse
import os
import random
import sys
import time

PROJECTS = ["Apollo", "Hermes", "Zephyr", "Atlas", "Orion", "Vega", "Lyra", "Juno", "Helios", "Nova",
            "Kepler", "Tethys"]
PEOPLE = ["John Carter", "Priya Natarajan", "Marcus Lee", "Sofia Alvarez", "Daniel Okafor",
          "Hannah Schmidt", "Omar Haddad", "Mei Chen", "Lukas Berg", "Aisha Bello", "Tom Novak",
          "Elena Ruiz", "Kenji Watanabe", "Grace Mensah"]
PARTNERS = ["Bluefin Retail", "Kestrel Foods", "Orchard Supply", "Northwind Traders", "Pinecrest Labs"]
AREAS = ["Health", "Finance", "Travel", "Reading", "Journal", "Home", "Recipes", "Goals"]
PROJECT_SUBDIRS = ["Specs", "Reviews", "Notes"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]

NOUNS = ["rollout plan", "rate limit", "schema change", "budget", "design review", "load test",
         "migration", "release", "incident report", "roadmap", "API key rotation", "dashboard",
         "contract", "partner guide", "on-call rota", "database cutover", "deadline", "estimate",
         "security review", "test plan", "webhook retry policy", "search index", "prototype"]
VERBS = ["finish", "review", "draft", "update", "test", "ship", "estimate", "document", "simplify",
         "split", "benchmark", "present", "approve", "revisit"]
ADJS = ["first", "revised", "final", "rough", "shared", "quarterly", "urgent", "small", "risky",
        "overdue", "simpler", "second"]
STATUSES = ["on track", "at risk", "blocked on legal", "waiting for review", "done", "slipping by a few days"]
EVENTS = ["weekly sync", "design review", "planning session", "retro", "partner call", "1:1",
          "security review", "cutover rehearsal", "roadmap review", "standup"]
PLACES = ["the river", "the park", "the canal", "the old harbour", "the forest trail", "the track"]
FOODS = ["red lentil dal", "sourdough", "mushroom risotto", "tomato soup", "banana bread", "ramen",
         "chickpea curry", "apple pie"]
BOOKS = ["Thinking in Systems", "The Design of Everyday Things", "Klara and the Sun",
         "The Mythical Man-Month", "Educated", "Norwegian Wood", "The Overstory", "Born to Run"]
CITIES = ["Lisbon", "Kyoto", "Berlin", "Oslo", "Porto", "Vienna", "Seville", "Edinburgh"]

WORK_SENTENCES = [
    "{person} will {verb} the {adj} {noun} for {project} before {date}.",
    "We agreed to {verb} the {noun} after the {event} on {date}.",
    "The {noun} for {project} is {status}; {person} owns the follow-up.",
    "Latency on the {project} endpoints stayed under {n} ms during the {noun}.",
    "{person} asked whether the {noun} could move to {date}, and {person2} said no.",
    "{partner} sends about {big} orders a night, which changes the {noun}.",
    "The {project} deadline is {date}; the code freeze is two weeks earlier.",
    "Open question: who approves the {adj} {noun} while {person} is away?",
    "{person2} will present the {noun} at the next {event}.",
    "We dropped the {adj} {noun} from {project} because it added risk for little gain.",
    "Action item for {person}: {verb} the {noun} and share it in the channel by {date}.",
    "The budget for {project} is {n} thousand EUR, of which {small} thousand is spent.",
    "After the {event}, {person} wrote a short summary and linked the {noun}.",
    "{project} depends on {project2} for the {noun}, so both teams meet every Tuesday.",
    "The {adj} {noun} for {partner} is {status}.",
]
PERSONAL_SENTENCES = [
    "Ran {km} km along {place} at an easy pace; the legs felt {feel}.",
    "Cooked {food} for dinner and froze two portions for later.",
    "Read {pages} pages of {book} before bed.",
    "Spent {eur} EUR on groceries at the market this morning.",
    "Booked the trip to {city} for {month}; the hotel has free cancellation.",
    "Slept {hours} hours, better than last month, mostly thanks to no coffee after two.",
    "Called {relative} in the evening; we planned the visit for {date}.",
    "The savings account reached {savings} EUR, close to the goal for the year.",
    "Watered the balcony plants and cut back the {plant}.",
    "Goal check: {goal} is {progress}.",
    "Paid the {bill} bill of {eur} EUR; it went up a little since {month}.",
    "Walked to the library to return {book} and picked up two new books.",
]
FEELINGS = ["heavy", "fresh", "fine", "tired after the hills", "strong", "stiff at first"]
RELATIVES = ["Mom", "Dad", "my sister", "Ana", "my grandmother"]
PLANTS = ["tomatoes", "basil", "lavender", "rosemary", "strawberries"]
GOALS = ["the half marathon", "reading 24 books", "saving 20 percent", "learning Portuguese",
         "sleeping seven and a half hours"]
PROGRESS = ["on track", "a little behind", "done", "restarted this month", "ahead of plan"]
BILLS = ["energy", "internet", "phone", "water", "insurance"]

MIN_BYTES, MAX_BYTES = 1024, 3072


def rdate(rng, years=(2025, 2026)):
    return f"{rng.choice(years)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


class _Slots(dict):
    """Draws a value for each placeholder a sentence uses, and only those."""

    def __init__(self, rng):
        super().__init__()
        self.rng = rng

    def __missing__(self, key):
        rng = self.rng
        if key in ("person", "person2"):
            self["person"], self["person2"] = rng.sample(PEOPLE, 2)
        elif key in ("project", "project2"):
            self["project"], self["project2"] = rng.sample(PROJECTS, 2)
        else:
            self[key] = SLOTS[key](rng)
        return self[key]


SLOTS = {
    "partner": lambda r: r.choice(PARTNERS), "noun": lambda r: r.choice(NOUNS),
    "verb": lambda r: r.choice(VERBS), "adj": lambda r: r.choice(ADJS),
    "status": lambda r: r.choice(STATUSES), "event": lambda r: r.choice(EVENTS),
    "date": lambda r: rdate(r, (2026,)), "n": lambda r: r.randint(80, 900),
    "big": lambda r: f"{r.randint(2, 60)},000", "small": lambda r: r.randint(5, 60),
    "km": lambda r: r.randint(4, 21), "place": lambda r: r.choice(PLACES),
    "feel": lambda r: r.choice(FEELINGS), "food": lambda r: r.choice(FOODS),
    "pages": lambda r: r.randint(10, 90), "book": lambda r: r.choice(BOOKS),
    "eur": lambda r: r.randint(20, 400), "savings": lambda r: f"{r.randint(5, 25)},{r.randint(0, 9)}00",
    "city": lambda r: r.choice(CITIES), "month": lambda r: r.choice(MONTHS),
    "hours": lambda r: r.choice(["6.5", "7", "7.5", "8"]), "relative": lambda r: r.choice(RELATIVES),
    "plant": lambda r: r.choice(PLANTS), "goal": lambda r: r.choice(GOALS),
    "progress": lambda r: r.choice(PROGRESS), "bill": lambda r: r.choice(BILLS),
}


def fill(rng, template):
    return template.format_map(_Slots(rng))


def body(rng, header, sentences, sections, target):
    """Appends sections of sentences while they fit in target bytes."""
    out, size = header, len(header)
    pool = list(sections)
    rng.shuffle(pool)
    for title in pool * 3:
        block = f"\n## {title}\n\n"
        bullets = title in ("Action items", "Decisions", "Log", "To do")
        cur, pieces, full = size + len(block), [], False
        for _ in range(rng.randint(3, 7)):
            s = fill(rng, rng.choice(sentences))
            piece = f"- {s}\n" if bullets else s + " "
            if cur + len(piece) > target:
                full = True
                break
            pieces.append(piece)
            cur += len(piece)
        if not pieces:
            break
        text = "".join(pieces)
        # A paragraph ends in a newline instead of the last space: same length.
        out += block + (text if bullets else text[:-1] + "\n")
        size = cur
        if full:
            break
    return out


def make_note(rng, i, min_bytes=MIN_BYTES, max_bytes=MAX_BYTES):
    r = rng.random()
    target = rng.randint(min_bytes + 176, max_bytes - 172)
    owner = rng.choice(PEOPLE)
    date = rdate(rng)
    if r < 0.30:
        p = rng.choice(PROJECTS)
        parts = ["Work", "Projects", p] + ([rng.choice(PROJECT_SUBDIRS)] if rng.random() < 0.6 else [])
        kind = rng.choice(["design", "status update", "review", "plan", "spec", "risk log"])
        title = f"{p} {kind} {i}"
        meta = [f"- Type: project", f"- Project: {p}", f"- Owner: {owner}", f"- Status: {rng.choice(STATUSES)}",
                f"- Deadline: {rdate(rng, (2026, 2027))}", f"- Tags: #{p.lower()} #{kind.split()[0]}"]
        sentences, sections = WORK_SENTENCES, ["Summary", "Context", "Decisions", "Risks", "Open questions", "Action items"]
    elif r < 0.50:
        year, month = date[:4], date[5:7]
        parts = ["Work", "Meetings", year] + ([month] if rng.random() < 0.5 else [])
        p = rng.choice(PROJECTS)
        event = rng.choice(EVENTS)
        title = f"{date} {p} {event} {i}"
        attendees = ", ".join(rng.sample(PEOPLE, rng.randint(2, 5)))
        meta = [f"- Type: meeting", f"- Date: {date}", f"- Project: {p}", f"- Attendees: {attendees}",
                f"- Tags: #{p.lower()} #meeting"]
        sentences, sections = WORK_SENTENCES, ["Agenda", "Notes", "Decisions", "Action items"]
    elif r < 0.65:
        status = rng.choice(["pending", "pending", "done"])
        parts = ["Work", "Tasks"] + (["Done"] if status == "done" else [])
        p = rng.choice(PROJECTS)
        title = f"{rng.choice(VERBS).capitalize()} the {rng.choice(NOUNS)} for {p} ({i})"
        meta = [f"- Type: task", f"- Status: {status}", f"- Due: {rdate(rng, (2026,))}", f"- Owner: {owner}",
                f"- Project: {p}", f"- Tags: #task #{p.lower()}"]
        sentences, sections = WORK_SENTENCES, ["What", "Why", "Steps", "Notes"]
    elif r < 0.70:
        person = rng.choice(PEOPLE)
        parts = ["Work", "People"]
        title = f"{person} ({i})"
        meta = [f"- Type: person", f"- Role: {rng.choice(['Engineer', 'Product Manager', 'Designer', 'Manager'])}",
                f"- Projects: {', '.join(rng.sample(PROJECTS, 2))}",
                f"- Email: {person.lower().replace(' ', '.')}@example.com", "- Tags: #people"]
        sentences, sections = WORK_SENTENCES, ["About", "Working together", "Recent topics"]
    else:
        area = rng.choice(AREAS)
        parts = ["Personal", area]
        if rng.random() < 0.6:
            parts.append(date[:4])
            if area == "Journal" or rng.random() < 0.3:
                parts.append(date[5:7])
        title = f"{date} journal {i}" if area == "Journal" else f"{area} note {i}"
        meta = [f"- Type: {area.lower()}", f"- Date: {date}", f"- Tags: #{area.lower()}"]
        sentences, sections = PERSONAL_SENTENCES, ["Notes", "Log", "Ideas", "To do", "Reflections"]
    header = f"# {title}\n\n" + "\n".join(meta) + "\n"
    return parts, title, body(rng, header, sentences, sections, target)


def realistic(seed, i, title, text):
    """Frontmatter and links, from a generator of the note's own."""
    rng = random.Random(seed * 1_000_003 + i)
    if rng.random() < 0.25:
        tags = rng.sample([p.lower() for p in PROJECTS] + ["meeting", "idea", "health", "reading"], 2)
        fm = (f"---\ntitle: \"{title}\"\ndate: {rdate(rng)}\ntags: [{', '.join(tags)}]\n"
              f"aliases: [\"{title.split(' ')[0]} {i}\"]\n---\n\n")
        text = fm + text
    if rng.random() < 0.4:
        links = [f"[[{rng.choice(PROJECTS)}]]", f"[[{rng.choice(PEOPLE)}]]"]
        if rng.random() < 0.5:
            links.append(f"[{rng.choice(NOUNS)}](../{rng.choice(PROJECT_SUBDIRS)}/{rng.randint(0, 99999):05d}.md)")
        text = text.rstrip("\n") + "\n\nRelated: " + ", ".join(links) + "\n"
    return text


def slug(title):
    keep = [c if c.isalnum() else "-" for c in title.lower()]
    return "-".join(filter(None, "".join(keep).split("-")))[:60]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", metavar="OUT_DIR")
    ap.add_argument("--notes", type=int, default=2000, help="number of notes (default 2000)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--bytes", default=f"{MIN_BYTES}-{MAX_BYTES}",
                    help=f"note size range MIN-MAX (default {MIN_BYTES}-{MAX_BYTES})")
    a = ap.parse_args()
    if a.notes < 0:
        sys.exit("--notes must be 0 or more")
    try:
        lo, hi = (int(x) for x in a.bytes.split("-"))
    except ValueError:
        sys.exit("--bytes must be MIN-MAX, e.g. 3072-7168")
    if lo < 512 or hi - lo < 400:
        sys.exit("--bytes: MIN must be at least 512 and MAX at least MIN + 400")
    t0 = time.perf_counter()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    total = 0
    smallest, largest = None, 0
    made = set()
    for i in range(a.notes):
        parts, title, text = make_note(rng, i, lo, hi)
        text = realistic(a.seed, i, title, text)
        d = os.path.join(a.out, *parts)
        if d not in made:
            os.makedirs(d, exist_ok=True)
            made.add(d)
        data = text.encode("ascii")
        with open(os.path.join(d, f"{i:05d}-{slug(title)}.md"), "wb") as f:
            f.write(data)
        total += len(data)
        smallest = len(data) if smallest is None else min(smallest, len(data))
        largest = max(largest, len(data))
    secs = time.perf_counter() - t0
    print(f"{a.notes} notes, {total} bytes ({total / 1e6:.1f} MB) in {a.out} "
          f"[note sizes {smallest or 0}-{largest} bytes, seed {a.seed}, {secs:.2f} s]")


if __name__ == "__main__":
    main()
