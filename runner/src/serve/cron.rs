//! Cron expressions for `schedule` triggers: five fields (`minute hour
//! day-of-month month day-of-week`), or six with the seconds first (as
//! node-cron reads them), with `*`, lists, ranges, steps, and names of
//! months and weekdays. Times are UTC unless the trigger names a `timezone`.

use chrono::{DateTime, Datelike, Duration, Timelike, Utc};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    /// The seconds of a six-field expression (None: second 0).
    seconds: Option<Vec<bool>>,
    minutes: Vec<bool>,
    hours: Vec<bool>,
    days: Vec<bool>,
    months: Vec<bool>,
    weekdays: Vec<bool>,
    /// Standard cron: when both day fields are restricted, either may match.
    days_restricted: bool,
    weekdays_restricted: bool,
    /// Whose wall clock the fields are read on; UTC when none.
    tz: Option<chrono_tz::Tz>,
}

fn field(
    text: &str,
    min: u32,
    max: u32,
    names: &[&str],
    what: &str,
) -> Result<(Vec<bool>, bool), String> {
    let mut set = vec![false; (max + 1) as usize];
    let value = |s: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            return Ok(i as u32 + min);
        }
        s.parse::<u32>()
            .map_err(|_| format!("`{s}` is not a valid {what}"))
    };
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                s.parse::<u32>()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("`{part}`: the step must be a positive number"))?,
            ),
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            (v, if part.contains('/') { max } else { v })
        };
        // Sunday may be written 7.
        let (lo, hi) = if what == "day of the week" {
            (lo.min(7), hi.min(7))
        } else {
            (lo, hi)
        };
        if lo < min || hi > max.max(if what == "day of the week" { 7 } else { max }) || lo > hi {
            return Err(format!(
                "`{part}` is out of range for the {what} ({min}-{max})"
            ));
        }
        let mut v = lo;
        while v <= hi {
            set[(v % (max + 1)) as usize] = true;
            v += step;
        }
    }
    Ok((set, text != "*"))
}

impl Cron {
    pub fn parse(expr: &str) -> Result<Cron, String> {
        let mut parts: Vec<&str> = expr.split_whitespace().collect();
        if parts.len() != 5 && parts.len() != 6 {
            return Err(format!(
                "`{expr}` has {} fields; a cron expression has 5: minute hour day month weekday (or 6, with the seconds first)",
                parts.len()
            ));
        }
        let seconds = if parts.len() == 6 {
            Some(field(parts.remove(0), 0, 59, &[], "second")?.0)
        } else {
            None
        };
        const MONTHS: &[&str] = &[
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ];
        const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
        let (minutes, _) = field(parts[0], 0, 59, &[], "minute")?;
        let (hours, _) = field(parts[1], 0, 23, &[], "hour")?;
        let (days, days_restricted) = field(parts[2], 1, 31, &[], "day of the month")?;
        let (months, _) = field(parts[3], 1, 12, MONTHS, "month")?;
        let (weekdays, weekdays_restricted) = field(parts[4], 0, 6, DAYS, "day of the week")?;
        Ok(Cron {
            seconds,
            minutes,
            hours,
            days,
            months,
            weekdays,
            days_restricted,
            weekdays_restricted,
            tz: None,
        })
    }

    /// The same expression read on the wall clock of `tz` (the trigger's
    /// `timezone:`): a local time skipped by a DST change never matches, one
    /// repeated matches twice.
    pub fn in_zone(self, tz: chrono_tz::Tz) -> Cron {
        Cron {
            tz: Some(tz),
            ..self
        }
    }

    pub fn matches(&self, t: DateTime<Utc>) -> bool {
        let second = t.second() as usize;
        let second_ok = match &self.seconds {
            Some(s) => s[second],
            None => second == 0,
        };
        second_ok && self.matches_minute(t)
    }

    /// Whether the minute of `t` matches (the seconds aside).
    fn matches_minute(&self, t: DateTime<Utc>) -> bool {
        let t = match self.tz {
            Some(tz) => t.with_timezone(&tz).naive_local(),
            None => t.naive_utc(),
        };
        let dom = self.days[t.day() as usize];
        let dow = self.weekdays[t.weekday().num_days_from_sunday() as usize];
        let day = match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => dom || dow,
            _ => dom && dow,
        };
        self.minutes[t.minute() as usize]
            && self.hours[t.hour() as usize]
            && self.months[t.month() as usize]
            && day
    }

    /// `Europe/Paris, next 2026-11-30 07:00 CET`: the zone the expression
    /// is read in and its next time after `now` on that wall clock.
    pub fn when(&self, now: DateTime<Utc>) -> String {
        let zone = self.tz.unwrap_or(chrono_tz::UTC);
        match self.next_after(now) {
            Some(next) => format!(
                "{}, next {}",
                zone.name(),
                next.with_timezone(&zone).format("%Y-%m-%d %H:%M %Z")
            ),
            None => format!("{}, never", zone.name()),
        }
    }

    /// The first whole second after `after` that matches (within ~4
    /// years): a minute's start for a five-field expression.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut minute = after.with_second(0)?.with_nanosecond(0)?;
        for _ in 0..(4 * 366 * 24 * 60) {
            if self.matches_minute(minute) {
                let seconds: &[bool] = match &self.seconds {
                    Some(s) => s,
                    None => &[true],
                };
                let first = seconds.iter().enumerate().find_map(|(s, on)| {
                    let t = minute + Duration::seconds(s as i64);
                    (*on && t > after).then_some(t)
                });
                if let Some(t) = first {
                    return Some(t);
                }
            }
            minute += Duration::minutes(1);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    #[test]
    fn when_names_the_zone_and_the_next_time_on_its_clock() {
        let paris: chrono_tz::Tz = "Europe/Paris".parse().unwrap();
        let weekdays = Cron::parse("0 7 * * 1-5").unwrap();
        // Saturday noon: Monday 07:00, in winter and in summer time.
        assert_eq!(
            weekdays
                .clone()
                .in_zone(paris)
                .when(at(2026, 11, 28, 12, 0)),
            "Europe/Paris, next 2026-11-30 07:00 CET"
        );
        assert_eq!(
            weekdays.clone().in_zone(paris).when(at(2026, 7, 4, 12, 0)),
            "Europe/Paris, next 2026-07-06 07:00 CEST"
        );
        assert_eq!(
            weekdays.when(at(2026, 11, 28, 12, 0)),
            "UTC, next 2026-11-30 07:00 UTC"
        );
        assert_eq!(
            Cron::parse("0 0 30 2 *")
                .unwrap()
                .when(at(2026, 1, 1, 0, 0)),
            "UTC, never"
        );
    }

    #[test]
    fn parses_and_finds_next_times() {
        let c = Cron::parse("*/15 9-17 * * mon-fri").unwrap();
        assert_eq!(
            c.next_after(at(2026, 11, 20, 17, 50)),
            Some(at(2026, 11, 23, 9, 0)),
            "Friday evening → Monday 09:00"
        );
        assert_eq!(
            c.next_after(at(2026, 11, 23, 9, 0)),
            Some(at(2026, 11, 23, 9, 15))
        );
        let c = Cron::parse("0 0 1 jan *").unwrap();
        assert_eq!(
            c.next_after(at(2026, 11, 22, 0, 0)),
            Some(at(2027, 1, 1, 0, 0))
        );
        let c = Cron::parse("30 6 * * 7").unwrap();
        assert_eq!(
            c.next_after(at(2026, 11, 22, 7, 0)),
            Some(at(2026, 11, 29, 6, 30)),
            "7 is Sunday"
        );
        // Both day fields restricted: either matches.
        let c = Cron::parse("0 12 1 * fri").unwrap();
        assert_eq!(
            c.next_after(at(2026, 11, 22, 0, 0)),
            Some(at(2026, 11, 27, 12, 0))
        );
        for bad in [
            "* * * *",
            "60 * * * *",
            "* 24 * * *",
            "*/0 * * * *",
            "a * * * *",
            "5-1 * * * *",
        ] {
            assert!(Cron::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_sixth_field_first_is_the_seconds() {
        let t = |h, mi, sec| Utc.with_ymd_and_hms(2026, 11, 20, h, mi, sec).unwrap();
        let c = Cron::parse("*/20 * * * * *").unwrap();
        assert_eq!(c.next_after(t(10, 0, 0)), Some(t(10, 0, 20)));
        assert_eq!(c.next_after(t(10, 0, 45)), Some(t(10, 1, 0)));
        assert!(c.matches(t(10, 0, 40)) && !c.matches(t(10, 0, 41)));
        let c = Cron::parse("30 0 9 * * mon-fri").unwrap();
        assert_eq!(
            c.next_after(t(9, 0, 30)),
            Some(t(9, 0, 30) + Duration::days(3))
        );
        // Five fields fire at second 0 only.
        let c = Cron::parse("* * * * *").unwrap();
        assert!(c.matches(t(10, 1, 0)) && !c.matches(t(10, 1, 1)));
        assert_eq!(c.next_after(t(10, 0, 1)), Some(t(10, 1, 0)));
        assert!(Cron::parse("60 * * * * *").is_err());
    }

    #[test]
    fn reads_the_fields_on_the_trigger_zone_clock() {
        let ny: chrono_tz::Tz = "America/New_York".parse().unwrap();
        let c = Cron::parse("0 9 * * *").unwrap().in_zone(ny);
        // 09:00 in New York is 14:00 UTC in winter, 13:00 in summer.
        assert_eq!(
            c.next_after(at(2026, 1, 10, 0, 0)),
            Some(at(2026, 1, 10, 14, 0))
        );
        assert_eq!(
            c.next_after(at(2026, 7, 10, 0, 0)),
            Some(at(2026, 7, 10, 13, 0))
        );
        // 02:30 does not exist on the spring-forward day (2026-03-08).
        let c = Cron::parse("30 2 * * *").unwrap().in_zone(ny);
        assert_eq!(
            c.next_after(at(2026, 3, 8, 0, 0)),
            Some(at(2026, 3, 9, 6, 30))
        );
    }
}
