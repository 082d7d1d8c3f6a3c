//! Reading what is particular to `memory.*` inputs (tags and kinds, times)
//! over the one reader of inputs, [`Args`].

use crate::core::args::Args;
use crate::core::error::{type_name, ActionError};
use crate::core::time::{epoch_ms, parse_date_text, Clock, DateText};
use chrono::{DateTime, SecondsFormat};
use serde_json::Value;

pub(super) fn input(msg: impl Into<String>) -> ActionError {
    ActionError::Input(msg.into())
}

/// Tags or kinds: a list, or text split at commas; a leading `#` and
/// blanks dropped, each name once.
pub(super) fn names(a: &Args, field: &str) -> Result<Vec<String>, ActionError> {
    let items = match a.get(field) {
        Some(Value::String(s)) => s.split(',').map(str::to_string).collect(),
        _ => a.strings(field)?,
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
pub(super) fn kinds(a: &Args) -> Result<Vec<String>, ActionError> {
    names(a, "kind")
}

/// A time as milliseconds since 1970: RFC 3339, `YYYY-MM-DD` or a number of ms.
pub(super) fn time_ms(a: &Args, field: &str) -> Result<Option<i64>, ActionError> {
    match a.get(field) {
        None => Ok(None),
        // Keeps the arithmetic in range: 1970 up to the year 9999.
        Some(Value::Number(n)) => n
            .as_f64()
            .and_then(epoch_ms)
            .filter(|ms| *ms >= 0)
            .map(Some)
            .ok_or_else(|| {
                a.invalid(
                    field,
                    "must be milliseconds (or seconds) since 1970, up to the year 9999",
                )
            }),
        Some(Value::String(s)) => {
            let s = s.trim();
            match parse_date_text(s) {
                Some(DateText::Zoned(t)) => return Ok(Some(t.timestamp_millis())),
                Some(DateText::Wall(t)) => return Ok(Some(t.and_utc().timestamp_millis())),
                None => {}
            }
            Err(a.invalid(
                field,
                format!("must be a date like 2026-11-20 or 2026-11-20T09:30:00Z, got `{s}`"),
            ))
        }
        Some(other) => Err(a.invalid(field, format!("must be a date, got {}", type_name(other)))),
    }
}

pub(super) fn now_ms(a: &Args, clock: &dyn Clock) -> Result<i64, ActionError> {
    Ok(time_ms(a, "now")?.unwrap_or_else(|| clock.now_ms()))
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
