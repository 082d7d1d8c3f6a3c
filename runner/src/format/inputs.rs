//! Input values: coercion to the declared type, defaults, and checks.
//!
//! The same rules apply to every way a run starts (CLI, inputs file, webhook).

use crate::diag::did_you_mean;
use crate::format::model::{InputDef, InputType, Workflow};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// An input value as supplied.
#[derive(Debug, Clone, PartialEq)]
pub enum Supplied {
    /// Text from `--input k=v` or a query string: coerced to the declared type.
    Text(String),
    /// A JSON value (inputs file, request body): must already have the type
    /// (a number-looking string is accepted for a number, as from a form).
    Json(Value),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("input `{name}`: {message}")]
pub struct InputError {
    pub name: String,
    pub message: String,
    pub hint: Option<String>,
    /// A required input nobody gave: how to give it depends on who asks (a
    /// command line, a request), so the edge says it.
    pub missing: Option<Missing>,
}

/// What a missing required input is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The declared type's name (`string`, `number`, …).
    pub ty: &'static str,
    pub description: Option<String>,
}

impl InputError {
    /// As a diagnostic pointing at the input's definition in the workflow,
    /// with the hint for a command line.
    pub fn diagnostic(&self, wf: &Workflow) -> crate::diag::Diagnostic {
        let pos = wf.input(&self.name).map(|d| d.pos);
        let mut d = crate::diag::Diagnostic::error(&wf.source, pos, self.to_string());
        if let Some(h) = self.cli_hint() {
            d.hints.push(h);
        }
        d
    }

    /// How to fix it from the command line (`--input name=<type>`).
    pub fn cli_hint(&self) -> Option<String> {
        match &self.missing {
            Some(m) => Some(format!(
                "pass it with `--input {}=<{}>`{}",
                self.name,
                m.ty,
                described(m)
            )),
            None => self.hint.clone(),
        }
    }

    /// How to fix it in a request: a field of the JSON body (or the query).
    pub fn request_hint(&self) -> Option<String> {
        match &self.missing {
            Some(m) => Some(format!(
                "send it as `\"{}\": <{}>` in the JSON body, or `?{}=` in the query{}",
                self.name,
                m.ty,
                self.name,
                described(m)
            )),
            None => self.hint.clone(),
        }
    }
}

fn described(m: &Missing) -> String {
    m.description
        .as_deref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default()
}

fn err(name: &str, message: impl Into<String>) -> InputError {
    InputError {
        name: name.to_string(),
        message: message.into(),
        hint: None,
        missing: None,
    }
}

/// Resolves the run's inputs: every supplied value coerced and checked,
/// defaults applied (after `${VAR}` substitution), required ones enforced.
pub fn resolve(
    wf: &Workflow,
    supplied: Vec<(String, Supplied)>,
    env: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, Vec<InputError>> {
    // A workflow that declares no inputs takes any (the peer's way).
    let unknown = "this workflow has no such input";
    resolve_defs(
        &wf.inputs,
        wf.inputs.is_empty().then_some(()).ok_or(unknown),
        supplied,
        env,
    )
}

/// [`resolve`] against `defs` (a workflow's inputs, a wait's fields);
/// `open`: names not among them are taken as they are (`Ok`), or refused
/// saying the message in `Err`.
pub fn resolve_defs(
    defs: &[InputDef],
    open: Result<(), &str>,
    supplied: Vec<(String, Supplied)>,
    env: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, Vec<InputError>> {
    let mut out = Map::new();
    let mut errors = Vec::new();
    let names: Vec<&str> = defs.iter().map(|i| i.name.as_str()).collect();
    for (name, value) in supplied {
        match defs.iter().find(|d| d.name == name) {
            Some(def) => match coerce(def, value) {
                Ok(v) => {
                    out.insert(name, v);
                }
                Err(e) => errors.push(e),
            },
            None if open.is_ok() => {
                let v = match value {
                    Supplied::Text(s) => Value::String(s),
                    Supplied::Json(v) => v,
                };
                out.insert(name, v);
            }
            None => {
                let mut e = err(&name, open.err().unwrap_or_default());
                e.hint = Some(match did_you_mean(&name, &names) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => format!("its inputs are: {}", names.join(", ")),
                });
                errors.push(e);
            }
        }
    }
    for def in defs {
        // Given (well or badly): its own error says what is wrong.
        if out.contains_key(&def.name) || errors.iter().any(|e| e.name == def.name) {
            continue;
        }
        match &def.default {
            // `default: null` sets the input, to null, as the peer does (a
            // template's `| default(…)` then keeps it: only undefined is replaced).
            Some(Value::Null) => {
                out.insert(def.name.clone(), Value::Null);
            }
            Some(d) => {
                let d = substitute_env(d, env);
                let supplied = match d {
                    Value::String(s) => Supplied::Text(s),
                    other => Supplied::Json(other),
                };
                match coerce(def, supplied) {
                    Ok(v) => {
                        out.insert(def.name.clone(), v);
                    }
                    Err(mut e) => {
                        e.message = format!("the default does not fit: {}", e.message);
                        errors.push(e);
                    }
                }
            }
            _ if def.required => {
                let mut e = err(&def.name, "a value is required");
                e.missing = Some(Missing {
                    ty: def.ty.name(),
                    description: def.description.clone(),
                });
                errors.push(e);
            }
            _ => {}
        }
    }
    if errors.is_empty() {
        // Objects as the peer's JavaScript holds them (index keys first).
        out.values_mut()
            .for_each(marktoflow_steps::core::js::order_keys);
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Whether `v`, a value written in a workflow (a sub-workflow's literal
/// input), fits `def` as [`resolve`] will check it when the step runs.
pub fn check_value(def: &InputDef, v: &Value) -> Result<(), InputError> {
    coerce(def, Supplied::Json(v.clone())).map(drop)
}

fn coerce(def: &InputDef, value: Supplied) -> Result<Value, InputError> {
    let name = &def.name;
    let ty = def.ty.name();
    let v = match (def.ty, value) {
        (InputType::String, Supplied::Text(s)) => Value::String(s),
        (InputType::String, Supplied::Json(v)) => match v {
            Value::String(_) => v,
            Value::Number(_) | Value::Bool(_) => Value::String(v.to_string()),
            other => {
                return Err(err(
                    name,
                    format!("expected a string, got {}", type_of(&other)),
                ))
            }
        },
        (InputType::Number | InputType::Integer, Supplied::Text(s)) => parse_number(def, s.trim())?,
        (InputType::Number | InputType::Integer, Supplied::Json(v)) => match v {
            Value::Number(_) => check_integer(def, v)?,
            Value::String(s) => parse_number(def, s.trim())?,
            other => {
                return Err(err(
                    name,
                    format!("expected a {ty}, got {}", type_of(&other)),
                ))
            }
        },
        (InputType::Boolean, Supplied::Text(s)) => parse_bool(name, &s)?,
        (InputType::Boolean, Supplied::Json(v)) => match v {
            Value::Bool(_) => v,
            Value::String(s) => parse_bool(name, &s)?,
            other => {
                return Err(err(
                    name,
                    format!("expected a boolean, got {}", type_of(&other)),
                ))
            }
        },
        (InputType::Array, Supplied::Text(s)) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Array(_)) => v,
            // `a,b,c` is a list of strings too.
            _ if !s.trim_start().starts_with('[') => Value::Array(
                s.split(',')
                    .map(|p| p.trim())
                    .filter(|p| !p.is_empty())
                    .map(|p| Value::String(p.to_string()))
                    .collect(),
            ),
            _ => return Err(err(name, format!("expected a JSON array, got `{s}`"))),
        },
        (InputType::Object, Supplied::Text(s)) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Err(err(name, format!("expected a JSON object, got `{s}`"))),
        },
        (InputType::Array, Supplied::Json(v)) => match v {
            Value::Array(_) => v,
            other => {
                return Err(err(
                    name,
                    format!("expected an array, got {}", type_of(&other)),
                ))
            }
        },
        (InputType::Json, Supplied::Text(s)) => serde_json::from_str::<Value>(&s)
            .map_err(|_| err(name, format!("expected JSON, got `{s}`")))?,
        (InputType::Json, Supplied::Json(v)) => v,
        (InputType::Object, Supplied::Json(v)) => match v {
            Value::Object(_) => v,
            other => {
                return Err(err(
                    name,
                    format!("expected an object, got {}", type_of(&other)),
                ))
            }
        },
    };
    check_constraints(def, &v)?;
    Ok(v)
}

fn parse_number(def: &InputDef, s: &str) -> Result<Value, InputError> {
    let bad = || {
        err(
            &def.name,
            format!("expected a {}, got `{s}`", def.ty.name()),
        )
    };
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::from(i));
    }
    if def.ty == InputType::Integer {
        // A whole number too large for an integer gets the same refusal as
        // a JSON body's (`check_integer`), not "expected an integer".
        return match s.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && f.fract() == 0.0 => Err(out_of_range(&def.name, s)),
            _ => Err(bad()),
        };
    }
    let f: f64 = s.parse().map_err(|_| bad())?;
    if !f.is_finite() {
        return Err(bad());
    }
    Ok(if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    })
}

/// Integers are 64-bit: `i64::MIN as f64` is exact, and every `f64` below
/// `-I64_BOUND` up to `I64_BOUND` (exclusive) converts without clamping.
const I64_BOUND: f64 = 9_223_372_036_854_775_808.0;

fn out_of_range(name: &str, shown: &str) -> InputError {
    err(
        name,
        format!(
            "{shown} is out of range for an integer ({} to {})",
            i64::MIN,
            i64::MAX
        ),
    )
}

fn check_integer(def: &InputDef, v: Value) -> Result<Value, InputError> {
    if def.ty != InputType::Integer || v.is_i64() {
        return Ok(v);
    }
    if v.is_u64() {
        return Err(out_of_range(&def.name, &v.to_string()));
    }
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && (-I64_BOUND..I64_BOUND).contains(&f) => {
            Ok(Value::from(f as i64))
        }
        Some(f) if f.fract() == 0.0 => Err(out_of_range(&def.name, &v.to_string())),
        _ => Err(err(&def.name, format!("expected an integer, got {v}"))),
    }
}

fn parse_bool(name: &str, s: &str) -> Result<Value, InputError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "1" | "on" => Ok(Value::Bool(true)),
        "false" | "no" | "n" | "0" | "off" => Ok(Value::Bool(false)),
        _ => Err(err(name, format!("expected true or false, got `{s}`"))),
    }
}

fn check_constraints(def: &InputDef, v: &Value) -> Result<(), InputError> {
    if let Some(allowed) = &def.allowed {
        let matches = allowed
            .iter()
            .any(|a| a == v || (a.as_f64().is_some() && a.as_f64() == v.as_f64()));
        if !matches {
            let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
            return Err(err(
                &def.name,
                format!("{v} is not one of {}", list.join(", ")),
            ));
        }
    }
    if let (Some(p), Value::String(s)) = (&def.pattern, v) {
        if !p.is_match(s) {
            let shown = p.as_str().trim_start_matches("^(?:").trim_end_matches(")$");
            return Err(err(
                &def.name,
                format!("`{s}` does not match the pattern `{shown}`"),
            ));
        }
    }
    // min/max bound numbers, and the length of strings and lists.
    let measure = match v {
        Value::Number(n) => n.as_f64().map(|f| (f, "")),
        Value::String(s) => Some((s.chars().count() as f64, " characters long")),
        Value::Array(a) => Some((a.len() as f64, " items long")),
        _ => None,
    };
    if let Some((x, unit)) = measure {
        if let Some(min) = def.min {
            if x < min {
                return Err(err(
                    &def.name,
                    format!("must be at least {min}{unit} (got {x})"),
                ));
            }
        }
        if let Some(max) = def.max {
            if x > max {
                return Err(err(
                    &def.name,
                    format!("must be at most {max}{unit} (got {x})"),
                ));
            }
        }
    }
    Ok(())
}

fn type_of(v: &Value) -> &'static str {
    marktoflow_steps::core::error::type_name(v)
}

/// How the peer writes a secret read from the environment:
/// `${secret:env://NAME}` is `${NAME}`.
pub const SECRET_FROM_ENV: &str = "secret:env://";

/// The peer's `${VAR}` substitution (plus `${VAR:-default}` and
/// `${secret:env://VAR}`), in strings anywhere inside `v`. Unset variables
/// become empty.
pub fn substitute_env(v: &Value, env: &BTreeMap<String, String>) -> Value {
    match v {
        Value::String(s) if s.contains("${") => Value::String(substitute_str(s, env)),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute_env(x, env)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), substitute_env(x, env)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn substitute_str(s: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find('}') {
            Some(j) => {
                let inner = &after[..j];
                let (name, default) = match inner.split_once(":-") {
                    Some((n, d)) => (n, Some(d)),
                    None => (inner, None),
                };
                // The peer's secret reference for its environment provider.
                let name = name.strip_prefix(SECRET_FROM_ENV).unwrap_or(name);
                match env.get(name).filter(|v| !v.is_empty()) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(default.unwrap_or("")),
                }
                rest = &after[j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The inputs as a JSON Schema object: types, descriptions, defaults,
/// `enum`, `pattern`, `minimum`/`maximum` (`minLength`/`maxLength` for
/// text, `minItems`/`maxItems` for lists, as the inputs check them), and
/// `required` for required inputs without a default.
pub fn json_schema(inputs: &[InputDef]) -> Map<String, Value> {
    let mut props = Map::new();
    let mut required = Vec::new();
    for i in inputs {
        let mut p = Map::new();
        p.insert("type".into(), json!(i.ty.name()));
        if let Some(d) = &i.description {
            p.insert("description".into(), json!(d));
        }
        if let Some(d) = &i.default {
            p.insert("default".into(), d.clone());
        }
        if let Some(a) = &i.allowed {
            p.insert("enum".into(), Value::Array(a.clone()));
        }
        if let Some(re) = &i.pattern {
            p.insert("pattern".into(), json!(re.as_str()));
        }
        let (lo, hi) = match i.ty {
            InputType::String => ("minLength", "maxLength"),
            InputType::Array => ("minItems", "maxItems"),
            _ => ("minimum", "maximum"),
        };
        for (key, v) in [(lo, i.min), (hi, i.max)] {
            if let Some(v) = v {
                let v = if matches!(i.ty, InputType::Number) {
                    json!(v)
                } else {
                    json!(v as i64)
                };
                p.insert(key.into(), v);
            }
        }
        if i.required && i.default.is_none() {
            required.push(json!(i.name));
        }
        props.insert(i.name.clone(), Value::Object(p));
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(inputs.is_empty()));
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_out_of_range_are_refused_alike_from_json_and_text() {
        let wf = crate::format::model::load_str(
            std::path::Path::new("t.md"),
            "---\nworkflow: {id: t}\ninputs:\n  n: {type: integer}\n---\n\n```yaml\naction: core.set\ninputs: {a: 1}\n```\n",
            &marktoflow_steps::Registry::standard(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"))
        .workflow;
        let one = |v: Supplied| resolve(&wf, vec![("n".into(), v)], &BTreeMap::new());
        for bad in [
            Supplied::Json(serde_json::json!(1e308)),
            Supplied::Json(serde_json::json!(-1e19)),
            Supplied::Json(serde_json::json!(18446744073709551615u64)),
            Supplied::Text("1e308".into()),
            Supplied::Text("9223372036854775808".into()),
        ] {
            let e = one(bad.clone()).unwrap_err();
            assert!(
                e[0].message.contains("is out of range for an integer"),
                "{bad:?}: {e:?}"
            );
        }
        for (ok, want) in [
            (Supplied::Json(serde_json::json!(4e3)), 4000i64),
            (Supplied::Json(serde_json::json!(i64::MAX)), i64::MAX),
            (Supplied::Text("-9223372036854775808".into()), i64::MIN),
        ] {
            assert_eq!(one(ok).unwrap()["n"], serde_json::json!(want));
        }
    }

    #[test]
    fn env_substitution() {
        let mut env = BTreeMap::new();
        env.insert("A".to_string(), "x".to_string());
        assert_eq!(substitute_str("${A}/${B:-d}/${C}", &env), "x/d/");
        assert_eq!(substitute_str("no vars ${", &env), "no vars ${");
        // The peer's reference to its environment secret provider.
        assert_eq!(substitute_str("Bearer ${secret:env://A}", &env), "Bearer x");
    }
}
