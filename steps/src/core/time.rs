//! Time, one way everywhere. Durations: how a workflow writes them (`500ms`,
//! `5s`, `2m`, `1h`, `3d`, `2w`, or a number of milliseconds), how an age is
//! given on the command line (`30d`), and how a duration is shown (`100ms`,
//! `2s`, `1.5s`). Dates: which texts and numbers read as a date
//! ([`parse_date_text`], [`epoch_ms`]). The wall [`Clock`] a run reads
//! (`now()`, `core.datetime`, recency, event times) comes in through its
//! capabilities. Values no clock can hold are errors, never a panic.

use chrono::{DateTime, FixedOffset, Local, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde_json::Value;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// The longest duration accepted anywhere (a hundred years).
pub const MAX: Duration = Duration::from_secs(100 * 365 * 86400);

/// Seconds in one of `unit`, for the units a duration may be written in.
fn unit_secs(unit: &str) -> Option<f64> {
    Some(match unit {
        "ms" => 0.001,
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hr" | "hours" => 3600.0,
        "d" | "days" => 86400.0,
        "w" | "weeks" => 7.0 * 86400.0,
        _ => return None,
    })
}

/// `secs` as a duration, when one can hold it (finite, not negative, at
/// most [`MAX`]).
pub fn from_secs(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0)
        .then(|| Duration::try_from_secs_f64(secs).ok())
        .flatten()
        .filter(|d| *d <= MAX)
}

/// `5s`, `1.5m`, `250` (bare: `bare_unit`); None when it is not one.
fn parse_text(s: &str, bare_unit: Option<&str>) -> Option<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let unit = match unit.trim() {
        "" => bare_unit?,
        u => u,
    };
    from_secs(n * unit_secs(unit)?)
}

/// A duration as a workflow writes it: a number of milliseconds, or text
/// with a unit (`500ms`, `5s`, `2m`, `1h`, `3d`, `2w`; bare text is ms).
pub fn parse_duration(v: &Value) -> Result<Duration, String> {
    let shown = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let parsed = match v {
        Value::Number(n) => n.as_f64().and_then(|ms| from_secs(ms / 1000.0)),
        Value::String(s) => parse_text(s, Some("ms")),
        _ => None,
    };
    parsed.ok_or_else(|| {
        format!(
            "invalid duration `{shown}`: use milliseconds or a string like `500ms`, `5s`, `2m`, `1h`, `3d` (at most 100 years)"
        )
    })
}

/// An age on the command line (`30d`, `12h`, `90m`, `2w`): a unit is required.
pub fn parse_age(s: &str) -> Option<Duration> {
    parse_text(s, None)
}

/// `100ms`, `2s`, `1.5s`, `3m`, `2h`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) && ms >= 60_000 {
        if ms.is_multiple_of(3_600_000) {
            format!("{}h", ms / 3_600_000)
        } else {
            format!("{}m", ms / 60_000)
        }
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Where "now" comes from: the system's clock, or a fixed one (tests,
/// reproducible runs). Durations are measured with tokio's clock, which a
/// test may pause and advance.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since 1970.
    fn now_ms(&self) -> i64;

    fn now(&self) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(self.now_ms())
            .single()
            .unwrap_or_default()
    }

    /// Today's date in local time.
    fn today(&self) -> NaiveDate {
        Local
            .timestamp_millis_opt(self.now_ms())
            .single()
            .map(|d| d.date_naive())
            .unwrap_or_default()
    }
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        Utc::now().timestamp_millis()
    }
}

/// A clock that says what it is told.
#[derive(Debug, Default)]
pub struct FixedClock(AtomicI64);

impl FixedClock {
    pub fn at(ms: i64) -> Self {
        FixedClock(AtomicI64::new(ms))
    }

    pub fn advance(&self, by: Duration) {
        let ms = by.as_millis().min(i64::MAX as u128) as i64;
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(ms))
            });
    }
}

impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The date an action takes as "today": `value` (a date text, the input
/// `field`; only its date counts), else the clock's local date.
pub fn today(value: Option<&Value>, field: &str, clock: &dyn Clock) -> Result<NaiveDate, String> {
    match value {
        None => Ok(clock.today()),
        Some(Value::String(s)) => match parse_date_text(s) {
            Some(DateText::Zoned(d)) => Ok(d.date_naive()),
            Some(DateText::Wall(d)) => Ok(d.date()),
            None => Err(format!(
                "input `{field}` must be a date like 2026-11-20, got `{s}`"
            )),
        },
        Some(other) => Err(format!(
            "input `{field}` must be a date like 2026-11-20, got {}",
            crate::core::error::type_name(other)
        )),
    }
}

/// The wait before retry number `attempt + 1` (`attempt` 0-based): `base`
/// doubled per attempt when `exponential`, never above `cap`, and spread
/// ±10 % so that retries of many runs do not land together. Used by step
/// retries and by every HTTP client alike.
pub fn backoff(base: Duration, cap: Duration, exponential: bool, attempt: u32) -> Duration {
    let d = if exponential {
        base.saturating_mul(1u32 << attempt.min(20))
    } else {
        base
    };
    d.min(cap).mul_f64(0.9 + fastrand::f64() * 0.2)
}

/// A date read from text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateText {
    /// The text gave its offset (RFC 3339 with `Z` or `+02:00`, RFC 2822).
    Zoned(DateTime<FixedOffset>),
    /// A wall-clock time without an offset; the caller says in which zone.
    Wall(NaiveDateTime),
}

/// The date texts accepted everywhere: RFC 3339 / ISO 8601 with an offset
/// (`2024-01-15T10:00:00Z`), RFC 2822, and wall-clock times without one
/// (`2024-01-15`, `2024-01-15T10:30`, `2024-01-15 10:30:00`, fractions of a
/// second allowed).
pub fn parse_date_text(s: &str) -> Option<DateText> {
    let s = s.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(s) {
        return Some(DateText::Zoned(d));
    }
    if let Ok(d) = DateTime::parse_from_rfc2822(s) {
        return Some(DateText::Zoned(d));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(DateText::Wall(d));
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(DateText::Wall)
}

/// A number as a date, in milliseconds since 1970: it is milliseconds, or
/// seconds when below 10^11 (before March 1973 as milliseconds), as APIs
/// send them. None when no date can be that far (beyond the year 9999 or
/// before 1970-ish negatives of the same size).
/// Milliseconds since 1970 as RFC 3339 in UTC, to the millisecond.
pub fn iso_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub fn epoch_ms(n: f64) -> Option<i64> {
    if !n.is_finite() {
        return None;
    }
    let ms = if n.abs() < 1e11 { n * 1000.0 } else { n };
    const LIMIT: f64 = 253_402_300_799_999.0;
    (ms.abs() <= LIMIT).then_some(ms.trunc() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_one_way() {
        assert_eq!(
            parse_duration(&json!(250)).unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            parse_duration(&json!("250")).unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            parse_duration(&json!("5s")).unwrap(),
            Duration::from_secs(5)
        );
        assert_eq!(
            parse_duration(&json!("1.5s")).unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            parse_duration(&json!("2m")).unwrap(),
            Duration::from_secs(120)
        );
        assert_eq!(
            parse_duration(&json!("3d")).unwrap(),
            Duration::from_secs(3 * 86400)
        );
        assert_eq!(
            parse_duration(&json!("2w")).unwrap(),
            Duration::from_secs(14 * 86400)
        );
        for bad in [json!("soon"), json!(-1), json!(true), json!("5y")] {
            assert!(parse_duration(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_no_clock_can_hold_are_errors() {
        for huge in [
            json!(1e308),
            json!("1e300s"),
            json!("99999999999999999999d"),
            json!(f64::MAX),
        ] {
            assert!(parse_duration(&huge).is_err(), "{huge}");
        }
        assert!(parse_age("99999999999999999999w").is_none());
    }

    #[test]
    fn ages_need_a_unit() {
        assert_eq!(parse_age("30d"), Some(Duration::from_secs(30 * 86400)));
        assert_eq!(parse_age("12h"), Some(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("90m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_age("2w"), Some(Duration::from_secs(14 * 86400)));
        assert_eq!(parse_age("30"), None);
        assert_eq!(parse_age("d"), None);
        assert_eq!(parse_age("3y"), None);
    }

    #[test]
    fn shown() {
        assert_eq!(human(Duration::from_millis(100)), "100ms");
        assert_eq!(human(Duration::from_secs(2)), "2s");
        assert_eq!(human(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human(Duration::from_secs(180)), "3m");
        assert_eq!(human(Duration::from_secs(7200)), "2h");
    }

    #[test]
    fn dates_read_the_same_everywhere() {
        let zoned = |s: &str| match parse_date_text(s) {
            Some(DateText::Zoned(d)) => d.timestamp_millis(),
            other => panic!("{s}: {other:?}"),
        };
        let wall = |s: &str| match parse_date_text(s) {
            Some(DateText::Wall(d)) => d.and_utc().timestamp_millis(),
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(zoned("2024-01-15T10:00:00Z"), 1_705_312_800_000);
        assert_eq!(zoned("2024-01-15T12:00:00+02:00"), 1_705_312_800_000);
        assert_eq!(zoned("Mon, 15 Jan 2024 10:00:00 +0000"), 1_705_312_800_000);
        assert_eq!(wall("2024-01-15 10:00:00"), 1_705_312_800_000);
        assert_eq!(wall(" 2024-01-15T10:00:00.000 "), 1_705_312_800_000);
        assert_eq!(wall("2024-01-15T10:00"), 1_705_312_800_000);
        assert_eq!(wall("2024-01-15"), 1_705_276_800_000);
        for bad in ["", "tomorrow", "2024-13-01", "2024-02-30", "15/01/2024"] {
            assert_eq!(parse_date_text(bad), None, "{bad}");
        }
        assert_eq!(epoch_ms(1_705_312_800.0), Some(1_705_312_800_000));
        assert_eq!(epoch_ms(1_705_312_800_000.0), Some(1_705_312_800_000));
        for bad in [f64::NAN, f64::INFINITY, 1e300, -1e300] {
            assert_eq!(epoch_ms(bad), None);
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_spread() {
        let s = Duration::from_secs(1);
        for attempt in 0..40 {
            let want = Duration::from_secs((1u64 << attempt.min(5)).min(30));
            let d = backoff(s, Duration::from_secs(30), true, attempt);
            assert!(
                d >= want.mul_f64(0.9) && d <= want.mul_f64(1.1),
                "{attempt}: {d:?}"
            );
            let fixed = backoff(s, Duration::from_secs(30), false, attempt);
            assert!(fixed >= s.mul_f64(0.9) && fixed <= s.mul_f64(1.1));
        }
        assert_eq!(
            backoff(Duration::ZERO, Duration::from_secs(30), true, 3),
            Duration::ZERO
        );
        let waits: std::collections::HashSet<_> =
            (0..20).map(|_| backoff(s, s, false, 0)).collect();
        assert!(waits.len() > 1, "jittered");
    }

    #[test]
    fn today_comes_from_the_inputs_or_the_clock() {
        let clock = FixedClock::at(1_705_312_800_000); // 2024-01-15T10:00Z
        let d = |v: Option<Value>| today(v.as_ref(), "today", &clock);
        assert_eq!(d(None).unwrap(), clock.today());
        assert_eq!(
            d(Some(serde_json::json!("2026-11-20T09:30:00Z"))).unwrap(),
            NaiveDate::from_ymd_opt(2026, 11, 20).unwrap()
        );
        assert_eq!(
            d(Some(serde_json::json!("2026-11-21"))).unwrap(),
            NaiveDate::from_ymd_opt(2026, 11, 21).unwrap()
        );
        let e = d(Some(serde_json::json!("soon"))).unwrap_err();
        assert!(e.contains("`today`") && e.contains("soon"), "{e}");
        assert!(d(Some(serde_json::json!(3))).is_err());
        clock.advance(Duration::from_secs(86_400));
        assert_eq!(clock.now_ms(), 1_705_399_200_000);
    }
}
