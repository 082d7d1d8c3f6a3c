//! JavaScript's conversions of JSON values, for the actions whose results
//! the peer (a TypeScript runner) defines by them: `Number(v)`, `String(v)`,
//! and how numbers print.

use serde_json::Value;

/// `Number(v)`, with NaN as None: numbers as they are, booleans 0/1, null
/// 0, a string by JavaScript's numeric grammar (blank is 0; `0x1f`, `1e3`,
/// `Infinity` read; `12px` is not a number), `[]` 0 and `[x]` as `x`'s text;
/// other lists and mappings are not numbers.
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Null => Some(0.0),
        Value::String(s) => number_text(s),
        Value::Array(a) if a.is_empty() => Some(0.0),
        Value::Array(a) if a.len() == 1 => number_text(&string(&a[0])),
        _ => None,
    }
}

/// A string as `Number()` reads it.
fn number_text(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if t.is_empty() {
        return Some(0.0);
    }
    let radix = |p: &str, r: u32| {
        t.strip_prefix(p)
            .or_else(|| t.strip_prefix(&p.to_uppercase()))
            .filter(|d| !d.is_empty())
            .map(|d| u64::from_str_radix(d, r).ok().map(|n| n as f64))
    };
    for (p, r) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(n) = radix(p, r) {
            return n;
        }
    }
    let body = t.trim_start_matches(['+', '-']);
    if body == "Infinity" && t.len() - body.len() <= 1 {
        return Some(if t.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    // Rust reads `inf`, `nan` and the like, JavaScript does not.
    let numeric = t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'));
    if !numeric || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    t.parse::<f64>().ok()
}

/// `String(v)` for a value met in data: numbers as JavaScript prints them,
/// null as `null`, a list as its items' text joined with `,` (null items
/// empty), a mapping as JSON (JavaScript's `[object Object]` says nothing).
pub fn string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), number_string),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Array(a) => a
            .iter()
            .map(|x| {
                if x.is_null() {
                    String::new()
                } else {
                    string(x)
                }
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => v.to_string(),
    }
}

/// A number as JavaScript prints it: `5` not `5.0`, `0.1`, `1e+21`, `1e-7`
/// (fixed from 1e-6 up to 1e21).
pub fn number_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if n == 0.0 {
        return "0".into();
    }
    let a = n.abs();
    if !(1e-6..1e21).contains(&a) {
        // Rust's shortest exponent form, in JavaScript's spelling.
        let e = format!("{n:e}");
        return match e.split_once('e') {
            Some((m, x)) if !x.starts_with('-') => format!("{m}e+{x}"),
            _ => e,
        };
    }
    format!("{n}")
}

/// A computed number as JSON: whole numbers as integers, as JavaScript
/// shows them (`6`, not `6.0`); NaN and infinities, which JSON lacks, as null.
pub fn number_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// Whether JavaScript treats an object's key as an array index, which it
/// iterates before the other keys, ascending: the canonical decimal of
/// 0 ..= 2^32 − 2 (`"10"` is one; `"010"`, `"-1"` and `"1.5"` are not).
pub fn is_index_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 10
        && (k == "0" || !k.starts_with('0'))
        && k.bytes().all(|b| b.is_ascii_digit())
        && k.parse::<u64>().is_ok_and(|n| n < u64::from(u32::MAX))
}

/// The order in which JavaScript iterates an object with these keys (as
/// positions into them): index keys first, ascending, then the others in
/// the order they were added. None when that is the order they are in.
pub fn key_order<'a>(keys: impl Iterator<Item = &'a str> + Clone) -> Option<Vec<usize>> {
    // Most objects have no index key: nothing to collect for them.
    if !keys
        .clone()
        .any(|k| k.starts_with(|c: char| c.is_ascii_digit()))
    {
        return None;
    }
    let keys: Vec<(usize, Option<u64>)> = keys
        .enumerate()
        .map(|(i, k)| (i, is_index_key(k).then(|| k.parse().unwrap_or(0))))
        .collect();
    let in_order = keys.windows(2).all(|w| match (w[0].1, w[1].1) {
        (Some(a), Some(b)) => a < b,
        (None, Some(_)) => false,
        _ => true,
    });
    if in_order {
        return None;
    }
    let mut order = keys;
    // Stable: the other keys keep their places relative to each other.
    order.sort_by_key(|(_, index)| index.map_or((1, 0), |n| (0, n)));
    Some(order.into_iter().map(|(i, _)| i).collect())
}

/// Orders the mappings in `v`, at every depth, as JavaScript iterates
/// objects (see `key_order`): a workflow written for the peer prints,
/// loops over and serialises `{"200": …, "503": …, "404": …}` as
/// `200, 404, 503`.
pub fn order_keys(v: &mut Value) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(order_keys),
        Value::Object(map) => {
            map.values_mut().for_each(order_keys);
            if let Some(order) = key_order(map.keys().map(String::as_str)) {
                let mut old: Vec<Option<(String, Value)>> =
                    std::mem::take(map).into_iter().map(Some).collect();
                for i in order {
                    if let Some((k, x)) = old[i].take() {
                        map.insert(k, x);
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn number_reads_as_javascript_does() {
        for (v, want) in [
            (json!(" 42 "), Some(42.0)),
            (json!(""), Some(0.0)),
            (json!("1e3"), Some(1000.0)),
            (json!("0x1f"), Some(31.0)),
            (json!("-Infinity"), Some(f64::NEG_INFINITY)),
            (json!(".5"), Some(0.5)),
            (json!(null), Some(0.0)),
            (json!(true), Some(1.0)),
            (json!([]), Some(0.0)),
            (json!(["7"]), Some(7.0)),
        ] {
            assert_eq!(number(&v), want, "{v}");
        }
        for v in [
            json!("12px"),
            json!("inf"),
            json!("nan"),
            json!("e5"),
            json!({}),
            json!([1, 2]),
            json!("1_000"),
        ] {
            assert_eq!(number(&v), None, "{v}");
        }
    }

    #[test]
    fn numbers_and_values_print_as_javascript_does() {
        assert_eq!(number_string(5.0), "5");
        assert_eq!(number_string(-0.0), "0");
        assert_eq!(number_string(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(number_string(1e21), "1e+21");
        assert_eq!(number_string(1.5e-8), "1.5e-8");
        assert_eq!(number_string(1e-6), "0.000001");
        assert_eq!(number_string(1e-7), "1e-7");
        assert_eq!(number_string(123456789012.5), "123456789012.5");
        assert_eq!(string(&json!([1, null, "a", [2, 3]])), "1,,a,2,3");
        assert_eq!(string(&json!(2.0)), "2");
        assert_eq!(number_value(6.0), json!(6));
        assert_eq!(number_value(2.5), json!(2.5));
        assert_eq!(number_value(f64::NAN), json!(null));
    }

    #[test]
    fn objects_iterate_index_keys_first_as_javascript_does() {
        for (k, want) in [
            ("0", true),
            ("10", true),
            ("4294967294", true),
            ("4294967295", false),
            ("010", false),
            ("-1", false),
            ("1.5", false),
            ("", false),
            ("a", false),
        ] {
            assert_eq!(is_index_key(k), want, "{k}");
        }
        let mut v = json!({"b": 1, "503": {"z": 1, "2": 2}, "200": 3, "a": 4, "404": 5, "01": 6});
        order_keys(&mut v);
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"200":3,"404":5,"503":{"2":2,"z":1},"b":1,"a":4,"01":6}"#
        );
        assert_eq!(key_order(["1", "2", "x"].into_iter()), None);
    }
}
