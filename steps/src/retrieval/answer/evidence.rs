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
use super::spans::{self, Span};
use super::text;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// One note to draw evidence from.
#[derive(Debug, Clone)]
pub struct Note {
    /// Relative to the knowledge base, `/`-separated.
    pub path: String,
    pub title: String,
    pub text: String,
    /// 0 for the best search hit.
    pub rank: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// `- Key: value` under the title, or frontmatter.
    Meta,
    /// A list item; `Some(true)` when ticked.
    Item(Option<bool>),
    /// A table row, read with its headers.
    Row,
    /// A sentence of a paragraph.
    Sentence,
    /// A line inside a code fence.
    Code,
}

impl UnitKind {
    fn as_str(self) -> &'static str {
        match self {
            UnitKind::Meta => "meta",
            UnitKind::Item(_) => "item",
            UnitKind::Row => "row",
            UnitKind::Sentence => "text",
            UnitKind::Code => "code",
        }
    }
}

/// The smallest piece of evidence: one line, or one sentence of a line.
#[derive(Debug, Clone)]
pub struct Unit {
    pub note: usize,
    pub line: usize,
    /// What a reader sees (Markdown removed, a row with its headers).
    pub text: String,
    /// The file's line as it is.
    pub raw: String,
    /// Headings above it, the note's title first.
    pub heading_path: Vec<String>,
    pub kind: UnitKind,
    /// Lines of one list, table or paragraph share a block.
    pub block: usize,
    pub stems: Vec<String>,
    /// Stems of the headings, title and path.
    pub context: HashSet<String>,
    /// Stems of the note's title (what every line of the note is about).
    pub title: Vec<String>,
    pub spans: Vec<Span>,
    pub score: f64,
    /// Cosine similarity in meaning to the question (0 when not measured).
    pub similarity: f32,
}

/// The units of one note.
pub fn units_of(note_index: usize, note: &Note, first_block: usize) -> Vec<Unit> {
    let mut out = Vec::new();
    let mut block = first_block;
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut fence: Option<String> = None;
    let mut table_header: Option<Vec<String>> = None;
    let mut seen_h2 = false;
    let path_words: String = note
        .path
        .trim_end_matches(".md")
        .replace(['/', '-', '_'], " ");
    let mut lines = note.text.lines().enumerate().peekable();
    // YAML frontmatter: its `key: value` lines are metadata.
    let mut in_front = note.text.starts_with("---\n") || note.text.starts_with("---\r\n");
    if in_front {
        lines.next();
    }
    for (i, line) in lines {
        let line_no = i + 1;
        let t = line.trim();
        if in_front {
            if t == "---" || t == "..." {
                in_front = false;
                block += 1;
                continue;
            }
            if let Some((k, v)) = t.split_once(':') {
                if !v.trim().is_empty() {
                    out.push(unit(
                        note_index,
                        note,
                        &path_words,
                        &headings,
                        line_no,
                        format!("{}: {}", k.trim(), v.trim()),
                        line,
                        UnitKind::Meta,
                        block,
                    ));
                }
            }
            continue;
        }
        if let Some(f) = &fence {
            if t.starts_with(f.as_str()) {
                fence = None;
                block += 1;
            } else if !t.is_empty() {
                out.push(unit(
                    note_index,
                    note,
                    &path_words,
                    &headings,
                    line_no,
                    t.trim_end_matches('\\').trim().to_string(),
                    line,
                    UnitKind::Code,
                    block,
                ));
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(t[..3].to_string());
            block += 1;
            continue;
        }
        if t.is_empty() {
            block += 1;
            table_header = None;
            continue;
        }
        if let Some(level) = heading_level(t) {
            let h = t[level..].trim().trim_end_matches('#').trim().to_string();
            headings.retain(|(l, _)| *l < level);
            headings.push((level, text::plain(&h)));
            if level >= 2 {
                seen_h2 = true;
            }
            block += 1;
            table_header = None;
            continue;
        }
        if t.starts_with('|') {
            let cells = table_cells(t);
            if cells
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
            {
                continue;
            }
            match &table_header {
                None => table_header = Some(cells),
                Some(header) => {
                    let text = row_text(header, &cells);
                    if !text.is_empty() {
                        out.push(unit(
                            note_index,
                            note,
                            &path_words,
                            &headings,
                            line_no,
                            text,
                            line,
                            UnitKind::Row,
                            block,
                        ));
                    }
                }
            }
            continue;
        }
        table_header = None;
        // Navigation, not content.
        if t.starts_with("Linked:") || t.starts_with("See also") || t.starts_with("Related:") {
            continue;
        }
        let item = list_marker(t);
        if let Some(checked) = item {
            let plain = text::plain(t);
            let kind = if !seen_h2 && is_meta(&plain) {
                UnitKind::Meta
            } else {
                UnitKind::Item(checked)
            };
            out.push(unit(
                note_index,
                note,
                &path_words,
                &headings,
                line_no,
                plain,
                line,
                kind,
                block,
            ));
            continue;
        }
        let plain = text::plain(t);
        for sentence in sentences(&plain) {
            out.push(unit(
                note_index,
                note,
                &path_words,
                &headings,
                line_no,
                sentence,
                line,
                UnitKind::Sentence,
                block,
            ));
        }
        // A paragraph is one block; its next line continues it.
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn unit(
    note_index: usize,
    note: &Note,
    path_words: &str,
    headings: &[(usize, String)],
    line: usize,
    text_: String,
    raw: &str,
    kind: UnitKind,
    block: usize,
) -> Unit {
    let mut heading_path: Vec<String> = vec![note.title.clone()];
    for (_, h) in headings {
        if h != &note.title {
            heading_path.push(h.clone());
        }
    }
    let (context, title) = context_of(&heading_path, path_words);
    Unit {
        note: note_index,
        line,
        stems: text::stems(&text_),
        spans: spans::find(&text_),
        text: text_,
        raw: raw.trim_end().to_string(),
        heading_path,
        kind,
        block,
        context,
        title,
        score: 0.0,
        similarity: 0.0,
    }
}

/// The context stems of a unit under `heading_path` (the title first) in a
/// note whose path reads `path_words`, and its title's stems.
fn context_of(heading_path: &[String], path_words: &str) -> (HashSet<String>, Vec<String>) {
    let mut context: HashSet<String> = HashSet::new();
    for h in heading_path {
        context.extend(text::stems(h));
    }
    context.extend(text::stems(path_words));
    let title = heading_path
        .first()
        .map(|t| text::stems(t))
        .unwrap_or_default();
    (context, title)
}

fn heading_level(t: &str) -> Option<usize> {
    let n = t.bytes().take_while(|b| *b == b'#').count();
    (n > 0 && n <= 6 && t[n..].starts_with(' ')).then_some(n)
}

/// `Some(checked)` for a list item: `Some(Some(true))` ticked,
/// `Some(Some(false))` open, `Some(None)` a plain item.
fn list_marker(t: &str) -> Option<Option<bool>> {
    for p in ["- [ ] ", "* [ ] "] {
        if t.starts_with(p) {
            return Some(Some(false));
        }
    }
    for p in ["- [x] ", "- [X] ", "* [x] ", "* [X] "] {
        if t.starts_with(p) {
            return Some(Some(true));
        }
    }
    if t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ") {
        return Some(None);
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=3).contains(&digits) && t[digits..].starts_with(". ") {
        return Some(None);
    }
    None
}

fn is_meta(plain: &str) -> bool {
    match plain.split_once(':') {
        Some((k, v)) => {
            !v.trim().is_empty()
                && k.len() <= 40
                && k.split_whitespace().count() <= 5
                && !k.contains("http")
        }
        None => false,
    }
}

fn table_cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| text::plain(c.trim())).collect()
}

/// A row as `Header: cell; Header: cell`, the first cell standing alone
/// when its header is empty or generic.
fn row_text(header: &[String], cells: &[String]) -> String {
    let mut parts = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        if c.is_empty() {
            continue;
        }
        match header.get(i).filter(|h| !h.is_empty()) {
            Some(h) => parts.push(format!("{h}: {c}")),
            None => parts.push(c.clone()),
        }
    }
    parts.join("; ")
}

/// Splits a paragraph into sentences (at `. `, `! `, `? ` before a capital
/// or a digit), keeping short paragraphs whole.
fn sentences(p: &str) -> Vec<String> {
    if p.len() <= 220 {
        return vec![p.to_string()];
    }
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = p.char_indices().collect();
    for w in 0..chars.len() {
        let (i, c) = chars[w];
        if matches!(c, '.' | '!' | '?') {
            let next = chars.get(w + 1).map(|x| x.1);
            let after = chars.get(w + 2).map(|x| x.1);
            let before = p[..i].rsplit(' ').next().unwrap_or("");
            // "Dr." and "e.g." do not end sentences.
            let abbreviation =
                ["Dr", "Mr", "Mrs", "Ms", "e.g", "i.e", "vs", "etc"].contains(&before);
            if next == Some(' ')
                && after.is_some_and(|a| a.is_uppercase() || a.is_ascii_digit())
                && !abbreviation
            {
                out.push(p[start..=i].trim().to_string());
                start = i + 1;
            }
        }
    }
    if start < p.len() && !p[start..].trim().is_empty() {
        out.push(p[start..].trim().to_string());
    }
    out
}

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
    "arrival",
    "arrive",
    "arriving",
    "departure",
    "depart",
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
        self.units.iter().map(|u| u.line).max().unwrap_or(0)
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
                Unit {
                    note: rank,
                    line: u
                        .get("line")
                        .and_then(Value::as_u64)
                        .unwrap_or(start as u64) as usize,
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
}
