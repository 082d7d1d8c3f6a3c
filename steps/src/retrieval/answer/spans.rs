//! Typed values in a line of text: dates, times, amounts, numbers, e-mails,
//! URLs, key- or code-like tokens, phone numbers and names. Each has a
//! normal form so that `2 December`, `December 2` and `2026-12-02` compare
//! equal, and `1,650` equals `1650`.

use regex::Regex;
use std::sync::LazyLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Date,
    Time,
    Amount,
    Number,
    Percent,
    Email,
    Url,
    Code,
    Phone,
    Name,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Date => "date",
            Kind::Time => "time",
            Kind::Amount => "amount",
            Kind::Number => "number",
            Kind::Percent => "percent",
            Kind::Email => "email",
            Kind::Url => "url",
            Kind::Code => "code",
            Kind::Phone => "phone",
            Kind::Name => "name",
        }
    }
}

/// One typed value: where it stands in the text (bytes), as written, and
/// its normal form.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    pub text: String,
    pub norm: String,
}

const MONTHS: &[(&str, u32)] = &[
    ("january", 1),
    ("february", 2),
    ("march", 3),
    ("april", 4),
    ("may", 5),
    ("june", 6),
    ("july", 7),
    ("august", 8),
    ("september", 9),
    ("october", 10),
    ("november", 11),
    ("december", 12),
];

fn month_number(word: &str) -> Option<u32> {
    let w = word.to_lowercase();
    let w = w.trim_end_matches('.');
    if w.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .find(|(name, _)| name.starts_with(w) && (w.len() >= 3))
        .filter(|(name, _)| w.len() == name.len() || w.len() <= 4)
        .map(|(_, n)| *n)
}

const MONTH_RE: &str = r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)";

static EMAIL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}").unwrap());
static URL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"https?://[^\s)<>\]`"']+[^\s)<>\]`"'.,;:]"#).unwrap());
static ISO_DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(\d{4})-(\d{2})-(\d{2})\b").unwrap());
static DAY_MONTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({MONTH_RE})\.?(?:,?\s+(\d{{4}}))?\b"
    ))
    .unwrap()
});
static MONTH_DAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\b({MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?"
    ))
    .unwrap()
});
static MONTH_ALONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b(?:\s+(\d{4}))?").unwrap()
});
static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*([ap])\.?m\.?\b)?|\b(\d{1,2})\s*([ap])\.?m\.?\b")
        .unwrap()
});
static PERCENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d[\d,]*(?:\.\d+)?\s?%").unwrap());
/// Units a number can carry to make it an amount: currencies (symbols and
/// the ISO 4217 codes of the most traded ones), SI units with their usual
/// prefixes, common non-SI and imperial units, data sizes, clinical
/// concentrations and durations. A general table, not one vault's units;
/// longer spellings first so the alternation takes the whole unit.
const UNITS: &[&str] = &[
    // currencies
    "EUR",
    "USD",
    "GBP",
    "JPY",
    "CNY",
    "CHF",
    "CAD",
    "AUD",
    "NZD",
    "SEK",
    "NOK",
    "DKK",
    "PLN",
    "CZK",
    "HUF",
    "INR",
    "BRL",
    "MXN",
    "ZAR",
    "SGD",
    "HKD",
    "KRW",
    "TRY",
    "euros?",
    "dollars?",
    "pounds?",
    "yen",
    "francs?",
    "cents?",
    "pence",
    // concentrations: an SI prefix, an amount, per a volume (`mg/dL`)
    "[mµunp]?(?:mol|g|IU|U|Eq)/[dcm]?L",
    "mmHg",
    "bpm",
    // mass, length, volume, area, speed, energy, power, pressure, temperature
    // (Matched in any case, so no one-letter unit that is also a word:
    // "5 a day", "3 in a row", "2 s" are not amounts.)
    "mg",
    "µg",
    "ug",
    "kg",
    "g",
    "tonnes?",
    "lbs?",
    "oz",
    "mm",
    "cm",
    "km",
    "m",
    "µm",
    "nm",
    "inch(?:es)?",
    "ft",
    "feet",
    "yards?",
    "yd",
    "miles?",
    "mi",
    "ml",
    "cl",
    "dl",
    "l",
    "litres?",
    "liters?",
    "gal",
    "gallons?",
    "m2",
    "ha",
    "acres?",
    "sq ?ft",
    "km/h",
    "kph",
    "mph",
    "m/s",
    "knots?",
    "kcal",
    "cal",
    "kJ",
    "kWh",
    "MWh",
    "Wh",
    "kW",
    "MW",
    "hp",
    "mV",
    "mA",
    "mAh",
    "Hz",
    "kHz",
    "MHz",
    "GHz",
    "bar",
    "mbar",
    "hPa",
    "kPa",
    "psi",
    "°C",
    "°F",
    "dB",
    // data
    "bits?",
    "bytes?",
    "KB",
    "KiB",
    "MB",
    "MiB",
    "GB",
    "GiB",
    "TB",
    "TiB",
    "PB",
    "kbps",
    "Mbps",
    "Gbps",
    // time
    "ns",
    "µs",
    "ms",
    "secs?",
    "seconds?",
    "mins?",
    "minutes?",
    "h",
    "hrs?",
    "hours?",
    "days?",
    "nights?",
    "weeks?",
    "fortnights?",
    "months?",
    "years?",
    "yrs?",
    "decades?",
    // scores and rates a value is measured in
    "points?",
    "pts",
    "req/s",
    "rps",
    "qps",
];

static AMOUNT: LazyLock<Regex> = LazyLock::new(|| {
    let mut units: Vec<&str> = UNITS.to_vec();
    // Longest first: a concentration before `m`, `MB` before `B`.
    units.sort_by_key(|u| std::cmp::Reverse(u.len()));
    Regex::new(&format!(
        r"(?i)(?:[€$£¥₹]\s?\d[\d,]*(?:\.\d+)?)|(?:\b\d[\d,]*(?:\.\d+)?\s?(?:{})\b)",
        units.join("|")
    ))
    .unwrap()
});
/// "7 h 10 min", "6 hours 40 minutes": one duration, not two amounts.
static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(\d{1,3})\s?(?:h|hrs?|hours?)\s+(?:and\s+)?(\d{1,2})\s?(?:m|mins?|minutes?)\b",
    )
    .unwrap()
});
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b\d[\d,]*(?:\.\d+)?\b").unwrap());
static CODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+){1,}\b|\b[A-Z]{1,4}\d{3,}[A-Z0-9]*\b|\b\d{6,}\b")
        .unwrap()
});
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:\+\d{1,3}[\s.-]?)?(?:\(\d+\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){1,4}").unwrap()
});
static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?(?:\s+(?:de|van|von|da|del)?\s*[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?){0,2}\b")
        .unwrap()
});

/// Capitalised words that are not names on their own.
const NOT_NAMES: &[&str] = &[
    "The",
    "A",
    "An",
    "I",
    "It",
    "This",
    "That",
    "These",
    "Those",
    "My",
    "Our",
    "Your",
    "We",
    "He",
    "She",
    "They",
    "If",
    "In",
    "On",
    "At",
    "For",
    "From",
    "To",
    "And",
    "But",
    "Or",
    "No",
    "Not",
    "Yes",
    "Also",
    "After",
    "Before",
    "Then",
    "When",
    "What",
    "Who",
    "Where",
    "Why",
    "How",
    "Which",
    "Every",
    "Each",
    "All",
    "Some",
    "One",
    "Two",
    "Three",
    "Four",
    "Five",
    "Next",
    "Last",
    "Type",
    "Tags",
    "Status",
    "Date",
    "Dates",
    "Owner",
    "Notes",
    "Linked",
    "See",
    "Related",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Mon",
    "Tue",
    "Wed",
    "Thu",
    "Fri",
    "Sat",
    "Sun",
    "Done",
    "Pending",
    "According",
    "Answer",
    "Sources",
    "Source",
    "Lines",
    "Line",
    "Evidence",
    "Based",
    "Yes",
    "Please",
    "Here",
    "There",
    "Total",
    "About",
    "With",
    "Without",
    "By",
    "As",
    "So",
    "Is",
    "Are",
    "Was",
    "Were",
    "Be",
    "Do",
    "Does",
    "Did",
    "Has",
    "Have",
    "Had",
    "Can",
    "Will",
    "Would",
    "Should",
    "Could",
    "May",
    "Must",
    "Any",
    "None",
    "Its",
    "Their",
    "His",
    "Her",
];

/// Normal form of a number as written: no thousands commas, no trailing
/// decimal zeros (`1,650` → `1650`, `189.40` → `189.4`).
pub fn norm_number(s: &str) -> String {
    let digits: String = s
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    if digits.contains('.') {
        let t = digits.trim_end_matches('0').trim_end_matches('.');
        if t.is_empty() {
            "0".into()
        } else {
            t.to_string()
        }
    } else {
        let t = digits.trim_start_matches('0');
        if t.is_empty() {
            "0".into()
        } else {
            t.to_string()
        }
    }
}

fn date_norm(year: Option<&str>, month: u32, day: Option<u32>) -> String {
    let y = year.unwrap_or("");
    match day {
        Some(d) => format!("{y}-{month:02}-{d:02}"),
        None => format!("{y}-{month:02}"),
    }
}

fn time_norm(h: u32, m: u32, ampm: Option<&str>) -> Option<String> {
    let h = match ampm.map(|s| s.to_ascii_lowercase()) {
        Some(p) if p == "p" && h < 12 => h + 12,
        Some(p) if p == "a" && h == 12 => 0,
        _ => h,
    };
    (h <= 24 && m < 60).then(|| format!("{h}:{m:02}"))
}

fn overlaps(taken: &[(usize, usize)], s: usize, e: usize) -> bool {
    taken.iter().any(|(a, b)| s < *b && *a < e)
}

/// Every typed value in `text`, in order of position. A place holds one
/// value: an ISO date is not also three numbers.
pub fn find(text: &str) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let mut push = |out: &mut Vec<Span>, kind: Kind, s: usize, e: usize, norm: String| {
        if !overlaps(&taken, s, e) {
            taken.push((s, e));
            out.push(Span {
                kind,
                start: s,
                end: e,
                text: text[s..e].to_string(),
                norm,
            });
        }
    };
    for m in EMAIL.find_iter(text) {
        push(
            &mut out,
            Kind::Email,
            m.start(),
            m.end(),
            m.as_str().to_lowercase(),
        );
    }
    for m in URL.find_iter(text) {
        push(
            &mut out,
            Kind::Url,
            m.start(),
            m.end(),
            m.as_str().trim_end_matches('/').to_lowercase(),
        );
    }
    for c in ISO_DATE.captures_iter(text) {
        let m = c.get(0).unwrap();
        let month: u32 = c[2].parse().unwrap_or(0);
        let day: u32 = c[3].parse().unwrap_or(0);
        if (1..=12).contains(&month) && (1..=31).contains(&day) {
            push(
                &mut out,
                Kind::Date,
                m.start(),
                m.end(),
                date_norm(Some(&c[1]), month, Some(day)),
            );
        }
    }
    for c in DAY_MONTH.captures_iter(text) {
        let m = c.get(0).unwrap();
        let (Ok(day), Some(month)) = (c[1].parse::<u32>(), month_number(&c[2])) else {
            continue;
        };
        if (1..=31).contains(&day) {
            let norm = date_norm(c.get(3).map(|y| y.as_str()), month, Some(day));
            push(&mut out, Kind::Date, m.start(), m.end(), norm);
        }
    }
    for c in MONTH_DAY.captures_iter(text) {
        let m = c.get(0).unwrap();
        let (Some(month), Ok(day)) = (month_number(&c[1]), c[2].parse::<u32>()) else {
            continue;
        };
        if (1..=31).contains(&day) {
            let norm = date_norm(c.get(3).map(|y| y.as_str()), month, Some(day));
            push(&mut out, Kind::Date, m.start(), m.end(), norm);
        }
    }
    for c in TIME.captures_iter(text) {
        let m = c.get(0).unwrap();
        let norm = if let Some(h) = c.get(1) {
            let h: u32 = h.as_str().parse().unwrap_or(99);
            let mi: u32 = c[2].parse().unwrap_or(99);
            time_norm(h, mi, c.get(4).map(|p| p.as_str()))
        } else {
            let h: u32 = c[5].parse().unwrap_or(99);
            time_norm(h, 0, c.get(6).map(|p| p.as_str()))
        };
        if let Some(norm) = norm {
            push(&mut out, Kind::Time, m.start(), m.end(), norm);
        }
    }
    for m in CODE.find_iter(text) {
        let t = m.as_str();
        let has_digit = t.chars().any(|c| c.is_ascii_digit());
        let has_alpha = t.chars().any(|c| c.is_ascii_alphabetic());
        let all_digits = t.chars().all(|c| c.is_ascii_digit());
        // A key or code mixes letters and digits (`APOLLO-KEY-7f3a`), or is a
        // long run of digits; plain hyphenated words are not codes.
        if (has_digit && has_alpha && t.len() >= 5) || (all_digits && t.len() >= 6) {
            push(&mut out, Kind::Code, m.start(), m.end(), t.to_lowercase());
        }
    }
    for m in PHONE.find_iter(text) {
        let digits = m.as_str().chars().filter(char::is_ascii_digit).count();
        if digits >= 7 {
            let norm: String = m.as_str().chars().filter(char::is_ascii_digit).collect();
            push(&mut out, Kind::Phone, m.start(), m.end(), norm);
        }
    }
    for m in PERCENT.find_iter(text) {
        push(
            &mut out,
            Kind::Percent,
            m.start(),
            m.end(),
            norm_number(m.as_str()),
        );
    }
    for c in DURATION.captures_iter(text) {
        let m = c.get(0).unwrap();
        let minutes = c[1].parse::<u32>().unwrap_or(0) * 60 + c[2].parse::<u32>().unwrap_or(0);
        push(
            &mut out,
            Kind::Amount,
            m.start(),
            m.end(),
            format!("{minutes} min"),
        );
    }
    for m in AMOUNT.find_iter(text) {
        push(
            &mut out,
            Kind::Amount,
            m.start(),
            m.end(),
            norm_number(m.as_str()),
        );
    }
    for c in MONTH_ALONE.captures_iter(text) {
        let m = c.get(0).unwrap();
        let Some(month) = month_number(&c[1]) else {
            continue;
        };
        // "May" starts sentences as a verb too; a month alone counts only
        // inside a sentence or with a year.
        let after = text[m.end()..].chars().next();
        if &c[1] == "May"
            && c.get(2).is_none()
            && text[..m.start()].trim().is_empty()
            && !matches!(after, Some(':' | ',' | '.' | ';') | None)
        {
            continue;
        }
        let norm = date_norm(c.get(2).map(|y| y.as_str()), month, None);
        push(&mut out, Kind::Date, m.start(), m.end(), norm);
    }
    for m in NUMBER.find_iter(text) {
        push(
            &mut out,
            Kind::Number,
            m.start(),
            m.end(),
            norm_number(m.as_str()),
        );
    }
    for m in NAME.find_iter(text) {
        let t = m.as_str();
        let first = t.split_whitespace().next().unwrap_or("");
        if NOT_NAMES.contains(&first) && !t.contains(' ') {
            continue;
        }
        let t = if NOT_NAMES.contains(&first) {
            t[first.len()..].trim_start()
        } else {
            t
        };
        if t.is_empty() || NOT_NAMES.contains(&t) {
            continue;
        }
        let s = m.end() - t.len();
        push(&mut out, Kind::Name, s, m.end(), t.to_lowercase());
    }
    out.sort_by_key(|s| s.start);
    out
}

/// Whether `a` (from an answer) and `b` (from evidence) are the same value.
/// Dates without a year match any year; a month alone matches only a month.
pub fn same_value(a: &Span, b: &Span) -> bool {
    use Kind::*;
    match (a.kind, b.kind) {
        (Date, Date) => dates_match(&a.norm, &b.norm),
        (Time, Time) => a.norm == b.norm,
        (Amount | Number | Percent, Amount | Number | Percent) => a.norm == b.norm,
        (Code | Email | Url | Phone, _) | (_, Code | Email | Url | Phone) => {
            a.norm == b.norm || b.text.to_lowercase().contains(&a.text.to_lowercase())
        }
        (Name, Name) => a.norm == b.norm || b.norm.contains(&a.norm) || a.norm.contains(&b.norm),
        _ => false,
    }
}

fn dates_match(a: &str, b: &str) -> bool {
    // `yyyy-mm-dd`, `-mm-dd` (no year), `yyyy-mm`, `-mm`.
    let parts = |s: &str| -> (String, String, String) {
        let mut it = s.splitn(3, '-');
        (
            it.next().unwrap_or("").to_string(),
            it.next().unwrap_or("").to_string(),
            it.next().unwrap_or("").to_string(),
        )
    };
    let (ya, ma, da) = parts(a);
    let (yb, mb, db) = parts(b);
    ma == mb && da == db && (ya.is_empty() || yb.is_empty() || ya == yb)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, String)> {
        find(text).into_iter().map(|s| (s.kind, s.text)).collect()
    }

    #[test]
    fn finds_typed_values() {
        assert_eq!(
            kinds("Flights Amsterdam → Lisbon, 2027-03-11, 09:40, arriving 11:55 (186 EUR return)"),
            vec![
                (Kind::Name, "Flights Amsterdam".into()),
                (Kind::Name, "Lisbon".into()),
                (Kind::Date, "2027-03-11".into()),
                (Kind::Time, "09:40".into()),
                (Kind::Time, "11:55".into()),
                (Kind::Amount, "186 EUR".into()),
            ]
        );
        let k = kinds("API key: APOLLO-KEY-7f3a-EXAMPLE, mail repairs@visser.example.com or https://x.example.com/v2.");
        assert!(
            k.contains(&(Kind::Code, "APOLLO-KEY-7f3a-EXAMPLE".into())),
            "{k:?}"
        );
        assert!(
            k.contains(&(Kind::Email, "repairs@visser.example.com".into())),
            "{k:?}"
        );
        assert!(
            k.contains(&(Kind::Url, "https://x.example.com/v2".into())),
            "{k:?}"
        );
        let k = kinds("Rent 1,650 and 12.5% and 3 kg, call +31 20 555 0101 at 10 pm");
        assert!(k.contains(&(Kind::Number, "1,650".into())), "{k:?}");
        assert!(k.contains(&(Kind::Percent, "12.5%".into())), "{k:?}");
        assert!(k.contains(&(Kind::Amount, "3 kg".into())), "{k:?}");
        assert!(
            k.contains(&(Kind::Phone, "+31 20 555 0101".into())),
            "{k:?}"
        );
        assert!(k.contains(&(Kind::Time, "10 pm".into())), "{k:?}");
        let k = kinds("Dr. Elena Ruiz (GP) said so. Hannah Schmidt agreed.");
        assert!(k.contains(&(Kind::Name, "Dr. Elena Ruiz".into())), "{k:?}");
        assert!(k.contains(&(Kind::Name, "Hannah Schmidt".into())), "{k:?}");
    }

    #[test]
    fn amounts_carry_units_of_any_field_but_not_words_that_look_like_units() {
        for text in [
            "12 mg/dL",
            "40 µmol/L",
            "3.5 GiB",
            "40 mph",
            "1,200 kcal",
            "250 ml",
            "18 °C",
            "600 req/s",
            "¥3,000",
            "90 CHF",
        ] {
            assert!(
                kinds(text)
                    .iter()
                    .any(|(k, t)| *k == Kind::Amount && t == text),
                "{text}: {:?}",
                kinds(text)
            );
        }
        for text in ["5 in a row", "3 a day", "2 s and 3 t"] {
            assert!(
                !kinds(text).iter().any(|(k, _)| *k == Kind::Amount),
                "{text}: {:?}",
                kinds(text)
            );
        }
    }

    #[test]
    fn the_same_date_written_three_ways_is_one_value() {
        let a = find("on 2 December");
        let b = find("December 2nd, 2026");
        let c = find("2026-12-02");
        assert!(same_value(&a[0], &c[0]), "{a:?} {c:?}");
        assert!(same_value(&b[0], &c[0]), "{b:?} {c:?}");
        let other = find("2026-12-03");
        assert!(!same_value(&a[0], &other[0]));
        let wrong_year = find("2 December 2025");
        assert!(!same_value(&wrong_year[0], &c[0]));
        // A duration in hours and minutes is one value.
        let d = find("average: 7 h 10 min per night");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].text, "7 h 10 min");
        assert!(same_value(&d[0], &find("slept 7 hours and 10 minutes")[0]));
        // Numbers ignore thousands separators and trailing zeros.
        assert!(same_value(&find("1650")[0], &find("1,650")[0]));
        assert!(same_value(&find("189.4")[0], &find("189.40 EUR")[0]));
        // Times: 9:40 is 09:40; 10 pm is 22:00.
        assert!(same_value(&find("9:40")[0], &find("09:40")[0]));
        assert!(same_value(&find("10 pm")[0], &find("22:00")[0]));
    }
}
