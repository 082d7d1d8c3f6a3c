//! Text filters: `split`, `slugify`, `prefix`/`suffix`, `truncate`,
//! `substring`, `contains`, `wordcount`, `striptags`, and the case and
//! trim filters (`upper`, `lower`, `title`, `capitalize`, `trim`), which
//! refuse a list or a mapping rather than work on its printed form.

use super::super::values::{list, text, to_num};
use minijinja::value::ValueKind;
use minijinja::{Error, Value};
use regex::Regex;
use std::sync::OnceLock;

/// The text a text filter works on. A list or a mapping is refused: worked
/// on as its printed form (`['a', 'b']`) it would give a wrong result
/// without a word (`names | split(',')` of a list that is split already).
pub(super) fn textual(value: &Value, filter: &str) -> Result<String, Error> {
    let kind = match value.kind() {
        ValueKind::Seq | ValueKind::Iterable => "a list",
        ValueKind::Map => "a mapping",
        _ => return Ok(text(value)),
    };
    let hint = match (filter, kind) {
        ("split", "a list") => ": it is split already",
        (_, "a list") => {
            ": use `map` to apply it to each item (`xs | map('upper')`), or `join` first"
        }
        _ => ": pick a field first (`x.name | upper`)",
    };
    Err(super::invalid(format!(
        "`{filter}` works on text, got {kind}{hint}"
    )))
}

/// `upper`: the text in upper case.
pub(super) fn upper(value: &Value) -> Result<String, Error> {
    Ok(textual(value, "upper")?.to_uppercase())
}

/// `lower`: the text in lower case.
pub(super) fn lower(value: &Value) -> Result<String, Error> {
    Ok(textual(value, "lower")?.to_lowercase())
}

/// `capitalize`: the first character upper case, the rest lower case.
pub(super) fn capitalize(value: &Value) -> Result<String, Error> {
    let s = textual(value, "capitalize")?;
    let mut chars = s.chars();
    Ok(match chars.next() {
        Some(first) => first
            .to_uppercase()
            .chain(chars.flat_map(char::to_lowercase))
            .collect(),
        None => String::new(),
    })
}

/// `title`: each word's first letter upper case, the rest lower case (a
/// word starts after whitespace or one of `-({[<`, as minijinja's).
pub(super) fn title(value: &Value) -> Result<String, Error> {
    let s = textual(value, "title")?;
    let mut out = String::with_capacity(s.len());
    let mut start = true;
    for c in s.chars() {
        if start {
            out.extend(c.to_uppercase());
        } else {
            out.extend(c.to_lowercase());
        }
        // Words split at spaces only, as Nunjucks' `title` splits them.
        start = c == ' ';
    }
    Ok(out)
}

/// `trim(chars?)`: the text without leading and trailing whitespace (or
/// the characters given).
pub(super) fn trim(value: &Value, chars: Option<String>) -> Result<String, Error> {
    let s = textual(value, "trim")?;
    Ok(match chars {
        Some(c) => {
            let set: Vec<char> = c.chars().collect();
            s.trim_matches(|x| set.contains(&x)).to_string()
        }
        None => s.trim().to_string(),
    })
}

/// `split(sep=',', maxsplits?)`: splits the text into a list. Unlike
/// minijinja's `split` the separator defaults to `,` (the peer's default),
/// `''` splits into characters, and none/undefined give `[]`. `maxsplits`
/// (minijinja's) limits the number of splits.
pub(super) fn split(
    value: &Value,
    sep: Option<Value>,
    maxsplits: Option<i64>,
) -> Result<Value, Error> {
    if value.is_undefined() || value.is_none() {
        return Ok(list(Vec::new()));
    }
    let s = textual(value, "split")?;
    let sep = match sep {
        Some(v) if !(v.is_none() || v.is_undefined()) => text(&v),
        _ => ",".to_string(),
    };
    let parts: Vec<Value> = if sep.is_empty() {
        s.chars().map(Value::from).collect()
    } else {
        match maxsplits {
            Some(n) if n >= 0 => s
                .splitn(n as usize + 1, sep.as_str())
                .map(Value::from)
                .collect(),
            _ => s.split(sep.as_str()).map(Value::from).collect(),
        }
    };
    Ok(list(parts))
}

/// `slugify`: lower case, runs of anything but `a-z0-9` become `-`, no `-` at
/// either end (ASCII only, like the peer).
pub(super) fn slugify(value: &Value) -> Result<String, Error> {
    let lower = textual(value, "slugify")?.to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut dash = false;
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c);
        } else {
            dash = true;
        }
    }
    Ok(out)
}

/// `prefix(p)`: `p` followed by the text.
pub(super) fn prefix(value: &Value, p: &Value) -> String {
    text(p) + &text(value)
}

/// `suffix(s)`: the text followed by `s`.
pub(super) fn suffix(value: &Value, s: &Value) -> String {
    text(value) + &text(s)
}

/// `truncate(length=255, ellipsis='...')`: the peer's version (it replaces
/// Nunjucks' builtin): if the text has more than `length` characters, the
/// first `length` characters plus `ellipsis` (so the result can be longer
/// than `length`); never breaks at word boundaries.
pub(super) fn truncate(
    value: &Value,
    length: Option<i64>,
    ellipsis: Option<Value>,
) -> Result<String, Error> {
    let s = textual(value, "truncate")?;
    let n = length.unwrap_or(255).max(0) as usize;
    Ok(match s.char_indices().nth(n) {
        None => s,
        Some((cut, _)) => {
            let ellipsis = ellipsis.map(|e| text(&e)).unwrap_or_else(|| "...".into());
            format!("{}{}", &s[..cut], ellipsis)
        }
    })
}

pub(super) fn int_arg(v: &Value, what: &str) -> Result<f64, Error> {
    Ok(to_num(v, what)?.as_f64())
}

/// `substring(start, end?)`: JavaScript's `String.prototype.substring` on
/// characters: indexes are clamped to the text, swapped if `start > end`.
pub(super) fn substring(value: &Value, start: &Value, end: Option<Value>) -> Result<String, Error> {
    let chars: Vec<char> = textual(value, "substring")?.chars().collect();
    let len = chars.len() as f64;
    let clamp = |f: f64| if f.is_nan() { 0.0 } else { f.trunc().clamp(0.0, len) } as usize;
    let a = clamp(int_arg(start, "substring")?);
    let b = match end {
        Some(e) if !e.is_undefined() => clamp(int_arg(&e, "substring")?),
        _ => chars.len(),
    };
    let (a, b) = if a > b { (b, a) } else { (a, b) };
    Ok(chars[a..b].iter().collect())
}

/// `contains(x)`: substring test for text, membership for lists, key test
/// for maps (an addition: the peer says `false` for maps); otherwise `false`.
pub(super) fn contains(value: &Value, x: &Value) -> Result<bool, Error> {
    Ok(match value.kind() {
        ValueKind::String => value
            .as_str()
            .unwrap_or_default()
            .contains(text(x).as_str()),
        ValueKind::Seq | ValueKind::Iterable => value.try_iter()?.any(|item| &item == x),
        ValueKind::Map => !value.get_item(x)?.is_undefined(),
        _ => false,
    })
}

/// `wordcount`: number of words (`\w+` runs, Unicode-aware). Nunjucks
/// returns null for no words; this returns 0.
pub(super) fn wordcount(value: &Value) -> usize {
    static WORD: OnceLock<Regex> = OnceLock::new();
    let re = WORD.get_or_init(|| Regex::new(r"\w+").expect("valid regex"));
    re.find_iter(&text(value)).count()
}

/// `striptags(preserve_linebreaks=false)`: Nunjucks' version: removes tags
/// and comments, then collapses whitespace to single spaces (or, preserving
/// line breaks, trims each line and squashes runs of blank lines).
pub(super) fn striptags(value: &Value, preserve_linebreaks: Option<bool>) -> String {
    static TAGS: OnceLock<Regex> = OnceLock::new();
    static LINE_EDGES: OnceLock<Regex> = OnceLock::new();
    static SPACES: OnceLock<Regex> = OnceLock::new();
    static BLANKS: OnceLock<Regex> = OnceLock::new();
    static WS: OnceLock<Regex> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        Regex::new(r"(?i)</?([a-z][a-z0-9]*)\b[^>]*>|<!--[\s\S]*?-->").expect("valid regex")
    });
    let s = text(value);
    let stripped = tags.replace_all(&s, "");
    let trimmed = stripped.trim();
    if preserve_linebreaks.unwrap_or(false) {
        let edges = LINE_EDGES.get_or_init(|| Regex::new(r"(?m)^ +| +$").expect("valid regex"));
        let spaces = SPACES.get_or_init(|| Regex::new(r" +").expect("valid regex"));
        let blanks = BLANKS.get_or_init(|| Regex::new(r"\n\n\n+").expect("valid regex"));
        let s = edges.replace_all(trimmed, "");
        let s = spaces.replace_all(&s, " ");
        let s = s.replace("\r\n", "\n");
        blanks.replace_all(&s, "\n\n").into_owned()
    } else {
        let ws = WS.get_or_init(|| Regex::new(r"\s+").expect("valid regex"));
        ws.replace_all(trimmed, " ").into_owned()
    }
}
