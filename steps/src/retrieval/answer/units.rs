//! A note read line by line into the units evidence is chosen from:
//! metadata bullets, list items (with their checkbox), table rows (read
//! with their column headers), sentences of paragraphs and lines of code,
//! each with its heading path, block and the stems it is scored by.

use super::spans::{self, Span};
use super::text;
use std::collections::HashSet;

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
    pub(super) fn as_str(self) -> &'static str {
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
    /// The first line it is on, and the last (a sentence of a wrapped
    /// paragraph, a list item with its continuation lines).
    pub line: usize,
    pub end_line: usize,
    /// What a reader sees (Markdown removed, a row with its headers).
    pub text: String,
    /// The file's lines as they are (the sentence alone when they are long).
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
    // The lines of the paragraph (or list item) being read: a paragraph's
    // lines are one text however the file wraps them.
    let mut para = Paragraph::default();
    for (i, line) in lines {
        let line_no = i + 1;
        let t = line.trim();
        // A plain line continues the paragraph or the list item above it
        // (CommonMark's lazy continuation); anything else ends it.
        let continues = !in_front
            && fence.is_none()
            && !t.is_empty()
            && !para.lines.is_empty()
            && heading_level(t).is_none()
            && !t.starts_with('|')
            && !t.starts_with("```")
            && !t.starts_with("~~~")
            && !t.starts_with('>')
            && !is_rule(t)
            && !is_navigation(t)
            && list_marker(t).is_none();
        if continues {
            para.lines.push((line_no, text::plain(t), line.to_string()));
            continue;
        }
        para.flush(&mut out, note_index, note, &path_words);
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
        if is_navigation(t) {
            continue;
        }
        let item = list_marker(t);
        let plain = text::plain(t);
        let kind = match item {
            Some(_) if !seen_h2 && is_meta(&plain) => UnitKind::Meta,
            Some(checked) => UnitKind::Item(checked),
            None => UnitKind::Sentence,
        };
        para = Paragraph {
            lines: vec![(line_no, plain, line.to_string())],
            kind: Some(kind),
            headings: headings.clone(),
            block,
        };
    }
    para.flush(&mut out, note_index, note, &path_words);
    out
}

/// Raw lines longer than this are not copied into each sentence's quote:
/// the sentence stands for itself (a pasted transcript on one line).
const MAX_QUOTE: usize = 600;

/// A paragraph or list item being read, line by line: (line number, the
/// line as plain text, the line as written).
#[derive(Default)]
struct Paragraph {
    lines: Vec<(usize, String, String)>,
    kind: Option<UnitKind>,
    headings: Vec<(usize, String)>,
    block: usize,
}

impl Paragraph {
    /// Its units (a paragraph's sentences, or the item), each with the
    /// lines it is on; empties it.
    fn flush(&mut self, out: &mut Vec<Unit>, note_index: usize, note: &Note, path_words: &str) {
        let lines = std::mem::take(&mut self.lines);
        let Some(kind) = self.kind.take() else {
            return;
        };
        if lines.is_empty() {
            return;
        }
        // The lines joined, and where each starts in the joined text.
        let mut joined = String::new();
        let mut starts = Vec::with_capacity(lines.len());
        for (_, plain, _) in &lines {
            if !joined.is_empty() && !plain.is_empty() {
                joined.push(' ');
            }
            starts.push(joined.len());
            joined.push_str(plain);
        }
        let line_at = |offset: usize| starts.partition_point(|s| *s <= offset).saturating_sub(1);
        let pieces = if kind == UnitKind::Sentence {
            sentences(&joined)
        } else {
            vec![(0, joined.len())]
        };
        for (a, b) in pieces {
            let text_ = joined[a..b].trim().to_string();
            if text_.is_empty() {
                continue;
            }
            let (first, last) = (line_at(a), line_at(b.saturating_sub(1).max(a)));
            let raw_len: usize = lines[first..=last].iter().map(|l| l.2.len() + 1).sum();
            let raw = if raw_len <= MAX_QUOTE || kind != UnitKind::Sentence {
                lines[first..=last]
                    .iter()
                    .map(|l| l.2.trim_end())
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                text_.clone()
            };
            let mut u = unit(
                note_index,
                note,
                path_words,
                &self.headings,
                lines[first].0,
                text_,
                &raw,
                kind,
                self.block,
            );
            u.end_line = lines[last].0;
            out.push(u);
        }
    }
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
        end_line: line,
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
pub(super) fn context_of(
    heading_path: &[String],
    path_words: &str,
) -> (HashSet<String>, Vec<String>) {
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

/// Navigation, not content.
fn is_navigation(t: &str) -> bool {
    t.starts_with("Linked:") || t.starts_with("See also") || t.starts_with("Related:")
}

/// A thematic break or a setext heading's underline (`---`, `***`, `===`).
fn is_rule(t: &str) -> bool {
    let t: String = t.chars().filter(|c| !c.is_whitespace()).collect();
    t.len() >= 3
        && ["-", "*", "_", "="]
            .iter()
            .any(|c| t.chars().all(|x| x.to_string() == *c))
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
/// or a digit), keeping short paragraphs whole: the byte range of each.
fn sentences(p: &str) -> Vec<(usize, usize)> {
    if p.len() <= 220 {
        return vec![(0, p.len())];
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
                out.push((start, i + 1));
                start = i + 1;
            }
        }
    }
    if start < p.len() && !p[start..].trim().is_empty() {
        out.push((start, p.len()));
    }
    out
}
