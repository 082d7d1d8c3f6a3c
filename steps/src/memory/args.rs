//! Reading `memory.*` inputs: numbers, flags, lists, times.

use crate::core::error::{type_name, ActionError};
use crate::core::time::{epoch_ms, parse_date_text, Clock, DateText};
use chrono::{DateTime, SecondsFormat};
use serde_json::Value;

pub(super) fn input(msg: impl Into<String>) -> ActionError {
    ActionError::Input(msg.into())
}

pub(super) fn opt_str<'v>(inputs: &'v Value, field: &str) -> Result<Option<&'v str>, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(input(format!(
            "input `{field}` must be a string, got {}",
            type_name(other)
        ))),
    }
}

pub(super) fn opt_num(inputs: &Value, field: &str) -> Result<Option<f64>, ActionError> {
    let n = match inputs.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_f64(),
        // Inputs from the CLI and webhooks often arrive as strings.
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    };
    match n {
        Some(x) if x.is_finite() => Ok(Some(x)),
        _ => Err(input(format!(
            "input `{field}` must be a number, got {}",
            inputs.get(field).map_or("nothing", type_name)
        ))),
    }
}

pub(super) fn opt_bool(inputs: &Value, field: &str, default: bool) -> Result<bool, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(other) => Err(input(format!(
            "input `{field}` must be true or false, got {}",
            type_name(other)
        ))),
    }
}

pub(super) fn unit(inputs: &Value, field: &str) -> Result<Option<f64>, ActionError> {
    match opt_num(inputs, field)? {
        Some(x) if !(0.0..=1.0).contains(&x) => Err(input(format!(
            "input `{field}` must be between 0 and 1, got {x}"
        ))),
        x => Ok(x),
    }
}

pub(super) fn positive(inputs: &Value, field: &str) -> Result<Option<f64>, ActionError> {
    match opt_num(inputs, field)? {
        Some(x) if x <= 0.0 => Err(input(format!("input `{field}` must be above 0, got {x}"))),
        x => Ok(x),
    }
}

/// A list of strings: a YAML list, or one string split at commas.
pub(super) fn str_list(inputs: &Value, field: &str) -> Result<Vec<String>, ActionError> {
    let items: Vec<String> = match inputs.get(field) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split(',').map(str::to_string).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                other => Err(input(format!(
                    "input `{field}` must list strings, got a {}",
                    type_name(other)
                ))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => Err(input(format!(
            "input `{field}` must be a list of strings, got {}",
            type_name(other)
        )))?,
    };
    let mut out: Vec<String> = Vec::new();
    for s in items {
        let s = s.trim().trim_start_matches('#').trim().to_string();
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

/// `kind` (or `type`) as a filter: one or several kinds.
pub(super) fn kinds(inputs: &Value) -> Result<Vec<String>, ActionError> {
    let field = if inputs.get("kind").is_some_and(|v| !v.is_null()) {
        "kind"
    } else {
        "type"
    };
    str_list(inputs, field)
}

/// A time as milliseconds since 1970: RFC 3339, `YYYY-MM-DD` or a number of ms.
pub(super) fn time_ms(inputs: &Value, field: &str) -> Result<Option<i64>, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(None),
        // Keeps the arithmetic in range: 1970 up to the year 9999.
        Some(Value::Number(n)) => n
            .as_f64()
            .and_then(epoch_ms)
            .filter(|ms| *ms >= 0)
            .map(Some)
            .ok_or_else(|| {
                input(format!(
                    "input `{field}` must be milliseconds (or seconds) since 1970, up to the year 9999"
                ))
            }),
        Some(Value::String(s)) => {
            let s = s.trim();
            match parse_date_text(s) {
                Some(DateText::Zoned(t)) => return Ok(Some(t.timestamp_millis())),
                Some(DateText::Wall(t)) => return Ok(Some(t.and_utc().timestamp_millis())),
                None => {}
            }
            Err(input(format!(
                "input `{field}` must be a date like 2026-11-20 or 2026-11-20T09:30:00Z, got `{s}`"
            )))
        }
        Some(other) => Err(input(format!(
            "input `{field}` must be a date, got {}",
            type_name(other)
        ))),
    }
}

pub(super) fn now_ms(inputs: &Value, clock: &dyn Clock) -> Result<i64, ActionError> {
    Ok(time_ms(inputs, "now")?.unwrap_or_else(|| clock.now_ms()))
}

pub(super) fn iso(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(super) fn round(x: f64) -> f64 {
    (x * 1_000_000.0).round() / 1_000_000.0
}

// ---------------------------------------------------------------- the file
