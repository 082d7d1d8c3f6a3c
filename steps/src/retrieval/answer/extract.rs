//! The extractive answer: the value or lines of the evidence that answer the
//! question, chosen by rules, cited, or an honest "the notes don't say".
//!
//! A line can support an answer only when it (with its headings, title and
//! path) names every name the question names and covers enough of the rest
//! of its topic. Among the lines that can, a question that asks for a typed
//! value takes the value of that type nearest to the question's words, not
//! behind a word for the other side (`target` when the question did not
//! ask about a target); a list question takes the list; others the best
//! line or two.

use super::evidence::{self, Item, Unit, UnitKind};
use super::question::{self, Expect, Question, SIDE_WORDS};
use super::spans::{Kind, Span};
use super::text;
use serde_json::{json, Value};

/// Words that put a value in relation to the thing asked about, not on it.
const RELATIONS: &[&str] = &["before", "after", "until", "since", "ahead", "prior"];

/// Below this share of its topic covered, a line does not answer.
pub const MIN_COVERAGE: f64 = 0.5;

/// What [`extract`] found.
#[derive(Debug, Clone)]
pub struct Extracted {
    pub found: bool,
    pub answer: String,
    /// The typed value, for value questions.
    pub value: Option<String>,
    /// Ids of the items cited.
    pub citations: Vec<String>,
    /// How much the supporting line covers of the question (0..=1).
    pub coverage: f64,
    /// The margin over the next different candidate (0..=1).
    pub margin: f64,
    /// What the answer is: a value, a list or a line.
    pub shape: Shape,
    pub confidence: u32,
    /// Why not found, when not.
    pub reason: Option<String>,
}

struct Support<'a> {
    item: usize,
    unit: &'a Unit,
    /// How well the unit supports an answer: its coverage of the question,
    /// or, when its meaning is close, what its similarity stands for.
    coverage: f64,
}

/// Similarity in meaning at which a line covers the question as well as
/// [`MIN_COVERAGE`] of its words would; each 0.1 above adds 0.1.
pub const SIM_SUPPORT: f32 = 0.55;

fn support_of(coverage: f64, similarity: f32) -> f64 {
    if similarity >= SIM_SUPPORT {
        coverage.max(MIN_COVERAGE + (similarity - SIM_SUPPORT) as f64)
    } else {
        coverage
    }
}

/// Similarity in meaning at which a line of the best-ranked note may
/// answer though it does not write a name of the question ("my flight to
/// Portugal" answered by the flight to Lisbon).
pub const SIM_FOR_A_NAME: f32 = 0.58;

/// Whether `u` names every name of the question (in its words or context).
/// A name no note of the evidence is about (none has it in its title or
/// path) may be missing from a line of the best note that is close in
/// meaning: notes name places and people in their own words.
fn names_ok(q: &Question, u: &Unit, titled: &[String]) -> bool {
    q.terms.iter().filter(|t| t.entity).all(|t| {
        u.stems.iter().any(|s| t.matches(s))
            || u.context.iter().any(|s| t.matches(s))
            || (u.note == 0 && u.similarity >= SIM_FOR_A_NAME && !titled.contains(&t.stem))
    })
}

/// Whether `u` (or its headings) says at least one topic word of the
/// question that is neither a name nor a word for the value type: the
/// Tokyo line does not answer "how fast did I run the Tokyo marathon".
fn topic_ok(q: &Question, u: &Unit) -> bool {
    let topic: Vec<_> = q
        .terms
        .iter()
        .filter(|t| !t.entity && !question::names_a_type(&t.word))
        .collect();
    topic.is_empty()
        || topic
            .iter()
            .any(|t| u.stems.iter().any(|s| t.matches(s)) || u.context.iter().any(|s| t.matches(s)))
}

/// A question that names a year ("in 2025") is answered only by lines of
/// that year (in their words, dates, headings or title).
fn years_ok(q: &Question, u: &Unit) -> bool {
    q.years.iter().all(|y| {
        u.text.contains(y.as_str()) || u.heading_path.iter().any(|h| h.contains(y.as_str()))
    }) || q.years.is_empty()
}

/// The noun the question asks about is said by the line, its headings or
/// title, or stands for the value type the line holds.
fn head_ok(q: &Question, u: &Unit) -> bool {
    let Some(h) = &q.head else { return true };
    if u.stems.iter().any(|s| h.matches(s)) || u.context.iter().any(|s| h.matches(s)) {
        return true;
    }
    let kinds = q.expect.kinds();
    question::names_a_type(&h.word) && u.spans.iter().any(|s| kinds.contains(&s.kind))
}

/// Whether a value of `u` is money: an amount with a currency, or a number
/// in a line (or column) that speaks of one.
fn is_money(u: &Unit, span: &Span) -> bool {
    let has_currency = |t: &str| {
        let l = t.to_lowercase();
        [
            "eur", "usd", "gbp", "€", "$", "£", "euro", "dollar", "pound",
        ]
        .iter()
        .any(|c| l.contains(c))
    };
    match span.kind {
        Kind::Amount => has_currency(&span.text),
        Kind::Number => {
            has_currency(&u.text)
                || u.heading_path.iter().any(|h| has_currency(h))
                || [
                    "price",
                    "cost",
                    "amount",
                    "per month",
                    "budget",
                    "rent",
                    "total",
                ]
                .iter()
                .any(|w| u.text.to_lowercase().contains(w))
        }
        _ => false,
    }
}

/// Words of `text` as (byte start, lower-case word), numbers left out: a
/// date or an amount is one place between words, not three.
fn words_at(text: &str) -> Vec<(usize, String)> {
    let mut out = all_words_at(text);
    out.retain(|(_, w)| !w.chars().all(|c| c.is_ascii_digit()));
    out
}

fn all_words_at(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() {
            if start.is_none() {
                start = Some(i);
            }
        } else if let Some(s) = start.take() {
            out.push((s, text[s..i].to_lowercase()));
        }
    }
    if let Some(s) = start {
        out.push((s, text[s..].to_lowercase()));
    }
    out
}

/// Score of a value `span` in `u` for `q`: near the question's words, not
/// behind a side word the question does not use, and for table rows in the
/// cell of a column the question names.
fn span_score(q: &Question, u: &Unit, span: &Span) -> f64 {
    let words = words_at(&u.text);
    let span_word = words
        .iter()
        .position(|(at, _)| *at >= span.start)
        .unwrap_or(words.len());
    let mut best = 0.0f64;
    let mut nearest: Option<usize> = None;
    for (k, (_, w)) in words.iter().enumerate() {
        let s = text::stem(w);
        if q.terms.iter().any(|t| t.matches(&s)) {
            // Notes put a value after its label ("hotel 560", "Budget:
            // 1,100"): a word of the question after the value is further.
            let d = if k < span_word {
                (span_word - k - 1) as f64
            } else {
                (k - span_word) as f64 + 1.5
            };
            let closeness = 1.0 / (1.0 + d / 3.0);
            if closeness > best {
                best = closeness;
                nearest = Some(k);
            }
        }
    }
    let mut score = 0.25 * best;
    // "2027-03-01, before the Lisbon race": the value is not the race's.
    if let Some(k) = nearest {
        let lo = (k.min(span_word) + 1).min(words.len());
        let hi = k.max(span_word).min(words.len());
        if lo < hi
            && words[lo..hi].iter().any(|(_, w)| {
                RELATIONS.contains(&w.as_str())
                    && !q.lower.contains(w.as_str())
                    && !side_asked(q, w)
            })
        {
            score -= 0.3;
        }
    }
    // Side words just before the value (numbers between do not count:
    // "Flight back, 2027-03-16, 13:05").
    let sides = q.sides();
    let before: Vec<&String> = words[..span_word.min(words.len())]
        .iter()
        .rev()
        .filter(|(_, w)| !w.chars().all(|c| c.is_ascii_digit()))
        .take(2)
        .map(|(_, w)| w)
        .collect();
    for group in SIDE_WORDS {
        let asked = group_asked(q, &sides, group);
        if !asked && before.iter().any(|w| group.contains(&w.as_str())) {
            score -= 0.4;
        }
        if asked && before.iter().any(|w| group.contains(&w.as_str())) {
            score += 0.2;
        }
    }
    // In a row `Header: cell; …`, the header of the cell the value is in.
    if u.kind == UnitKind::Row || u.kind == UnitKind::Meta {
        let cell_start = u.text[..span.start].rfind("; ").map(|p| p + 2).unwrap_or(0);
        if let Some((header, _)) = u.text[cell_start..span.start].split_once(':') {
            // A header that names what the question asks ("Deadline:"),
            // not the kind of thing it names ("Projects: Hermes, Zephyr").
            let hs = text::stems(header);
            if hs
                .iter()
                .any(|h| q.terms.iter().any(|t| !t.entity && t.matches(h)))
            {
                score += 0.15;
            }
        }
    }
    score
}

/// Whether the question asks for the side `group` names ("when does it
/// end" asks for the value after "until").
fn group_asked(q: &Question, sides: &[&str], group: &[&str]) -> bool {
    group.iter().any(|g| sides.contains(g))
        || q.terms
            .iter()
            .any(|t| group.iter().any(|g| t.matches(&text::stem(g))))
}

/// Whether `word` is a side word of a group the question asks for.
fn side_asked(q: &Question, word: &str) -> bool {
    let sides = q.sides();
    SIDE_WORDS
        .iter()
        .any(|g| g.contains(&word) && group_asked(q, &sides, g))
}

/// A value the question itself holds is no answer to it ("Who is in
/// charge of Atlas?" is not answered by "Atlas").
fn echoes_question(q: &Question, span: &Span) -> bool {
    let stems = text::stems(&span.text);
    let echoed = |s: &String| q.terms.iter().any(|t| t.matches(s));
    stems.iter().any(echoed) && stems.iter().all(|s| echoed(s) || text::is_filler(s))
}

/// Whether `span` stands in the key part of a `Key: value` unit.
fn in_key(u: &Unit, span: &Span) -> bool {
    if !matches!(u.kind, UnitKind::Meta | UnitKind::Row) {
        return false;
    }
    let cell_start = u.text[..span.start].rfind("; ").map(|p| p + 2).unwrap_or(0);
    !u.text[cell_start..span.start].contains(':')
        && u.text[span.start..]
            .find(':')
            .is_some_and(|c| u.text[span.start..span.start + c].find("; ").is_none())
}

/// A value that may answer: its score, the line that supports the answer,
/// and the line (of item `item`) the value stands in — the same line, or
/// one that shares its subject.
struct Candidate<'a> {
    score: f64,
    support: &'a Support<'a>,
    item: usize,
    unit: &'a Unit,
    span: &'a Span,
}

/// What answering from a line other than the supporting one costs.
const BRIDGE_COST: f64 = 0.15;

/// Whether `a` and `b` speak of the same thing: two content words in
/// common besides the question's ("property office").
fn shares_a_subject(q: &Question, a: &Unit, b: &Unit) -> bool {
    let own =
        |s: &String| s.len() > 2 && !text::is_filler(s) && !q.terms.iter().any(|t| t.matches(s));
    let shared: std::collections::HashSet<&String> = a
        .stems
        .iter()
        .filter(|s| own(s) && b.stems.contains(s))
        .collect();
    shared.len() >= 2
}

/// Adds the values of `unit` (of item `item`) that may answer `q`, on
/// top of `base` (the support's coverage and its item's score).
fn push_values<'a>(
    cands: &mut Vec<Candidate<'a>>,
    q: &Question,
    kinds: &[Kind],
    support: &'a Support<'a>,
    item: usize,
    unit: &'a Unit,
    base: f64,
) {
    for (k, sp) in unit.spans.iter().enumerate() {
        if !kinds.contains(&sp.kind) || echoes_question(q, sp) || in_key(unit, sp) {
            continue;
        }
        if q.wants_money && !is_money(unit, sp) {
            continue;
        }
        let mut score = base + span_score(q, unit, sp);
        if q.expect == Expect::Person {
            // The answer to "who is in charge of Atlas" is not a name with
            // "Atlas" in it.
            if text::stems(&sp.text)
                .iter()
                .any(|w| q.terms.iter().any(|t| t.matches(w)))
            {
                continue;
            }
            // People are written with first and last name; one capitalised
            // word is as often a project or a place.
            if sp.text.split_whitespace().count() >= 2 {
                score += 0.05;
            }
        }
        if k == 0 {
            score += 0.03;
        }
        // An amount with its unit over a bare number; a day over a time.
        if matches!(
            (q.expect, sp.kind),
            (Expect::Value(Kind::Amount), Kind::Amount) | (Expect::Value(Kind::Date), Kind::Date)
        ) {
            score += 0.05;
        }
        // A line of the note about what the question names ("the Hermes
        // deadline" in Project Hermes's overview, not on a task board).
        if about_the_names(q, unit) {
            score += 0.2;
        }
        // Of a table's rows, the later (a log's latest) wins a tie.
        if unit.kind == UnitKind::Row {
            score += 0.002 * (unit.line % 100) as f64;
        }
        cands.push(Candidate {
            score,
            support,
            item,
            unit,
            span: sp,
        });
    }
}

/// Whether the note of `u` has every name of the question in its title.
fn about_the_names(q: &Question, u: &Unit) -> bool {
    let mut names = q.terms.iter().filter(|t| t.entity).peekable();
    names.peek().is_some() && names.all(|t| u.title.iter().any(|s| t.matches(s)))
}

/// Answers `q` from `items` (as read by [`evidence::from_json`]).
pub fn extract(q: &Question, items: &[(String, Item, Value)]) -> Extracted {
    let mut q = q.clone();
    let all_units: Vec<Unit> = items
        .iter()
        .flat_map(|(_, it, _)| it.units.clone())
        .collect();
    evidence::mark_entities(&mut q, &all_units);
    let weights = evidence::term_weights(&q, &all_units);
    // Stems of the evidence's note titles and paths: what its notes are about.
    let mut titled: Vec<String> = Vec::new();
    for (_, _, v) in items {
        for k in ["title", "path"] {
            if let Some(t) = v.get(k).and_then(Value::as_str) {
                titled.extend(text::stems(t));
            }
        }
    }
    let mut supports: Vec<Support> = Vec::new();
    for (i, (_, it, _)) in items.iter().enumerate() {
        for u in &it.units {
            if !names_ok(&q, u, &titled) {
                continue;
            }
            if matches!(q.expect, Expect::Value(_) | Expect::Person | Expect::Place)
                && !topic_ok(&q, u)
            {
                continue;
            }
            let coverage = support_of(evidence::coverage_for(&q, &weights, u, true), u.similarity);
            if !evidence::qualifiers_ok(&q, u) || !years_ok(&q, u) || !head_ok(&q, u) {
                continue;
            }
            supports.push(Support {
                item: i,
                unit: u,
                coverage,
            });
        }
    }
    // The closest line to quote when nothing answers: one about what the
    // question names, when there is one (not another project's key).
    let closest = items
        .iter()
        .position(|(_, it, _)| it.units.iter().any(|u| names_ok(&q, u, &[])))
        .unwrap_or(0);
    let nothing = |reason: &str| -> Extracted {
        abstain(&items[closest.min(items.len().saturating_sub(1))..], reason)
    };
    if items.is_empty() {
        return nothing("no evidence");
    }
    let item_score = |i: usize| items[i].1.score;
    match q.expect {
        Expect::Value(_) | Expect::Person | Expect::Place => {
            let kinds: &[Kind] = match q.expect {
                Expect::Place => &[Kind::Name],
                e => e.kinds(),
            };
            let mut cands: Vec<Candidate> = Vec::new();
            for s in &supports {
                if s.coverage < MIN_COVERAGE {
                    continue;
                }
                let before = cands.len();
                push_values(
                    &mut cands,
                    &q,
                    kinds,
                    s,
                    s.item,
                    s.unit,
                    s.coverage + 0.3 * item_score(s.item),
                );
                if cands.len() > before {
                    continue;
                }
                // "Property office for repairs: email first" answers whom to
                // email; the address stands in another line of the note that
                // names the same office.
                for (j, (_, it, v)) in items.iter().enumerate() {
                    if v.get("path") != items[s.item].2.get("path") {
                        continue;
                    }
                    for u in &it.units {
                        if u.line != s.unit.line
                            && names_ok(&q, u, &titled)
                            && evidence::qualifiers_ok(&q, u)
                            && shares_a_subject(&q, s.unit, u)
                        {
                            let base = s.coverage - BRIDGE_COST + 0.3 * item_score(s.item);
                            push_values(&mut cands, &q, kinds, s, j, u, base);
                        }
                    }
                }
            }
            cands.sort_by(|a, b| {
                b.score
                    .partial_cmp(&a.score)
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            let Some(Candidate {
                score: best,
                support: s,
                item,
                unit,
                span: sp,
            }) = cands.first()
            else {
                let why = if supports.iter().any(|s| s.coverage >= MIN_COVERAGE) {
                    format!("no {} in the lines about it", q.expect.as_str())
                } else {
                    "no line covers the question".to_string()
                };
                return nothing(&why);
            };
            let next = cands
                .iter()
                .find(|c| c.span.norm != sp.norm)
                .map(|c| c.score)
                .unwrap_or(0.0);
            let mut citations = vec![items[*item].0.clone()];
            let answer = if unit.line == s.unit.line && *item == s.item {
                format!("{} — from your notes: “{}”", sp.text, unit.text)
            } else {
                citations.push(items[s.item].0.clone());
                format!(
                    "{} — from your notes: “{}” and “{}”",
                    sp.text, unit.text, s.unit.text
                )
            };
            finish(Extracted {
                found: true,
                answer,
                value: Some(sp.text.clone()),
                citations,
                coverage: s.coverage,
                margin: ((best - next) / best.max(1e-9)).clamp(0.0, 1.0),
                shape: Shape::Value,
                confidence: 0,
                reason: None,
            })
        }
        Expect::List => {
            // A sentence that names several things is a list too.
            let mut scores = items_scores(items);
            for (i, (_, it, _)) in items.iter().enumerate() {
                if it.units.len() > 1
                    || it.units[0]
                        .spans
                        .iter()
                        .filter(|s| s.kind == Kind::Name)
                        .count()
                        >= 3
                {
                    scores[i] += 0.2;
                }
            }
            let Some(best) = best_support(&supports, &scores) else {
                return nothing("no line covers the question");
            };
            let (id, it, _) = &items[best.item];
            let mut lines: Vec<&Unit> = Vec::new();
            let mut cited = vec![id.clone()];
            if q.wants_open || q.wants_done {
                // The open (or done) items of the best note, wherever they stand.
                let note_path = items[best.item].2.get("path").cloned();
                for (oid, oit, ov) in items {
                    if ov.get("path").cloned() != note_path {
                        continue;
                    }
                    let mut any = false;
                    for u in &oit.units {
                        let open_heading = u
                            .heading_path
                            .iter()
                            .any(|h| text::asks_for_open_items(&h.to_lowercase()));
                        let keep = match u.kind {
                            UnitKind::Item(Some(done)) => done == q.wants_done,
                            UnitKind::Row | UnitKind::Item(None) => q.wants_open && open_heading,
                            _ => false,
                        };
                        if keep {
                            lines.push(u);
                            any = true;
                        }
                    }
                    if any && !cited.contains(oid) {
                        cited.push(oid.clone());
                    }
                }
                if lines.is_empty() {
                    lines = it.units.iter().collect();
                }
            } else {
                lines = it.units.iter().collect();
            }
            lines.sort_by_key(|u| u.line);
            lines.dedup_by_key(|u| (u.line, u.text.clone()));
            let answer = if lines.len() == 1 {
                lines[0].text.clone()
            } else {
                lines
                    .iter()
                    .map(|u| format!("- {}", u.text))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            finish(Extracted {
                found: true,
                answer,
                value: None,
                citations: cited,
                coverage: best.coverage,
                margin: 0.5,
                shape: if it.units.len() > 1 {
                    Shape::List
                } else {
                    Shape::Line
                },
                confidence: 0,
                reason: None,
            })
        }
        Expect::YesNo | Expect::Text => {
            let scores = items_scores(items);
            let Some(best) = best_support(&supports, &scores) else {
                return nothing("no line covers the question");
            };
            let (id, it, _) = &items[best.item];
            let mut cited = vec![id.clone()];
            // A whole short list when the best line is one of its items.
            let mut text = if it.units.len() > 1 && it.units.len() <= 12 {
                it.units
                    .iter()
                    .map(|u| format!("- {}", u.text))
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                best.unit.text.clone()
            };
            // "Why": the reason often follows in the next sentence.
            if q.lower.starts_with("why") && it.units.len() == 1 {
                if let Some((nid, next, _)) = items.iter().find(|(_, o, v)| {
                    o.units.len() == 1
                        && o.units[0].line == best.unit.line
                        && o.units[0].text != best.unit.text
                        && v.get("path") == items[best.item].2.get("path")
                        && o.units[0].kind == UnitKind::Sentence
                }) {
                    text.push(' ');
                    text.push_str(&next.units[0].text);
                    cited.push(nid.clone());
                }
            }
            let answer = if q.expect == Expect::YesNo {
                format!("According to your notes: “{text}”")
            } else {
                text
            };
            finish(Extracted {
                found: true,
                answer,
                value: None,
                citations: cited,
                coverage: best.coverage,
                margin: 0.5,
                shape: Shape::Line,
                confidence: 0,
                reason: None,
            })
        }
    }
}

fn items_scores(items: &[(String, Item, Value)]) -> Vec<f64> {
    items.iter().map(|(_, it, _)| it.score).collect()
}

/// The supporting line with the best coverage and evidence score.
fn best_support<'a>(supports: &'a [Support<'a>], item_scores: &[f64]) -> Option<&'a Support<'a>> {
    supports
        .iter()
        .filter(|s| s.coverage >= MIN_COVERAGE)
        .max_by(|a, b| {
            let sa = a.coverage + 0.5 * item_scores[a.item];
            let sb = b.coverage + 0.5 * item_scores[b.item];
            sa.partial_cmp(&sb)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(b.item.cmp(&a.item))
        })
}

/// The honest answer: the notes don't say, and the closest line.
fn abstain(items: &[(String, Item, Value)], reason: &str) -> Extracted {
    let closest = items.first().map(|(id, it, v)| {
        let u = &it.units[0];
        (
            id.clone(),
            format!(
                " The closest I found: “{}” ({}, line {}).",
                u.text,
                v.get("path").and_then(Value::as_str).unwrap_or(""),
                u.line
            ),
        )
    });
    Extracted {
        found: false,
        answer: format!(
            "Your notes don't say.{}",
            closest.as_ref().map(|c| c.1.as_str()).unwrap_or("")
        ),
        value: None,
        citations: closest.map(|c| vec![c.0]).unwrap_or_default(),
        coverage: 0.0,
        margin: 0.0,
        shape: Shape::Line,
        confidence: 0,
        reason: Some(reason.to_string()),
    }
}

fn finish(mut e: Extracted) -> Extracted {
    e.confidence = confidence(e.found, e.coverage, e.margin, e.shape, true);
    e
}

/// What an answer is, for [`confidence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A value of the type the question asks for (a date, an amount, a name).
    Value,
    /// A list of a note's items.
    List,
    /// A line or two quoted: right about two times in three on the bench
    /// set, so it never reaches 70 on its own.
    Line,
}

/// The documented confidence formula (reference, "Answers"): from how much
/// of the question the cited line covers, how far the answer is ahead of
/// the next candidate, what the answer is, and whether it passed
/// verification. Calibrated on `bench/lifeos_questions.jsonl` (see
/// docs/benchmarks.md) so that answers at 70 or more are right at least 9
/// times in 10.
pub fn confidence(found: bool, coverage: f64, margin: f64, shape: Shape, verified: bool) -> u32 {
    if !found || !verified {
        return 0;
    }
    let bonus = match shape {
        Shape::Value => 0.2,
        Shape::List => 0.05,
        Shape::Line => 0.0,
    };
    let raw = 0.55 * coverage + 0.25 * margin.min(1.0) + bonus;
    (raw.clamp(0.0, 1.0) * 100.0).round() as u32
}

impl Extracted {
    pub fn to_json(&self, q: &Question, items: &[(String, Item, Value)]) -> Value {
        json!({
            "found": self.found,
            "answer": self.answer,
            "value": self.value,
            "expect": q.expect.as_str(),
            "citations": cite(items, &self.citations),
            "confidence": self.confidence,
            "coverage": (self.coverage * 1000.0).round() / 1000.0,
            "reason": self.reason,
        })
    }
}

/// Citations a user can check: `{id, path, lines, quote}` for each cited id.
pub fn cite(items: &[(String, Item, Value)], ids: &[String]) -> Vec<Value> {
    ids.iter()
        .filter_map(|id| items.iter().find(|(i, _, _)| i == id))
        .map(|(id, _, v)| {
            json!({
                "id": id,
                "path": v.get("path").cloned().unwrap_or(Value::Null),
                "lines": v.get("lines").cloned().unwrap_or(Value::Null),
                "quote": v.get("quote").or_else(|| v.get("text")).cloned().unwrap_or(Value::Null),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::answer::evidence::{score, select, to_json, units_of, Limits, Note};
    use crate::retrieval::answer::question::analyze;

    const TRIP: &str = "# Lisbon Trip\n\n- Type: travel\n- Budget: 1,100 EUR\n\n## Booked\n\n- [x] Flights Amsterdam → Lisbon, 2027-03-11, 09:40, arriving 11:55\n- [x] Hotel in Alfama, 5 nights (560 EUR)\n- [ ] Day trip to Sintra\n- [ ] Dinner on Saturday\n";
    const KEY: &str = "# Apollo API Key\n\n- Project: Apollo\n- Environment: sandbox\n- API key: APOLLO-KEY-7f3a-EXAMPLE\n\n## Rules\n\n- Production keys are issued per partner and never written into notes.\n";
    const ZEPHYR: &str = "# Zephyr Overview\n\n- Owner: Sofia Alvarez\n\n## Summary\n\nZephyr is the redesign of the app. It reads orders from the Apollo API.\n";

    /// Evidence for `question` from notes as `kb.evidence` builds it.
    fn answer(question: &str, notes: &[(&str, &str)]) -> Extracted {
        let notes: Vec<Note> = notes
            .iter()
            .enumerate()
            .map(|(i, (path, text))| Note {
                path: path.to_string(),
                title: text.lines().next().unwrap().trim_start_matches("# ").into(),
                text: text.to_string(),
                rank: i,
            })
            .collect();
        let mut q = analyze(question);
        let mut units = Vec::new();
        for (i, n) in notes.iter().enumerate() {
            let b = units.last().map_or(0, |u: &Unit| u.block + 1);
            units.extend(units_of(i, n, b));
        }
        evidence::mark_entities(&mut q, &units);
        score(&q, &mut units, None);
        let items = select(&q, &units, Limits::default());
        let json = to_json(&items, &notes);
        let back = evidence::from_json(&json);
        extract(&analyze(question), &back)
    }

    #[test]
    fn the_value_not_the_one_behind_a_side_word() {
        const SAVINGS: &str = "# Savings\n\n- Balance: 2,400 EUR, target 5,000 EUR by June\n";
        let a = answer("How much is in my savings?", &[("Savings.md", SAVINGS)]);
        assert!(a.found, "{a:?}");
        assert_eq!(a.value.as_deref(), Some("2,400 EUR"), "{a:?}");
        let a = answer("How much is my savings target?", &[("Savings.md", SAVINGS)]);
        assert_eq!(a.value.as_deref(), Some("5,000 EUR"), "{a:?}");
    }

    #[test]
    fn a_value_is_cited_and_a_missing_one_is_not_made_up() {
        let notes = [("Key.md", KEY), ("Zephyr.md", ZEPHYR)];
        let a = answer("What is the API key for Apollo?", &notes);
        assert!(
            a.found && a.value.as_deref() == Some("APOLLO-KEY-7f3a-EXAMPLE"),
            "{a:?}"
        );
        assert_eq!(a.citations, ["E1"]);
        assert!(a.confidence >= 70, "{a:?}");
        // Another project's key is no answer.
        let a = answer("What is the API key for Zephyr?", &notes);
        assert!(!a.found, "{a:?}");
        assert!(a.answer.starts_with("Your notes don't say."), "{a:?}");
        assert_eq!(a.confidence, 0);
        // Nor is the sandbox key when the production one is asked for.
        let a = answer("What is the production API key for Apollo?", &notes);
        assert!(!a.found, "{a:?}");
        // No number at all near "passport".
        let a = answer("What is my passport number?", &[("Trip.md", TRIP)]);
        assert!(!a.found, "{a:?}");
    }

    #[test]
    fn a_list_question_gets_the_open_items() {
        let a = answer(
            "Which things for the Lisbon trip are still open?",
            &[("Trip.md", TRIP)],
        );
        assert!(a.found, "{a:?}");
        assert_eq!(a.answer, "- Day trip to Sintra\n- Dinner on Saturday");
    }

    const FLAT: &str = "# Apartment Maintenance\n\n- Landlord: Mr. Visser, via the property office, office@visser.example.com\n\n## Who to call\n\nProperty office for repairs: email first, phone only for emergencies.\n";
    const COSTS: &str = "# Lisbon Trip\n\n## Costs so far\n\nFlights 186 + hotel 560 + race 55 = 801 EUR.\n\n## Booked\n\n- [x] Hotel in Alfama, 2027-03-11 to 2027-03-16, free cancellation until 2027-02-25\n";
    const PROJECTS: &str = "# Project Hermes — Overview\n\n- Owner: Marcus Lee\n- Deadline: 2027-02-26 (first channel live)\n";
    const BOARD: &str = "# Work Tasks Board\n\n| Task | Project | Due |\n|---|---|---|\n| Review Hermes SMS Vendor Contract | Hermes | 2026-11-23 |\n";
    const PERSON: &str = "# Marcus Lee\n\n- Projects: Hermes (owner), Zephyr (product input)\n";

    #[test]
    fn a_value_in_another_line_about_the_same_subject() {
        // The line that answers names the office; the address stands in
        // the line that names the same office.
        let a = answer(
            "Who do I email for repairs in the apartment?",
            &[("Home/Apartment Maintenance.md", FLAT)],
        );
        assert_eq!(
            a.value.as_deref(),
            Some("office@visser.example.com"),
            "{a:?}"
        );
        assert_eq!(a.citations.len(), 2, "{a:?}");
    }

    #[test]
    fn a_value_belongs_to_the_label_before_it() {
        let a = answer(
            "How much did the hotel in Lisbon cost?",
            &[("Trip.md", COSTS)],
        );
        assert_eq!(a.value.as_deref(), Some("560"), "{a:?}");
        // "until" answers when something ends.
        let a = answer(
            "When does the free cancellation for the Lisbon hotel end?",
            &[("Trip.md", COSTS)],
        );
        assert_eq!(a.value.as_deref(), Some("2027-02-25"), "{a:?}");
    }

    #[test]
    fn the_note_about_the_name_wins() {
        let notes = [
            ("Board.md", BOARD),
            ("Hermes Overview.md", PROJECTS),
            ("Marcus Lee.md", PERSON),
        ];
        let a = answer("What is the Hermes deadline?", &notes);
        assert_eq!(a.value.as_deref(), Some("2027-02-26"), "{a:?}");
        // "Projects:" names the kind of thing, not who owns it.
        let a = answer("Who is the owner of Project Hermes?", &notes);
        assert_eq!(a.value.as_deref(), Some("Marcus Lee"), "{a:?}");
    }

    #[test]
    fn a_modifier_of_the_noun_must_be_said() {
        let journal = "# 2026-11-21\n\nTomorrow: the boiler appointment reminder for 2 December.\n\nFinally booked the optician for 2026-12-09 at 17:30.\n";
        let a = answer(
            "When is my optician appointment?",
            &[("Journal.md", journal)],
        );
        assert_eq!(a.value.as_deref(), Some("2026-12-09"), "{a:?}");
        let a = answer(
            "When is my dentist appointment?",
            &[("Journal.md", journal)],
        );
        assert!(!a.found, "{a:?}");
    }

    #[test]
    fn quoted_lines_never_reach_70_on_their_own() {
        assert!(confidence(true, 1.0, 0.5, Shape::Line, true) < 70);
        assert!(confidence(true, 1.0, 0.5, Shape::List, true) >= 70);
        assert!(confidence(true, 1.0, 1.0, Shape::Value, true) == 100);
        assert_eq!(confidence(true, 1.0, 1.0, Shape::Value, false), 0);
    }

    #[test]
    fn evidence_made_by_hand_is_read_without_panicking() {
        let odd = json!([
            {"id": "E1", "units": []},
            "not an item",
            {"id": "E2", "text": "Boiler service: 2026-12-02", "path": "h.md"},
            {"units": [{"text": ""}]},
            7
        ]);
        let items = crate::retrieval::answer::evidence::from_json(odd.as_array().unwrap());
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].0, "E2");
        let q = analyze("When is the boiler service?");
        let a = extract(&q, &items);
        assert_eq!(a.value.as_deref(), Some("2026-12-02"));
        let none = extract(&q, &[]);
        assert!(!none.found);
    }
}
