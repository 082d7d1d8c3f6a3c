//! The peer's data actions over lists: `core.aggregate`, `core.compare`,
//! `core.rename_keys`, `core.limit`, `core.sort`, with its inputs and result
//! shapes. Values are read as JavaScript reads them (`Number()`, `String()`),
//! since that is what the peer's results mean.

use super::Args;
use crate::core::error::{type_name, ActionError};
use crate::core::js;
use serde_json::{json, Map, Value};
use std::cmp::Ordering;

/// `core.aggregate`'s operations.
pub const AGGREGATE_OPERATIONS: &[&str] = &[
    "sum",
    "avg",
    "average",
    "count",
    "min",
    "max",
    "first",
    "last",
    "concat",
    "unique_count",
];

fn list<'a>(a: &'a Args, name: &str) -> Result<&'a Vec<Value>, ActionError> {
    match a.get(name) {
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(a.invalid(name, format!("must be a list, got {}", type_name(other)))),
        None => Err(a.missing(name)),
    }
}

/// An item's `field`, or the item itself without one; None where the item
/// has no such field (JavaScript's undefined).
fn field_value<'v>(item: &'v Value, field: Option<&str>) -> Option<&'v Value> {
    match (field, item) {
        (Some(f), Value::Object(m)) => m.get(f),
        (Some(_), Value::Array(_)) => None,
        _ => Some(item),
    }
}

/// [`field_value`], undefined read as null.
fn field_of<'v>(item: &'v Value, field: Option<&str>) -> &'v Value {
    field_value(item, field).unwrap_or(&Value::Null)
}

pub fn aggregate(a: &Args) -> Result<Value, ActionError> {
    let items = list(a, "input")?;
    let field = a.str("field")?;
    let values: Vec<Option<&Value>> = items.iter().map(|i| field_value(i, field)).collect();
    // `Number(undefined)` is NaN, `Number(null)` 0.
    let numbers: Vec<f64> = values
        .iter()
        .flatten()
        .filter_map(|v| js::number(v))
        .collect();
    let sum = || numbers.iter().sum::<f64>();
    Ok(match a.chosen("operation")? {
        "sum" => js::number_value(sum()),
        "avg" | "average" if numbers.is_empty() => json!(0),
        "avg" | "average" => js::number_value(sum() / numbers.len() as f64),
        "count" => json!(items.len()),
        "min" => numbers
            .iter()
            .copied()
            .reduce(f64::min)
            .map_or(Value::Null, js::number_value),
        "max" => numbers
            .iter()
            .copied()
            .reduce(f64::max)
            .map_or(Value::Null, js::number_value),
        "first" => items.first().cloned().unwrap_or(Value::Null),
        "last" => items.last().cloned().unwrap_or(Value::Null),
        "concat" => {
            let sep = a.str("separator")?.unwrap_or(", ");
            let texts: Vec<String> = values
                .iter()
                .map(|v| {
                    v.filter(|v| !v.is_null())
                        .map(js::string)
                        .unwrap_or_default()
                })
                .collect();
            json!(texts.join(sep))
        }
        "unique_count" => {
            let mut seen: Vec<Option<&Value>> = Vec::new();
            for v in &values {
                if !seen.contains(v) {
                    seen.push(*v);
                }
            }
            json!(seen.len())
        }
        other => return Err(a.invalid("operation", format!("`{other}` is not an operation"))),
    })
}

pub fn compare(a: &Args) -> Result<Value, ActionError> {
    let (one, two) = (list(a, "source1")?, list(a, "source2")?);
    let field = a.required_str("field")?;
    let key = |item: &Value| field_of(item, Some(field)).clone();
    let keys1: Vec<Value> = one.iter().map(key).collect();
    let keys2: Vec<Value> = two.iter().map(key).collect();
    let keep = |items: &[Value], keys: &[Value], other: &[Value], present: bool| -> Vec<Value> {
        items
            .iter()
            .zip(keys)
            .filter(|(_, k)| other.contains(k) == present)
            .map(|(i, _)| i.clone())
            .collect()
    };
    Ok(json!({
        "added": keep(two, &keys2, &keys1, false),
        "removed": keep(one, &keys1, &keys2, false),
        "unchanged": keep(one, &keys1, &keys2, true),
        "total_source1": one.len(),
        "total_source2": two.len(),
    }))
}

pub fn rename_keys(a: &Args) -> Result<Value, ActionError> {
    let mapping = a.mapping("mapping")?.ok_or_else(|| a.missing("mapping"))?;
    let rename = |m: &Map<String, Value>| -> Value {
        let mut out = Map::new();
        for (k, v) in m {
            let new = match mapping.get(k) {
                Some(Value::String(n)) => n.clone(),
                Some(other) if !other.is_null() => js::string(other),
                _ => k.clone(),
            };
            out.insert(new, v.clone());
        }
        Value::Object(out)
    };
    Ok(match a.get("input").unwrap_or(&Value::Null) {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| match i {
                    Value::Object(m) => rename(m),
                    other => other.clone(),
                })
                .collect(),
        ),
        Value::Object(m) => rename(m),
        other => other.clone(),
    })
}

pub fn limit(a: &Args) -> Result<Value, ActionError> {
    let items = list(a, "input")?;
    let count = a.num("count")?.ok_or_else(|| a.missing("count"))?;
    let offset = a.num("offset")?.unwrap_or(0.0);
    // `items.slice(offset, offset + count)`: negative places count from the end.
    let len = items.len() as f64;
    let at = |x: f64| -> usize {
        let x = x.trunc();
        (if x < 0.0 {
            (len + x).max(0.0)
        } else {
            x.min(len)
        }) as usize
    };
    let (start, end) = (at(offset), at(offset + count));
    Ok(Value::Array(if start < end {
        items[start..end].to_vec()
    } else {
        Vec::new()
    }))
}

pub fn sort(a: &Args) -> Result<Value, ActionError> {
    let items = list(a, "input")?;
    let field = a.str("field")?;
    let mut sorted = items.clone();
    stable_sort(&mut sorted, &|x, y| {
        let (x, y) = (field_of(x, field), field_of(y, field));
        match (x, y) {
            (Value::Number(p), Value::Number(q)) => p
                .as_f64()
                .unwrap_or(0.0)
                .partial_cmp(&q.as_f64().unwrap_or(0.0))
                .unwrap_or(Ordering::Equal),
            _ => collate(&text_of(x), &text_of(y)),
        }
    });
    if a.chosen("direction")? == "desc" {
        sorted.reverse();
    }
    Ok(Value::Array(sorted))
}

/// `String(v ?? '')`.
fn text_of(v: &Value) -> String {
    if v.is_null() {
        String::new()
    } else {
        js::string(v)
    }
}

/// `localeCompare` as the default collation orders words: spaces and
/// punctuation before digits before letters, letters without regard to
/// case first (`apple` < `Banana` < `cherry`), then lower case first.
fn collate(x: &str, y: &str) -> Ordering {
    fn class(c: char) -> u8 {
        if c.is_alphabetic() {
            2
        } else if c.is_numeric() {
            1
        } else {
            0
        }
    }
    let key = |s: &str| -> Vec<(u8, String)> {
        s.chars()
            .map(|c| (class(c), base_letter(c).to_lowercase().collect()))
            .collect()
    };
    key(x).cmp(&key(y)).then_with(|| {
        // Then unaccented before accented, lower case before upper case,
        // at the first difference.
        for (p, q) in x.chars().zip(y.chars()) {
            if p != q {
                let accented = |c: char| base_letter(c) != c;
                return accented(p)
                    .cmp(&accented(q))
                    .then(p.is_uppercase().cmp(&q.is_uppercase()));
            }
        }
        Ordering::Equal
    })
}

/// The letter under a Latin accent (`é` → `e`), for the first comparison.
fn base_letter(c: char) -> char {
    const FROM: &str = "àáâãäåçèéêëìíîïñòóôõöùúûüýÿÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝ";
    const TO: &str = "aaaaaaceeeeiiiinooooouuuuyyAAAAAACEEEEIIIINOOOOOUUUUY";
    FROM.chars()
        .position(|f| f == c)
        .and_then(|i| TO.chars().nth(i))
        .unwrap_or(c)
}

/// A stable sort that accepts any comparison: the peer's (numbers against
/// numbers, text otherwise) is not a total order on mixed lists, on which
/// the standard library's sort may panic. Short lists are sorted as V8's
/// TimSort sorts them (the first run, then binary insertion), so a mixed
/// list comes out as in the peer; longer ones by merging.
fn stable_sort(v: &mut [Value], cmp: &dyn Fn(&Value, &Value) -> Ordering) {
    if v.len() < 64 {
        binary_insertion(v, cmp);
    } else {
        merge_sort(v, cmp);
    }
}

fn binary_insertion(v: &mut [Value], cmp: &dyn Fn(&Value, &Value) -> Ordering) {
    let n = v.len();
    if n < 2 {
        return;
    }
    // The leading run: ascending, or strictly descending (then reversed).
    let mut run = 2;
    if cmp(&v[1], &v[0]) == Ordering::Less {
        while run < n && cmp(&v[run], &v[run - 1]) == Ordering::Less {
            run += 1;
        }
        v[..run].reverse();
    } else {
        while run < n && cmp(&v[run], &v[run - 1]) != Ordering::Less {
            run += 1;
        }
    }
    for i in run..n {
        let (mut lo, mut hi) = (0, i);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if cmp(&v[i], &v[mid]) == Ordering::Less {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        v[lo..=i].rotate_right(1);
    }
}

fn merge_sort(v: &mut [Value], cmp: &dyn Fn(&Value, &Value) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let mid = v.len() / 2;
    merge_sort(&mut v[..mid], cmp);
    merge_sort(&mut v[mid..], cmp);
    let mut merged = Vec::with_capacity(v.len());
    let (mut i, mut j) = (0, mid);
    while i < mid && j < v.len() {
        if cmp(&v[j], &v[i]) == Ordering::Less {
            merged.push(v[j].clone());
            j += 1;
        } else {
            merged.push(v[i].clone());
            i += 1;
        }
    }
    merged.extend_from_slice(&v[i..mid]);
    merged.extend_from_slice(&v[j..]);
    v.clone_from_slice(&merged);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collation_orders_words_as_locale_compare_does() {
        let mut words = vec![
            "cherry", "Banana", "apple", "banana", "10", "9", "_x", "Apple",
        ];
        words.sort_by(|a, b| collate(a, b));
        assert_eq!(
            words,
            ["_x", "10", "9", "apple", "Apple", "banana", "Banana", "cherry"]
        );
    }

    #[test]
    fn a_comparison_that_is_not_a_total_order_sorts_without_panicking() {
        let mut v: Vec<Value> = (0..200)
            .map(|i| {
                if i % 3 == 0 {
                    json!(i)
                } else {
                    json!(i.to_string())
                }
            })
            .collect();
        merge_sort(&mut v, &|x, y| match (x, y) {
            (Value::Number(p), Value::Number(q)) => p.as_i64().cmp(&q.as_i64()),
            _ => collate(&js::string(x), &js::string(y)),
        });
        assert_eq!(v.len(), 200);
    }
}
