//! Filters the peer's workflows use (Nunjucks names, `packages/core/src/filters/*.ts`
//! in the peer), added on top of minijinja's builtins.
//!
//! Where a name already exists in minijinja (`split`, `round`, `sum`, `min`,
//! `max`, `unique`, `count`, `dictsort`) the peer's semantics win; each such
//! filter says how it differs. Where the peer silently produced `NaN`,
//! `Invalid Date` or `[object Object]`, these filters raise an error instead.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use minijinja::value::{Kwargs, Rest, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, ErrorKind, State, Value};
use regex::{Captures, Regex, RegexBuilder};

use super::dates;
use super::values::{from_json, list, text, to_json, to_num, too_big, Num, MAX_TEXT_BYTES};

/// Names of the filters added here (for "did you mean" hints).
pub(crate) const CUSTOM_FILTERS: &[&str] = &[
    "split",
    "slugify",
    "prefix",
    "suffix",
    "truncate",
    "substring",
    "contains",
    "match",
    "notMatch",
    "not_match",
    "regexReplace",
    "regex_replace",
    "path",
    "keys",
    "values",
    "entries",
    "pick",
    "omit",
    "merge",
    "nth",
    "count",
    "sum",
    "unique",
    "flatten",
    "format_date",
    "add_days",
    "subtract_days",
    "diff_days",
    "parse_json",
    "to_json",
    "is_array",
    "is_object",
    "is_string",
    "is_number",
    "is_empty",
    "is_null",
    "ternary",
    "and",
    "or",
    "not",
    "round",
    "floor",
    "ceil",
    "min",
    "max",
    "add",
    "subtract",
    "multiply",
    "divide",
    "wordcount",
    "striptags",
    "dictsort",
];

/// minijinja's own builtin filters (kept unless listed above).
pub(crate) const BUILTIN_FILTERS: &[&str] = &[
    "safe",
    "escape",
    "e",
    "lower",
    "upper",
    "title",
    "capitalize",
    "replace",
    "length",
    "items",
    "reverse",
    "trim",
    "join",
    "lines",
    "default",
    "d",
    "abs",
    "int",
    "float",
    "attr",
    "first",
    "last",
    "sort",
    "list",
    "string",
    "bool",
    "batch",
    "slice",
    "indent",
    "select",
    "reject",
    "selectattr",
    "rejectattr",
    "map",
    "groupby",
    "chain",
    "zip",
    "pprint",
    "format",
    "tojson",
    "urlencode",
];

pub(crate) fn register(env: &mut Environment<'static>) {
    // strings
    env.add_filter("split", split);
    env.add_filter("slugify", slugify);
    env.add_filter("prefix", prefix);
    env.add_filter("suffix", suffix);
    env.add_filter("truncate", truncate);
    env.add_filter("substring", substring);
    env.add_filter("contains", contains);
    env.add_filter("wordcount", wordcount);
    env.add_filter("striptags", striptags);
    // regex
    env.add_filter("match", match_);
    env.add_filter("notMatch", not_match);
    env.add_filter("not_match", not_match);
    env.add_filter("regexReplace", regex_replace);
    env.add_filter("regex_replace", regex_replace);
    // objects
    env.add_filter("path", path);
    env.add_filter("keys", keys);
    env.add_filter("values", values);
    env.add_filter("entries", entries);
    env.add_filter("pick", pick);
    env.add_filter("omit", omit);
    env.add_filter("merge", merge);
    env.add_filter("dictsort", dictsort);
    // arrays
    env.add_filter("nth", nth);
    env.add_filter("count", count);
    env.add_filter("sum", sum);
    env.add_filter("unique", unique);
    env.add_filter("flatten", flatten);
    // dates
    env.add_filter("format_date", dates::format_date);
    env.add_filter("add_days", dates::add_days);
    env.add_filter("subtract_days", dates::subtract_days);
    env.add_filter("diff_days", dates::diff_days);
    // json
    env.add_filter("parse_json", parse_json);
    env.add_filter("to_json", to_json_filter);
    // type checks
    env.add_filter("is_array", is_array);
    env.add_filter("is_object", is_object);
    env.add_filter("is_string", is_string);
    env.add_filter("is_number", is_number);
    env.add_filter("is_empty", is_empty);
    env.add_filter("is_null", is_null);
    // logic
    env.add_filter("ternary", ternary);
    env.add_filter("and", and);
    env.add_filter("or", or);
    env.add_filter("not", not);
    // math
    env.add_filter("round", round);
    env.add_filter("floor", floor);
    env.add_filter("ceil", ceil);
    env.add_filter("min", min);
    env.add_filter("max", max);
    env.add_filter("add", add);
    env.add_filter("subtract", subtract);
    env.add_filter("multiply", multiply);
    env.add_filter("divide", divide);
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

fn is_list(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
}

fn items(v: &Value) -> Result<Vec<Value>, Error> {
    v.try_iter().map(|it| it.collect())
}

/// Splits trailing keyword arguments off a `Rest` list.
pub(super) fn split_kwargs(mut args: Vec<Value>) -> (Vec<Value>, Option<Kwargs>) {
    if args.last().is_some_and(Value::is_kwargs) {
        let kw = args.pop().and_then(|v| Kwargs::try_from(v).ok());
        (args, kw)
    } else {
        (args, None)
    }
}

/// Arguments given either one by one or as lists (`pick('a', 'b')` or
/// `pick(['a', 'b'])`), as text.
fn names(args: &[Value]) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    for a in args {
        if is_list(a) {
            out.extend(items(a)?.iter().map(text));
        } else {
            out.push(text(a));
        }
    }
    Ok(out)
}

fn map_pairs(v: &Value) -> Result<Vec<(Value, Value)>, Error> {
    let mut out = Vec::with_capacity(v.len().unwrap_or(0));
    for k in v.try_iter()? {
        let item = v.get_item(&k)?;
        out.push((k, item));
    }
    Ok(out)
}

// ---------------------------------------------------------------- strings

/// `split(sep=',', maxsplits?)`: splits the text into a list. Unlike
/// minijinja's `split` the separator defaults to `,` (the peer's default),
/// `''` splits into characters, and none/undefined give `[]`. `maxsplits`
/// (minijinja's) limits the number of splits.
fn split(value: &Value, sep: Option<Value>, maxsplits: Option<i64>) -> Result<Value, Error> {
    if value.is_undefined() || value.is_none() {
        return Ok(list(Vec::new()));
    }
    let s = text(value);
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
fn slugify(value: &Value) -> String {
    let lower = text(value).to_lowercase();
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
    out
}

/// `prefix(p)`: `p` followed by the text.
fn prefix(value: &Value, p: &Value) -> String {
    text(p) + &text(value)
}

/// `suffix(s)`: the text followed by `s`.
fn suffix(value: &Value, s: &Value) -> String {
    text(value) + &text(s)
}

/// `truncate(length=255, ellipsis='...')`: the peer's version (it replaces
/// Nunjucks' builtin): if the text has more than `length` characters, the
/// first `length` characters plus `ellipsis` (so the result can be longer
/// than `length`); never breaks at word boundaries.
fn truncate(value: &Value, length: Option<i64>, ellipsis: Option<Value>) -> String {
    let s = text(value);
    let n = length.unwrap_or(255).max(0) as usize;
    match s.char_indices().nth(n) {
        None => s,
        Some((cut, _)) => {
            let ellipsis = ellipsis.map(|e| text(&e)).unwrap_or_else(|| "...".into());
            format!("{}{}", &s[..cut], ellipsis)
        }
    }
}

fn int_arg(v: &Value, what: &str) -> Result<f64, Error> {
    Ok(to_num(v, what)?.as_f64())
}

/// `substring(start, end?)`: JavaScript's `String.prototype.substring` on
/// characters: indexes are clamped to the text, swapped if `start > end`.
fn substring(value: &Value, start: &Value, end: Option<Value>) -> Result<String, Error> {
    let chars: Vec<char> = text(value).chars().collect();
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
fn contains(value: &Value, x: &Value) -> Result<bool, Error> {
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
fn wordcount(value: &Value) -> usize {
    static WORD: OnceLock<Regex> = OnceLock::new();
    let re = WORD.get_or_init(|| Regex::new(r"\w+").expect("valid regex"));
    re.find_iter(&text(value)).count()
}

/// `striptags(preserve_linebreaks=false)`: Nunjucks' version: removes tags
/// and comments, then collapses whitespace to single spaces (or, preserving
/// line breaks, trims each line and squashes runs of blank lines).
fn striptags(value: &Value, preserve_linebreaks: Option<bool>) -> String {
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

// ---------------------------------------------------------------- regex

struct JsRegex {
    re: Regex,
    global: bool,
}

/// Compiles a pattern given as `re` or `/re/flags` (flags `g i m s u y`;
/// `g` means "all matches", `u` and `y` are accepted and ignored). Patterns
/// use Rust regex syntax, which matches JavaScript's for everyday use but has
/// no lookaround or backreferences.
fn js_regex(pattern: &str, flags: Option<&str>) -> Result<JsRegex, Error> {
    let (body, parsed_flags) = match pattern
        .strip_prefix('/')
        .and_then(|p| p.rfind('/').map(|i| (p, i)))
    {
        Some((p, i)) if i > 0 && p[i + 1..].chars().all(|c| "gimsuyd".contains(c)) => {
            (&p[..i], &p[i + 1..])
        }
        _ => (pattern, ""),
    };
    let flags = flags.unwrap_or(parsed_flags);
    let mut b = RegexBuilder::new(body);
    let mut global = false;
    for f in flags.chars() {
        match f {
            'g' => global = true,
            'i' => {
                b.case_insensitive(true);
            }
            'm' => {
                b.multi_line(true);
            }
            's' => {
                b.dot_matches_new_line(true);
            }
            'u' | 'y' | 'd' => {}
            other => {
                return Err(invalid(format!(
                    "unknown regular expression flag `{other}`"
                )))
            }
        }
    }
    let re = b.build().map_err(|e| {
        let detail = match e {
            regex::Error::Syntax(s) => {
                let last = s.lines().last().unwrap_or_default().trim();
                last.strip_prefix("error: ").unwrap_or(last).to_string()
            }
            other => other.to_string(),
        };
        invalid(format!("invalid regular expression `{body}`: {detail}"))
    })?;
    Ok(JsRegex { re, global })
}

fn cap_value(caps: &Captures, i: usize) -> Value {
    caps.get(i)
        .map(|m| Value::from(m.as_str()))
        .unwrap_or(Value::from(()))
}

/// `match(pattern, group?)`: the peer's semantics of JavaScript's
/// `String.match`: no match → none; with `g`, the list of all matches; with
/// `group` (a number or a name), that group; else the named groups as a map
/// if the pattern has any; else the first group if there is one; else the
/// whole match.
fn match_(value: &Value, pattern: &str, group: Option<Value>) -> Result<Value, Error> {
    let s = text(value);
    let JsRegex { re, global } = js_regex(pattern, None)?;
    if global {
        let all: Vec<Value> = re.find_iter(&s).map(|m| Value::from(m.as_str())).collect();
        return Ok(if all.is_empty() {
            Value::from(())
        } else {
            list(all)
        });
    }
    let Some(caps) = re.captures(&s) else {
        return Ok(Value::from(()));
    };
    if let Some(g) = group.filter(|g| !g.is_undefined() && !g.is_none()) {
        return Ok(match g.as_str() {
            Some(name) => caps
                .name(name)
                .map(|m| Value::from(m.as_str()))
                .unwrap_or(Value::from(())),
            None => match g.as_usize() {
                Some(i) => cap_value(&caps, i),
                None => return Err(invalid("match: group must be a number or a name")),
            },
        });
    }
    let named: Vec<&str> = re.capture_names().flatten().collect();
    if !named.is_empty() {
        return Ok(Value::from_pairs(named.into_iter().map(|n| {
            (
                n,
                caps.name(n)
                    .map(|m| Value::from(m.as_str()))
                    .unwrap_or(Value::from(())),
            )
        })));
    }
    Ok(cap_value(&caps, if caps.len() > 1 { 1 } else { 0 }))
}

/// `notMatch(pattern)` (alias `not_match`): true if the pattern does not match.
fn not_match(value: &Value, pattern: &str) -> Result<bool, Error> {
    Ok(!js_regex(pattern, None)?.re.is_match(&text(value)))
}

/// Expands a JavaScript replacement string (`$$`, `$&`, `` $` ``, `$'`,
/// `$1`…`$99`, and `$<name>` when the pattern has named groups).
/// Returns false, with `dst` left short, when the text would pass `limit`
/// bytes (`` $` `` and `$'` copy the whole text around each match).
fn expand_js(
    caps: &Captures,
    named: bool,
    hay: &str,
    repl: &str,
    dst: &mut String,
    limit: usize,
) -> bool {
    let whole = caps.get(0).expect("group 0 always matches");
    let groups = caps.len() - 1;
    let group = |n: usize| caps.get(n).map(|m| m.as_str()).unwrap_or("");
    let bytes = repl.as_bytes();
    let mut i = 0;
    let mut lit_start = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' || i + 1 >= bytes.len() {
            i += 1;
            continue;
        }
        let next = bytes[i + 1];
        let (consumed, insert): (usize, Option<&str>) = match next {
            b'$' => (2, Some("$")),
            b'&' => (2, Some(whole.as_str())),
            b'`' => (2, Some(&hay[..whole.start()])),
            b'\'' => (2, Some(&hay[whole.end()..])),
            b'<' if named => match repl[i + 2..].find('>') {
                Some(end) => {
                    let name = &repl[i + 2..i + 2 + end];
                    (
                        end + 3,
                        Some(caps.name(name).map(|m| m.as_str()).unwrap_or("")),
                    )
                }
                None => (0, None),
            },
            b'0'..=b'9' => {
                let d1 = (next - b'0') as usize;
                let two = bytes
                    .get(i + 2)
                    .filter(|b| b.is_ascii_digit())
                    .map(|b| d1 * 10 + (b - b'0') as usize);
                match two {
                    Some(n) if (1..=groups).contains(&n) => (3, Some(group(n))),
                    _ if (1..=groups).contains(&d1) => (2, Some(group(d1))),
                    _ => (0, None),
                }
            }
            _ => (0, None),
        };
        match insert {
            Some(text) => {
                if dst.len() + (i - lit_start) + text.len() > limit {
                    return false;
                }
                dst.push_str(&repl[lit_start..i]);
                dst.push_str(text);
                i += consumed;
                lit_start = i;
            }
            None => i += 1,
        }
    }
    if dst.len() + (repl.len() - lit_start) > limit {
        return false;
    }
    dst.push_str(&repl[lit_start..]);
    true
}

/// `regexReplace(pattern, replacement, flags?)` (alias `regex_replace`):
/// replaces the first match, or all with the `g` flag; `flags` overrides
/// flags given in the `/re/flags` form. The replacement uses JavaScript's
/// `$1`, `$<name>`, `$&`, `$$` forms.
fn regex_replace(
    value: &Value,
    pattern: &str,
    repl: &Value,
    flags: Option<&str>,
) -> Result<String, Error> {
    let s = text(value);
    let JsRegex { re, global } = js_regex(pattern, flags)?;
    let repl = text(repl);
    let named = re.capture_names().flatten().next().is_some();
    let mut out = String::new();
    let mut last = 0;
    for caps in re
        .captures_iter(&s)
        .take(if global { usize::MAX } else { 1 })
    {
        let whole = caps.get(0).expect("group 0 always matches");
        if out.len() + (whole.start() - last) > MAX_TEXT_BYTES {
            return Err(too_big("regex_replace()"));
        }
        out.push_str(&s[last..whole.start()]);
        if !expand_js(&caps, named, &s, &repl, &mut out, MAX_TEXT_BYTES) {
            return Err(too_big("regex_replace()"));
        }
        last = whole.end();
    }
    if out.len() + (s.len() - last) > MAX_TEXT_BYTES {
        return Err(too_big("regex_replace()"));
    }
    out.push_str(&s[last..]);
    Ok(out)
}

// ---------------------------------------------------------------- objects

/// Looks up a dotted path (`a.b.0.c`) in a value; undefined when missing.
pub(crate) fn lookup_path(value: &Value, path: &str) -> Value {
    let mut cur = value.clone();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let next = match (cur.kind(), part.parse::<i64>()) {
            (ValueKind::Seq | ValueKind::Iterable, Ok(i)) => cur.get_item(&Value::from(i)),
            (ValueKind::Map | ValueKind::Seq | ValueKind::Iterable | ValueKind::Plain, _) => {
                cur.get_item(&Value::from(part))
            }
            _ => return Value::UNDEFINED,
        };
        match next {
            Ok(v) if !v.is_undefined() => cur = v,
            _ => return Value::UNDEFINED,
        }
    }
    cur
}

/// `path('a.b.0')`: the value at a dotted path, undefined if missing.
fn path(value: &Value, p: &str) -> Value {
    lookup_path(value, p)
}

/// `keys`: keys of a map (indexes of a list); `[]` for anything else.
fn keys(value: &Value) -> Result<Value, Error> {
    Ok(list(match value.kind() {
        ValueKind::Map => value.try_iter()?.collect(),
        ValueKind::Seq | ValueKind::Iterable => (0..items(value)?.len()).map(Value::from).collect(),
        _ => Vec::new(),
    }))
}

/// `values`: values of a map (items of a list); `[]` for anything else.
fn values(value: &Value) -> Result<Value, Error> {
    Ok(list(match value.kind() {
        ValueKind::Map => map_pairs(value)?.into_iter().map(|(_, v)| v).collect(),
        ValueKind::Seq | ValueKind::Iterable => items(value)?,
        _ => Vec::new(),
    }))
}

/// `entries`: `[key, value]` pairs of a map (`[index, item]` for a list).
fn entries(value: &Value) -> Result<Value, Error> {
    Ok(list(match value.kind() {
        ValueKind::Map => map_pairs(value)?
            .into_iter()
            .map(|(k, v)| list(vec![k, v]))
            .collect(),
        ValueKind::Seq | ValueKind::Iterable => items(value)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| list(vec![Value::from(i), v]))
            .collect(),
        _ => Vec::new(),
    }))
}

/// `pick(key, ...)`: a map with only these keys (in the order given; keys
/// may also be passed as one list); `{}` for a non-map.
fn pick(value: &Value, keys: Rest<Value>) -> Result<Value, Error> {
    if value.kind() != ValueKind::Map {
        return Ok(Value::from_pairs(Vec::<(Value, Value)>::new()));
    }
    let mut out = Vec::new();
    for k in names(&keys)? {
        let v = value.get_item(&Value::from(k.as_str()))?;
        if !v.is_undefined() {
            out.push((Value::from(k), v));
        }
    }
    Ok(Value::from_pairs(out))
}

/// `omit(key, ...)`: the map without these keys; `{}` for a non-map.
fn omit(value: &Value, keys: Rest<Value>) -> Result<Value, Error> {
    if value.kind() != ValueKind::Map {
        return Ok(Value::from_pairs(Vec::<(Value, Value)>::new()));
    }
    let drop: BTreeSet<String> = names(&keys)?.into_iter().collect();
    let kept = map_pairs(value)?
        .into_iter()
        .filter(|(k, _)| !drop.contains(&text(k)));
    Ok(Value::from_pairs(kept))
}

/// `merge(obj, ...)`: shallow merge, later maps win; non-map arguments are
/// ignored; `{}` for a non-map input.
fn merge(value: &Value, others: Rest<Value>) -> Result<Value, Error> {
    if value.kind() != ValueKind::Map {
        return Ok(Value::from_pairs(Vec::<(Value, Value)>::new()));
    }
    let mut pairs = map_pairs(value)?;
    for other in others.iter().filter(|o| o.kind() == ValueKind::Map) {
        for (k, v) in map_pairs(other)? {
            match pairs.iter_mut().find(|(ek, _)| *ek == k) {
                Some(slot) => slot.1 = v,
                None => pairs.push((k, v)),
            }
        }
    }
    Ok(Value::from_pairs(pairs))
}

/// `dictsort(case_sensitive=false, by='key')`: accepts Nunjucks' positional
/// arguments as well as minijinja's keyword arguments (`case_sensitive`,
/// `by`, `reverse`); returns `[key, value]` pairs.
fn dictsort(value: &Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    let (pos, kw) = split_kwargs(args.into_values());
    let mut merged: Vec<(String, Value)> = Vec::new();
    if let Some(kw) = &kw {
        for name in kw.args() {
            merged.push((name.to_string(), kw.peek::<Value>(name)?));
        }
    }
    if let Some(cs) = pos.first() {
        merged.push(("case_sensitive".into(), Value::from(cs.is_true())));
    }
    if let Some(by) = pos.get(1) {
        merged.push(("by".into(), by.clone()));
    }
    if pos.len() > 2 {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            "dictsort takes at most 2 positional arguments",
        ));
    }
    minijinja::filters::dictsort(value, merged.into_iter().collect())
}

// ---------------------------------------------------------------- arrays

/// `nth(n)`: the n-th item of a list (negative counts from the end;
/// undefined when out of range); a non-list is returned as it is.
fn nth(value: &Value, n: i64) -> Result<Value, Error> {
    if !is_list(value) {
        return Ok(value.clone());
    }
    value.get_item(&Value::from(n))
}

/// `count`: the peer's version (replaces minijinja's alias of `length`):
/// length of a list, characters of a text; for a map its numeric `length`,
/// `total` or `count` field if present, else its number of keys; 0 for
/// anything else.
fn count(value: &Value) -> Result<Value, Error> {
    Ok(match value.kind() {
        ValueKind::Seq | ValueKind::Iterable => Value::from(items(value)?.len()),
        ValueKind::String => Value::from(value.as_str().unwrap_or_default().chars().count()),
        ValueKind::Map => {
            for field in ["length", "total", "count"] {
                let v = value.get_item(&Value::from(field))?;
                if v.is_number() {
                    return Ok(v);
                }
            }
            Value::from(value.len().unwrap_or(0))
        }
        _ => Value::from(0),
    })
}

fn num_op(a: Num, b: Num, int: fn(i64, i64) -> Option<i64>, float: fn(f64, f64) -> f64) -> Num {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => match int(x, y) {
            Some(r) => Num::Int(r),
            None => Num::Float(float(x as f64, y as f64)),
        },
        _ => Num::Float(float(a.as_f64(), b.as_f64())),
    }
}

/// `sum(attribute?, start=0)`: the peer's version: items are converted to
/// numbers (`"3"` counts as 3; words are an error); a non-list sums to 0.
/// Like minijinja, `attribute` (positional or keyword, dotted paths allowed)
/// sums a field of each item, skipping items without it.
fn sum(value: &Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    let (pos, kw) = split_kwargs(args.into_values());
    let mut attribute: Option<String> = pos.first().filter(|v| !v.is_none()).map(text);
    let mut start = pos.get(1).cloned();
    if let Some(kw) = kw {
        if let Some(a) = kw.get::<Option<String>>("attribute")? {
            attribute = Some(a);
        }
        if let Some(s) = kw.get::<Option<Value>>("start")? {
            start = Some(s);
        }
        kw.assert_all_used()?;
    }
    let mut acc = match start {
        Some(s) => to_num(&s, "sum")?,
        None => Num::Int(0),
    };
    if !is_list(value) {
        return Ok(acc.into_value());
    }
    for item in value.try_iter()? {
        let item = match &attribute {
            Some(a) => lookup_path(&item, a),
            None => item,
        };
        if item.is_undefined() {
            continue;
        }
        acc = num_op(acc, to_num(&item, "sum")?, i64::checked_add, |a, b| a + b);
    }
    Ok(acc.into_value())
}

/// `unique`: the peer's version: keeps the first of equal items, compares
/// case-sensitively and by value (lists and maps too); a non-list gives
/// `[value]`. With keyword arguments (`attribute`, `case_sensitive`)
/// minijinja's `unique` runs instead.
fn unique(state: &State, value: Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    let (pos, kw) = split_kwargs(args.into_values());
    if !pos.is_empty() {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            "unique takes only keyword arguments",
        ));
    }
    if let Some(kw) = kw {
        return minijinja::filters::unique(state, value, kw);
    }
    if !is_list(&value) {
        return Ok(list(vec![value]));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for item in value.try_iter()? {
        if seen.insert(item.clone()) {
            out.push(item);
        }
    }
    Ok(list(out))
}

/// `flatten`: flattens one level of nested lists; a non-list gives `[value]`.
fn flatten(value: &Value) -> Result<Value, Error> {
    if !is_list(value) {
        return Ok(list(vec![value.clone()]));
    }
    let mut out = Vec::new();
    for item in value.try_iter()? {
        if is_list(&item) {
            out.extend(item.try_iter()?);
        } else {
            out.push(item);
        }
    }
    Ok(list(out))
}

// ---------------------------------------------------------------- json

/// `parse_json`: parses JSON text; none when it is not valid JSON. Lists,
/// maps, numbers and booleans are returned as they are.
fn parse_json(value: &Value) -> Value {
    match value.kind() {
        ValueKind::String => {
            match serde_json::from_str::<serde_json::Value>(value.as_str().unwrap_or_default()) {
                Ok(j) => from_json(&j),
                Err(_) => Value::from(()),
            }
        }
        ValueKind::Undefined | ValueKind::None => Value::from(()),
        _ => value.clone(),
    }
}

/// `to_json(pretty=false)`: compact JSON (`JSON.stringify`), or indented by
/// two spaces. Unlike minijinja's `tojson` nothing is HTML-escaped.
/// Undefined gives `null`.
fn to_json_filter(value: &Value, pretty: Option<bool>) -> Result<String, Error> {
    let j = to_json(value)?;
    let out = if pretty.unwrap_or(false) {
        serde_json::to_string_pretty(&j)
    } else {
        serde_json::to_string(&j)
    };
    out.map_err(|e| invalid(format!("to_json: {e}")))
}

// ---------------------------------------------------------------- type checks

/// `is_array`: a list.
fn is_array(value: &Value) -> bool {
    is_list(value)
}

/// `is_object`: a map.
fn is_object(value: &Value) -> bool {
    value.kind() == ValueKind::Map
}

/// `is_string`: a text.
fn is_string(value: &Value) -> bool {
    value.kind() == ValueKind::String
}

/// `is_number`: a number that is not NaN.
fn is_number(value: &Value) -> bool {
    value.is_number()
        && f64::try_from(value.clone())
            .map(|f| !f.is_nan())
            .unwrap_or(true)
}

/// `is_empty`: none, undefined, `''`, `[]` or `{}`.
fn is_empty(value: &Value) -> bool {
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => true,
        ValueKind::String | ValueKind::Seq | ValueKind::Map => value.len() == Some(0),
        ValueKind::Iterable => value
            .try_iter()
            .map(|mut i| i.next().is_none())
            .unwrap_or(false),
        _ => false,
    }
}

/// `is_null`: none or undefined (the peer says false for undefined; JSON
/// has no undefined).
fn is_null(value: &Value) -> bool {
    value.is_none() || value.is_undefined()
}

// ---------------------------------------------------------------- logic

/// `ternary(a, b)`: `a` if the value is truthy, else `b` (truthiness as in
/// conditions: empty lists and maps are false, unlike JavaScript).
fn ternary(value: &Value, a: Value, b: Option<Value>) -> Value {
    if value.is_true() {
        a
    } else {
        b.unwrap_or(Value::UNDEFINED)
    }
}

/// `and(x, ...)`: true if the value and all arguments are truthy.
fn and(value: &Value, rest: Rest<Value>) -> bool {
    value.is_true() && rest.iter().all(Value::is_true)
}

/// `or(x, ...)`: the value if truthy, else the first truthy argument, else none.
fn or(value: &Value, rest: Rest<Value>) -> Value {
    std::iter::once(value)
        .chain(rest.iter())
        .find(|v| v.is_true())
        .cloned()
        .unwrap_or(Value::from(()))
}

/// `not`: true if the value is falsy.
fn not(value: &Value) -> bool {
    !value.is_true()
}

// ---------------------------------------------------------------- math

/// JavaScript's `Math.round`: halves round up (towards +∞).
pub(crate) fn js_round(x: f64) -> f64 {
    let fl = x.floor();
    if x - fl >= 0.5 {
        fl + 1.0
    } else {
        fl
    }
}

/// `round(decimals=0)`: the peer's version (replaces minijinja's): halves
/// round up like JavaScript's `Math.round` (2.5 → 3, -2.5 → -2), and the
/// result is an integer when `decimals` is 0 (minijinja returns a float).
/// The value may be a numeric text.
fn round(value: &Value, decimals: Option<i64>) -> Result<Value, Error> {
    let n = to_num(value, "round")?;
    let d = decimals.unwrap_or(0);
    if let (Num::Int(_), true) = (n, d >= 0) {
        return Ok(n.into_value());
    }
    let m = 10f64.powi(d.clamp(-308, 308) as i32);
    let r = js_round(n.as_f64() * m) / m;
    Ok(if d <= 0 {
        Num::from_f64_int(r)
    } else {
        Num::Float(r)
    }
    .into_value())
}

/// `floor`: largest integer not above the value.
fn floor(value: &Value) -> Result<Value, Error> {
    Ok(match to_num(value, "floor")? {
        Num::Int(i) => Num::Int(i),
        Num::Float(f) => Num::from_f64_int(f.floor()),
    }
    .into_value())
}

/// `ceil`: smallest integer not below the value.
fn ceil(value: &Value) -> Result<Value, Error> {
    Ok(match to_num(value, "ceil")? {
        Num::Int(i) => Num::Int(i),
        Num::Float(f) => Num::from_f64_int(f.ceil()),
    }
    .into_value())
}

fn min_max(
    state: &State,
    value: Value,
    args: Rest<ValueOrKwargs>,
    want_max: bool,
) -> Result<Value, Error> {
    let name = if want_max { "max" } else { "min" };
    let (pos, kw) = split_kwargs(args.into_values());
    if let Some(kw) = kw {
        if !pos.is_empty() {
            return Err(invalid(format!(
                "{name}: positional and keyword arguments cannot be mixed"
            )));
        }
        return if want_max {
            minijinja::filters::max(state, value, kw)
        } else {
            minijinja::filters::min(state, value, kw)
        };
    }
    let all: Vec<Value> = if is_list(&value) && pos.is_empty() {
        items(&value)?
    } else {
        std::iter::once(value).chain(pos).collect()
    };
    if all.is_empty() {
        return Ok(Value::from(()));
    }
    let nums: Result<Vec<Num>, Error> = all.iter().map(|v| to_num(v, name)).collect();
    match nums {
        Ok(nums) => {
            let mut best = nums[0];
            for n in &nums[1..] {
                let better = if want_max {
                    n.as_f64() > best.as_f64()
                } else {
                    n.as_f64() < best.as_f64()
                };
                if better {
                    best = *n;
                }
            }
            Ok(best.into_value())
        }
        Err(e) => {
            if all.iter().all(|v| v.kind() == ValueKind::String) {
                let pick = if want_max {
                    all.iter().max()
                } else {
                    all.iter().min()
                };
                Ok(pick.cloned().unwrap_or(Value::from(())))
            } else {
                Err(e)
            }
        }
    }
}

/// `min(x, ...)`: the peer's version: the smallest number of a list, or of
/// the value and the arguments; numeric texts count as numbers, a list of
/// words gives the alphabetically first; `[]` gives none. With keyword
/// arguments (`attribute`, `case_sensitive`) minijinja's `min` runs instead.
fn min(state: &State, value: Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    min_max(state, value, args, false)
}

/// `max(x, ...)`: like `min`, the largest.
fn max(state: &State, value: Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    min_max(state, value, args, true)
}

/// `add(n)`: value + n (numbers; numeric texts are converted).
fn add(value: &Value, n: &Value) -> Result<Value, Error> {
    Ok(num_op(
        to_num(value, "add")?,
        to_num(n, "add")?,
        i64::checked_add,
        |a, b| a + b,
    )
    .into_value())
}

/// `subtract(n)`: value − n.
fn subtract(value: &Value, n: &Value) -> Result<Value, Error> {
    Ok(num_op(
        to_num(value, "subtract")?,
        to_num(n, "subtract")?,
        i64::checked_sub,
        |a, b| a - b,
    )
    .into_value())
}

/// `multiply(n)`: value × n.
fn multiply(value: &Value, n: &Value) -> Result<Value, Error> {
    Ok(num_op(
        to_num(value, "multiply")?,
        to_num(n, "multiply")?,
        i64::checked_mul,
        |a, b| a * b,
    )
    .into_value())
}

/// `divide(n)`: value ÷ n; an integer when both are integers and it divides
/// evenly; dividing by zero is an error (the peer gave `Infinity`).
fn divide(value: &Value, n: &Value) -> Result<Value, Error> {
    let a = to_num(value, "divide")?;
    let b = to_num(n, "divide")?;
    if b.as_f64() == 0.0 {
        return Err(invalid("divide: division by zero"));
    }
    Ok(match (a, b) {
        (Num::Int(x), Num::Int(y)) if x.checked_rem(y) == Some(0) => Num::Int(x / y),
        _ => Num::Float(a.as_f64() / b.as_f64()),
    }
    .into_value())
}

#[cfg(test)]
mod tests {
    use super::super::Templates;
    use serde_json::{json, Value as Json};

    fn ctx() -> minijinja::Value {
        let vars = json!({
            "s": "Hello, World",
            "nums": [3, 1, 2, 3],
            "strs": ["3", "10", "x"],
            "words": ["pear", "Apple", "fig"],
            "obj": {"b": 2, "a": 1, "c": 3},
            "items": [{"name": "a", "price": 2}, {"name": "b", "price": 3.5}, {"name": "c"}],
            "nested": [[1, 2], [3, [4]], 5],
            "html": "<p>Hello <b>big</b>\n\n\n\n world</p><!-- note -->",
        });
        Templates::context(
            &json!({}),
            vars.as_object().unwrap(),
            &json!({}),
            &json!({}),
        )
    }

    /// Evaluates a single `{{ expr }}` to JSON.
    fn ev(expr: &str) -> Json {
        Templates::new()
            .eval_expr(expr, &ctx())
            .unwrap_or_else(|e| panic!("{expr}: {e:?}"))
    }

    fn ev_err(expr: &str) -> String {
        Templates::new()
            .eval_expr(expr, &ctx())
            .expect_err(expr)
            .message
    }

    #[test]
    fn string_filters() {
        assert_eq!(ev("'a,b,c' | split"), json!(["a", "b", "c"]));
        assert_eq!(ev("'a/b' | split('/') | first"), json!("a"));
        assert_eq!(ev("'abc' | split('')"), json!(["a", "b", "c"]));
        assert_eq!(ev("'a-b-c' | split('-', 1)"), json!(["a", "b-c"]));
        assert_eq!(ev("missing | split"), json!([]));
        assert_eq!(ev("('a,b' | split).length"), json!(2));
        assert_eq!(
            ev("'  Hello, World! 2024 ' | slugify"),
            json!("hello-world-2024")
        );
        assert_eq!(ev("'x' | prefix('pre-')"), json!("pre-x"));
        assert_eq!(ev("'x' | suffix('.md')"), json!("x.md"));
        assert_eq!(ev("s | truncate(5)"), json!("Hello..."));
        assert_eq!(ev("s | truncate(5, '…')"), json!("Hello…"));
        assert_eq!(ev("s | truncate(50)"), json!("Hello, World"));
        assert_eq!(ev("'héllo' | truncate(2, '')"), json!("hé"));
        assert_eq!(ev("s | substring(7)"), json!("World"));
        assert_eq!(ev("s | substring(0, 5)"), json!("Hello"));
        assert_eq!(ev("s | substring(5, 0)"), json!("Hello"));
        assert_eq!(ev("s | substring(-3, 2)"), json!("He"));
        assert_eq!(ev("s | contains('World')"), json!(true));
        assert_eq!(ev("nums | contains(2)"), json!(true));
        assert_eq!(ev("nums | contains(9)"), json!(false));
        assert_eq!(ev("obj | contains('a')"), json!(true));
        assert_eq!(ev("5 | contains(5)"), json!(false));
        assert_eq!(ev("'one two, three!' | wordcount"), json!(3));
        assert_eq!(ev("'' | wordcount"), json!(0));
        assert_eq!(ev("html | striptags"), json!("Hello big world"));
        assert_eq!(ev("html | striptags(true)"), json!("Hello big\n\nworld"));
    }

    #[test]
    fn regex_filters() {
        assert_eq!(ev(r"'order-1234' | match('\\d+')"), json!("1234"));
        assert_eq!(ev(r"'order-1234' | match('(\\w+)-(\\d+)')"), json!("order"));
        assert_eq!(
            ev(r"'order-1234' | match('(\\w+)-(\\d+)', 2)"),
            json!("1234")
        );
        assert_eq!(
            ev(r"'order-1234' | match('(?<kind>\\w+)-(?<id>\\d+)')"),
            json!({"kind": "order", "id": "1234"})
        );
        assert_eq!(
            ev(r"'order-1234' | match('(?<kind>\\w+)-(?<id>\\d+)', 'id')"),
            json!("1234")
        );
        assert_eq!(ev("'abc' | match('x')"), json!(null));
        assert_eq!(ev("'ABC' | match('/b/i')"), json!("B"));
        assert_eq!(
            ev(r"'a1b22c333' | match('/\\d+/g')"),
            json!(["1", "22", "333"])
        );
        assert_eq!(ev("'abc' | notMatch('x')"), json!(true));
        assert_eq!(ev("'abc' | not_match('b')"), json!(false));
        assert_eq!(ev("'a-b-c' | regexReplace('-', '+')"), json!("a+b-c"));
        assert_eq!(ev("'a-b-c' | regexReplace('-', '+', 'g')"), json!("a+b+c"));
        assert_eq!(ev("'a-B-b' | regexReplace('/b/gi', 'x')"), json!("a-x-x"));
        assert_eq!(
            ev(r"'John Smith' | regexReplace('(\\w+) (\\w+)', '$2, $1')"),
            json!("Smith, John")
        );
        assert_eq!(
            ev(r"'John Smith' | regexReplace('(?<f>\\w+) (?<l>\\w+)', '$<l> $<f> ($&) $$')"),
            json!("Smith John (John Smith) $")
        );
        assert_eq!(ev("'x.y' | regex_replace('/\\\\./g', '_')"), json!("x_y"));
        // A replacement that copies the text around every match grows
        // with the square of its size: refused before it is built.
        let big = "('ab'.repeat(2000000) | regex_replace('/./g', '$`$&$`'))";
        assert!(
            ev_err(big).contains("over the 16 MiB one template text may hold"),
            "{}",
            ev_err(big)
        );
        assert_eq!(
            ev("'abc' | regex_replace('/b/g', '[$`|$&|$\\']')"),
            json!("a[a|b|c]c")
        );
        assert!(ev_err("'x' | match('(')").contains("invalid regular expression"));
        // like the peer, an unknown flag makes `/x/q` a plain pattern
        assert_eq!(ev("'x' | match('/x/q')"), json!(null));
        assert!(
            ev_err("'x' | regexReplace('x', 'y', 'q')").contains("unknown regular expression flag")
        );
    }

    #[test]
    fn object_filters() {
        assert_eq!(ev("obj | keys"), json!(["b", "a", "c"]));
        assert_eq!(ev("obj | values"), json!([2, 1, 3]));
        assert_eq!(ev("obj | entries"), json!([["b", 2], ["a", 1], ["c", 3]]));
        assert_eq!(ev("'x' | keys"), json!([]));
        assert_eq!(ev("['p', 'q'] | keys"), json!([0, 1]));
        assert_eq!(ev("obj | pick('a', 'c')"), json!({"a": 1, "c": 3}));
        assert_eq!(ev("obj | pick(['c', 'zz'])"), json!({"c": 3}));
        assert_eq!(ev("obj | omit('a')"), json!({"b": 2, "c": 3}));
        assert_eq!(
            ev("obj | merge({'a': 10, 'd': 4}, 5)"),
            json!({"b": 2, "a": 10, "c": 3, "d": 4})
        );
        assert_eq!(ev("5 | merge({'a': 1})"), json!({}));
        assert_eq!(ev("items | path('1.price')"), json!(3.5));
        assert_eq!(ev("items | path('9.price')"), json!(null));
        assert_eq!(ev("obj | dictsort"), json!([["a", 1], ["b", 2], ["c", 3]]));
        assert_eq!(
            ev("obj | dictsort(false, 'value')"),
            json!([["a", 1], ["b", 2], ["c", 3]])
        );
        assert_eq!(
            ev("obj | dictsort(by='value', reverse=true)"),
            json!([["c", 3], ["b", 2], ["a", 1]])
        );
    }

    #[test]
    fn array_filters() {
        assert_eq!(ev("nums | nth(1)"), json!(1));
        assert_eq!(ev("nums | nth(-1)"), json!(3));
        assert_eq!(ev("nums | nth(10)"), json!(null));
        assert_eq!(ev("'abc' | nth(0)"), json!("abc"));
        assert_eq!(ev("nums | count"), json!(4));
        assert_eq!(ev("'héllo' | count"), json!(5));
        assert_eq!(ev("obj | count"), json!(3));
        assert_eq!(ev("{'total': 42, 'x': 1} | count"), json!(42));
        assert_eq!(ev("5 | count"), json!(0));
        assert_eq!(ev("nums | sum"), json!(9));
        assert_eq!(ev("['1', 2.5] | sum"), json!(3.5));
        assert_eq!(ev("items | sum(attribute='price')"), json!(5.5));
        assert_eq!(ev("items | sum('price', 10)"), json!(15.5));
        assert_eq!(ev("'x' | sum"), json!(0));
        assert!(ev_err("strs | sum").contains("sum expects a number"));
        assert_eq!(ev("nums | unique"), json!([3, 1, 2]));
        assert_eq!(ev("['a', 'A', 'a'] | unique"), json!(["a", "A"]));
        assert_eq!(
            ev("['a', 'A', 'a'] | unique(case_sensitive=false)"),
            json!(["a"])
        );
        assert_eq!(
            ev("[[1], [1], {'a': 1}, {'a': 1}] | unique"),
            json!([[1], {"a": 1}])
        );
        assert_eq!(ev("'x' | unique"), json!(["x"]));
        assert_eq!(ev("nested | flatten"), json!([1, 2, 3, [4], 5]));
        assert_eq!(ev("7 | flatten"), json!([7]));
    }

    #[test]
    fn date_filters() {
        assert_eq!(ev("'2024-01-15' | format_date"), json!("2024-01-15"));
        assert_eq!(
            ev("'2024-03-05T07:08:09' | format_date('DD/MM/YYYY HH:mm:ss')"),
            json!("05/03/2024 07:08:09")
        );
        assert_eq!(
            ev("'2024-03-05T07:08' | format_date('YYYY YYYY [MM]')"),
            json!("2024 2024 [03]")
        );
        let ms = 1_705_314_600_000i64;
        let local = chrono::TimeZone::timestamp_millis_opt(&chrono::Local, ms).unwrap();
        assert_eq!(
            ev(&format!("{ms} | format_date('YYYY-MM-DD HH:mm')")),
            json!(local.format("%Y-%m-%d %H:%M").to_string())
        );
        assert_eq!(
            ev("'2024-01-31' | add_days(1) | format_date"),
            json!("2024-02-01")
        );
        assert_eq!(
            ev("'2024-03-01' | subtract_days(1) | format_date"),
            json!("2024-02-29")
        );
        assert_eq!(ev("'2024-01-10T12:00' | diff_days('2024-01-01')"), json!(9));
        assert_eq!(ev("'2024-01-01' | diff_days('2024-01-10')"), json!(-9));
        let clock = std::sync::Arc::new(marktoflow_steps::core::time::FixedClock::at(
            1_705_314_600_000,
        ));
        let v = Templates::new()
            .eval_expr(
                "now() | add_days(2) | diff_days(now())",
                &Templates::clocked(ctx(), clock),
            )
            .unwrap();
        assert_eq!(v, json!(2));
        assert!(ev_err("'soon' | format_date").contains("cannot read \"soon\" as a date"));
        assert!(ev_err("[] | add_days(1)").contains("expected a date"));
    }

    #[test]
    fn json_filters() {
        assert_eq!(
            ev(r#"'{"a": [1, 2.5]}' | parse_json"#),
            json!({"a": [1, 2.5]})
        );
        assert_eq!(ev("'not json' | parse_json"), json!(null));
        assert_eq!(ev("obj | parse_json"), json!({"b": 2, "a": 1, "c": 3}));
        assert_eq!(ev("obj | to_json"), json!(r#"{"b":2,"a":1,"c":3}"#));
        assert_eq!(ev("'<&>' | to_json"), json!(r#""<&>""#));
        assert_eq!(ev("{'a': 1} | to_json(true)"), json!("{\n  \"a\": 1\n}"));
        assert_eq!(ev("missing | to_json"), json!("null"));
    }

    #[test]
    fn type_checks() {
        assert_eq!(ev("nums | is_array"), json!(true));
        assert_eq!(ev("obj | is_array"), json!(false));
        assert_eq!(ev("obj | is_object"), json!(true));
        assert_eq!(ev("nums | is_object"), json!(false));
        assert_eq!(ev("s | is_string"), json!(true));
        assert_eq!(ev("5 | is_string"), json!(false));
        assert_eq!(ev("5.5 | is_number"), json!(true));
        assert_eq!(ev("'5' | is_number"), json!(false));
        assert_eq!(ev("'' | is_empty"), json!(true));
        assert_eq!(ev("[] | is_empty"), json!(true));
        assert_eq!(ev("{} | is_empty"), json!(true));
        assert_eq!(ev("missing | is_empty"), json!(true));
        assert_eq!(ev("0 | is_empty"), json!(false));
        assert_eq!(ev("none | is_null"), json!(true));
        assert_eq!(ev("missing | is_null"), json!(true));
        assert_eq!(ev("0 | is_null"), json!(false));
    }

    #[test]
    fn logic_filters() {
        assert_eq!(ev("true | ternary('yes', 'no')"), json!("yes"));
        assert_eq!(ev("[] | ternary('yes', 'no')"), json!("no"));
        assert_eq!(ev("0 | ternary('yes')"), json!(null));
        assert_eq!(ev("1 | and(true, 'x')"), json!(true));
        assert_eq!(ev("1 | and(true, '')"), json!(false));
        assert_eq!(ev("'' | or(0, 'fallback', 'other')"), json!("fallback"));
        assert_eq!(ev("'' | or(0)"), json!(null));
        assert_eq!(ev("'v' | or('w')"), json!("v"));
        assert_eq!(ev("[] | not"), json!(true));
        assert_eq!(ev("'x' | not"), json!(false));
    }

    #[test]
    fn math_filters() {
        assert_eq!(ev("2.5 | round"), json!(3));
        assert_eq!(ev("-2.5 | round"), json!(-2));
        assert_eq!(ev("1.23456 | round(2)"), json!(1.23));
        assert_eq!(ev("1234 | round(-2)"), json!(1200));
        assert_eq!(ev("'2.4' | round"), json!(2));
        assert_eq!(ev("7 | round(1)"), json!(7));
        assert_eq!(ev("2.7 | floor"), json!(2));
        assert_eq!(ev("-2.2 | floor"), json!(-3));
        assert_eq!(ev("2.1 | ceil"), json!(3));
        assert_eq!(ev("nums | min"), json!(1));
        assert_eq!(ev("nums | max"), json!(3));
        assert_eq!(ev("5 | min(2, 8)"), json!(2));
        assert_eq!(ev("5 | max(2, '8')"), json!(8));
        assert_eq!(ev("['10', '9'] | max"), json!(10));
        assert_eq!(ev("words | min"), json!("Apple"));
        assert_eq!(ev("[] | max"), json!(null));
        assert_eq!(
            ev("items | max(attribute='price')"),
            json!({"name": "b", "price": 3.5})
        );
        assert_eq!(ev("2 | add(3)"), json!(5));
        assert_eq!(ev("'2' | add(0.5)"), json!(2.5));
        assert_eq!(ev("2 | subtract(3)"), json!(-1));
        assert_eq!(ev("4 | multiply(2.5)"), json!(10.0));
        assert_eq!(ev("9 | divide(3)"), json!(3));
        assert_eq!(ev("9 | divide(2)"), json!(4.5));
        assert!(ev_err("1 | divide(0)").contains("division by zero"));
        assert!(ev_err("[1] | add(1)").contains("add expects a number, got a sequence"));
        // minijinja's own int/float stay available
        assert_eq!(ev("'42' | int"), json!(42));
        assert_eq!(ev("'2.5' | float"), json!(2.5));
    }

    #[test]
    fn minijinja_builtins_remain() {
        assert_eq!(
            ev("words | map('upper') | join(',')"),
            json!("PEAR,APPLE,FIG")
        );
        assert_eq!(ev("nums | length"), json!(4));
        assert_eq!(ev("missing | default('d')"), json!("d"));
        assert_eq!(ev("obj | tojson"), json!(r#"{"b": 2, "a": 1, "c": 3}"#));
    }

    #[test]
    fn every_registered_filter_is_listed() {
        // CUSTOM_FILTERS drives "did you mean"; keep it complete.
        for name in super::CUSTOM_FILTERS {
            let src = format!("x | {name}");
            let err = Templates::new().eval_expr(&src, &ctx()).err();
            assert!(
                err.as_ref()
                    .is_none_or(|e| !e.message.contains("unknown filter")),
                "{name}: {err:?}"
            );
        }
    }
}
