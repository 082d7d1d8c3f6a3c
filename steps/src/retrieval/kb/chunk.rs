//! Markdown knowledge bases as files and heading-aware chunks.
//!
//! This is the shared front half of every retrieval index (full-text in
//! `kb.*`, dense vectors elsewhere): [`walk_kb`] lists the notes, and
//! [`chunk_document`] turns one note into [`Chunk`]s with stable ids. The
//! public API here is kept stable because other indexes build on it.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

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

/// Which files of a knowledge base are notes.
#[derive(Debug, Clone, PartialEq)]
pub struct WalkOptions {
    /// File extensions (without the dot, compared case-insensitively).
    pub extensions: Vec<String>,
    /// Honour `.gitignore`, `.ignore` and `.marktoflowignore` files.
    pub respect_ignore_files: bool,
    /// Enter hidden files and directories (`.marktoflow/` is always skipped).
    pub include_hidden: bool,
    pub follow_links: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            extensions: vec!["md".into(), "markdown".into()],
            respect_ignore_files: true,
            include_hidden: false,
            follow_links: false,
        }
    }
}

/// One note found by [`walk_kb`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KbFile {
    pub abs_path: PathBuf,
    /// Relative to the root, with `/` separators.
    pub rel_path: String,
    pub mtime_ms: i64,
    pub size: u64,
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
}

impl KbError {
    pub fn io(path: &Path, e: impl std::fmt::Display) -> Self {
        KbError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

/// Lists the notes under `root`, sorted by relative path.
///
/// Ignore files follow ripgrep's rules (the `ignore` crate's matchers do the
/// pattern work): in each directory `.marktoflowignore` beats `.ignore`
/// beats `.gitignore`, and for each kind the nearest directory's file that
/// has an opinion wins (a `.git` directory marks no boundary: a vault need
/// not be a repository). Hidden entries are skipped unless whitelisted by an
/// ignore file or `include_hidden` is set; `.marktoflow/` never enters.
///
/// Our own walker rather than `ignore::WalkBuilder`: the freshness check of
/// every search walks the whole vault, and stat'ing each entry relative to its
/// open directory (`DirEntry::metadata`) on two threads roughly halves it on
/// 10,000 notes.
pub fn walk_kb(root: &Path, opts: &WalkOptions) -> Result<Vec<KbFile>, KbError> {
    if !root.is_dir() {
        return Err(KbError::NotADirectory(root.display().to_string()));
    }
    let first = DirJob {
        path: root.to_path_buf(),
        rel: String::new(),
        rules: None,
        ancestors: Vec::new(),
    };
    let queue = std::sync::Mutex::new(Queue {
        dirs: vec![first],
        busy: 0,
        error: None,
    });
    let wake = std::sync::Condvar::new();
    let found = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut mine = Vec::new();
                while let Some(job) = next_dir(&queue, &wake) {
                    let done = walk_dir(opts, job, &mut mine);
                    let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                    q.busy -= 1;
                    match done {
                        Ok(subdirs) => q.dirs.extend(subdirs),
                        Err(e) => {
                            q.error.get_or_insert(e);
                        }
                    }
                    wake.notify_all();
                }
                found
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .append(&mut mine);
            });
        }
    });
    if let Some(e) = queue.into_inner().unwrap_or_else(|e| e.into_inner()).error {
        return Err(e);
    }
    let mut out = found.into_inner().unwrap_or_else(|e| e.into_inner());
    out.sort_unstable_by(|a, b| a.rel_path.cmp(&b.rel_path));
    Ok(out)
}

/// Directories waiting to be read, shared by the walking threads.
struct Queue {
    dirs: Vec<DirJob>,
    /// Directories being read now (their subdirectories are still to come).
    busy: usize,
    error: Option<KbError>,
}

struct DirJob {
    path: PathBuf,
    /// Relative path with a trailing `/` (empty at the root).
    rel: String,
    /// The rules in force for this directory's entries, before its own files.
    rules: Option<std::sync::Arc<Rules>>,
    /// Canonical paths above, to stop at symlink loops (only with `follow_links`).
    ancestors: Vec<PathBuf>,
}

/// The next directory to read, or None when the walk is over or failed.
fn next_dir(queue: &std::sync::Mutex<Queue>, wake: &std::sync::Condvar) -> Option<DirJob> {
    let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if q.error.is_some() {
            return None;
        }
        if let Some(job) = q.dirs.pop() {
            q.busy += 1;
            return Some(job);
        }
        if q.busy == 0 {
            return None;
        }
        q = wake.wait(q).unwrap_or_else(|e| e.into_inner());
    }
}

/// The ignore files of one directory, chained to those above it.
struct Rules {
    custom: Option<ignore::gitignore::Gitignore>,
    ignore: Option<ignore::gitignore::Gitignore>,
    git: Option<ignore::gitignore::Gitignore>,
    parent: Option<std::sync::Arc<Rules>>,
}

#[derive(PartialEq)]
enum Verdict {
    Ignore,
    Whitelist,
    Neither,
}

impl Rules {
    fn verdict(&self, path: &Path, is_dir: bool) -> Verdict {
        let of = |m: &Option<ignore::gitignore::Gitignore>| match m {
            Some(g) => match g.matched(path, is_dir) {
                ignore::Match::Ignore(_) => Verdict::Ignore,
                ignore::Match::Whitelist(_) => Verdict::Whitelist,
                ignore::Match::None => Verdict::Neither,
            },
            None => Verdict::Neither,
        };
        let (mut custom, mut ignore, mut git) =
            (Verdict::Neither, Verdict::Neither, Verdict::Neither);
        let mut at = Some(self);
        while let Some(r) = at {
            if custom == Verdict::Neither {
                custom = of(&r.custom);
            }
            if ignore == Verdict::Neither {
                ignore = of(&r.ignore);
            }
            if git == Verdict::Neither {
                git = of(&r.git);
            }
            at = r.parent.as_deref();
        }
        [custom, ignore, git]
            .into_iter()
            .find(|v| *v != Verdict::Neither)
            .unwrap_or(Verdict::Neither)
    }
}

/// Reads one directory: its notes go to `out`, its subdirectories are returned.
fn walk_dir(
    opts: &WalkOptions,
    job: DirJob,
    out: &mut Vec<KbFile>,
) -> Result<Vec<DirJob>, KbError> {
    let entries = std::fs::read_dir(&job.path)
        .and_then(|d| d.collect::<std::io::Result<Vec<_>>>())
        .map_err(|e| KbError::io(&job.path, e))?;
    let rules = if opts.respect_ignore_files {
        dir_rules(&job, &entries)?
    } else {
        None
    };
    let mut subdirs = Vec::new();
    for entry in entries {
        let name = entry.file_name();
        if name == ".marktoflow" {
            continue;
        }
        let mut file_type = entry
            .file_type()
            .map_err(|e| KbError::io(&entry.path(), e))?;
        let path = entry.path();
        let mut meta = None;
        if file_type.is_symlink() {
            if !opts.follow_links {
                continue;
            }
            // A dangling link is not a note.
            let Ok(m) = std::fs::metadata(&path) else {
                continue;
            };
            file_type = m.file_type();
            meta = Some(m);
        }
        let is_dir = file_type.is_dir();
        if !is_dir && !file_type.is_file() {
            continue;
        }
        // Attachments and other non-notes are dropped before any pattern matching.
        let note_ext = Path::new(&name)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| opts.extensions.iter().any(|x| x.eq_ignore_ascii_case(e)));
        if !is_dir && !note_ext {
            continue;
        }
        let verdict = match &rules {
            Some(r) => r.verdict(&path, is_dir),
            None => Verdict::Neither,
        };
        let hidden = name.as_encoded_bytes().first() == Some(&b'.');
        if verdict == Verdict::Ignore
            || (hidden && !opts.include_hidden && verdict != Verdict::Whitelist)
        {
            continue;
        }
        let name = name.to_string_lossy();
        if is_dir {
            let mut ancestors = Vec::new();
            if opts.follow_links {
                let here = std::fs::canonicalize(&path).map_err(|e| KbError::io(&path, e))?;
                if job.ancestors.contains(&here) {
                    continue;
                }
                ancestors = job.ancestors.clone();
                ancestors.push(here);
            }
            subdirs.push(DirJob {
                rel: format!("{}{name}/", job.rel),
                path,
                rules: rules.clone(),
                ancestors,
            });
            continue;
        }
        let meta = match meta {
            Some(m) => m,
            // Relative to the open directory: no path lookup.
            None => entry.metadata().map_err(|e| KbError::io(&path, e))?,
        };
        out.push(KbFile {
            rel_path: format!("{}{name}", job.rel),
            abs_path: path,
            mtime_ms: mtime_ms(&meta),
            size: meta.len(),
        });
    }
    Ok(subdirs)
}

/// The rules for a directory's entries: its own ignore files on top of the
/// inherited ones (no new link in the chain when it has none).
fn dir_rules(
    job: &DirJob,
    entries: &[std::fs::DirEntry],
) -> Result<Option<std::sync::Arc<Rules>>, KbError> {
    let has = |n: &str| entries.iter().any(|e| e.file_name() == n);
    let read = |n: &str| -> Result<Option<ignore::gitignore::Gitignore>, KbError> {
        if !has(n) {
            return Ok(None);
        }
        let file = job.path.join(n);
        let mut b = ignore::gitignore::GitignoreBuilder::new(&job.path);
        if let Some(e) = b.add(&file) {
            return Err(KbError::io(&file, e));
        }
        b.build().map(Some).map_err(|e| KbError::io(&file, e))
    };
    let (custom, ignore, git) = (
        read(".marktoflowignore")?,
        read(".ignore")?,
        read(".gitignore")?,
    );
    if custom.is_none() && ignore.is_none() && git.is_none() {
        return Ok(job.rules.clone());
    }
    Ok(Some(std::sync::Arc::new(Rules {
        custom,
        ignore,
        git,
        parent: job.rules.clone(),
    })))
}

/// Modification time in ms since the epoch (0 when the platform has none).
pub fn mtime_ms(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Splits one note into chunks. `mtime_ms` of the result is 0: the caller,
/// which has stat'ed the file, fills it in.
pub fn chunk_document(rel_path: &str, source: &str, opts: &ChunkOptions) -> Vec<Chunk> {
    let (front, body) = split_frontmatter(source);
    let mut metadata = front;
    let sections = split_sections(body, opts.split_level.clamp(1, 6));
    let stem = rel_path
        .rsplit('/')
        .next()
        .unwrap_or(rel_path)
        .trim_end_matches(".markdown")
        .trim_end_matches(".md");
    let title = match metadata.get("title") {
        Some(Value::String(t)) if !t.trim().is_empty() => t.trim().to_string(),
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

/// FNV-1a 64 over the parts (with a separator), as 16 hex digits. Used to
/// notice changes, not for security.
pub fn hex_hash(parts: &[&[u8]]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0xff;
            h = h.wrapping_mul(0x100000001b3);
        }
        for b in *p {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    format!("{h:016x}")
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

/// YAML frontmatter (`---` … `---` at the very top) as a JSON map, and the rest.
/// Frontmatter that is not a YAML mapping is left in the body.
fn split_frontmatter(source: &str) -> (Map<String, Value>, &str) {
    let src = source.strip_prefix('\u{feff}').unwrap_or(source);
    let Some(rest) = src
        .strip_prefix("---\n")
        .or_else(|| src.strip_prefix("---\r\n"))
    else {
        return (Map::new(), src);
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" || line.trim_end() == "..." {
            let yaml = &rest[..offset];
            let body = &rest[offset + line.len()..];
            return match serde_yaml::from_str::<serde_json::Value>(yaml) {
                Ok(Value::Object(m)) => (m, body),
                Ok(Value::Null) => (Map::new(), body),
                _ => (Map::new(), src),
            };
        }
        offset += line.len();
    }
    (Map::new(), src)
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
    Some((hashes as u8, text.to_string()))
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

    /// The same walk by `ignore::WalkBuilder`, whose rules ours follow.
    fn reference_walk(root: &Path, opts: &WalkOptions) -> Vec<String> {
        let mut b = ignore::WalkBuilder::new(root);
        b.hidden(!opts.include_hidden)
            .follow_links(opts.follow_links)
            .git_ignore(opts.respect_ignore_files)
            .git_exclude(false)
            .git_global(false)
            .ignore(opts.respect_ignore_files)
            .parents(false)
            .require_git(false)
            .filter_entry(|e| e.file_name() != ".marktoflow");
        if opts.respect_ignore_files {
            b.add_custom_ignore_filename(".marktoflowignore");
        }
        let mut out: Vec<String> = b
            .build()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .filter(|e| {
                e.path()
                    .extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| opts.extensions.iter().any(|y| y.eq_ignore_ascii_case(x)))
            })
            .map(|e| {
                let rel = e.path().strip_prefix(root).unwrap();
                rel.to_str()
                    .unwrap()
                    .replace(std::path::MAIN_SEPARATOR, "/")
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn walk_follows_the_ignore_rules_of_ripgrep() {
        let root = std::env::temp_dir().join(format!("mtf-walk-{}", fastrand::u64(..)));
        let files = [
            "a.md",
            "B.MD",
            "c.txt",
            "notes.markdown",
            ".hidden.md",
            ".hid/x.md",
            ".marktoflow/index.md",
            "sub/.marktoflow/x.md",
            "drafts/d.md",
            "drafts/keep.md",
            "sub/tmp/t.md",
            "sub/s.md",
            "sub/secret.md",
            "sub/deep/secret.md",
            "sub/deep/ok.md",
            "repo/.git/HEAD",
            "repo/r.md",
            "repo/build/b.md",
            "repo/inner/build/b.md",
            "logs/l.md",
            "logs/important.md",
            "wl/.shown.md",
        ];
        for f in files {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "# x\n").unwrap();
        }
        let rules = [
            // Nearest file wins, `.marktoflowignore` beats `.gitignore`.
            (
                ".gitignore",
                "drafts/\n*.log\nlogs/*.md\n!logs/important.md\nbuild/\n",
            ),
            (".marktoflowignore", "!drafts/\ndrafts/d.md\n"),
            ("sub/.ignore", "tmp/\nsecret.md\n"),
            // Nearest of a kind wins; across kinds, `.ignore` beats `.gitignore`.
            ("sub/deep/.ignore", "!secret.md\n"),
            ("repo/.gitignore", "!build/\n"),
            ("repo/inner/.gitignore", "/build\n"),
            ("wl/.ignore", "!.shown.md\n"),
        ];
        for (f, text) in rules {
            std::fs::write(root.join(f), text).unwrap();
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("sub"), root.join("linked")).unwrap();
            std::os::unix::fs::symlink(root.join("a.md"), root.join("alias.md")).unwrap();
            std::os::unix::fs::symlink(root.join("gone.md"), root.join("dangling.md")).unwrap();
        }
        let ours = |o: &WalkOptions| -> Vec<String> {
            walk_kb(&root, o)
                .unwrap()
                .into_iter()
                .map(|f| f.rel_path)
                .collect()
        };
        let default = WalkOptions::default();
        let got = ours(&default);
        assert_eq!(got, reference_walk(&root, &default));
        for want in [
            "a.md",
            "drafts/keep.md",
            "logs/important.md",
            "repo/build/b.md",
            "wl/.shown.md",
        ] {
            assert!(
                got.contains(&want.to_string()),
                "{want} missing from {got:?}"
            );
        }
        for gone in [
            "drafts/d.md",
            "sub/tmp/t.md",
            "sub/secret.md",
            "logs/l.md",
            ".hidden.md",
            "alias.md",
            "repo/inner/build/b.md",
        ] {
            assert!(!got.contains(&gone.to_string()), "{gone} walked: {got:?}");
        }
        assert!(got.contains(&"sub/deep/secret.md".to_string()));
        for o in [
            WalkOptions {
                include_hidden: true,
                ..WalkOptions::default()
            },
            WalkOptions {
                respect_ignore_files: false,
                ..WalkOptions::default()
            },
            WalkOptions {
                extensions: vec!["txt".into()],
                ..WalkOptions::default()
            },
        ] {
            assert_eq!(ours(&o), reference_walk(&root, &o), "{o:?}");
        }
        #[cfg(unix)]
        {
            // Links followed (the dangling one skipped), and a loop entered once.
            std::fs::remove_file(root.join("dangling.md")).unwrap();
            let follow = WalkOptions {
                follow_links: true,
                ..WalkOptions::default()
            };
            let got = ours(&follow);
            assert_eq!(got, reference_walk(&root, &follow));
            assert!(
                got.contains(&"linked/deep/ok.md".to_string())
                    && got.contains(&"alias.md".to_string())
            );
            std::os::unix::fs::symlink(root.join("gone.md"), root.join("dangling.md")).unwrap();
            std::os::unix::fs::symlink(&root, root.join("sub/deep/up")).unwrap();
            let got = ours(&follow);
            assert!(!got.contains(&"dangling.md".to_string()));
            assert!(got.iter().all(|p| !p.contains("up/up/")), "{got:?}");
        }
        // A bad pattern names its file.
        std::fs::write(root.join("sub/.ignore"), "ok.md\n[z-a].md\n").unwrap();
        let err = walk_kb(&root, &default).unwrap_err().to_string();
        assert!(err.contains("sub/.ignore"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

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
}
