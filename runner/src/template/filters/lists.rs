//! Lists and JSON: `nth`, `count`, `sum`, `unique`, `flatten`, `parse_json`,
//! `to_json`.

use super::super::values::{from_json, list, text, to_json, to_num, Num};
use super::objects::lookup_path;
use super::{invalid, is_list, items, split_kwargs};
use minijinja::value::{Rest, ValueKind, ValueOrKwargs};
use minijinja::{Error, ErrorKind, State, Value};
use std::collections::BTreeSet;

/// `nth(n)`: the n-th item of a list (negative counts from the end;
/// undefined when out of range); a non-list is returned as it is.
pub(super) fn nth(value: &Value, n: i64) -> Result<Value, Error> {
    if !is_list(value) {
        return Ok(value.clone());
    }
    value.get_item(&Value::from(n))
}

/// `count`: the peer's version (replaces minijinja's alias of `length`):
/// length of a list, characters of a text; for a map its numeric `length`,
/// `total` or `count` field if present, else its number of keys; 0 for
/// anything else.
pub(super) fn count(value: &Value) -> Result<Value, Error> {
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

pub(super) fn num_op(
    a: Num,
    b: Num,
    int: fn(i64, i64) -> Option<i64>,
    float: fn(f64, f64) -> f64,
) -> Num {
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
pub(super) fn sum(value: &Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
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
pub(super) fn unique(
    state: &State,
    value: Value,
    args: Rest<ValueOrKwargs>,
) -> Result<Value, Error> {
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
pub(super) fn flatten(value: &Value) -> Result<Value, Error> {
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

/// `slice(n, fill?)`: Nunjucks' version (replaces minijinja's, which refuses
/// a negative count): the items, or the characters of a text, cut into `n`
/// groups, the first ones one longer when they do not divide evenly and the
/// shorter ones padded with `fill`; `n` of 0 or less gives no groups. The
/// arithmetic is JavaScript's, so a fractional `n` cuts as it does there.
pub(super) fn slice(value: &Value, slices: &Value, fill: Option<Value>) -> Result<Value, Error> {
    let text = value.as_str().map(|s| s.chars().collect::<Vec<char>>());
    let all = match &text {
        Some(_) => Vec::new(),
        None => items(value)?,
    };
    let len = text.as_ref().map_or(all.len(), Vec::len) as f64;
    let n = to_num(slices, "slice's count")?.as_f64();
    // NaN too: JavaScript's loop runs while `i < n`.
    if n.is_nan() || n <= 0.0 {
        return Ok(list(Vec::new()));
    }
    // Groups past the items are empty; a count far past them is a mistake,
    // not a request for a million empty lists.
    if n > len + 10_000.0 {
        return Err(invalid(format!(
            "slice({n}) asks for more groups than there are items"
        )));
    }
    let size = (len / n).floor();
    let extra = len % n;
    let bound = |x: f64| (x.trunc().max(0.0).min(len)) as usize;
    let mut offset = 0.0;
    let mut out = Vec::new();
    let mut i = 0.0;
    while i < n {
        let start = offset + i * size;
        if i < extra {
            offset += 1.0;
        }
        let end = offset + (i + 1.0) * size;
        let (a, b) = (bound(start), bound(end).max(bound(start)));
        out.push(match &text {
            Some(chars) => Value::from(chars[a..b].iter().collect::<String>()),
            None => {
                let mut part = all[a..b].to_vec();
                if let Some(f) = fill.as_ref().filter(|f| f.is_true() && i >= extra) {
                    part.push(f.clone());
                }
                list(part)
            }
        });
        i += 1.0;
    }
    Ok(list(out))
}

/// `parse_json`: parses JSON text; none when it is not valid JSON. Lists,
/// maps, numbers and booleans are returned as they are.
pub(super) fn parse_json(value: &Value) -> Value {
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
pub(super) fn to_json_filter(value: &Value, pretty: Option<bool>) -> Result<String, Error> {
    let j = to_json(value)?;
    let out = if pretty.unwrap_or(false) {
        serde_json::to_string_pretty(&j)
    } else {
        serde_json::to_string(&j)
    };
    out.map_err(|e| invalid(format!("to_json: {e}")))
}
