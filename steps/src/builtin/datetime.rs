//! `core.datetime`: dates in UTC, printed as JavaScript's `toISOString()` does.

use super::{display, Args};
use crate::core::error::ActionError;
use crate::core::time::{epoch_ms, parse_date_text, DateText};
use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Timelike, Utc};
use serde_json::{json, Value};

/// A date as [`crate::core::time`] reads one, wall-clock times in UTC.
pub fn parse_date(v: &Value) -> Option<DateTime<Utc>> {
    let ms = match v {
        Value::Number(n) => epoch_ms(n.as_f64()?)?,
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(n) => epoch_ms(n)?,
            Err(_) => match parse_date_text(s)? {
                DateText::Zoned(d) => return Some(d.with_timezone(&Utc)),
                DateText::Wall(d) => return Some(Utc.from_utc_datetime(&d)),
            },
        },
        _ => return None,
    };
    Utc.timestamp_millis_opt(ms).single()
}

pub fn iso(d: &DateTime<Utc>) -> String {
    d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `YYYY-MM-DD HH:mm:ss.SSS` style patterns (the peer's tokens); other text is kept.
pub fn format_pattern(d: &DateTime<Utc>, pattern: &str) -> String {
    const TOKENS: &[&str] = &["YYYY", "SSS", "MM", "DD", "HH", "mm", "ss", "YY"];
    let mut out = String::new();
    let mut rest = pattern;
    'outer: while !rest.is_empty() {
        for t in TOKENS {
            if let Some(r) = rest.strip_prefix(t) {
                out.push_str(&match *t {
                    "YYYY" => format!("{:04}", d.year()),
                    "YY" => format!("{:02}", d.year() % 100),
                    "MM" => format!("{:02}", d.month()),
                    "DD" => format!("{:02}", d.day()),
                    "HH" => format!("{:02}", d.hour()),
                    "mm" => format!("{:02}", d.minute()),
                    "ss" => format!("{:02}", d.second()),
                    _ => format!("{:03}", d.timestamp_subsec_millis()),
                });
                rest = r;
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

const UNITS: &[&str] = &[
    "ms", "seconds", "minutes", "hours", "days", "weeks", "months", "years",
];

fn unit_name(u: &str) -> Option<&'static str> {
    Some(match u.trim_end_matches('s') {
        "m" if u == "ms" => "ms",
        "millisecond" => "ms",
        "second" | "sec" | "" => "seconds",
        "minute" | "min" | "m" => "minutes",
        "hour" | "hr" | "h" => "hours",
        "day" | "d" => "days",
        "week" | "w" => "weeks",
        "month" => "months",
        "year" | "y" => "years",
        _ => return None,
    })
}

fn shift(d: DateTime<Utc>, amount: f64, unit: &str) -> Option<DateTime<Utc>> {
    let ms = |k: f64| d.checked_add_signed(Duration::milliseconds((amount * k).round() as i64));
    match unit {
        "ms" => ms(1.0),
        "seconds" => ms(1e3),
        "minutes" => ms(60e3),
        "hours" => ms(3600e3),
        "days" => ms(86400e3),
        "weeks" => ms(7.0 * 86400e3),
        "months" | "years" => {
            let months = (amount * if unit == "years" { 12.0 } else { 1.0 }).round() as i32;
            let m = chrono::Months::new(months.unsigned_abs());
            if months >= 0 {
                d.checked_add_months(m)
            } else {
                d.checked_sub_months(m)
            }
        }
        _ => None,
    }
}

/// `core.datetime`'s `operation` values.
pub const OPERATIONS: &[&str] = &[
    "now", "parse", "format", "add", "subtract", "diff", "start_of", "end_of",
];

pub fn datetime(a: &Args, now: DateTime<Utc>) -> Result<Value, ActionError> {
    let op = a.chosen("operation")?;
    let date = |name: &str| -> Result<DateTime<Utc>, ActionError> {
        match a.get(name) {
            None if name == "date" => Ok(now),
            None => Err(a.missing(name)),
            Some(v) => parse_date(v).ok_or_else(|| {
                a.invalid(
                    name,
                    format!(
                        "`{}` is not a date (use ISO 8601, e.g. 2026-03-04T09:00:00Z)",
                        display(v)
                    ),
                )
            }),
        }
    };
    let unit = |default: &str| -> Result<&'static str, ActionError> {
        let u = a.str("unit")?.unwrap_or(default);
        unit_name(u).ok_or_else(|| {
            a.invalid(
                "unit",
                format!("unknown unit `{u}`: use {}", UNITS.join(", ")),
            )
        })
    };
    Ok(match op {
        "now" => json!(iso(&now)),
        "parse" => json!(iso(&date("date")?)),
        "format" => {
            let d = date("date")?;
            match a.str("format")?.unwrap_or("iso") {
                "iso" => json!(iso(&d)),
                "date" => json!(d.format("%Y-%m-%d").to_string()),
                "time" => json!(d.format("%H:%M:%S%.3f").to_string()),
                "unix" => json!(d.timestamp()),
                "unix_ms" | "ms" => json!(d.timestamp_millis()),
                pattern => json!(format_pattern(&d, pattern)),
            }
        }
        "add" | "subtract" => {
            let amount = a.num("amount")?.ok_or_else(|| a.missing("amount"))?;
            let amount = if op == "add" { amount } else { -amount };
            let d = shift(date("date")?, amount, unit("days")?)
                .ok_or_else(|| a.invalid("amount", "the result is out of range"))?;
            json!(iso(&d))
        }
        "diff" => {
            let (d1, d2) = (date("date")?, date("date2")?);
            let ms = (d1 - d2).num_milliseconds() as f64;
            let u = unit("days")?;
            let v = match u {
                "ms" => ms,
                "seconds" => ms / 1e3,
                "minutes" => ms / 60e3,
                "hours" => ms / 3600e3,
                "days" => ms / 86400e3,
                "weeks" => ms / (7.0 * 86400e3),
                "months" => {
                    ((d1.year() - d2.year()) * 12 + d1.month() as i32 - d2.month() as i32) as f64
                }
                _ => (d1.year() - d2.year()) as f64,
            };
            // Whole numbers print as JavaScript would: 22, not 22.0.
            if v.fract() == 0.0 && v.abs() < 1e15 {
                json!(v as i64)
            } else {
                json!(v)
            }
        }
        _ => {
            let d = date("date")?;
            let u = a.str("unit")?.unwrap_or("day");
            let start = match unit_name(u) {
                Some("hours") => d.date_naive().and_hms_opt(d.hour(), 0, 0),
                Some("days") => d.date_naive().and_hms_opt(0, 0, 0),
                Some("weeks") => (d.date_naive()
                    - Duration::days(d.weekday().num_days_from_monday() as i64))
                .and_hms_opt(0, 0, 0),
                Some("months") => d
                    .date_naive()
                    .with_day(1)
                    .and_then(|x| x.and_hms_opt(0, 0, 0)),
                Some("years") => {
                    NaiveDate::from_ymd_opt(d.year(), 1, 1).and_then(|x| x.and_hms_opt(0, 0, 0))
                }
                _ => {
                    return Err(a.invalid(
                        "unit",
                        format!("unknown unit `{u}`: use hour, day, week, month or year"),
                    ))
                }
            }
            .map(|n| Utc.from_utc_datetime(&n))
            .ok_or_else(|| a.invalid("date", "out of range"))?;
            if op == "start_of" {
                json!(iso(&start))
            } else {
                let next = shift(start, 1.0, unit_name(u).unwrap_or("days"))
                    .ok_or_else(|| a.invalid("date", "out of range"))?;
                json!(iso(&(next - Duration::milliseconds(1))))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: Value) -> Result<Value, ActionError> {
        let now = Utc.with_ymd_and_hms(2026, 11, 23, 10, 30, 0).unwrap();
        datetime(
            &Args::new(
                crate::core::args::spec_of(super::super::CORE_SPECS, "datetime", "core.datetime")
                    .unwrap(),
                &v,
            )
            .unwrap(),
            now,
        )
    }

    #[test]
    fn operations() {
        assert_eq!(run(json!({})).unwrap(), json!("2026-11-23T10:30:00.000Z"));
        assert_eq!(
            run(json!({"operation": "add", "amount": 1, "unit": "months", "date": "2026-01-31"}))
                .unwrap(),
            json!("2026-02-28T00:00:00.000Z")
        );
        assert_eq!(
            run(json!({"operation": "subtract", "amount": 2, "unit": "hours"})).unwrap(),
            json!("2026-11-23T08:30:00.000Z")
        );
        assert_eq!(
            run(
                json!({"operation": "diff", "date": "2026-12-15", "date2": "2026-11-23T00:00:00Z"})
            )
            .unwrap(),
            json!(22)
        );
        assert_eq!(
            run(json!({"operation": "start_of", "unit": "week"})).unwrap(),
            json!("2026-11-23T00:00:00.000Z")
        );
        assert_eq!(
            run(json!({"operation": "end_of", "unit": "month"})).unwrap(),
            json!("2026-11-30T23:59:59.999Z")
        );
        assert_eq!(
            run(json!({"operation": "format", "format": "unix", "date": 1700000000})).unwrap(),
            json!(1700000000)
        );
        assert_eq!(
            run(json!({"operation": "format", "format": "DD.MM.YYYY", "date": "2026-03-04"}))
                .unwrap(),
            json!("04.03.2026")
        );
        let e = run(json!({"operation": "parse", "date": "yesterday-ish"}))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("input `date` of `core.datetime`: `yesterday-ish` is not a date"),
            "{e}"
        );
        let e = run(json!({"operation": "add", "amount": 1, "unit": "fortnights"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown unit `fortnights`"), "{e}");
    }
}
