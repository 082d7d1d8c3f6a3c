//! Markdown knowledge bases as files and heading-aware chunks.
//!
//! This is the shared front half of every retrieval index (full-text in
//! `kb.*`, dense vectors elsewhere): [`crate::core::walk`] lists the notes, and
//! [`chunk_document`] turns one note into [`Chunk`]s with stable ids. The
//! public API here is kept stable because other indexes build on it.

use crate::core::hash::hex_hash;
use serde_json::{Map, Value};
use std::path::Path;

/// The text a chunk is embedded as: its title, its section (unless it is
/// the title), its text; and its hash, under which its vector is kept. The
/// index stores the hash, so vectors are found without reading any text.
pub fn embed_text(title: &str, section: &str, text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if !title.is_empty() {
        parts.push(title);
    }
    if !section.is_empty() && section != title {
        parts.push(section);
    }
    parts.push(text);
    parts.join("\n")
}

/// [`embed_text`]'s hash.
pub fn embed_hash(title: &str, section: &str, text: &str) -> u64 {
    crate::core::hash::hash64(&[embed_text(title, section, text).as_bytes()])
}

/// One retrievable piece of a note: a heading's section, or part of a long one.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// Stable across runs: `path#section-slug-n` (n counts equal slugs in the file).
    pub id: String,
    /// Relative to the KB root, with `/` separators.
    pub path: String,
    /// Frontmatter `title`, else the first H1, else the file stem.
    pub title: String,
    /// The nearest heading above the text (empty before the first heading).
    pub section: String,
    /// The chunk's Markdown, heading line included.
    pub text: String,
    /// Hash of the chunk's text, section and title (hex), to detect changes.
    pub hash: String,
    /// Frontmatter fields plus the note's leading `- Key: value` bullets.
    pub metadata: Map<String, Value>,
    /// Modification time of the file (ms since the epoch); 0 when unknown.
    pub mtime_ms: i64,
}

/// How notes are cut into chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkOptions {
    /// Headings up to this level (1..=6) start a new chunk.
    pub split_level: u8,
    /// Sections longer than this many characters are split at paragraph breaks.
    pub max_chars: usize,
    /// Read the LifeOS-style `- Key: value` bullets under the title as metadata
    /// (frontmatter wins when both set a field).
    pub inline_metadata: bool,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            split_level: 3,
            max_chars: 2000,
            inline_metadata: true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KbError {
    #[error("knowledge base `{0}` is not a directory")]
    NotADirectory(String),
    #[error("cannot read `{path}`: {message}")]
    Io { path: String, message: String },
    #[error("index error in `{path}`: {message}")]
    Index { path: String, message: String },
    #[error("the index in `{0}` is being updated by another process; try again")]
    Locked(String),
    #[error("indexing `{0}` stopped: the step's time ran out or the run was cancelled (the index is as it was)")]
    Stopped(String),
    #[error("the index in `{0}` was found damaged (a file of it was cut short while in use): it was cleared and is built again on the next search; try again")]
    Damaged(String),
}

impl From<crate::core::walk::WalkError> for KbError {
    fn from(e: crate::core::walk::WalkError) -> Self {
        match e {
            crate::core::walk::WalkError::NotADirectory(p) => KbError::NotADirectory(p),
            crate::core::walk::WalkError::Io { path, message } => KbError::Io { path, message },
        }
    }
}

impl KbError {
    pub fn io(path: &Path, e: impl std::fmt::Display) -> Self {
        KbError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

/// Splits one note into chunks. `mtime_ms` of the result is 0: the caller,
/// which has stat'ed the file, fills it in.
pub fn chunk_document(rel_path: &str, source: &str, opts: &ChunkOptions) -> Vec<Chunk> {
    let (front, body) = crate::retrieval::frontmatter::split(source);
    let mut metadata = front;
    let sections = split_sections(body, opts.split_level.clamp(1, 6));
    let stem = rel_path
        .rsplit('/')
        .next()
        .unwrap_or(rel_path)
        .trim_end_matches(".markdown")
        .trim_end_matches(".md");
    let title = match metadata.get("title") {
        Some(Value::String(t)) if !t.trim().is_empty() => capped_heading(t.trim()),
        _ => sections
            .iter()
            .find(|s| s.level == 1)
            .map(|s| s.heading.clone())
            .unwrap_or_else(|| stem.to_string()),
    };
    if opts.inline_metadata {
        if let Some(first) = sections.first() {
            for (k, v) in inline_metadata(first.text) {
                metadata.entry(k).or_insert(v);
            }
        }
    }
    normalise_metadata(&mut metadata);
    bound_metadata(&mut metadata);
    if !metadata.contains_key("date") {
        if let Some(d) = date_in(stem) {
            metadata.insert("date".into(), Value::String(d));
        }
    }

    let mut chunks = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for s in &sections {
        for piece in split_long(s.text, opts.max_chars.max(200)) {
            if piece.trim().is_empty() {
                continue;
            }
            let slug = match slug(&s.heading) {
                x if x.is_empty() => "top".to_string(),
                x => x,
            };
            let n = seen.entry(slug.clone()).or_insert(0);
            let id = format!("{rel_path}#{slug}-{n}");
            *n += 1;
            let text = piece.trim_end().to_string();
            let hash = hex_hash(&[title.as_bytes(), s.heading.as_bytes(), text.as_bytes()]);
            chunks.push(Chunk {
                id,
                path: rel_path.to_string(),
                title: title.clone(),
                section: s.heading.clone(),
                text,
                hash,
                metadata: metadata.clone(),
                mtime_ms: 0,
            });
        }
    }
    chunks
}

/// Lower-case ASCII words joined by `-` (non-ASCII letters kept as they are).
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in s.chars() {
        if c.is_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.extend(c.to_lowercase());
        } else {
            dash = true;
        }
    }
    out
}

struct Section<'a> {
    level: u8,
    heading: String,
    text: &'a str,
}

/// ATX heading `# Text` up to `max_level`, outside fenced code.
fn heading(line: &str, max_level: u8) -> Option<(u8, String)> {
    let t = line.trim_end();
    let hashes = t.bytes().take_while(|b| *b == b'#').count();
    if hashes == 0 || hashes > max_level as usize {
        return None;
    }
    let rest = &t[hashes..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim();
    Some((hashes as u8, capped_heading(text)))
}

/// The most bytes of a heading or title kept as the note's title or a
/// chunk's section (the line itself stays whole in the chunk's text). Each
/// chunk of a section carries its heading, so an uncapped one-line heading
/// of a megabyte made indexing its note quadratic (issue 49, item 2).
pub const MAX_HEADING_BYTES: usize = 300;

fn capped_heading(text: &str) -> String {
    text[..floor_boundary(text, text.len().min(MAX_HEADING_BYTES))]
        .trim_end()
        .to_string()
}

fn split_sections(body: &str, max_level: u8) -> Vec<Section<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut cur = (0u8, String::new());
    let mut offset = 0;
    let mut fence: Option<&str> = None;
    for line in body.split_inclusive('\n') {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
        } else if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
        } else if let Some((level, text)) = heading(line, max_level) {
            if offset > start {
                out.push(Section {
                    level: cur.0,
                    heading: std::mem::take(&mut cur.1),
                    text: &body[start..offset],
                });
            }
            cur = (level, text);
            start = offset;
        }
        offset += line.len();
    }
    if offset > start || out.is_empty() {
        out.push(Section {
            level: cur.0,
            heading: cur.1,
            text: &body[start..],
        });
    }
    out
}

/// Cuts `text` into pieces of at most about `max` characters at blank lines
/// (a single paragraph longer than `max` is cut at a line, then a char boundary).
fn split_long(text: &str, max: usize) -> Vec<&str> {
    if text.len() <= max {
        return vec![text];
    }
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = floor_boundary(rest, max);
        let window = &rest[..cut];
        if let Some(p) = window.rfind("\n\n").filter(|p| *p > max / 4) {
            cut = p + 2;
        } else if let Some(p) = window.rfind('\n').filter(|p| *p > max / 4) {
            cut = p + 1;
        }
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.trim().is_empty() {
        out.push(rest);
    }
    out
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The `- Key: value` bullets that directly follow the title (LifeOS notes
/// keep their metadata there instead of in frontmatter).
fn inline_metadata(first_section: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut started = false;
    for line in first_section.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            if started && t.is_empty() {
                break;
            }
            continue;
        }
        let Some(item) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) else {
            break;
        };
        let Some((k, v)) = item.split_once(':') else {
            break;
        };
        let key = k.trim().to_lowercase().replace([' ', '-'], "_");
        if key.is_empty() || key.len() > 30 || !key.chars().all(|c| c.is_alphanumeric() || c == '_')
        {
            break;
        }
        started = true;
        out.push((key, Value::String(v.trim().to_string())));
    }
    out
}

/// `tags` becomes a list of bare lower-case tags, `type` lower-case, and a
/// `date` that is a datetime keeps only its day.
/// Most metadata fields kept per note, and the most text one field keeps:
/// every chunk carries the note's metadata, so it must stay small whatever
/// the note holds (a note of thousands of `- Key: value` lines otherwise
/// multiplies into gigabytes).
const MAX_META_FIELDS: usize = 32;
const MAX_META_BYTES: usize = 512;

fn bound_metadata(m: &mut Map<String, Value>) {
    if m.len() > MAX_META_FIELDS {
        let keep: Vec<String> = m.keys().take(MAX_META_FIELDS).cloned().collect();
        m.retain(|k, _| keep.contains(k));
    }
    for v in m.values_mut() {
        bound_value(v);
    }
}

fn bound_value(v: &mut Value) {
    match v {
        Value::String(s) if s.len() > MAX_META_BYTES => {
            let mut end = MAX_META_BYTES;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
        }
        Value::Array(items) => {
            items.truncate(MAX_META_FIELDS);
            items.iter_mut().for_each(bound_value);
        }
        // Nested mappings are rare in notes; kept, but bounded alike.
        Value::Object(o)
            if serde_json::to_string(o).map_or(0, |t| t.len()) > MAX_META_BYTES * 4 =>
        {
            *v = Value::String(String::new());
        }
        _ => {}
    }
}

fn normalise_metadata(m: &mut Map<String, Value>) {
    if let Some(t) = m.get("tags").cloned() {
        let raw: Vec<String> = match t {
            Value::String(s) => s
                .split(|c: char| c == ',' || c.is_whitespace())
                .map(str::to_string)
                .collect(),
            Value::Array(a) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect(),
            other => vec![other.to_string()],
        };
        let tags: Vec<Value> = raw
            .iter()
            .map(|t| t.trim().trim_start_matches('#').to_lowercase())
            .filter(|t| !t.is_empty())
            .map(Value::String)
            .collect();
        m.insert("tags".into(), Value::Array(tags));
    }
    if let Some(Value::String(t)) = m.get_mut("type") {
        *t = t.trim().to_lowercase();
    }
    if let Some(Value::String(d)) = m.get("date") {
        if let Some(day) = date_in(d) {
            m.insert("date".into(), Value::String(day));
        }
    }
}

/// The first `YYYY-MM-DD` in `s`.
pub fn date_in(s: &str) -> Option<String> {
    let b = s.as_bytes();
    (0..b.len().saturating_sub(9)).find_map(|i| {
        let w = &b[i..i + 10];
        let ok = w.iter().enumerate().all(|(j, c)| match j {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
        let bounded = i == 0 || !b[i - 1].is_ascii_digit();
        (ok && bounded && chrono::NaiveDate::parse_from_str(&s[i..i + 10], "%Y-%m-%d").is_ok())
            .then(|| s[i..i + 10].to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_by_heading_with_metadata() {
        let src = "---\ntitle: Front Title\ntags: [Work, '#Urgent']\nversion: 2\n---\n# Apollo\n\n- Type: Task\n- Tags: #ignored\n\nintro\n\n## Plan\n\ntext\n\n```\n# not a heading\n```\n\n## Plan\n\nmore\n";
        let c = chunk_document("Work/a.md", src, &ChunkOptions::default());
        let ids: Vec<&str> = c.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            ["Work/a.md#apollo-0", "Work/a.md#plan-0", "Work/a.md#plan-1"]
        );
        assert_eq!(c[0].title, "Front Title");
        assert_eq!(c[1].section, "Plan");
        assert!(c[1].text.contains("# not a heading"));
        let m = &c[0].metadata;
        assert_eq!(m["tags"], serde_json::json!(["work", "urgent"]));
        assert_eq!(m["type"], "task");
        assert_eq!(m["version"], 2);
    }

    #[test]
    fn title_falls_back_and_dates_come_from_names() {
        let c = chunk_document(
            "Journal/2026-11-15.md",
            "no heading here",
            &ChunkOptions::default(),
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].title, "2026-11-15");
        assert_eq!(c[0].id, "Journal/2026-11-15.md#top-0");
        assert_eq!(c[0].metadata["date"], "2026-11-15");
    }

    #[test]
    fn a_long_heading_is_kept_whole_in_the_text_and_capped_as_the_section() {
        let heading = "word ".repeat(100_000);
        let src = format!("# {heading}\n\nbody\n");
        let c = chunk_document("n.md", &src, &ChunkOptions::default());
        let title = "word ".repeat(60).trim_end().to_string();
        assert!(c.len() > 200, "{}", c.len());
        assert!(c.iter().all(|c| c.title == title && c.section == title));
        let text: String = c.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(text.matches("word").count(), 100_000);
        let fm = format!("---\ntitle: {}\n---\nbody\n", "é".repeat(1000));
        let c = chunk_document("n.md", &fm, &ChunkOptions::default());
        assert_eq!(c[0].title, "é".repeat(150));
    }

    #[test]
    fn long_sections_split_at_paragraphs() {
        let para = "word ".repeat(60);
        let src = format!("# T\n\n{para}\n\n{para}\n\n{para}\n\n{para}\n");
        let opts = ChunkOptions {
            max_chars: 700,
            ..Default::default()
        };
        let c = chunk_document("t.md", &src, &opts);
        assert!(c.len() >= 2, "{}", c.len());
        assert!(c.iter().all(|c| c.text.len() <= 700));
        assert_eq!(c[1].id, "t.md#t-1");
    }

    #[test]
    fn metadata_stays_small_whatever_the_note_holds() {
        let mut src = String::from("# Big\n\n");
        for i in 0..5000 {
            src.push_str(&format!("- Key{i}: {}\n", "v".repeat(2000)));
        }
        src.push_str("\nbody\n");
        for i in 0..200 {
            src.push_str(&format!("\n## Part {i}\n\ntext\n"));
        }
        let chunks = chunk_document("big.md", &src, &ChunkOptions::default());
        assert!(chunks.len() > 100);
        for c in &chunks {
            assert!(c.metadata.len() <= MAX_META_FIELDS);
            let size = serde_json::to_string(&c.metadata).unwrap().len();
            assert!(size <= MAX_META_FIELDS * (MAX_META_BYTES + 64), "{size}");
        }
    }
}
