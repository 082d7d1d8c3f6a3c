//! Nunjucks built-ins whose meaning comes from JavaScript, as the peer's
//! templates run them: `int`/`float` as `parseInt`/`parseFloat`, `string`
//! as `String()`, `urlencode` as `encodeURIComponent`, `escape` without
//! touching `/`, `groupby` as an object in first-seen key order, the
//! `joiner()` and `cycler()` globals, and the filters that judge values
//! without a test (`select`, `reject`, `selectattr`, `rejectattr`,
//! `default(x, true)`) judging them as JavaScript does (`[]` is true).

use std::sync::{Arc, Mutex};

use std::borrow::Cow;

use minijinja::value::{from_args, Object, Rest, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use super::js_ops::truthy;
use super::values::{js_join, list, text, Num};

pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_filter("int", int);
    env.add_filter("float", float);
    env.add_filter("string", string);
    env.add_filter("urlencode", urlencode);
    env.add_filter("escape", escape);
    env.add_filter("e", escape);
    env.add_filter("groupby", groupby);
    env.add_filter("select", select);
    env.add_filter("reject", reject);
    env.add_filter("selectattr", selectattr);
    env.add_filter("rejectattr", rejectattr);
    env.add_filter("default", default);
    env.add_filter("d", default);
    env.add_function("joiner", joiner);
    env.add_function("cycler", cycler);
}

/// The text `parseInt`/`parseFloat` read: `String(v)`, leading whitespace off.
fn source(v: &Value) -> String {
    let s = match v.kind() {
        ValueKind::Seq | ValueKind::Iterable => js_join(v),
        ValueKind::Undefined => "undefined".into(),
        ValueKind::None => "null".into(),
        _ => text(v),
    };
    s.trim_start().to_string()
}

/// `parseInt(s, 10)`: an optional sign and the digits that follow.
fn parse_int(s: &str) -> Option<f64> {
    let (sign, rest) = match s.as_bytes().first() {
        Some(b'-') => (-1.0, &s[1..]),
        Some(b'+') => (1.0, &s[1..]),
        _ => (1.0, s),
    };
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    digits.parse::<f64>().ok().map(|n| sign * n)
}

/// `parseFloat(s)`: the longest decimal number at the start.
fn parse_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    if s[i..].starts_with("Infinity") {
        return Some(if b[0] == b'-' {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i > int_start;
    if i < b.len() && b[i] == b'.' {
        let f = i + 1;
        let mut j = f;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > f || digits {
            digits |= j > f;
            i = j;
        }
    }
    if !digits {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let e = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > e {
            i = j;
        }
    }
    s[..i].parse::<f64>().ok()
}

/// `int(default)`: `parseInt(value, 10)`, else the default (undefined
/// without one, which prints nothing).
fn int(value: &Value, default: Option<Value>) -> Value {
    // A number's own digits: parseInt(3.7) is 3.
    let parsed = match value.kind() {
        ValueKind::Number => f64::try_from(value.clone()).ok().map(f64::trunc),
        _ => parse_int(&source(value)),
    };
    parsed.map_or_else(
        || default.unwrap_or(Value::UNDEFINED),
        |n| Num::from_f64_int(n).into_value(),
    )
}

/// `float(default)`: `parseFloat(value)`, else the default (undefined).
fn float(value: &Value, default: Option<Value>) -> Value {
    let parsed = match value.kind() {
        ValueKind::Number => f64::try_from(value.clone()).ok(),
        _ => parse_float(&source(value)),
    };
    parsed.map_or_else(|| default.unwrap_or(Value::UNDEFINED), Value::from)
}

/// `string`: `String(value)`: a list joined with `,`, numbers as
/// JavaScript prints them, none and undefined as nothing.
fn string(value: &Value) -> String {
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable => js_join(value),
        _ => text(value),
    }
}

/// `urlencode`: `encodeURIComponent` of text; a mapping or a list of pairs
/// becomes `k=v&…`, each part encoded.
fn urlencode(value: &Value) -> Result<String, Error> {
    fn enc(s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }
    let pairs: Vec<(Value, Value)> = match value.kind() {
        ValueKind::Map => value
            .try_iter()?
            .map(|k| {
                let v = value.get_item(&k).unwrap_or_default();
                (k, v)
            })
            .collect(),
        ValueKind::Seq | ValueKind::Iterable => value
            .try_iter()?
            .map(|p| {
                (
                    p.get_item_by_index(0).unwrap_or_default(),
                    p.get_item_by_index(1).unwrap_or_default(),
                )
            })
            .collect(),
        _ => return Ok(enc(&text(value))),
    };
    Ok(pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(&text(k)), enc(&text(v))))
        .collect::<Vec<_>>()
        .join("&"))
}

/// `escape`: `&`, `<`, `>`, `"` and `'` as entities (`/` is left alone).
fn escape(value: &Value) -> String {
    let s = text(value);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `groupby(attribute)`: an object of the items by that attribute's value
/// (its text), keys in the order first seen: `{% for key, items in xs |
/// groupby('type') %}` as in Nunjucks.
fn groupby(value: &Value, attribute: &str) -> Result<Value, Error> {
    let mut groups: Vec<(String, Vec<Value>)> = Vec::new();
    for item in value.try_iter()? {
        let mut key = item.clone();
        for part in attribute.split('.') {
            key = match part.parse::<usize>() {
                Ok(i) => key.get_item_by_index(i).unwrap_or_default(),
                Err(_) => key.get_attr(part).unwrap_or_default(),
            };
        }
        let key = if key.is_undefined() {
            "undefined".to_string()
        } else {
            text(&key)
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, items)) => items.push(item),
            None => groups.push((key, vec![item])),
        }
    }
    Ok(Value::from_pairs(
        groups.into_iter().map(|(k, items)| (k, list(items))),
    ))
}

/// `joiner(sep=", ")`: a function that returns nothing the first time it
/// is called and `sep` after.
fn joiner(args: &[Value]) -> Result<Value, Error> {
    let (sep,): (Option<String>,) = from_args(args)?;
    Ok(Value::from_object(Joiner {
        sep: sep.unwrap_or_else(|| ", ".into()),
        used: Mutex::new(false),
    }))
}

#[derive(Debug)]
struct Joiner {
    sep: String,
    used: Mutex<bool>,
}

impl Object for Joiner {
    fn call(self: &Arc<Self>, _state: &mut State, _args: &[Value]) -> Result<Value, Error> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let out = if *used {
            self.sep.clone()
        } else {
            String::new()
        };
        *used = true;
        Ok(Value::from(out))
    }
}

/// `cycler(a, b, …)`: `.next()` gives the items in turn, round and round;
/// `.current` is the last given, `.reset()` starts again.
fn cycler(args: &[Value]) -> Result<Value, Error> {
    Ok(Value::from_object(Cycler {
        items: args.to_vec(),
        at: Mutex::new(None),
    }))
}

#[derive(Debug)]
struct Cycler {
    items: Vec<Value>,
    at: Mutex<Option<usize>>,
}

impl Object for Cycler {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "current" => {
                let at = *self.at.lock().unwrap_or_else(|e| e.into_inner());
                Some(
                    at.and_then(|i| self.items.get(i).cloned())
                        .unwrap_or_default(),
                )
            }
            _ => None,
        }
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State,
        method: &str,
        _args: &[Value],
    ) -> Result<Value, Error> {
        let mut at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        match method {
            "next" if self.items.is_empty() => Ok(Value::UNDEFINED),
            "next" => {
                let i = at.map_or(0, |i| (i + 1) % self.items.len());
                *at = Some(i);
                Ok(self.items[i].clone())
            }
            "reset" => {
                *at = None;
                Ok(Value::UNDEFINED)
            }
            _ => Err(Error::new(
                ErrorKind::UnknownMethod,
                format!("a cycler has `next()`, `reset()` and `current`, not `{method}`"),
            )),
        }
    }
}

/// The items of `seq` (or their `attr`) that are truthy (`keep`) or not.
fn by_truth(seq: Value, attr: Option<&str>, keep: bool) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for item in seq.try_iter()? {
        let judged = match attr {
            Some(path) => path
                .split('.')
                .try_fold(item.clone(), |v, part| v.get_attr(part))?,
            None => item.clone(),
        };
        if truthy(&judged) == keep {
            out.push(item);
        }
    }
    Ok(out)
}

/// `select(test?, …)`: without a test, the truthy items.
fn select(
    state: &mut State,
    seq: Value,
    test: Option<Cow<'_, str>>,
    args: Rest<ValueOrKwargs>,
) -> Result<Vec<Value>, Error> {
    match test {
        None => by_truth(seq, None, true),
        test => minijinja::filters::select(state, seq, test, args),
    }
}

/// `reject(test?, …)`: without a test, the falsy items.
fn reject(
    state: &mut State,
    seq: Value,
    test: Option<Cow<'_, str>>,
    args: Rest<ValueOrKwargs>,
) -> Result<Vec<Value>, Error> {
    match test {
        None => by_truth(seq, None, false),
        test => minijinja::filters::reject(state, seq, test, args),
    }
}

/// `selectattr(attr, test?, …)`: without a test, the items whose `attr` is truthy.
fn selectattr(
    state: &mut State,
    seq: Value,
    attr: Cow<'_, str>,
    test: Option<Cow<'_, str>>,
    args: Rest<ValueOrKwargs>,
) -> Result<Vec<Value>, Error> {
    match test {
        None => by_truth(seq, Some(&attr), true),
        test => minijinja::filters::selectattr(state, seq, attr, test, args),
    }
}

/// `rejectattr(attr, test?, …)`: without a test, the items whose `attr` is falsy.
fn rejectattr(
    state: &mut State,
    seq: Value,
    attr: Cow<'_, str>,
    test: Option<Cow<'_, str>>,
    args: Rest<ValueOrKwargs>,
) -> Result<Vec<Value>, Error> {
    match test {
        None => by_truth(seq, Some(&attr), false),
        test => minijinja::filters::rejectattr(state, seq, attr, test, args),
    }
}

/// `default(other = '', boolean = false)`: `other` when the value is
/// undefined, or with `boolean` when it is falsy as JavaScript judges it
/// (`[]` is kept, as in Nunjucks).
fn default(state: &State, value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    match args.get(1) {
        Some(lax) if args.len() == 2 && truthy(lax) => Ok(if truthy(value) {
            value.clone()
        } else {
            args[0].clone()
        }),
        _ => minijinja::filters::default(state, value, args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_int_and_float_read_as_javascript_does() {
        for (s, want) in [
            ("12px", Some(12.0)),
            ("42", Some(42.0)),
            ("1e3", Some(1.0)),
            ("-7.9", Some(-7.0)),
            ("x1", None),
            ("", None),
        ] {
            assert_eq!(parse_int(s), want, "{s}");
        }
        for (s, want) in [
            ("3.7abc", Some(3.7)),
            (".5", Some(0.5)),
            ("1e3x", Some(1000.0)),
            ("1e", Some(1.0)),
            ("5.", Some(5.0)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            (".", None),
            ("abc", None),
        ] {
            assert_eq!(parse_float(s), want, "{s}");
        }
    }
}
