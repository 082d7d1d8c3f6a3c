//! Dates as people write them in questions, read into day ranges relative
//! to "today": `November 17`, `17 Nov`, `Dec 1st`, `the 1st of December`,
//! `2026-12-01` (with an optional year after the day), `next Friday`,
//! `last Friday`, `this Friday`, `on Friday`, and any of these after
//! `before`, `after`, `since`, `until`, `by` or `from` (an open range).
//! Whole weeks, months and years (`this week`, `in March`) are read by the
//! caller.

use crate::retrieval::syntax::DateRange;
use chrono::{Datelike, Duration, NaiveDate, Weekday};

const MONTHS: &[(&str, u32)] = &[
    ("january", 1),
    ("jan", 1),
    ("february", 2),
    ("feb", 2),
    ("march", 3),
    ("mar", 3),
    ("april", 4),
    ("apr", 4),
    ("may", 5),
    ("june", 6),
    ("jun", 6),
    ("july", 7),
    ("jul", 7),
    ("august", 8),
    ("aug", 8),
    ("september", 9),
    ("sept", 9),
    ("sep", 9),
    ("october", 10),
    ("oct", 10),
    ("november", 11),
    ("nov", 11),
    ("december", 12),
    ("dec", 12),
];

const WEEKDAYS: &[(&str, Weekday)] = &[
    ("monday", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sunday", Weekday::Sun),
];

/// Whether `w` (lower case) names a month, in full or abbreviated, or a day
/// of the week: such words are dates, not entities.
pub fn is_calendar_word(w: &str) -> bool {
    month(w).is_some() || weekday(w).is_some()
}

fn month(w: &str) -> Option<u32> {
    MONTHS.iter().find(|(n, _)| *n == w).map(|(_, m)| *m)
}

fn weekday(w: &str) -> Option<Weekday> {
    WEEKDAYS.iter().find(|(n, _)| *n == w).map(|(_, d)| *d)
}

/// `17`, `17th`, `1st`, `2nd`, `3rd` as a day of the month.
fn day_number(w: &str) -> Option<u32> {
    let digits = w
        .strip_suffix("st")
        .or_else(|| w.strip_suffix("nd"))
        .or_else(|| w.strip_suffix("rd"))
        .or_else(|| w.strip_suffix("th"))
        .unwrap_or(w);
    let n: u32 = digits.parse().ok()?;
    (1..=31).contains(&n).then_some(n)
}

fn year(w: Option<&&str>) -> Option<i32> {
    w.and_then(|y| y.parse::<i32>().ok())
        .filter(|y| (1900..3000).contains(y))
}

/// A day written at `words[i..]`: the day and how many words it took.
fn day_at(words: &[&str], i: usize, today: NaiveDate) -> Option<(NaiveDate, usize)> {
    let w = words[i];
    if w.len() == 10 {
        if let Ok(d) = NaiveDate::parse_from_str(w, "%Y-%m-%d") {
            return Some((d, 1));
        }
    }
    // "November 17", "Dec 1st", "November 17 2026"
    if let (Some(m), Some(d)) = (month(w), words.get(i + 1).and_then(|x| day_number(x))) {
        let y = year(words.get(i + 2));
        let date = NaiveDate::from_ymd_opt(y.unwrap_or(today.year()), m, d)?;
        return Some((date, 2 + usize::from(y.is_some())));
    }
    // "17 November", "1st of December", "17 Nov 2027"
    if let Some(d) = day_number(w) {
        let of = usize::from(words.get(i + 1) == Some(&"of"));
        if let Some(m) = words.get(i + 1 + of).and_then(|x| month(x)) {
            let y = year(words.get(i + 2 + of));
            let date = NaiveDate::from_ymd_opt(y.unwrap_or(today.year()), m, d)?;
            return Some((date, 2 + of + usize::from(y.is_some())));
        }
    }
    None
}

/// `next Friday` (the first after today), `last Friday` (the last before
/// today), `this Friday` (in this week, Monday to Sunday), `Friday` or `on
/// Friday` (today or the next one).
fn weekday_at(words: &[&str], i: usize, today: NaiveDate) -> Option<(NaiveDate, usize)> {
    let (lead, wd) = match (words[i], words.get(i + 1).and_then(|x| weekday(x))) {
        (l @ ("next" | "last" | "this" | "coming" | "on"), Some(wd)) => (Some(l), wd),
        (w, _) => (None, weekday(w)?),
    };
    let from_monday = |d: Weekday| i64::from(d.num_days_from_monday());
    let ahead = (from_monday(wd) - from_monday(today.weekday())).rem_euclid(7);
    let date = match lead {
        Some("next") | Some("coming") => today + Duration::days(if ahead == 0 { 7 } else { ahead }),
        Some("last") => {
            let back = (from_monday(today.weekday()) - from_monday(wd)).rem_euclid(7);
            today - Duration::days(if back == 0 { 7 } else { back })
        }
        Some("this") => {
            today - Duration::days(from_monday(today.weekday())) + Duration::days(from_monday(wd))
        }
        _ => today + Duration::days(ahead),
    };
    Some((date, if lead.is_some() { 2 } else { 1 }))
}

/// The first day expression in `words` (lower case): the words it took
/// (with a leading `before`/`after`/`since`/`until`/`by`/`from`) and its range.
pub fn day_range(words: &[&str], today: NaiveDate) -> Option<(Vec<String>, DateRange)> {
    for i in 0..words.len() {
        let found = day_at(words, i, today).or_else(|| weekday_at(words, i, today));
        let Some((day, n)) = found else { continue };
        let prefix = i.checked_sub(1).map(|p| words[p]);
        let open = match prefix {
            Some("before") => Some(DateRange {
                from: None,
                to: day.pred_opt(),
            }),
            Some("after") => Some(DateRange {
                from: day.succ_opt(),
                to: None,
            }),
            Some("since" | "from") => Some(DateRange {
                from: Some(day),
                to: None,
            }),
            Some("until" | "till" | "by") => Some(DateRange {
                from: None,
                to: Some(day),
            }),
            _ => None,
        };
        // The words taken include the prefix when it made the range open.
        let start = if open.is_some() { i - 1 } else { i };
        let said = words[start..i + n].iter().map(|w| w.to_string()).collect();
        let range = open.unwrap_or(DateRange::day(day));
        return Some((said, range));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thursday 2026-11-19.
    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 19).unwrap()
    }

    fn read(q: &str) -> Option<(String, Option<String>, Option<String>)> {
        let lower = q.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric() && c != '-')
            .filter(|w| !w.is_empty())
            .collect();
        day_range(&words, today()).map(|(said, r)| {
            (
                said.join(" "),
                r.from.map(|d| d.to_string()),
                r.to.map(|d| d.to_string()),
            )
        })
    }

    fn day(q: &str) -> String {
        let (_, from, to) = read(q).unwrap_or_else(|| panic!("no date in {q:?}"));
        assert_eq!(from, to, "{q}: one day");
        from.unwrap()
    }

    #[test]
    fn month_and_day_in_either_order() {
        assert_eq!(day("what happened on November 17?"), "2026-11-17");
        assert_eq!(day("meetings on 17 Nov"), "2026-11-17");
        assert_eq!(day("anything due Dec 1"), "2026-12-01");
        assert_eq!(day("anything due 1 December"), "2026-12-01");
        assert_eq!(day("the 1st of December"), "2026-12-01");
        assert_eq!(day("due Dec 1st"), "2026-12-01");
        assert_eq!(day("the race on March 14 2027"), "2027-03-14");
        assert_eq!(day("the race on 14 March 2027"), "2027-03-14");
        assert_eq!(day("what is on 2026-12-02"), "2026-12-02");
        // A day that does not exist is not a date.
        assert_eq!(read("February 30"), None);
        // "may" as a verb is not May.
        assert_eq!(read("what may I eat"), None);
        assert_eq!(read("how many km"), None);
    }

    #[test]
    fn weekdays_relative_to_today() {
        // Today is Thursday 2026-11-19.
        assert_eq!(day("what do I have next Friday"), "2026-11-20");
        assert_eq!(day("next Thursday"), "2026-11-26");
        assert_eq!(day("what did I do last Friday"), "2026-11-13");
        assert_eq!(day("last Thursday"), "2026-11-12");
        assert_eq!(day("this Monday"), "2026-11-16");
        assert_eq!(day("on Saturday"), "2026-11-21");
        assert_eq!(day("Thursday"), "2026-11-19");
    }

    #[test]
    fn before_after_since_until_make_open_ranges() {
        assert_eq!(
            read("tasks due before 2026-12-01"),
            Some(("before 2026-12-01".into(), None, Some("2026-11-30".into())))
        );
        assert_eq!(
            read("notes after Nov 17"),
            Some(("after nov 17".into(), Some("2026-11-18".into()), None))
        );
        assert_eq!(
            read("runs since 1 November"),
            Some(("since 1 november".into(), Some("2026-11-01".into()), None))
        );
        assert_eq!(
            read("what is due by next Friday"),
            Some(("by next friday".into(), None, Some("2026-11-20".into())))
        );
    }

    #[test]
    fn calendar_words() {
        assert!(is_calendar_word("dec") && is_calendar_word("friday"));
        assert!(!is_calendar_word("apollo"));
    }
}
