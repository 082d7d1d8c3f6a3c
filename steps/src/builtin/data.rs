//! `core.extract`, `core.format`, `core.parse`.

use super::{display, Args};
use crate::core::error::{type_name, ActionError};
use serde_json::{json, Map, Value};

/// The value at a dotted path (`data.users[0].email`, `a.b.0`); None when
/// any part is missing.
/// `core.format`'s `type` values.
pub const FORMAT_TYPES: &[&str] = &["string", "number", "currency", "date", "json"];
/// `core.parse`'s `format` values.
pub const PARSE_FORMATS: &[&str] = &[
    "json",
    "yaml",
    "csv",
    "frontmatter",
    "markdown",
    "url_params",
];

pub fn lookup_path<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    let mut cur = v;
    for part in path_parts(path) {
        cur = match (cur, part) {
            (Value::Object(m), Part::Key(k)) => m.get(k)?,
            (Value::Object(m), Part::Index(i)) => m.get(&i.to_string())?,
            (Value::Array(a), Part::Index(i)) => a.get(i)?,
            (Value::Array(a), Part::Key(k)) => a.get(k.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

#[derive(Debug, PartialEq)]
enum Part<'a> {
    Key(&'a str),
    Index(usize),
}

fn path_parts(path: &str) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        // `users[0][1]` → `users`, 0, 1
        let (head, mut rest) = match seg.find('[') {
            Some(i) => (&seg[..i], &seg[i..]),
            None => (seg, ""),
        };
        if !head.is_empty() {
            out.push(Part::Key(head));
        }
        while let Some(stripped) = rest.strip_prefix('[') {
            let Some(end) = stripped.find(']') else {
                out.push(Part::Key(rest));
                break;
            };
            let inner = stripped[..end].trim_matches(|c| c == '"' || c == '\'');
            out.push(match inner.parse() {
                Ok(i) => Part::Index(i),
                Err(_) => Part::Key(inner),
            });
            rest = &stripped[end + 1..];
        }
    }
    out
}

pub fn extract(a: &Args) -> Result<Value, ActionError> {
    let input = a.get("input").unwrap_or(&Value::Null);
    let path = a.required_str("path")?;
    Ok(lookup_path(input, path)
        .cloned()
        .or_else(|| a.get("default").cloned())
        .unwrap_or(Value::Null))
}

pub fn format(a: &Args) -> Result<Value, ActionError> {
    let value = a.get("value").unwrap_or(&Value::Null);
    let kind = a.chosen("type")?;
    let text = match kind {
        "json" => serde_json::to_string_pretty(value).unwrap_or_default(),
        "string" => format_string(&display(value), a.str("format")?),
        "number" | "currency" => {
            let n = as_number(value).ok_or_else(|| {
                a.invalid("value", format!("`{}` is not a number", display(value)))
            })?;
            let precision = a.num("precision")?.map(|p| p.clamp(0.0, 20.0) as usize);
            if kind == "currency" {
                let code = a.text("currency")?;
                format_currency(n, code, precision.unwrap_or(2))
            } else {
                match (precision, a.bool("grouping")?) {
                    (Some(p), false) => format!("{n:.p$}"),
                    (Some(p), true) => group_thousands(&format!("{n:.p$}")),
                    (None, true) => group_thousands(&number_text(n)),
                    (None, false) => number_text(n),
                }
            }
        }
        "date" => {
            let dt = super::datetime::parse_date(value)
                .ok_or_else(|| a.invalid("value", format!("`{}` is not a date", display(value))))?;
            match a.str("format")? {
                None => dt.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                Some(f) => super::datetime::format_pattern(&dt, f),
            }
        }
        _ => unreachable!("checked by choice"),
    };
    Ok(Value::String(text))
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// Numbers as JavaScript prints them: `3`, not `3.0`.
fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn group_thousands(s: &str) -> String {
    let (sign, rest) = match s.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", s),
    };
    let (int, frac) = match rest.find('.') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}{frac}")
}

fn format_currency(n: f64, code: &str, precision: usize) -> String {
    let symbol = match code.to_ascii_uppercase().as_str() {
        "USD" => "$",
        "EUR" => "€",
        "GBP" => "£",
        "JPY" => "¥",
        "INR" => "₹",
        _ => "",
    };
    let amount = group_thousands(&format!("{:.precision$}", n.abs()));
    let sign = if n < 0.0 { "-" } else { "" };
    if symbol.is_empty() {
        format!("{sign}{amount} {}", code.to_ascii_uppercase())
    } else {
        format!("{sign}{symbol}{amount}")
    }
}

fn format_string(s: &str, how: Option<&str>) -> String {
    match how.map(str::to_ascii_lowercase).as_deref() {
        Some("upper" | "uppercase") => s.to_uppercase(),
        Some("lower" | "lowercase") => s.to_lowercase(),
        Some("title" | "titlecase") => s
            .split(' ')
            .map(|w| {
                let mut c = w.chars();
                match c.next() {
                    Some(f) => f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase(),
                    None => String::new(),
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        Some("capitalize") => {
            let mut c = s.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        }
        Some("trim") => s.trim().to_string(),
        Some("slug") => {
            let mut out = String::new();
            for c in s.chars() {
                if c.is_alphanumeric() {
                    out.extend(c.to_lowercase());
                } else if !out.ends_with('-') && !out.is_empty() {
                    out.push('-');
                }
            }
            out.trim_end_matches('-').to_string()
        }
        _ => s.to_string(),
    }
}

pub fn parse(a: &Args) -> Result<Value, ActionError> {
    let format = a.chosen("format")?;
    let data = match a.required("data")? {
        Value::String(s) => s.as_str(),
        other => {
            return Err(a.invalid(
                "data",
                format!("expected a string to parse, got {}", type_name(other)),
            ))
        }
    };
    let bad = |e: &dyn std::fmt::Display| a.invalid("data", format!("not valid {format}: {e}"));
    match format {
        "json" => serde_json::from_str(data).map_err(|e| bad(&e)),
        "yaml" => crate::core::yaml::read(data).map_err(|e| bad(&e)),
        "csv" => parse_csv(a, data),
        "frontmatter" | "markdown" => {
            let (meta, body) = match split_frontmatter(data) {
                Some((yaml, body)) => {
                    let meta = if yaml.trim().is_empty() {
                        Value::Object(Map::new())
                    } else {
                        crate::core::yaml::read(yaml).map_err(|e| bad(&e))?
                    };
                    (meta, body)
                }
                None => (Value::Object(Map::new()), data),
            };
            Ok(json!({"frontmatter": meta, "body": body}))
        }
        "url_params" => {
            let q = data.trim_start_matches('?');
            let mut out = Map::new();
            for (k, v) in form_urlencoded::parse(q.as_bytes()) {
                out.insert(k.into_owned(), Value::String(v.into_owned()));
            }
            Ok(Value::Object(out))
        }
        _ => unreachable!("checked by choice"),
    }
}

fn parse_csv(a: &Args, data: &str) -> Result<Value, ActionError> {
    let delimiter = match a.text("delimiter")? {
        d if d.len() == 1 => d.as_bytes()[0],
        "\\t" | "tab" => b'\t',
        d => return Err(a.invalid("delimiter", format!("`{d}` is not one character"))),
    };
    let header = a.bool("header")?;
    let mut r = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(header)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(data.as_bytes());
    let bad = |e: csv::Error| a.invalid("data", format!("not valid csv: {e}"));
    let mut rows = Vec::new();
    if header {
        let names: Vec<String> = r.headers().map_err(bad)?.iter().map(String::from).collect();
        for rec in r.records() {
            let rec = rec.map_err(bad)?;
            let mut row = Map::new();
            for (i, name) in names.iter().enumerate() {
                row.insert(name.clone(), json!(rec.get(i).unwrap_or("")));
            }
            rows.push(Value::Object(row));
        }
    } else {
        for rec in r.records() {
            let rec = rec.map_err(bad)?;
            rows.push(json!(rec.iter().collect::<Vec<_>>()));
        }
    }
    Ok(Value::Array(rows))
}

/// `---\nyaml\n---\nbody` at the very start → (yaml, body).
pub fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" || line.trim_end() == "..." {
            let yaml = &rest[..offset];
            let body = &rest[offset + line.len()..];
            return Some((yaml, body));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args<'a>(method: &str, v: &'a Value) -> Args<'a> {
        let spec = crate::core::args::spec_of(super::super::CORE_SPECS, method, method).unwrap();
        Args::new(spec, v).unwrap()
    }

    #[test]
    fn paths() {
        let v =
            json!({"data": {"users": [{"email": "a@x"}, {"email": "b@x"}]}, "m": {"0": "zero"}});
        assert_eq!(lookup_path(&v, "data.users[1].email"), Some(&json!("b@x")));
        assert_eq!(lookup_path(&v, "data.users.0.email"), Some(&json!("a@x")));
        assert_eq!(lookup_path(&v, "m[0]"), Some(&json!("zero")));
        assert_eq!(lookup_path(&v, "data.users[5].email"), None);
        assert_eq!(
            lookup_path(&v, "data['users'][0].email"),
            Some(&json!("a@x"))
        );
    }

    #[test]
    fn formats() {
        let f = |v: Value| format(&args("format", &v)).unwrap();
        assert_eq!(
            f(json!({"value": 1234567.891, "type": "number", "precision": 2, "grouping": true})),
            json!("1,234,567.89")
        );
        assert_eq!(f(json!({"value": "42", "type": "number"})), json!("42"));
        assert_eq!(
            f(json!({"value": -1234.5, "type": "currency"})),
            json!("-$1,234.50")
        );
        assert_eq!(
            f(json!({"value": 10, "type": "currency", "currency": "CHF"})),
            json!("10.00 CHF")
        );
        assert_eq!(
            f(json!({"value": "hello wORLD", "type": "string", "format": "title"})),
            json!("Hello World")
        );
        assert_eq!(
            f(json!({"value": "Hello, World!", "type": "string", "format": "slug"})),
            json!("hello-world")
        );
        assert_eq!(
            f(
                json!({"value": "2026-03-04T05:06:07Z", "type": "date", "format": "YYYY/MM/DD HH:mm"})
            ),
            json!("2026/03/04 05:06")
        );
        assert!(format(&args("format", &json!({"value": "x", "type": "number"}))).is_err());
    }

    #[test]
    fn parses() {
        let p = |v: Value| parse(&args("parse", &v));
        assert_eq!(
            p(json!({"format": "csv", "data": "name,n\n\"Doe, J\",2\nX,3\n"})).unwrap(),
            json!([{"name": "Doe, J", "n": "2"}, {"name": "X", "n": "3"}])
        );
        assert_eq!(
            p(json!({"format": "csv", "header": false, "data": "a;b", "delimiter": ";"})).unwrap(),
            json!([["a", "b"]])
        );
        assert_eq!(
            p(json!({"format": "yaml", "data": "a: [1, 2]"})).unwrap(),
            json!({"a": [1, 2]})
        );
        assert_eq!(
            p(json!({"format": "frontmatter", "data": "---\ntags: [x]\n---\n# Body\n"})).unwrap(),
            json!({"frontmatter": {"tags": ["x"]}, "body": "# Body\n"})
        );
        assert_eq!(
            p(json!({"format": "url_params", "data": "?q=a+b&x=%2F"})).unwrap(),
            json!({"q": "a b", "x": "/"})
        );
        let e = p(json!({"format": "json", "data": "{nope"}))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("input `data` of `core.parse`: not valid json"),
            "{e}"
        );
        let e = p(json!({"format": "toml", "data": ""}))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "input `format` of `core.parse` cannot be `toml` (expected one of: json,"
            ),
            "{e}"
        );
    }
}
