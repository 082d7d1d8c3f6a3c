//! Conversions between `serde_json::Value` and `minijinja::Value`, the text
//! form of values in rendered output, and number coercion shared by filters.

use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr, ValueKind};
use minijinja::{Error, ErrorKind, Output, State, Value};
use serde_json::Value as Json;

/// A list that also answers `.length` (the peer's workflows use the JS
/// property; `|length` works as well). Lists coming from the context and
/// lists returned by our own filters use it.
#[derive(Debug)]
pub(crate) struct List(pub Vec<Value>);

impl Object for List {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        if let Some(idx) = key.as_usize() {
            return self.0.get(idx).cloned();
        }
        match key.as_str() {
            Some("length") => Some(Value::from(self.0.len())),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.len())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }
}

/// The most bytes one text made by our filters and methods may hold.
/// Checked before the text is built: an allocation that fails aborts the
/// process, and a template renders request data (`"x".padStart(1e11)`).
pub(crate) const MAX_TEXT_BYTES: usize = 16 << 20;

/// Refuses to build a text of `bytes` bytes when over [`MAX_TEXT_BYTES`].
pub(crate) fn room_for(what: &str, bytes: usize) -> Result<(), Error> {
    if bytes > MAX_TEXT_BYTES {
        return Err(too_big(what));
    }
    Ok(())
}

/// The error of a text that would pass [`MAX_TEXT_BYTES`].
pub(crate) fn too_big(what: &str) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "{what}: the result would be over the {} MiB one template text may hold",
            MAX_TEXT_BYTES >> 20
        ),
    )
}

/// The most items one list made by our operators may hold: a list that
/// doubles (`{% set l = l + l %}` in a loop) costs one unit of fuel a step,
/// so its growth is checked before it is built, as a text's is.
pub(crate) const MAX_LIST_ITEMS: usize = 1 << 20;

/// Refuses to build a list of `items` items when over [`MAX_LIST_ITEMS`].
pub(crate) fn room_for_items(what: &str, items: usize) -> Result<(), Error> {
    if items > MAX_LIST_ITEMS {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "{what}: the result would be over the {} items one template list may hold",
                MAX_LIST_ITEMS
            ),
        ));
    }
    Ok(())
}

/// Makes a list value (with `.length`).
pub(crate) fn list(items: Vec<Value>) -> Value {
    Value::from_object(List(items))
}

/// Converts JSON into a template value. Integers stay integers, maps keep
/// their order.
pub(crate) fn from_json(v: &Json) -> Value {
    match v {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                Value::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => list(items.iter().map(from_json).collect()),
        Json::Object(map) => Value::from_pairs(map.iter().map(|(k, v)| (k.as_str(), from_json(v)))),
    }
}

/// Converts a template value into JSON. Undefined and none become `null`,
/// integers stay integers, floats stay floats (NaN and infinities become
/// `null`), maps keep their order, iterables become arrays, other objects
/// (functions, macros) become their text.
pub(crate) fn to_json(v: &Value) -> Result<Json, Error> {
    to_json_depth(v, 0)
}

const MAX_DEPTH: usize = 512;

fn to_json_depth(v: &Value, depth: usize) -> Result<Json, Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "value is nested too deeply to convert to JSON",
        ));
    }
    Ok(match v.kind() {
        ValueKind::Undefined | ValueKind::None => Json::Null,
        ValueKind::Bool => Json::Bool(v.is_true()),
        ValueKind::Number => number_to_json(v),
        ValueKind::String | ValueKind::Bytes => {
            Json::String(v.to_str().map(|s| s.to_string()).unwrap_or_default())
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let mut out = Vec::with_capacity(v.len().unwrap_or(0));
            for item in v.try_iter()? {
                out.push(to_json_depth(&item, depth + 1)?);
            }
            Json::Array(out)
        }
        ValueKind::Map => {
            let mut out = serde_json::Map::with_capacity(v.len().unwrap_or(0));
            for (key, item) in map_pairs(v)? {
                let key = match key.as_str() {
                    Some(s) => s.to_string(),
                    None => text(&key),
                };
                out.insert(key, to_json_depth(&item, depth + 1)?);
            }
            Json::Object(out)
        }
        ValueKind::Invalid => {
            // Surfaces the error carried by the value.
            v.try_iter()?;
            return Err(Error::new(ErrorKind::InvalidOperation, "invalid value"));
        }
        _ => Json::String(v.to_string()),
    })
}

/// A number as JSON: integers, and whole floats as integers too (the
/// peer's values are JavaScript numbers: `5.0` is `5`).
fn number_to_json(v: &Value) -> Json {
    if v.is_integer() {
        if let Ok(i) = i64::try_from(v.clone()) {
            return Json::from(i);
        }
        if let Ok(u) = u64::try_from(v.clone()) {
            return Json::from(u);
        }
    }
    f64::try_from(v.clone()).map_or(Json::Null, marktoflow_steps::core::js::number_value)
}

/// A float as JavaScript prints numbers: `5`, `0.1`, `1e+21`, `NaN`.
pub(crate) fn format_float(f: f64) -> String {
    marktoflow_steps::core::js::number_string(f)
}

/// The text of a value as it appears in rendered output: none/undefined are
/// empty, integral floats print without `.0`, lists and maps print as
/// compact JSON, everything else as minijinja prints it.
pub(crate) fn text(v: &Value) -> String {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => String::new(),
        ValueKind::Bool => if v.is_true() { "true" } else { "false" }.to_string(),
        ValueKind::String | ValueKind::Bytes => {
            v.to_str().map(|s| s.to_string()).unwrap_or_default()
        }
        ValueKind::Number if !v.is_integer() => {
            format_float(f64::try_from(v.clone()).unwrap_or(f64::NAN))
        }
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => match to_json(v) {
            Ok(j) => j.to_string(),
            Err(_) => v.to_string(),
        },
        _ => v.to_string(),
    }
}

/// The environment's formatter: writes [`text`] of every emitted value,
/// except that a list inside text is joined with commas, as JavaScript
/// prints it (`Services: {{ ['api', 'web'] }}` is `Services: api,web`).
pub(crate) fn formatter(out: &mut Output, _state: &mut State, v: &Value) -> Result<(), Error> {
    match v.kind() {
        ValueKind::String => out.write_str(v.as_str().unwrap_or_default()),
        ValueKind::Undefined | ValueKind::None => Ok(()),
        ValueKind::Seq | ValueKind::Iterable => out.write_str(&js_join(v)),
        _ => out.write_str(&text(v)),
    }
    .map_err(|_| Error::new(ErrorKind::WriteFailure, "failed to write output"))
}

/// A list as JavaScript's `String(list)`: items joined with `,`, nested
/// lists flattened the same way, none as nothing; a mapping item as compact
/// JSON (JavaScript would print `[object Object]`).
pub(crate) fn js_join(v: &Value) -> String {
    let Ok(items) = v.try_iter() else {
        return text(v);
    };
    let parts: Vec<String> = items
        .map(|item| match item.kind() {
            ValueKind::Seq | ValueKind::Iterable => js_join(&item),
            _ => text(&item),
        })
        .collect();
    parts.join(",")
}

/// A number as filters see it: integers stay integers where possible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    /// An integral float that fits is turned into an integer.
    pub fn from_f64_int(f: f64) -> Num {
        if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 {
            Num::Int(f as i64)
        } else {
            Num::Float(f)
        }
    }

    pub fn into_value(self) -> Value {
        match self {
            Num::Int(i) => Value::from(i),
            Num::Float(f) => Value::from(f),
        }
    }
}

/// Coerces a value to a number like JavaScript's `Number()`, but strictly:
/// numbers as they are, booleans as 0/1, none and blank strings as 0, numeric
/// strings parsed; anything else (undefined, words, lists, maps) is an error.
pub(crate) fn to_num(v: &Value, what: &str) -> Result<Num, Error> {
    match v.kind() {
        ValueKind::Number => {
            if v.is_integer() {
                if let Ok(i) = i64::try_from(v.clone()) {
                    return Ok(Num::Int(i));
                }
            }
            Ok(Num::Float(f64::try_from(v.clone()).unwrap_or(f64::NAN)))
        }
        ValueKind::Bool => Ok(Num::Int(v.is_true() as i64)),
        ValueKind::None => Ok(Num::Int(0)),
        ValueKind::String => {
            let s = v.as_str().unwrap_or_default().trim();
            if s.is_empty() {
                return Ok(Num::Int(0));
            }
            if let Ok(i) = s.parse::<i64>() {
                return Ok(Num::Int(i));
            }
            match s.parse::<f64>() {
                Ok(f)
                    if !s.eq_ignore_ascii_case("nan")
                        && !s.to_ascii_lowercase().contains("inf") =>
                {
                    Ok(Num::Float(f))
                }
                _ => Err(not_a_number(v, what)),
            }
        }
        _ => Err(not_a_number(v, what)),
    }
}

fn not_a_number(v: &Value, what: &str) -> Error {
    let shown = match v.kind() {
        ValueKind::Undefined => "an undefined value".to_string(),
        ValueKind::String => format!("the string {:?}", v.as_str().unwrap_or_default()),
        kind => format!("a {kind}"),
    };
    Error::new(
        ErrorKind::InvalidOperation,
        format!("{what} expects a number, got {shown}"),
    )
}

/// Truthiness of rendered text: empty (after trimming), `false`, `0`,
/// `null`, `none` and `undefined` (any case) are false.
pub fn is_truthy_text(s: &str) -> bool {
    let t = s.trim();
    !(t.is_empty()
        || t == "0"
        || t.eq_ignore_ascii_case("false")
        || t.eq_ignore_ascii_case("null")
        || t.eq_ignore_ascii_case("none")
        || t.eq_ignore_ascii_case("undefined"))
}

/// A map's entries, in JavaScript's key order.
pub(crate) fn map_pairs(v: &Value) -> Result<Vec<(Value, Value)>, Error> {
    let mut out = Vec::with_capacity(v.len().unwrap_or(0));
    for k in v.try_iter()? {
        let item = v.get_item(&k)?;
        out.push((k, item));
    }
    Ok(in_js_order(out))
}

/// Entries of a map in the order JavaScript iterates an object: index keys
/// (`"200"`, or `200` in a dict literal) first, ascending, then the rest as
/// added.
pub(crate) fn in_js_order<T>(pairs: Vec<(Value, T)>) -> Vec<(Value, T)> {
    let texts: Vec<String> = pairs
        .iter()
        .map(|(k, _)| k.as_str().map_or_else(|| k.to_string(), str::to_string))
        .collect();
    match marktoflow_steps::core::js::key_order(texts.iter().map(String::as_str)) {
        None => pairs,
        Some(order) => {
            let mut old: Vec<Option<(Value, T)>> = pairs.into_iter().map(Some).collect();
            order.into_iter().filter_map(|i| old[i].take()).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trip_keeps_types_and_order() {
        let j = json!({"z": 1, "a": 2.5, "m": [true, null, "s", {"k": -3}], "big": u64::MAX});
        let v = from_json(&j);
        assert_eq!(to_json(&v).unwrap(), j);
        let keys: Vec<_> = to_json(&v)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys, ["z", "a", "m", "big"]);
    }

    #[test]
    fn list_has_length() {
        let v = from_json(&json!([1, 2, 3]));
        assert_eq!(v.get_attr("length").unwrap(), Value::from(3));
        assert_eq!(v.get_item(&Value::from(-1)).unwrap(), Value::from(3));
        assert_eq!(v.len(), Some(3));
    }

    #[test]
    fn text_forms() {
        assert_eq!(text(&Value::from(5.0)), "5");
        assert_eq!(text(&Value::from(0.5)), "0.5");
        assert_eq!(text(&Value::from(())), "");
        assert_eq!(text(&Value::UNDEFINED), "");
        assert_eq!(text(&from_json(&json!(["a", 1]))), r#"["a",1]"#);
        assert_eq!(text(&Value::from(true)), "true");
    }

    #[test]
    fn number_coercion() {
        assert_eq!(to_num(&Value::from("42"), "x").unwrap(), Num::Int(42));
        assert_eq!(to_num(&Value::from(" 2.5 "), "x").unwrap(), Num::Float(2.5));
        assert_eq!(to_num(&Value::from(""), "x").unwrap(), Num::Int(0));
        assert_eq!(to_num(&Value::from(true), "x").unwrap(), Num::Int(1));
        assert!(to_num(&Value::from("abc"), "add")
            .unwrap_err()
            .to_string()
            .contains("add expects a number"));
        assert!(to_num(&Value::UNDEFINED, "x").is_err());
    }

    #[test]
    fn text_truthiness() {
        for f in [
            "",
            " ",
            "false",
            "False",
            "0",
            "null",
            "none",
            "None",
            "undefined",
        ] {
            assert!(!is_truthy_text(f), "{f:?}");
        }
        for t in ["true", "1", "yes", "x"] {
            assert!(is_truthy_text(t), "{t:?}");
        }
    }
}
