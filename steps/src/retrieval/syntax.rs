//! The search-box syntax shared by `kb.search` and `query.analyze`:
//! words, `"quoted phrases"`, `prefix*`, `-excluded`, and operators
//! `in:work type:task tag:urgent date:today path:Work/Projects key:value`.

use chrono::{Datelike, Duration, NaiveDate};
use serde_json::{json, Map, Value};

/// A query split into its parts. Operator values keep their case; filters
/// compare case-insensitively.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedQuery {
    pub terms: Vec<String>,
    pub phrases: Vec<String>,
    pub prefixes: Vec<String>,
    pub excluded: Vec<String>,
    /// `in:` and `path:` values: path prefixes relative to the KB root.
    pub paths: Vec<String>,
    /// `key:value` operators other than `in`, `path` and `date`
    /// (`type:task` → ("type", "task"), `tag:x` → ("tags", "x")).
    pub fields: Vec<(String, String)>,
    /// `date:` resolved to an inclusive day range.
    pub date: Option<DateRange>,
    /// `date:` values that could not be read.
    pub bad_dates: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateRange {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
}

impl DateRange {
    pub fn day(d: NaiveDate) -> Self {
        DateRange {
            from: Some(d),
            to: Some(d),
        }
    }
    pub fn to_json(&self) -> Value {
        let f = |d: Option<NaiveDate>| d.map(|d| json!(d.to_string())).unwrap_or(Value::Null);
        json!({"from": f(self.from), "to": f(self.to)})
    }
    pub fn contains(&self, d: NaiveDate) -> bool {
        self.from.is_none_or(|f| d >= f) && self.to.is_none_or(|t| d <= t)
    }
}

impl ParsedQuery {
    /// The free text (terms, phrases and prefixes) without operators.
    pub fn text(&self) -> String {
        let mut parts: Vec<String> = self.terms.clone();
        parts.extend(self.phrases.iter().map(|p| format!("\"{p}\"")));
        parts.extend(self.prefixes.iter().map(|p| format!("{p}*")));
        parts.join(" ")
    }

    pub fn has_operators(&self) -> bool {
        !self.paths.is_empty() || !self.fields.is_empty() || self.date.is_some()
    }

    /// The operators as a `filters` object for `kb.search`.
    pub fn filters_json(&self) -> Value {
        let mut m = Map::new();
        for (k, v) in &self.fields {
            match m.get_mut(k) {
                Some(Value::Array(a)) => a.push(json!(v)),
                Some(other) => *other = json!([other.clone(), v]),
                None => {
                    m.insert(k.clone(), json!(v));
                }
            }
        }
        Value::Object(m)
    }
}

/// Operator keys that are not metadata fields.
const PATH_KEYS: &[&str] = &["in", "path"];

/// Splits `q`. With `operators` false, `key:value` words are plain terms.
/// Words that shape a question rather than say what it is about: question
/// words, pronouns, auxiliaries (the index already drops English stop words
/// such as "the" and "is"). "What time is my flight" is about a flight; these
/// words otherwise match every `## What` heading and every "my".
pub const QUESTION_WORDS: &[&str] = &[
    "what", "whats", "what's", "when", "where", "who", "whom", "whose", "which", "why", "how", "i",
    "i'm", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your", "yours", "he",
    "him", "his", "she", "her", "hers", "it", "its", "they", "them", "theirs", "do", "does", "did",
    "done", "doing", "have", "has", "had", "having", "am", "were", "been", "being", "can", "could",
    "should", "would", "shall", "may", "might", "must", "get", "got", "much", "many", "please",
    "tell", "know", "any", "some", "ever", "still", "again",
];

/// The terms a search should match: `terms` without [`QUESTION_WORDS`] (and
/// without "time" right after "what": "what time" asks for a time). When
/// nothing else is left, all of them.
pub fn content_terms(terms: &[String]) -> Vec<&str> {
    let lower: Vec<String> = terms.iter().map(|t| t.to_lowercase()).collect();
    let kept: Vec<&str> = terms
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            let w = lower[*i].trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
            let after_what = *i > 0 && lower[i - 1] == "what";
            let asks_for_a_time = after_what && w == "time";
            !(QUESTION_WORDS.contains(&w) || asks_for_a_time)
        })
        .map(|(_, t)| t.as_str())
        .collect();
    if kept.is_empty() {
        terms.iter().map(String::as_str).collect()
    } else {
        kept
    }
}

pub fn parse(q: &str, operators: bool, today: NaiveDate) -> ParsedQuery {
    let mut out = ParsedQuery::default();
    let mut chars = q.char_indices().peekable();
    let mut words: Vec<(bool, String)> = Vec::new(); // (quoted, text)
    while let Some(&(i, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if c == '"' {
            chars.next();
            let start = i + 1;
            let mut end = q.len();
            let mut prefix = false;
            for (j, c2) in chars.by_ref() {
                if c2 == '"' {
                    end = j;
                    break;
                }
            }
            if let Some(&(_, '*')) = chars.peek() {
                chars.next();
                prefix = true;
            }
            let phrase = q[start..end].trim().to_string();
            if !phrase.is_empty() {
                if prefix {
                    out.prefixes.push(phrase);
                } else {
                    words.push((true, phrase));
                }
            }
            continue;
        }
        let start = i;
        let mut end = q.len();
        while let Some(&(j, c2)) = chars.peek() {
            if c2.is_whitespace() {
                end = j;
                break;
            }
            // `key:"quoted value"` keeps its spaces.
            if c2 == '"' && q[start..j].ends_with(':') {
                chars.next();
                for (k, c3) in chars.by_ref() {
                    if c3 == '"' {
                        end = k + 1;
                        break;
                    }
                }
                break;
            }
            chars.next();
        }
        words.push((false, q[start..end].to_string()));
    }
    for (quoted, w) in words {
        if quoted {
            out.phrases.push(w);
            continue;
        }
        if operators {
            if let Some((k, v)) = operator(&w) {
                let v = v.trim_matches('"').to_string();
                match k.as_str() {
                    k if PATH_KEYS.contains(&k) => out.paths.push(v),
                    "date" => match resolve_date(&v, today) {
                        Some(r) => out.date = Some(r),
                        None => out.bad_dates.push(v),
                    },
                    "tag" | "tags" => out
                        .fields
                        .push(("tags".into(), v.trim_start_matches('#').into())),
                    _ => out.fields.push((k, v)),
                }
                continue;
            }
        }
        if let Some(x) = w.strip_prefix('-').filter(|x| !x.is_empty()) {
            out.excluded.push(x.to_string());
        } else if let Some(x) = w.strip_suffix('*').filter(|x| !x.is_empty()) {
            out.prefixes.push(x.to_string());
        } else if !w.is_empty() {
            out.terms.push(w);
        }
    }
    out
}

/// `key:value` with a lower-case identifier key (not a URL, not a time).
fn operator(w: &str) -> Option<(String, String)> {
    let (k, v) = w.split_once(':')?;
    if k.is_empty()
        || v.is_empty()
        || v.starts_with("//")
        || !k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
    {
        return None;
    }
    Some((k.to_string(), v.to_string()))
}

/// Reads a date expression into an inclusive range: `today`, `yesterday`,
/// `tomorrow`, `this-week`/`this_week`, `last-week`, `next-week`,
/// `this-month`, `last-month`, `this-year`, `last-year`, `YYYY`, `YYYY-MM`,
/// `YYYY-MM-DD`, `>DATE`, `>=DATE`, `<DATE`, `<=DATE`, `DATE..DATE`,
/// `last-7-days` (any N).
pub fn resolve_date(v: &str, today: NaiveDate) -> Option<DateRange> {
    let v = v.trim().to_lowercase().replace([' ', '_'], "-");
    let week_start = today - Duration::days(today.weekday().num_days_from_monday() as i64);
    let month_start = today.with_day(1)?;
    let range = |f: NaiveDate, t: NaiveDate| {
        Some(DateRange {
            from: Some(f),
            to: Some(t),
        })
    };
    match v.as_str() {
        "today" => return Some(DateRange::day(today)),
        "yesterday" => return Some(DateRange::day(today - Duration::days(1))),
        "tomorrow" => return Some(DateRange::day(today + Duration::days(1))),
        "this-week" => return range(week_start, week_start + Duration::days(6)),
        "last-week" => {
            return range(
                week_start - Duration::days(7),
                week_start - Duration::days(1),
            )
        }
        "next-week" => {
            return range(
                week_start + Duration::days(7),
                week_start + Duration::days(13),
            )
        }
        "this-month" => return range(month_start, end_of_month(month_start)?),
        "last-month" => {
            let prev = (month_start - Duration::days(1)).with_day(1)?;
            return range(prev, month_start - Duration::days(1));
        }
        "next-month" => {
            let next = end_of_month(month_start)? + Duration::days(1);
            return range(next, end_of_month(next)?);
        }
        "this-year" => {
            return range(
                NaiveDate::from_ymd_opt(today.year(), 1, 1)?,
                NaiveDate::from_ymd_opt(today.year(), 12, 31)?,
            )
        }
        "last-year" => {
            return range(
                NaiveDate::from_ymd_opt(today.year() - 1, 1, 1)?,
                NaiveDate::from_ymd_opt(today.year() - 1, 12, 31)?,
            )
        }
        _ => {}
    }
    if let Some(n) = v
        .strip_prefix("last-")
        .and_then(|r| r.strip_suffix("-days"))
        .and_then(|n| n.parse::<i64>().ok())
    {
        return range(today - Duration::days(n - 1), today);
    }
    if let Some((a, b)) = v.split_once("..") {
        let a = if a.is_empty() { None } else { Some(span(a)?.0) };
        let b = if b.is_empty() { None } else { Some(span(b)?.1) };
        return Some(DateRange { from: a, to: b });
    }
    if let Some(r) = v.strip_prefix(">=") {
        return Some(DateRange {
            from: Some(span(r)?.0),
            to: None,
        });
    }
    if let Some(r) = v.strip_prefix('>') {
        return Some(DateRange {
            from: Some(span(r)?.1 + Duration::days(1)),
            to: None,
        });
    }
    if let Some(r) = v.strip_prefix("<=") {
        return Some(DateRange {
            from: None,
            to: Some(span(r)?.1),
        });
    }
    if let Some(r) = v.strip_prefix('<') {
        return Some(DateRange {
            from: None,
            to: Some(span(r)?.0 - Duration::days(1)),
        });
    }
    let (f, t) = span(&v)?;
    range(f, t)
}

/// `YYYY`, `YYYY-MM` or `YYYY-MM-DD` as its first and last day.
pub fn span(s: &str) -> Option<(NaiveDate, NaiveDate)> {
    let parts: Vec<&str> = s.split('-').collect();
    let num = |p: &str| p.parse::<u32>().ok();
    match parts.as_slice() {
        [y] if y.len() == 4 => {
            let y = num(y)? as i32;
            Some((
                NaiveDate::from_ymd_opt(y, 1, 1)?,
                NaiveDate::from_ymd_opt(y, 12, 31)?,
            ))
        }
        [y, m] if y.len() == 4 => {
            let f = NaiveDate::from_ymd_opt(num(y)? as i32, num(m)?, 1)?;
            Some((f, end_of_month(f)?))
        }
        [y, m, d] if y.len() == 4 => {
            let d = NaiveDate::from_ymd_opt(num(y)? as i32, num(m)?, num(d)?)?;
            Some((d, d))
        }
        _ => None,
    }
}

fn end_of_month(first: NaiveDate) -> Option<NaiveDate> {
    let (y, m) = if first.month() == 12 {
        (first.year() + 1, 1)
    } else {
        (first.year(), first.month() + 1)
    };
    Some(NaiveDate::from_ymd_opt(y, m, 1)? - Duration::days(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn question_words_are_not_searched_unless_nothing_else_is_left() {
        let t = |q: &str| -> Vec<String> { q.split_whitespace().map(String::from).collect() };
        assert_eq!(
            content_terms(&t("What time is my flight to Portugal?")),
            ["is", "flight", "to", "Portugal?"]
        );
        assert_eq!(
            content_terms(&t("what's the target time")),
            ["the", "target", "time"]
        );
        assert_eq!(content_terms(&t("who are you")), ["are"]);
        assert_eq!(content_terms(&t("how why")), ["how", "why"]);
    }

    #[test]
    fn splits_terms_phrases_and_operators() {
        let p = parse(
            r#"apollo "rate limit" dep* -draft in:work type:task tag:#urgent date:today status:"at risk" http://x.y"#,
            true,
            d("2026-11-20"),
        );
        assert_eq!(p.terms, ["apollo", "http://x.y"]);
        assert_eq!(p.phrases, ["rate limit"]);
        assert_eq!(p.prefixes, ["dep"]);
        assert_eq!(p.excluded, ["draft"]);
        assert_eq!(p.paths, ["work"]);
        assert_eq!(
            p.fields,
            [
                ("type".to_string(), "task".to_string()),
                ("tags".to_string(), "urgent".to_string()),
                ("status".to_string(), "at risk".to_string())
            ]
        );
        assert_eq!(p.date, Some(DateRange::day(d("2026-11-20"))));
        let plain = parse("in:work", false, d("2026-11-20"));
        assert_eq!(plain.terms, ["in:work"]);
    }

    #[test]
    fn resolves_relative_dates() {
        let today = d("2026-11-20"); // a Friday
        let r = |s| resolve_date(s, today).unwrap();
        assert_eq!(
            r("last-week"),
            DateRange {
                from: Some(d("2026-11-09")),
                to: Some(d("2026-11-15"))
            }
        );
        assert_eq!(
            r("this week"),
            DateRange {
                from: Some(d("2026-11-16")),
                to: Some(d("2026-11-22"))
            }
        );
        assert_eq!(
            r("last-month"),
            DateRange {
                from: Some(d("2026-10-01")),
                to: Some(d("2026-10-31"))
            }
        );
        assert_eq!(
            r("2026-02"),
            DateRange {
                from: Some(d("2026-02-01")),
                to: Some(d("2026-02-28"))
            }
        );
        assert_eq!(
            r(">2026-11-01"),
            DateRange {
                from: Some(d("2026-11-02")),
                to: None
            }
        );
        assert_eq!(
            r("2026-01..2026-03"),
            DateRange {
                from: Some(d("2026-01-01")),
                to: Some(d("2026-03-31"))
            }
        );
        assert_eq!(
            r("last-7-days"),
            DateRange {
                from: Some(d("2026-11-14")),
                to: Some(today)
            }
        );
        assert!(resolve_date("someday", today).is_none());
    }
}
