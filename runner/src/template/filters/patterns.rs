//! Regular expressions with JavaScript's syntax and flags: `match`,
//! `notMatch`, `regexReplace` (`$1`, `$<name>`, `$&` in replacements).

use super::super::values::{list, text, too_big, MAX_TEXT_BYTES};
use super::invalid;
use minijinja::{Error, Value};
use regex::{Captures, Regex, RegexBuilder};

pub(crate) struct JsRegex {
    pub(crate) re: Regex,
    pub(crate) global: bool,
}

/// Compiles a pattern given as `re` or `/re/flags` (flags `g i m s u y`;
/// `g` means "all matches", `u` and `y` are accepted and ignored). Patterns
/// use Rust regex syntax, which matches JavaScript's for everyday use but has
/// no lookaround or backreferences.
pub(crate) fn js_regex(pattern: &str, flags: Option<&str>) -> Result<JsRegex, Error> {
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

pub(super) fn cap_value(caps: &Captures, i: usize) -> Value {
    caps.get(i)
        .map(|m| Value::from(m.as_str()))
        .unwrap_or(Value::from(()))
}

/// `match(pattern, group?)`: the peer's semantics of JavaScript's
/// `String.match`: no match → none; with `g`, the list of all matches; with
/// `group` (a number or a name), that group; else the named groups as a map
/// if the pattern has any; else the first group if there is one; else the
/// whole match.
pub(super) fn match_(value: &Value, pattern: &str, group: Option<Value>) -> Result<Value, Error> {
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
pub(super) fn not_match(value: &Value, pattern: &str) -> Result<bool, Error> {
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
pub(super) fn regex_replace(
    value: &Value,
    pattern: &str,
    repl: &Value,
    flags: Option<&str>,
) -> Result<String, Error> {
    let JsRegex { re, global } = js_regex(pattern, flags)?;
    replace_js(&re, global, &text(value), &text(repl), "regex_replace()")
}

/// JavaScript's `s.replace(re, repl)`: the first match, or every match when
/// `global`; `repl` uses JavaScript's `$` forms. `what` names the caller
/// in the error of a result over [`MAX_TEXT_BYTES`].
pub(crate) fn replace_js(
    re: &Regex,
    global: bool,
    s: &str,
    repl: &str,
    what: &str,
) -> Result<String, Error> {
    let named = re.capture_names().flatten().next().is_some();
    let mut out = String::new();
    let mut last = 0;
    for caps in re
        .captures_iter(s)
        .take(if global { usize::MAX } else { 1 })
    {
        let whole = caps.get(0).expect("group 0 always matches");
        if out.len() + (whole.start() - last) > MAX_TEXT_BYTES {
            return Err(too_big(what));
        }
        out.push_str(&s[last..whole.start()]);
        if !expand_js(&caps, named, s, repl, &mut out, MAX_TEXT_BYTES) {
            return Err(too_big(what));
        }
        last = whole.end();
    }
    if out.len() + (s.len() - last) > MAX_TEXT_BYTES {
        return Err(too_big(what));
    }
    out.push_str(&s[last..]);
    Ok(out)
}
