//! Date filters (`format_date`, `add_days`, `subtract_days`, `diff_days`),
//! in local time like the peer.
//!
//! A date is an epoch-milliseconds number (what `now()` and `add_days`
//! return; seconds below 10^11) or a text, read as everywhere else (steps
//! `core/time`): RFC 3339 / ISO 8601 with an offset (`2024-01-15T10:00:00Z`),
//! RFC 2822, or a local wall-clock time without an offset (`2024-01-15`,
//! `2024-01-15T10:30`, `2024-01-15 10:30:00`). Unlike JavaScript (and the
//! peer), a bare `2024-01-15` is local midnight, not UTC midnight, so it
//! formats as the same day everywhere. Anything else is an error (the peer
//! printed `Invalid Date` or returned 0).

use chrono::{DateTime, Datelike, Local, NaiveDateTime, TimeZone, Timelike};
use marktoflow_steps::core::time::{epoch_ms, parse_date_text, DateText};
use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

use super::values::{text, to_num};

const DAY_MS: i64 = 86_400_000;

fn invalid(msg: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg)
}

fn from_millis(ms: i64, what: &str) -> Result<DateTime<Local>, Error> {
    Local
        .timestamp_millis_opt(ms)
        .single()
        .ok_or_else(|| invalid(format!("{what}: {ms} is out of the range of dates")))
}

fn from_naive(ndt: NaiveDateTime) -> Option<DateTime<Local>> {
    // A wall-clock time skipped by a DST change is moved forward an hour.
    Local.from_local_datetime(&ndt).earliest().or_else(|| {
        Local
            .from_local_datetime(&(ndt + chrono::Duration::hours(1)))
            .earliest()
    })
}

fn parse_text(s: &str) -> Option<DateTime<Local>> {
    let s = s.trim();
    if let Ok(n) = s.parse::<f64>() {
        return Local.timestamp_millis_opt(epoch_ms(n)?).single();
    }
    match parse_date_text(s)? {
        DateText::Zoned(d) => Some(d.with_timezone(&Local)),
        DateText::Wall(ndt) => from_naive(ndt),
    }
}

/// Reads a date from a value (see the module docs).
pub(crate) fn to_date(v: &Value, what: &str) -> Result<DateTime<Local>, Error> {
    match v.kind() {
        ValueKind::Number => {
            let n = to_num(v, what)?.as_f64();
            let ms = epoch_ms(n)
                .ok_or_else(|| invalid(format!("{what}: {n} is out of the range of dates")))?;
            from_millis(ms, what)
        }
        ValueKind::String => parse_text(v.as_str().unwrap_or_default())
            .ok_or_else(|| invalid(format!("{what}: cannot read {:?} as a date", text(v)))),
        ValueKind::Undefined => Err(invalid(format!("{what}: the date is undefined"))),
        kind => Err(invalid(format!(
            "{what}: expected a date (text or epoch milliseconds), got a {kind}"
        ))),
    }
}

/// `format_date(format='YYYY-MM-DD')`: formats a date in local time.
/// Tokens: `YYYY` year, `MM` month, `DD` day, `HH` hours (00–23), `mm`
/// minutes, `ss` seconds; everything else is copied. Every occurrence of a
/// token is replaced (the peer replaced only the first).
pub(crate) fn format_date(value: &Value, format: Option<&str>) -> Result<String, Error> {
    let dt = to_date(value, "format_date")?;
    let format = format.unwrap_or("YYYY-MM-DD");
    let mut out = String::with_capacity(format.len() + 8);
    let mut rest = format;
    while !rest.is_empty() {
        let (token, len) = if rest.starts_with("YYYY") {
            (Some(format!("{:04}", dt.year())), 4)
        } else if rest.starts_with("MM") {
            (Some(format!("{:02}", dt.month())), 2)
        } else if rest.starts_with("DD") {
            (Some(format!("{:02}", dt.day())), 2)
        } else if rest.starts_with("HH") {
            (Some(format!("{:02}", dt.hour())), 2)
        } else if rest.starts_with("mm") {
            (Some(format!("{:02}", dt.minute())), 2)
        } else if rest.starts_with("ss") {
            (Some(format!("{:02}", dt.second())), 2)
        } else {
            (None, rest.chars().next().map_or(1, char::len_utf8))
        };
        match token {
            Some(t) => out.push_str(&t),
            None => out.push_str(&rest[..len]),
        }
        rest = &rest[len..];
    }
    Ok(out)
}

fn shift_days(value: &Value, days: &Value, sign: i64, what: &str) -> Result<i64, Error> {
    let dt = to_date(value, what)?;
    let n = to_num(days, what)?.as_f64();
    if !n.is_finite() || n.abs() > 1e8 {
        return Err(invalid(format!(
            "{what}: {n} is not a usable number of days"
        )));
    }
    let shifted = dt.naive_local() + chrono::Duration::days(sign * n.trunc() as i64);
    from_naive(shifted)
        .map(|d| d.timestamp_millis())
        .ok_or_else(|| invalid(format!("{what}: the result is out of the range of dates")))
}

/// `add_days(n)`: the date `n` calendar days later (same local wall-clock
/// time), as epoch milliseconds.
pub(crate) fn add_days(value: &Value, days: &Value) -> Result<i64, Error> {
    shift_days(value, days, 1, "add_days")
}

/// `subtract_days(n)`: the date `n` calendar days earlier, as epoch milliseconds.
pub(crate) fn subtract_days(value: &Value, days: &Value) -> Result<i64, Error> {
    shift_days(value, days, -1, "subtract_days")
}

/// `diff_days(other)`: whole days from `other` to the value, rounded down
/// (`'2024-01-10' | diff_days('2024-01-01')` is 9).
pub(crate) fn diff_days(value: &Value, other: &Value) -> Result<i64, Error> {
    let a = to_date(value, "diff_days")?.timestamp_millis();
    let b = to_date(other, "diff_days")?.timestamp_millis();
    Ok((a - b).div_euclid(DAY_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms() {
        let d = to_date(&Value::from("2024-01-15"), "t").unwrap();
        assert_eq!((d.year(), d.month(), d.day(), d.hour()), (2024, 1, 15, 0));
        let d = to_date(&Value::from("2024-01-15T10:30"), "t").unwrap();
        assert_eq!((d.hour(), d.minute()), (10, 30));
        let d = to_date(&Value::from("2024-01-15 10:30:05.250"), "t").unwrap();
        assert_eq!(d.second(), 5);
        let d = to_date(&Value::from("2024-01-15T10:30:00Z"), "t").unwrap();
        assert_eq!(d.timestamp_millis(), 1_705_314_600_000);
        let d = to_date(&Value::from(1_705_314_600_000i64), "t").unwrap();
        assert_eq!(d.timestamp_millis(), 1_705_314_600_000);
        assert!(to_date(&Value::from("soon"), "format_date")
            .unwrap_err()
            .to_string()
            .contains("cannot read \"soon\" as a date"));
        assert!(to_date(&Value::UNDEFINED, "x").is_err());
    }
}
