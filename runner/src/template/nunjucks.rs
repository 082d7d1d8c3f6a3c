//! Nunjucks built-in filters as the peer's docs write them: the ones
//! minijinja lacks (`dump`, `center`, `nl2br`, `urlize`, `forceescape`,
//! `random`) and `sort`, whose arguments Nunjucks gives by position
//! (`sort(reverse, caseSensitive, attribute)`) where minijinja takes keywords,
//! and `replace`, which takes a regular expression (`r/…/g`) too.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use minijinja::value::{Kwargs, Rest, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, ErrorKind, State, Value};
use regex::Regex;

use super::filters::split_kwargs;
use super::regexp::JsRegExp;
use super::values::{room_for, text, to_json};

/// Names of the filters added here (for "did you mean" hints).
pub(crate) const NUNJUCKS_FILTERS: &[&str] = &[
    "sort",
    "dump",
    "center",
    "nl2br",
    "urlize",
    "forceescape",
    "random",
    "replace",
];

pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_filter("sort", sort);
    env.add_filter("dump", dump);
    env.add_filter("center", center);
    env.add_filter("nl2br", nl2br);
    env.add_filter("urlize", urlize);
    env.add_filter("forceescape", forceescape);
    env.add_filter("random", random);
    env.add_filter("replace", replace);
    // Nunjucks 3.2's tests that minijinja has not: `null` is only null
    // (not undefined), `truthy`/`falsy` are JavaScript's Boolean(v).
    env.add_test("null", |v: &Value| v.is_none());
    env.add_test("truthy", |v: &Value| super::js_ops::truthy(v));
    env.add_test("falsy", |v: &Value| !super::js_ops::truthy(v));
    // `typeof v === 'number'`: a boolean is not one (minijinja says it is).
    env.add_test("number", |v: &Value| {
        v.kind() == minijinja::value::ValueKind::Number
    });
    // Functions and macros are the values of no data kind.
    env.add_test("callable", |v: &Value| {
        v.kind() == minijinja::value::ValueKind::Plain
    });
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

/// `sort(reverse=false, case_sensitive=false, attribute=none)`, by position
/// (Nunjucks) or by keyword (Jinja); minijinja's sort does the work.
fn sort(state: &State, value: Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    const NAMES: [&str; 3] = ["reverse", "case_sensitive", "attribute"];
    let (pos, kw) = split_kwargs(args.into_values());
    if pos.len() > NAMES.len() {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            "sort takes (reverse, case_sensitive, attribute)",
        ));
    }
    let mut pairs: Vec<(&str, Value)> = NAMES.iter().copied().zip(pos).collect();
    if let Some(kw) = kw {
        for name in NAMES {
            if let Some(v) = kw.get::<Option<Value>>(name)? {
                pairs.retain(|(n, _)| *n != name);
                pairs.push((name, v));
            }
        }
        kw.assert_all_used()?;
    }
    // Nunjucks passes `undefined` for arguments it skips; so do we.
    pairs.retain(|(_, v)| !v.is_undefined() && !v.is_none());
    minijinja::filters::sort(state, value, Kwargs::from_iter(pairs))
}

/// `replace(old, new, count?)` as Nunjucks gives it: with a `RegExp`,
/// JavaScript's `s.replace(re, new)`; with a text (or number), its first
/// `count` occurrences (all by default; `count` by keyword too, as Jinja
/// writes it), and an empty `old` puts `new` around every character. A
/// value that is neither text nor number, or an `old` that is neither, is
/// given back unchanged.
fn replace(
    value: &Value,
    old: &Value,
    new: Option<&Value>,
    count: Option<&Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let new = new.map_or_else(|| "undefined".to_string(), text);
    let count = match kwargs.get::<Option<Value>>("count")? {
        Some(c) => Some(c),
        None => count.cloned(),
    };
    kwargs.assert_all_used()?;
    let readable = |v: &Value| matches!(v.kind(), ValueKind::String | ValueKind::Number);
    if !readable(value) {
        return Ok(value.clone());
    }
    let s = text(value);
    if let Some(re) = JsRegExp::of(old) {
        return re.replace(&s, &new, false).map(Value::from);
    }
    if !readable(old) {
        return Ok(value.clone());
    }
    let old = text(old);
    let limit = match count.filter(|c| !c.is_undefined() && !c.is_none()) {
        None => usize::MAX,
        Some(c) => match i64::try_from(c) {
            Ok(n) if n < 0 => usize::MAX,
            Ok(n) => usize::try_from(n).unwrap_or(usize::MAX),
            Err(_) => return Err(invalid("replace: `count` must be a whole number")),
        },
    };
    if old.is_empty() {
        let chars = s.chars().count();
        room_for(
            "replace()",
            s.len().saturating_add(new.len().saturating_mul(chars + 1)),
        )?;
        let mut out = new.clone();
        for c in s.chars() {
            out.push(c);
            out.push_str(&new);
        }
        return Ok(Value::from(out));
    }
    let found = s.matches(old.as_str()).take(limit).count();
    room_for(
        "replace()",
        (s.len() - found * old.len()).saturating_add(found.saturating_mul(new.len())),
    )?;
    Ok(Value::from(s.replacen(old.as_str(), &new, limit)))
}

/// `dump(spaces?)`: JSON, as `JSON.stringify(value, null, spaces)`;
/// undefined prints nothing.
fn dump(value: &Value, spaces: Option<Value>) -> Result<Value, Error> {
    if value.is_undefined() {
        return Ok(Value::from(""));
    }
    let j = to_json(value)?;
    let indent = match &spaces {
        None => 0,
        Some(s) if s.is_none() || s.is_undefined() => 0,
        Some(s) => match s.as_str() {
            // A string indents with itself, as in JavaScript.
            Some(unit) => return Ok(Value::from(pretty(&j, unit.chars().take(10).collect())?)),
            None => i64::try_from(s.clone())
                .map_err(|_| invalid("dump: `spaces` must be a number or a string"))?
                .clamp(0, 10) as usize,
        },
    };
    if indent == 0 {
        return Ok(Value::from(j.to_string()));
    }
    Ok(Value::from(pretty(&j, " ".repeat(indent))?))
}

fn pretty(j: &serde_json::Value, unit: String) -> Result<String, Error> {
    if unit.is_empty() {
        return Ok(j.to_string());
    }
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    serde::Serialize::serialize(j, &mut ser).map_err(|e| invalid(format!("dump: {e}")))?;
    String::from_utf8(out).map_err(|e| invalid(format!("dump: {e}")))
}

/// `center(width=80)`: pads with spaces on both sides, the odd one on the
/// right (as Nunjucks).
fn center(value: &Value, width: Option<usize>) -> Result<Value, Error> {
    let s = text(value);
    let width = width.unwrap_or(80).min(1 << 20);
    let len = s.chars().count();
    if len >= width {
        return Ok(Value::from(s));
    }
    let spaces = width - len;
    let left = spaces / 2;
    let right = spaces - left;
    Ok(Value::from(format!(
        "{}{s}{}",
        " ".repeat(left),
        " ".repeat(right)
    )))
}

/// `nl2br`: every line break becomes `<br />` followed by the break.
fn nl2br(value: &Value) -> Value {
    let s = text(value);
    Value::from(s.replace("\r\n", "\n").replace('\n', "<br />\n"))
}

/// HTML-escapes `& " ' < > \` as Nunjucks does.
pub(crate) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' => out.push_str("&#92;"),
            c => out.push(c),
        }
    }
    out
}

/// `forceescape`: HTML-escapes the text even when it was marked safe.
fn forceescape(value: &Value) -> Value {
    Value::from(html_escape(&text(value)))
}

/// `urlize(length?, nofollow?)`: words that are URLs (`http(s)://…`,
/// `www.…`, a host ending in .com/.org/.net) or e-mail addresses become
/// links; link text is cut to `length` characters. Surrounding brackets and
/// trailing punctuation stay outside the link (Nunjucks drops them).
fn urlize(value: &Value, length: Option<Value>, nofollow: Option<bool>) -> Result<Value, Error> {
    static RES: OnceLock<[Regex; 5]> = OnceLock::new();
    let [punct, email, http, www, tld] = RES.get_or_init(|| {
        [
            Regex::new(r"^(\(|<|&lt;)?(.*?)(\.|,|\)|\n|&gt;)?$").unwrap(),
            Regex::new(r"(?i)^[\w.!#$%&'*+\-/=?^`{|}~]+@[a-z\d\-]+(\.[a-z\d\-]+)+$").unwrap(),
            Regex::new(r"^https?://").unwrap(),
            Regex::new(r"^www\.").unwrap(),
            Regex::new(r"\.(?:org|net|com)(?::|/|$)").unwrap(),
        ]
    });
    let limit = match &length {
        Some(v) if !v.is_none() && !v.is_undefined() => usize::try_from(v.clone())
            .map_err(|_| invalid("urlize: `length` must be a whole number"))?,
        _ => usize::MAX,
    };
    let rel = if nofollow == Some(true) {
        " rel=\"nofollow\""
    } else {
        ""
    };
    let s = text(value);
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while !rest.is_empty() {
        let split = rest
            .find(char::is_whitespace)
            .map(|i| {
                if i == 0 {
                    rest.len() - rest.trim_start().len()
                } else {
                    i
                }
            })
            .unwrap_or(rest.len());
        let (word, tail) = rest.split_at(split);
        rest = tail;
        if word.trim().is_empty() {
            out.push_str(word);
            continue;
        }
        let caps = punct.captures(word);
        let (open, url, close) = match &caps {
            Some(c) => (
                c.get(1).map_or("", |m| m.as_str()),
                c.get(2).map_or(word, |m| m.as_str()),
                c.get(3).map_or("", |m| m.as_str()),
            ),
            None => ("", word, ""),
        };
        let short: String = url.chars().take(limit).collect();
        let link = if http.is_match(url) {
            Some(format!("<a href=\"{url}\"{rel}>{short}</a>"))
        } else if www.is_match(url) {
            Some(format!("<a href=\"http://{url}\"{rel}>{short}</a>"))
        } else if email.is_match(url) {
            Some(format!("<a href=\"mailto:{url}\">{url}</a>"))
        } else if tld.is_match(url) {
            Some(format!("<a href=\"http://{url}\"{rel}>{short}</a>"))
        } else {
            None
        };
        match link {
            Some(l) => {
                out.push_str(open);
                out.push_str(&l);
                out.push_str(close);
            }
            None => out.push_str(word),
        }
    }
    Ok(Value::from(out))
}

/// `random`: one item of a list (a character of a string), chosen at random;
/// none for an empty one.
fn random(value: &Value) -> Result<Value, Error> {
    let items: Vec<Value> = match value.as_str() {
        Some(s) => s.chars().map(|c| Value::from(c.to_string())).collect(),
        None => value
            .try_iter()
            .map_err(|_| invalid("random: expects a list"))?
            .collect(),
    };
    if items.is_empty() {
        return Ok(Value::from(()));
    }
    // The standard library's per-process random hasher keys: no seed to manage.
    let n = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    Ok(items[(n % items.len() as u64) as usize].clone())
}

#[cfg(test)]
mod tests {
    use crate::template::Templates;
    use serde_json::json;

    fn eval(src: &str) -> serde_json::Value {
        let ctx = Templates::context(
            &json!({}),
            json!({"people": [{"n": "a", "age": 30}, {"n": "b", "age": 20}], "words": ["b", "A", "c"]})
                .as_object()
                .unwrap(),
            &json!({}),
            &json!({}),
        );
        Templates::new()
            .render_value(&json!(src), &ctx)
            .unwrap_or_else(|e| panic!("{src}: {e:?}"))
    }

    // Expected values are what nunjucks 3.2.4 renders.
    #[test]
    fn sort_takes_nunjucks_positions_and_jinja_keywords() {
        assert_eq!(eval("{{ [3,1,2] | sort(true) }}"), json!([3, 2, 1]));
        assert_eq!(
            eval("{{ people | sort(false, false, 'age') | map(attribute='n') | list }}"),
            json!(["b", "a"])
        );
        assert_eq!(eval("{{ words | sort }}"), json!(["A", "b", "c"]));
        assert_eq!(
            eval("{{ words | sort(reverse=true) }}"),
            json!(["c", "b", "A"])
        );
        assert_eq!(
            eval("{{ people | sort(true, attribute='age') | map(attribute='n') | list }}"),
            json!(["a", "b"])
        );
    }

    #[test]
    fn dump_is_json_stringify() {
        assert_eq!(
            eval("{{ {'a': 1, 'b': [1, 2]} | dump }}"),
            json!(r#"{"a":1,"b":[1,2]}"#)
        );
        assert_eq!(eval("{{ {'a': 1} | dump(2) }}"), json!("{\n  \"a\": 1\n}"));
        assert_eq!(eval("x{{ 'x' | dump }}"), json!("x\"x\""));
        assert_eq!(eval("x{{ nothing | dump }}"), json!("x"));
    }

    #[test]
    fn center_nl2br_forceescape() {
        assert_eq!(eval("[{{ 'abc' | center(8) }}]"), json!("[  abc   ]"));
        assert_eq!(eval("[{{ 'abc' | center(9) }}]"), json!("[   abc   ]"));
        assert_eq!(eval("{{ 'abc' | center | length }}"), json!(80));
        assert_eq!(
            eval("{{ 'a\nb\r\nc' | nl2br }}"),
            json!("a<br />\nb<br />\nc")
        );
        assert_eq!(
            eval(r#"{{ '<a href="x">&\'' | forceescape }}"#),
            json!("&lt;a href=&quot;x&quot;&gt;&amp;&#39;")
        );
    }

    #[test]
    fn urlize_links_urls_and_mail() {
        assert_eq!(
            eval("{{ 'see http://x.com/a. and www.foo.org, me@ex.com (example.com) no' | urlize }}"),
            json!("see <a href=\"http://x.com/a\">http://x.com/a</a>. and <a href=\"http://www.foo.org\">www.foo.org</a>, <a href=\"mailto:me@ex.com\">me@ex.com</a> (<a href=\"http://example.com\">example.com</a>) no")
        );
        assert_eq!(
            eval("{{ 'http://averyveryverylong.com/path' | urlize(10, true) }}"),
            json!("<a href=\"http://averyveryverylong.com/path\" rel=\"nofollow\">http://ave</a>")
        );
    }

    #[test]
    fn random_picks_an_item() {
        for _ in 0..20 {
            let v = eval("{{ [1, 2, 3] | random }}");
            assert!([json!(1), json!(2), json!(3)].contains(&v), "{v}");
        }
        assert_eq!(eval("{{ [] | random }}"), json!(null));
    }
}
