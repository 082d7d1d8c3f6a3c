//! The part of JSON Schema an `output_schema` is checked with: `type`,
//! `enum`, `const`, `properties`, `required`, `additionalProperties: false`,
//! `items`, `minItems`, `maxItems`, `anyOf`/`oneOf`. Other keywords are
//! accepted and not checked (the local model's grammar and the providers'
//! JSON modes enforce what they understand).

use serde_json::Value;

const TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Whether `schema` is usable: a mapping whose `type`s are JSON Schema's.
pub fn validate_schema(schema: &Value) -> Result<(), String> {
    walk_schema(schema, "")
}

fn walk_schema(schema: &Value, at: &str) -> Result<(), String> {
    let Value::Object(o) = schema else {
        if schema.is_boolean() {
            return Ok(());
        }
        return Err(format!("{} must be a mapping", place(at)));
    };
    if let Some(t) = o.get("type") {
        let names: Vec<&Value> = match t {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        for n in names {
            match n.as_str() {
                Some(s) if TYPES.contains(&s) => {}
                _ => {
                    return Err(format!(
                        "{}`type` {n} is not one of {}",
                        place_prefix(at),
                        TYPES.join(", ")
                    ))
                }
            }
        }
    }
    if let Some(Value::Object(props)) = o.get("properties") {
        for (k, v) in props {
            walk_schema(v, &format!("{at}.{k}"))?;
        }
    }
    if let Some(items) = o.get("items") {
        walk_schema(items, &format!("{at}[]"))?;
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = o.get(key) {
            for a in alts {
                walk_schema(a, at)?;
            }
        }
    }
    Ok(())
}

fn place(at: &str) -> String {
    if at.is_empty() {
        "the schema".into()
    } else {
        format!("the schema of `{}`", at.trim_start_matches('.'))
    }
}

fn place_prefix(at: &str) -> String {
    if at.is_empty() {
        String::new()
    } else {
        format!("at `{}`: ", at.trim_start_matches('.'))
    }
}

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// Whether `v` follows `schema`; `Err` names the first place it does not.
pub fn check(schema: &Value, v: &Value) -> Result<(), String> {
    check_at(schema, v, "$")
}

fn check_at(schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let o = match schema {
        Value::Object(o) => o,
        Value::Bool(false) => return Err(format!("{at}: nothing is allowed here")),
        _ => return Ok(()),
    };
    if let Some(t) = o.get("type") {
        let ok = match t {
            Value::String(s) => type_matches(s, v),
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .any(|s| type_matches(s, v)),
            _ => true,
        };
        if !ok {
            return Err(format!("{at}: expected {t}, got {}", kind(v)));
        }
    }
    if let Some(Value::Array(allowed)) = o.get("enum") {
        if !allowed.contains(v) {
            return Err(format!(
                "{at}: {v} is not one of {}",
                Value::Array(allowed.clone())
            ));
        }
    }
    if let Some(c) = o.get("const") {
        if c != v {
            return Err(format!("{at}: expected {c}, got {v}"));
        }
    }
    if let Value::Object(obj) = v {
        if let Some(Value::Array(req)) = o.get("required") {
            for k in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(k) {
                    return Err(format!("{at}: `{k}` is missing"));
                }
            }
        }
        let props = o.get("properties").and_then(Value::as_object);
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check_at(s, val, &format!("{at}.{k}"))?,
                None if o.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{at}: `{k}` is not allowed"))
                }
                None => {}
            }
        }
    }
    if let Value::Array(items) = v {
        let n = items.len() as u64;
        if let Some(min) = o.get("minItems").and_then(Value::as_u64) {
            if n < min {
                return Err(format!("{at}: {n} items, at least {min} expected"));
            }
        }
        if let Some(max) = o.get("maxItems").and_then(Value::as_u64) {
            if n > max {
                return Err(format!("{at}: {n} items, at most {max} expected"));
            }
        }
        if let Some(s) = o.get("items") {
            for (i, item) in items.iter().enumerate() {
                check_at(s, item, &format!("{at}[{i}]"))?;
            }
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alts)) = o.get(key) {
            if !alts.iter().any(|a| check_at(a, v, at).is_ok()) {
                return Err(format!("{at}: matches none of `{key}`"));
            }
        }
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    crate::core::error::type_name(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_the_common_keywords() {
        let s = json!({
            "type": "object",
            "properties": {
                "terms": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "kind": {"enum": ["factual", "list"]},
                "when": {"type": ["string", "null"]},
                "n": {"type": "integer"}
            },
            "required": ["terms", "kind"],
            "additionalProperties": false
        });
        assert!(check(
            &s,
            &json!({"terms": ["a"], "kind": "list", "when": null, "n": 3})
        )
        .is_ok());
        let bad = |v: Value| check(&s, &v).unwrap_err();
        assert!(bad(json!({"terms": ["a"]})).contains("`kind` is missing"));
        assert!(bad(json!({"terms": [], "kind": "list"})).contains("at least 1"));
        assert!(bad(json!({"terms": [1], "kind": "list"})).contains("$.terms[0]"));
        assert!(bad(json!({"terms": ["a"], "kind": "other"})).contains("not one of"));
        assert!(bad(json!({"terms": ["a"], "kind": "list", "x": 1})).contains("`x` is not allowed"));
        assert!(bad(json!({"terms": ["a"], "kind": "list", "n": 1.5})).contains("integer"));
        assert!(bad(json!([1])).contains("expected \"object\""));
    }

    #[test]
    fn rejects_unusable_schemas() {
        assert!(validate_schema(&json!({"type": "object"})).is_ok());
        assert!(validate_schema(&json!({"type": "obj"}))
            .unwrap_err()
            .contains("not one of"));
        let e = validate_schema(&json!({"properties": {"a": {"type": 3}}})).unwrap_err();
        assert!(e.contains("at `a`"), "{e}");
        assert!(validate_schema(&json!("x")).is_err());
    }
}
