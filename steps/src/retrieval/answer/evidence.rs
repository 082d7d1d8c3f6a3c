//! Evidence: the lines of the retrieved notes that bear on a question, each
//! with its note, heading path and line numbers, chosen by rules (no model).
//!
//! A note is read line by line into units: metadata bullets, list items
//! (with their checkbox), table rows (read with their column headers),
//! sentences of paragraphs and lines of code. Each unit is scored against
//! the question — its topic words in the unit (weighted by how rare they are
//! among the candidate lines) or in its headings and title, a value of the
//! expected type, the note's search rank, and, when a model is at hand, its
//! similarity in meaning — and the best are kept within a token budget. A
//! question about a list keeps the whole list the best item belongs to.

use super::question::{self, Expect, Question, Term};
use super::spans;
use super::text;
use super::units::context_of;
pub use super::units::{units_of, Note, Unit, UnitKind};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// Proper nouns of the question that it writes in lower case: a word the
/// notes write with a capital inside sentences ("hermes" → Hermes).
pub fn mark_entities(question: &mut Question, units: &[Unit]) {
    for term in question.terms.iter_mut().filter(|t| !t.entity) {
        let (mut upper, mut lower) = (0usize, 0usize);
        for u in units {
            for (k, w) in u.text.split_whitespace().enumerate() {
                let w = w.trim_matches(|c: char| !c.is_alphanumeric());
                if k == 0 || w.len() < 3 || !w.eq_ignore_ascii_case(&term.word) {
                    continue;
                }
                if w.chars().next().is_some_and(char::is_uppercase) {
                    upper += 1;
                } else {
                    lower += 1;
                }
            }
        }
        if upper >= 2 && upper > 3 * lower {
            term.entity = true;
        }
    }
}

/// How rare each question term is among `units` (an inverse document
/// frequency), for weighting the terms against each other.
pub fn term_weights(question: &Question, units: &[Unit]) -> Vec<f64> {
    let n = units.len().max(1) as f64;
    question
        .terms
        .iter()
        .map(|t| {
            let df = units
                .iter()
                .filter(|u| {
                    u.stems.iter().any(|s| t.matches(s)) || u.context.iter().any(|s| t.matches(s))
                })
                .count() as f64;
            // A word no candidate line has cannot tell lines apart; it is
            // most often a paraphrase of one they do have ("physical" for
            // "checkup"), so it weighs half.
            let idf = (1.0 + n / (df + 0.5)).ln() * if df == 0.0 { 0.5 } else { 1.0 };
            // Names weigh more: asking about Hermes, lines about Apollo
            // are not evidence.
            if t.entity {
                idf * 1.5
            } else {
                idf
            }
        })
        .collect()
}

/// How much of the question's topic `u` covers, 0..=1: each term found in
/// the unit's words counts fully, in its headings, title or path 0.7.
pub fn coverage(question: &Question, weights: &[f64], u: &Unit) -> f64 {
    coverage_for(question, weights, u, false)
}

/// [`coverage`]; with `typed`, a word that names the expected type ("email",
/// "key", "time") counts as covered by a value of that type in the unit.
pub fn coverage_for(question: &Question, weights: &[f64], u: &Unit, typed: bool) -> f64 {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let kinds = question.expect.kinds();
    let has_value = typed && u.spans.iter().any(|s| kinds.contains(&s.kind));
    // Every line of a note is about what its title names; a heading or a
    // folder says less.
    let mut got = 0.0;
    for (t, w) in question.terms.iter().zip(weights) {
        if u.stems.iter().any(|s| t.matches(s))
            || (has_value && question::names_a_type(&t.word))
            || (t.entity && u.title.iter().any(|s| t.matches(s)))
        {
            got += w;
        } else if u.context.iter().any(|s| t.matches(s)) {
            got += 0.7 * w;
        }
    }
    got / total
}

/// Words that pick one of two kinds of a thing (the production key, not the
/// sandbox one): when a question uses one, a line can answer it only if it
/// (or its headings) says it too.
const QUALIFIERS: &[&str] = &[
    "production",
    "prod",
    "sandbox",
    "staging",
    "average",
    "return",
    "personal",
    "work",
    "private",
    "business",
];

/// Whether `u` says every qualifier of [`QUALIFIERS`] the question uses
/// and every modifier of its noun phrases ([`Question::modifiers`]), in its
/// words or its context.
pub fn qualifiers_ok(question: &Question, u: &Unit) -> bool {
    let says =
        |t: &Term| u.stems.iter().any(|s| t.matches(s)) || u.context.iter().any(|s| t.matches(s));
    // Most modifiers, not all: notes write "emergency fund" for "rainy day
    // fund" and drop the "day".
    let modifiers = question.modifiers.len();
    let said = question.modifiers.iter().filter(|t| says(t)).count();
    question
        .terms
        .iter()
        .filter(|t| QUALIFIERS.contains(&t.word.as_str()))
        .all(says)
        && 2 * said >= modifiers
}

/// Scores every unit (see the module's comment). `similarity` holds each
/// unit's similarity in meaning to the question, when a model gave it.
pub fn score(question: &Question, units: &mut [Unit], similarity: Option<&[f32]>) {
    let weights = term_weights(question, units);
    let kinds = question.expect.kinds();
    for (i, u) in units.iter_mut().enumerate() {
        let mut s = coverage(question, &weights, u);
        if !kinds.is_empty() && u.spans.iter().any(|sp| kinds.contains(&sp.kind)) {
            s += 0.25;
        }
        if question.expect == Expect::List && matches!(u.kind, UnitKind::Item(_) | UnitKind::Row) {
            s += 0.1;
        }
        if question.wants_open {
            if let UnitKind::Item(Some(false)) = u.kind {
                s += 0.1;
            }
        }
        s += 0.15 / (1.0 + u.note as f64);
        if let Some(sim) = similarity.and_then(|v| v.get(i)) {
            u.similarity = *sim;
            s += 0.6 * (*sim as f64).max(0.0);
        }
        u.score = s;
    }
}

/// One piece of evidence: a unit, or a run of units of one list or table.
#[derive(Debug, Clone)]
pub struct Item {
    pub note: usize,
    pub units: Vec<Unit>,
    pub score: f64,
}

impl Item {
    pub fn start_line(&self) -> usize {
        self.units.iter().map(|u| u.line).min().unwrap_or(0)
    }
    pub fn end_line(&self) -> usize {
        self.units.iter().map(|u| u.end_line).max().unwrap_or(0)
    }
    pub fn text(&self) -> String {
        let lines: Vec<&str> = self.units.iter().map(|u| u.text.as_str()).collect();
        lines.join("\n")
    }
}

/// What [`select`] may keep.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Estimated as characters / 4.
    pub budget_tokens: usize,
    pub max_items: usize,
    /// Most items of one list or table kept together.
    pub max_block_units: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            budget_tokens: 500,
            max_items: 8,
            max_block_units: 16,
        }
    }
}

/// The units' indexes, best score first (ties in note order).
pub fn best_first(units: &[Unit]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by(|a, b| {
        units[*b]
            .score
            .partial_cmp(&units[*a].score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.cmp(b))
    });
    order
}

/// Picks the evidence from scored units, best first.
pub fn select(question: &Question, units: &[Unit], limits: Limits) -> Vec<Item> {
    let order = best_first(units);
    let mut taken: HashSet<(usize, usize, String)> = HashSet::new();
    let mut items: Vec<Item> = Vec::new();
    let mut used = 0usize;
    let block_of: HashMap<usize, Vec<usize>> = {
        let mut m: HashMap<usize, Vec<usize>> = HashMap::new();
        for (i, u) in units.iter().enumerate() {
            m.entry(u.block).or_default().push(i);
        }
        m
    };
    let whole_lists = matches!(question.expect, Expect::List | Expect::Text)
        || question.wants_open
        || question.wants_done;
    for &i in &order {
        if items.len() >= limits.max_items {
            break;
        }
        let u = &units[i];
        let key = (u.note, u.line, u.text.clone());
        if taken.contains(&key) || u.score <= 0.0 {
            continue;
        }
        let members: Vec<usize> = match u.kind {
            UnitKind::Item(_) | UnitKind::Row if whole_lists => block_of[&u.block]
                .iter()
                .copied()
                .filter(|j| {
                    !taken.contains(&(units[*j].note, units[*j].line, units[*j].text.clone()))
                })
                .take(limits.max_block_units)
                .collect(),
            // "Why": the sentence after the best one often gives the reason.
            UnitKind::Sentence if question.lower.starts_with("why") => {
                let mut m = vec![i];
                if let Some(j) = (i + 1..units.len()).find(|j| units[*j].block == u.block) {
                    if units[j].kind == UnitKind::Sentence && units[j].line <= u.line + 1 {
                        m.push(j);
                    }
                }
                m
            }
            _ => vec![i],
        };
        let cost: usize = members
            .iter()
            .map(|j| units[*j].text.chars().count().div_ceil(4) + 2)
            .sum::<usize>()
            + 12;
        if used + cost > limits.budget_tokens && !items.is_empty() {
            // A long list may still fit cut to its best part.
            if members.len() > 1 {
                continue;
            }
            continue;
        }
        used += cost;
        for j in &members {
            let v = &units[*j];
            taken.insert((v.note, v.line, v.text.clone()));
        }
        items.push(Item {
            note: u.note,
            units: members.iter().map(|j| units[*j].clone()).collect(),
            score: u.score,
        });
    }
    items
}

/// Items as the JSON `kb.evidence` returns, ids `E1`, `E2`… in order.
pub fn to_json(items: &[Item], notes: &[Note]) -> Vec<Value> {
    items
        .iter()
        .enumerate()
        .map(|(n, it)| {
            let note = &notes[it.note];
            let (s, e) = (it.start_line(), it.end_line());
            let first = &it.units[0];
            let kind = if it.units.len() > 1 {
                "list"
            } else {
                first.kind.as_str()
            };
            let mut raw_seen = HashSet::new();
            let quote: Vec<&str> = it
                .units
                .iter()
                .filter(|u| raw_seen.insert(u.line))
                .map(|u| u.raw.trim())
                .collect();
            json!({
                "id": format!("E{}", n + 1),
                "path": note.path,
                "title": note.title,
                "heading": first.heading_path.last().cloned().unwrap_or_default(),
                "heading_path": first.heading_path,
                "start_line": s,
                "end_line": e,
                "lines": if s == e { s.to_string() } else { format!("{s}-{e}") },
                "kind": kind,
                "text": it.text(),
                "quote": quote.join("\n"),
                "score": (it.score * 1000.0).round() / 1000.0,
                "rank": note.rank,
                "units": it.units.iter().map(|u| {
                    let mut v = json!({"line": u.line, "text": u.text, "kind": u.kind.as_str()});
                    if u.end_line != u.line {
                        v["end_line"] = json!(u.end_line);
                    }
                    if u.similarity != 0.0 {
                        v["similarity"] = json!((u.similarity as f64 * 1000.0).round() / 1000.0);
                    }
                    if let UnitKind::Item(Some(c)) = u.kind {
                        v["checked"] = json!(c);
                    }
                    v
                }).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// Items read back from [`to_json`]'s output (as a later step receives
/// them), with their ids; units get the item's index as their note.
pub fn from_json(items: &[Value]) -> Vec<(String, Item, Value)> {
    let mut out = Vec::new();
    for (n, it) in items.iter().enumerate() {
        let s = |k: &str| it.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let id = match s("id") {
            id if id.is_empty() => format!("E{}", n + 1),
            id => id,
        };
        let heading_path: Vec<String> = it
            .get("heading_path")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_else(|| vec![s("title")]);
        let (context, title) = context_of(
            &heading_path,
            &s("path")
                .trim_end_matches(".md")
                .replace(['/', '-', '_'], " "),
        );
        let start = it.get("start_line").and_then(Value::as_u64).unwrap_or(0) as usize;
        // The note's search rank (0: the best hit).
        let rank = it.get("rank").and_then(Value::as_u64).unwrap_or(n as u64) as usize;
        let listed: Vec<Value> = it
            .get("units")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
            .cloned()
            .unwrap_or_else(|| vec![json!({"line": start, "text": s("text"), "kind": s("kind")})]);
        let units: Vec<Unit> = listed
            .iter()
            .map(|u| {
                let t = u
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let kind = match (
                    u.get("kind").and_then(Value::as_str),
                    u.get("checked").and_then(Value::as_bool),
                ) {
                    (Some("meta"), _) => UnitKind::Meta,
                    (Some("item"), c) => UnitKind::Item(c),
                    (Some("row"), _) => UnitKind::Row,
                    (Some("code"), _) => UnitKind::Code,
                    _ => UnitKind::Sentence,
                };
                let line = u
                    .get("line")
                    .and_then(Value::as_u64)
                    .unwrap_or(start as u64) as usize;
                Unit {
                    note: rank,
                    line,
                    end_line: u
                        .get("end_line")
                        .and_then(Value::as_u64)
                        .map_or(line, |e| (e as usize).max(line)),
                    stems: text::stems(&t),
                    spans: spans::find(&t),
                    raw: String::new(),
                    text: t,
                    heading_path: heading_path.clone(),
                    kind,
                    block: n,
                    context: context.clone(),
                    title: title.clone(),
                    score: 0.0,
                    similarity: u.get("similarity").and_then(Value::as_f64).unwrap_or(0.0) as f32,
                }
            })
            .collect();
        // An item with no text is no evidence (a hand-made list may hold one).
        if units.iter().all(|u| u.text.trim().is_empty()) {
            continue;
        }
        let score = it.get("score").and_then(Value::as_f64).unwrap_or(0.0);
        out.push((
            id,
            Item {
                note: rank,
                units,
                score,
            },
            it.clone(),
        ));
    }
    out
}

/// The evidence as numbered text for a prompt: each item's id, where it
/// is, and its lines, inside delimiters that mark it as quoted notes.
pub fn prompt_text(items: &[Value]) -> String {
    let mut out = String::new();
    for it in items {
        let s = |k: &str| it.get(k).and_then(Value::as_str).unwrap_or("");
        let path: Vec<&str> = it
            .get("heading_path")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        out.push_str(&format!(
            "[{}] {} (line {})\n{}\n\n",
            s("id"),
            path.join(" › "),
            s("lines"),
            s("text")
        ));
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::answer::question::analyze;

    const TRIP: &str = "# Lisbon Trip\n\n- Type: travel\n- Budget: 1,100 EUR\n\n## Booked\n\n- [x] Flights Amsterdam → Lisbon, 2027-03-11, 09:40, arriving 11:55\n- [x] Hotel in Alfama, 5 nights (560 EUR)\n- [ ] Day trip to Sintra\n\n## Costs so far\n\nFlights 186 + hotel 560 = 746 EUR. About 300 EUR left for food. Trains are cheap.\n\n| Item | EUR |\n|---|---|\n| Museums | 40 |\n";

    fn note(path: &str, text: &str, rank: usize) -> Note {
        Note {
            path: path.into(),
            title: text.lines().next().unwrap().trim_start_matches("# ").into(),
            text: text.into(),
            rank,
        }
    }

    #[test]
    fn units_carry_lines_headings_and_kinds() {
        let n = note("Travel/Lisbon Trip.md", TRIP, 0);
        let u = units_of(0, &n, 0);
        let flight = u.iter().find(|x| x.text.starts_with("Flights")).unwrap();
        assert_eq!(flight.line, 8);
        assert_eq!(flight.kind, UnitKind::Item(Some(true)));
        assert_eq!(flight.heading_path, ["Lisbon Trip", "Booked"]);
        assert_eq!(u[0].kind, UnitKind::Meta);
        let row = u.iter().find(|x| x.kind == UnitKind::Row).unwrap();
        assert_eq!(row.text, "Item: Museums; EUR: 40");
        assert_eq!(row.line, 18);
        let open = u.iter().find(|x| x.text.starts_with("Day trip")).unwrap();
        assert_eq!(open.kind, UnitKind::Item(Some(false)));
    }

    #[test]
    fn the_booked_section_wins_a_time_question_over_costs() {
        let n = [note("Travel/Lisbon Trip.md", TRIP, 0)];
        let mut units = units_of(0, &n[0], 0);
        let q = analyze("What time is my flight to Lisbon?");
        score(&q, &mut units, None);
        let items = select(&q, &units, Limits::default());
        assert_eq!(items[0].start_line(), 8, "{:?}", items[0]);
        let j = to_json(&items, &n);
        assert_eq!(j[0]["id"], "E1");
        assert_eq!(j[0]["lines"], "8");
        assert_eq!(j[0]["heading"], "Booked");
        assert!(j[0]["quote"].as_str().unwrap().starts_with("- [x] Flights"));
    }

    #[test]
    fn a_list_question_keeps_the_whole_list() {
        let n = [note("Travel/Lisbon Trip.md", TRIP, 0)];
        let mut units = units_of(0, &n[0], 0);
        let q = analyze("What is booked for the Lisbon trip?");
        score(&q, &mut units, None);
        let items = select(&q, &units, Limits::default());
        let top = &items[0];
        assert_eq!((top.start_line(), top.end_line()), (8, 10), "{top:?}");
    }

    #[test]
    fn a_wrapped_paragraph_is_one_text_and_its_sentences_keep_their_lines() {
        let text = "# Whitespace\n\nYou can have git warn you about whitespace when you\ndiff it. By default, git warns of trailing whitespace and\nblank lines at the end of a file.\n- An item that wraps\n  onto a second line\n- Another\n";
        let u = units_of(0, &note("git/ws.md", text, 0), 0);
        let got: Vec<(usize, usize, &str, &str)> = u
            .iter()
            .map(|x| (x.line, x.end_line, x.kind.as_str(), x.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (3, 5, "text", "You can have git warn you about whitespace when you diff it. By default, git warns of trailing whitespace and blank lines at the end of a file."),
                (6, 7, "item", "An item that wraps onto a second line"),
                (8, 8, "item", "Another"),
            ]
        );
        assert_eq!(u[1].raw, "- An item that wraps\n  onto a second line");
        let long = format!(
            "# Long\n\n{}\nand so it ends.\n",
            "A sentence that goes on and on. ".repeat(24)
        );
        let u = units_of(0, &note("long.md", &long, 0), 0);
        assert_eq!(u.len(), 24, "{u:?}");
        assert_eq!((u[0].line, u[0].end_line), (3, 3));
        assert_eq!((u[23].line, u[23].end_line), (3, 4));
        assert_eq!(
            u[23].text,
            "A sentence that goes on and on. and so it ends."
        );
        // The quote of a sentence of a long line is the sentence, not a
        // copy of the whole line for each sentence.
        assert_eq!(u[0].raw, "A sentence that goes on and on.");
    }
}
