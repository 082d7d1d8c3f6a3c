//! `core.transform` and `core.template`: the core actions that evaluate
//! templates per item, so the engine runs them with its template environment.
//!
//! Their template fields (`expression`, `condition`, `template`) arrive as
//! written, not rendered with the step's other inputs: `{{ item.name }}` is
//! evaluated once per item with `item` (and `index`, `accumulator`) defined.

use crate::template::{TemplateError, Templates};
use marktoflow_steps::builtin::{display, lookup_path, CORE_SPECS};
use marktoflow_steps::core::args::{spec_of, Args};
use marktoflow_steps::core::error::{type_name, ActionError};
use serde_json::{json, Map, Value};
use std::cmp::Ordering;

/// Fields of each method that keep their template text.
pub fn raw_fields(method: &str) -> &'static [&'static str] {
    match method {
        "transform" => &["expression", "condition"],
        "template" => &["template"],
        _ => &[],
    }
}

#[derive(Debug)]
pub enum OpError {
    /// Wrong or missing input: the message names it; `field` is where it is.
    Input {
        field: &'static str,
        message: String,
    },
    /// A template failed; `field` is the input that holds it.
    Template {
        field: &'static str,
        error: TemplateError,
    },
}

fn input_err(field: &'static str, msg: impl Into<String>) -> OpError {
    OpError::Input {
        field,
        message: msg.into(),
    }
}

/// The inputs of `core.<method>` as its catalog entry declares them, read
/// by the rule every action reads by ([`Args`]): `rendered` the step's
/// inputs with the other fields rendered, `raw` the template fields as
/// written.
struct Inputs<'a> {
    rendered: Args<'a>,
    raw: Args<'a>,
}

impl<'a> Inputs<'a> {
    fn new(method: &str, rendered: &'a Value, raw: &'a Value) -> Result<Self, OpError> {
        let spec = spec_of(CORE_SPECS, method, method).map_err(|e| at("inputs", e))?;
        Ok(Inputs {
            rendered: Args::new(spec, rendered).map_err(|e| at("inputs", e))?,
            raw: Args::new(spec, raw).map_err(|e| at("inputs", e))?,
        })
    }
}

/// An input's error, placed at the input.
fn at(field: &'static str, e: ActionError) -> OpError {
    input_err(field, e.to_string())
}

fn locals(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// `rendered` holds the step's inputs with the other fields rendered; `raw`
/// the template fields as written.
pub fn transform(
    t: &Templates,
    base: &minijinja::Value,
    rendered: &Value,
    raw: &Value,
) -> Result<Value, OpError> {
    let inputs = Inputs::new("transform", rendered, raw)?;
    let (args, raw) = (&inputs.rendered, &inputs.raw);
    let op = args.chosen("operation").map_err(|e| at("operation", e))?;
    let items = match args.value("input") {
        Some(v) => match v.as_ref() {
            Value::Array(a) => a.clone(),
            other => {
                return Err(at(
                    "input",
                    args.invalid("input", format!("must be a list, got {}", type_name(other))),
                ))
            }
        },
        None => return Err(at("input", args.missing("input"))),
    };
    let raw_str = |k: &'static str, default: &str| -> Result<(String, &'static str), OpError> {
        let written = raw.str(k).map_err(|e| at(k, e))?;
        Ok((written.unwrap_or(default).to_string(), k))
    };
    let key = args.str("key").map_err(|e| at("key", e))?;
    let item_ctx = |item: &Value, i: usize| {
        Templates::with_locals(
            base,
            &locals(&[("item", item.clone()), ("index", json!(i))]),
        )
    };
    let key_of = |item: &Value, i: usize| -> Result<Value, OpError> {
        let Some(k) = key else {
            return Ok(item.clone());
        };
        // `item.x` is an expression; a bare `x` is a path into the item.
        if k == "item" || k.starts_with("item.") || k.starts_with("item[") {
            let v = t
                .render_value(&json!(format!("{{{{ {k} }}}}")), &item_ctx(item, i))
                .map_err(|error| OpError::Template {
                    field: "key",
                    error,
                })?;
            Ok(v)
        } else {
            Ok(lookup_path(item, k).cloned().unwrap_or(Value::Null))
        }
    };
    match op {
        "map" => {
            let (expr, field) = raw_str("expression", "{{ item }}")?;
            let expr = Value::String(expr);
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    t.render_value(&expr, &item_ctx(item, i))
                        .map_err(|error| OpError::Template { field, error })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        "filter" | "find" => {
            let (cond, field) = raw_str("condition", "item")?;
            let mut kept = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let keep = t
                    .eval_condition(&cond, &item_ctx(item, i))
                    .map_err(|error| OpError::Template { field, error })?;
                if keep {
                    if op == "find" {
                        return Ok(item.clone());
                    }
                    kept.push(item.clone());
                }
            }
            Ok(if op == "find" {
                Value::Null
            } else {
                Value::Array(kept)
            })
        }
        "reduce" => {
            let (expr, field) = raw_str("expression", "{{ accumulator }}")?;
            let expr = Value::String(expr);
            // `initial_value: 0` stays 0 (the peer turned falsy values into null).
            let mut acc = args.get("initialValue").cloned().unwrap_or(Value::Null);
            for (i, item) in items.iter().enumerate() {
                let ctx = Templates::with_locals(
                    base,
                    &locals(&[
                        ("item", item.clone()),
                        ("index", json!(i)),
                        ("accumulator", acc),
                    ]),
                );
                acc = t
                    .render_value(&expr, &ctx)
                    .map_err(|error| OpError::Template { field, error })?;
            }
            Ok(acc)
        }
        "group_by" => {
            if key.is_none() {
                return Err(at(
                    "operation",
                    args.invalid("key", "is needed by `group_by` (a path into the item)"),
                ));
            }
            let mut groups: Map<String, Value> = Map::new();
            for (i, item) in items.iter().enumerate() {
                let k = display(&key_of(item, i)?);
                match groups.entry(k).or_insert_with(|| json!([])) {
                    Value::Array(a) => a.push(item.clone()),
                    _ => unreachable!("groups hold lists"),
                }
            }
            Ok(Value::Object(groups))
        }
        "unique" => {
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let k = key_of(item, i)?.to_string();
                if seen.insert(k) {
                    out.push(item.clone());
                }
            }
            Ok(Value::Array(out))
        }
        "sort" => {
            let reverse = args.bool("reverse").map_err(|e| at("reverse", e))?;
            let mut keyed = items
                .iter()
                .enumerate()
                .map(|(i, item)| Ok((key_of(item, i)?, item.clone())))
                .collect::<Result<Vec<_>, OpError>>()?;
            // Stable: equal keys keep their order.
            keyed.sort_by(|a, b| compare(&a.0, &b.0));
            if reverse {
                keyed.reverse();
            }
            Ok(Value::Array(keyed.into_iter().map(|(_, v)| v).collect()))
        }
        // The catalog allows only the operations above; one added there
        // without its arm here is an error, never a panic.
        other => Err(at(
            "operation",
            args.invalid("operation", format!("`{other}` is not implemented")),
        )),
    }
}

/// Numbers by value, strings case-insensitively (ties by exact text), nulls
/// last, other mixes by their text.
fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Greater,
        (_, Value::Null) => Ordering::Less,
        (Value::String(x), Value::String(y)) => x
            .to_lowercase()
            .cmp(&y.to_lowercase())
            .then_with(|| x.cmp(y)),
        _ => display(a).cmp(&display(b)),
    }
}

/// `core.template`: `template` is the template source (when it is exactly
/// one `{{ expr }}`, the expression's value is the source, e.g. a template
/// read from a file); it is rendered with the run's variables plus the
/// `context` input, under a fuel limit because its text may come from data.
pub fn template(
    t: &Templates,
    fueled: &Templates,
    base: &minijinja::Value,
    rendered: &Value,
    raw: &Value,
) -> Result<Value, OpError> {
    let field = "template";
    let inputs = Inputs::new("template", rendered, raw)?;
    let written = inputs.raw.required_str(field).map_err(|e| at(field, e))?;
    let from_data = crate::template::single_expression(written).is_some();
    let source = if from_data {
        match t
            .render_value(&json!(written), base)
            .map_err(|error| OpError::Template { field, error })?
        {
            Value::String(s) => s,
            other => {
                return Err(at(
                    field,
                    inputs
                        .raw
                        .invalid(field, format!("must give text, got {}", type_name(&other))),
                ))
            }
        }
    } else {
        written.to_string()
    };
    // A template that comes from data (a request, a file) is not the
    // author's: it never sees the environment.
    let base = if from_data {
        let mut no_env = Map::new();
        no_env.insert("env".into(), json!({}));
        Templates::with_locals(base, &no_env)
    } else {
        base.clone()
    };
    let ctx = match inputs
        .rendered
        .mapping("context")
        .map_err(|e| at("context", e))?
    {
        None => base,
        Some(m) => Templates::with_locals(&base, &m),
    };
    fueled
        .render_str(&source, &ctx)
        .map(Value::String)
        .map_err(|mut error| {
            if from_data {
                // The position is inside the data, not the workflow file.
                error.line = None;
                error.col = None;
                error.message = format!("in the template from `{written}`: {}", error.message);
            }
            OpError::Template { field, error }
        })
}
