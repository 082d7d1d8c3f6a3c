//! Mappings: `path`, `keys`, `values`, `entries`, `pick`, `omit`, `merge`,
//! `dictsort`.

use super::super::values::{list, text};
use super::{items, map_pairs, names, split_kwargs};
use minijinja::value::{Rest, ValueKind, ValueOrKwargs};
use minijinja::{Error, ErrorKind, Value};
use std::collections::BTreeSet;

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
pub(super) fn path(value: &Value, p: &str) -> Value {
    lookup_path(value, p)
}

/// `keys`: keys of a map (indexes of a list); `[]` for anything else.
pub(super) fn keys(value: &Value) -> Result<Value, Error> {
    Ok(list(match value.kind() {
        ValueKind::Map => map_pairs(value)?.into_iter().map(|(k, _)| k).collect(),
        ValueKind::Seq | ValueKind::Iterable => (0..items(value)?.len()).map(Value::from).collect(),
        _ => Vec::new(),
    }))
}

/// `values`: values of a map (items of a list); `[]` for anything else.
pub(super) fn values(value: &Value) -> Result<Value, Error> {
    Ok(list(match value.kind() {
        ValueKind::Map => map_pairs(value)?.into_iter().map(|(_, v)| v).collect(),
        ValueKind::Seq | ValueKind::Iterable => items(value)?,
        _ => Vec::new(),
    }))
}

/// `entries`: `[key, value]` pairs of a map (`[index, item]` for a list).
pub(super) fn entries(value: &Value) -> Result<Value, Error> {
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
pub(super) fn pick(value: &Value, keys: Rest<Value>) -> Result<Value, Error> {
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
pub(super) fn omit(value: &Value, keys: Rest<Value>) -> Result<Value, Error> {
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
pub(super) fn merge(value: &Value, others: Rest<Value>) -> Result<Value, Error> {
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
pub(super) fn dictsort(value: &Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
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
