//! The edges one note states, each with the line it comes from:
//!
//! - links: `[[Target]]`, `[[Target|shown]]`, `[[Target#part]]` and
//!   Markdown links to other notes (`[text](other.md)`): `links_to`;
//! - frontmatter properties and `Key: value` lines of the body whose key
//!   names a relation (`owner`, `depends_on`, `project`, `attendees`,
//!   `repo`, `reports_to`, `blocked_by`, `deployed_to`, `lead`, …), and any
//!   property whose values are `[[links]]` (the relation is the key);
//! - tags: `tagged`;
//! - statements in the text: "X owns Y", "Y is owned by X", "X depends on
//!   Y" (or relies on), "A reports to B", "X is deployed to Y", "X is
//!   blocked by Y", "X blocks Y". A sentence that starts with a pronoun
//!   ("It depends on …") speaks of the previous sentence's subject. A list
//!   after the verb ("on A and on B", "A, B and C") is one edge per item.
//!
//! Relations point one way: `owns` from the owner, `depends_on` from the
//! dependent, `part_of` to the project, `attended` from the person.

use regex::Regex;
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// The version of these rules: a graph read by others is read again.
/// Change it with any change to what a note's edges are.
pub const READER: &str = "6";

/// One edge as a note states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub rel: String,
    pub to: String,
    /// 1-based line in the note.
    pub line: u32,
    /// How it was found: `link`, `property`, `tag` or `statement`.
    pub how: &'static str,
    /// The line it comes from, trimmed (at most 240 characters).
    pub text: String,
}

/// A note's own names (its title, file name and `aliases`) and its edges.
#[derive(Debug, Clone, Default)]
pub struct NoteGraph {
    /// The name it is shown by: its title, else its file name.
    pub name: String,
    pub aliases: Vec<String>,
    pub edges: Vec<Edge>,
    /// Whose the note is ("" shared; see [`crate::retrieval::frontmatter::tenant_of`]).
    pub tenant: String,
}

/// How names are compared: case, `-`/`_` and runs of spaces do not count
/// (`Billing-Service` is `billing service`), nor does a leading article.
pub fn key(name: &str) -> String {
    let lower = name.trim().to_lowercase().replace(['-', '_'], " ");
    let words: Vec<&str> = lower.split_whitespace().collect();
    let words = match words.first() {
        Some(&("the" | "a" | "an")) if words.len() > 1 => &words[1..],
        _ => &words[..],
    };
    words.join(" ")
}

/// Frontmatter and `Key: value` keys that name a relation, with the
/// relation and whether the note is its subject (`depends_on: X`: the
/// note depends on X) or its object (`owner: P`: P owns the note).
const KEYED: &[(&[&str], &str, bool)] = &[
    (
        &["owner", "owners", "owned by", "maintainer", "maintainers"],
        "owns",
        false,
    ),
    (
        &["depends on", "dependencies", "requires"],
        "depends_on",
        true,
    ),
    (&["project", "projects", "part of"], "part_of", true),
    (&["attendees", "participants"], "attended", false),
    (&["repo", "repository", "repos"], "in_repo", true),
    (&["reports to", "manager"], "reports_to", true),
    (&["blocked by"], "blocked_by", true),
    (&["blocks"], "blocks", true),
    (
        &["deployed to", "environment", "environments"],
        "deployed_to",
        true,
    ),
    (&["lead", "leads"], "leads", false),
];

/// Verb phrases of the statements read in the text: the phrase, the
/// relation, and whether the sentence's subject is the edge's subject
/// ("X owns Y") or its object ("Y is owned by X").
const STATEMENTS: &[(&str, &str, bool)] = &[
    ("is owned by", "owns", false),
    ("are owned by", "owns", false),
    ("owned by", "owns", false),
    ("is run by", "owns", false),
    ("are run by", "owns", false),
    ("run by", "owns", false),
    ("is operated by", "owns", false),
    ("operated by", "owns", false),
    ("is maintained by", "owns", false),
    ("are maintained by", "owns", false),
    ("maintained by", "owns", false),
    ("maintains", "owns", true),
    ("owns", "owns", true),
    ("own", "owns", true),
    ("depends on", "depends_on", true),
    ("depend on", "depends_on", true),
    ("relies on", "depends_on", true),
    ("rely on", "depends_on", true),
    ("is led by", "leads", false),
    ("are led by", "leads", false),
    ("led by", "leads", false),
    ("leads", "leads", true),
    ("reports to", "reports_to", true),
    ("report to", "reports_to", true),
    ("is deployed to", "deployed_to", true),
    ("are deployed to", "deployed_to", true),
    ("deploys to", "deployed_to", true),
    ("is blocked by", "blocked_by", true),
    ("are blocked by", "blocked_by", true),
    ("blocks", "blocked_by", false),
];

const LONGEST_NAME_WORDS: usize = 6;

pub fn note(rel_path: &str, source: &str) -> NoteGraph {
    let (meta, body) = crate::retrieval::frontmatter::split(source);
    let src = source.strip_prefix('\u{feff}').unwrap_or(source);
    let body_first_line = src[..src.len().saturating_sub(body.len())].lines().count() as u32 + 1;
    let stem = rel_path
        .rsplit('/')
        .next()
        .unwrap_or(rel_path)
        .rsplit_once('.')
        .map_or(rel_path, |(s, _)| s)
        .to_string();
    // As the index names a note: its title, else its first `# heading`.
    let title = meta
        .get("title")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            body.lines()
                .find_map(|l| l.strip_prefix("# "))
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        });
    let name = title.clone().unwrap_or_else(|| stem.clone());
    let mut aliases = vec![stem.clone()];
    aliases.extend(title);
    aliases.extend(strings(meta.get("aliases")));
    let mut g = NoteGraph {
        name: name.clone(),
        aliases,
        edges: Vec::new(),
        tenant: crate::retrieval::frontmatter::tenant_of(&meta),
    };
    properties(&mut g, &meta, src);
    // Statements are read by paragraph (prose wraps its lines); links and
    // `Key: value` lines by line.
    let mut para = Paragraph::default();
    let mut in_code = false;
    // A table's header cells, once its separator row is seen.
    let mut table: Option<Vec<String>> = None;
    let mut header: Option<Vec<String>> = None;
    for (i, line) in body.lines().enumerate() {
        let n = body_first_line + i as u32;
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            para.flush(&mut g);
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if t.is_empty() || t.starts_with('#') {
            para.flush(&mut g);
            links(&mut g, t, n);
            continue;
        }
        links(&mut g, t, n);
        if t.starts_with('|') {
            para.flush(&mut g);
            let cells = table_cells(t);
            if cells
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
            {
                table = header.take();
            } else if let Some(cols) = &table {
                // A row: its first cell is what the row is about; a column
                // headed by a relation gives its edges.
                let cols = cols.clone();
                for (c, cell) in cols.iter().zip(&cells).skip(1) {
                    if let Some(about) = cells.first().filter(|a| !a.is_empty()) {
                        keyed_about(&mut g, about, c, &split_list(cell), n, "property", t);
                    }
                }
            } else {
                header = Some(cells.iter().map(|c| c.to_lowercase()).collect());
            }
            continue;
        }
        table = None;
        header = None;
        if let Some((k, v)) = key_line(t) {
            para.flush(&mut g);
            keyed(&mut g, &k, &split_list(v), n, "property", t);
            continue;
        }
        // A list item starts a paragraph of its own.
        if t.starts_with(['-', '*', '+'])
            || t.split_once(". ")
                .is_some_and(|(d, _)| d.chars().all(|c| c.is_ascii_digit()) && !d.is_empty())
        {
            para.flush(&mut g);
        }
        para.push(t.trim_start_matches(['-', '*', '+', ' ']), n);
    }
    para.flush(&mut g);
    g
}

/// The cells of a table row, trimmed, bold marks off.
fn table_cells(t: &str) -> Vec<String> {
    let inner = t.trim().trim_start_matches('|').trim_end_matches('|');
    inner
        .split('|')
        .map(|c| c.trim().trim_matches('*').trim().to_string())
        .collect()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(scalar).collect(),
        Some(other) => scalar(other).into_iter().collect(),
        None => Vec::new(),
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The line of the frontmatter that holds `key` (1-based), else 1.
fn key_line_no(src: &str, key: &str) -> u32 {
    src.lines()
        .take_while(|l| !l.trim_start().starts_with("# "))
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map_or(1, |i| i as u32 + 1)
}

fn properties(g: &mut NoteGraph, meta: &Map<String, Value>, src: &str) {
    for (k, v) in meta {
        let line = key_line_no(src, k);
        let text = src
            .lines()
            .nth(line as usize - 1)
            .unwrap_or("")
            .trim()
            .to_string();
        let values = strings(Some(v));
        if k == "tags" || k == "tag" {
            for t in values {
                let tag = format!("#{}", t.trim_start_matches('#'));
                g.edges
                    .push(edge(&g.name, "tagged", &tag, line, "tag", &text));
            }
            continue;
        }
        let spoken = k.replace(['_', '-'], " ").to_lowercase();
        if KEYED
            .iter()
            .any(|(names, _, _)| names.contains(&spoken.as_str()))
        {
            keyed(g, &spoken, &values, line, "property", &text);
        } else if !values.is_empty() && values.iter().all(|v| wiki_target(v).is_some()) {
            // Any property made of links: the key is the relation.
            let rel = spoken.replace(' ', "_");
            for v in &values {
                if let Some(t) = wiki_target(v) {
                    g.edges
                        .push(edge(&g.name, &rel, &t, line, "property", &text));
                }
            }
        }
    }
}

/// `Key: value` on a line of its own (`- **Owner:** Priya` too), when
/// the key names a relation.
fn key_line(t: &str) -> Option<(String, &str)> {
    let t = t.trim_start_matches(['-', '*', '+', ' ']);
    let (k, v) = t.split_once(':')?;
    let k = k.trim().trim_matches('*').trim().to_lowercase();
    let v = v.trim().trim_start_matches('*').trim();
    let known = KEYED
        .iter()
        .any(|(names, _, _)| names.contains(&k.as_str()));
    (known && !v.is_empty()).then_some((k, v))
}

fn keyed(g: &mut NoteGraph, k: &str, values: &[String], line: u32, how: &'static str, text: &str) {
    let name = g.name.clone();
    keyed_about(g, &name, k, values, line, how, text);
}

/// `keyed` about `about` (a table row's first cell) rather than the note.
fn keyed_about(
    g: &mut NoteGraph,
    about: &str,
    k: &str,
    values: &[String],
    line: u32,
    how: &'static str,
    text: &str,
) {
    let Some((_, rel, subject)) = KEYED.iter().find(|(names, _, _)| names.contains(&k)) else {
        return;
    };
    for v in values {
        let target = wiki_target(v).unwrap_or_else(|| v.trim().to_string());
        if target.is_empty() || target.split_whitespace().count() > LONGEST_NAME_WORDS {
            continue;
        }
        let e = if *subject {
            edge(about, rel, &target, line, how, text)
        } else {
            edge(&target, rel, about, line, how, text)
        };
        g.edges.push(e);
    }
}

fn edge(from: &str, rel: &str, to: &str, line: u32, how: &'static str, text: &str) -> Edge {
    let text: String = text.chars().take(240).collect();
    Edge {
        from: from.trim().to_string(),
        rel: rel.to_string(),
        to: to.trim().to_string(),
        line,
        how,
        text,
    }
}

/// `[[Target]]`, `[[Target|shown]]`, `[[Target#part]]`: the target.
fn wiki_target(s: &str) -> Option<String> {
    let inner = s.trim().strip_prefix("[[")?.strip_suffix("]]")?;
    let t = inner.split(['|', '#']).next()?.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn links(g: &mut NoteGraph, t: &str, n: u32) {
    static WIKI: OnceLock<Regex> = OnceLock::new();
    static MD: OnceLock<Regex> = OnceLock::new();
    let wiki =
        WIKI.get_or_init(|| Regex::new(r"\[\[([^\]\[|#]+)(?:[#|][^\]]*)?\]\]").expect("valid"));
    let md = MD.get_or_init(|| Regex::new(r"\]\(([^)\s]+?\.md)(?:#[^)]*)?\)").expect("valid"));
    // Most lines have no link: no pattern is run on them.
    if !t.contains("[[") && !t.contains("](") {
        return;
    }
    let mut seen = Vec::new();
    for c in wiki.captures_iter(t).chain(md.captures_iter(t)) {
        let target = c[1].trim();
        if target.contains("://") {
            continue;
        }
        let target = target.rsplit('/').next().unwrap_or(target);
        let target = target.strip_suffix(".md").unwrap_or(target).to_string();
        if !seen.contains(&target) {
            g.edges
                .push(edge(&g.name, "links_to", &target, n, "link", t));
            seen.push(target);
        }
    }
}

/// Items of a value written as a list: `A, B and C`, `[[A]], [[B]]`.
fn split_list(v: &str) -> Vec<String> {
    let v = v.trim().trim_end_matches('.');
    v.split([',', ';'])
        .flat_map(|part| part.split(" and "))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Words that end a name before a verb, or after one.
const STOP_BEFORE: &[&str] = &[
    "and",
    "but",
    "that",
    "which",
    "who",
    "while",
    "when",
    "because",
    "so",
    "then",
    "also",
    "now",
    "still",
    "currently",
];
const STOP_AFTER: &[&str] = &[
    " for ",
    " to ",
    " in ",
    " with ",
    " from ",
    " by ",
    " via ",
    " at ",
    " since ",
    " because ",
    " which ",
    " that ",
    " who ",
    " when ",
    " until ",
    " as ",
    " (",
];
const PRONOUNS: &[&str] = &[
    "it",
    "this",
    "that",
    "they",
    "he",
    "she",
    "these",
    "this service",
    "this team",
];

/// Lines of prose joined, with the line each starts at.
#[derive(Default)]
struct Paragraph {
    text: String,
    starts: Vec<(usize, u32)>,
}

impl Paragraph {
    fn push(&mut self, t: &str, n: u32) {
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        self.starts.push((self.text.len(), n));
        self.text.push_str(t);
    }

    fn line_at(&self, offset: usize) -> u32 {
        self.starts
            .iter()
            .take_while(|(o, _)| *o <= offset)
            .last()
            .map_or(1, |(_, n)| *n)
    }

    fn flush(&mut self, g: &mut NoteGraph) {
        if !self.text.is_empty() {
            statements(g, self);
        }
        *self = Paragraph::default();
    }
}

/// The first relation verb in `lower` at or after `from`: its offset (the
/// space before it), the phrase, the relation and its direction. One
/// pattern for all the phrases, longest first, so that at one place the
/// longest phrase wins ("is owned by" over "owned by").
fn next_verb(lower: &str, from: usize) -> Option<(usize, &'static str, &'static str, bool)> {
    static VERBS: OnceLock<Regex> = OnceLock::new();
    let verbs = VERBS.get_or_init(|| {
        let mut phrases: Vec<&str> = STATEMENTS.iter().map(|(p, _, _)| *p).collect();
        phrases.sort_by_key(|p| std::cmp::Reverse(p.len()));
        let alternation: Vec<String> = phrases.iter().map(|p| regex::escape(p)).collect();
        Regex::new(&format!(" (?:{}) ", alternation.join("|"))).expect("valid pattern")
    });
    let m = verbs.find_at(lower, from)?;
    let phrase = &lower[m.start() + 1..m.end() - 1];
    STATEMENTS
        .iter()
        .find(|(p, _, _)| *p == phrase)
        .map(|(p, rel, forward)| (m.start(), *p, *rel, *forward))
}

fn statements(g: &mut NoteGraph, para: &Paragraph) {
    let mut last_subject: Option<String> = None;
    // A sentence without a relation verb, whose subject a pronoun in a
    // later one may mean: read only when one does.
    let mut unread: Option<&str> = None;
    let base = para.text.as_ptr() as usize;
    for said in sentences(&para.text) {
        let at = said.as_ptr() as usize - base;
        // A space before, so that a verb that opens the sentence is found
        // as " relies on "; ASCII lower case, so that offsets in `lower`
        // are offsets in `sentence` (the verbs are ASCII).
        let sentence = format!(" {said}");
        let sentence = sentence.as_str();
        let lower = sentence.to_ascii_lowercase();
        let Some(mut verb) = next_verb(&lower, 0) else {
            unread = Some(said);
            continue;
        };
        // The subject: the name just before the verb; after a coordinating
        // "and" ("Nadia runs the Apps team and reports to …"), the
        // sentence's own subject.
        let before = &sentence[..verb.0];
        let coordinated = before.trim_end().to_lowercase().ends_with(" and");
        let named = if before.trim().is_empty() {
            // Notes are terse: "Relies on MySQL." is about the note.
            Some(g.name.clone())
        } else if coordinated {
            leading_subject(said)
        } else {
            tail_name(before)
        };
        let Some(mut subject) = named else {
            continue;
        };
        if is_pronoun(&subject) {
            // "It", "she": the sentence before's subject, else what the
            // note is about.
            if let Some(s) = unread
                .take()
                .and_then(leading_subject)
                .filter(|s| !is_pronoun(s))
            {
                last_subject = Some(as_the_note(g, s));
            }
            subject = last_subject.clone().unwrap_or_else(|| g.name.clone());
        } else {
            subject = as_the_note(g, subject);
            last_subject = Some(subject.clone());
            unread = None;
        }
        // One clause per verb that shares the subject: "X is maintained by
        // A and depends on B" is two statements about X.
        loop {
            let (i, phrase, rel, forward) = verb;
            let start = i + phrase.len() + 2;
            // The next verb starts a clause of the same subject when only
            // "and", a comma, a pronoun or "is"/"also" come before it
            // (", and it is deployed to …").
            let next = next_verb(&lower, start)
                .and_then(|v| clause_start(&lower[start..v.0]).map(|cut| (v, start + cut)));
            let end = next.map_or(sentence.len(), |(_, cut)| cut);
            let next = next.map(|(v, _)| v);
            // `i` is the verb's leading space, one past the padding.
            let n = para.line_at(at + i);
            objects(
                g,
                &subject,
                &sentence[start.min(sentence.len())..end.max(start).min(sentence.len())],
                phrase,
                rel,
                forward,
                n,
                said,
            );
            match next {
                Some(v) => verb = v,
                None => break,
            }
        }
    }
}

/// Where, in the text between two verbs, the first clause ends: at the
/// last "and", "," or ";" when only small words (a pronoun, "is", "also")
/// follow it up to the second verb.
fn clause_start(between: &str) -> Option<usize> {
    const SMALL: &[&str] = &[
        "it", "they", "he", "she", "this", "that", "which", "is", "are", "was", "were", "also",
        "then", "and", "so",
    ];
    // The verb's own leading space ends `between`: " and" then counts.
    let spaced = format!("{between} ");
    let cut = [" and ", ",", ";"]
        .iter()
        .filter_map(|sep| spaced.rfind(sep))
        .max()?
        .min(between.len());
    let words: Vec<&str> = between[cut..]
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().all(|w| SMALL.contains(w)).then_some(cut)
}

/// A note speaks of what it is about by part of its name: a person by
/// their first name ("Ines reports to …" in "Ines Duarte"), a thing with
/// its kind after it ("the raw-events topic" in "raw-events").
fn as_the_note(g: &NoteGraph, subject: String) -> String {
    let own = key(&g.name);
    let said = key(&subject);
    let first_name =
        !said.contains(' ') && own.split(' ').next() == Some(said.as_str()) && own.contains(' ');
    let with_kind = said.starts_with(&format!("{own} "))
        && said.split(' ').count() == own.split(' ').count() + 1;
    if first_name || with_kind {
        g.name.clone()
    } else {
        subject
    }
}

/// The edges of one clause: one per name in what follows its verb.
#[allow(clippy::too_many_arguments)]
fn objects(
    g: &mut NoteGraph,
    subject: &str,
    after: &str,
    phrase: &str,
    rel: &str,
    forward: bool,
    n: u32,
    sentence: &str,
) {
    let preposition = phrase
        .rsplit(' ')
        .next()
        .filter(|p| ["on", "to", "by"].contains(p));
    for item in split_list(after) {
        let item = match preposition {
            Some(p) => item
                .strip_prefix(&format!("{p} "))
                .unwrap_or(&item)
                .to_string(),
            None => item,
        };
        let Some(object) = head_name(&item) else {
            continue;
        };
        if is_pronoun(&object) {
            continue;
        }
        let e = if forward {
            edge(subject, rel, &object, n, "statement", sentence)
        } else {
            edge(&object, rel, subject, n, "statement", sentence)
        };
        g.edges.push(e);
    }
}

fn is_pronoun(s: &str) -> bool {
    PRONOUNS.contains(&s.to_lowercase().as_str())
}

/// A line's sentences (ends at `.`, `!` or `?` before a space or the end).
fn sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = line.as_bytes();
    for i in 0..b.len() {
        if matches!(b[i], b'.' | b'!' | b'?') && (i + 1 == b.len() || b[i + 1] == b' ') {
            out.push(line[start..i].trim());
            start = i + 1;
        }
    }
    if start < line.len() {
        out.push(line[start..].trim());
    }
    out.into_iter().filter(|s| !s.is_empty()).collect()
}

fn strip_article(s: &str) -> &str {
    let t = s.trim();
    for a in [
        "the ", "The ", "a ", "A ", "an ", "An ", "our ", "Our ", "their ", "Their ", "its ",
        "Its ",
    ] {
        if let Some(r) = t.strip_prefix(a) {
            return r.trim();
        }
    }
    t
}

fn clean_name(s: &str) -> Option<String> {
    let s = strip_article(s.trim_matches(|c: char| c.is_whitespace() || "`*_\"'“”".contains(c)));
    let s = wiki_target(s).unwrap_or_else(|| s.to_string());
    let words = s.split_whitespace().count();
    (words > 0 && words <= LONGEST_NAME_WORDS && s.chars().any(char::is_alphanumeric)).then_some(s)
}

/// The name just before a verb: the end of the clause before it.
fn tail_name(before: &str) -> Option<String> {
    let clause = before
        .rsplit([',', ';', ':', '(', ')'])
        .next()
        .unwrap_or(before);
    let words: Vec<&str> = clause.split_whitespace().collect();
    let from = words
        .iter()
        .rposition(|w| STOP_BEFORE.contains(&w.to_lowercase().as_str()))
        .map_or(0, |i| i + 1);
    clean_name(&words[from..].join(" "))
}

/// The name that starts what follows a verb, without an adverb after it
/// ("the Apps team too").
fn head_name(after: &str) -> Option<String> {
    let mut end = after.len();
    // ASCII only: offsets in `lower` are offsets in `after`.
    let lower = after.to_ascii_lowercase();
    for stop in STOP_AFTER {
        if let Some(i) = lower.find(stop) {
            end = end.min(i);
        }
    }
    let mut name = after[..end].trim_end();
    for adverb in [" too", " also", " as well", " now", " today", " instead"] {
        if name.to_ascii_lowercase().ends_with(adverb) {
            name = &name[..name.len() - adverb.len()];
        }
    }
    clean_name(name)
}

/// The subject a sentence without a relation verb starts with ("The
/// billing service runs nightly"), for a pronoun in the next sentence.
fn leading_subject(sentence: &str) -> Option<String> {
    static VERB: OnceLock<Regex> = OnceLock::new();
    let verb = VERB.get_or_init(|| {
        Regex::new(r"(?i)^(.{1,60}?)\s+(is|are|was|were|has|have|had|runs|handles|uses|calls|sends|stores|keeps|serves|leads|manages|works|builds|processes|charges|issues|checks|writes|reads)\b").expect("valid")
    });
    let c = verb.captures(sentence)?;
    clean_name(&c[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(path: &str, text: &str) -> Vec<(String, String, String, u32, &'static str)> {
        note(path, text)
            .edges
            .into_iter()
            .map(|e| (e.from, e.rel, e.to, e.line, e.how))
            .collect()
    }

    fn e(
        from: &str,
        rel: &str,
        to: &str,
        line: u32,
        how: &'static str,
    ) -> (String, String, String, u32, &'static str) {
        (from.into(), rel.into(), to.into(), line, how)
    }

    #[test]
    fn statements_with_pronouns_and_lists() {
        // Prose wraps: a sentence is read across its lines, each edge at
        // the line of its verb.
        let text = "# Ownership\n\nThe billing service is owned by the Payments team (lead: Alice). It\ndepends on the auth service for tokens and on the ledger service for balances.\n";
        assert_eq!(
            edges("docs/ownership.md", text),
            vec![
                e("Payments team", "owns", "billing service", 3, "statement"),
                e(
                    "billing service",
                    "depends_on",
                    "auth service",
                    4,
                    "statement"
                ),
                e(
                    "billing service",
                    "depends_on",
                    "ledger service",
                    4,
                    "statement"
                ),
            ]
        );
        let text = "The billing service is owned by the Payments team. It depends on the auth service for tokens and on the ledger service for balances.\nPriya reports to Dana.\nBILL-142 is blocked by AUTH-77.\n";
        assert_eq!(
            edges("a.md", text),
            vec![
                e("Payments team", "owns", "billing service", 1, "statement"),
                e(
                    "billing service",
                    "depends_on",
                    "auth service",
                    1,
                    "statement"
                ),
                e(
                    "billing service",
                    "depends_on",
                    "ledger service",
                    1,
                    "statement"
                ),
                e("Priya", "reports_to", "Dana", 2, "statement"),
                e("BILL-142", "blocked_by", "AUTH-77", 3, "statement"),
            ]
        );
    }

    #[test]
    fn clauses_terse_sentences_tables_and_the_notes_own_names() {
        let text = "---\ntitle: Ines Duarte\n---\n# Ines Duarte\n\nInes reports to Marta. The login service is maintained by the Identity group and depends on the user database, and it is deployed to the core cluster.\nRelies on Vault.\nFlags are owned by the Apps team too.\n\n| name | reports to |\n|---|---|\n| Theo Laine | Ines Duarte |\n";
        assert_eq!(
            edges("people/ines.md", text),
            vec![
                e("Ines Duarte", "reports_to", "Marta", 6, "statement"),
                e("Identity group", "owns", "login service", 6, "statement"),
                e(
                    "login service",
                    "depends_on",
                    "user database",
                    6,
                    "statement"
                ),
                e(
                    "login service",
                    "deployed_to",
                    "core cluster",
                    6,
                    "statement"
                ),
                e("Ines Duarte", "depends_on", "Vault", 7, "statement"),
                e("Apps team", "owns", "Flags", 8, "statement"),
                e("Theo Laine", "reports_to", "Ines Duarte", 12, "property"),
            ]
        );
    }

    #[test]
    fn any_text_is_read_without_a_panic() {
        // Letters whose lower case is longer than they are, odd tables,
        // links and frontmatter cut short.
        for text in [
            "İSTANBUL TEAM owns the İzmir service for İİİ too. İt depends on İ and on ẞ, and İt is deployed to Σ.",
            "Ops owns the İİİİİİİİİİİİ for €€€€€€€€€€€€ too. The İİİİİİİİ service depends on ÉÉ, and it is deployed to €€€€€€.",
            "| İ |\n|---|\n| a | b | c |\n|",
            "---\ntitle: [a\n---\n[[ ]] [[|]] [x](.md) ]( owns  depends on  , and",
            " owns ",
            "depends on",
        ] {
            let _ = note("n.md", text);
        }
    }

    #[test]
    fn properties_links_and_key_lines() {
        let text = "---\ntitle: Billing service\nowner: Priya Natarajan\ndepends_on: [payments-api, '[[Ledger]]']\ntags: [billing]\nsee: ['[[Runbook]]']\ndate: 2026-01-01\n---\n\n# Billing\n\nDeployed to: prod-eu, prod-us\nSee [[Incident 12|the incident]] and [notes](../docs/setup.md).\n";
        assert_eq!(
            edges("code/billing-service.md", text),
            vec![
                e("Priya Natarajan", "owns", "Billing service", 3, "property"),
                e(
                    "Billing service",
                    "depends_on",
                    "payments-api",
                    4,
                    "property"
                ),
                e("Billing service", "depends_on", "Ledger", 4, "property"),
                e("Billing service", "tagged", "#billing", 5, "tag"),
                e("Billing service", "see", "Runbook", 6, "property"),
                e("Billing service", "deployed_to", "prod-eu", 12, "property"),
                e("Billing service", "deployed_to", "prod-us", 12, "property"),
                e("Billing service", "links_to", "Incident 12", 13, "link"),
                e("Billing service", "links_to", "setup", 13, "link"),
            ]
        );
        assert_eq!(key("The Billing-Service"), "billing service");
    }
}
