//! `Intl.DateTimeFormat` for all but `dayPeriod`, other calendars and
//! numbering systems. boa's own formatter writes a numeric year with two
//! digits where Node writes four (`3/5/24`), names a zone by an unknown
//! offset (`GMT+?`), and has no `formatToParts`; this one asks ICU4X for
//! the full year where the script asked for `year: 'numeric'`, gives it
//! the zone and its offset, and cuts its output into parts. The date and
//! time come already in the format's time zone, with the offset there
//! (the script's side reads them with `Temporal`).

use icu_calendar::Iso;
use icu_datetime::fieldsets::builder::ZoneStyle;
use icu_datetime::fieldsets::builder::{DateFields, FieldSetBuilder};
use icu_datetime::options::{Alignment, Length, SubsecondDigits, TimePrecision, YearStyle};
use icu_datetime::{DateTimeFormatter, DateTimeFormatterPreferences};
use icu_locale_core::preferences::extensions::unicode::keywords::HourCycle;
use icu_locale_core::Locale;
use icu_time::zone::{IanaParser, UtcOffset};
use icu_time::{DateTime, Time, ZonedDateTime};
use serde::{Deserialize, Serialize};

use super::parts::{pieces, Piece};
use super::IntlError;

/// What a script asked for, each option made a string, number or boolean
/// as ECMA-402's GetOption does, with the locale and time zone boa
/// resolved, and which of ToDateTimeOptions' defaults apply.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Options {
    pub locale: String,
    #[serde(default = "gregory")]
    pub calendar: String,
    #[serde(default = "latn")]
    pub numbering_system: String,
    #[serde(default)]
    pub time_zone: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hour_cycle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hour12: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub weekday: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub era: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub year: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub month: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub day: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hour: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub minute: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub second: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fractional_second_digits: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_zone_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub date_style: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_style: Option<String>,
}

fn gregory() -> String {
    "gregory".into()
}
fn latn() -> String {
    "latn".into()
}

/// Which fields a caller needs and which it fills in when none is given:
/// ECMA-402's ToDateTimeOptions(options, required, defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Required {
    Date,
    Time,
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Defaults {
    Date,
    Time,
    All,
}

/// A date and time of day already in the format's time zone.
#[derive(Debug, Clone, Copy)]
pub(super) struct Civil {
    year: f64,
    month: f64,
    day: f64,
    hour: f64,
    minute: f64,
    second: f64,
    millisecond: f64,
    /// Seconds east of UTC in the format's zone at that moment.
    offset: f64,
}

impl From<[f64; 8]> for Civil {
    /// Year, month, day, hour, minute, second, millisecond, offset.
    fn from(f: [f64; 8]) -> Self {
        Civil {
            year: f[0],
            month: f[1],
            day: f[2],
            hour: f[3],
            minute: f[4],
            second: f[5],
            millisecond: f[6],
            offset: f[7],
        }
    }
}

fn check(
    caller: &str,
    name: &str,
    value: &Option<String>,
    allowed: &[&str],
) -> Result<(), IntlError> {
    match value {
        Some(v) if !allowed.contains(&v.as_str()) => Err(IntlError::Range(format!(
            "Value {v} out of range for {caller} options property {name}"
        ))),
        _ => Ok(()),
    }
}

/// Validates the options and fills in ToDateTimeOptions' defaults;
/// `caller` is the function an error names, as V8's do.
pub(super) fn resolve(
    mut o: Options,
    required: Required,
    defaults: Defaults,
    caller: &str,
) -> Result<Options, IntlError> {
    let check =
        |name: &str, value: &Option<String>, allowed: &[&str]| check(caller, name, value, allowed);
    const WIDTH: &[&str] = &["narrow", "short", "long"];
    const NUMBER: &[&str] = &["numeric", "2-digit"];
    const STYLE: &[&str] = &["full", "long", "medium", "short"];
    check("weekday", &o.weekday, WIDTH)?;
    check("era", &o.era, WIDTH)?;
    check("year", &o.year, NUMBER)?;
    check(
        "month",
        &o.month,
        &["numeric", "2-digit", "narrow", "short", "long"],
    )?;
    check("day", &o.day, NUMBER)?;
    check("hour", &o.hour, NUMBER)?;
    check("minute", &o.minute, NUMBER)?;
    check("second", &o.second, NUMBER)?;
    check("hourCycle", &o.hour_cycle, &["h11", "h12", "h23", "h24"])?;
    check("dateStyle", &o.date_style, STYLE)?;
    check(
        "timeZoneName",
        &o.time_zone_name,
        &[
            "short",
            "long",
            "shortOffset",
            "longOffset",
            "shortGeneric",
            "longGeneric",
        ],
    )?;
    check("timeStyle", &o.time_style, STYLE)?;
    if let Some(n) = o.fractional_second_digits {
        if !(1.0..=3.0).contains(&n.floor()) {
            return Err(IntlError::Range(
                "fractionalSecondDigits value is out of range.".into(),
            ));
        }
        o.fractional_second_digits = Some(n.floor());
    }
    let date_fields =
        o.weekday.is_some() || o.year.is_some() || o.month.is_some() || o.day.is_some();
    let time_fields = o.hour.is_some()
        || o.minute.is_some()
        || o.second.is_some()
        || o.fractional_second_digits.is_some();
    let styles = o.date_style.is_some() || o.time_style.is_some();
    if styles {
        // V8's message names the first component in ECMA-402's order.
        let components = [
            ("weekday", o.weekday.is_some()),
            ("era", o.era.is_some()),
            ("year", o.year.is_some()),
            ("month", o.month.is_some()),
            ("day", o.day.is_some()),
            ("hour", o.hour.is_some()),
            ("minute", o.minute.is_some()),
            ("second", o.second.is_some()),
            (
                "fractionalSecondDigits",
                o.fractional_second_digits.is_some(),
            ),
            ("timeZoneName", o.time_zone_name.is_some()),
        ];
        if let Some((name, _)) = components.iter().find(|(_, set)| *set) {
            let style = if o.date_style.is_some() {
                "dateStyle"
            } else {
                "timeStyle"
            };
            return Err(IntlError::Type(format!(
                "Can't set option {name} when {style} is used"
            )));
        }
    }
    if required == Required::Date && o.time_style.is_some() {
        return Err(IntlError::Type("Invalid option : timeStyle".into()));
    }
    if required == Required::Time && o.date_style.is_some() {
        return Err(IntlError::Type("Invalid option : dateStyle".into()));
    }
    let asked = styles
        || match required {
            Required::Date => date_fields,
            Required::Time => time_fields,
            Required::Any => date_fields || time_fields,
        };
    if !asked {
        if defaults != Defaults::Time {
            o.year = Some("numeric".into());
            o.month = Some("numeric".into());
            o.day = Some("numeric".into());
        }
        if defaults != Defaults::Date {
            o.hour = Some("numeric".into());
            o.minute = Some("numeric".into());
            o.second = Some("numeric".into());
        }
    }
    if o.hour.is_none() && o.time_style.is_none() {
        o.hour_cycle = None;
        o.hour12 = None;
    } else {
        // ECMA-402's rule as V8 keeps it: `hour12` picks the 12- or 24-hour
        // cycle of the same start as the locale's own (en-US's h12 with
        // `hour12: false` is h24, en-GB's h23 with `hour12: true` is h11).
        let default_12 = locale_uses_12_hours(&o.locale)?;
        let cycle = match (o.hour12, o.hour_cycle.as_deref()) {
            (Some(true), _) if default_12 => "h12",
            (Some(true), _) => "h11",
            (Some(false), _) if default_12 => "h24",
            (Some(false), _) => "h23",
            (None, Some(c)) => c,
            (None, None) if default_12 => "h12",
            (None, None) => "h23",
        };
        o.hour12 = Some(matches!(cycle, "h11" | "h12"));
        o.hour_cycle = Some(cycle.to_string());
    }
    Ok(o)
}

/// Whether the locale writes an hour with a day period (AM/PM).
fn locale_uses_12_hours(locale: &str) -> Result<bool, IntlError> {
    super::cached(locale.to_string(), || twelve_hours(locale)).map(|b| *b)
}

fn twelve_hours(locale: &str) -> Result<bool, IntlError> {
    let locale: Locale = locale.parse().map_err(|_| {
        IntlError::Range(format!("Incorrect locale information provided: {locale}"))
    })?;
    let mut b = FieldSetBuilder::default();
    b.time_precision = Some(TimePrecision::Hour);
    let formatter = b.build_composite_datetime().ok().and_then(|fs| {
        DateTimeFormatter::try_new_with_buffer_provider(
            &boa_icu_provider::buffer(),
            DateTimeFormatterPreferences::from(&locale),
            fs,
        )
        .ok()
    });
    let Some(formatter) = formatter else {
        return Ok(false);
    };
    let bad = |_| IntlError::Range("Invalid time value".into());
    let afternoon: DateTime<Iso> = DateTime {
        date: icu_calendar::Date::try_new_iso(2024, 1, 1).map_err(bad)?,
        time: Time::try_new(13, 0, 0, 0).map_err(bad)?,
    };
    Ok(pieces(&formatter.format(&afternoon), "datetime")
        .iter()
        .any(|(part, _)| part.is_some_and(|p| p.value == "dayPeriod")))
}

/// `civil` as `o` formats it, cut into `formatToParts`'s pieces.
pub(super) fn format(o: &Options, civil: Civil) -> Result<Vec<Piece>, IntlError> {
    let locale: Locale = o.locale.parse().map_err(|_| {
        IntlError::Range(format!(
            "Incorrect locale information provided: {}",
            o.locale
        ))
    })?;
    let mut prefs = DateTimeFormatterPreferences::from(&locale);
    // ICU4X has no h24: it is h23 with midnight's hour written 24. The
    // locale's own cycle is left to the locale: naming it makes ICU4X
    // take other patterns ("Tue, 2:07 PM" for en-US's "Tue 2:07 PM").
    let default_12 = o.hour_cycle.is_some() && locale_uses_12_hours(&o.locale)?;
    prefs.hour_cycle = match (o.hour_cycle.as_deref(), default_12) {
        (Some("h12"), true) | (Some("h23"), false) | (None, _) => None,
        (Some("h11"), _) => Some(HourCycle::H11),
        (Some("h12"), _) => Some(HourCycle::H12),
        _ => Some(HourCycle::H23),
    };
    let bad = || IntlError::Range("Invalid time value".into());
    // The fields are whole numbers the script's clock gave.
    let small = |v: f64| u8::try_from(v as i64).map_err(|_| bad());
    let date =
        icu_calendar::Date::try_new_iso(civil.year as i32, small(civil.month)?, small(civil.day)?)
            .map_err(|_| bad())?;
    let time = Time::try_new(
        small(civil.hour)?,
        small(civil.minute)?,
        small(civil.second)?,
        (civil.millisecond as u32) * 1_000_000,
    )
    .map_err(|_| bad())?;
    let builder = field_set(o)?;
    let cannot = |e: icu_datetime::fieldsets::builder::BuilderError| {
        IntlError::Range(format!(
            "these date options cannot be formatted together: {e}"
        ))
    };
    let no_data = |e: icu_datetime::DateTimeFormatterLoadError| {
        IntlError::Range(format!("no date format for {}: {e}", o.locale))
    };
    let buffer = boa_icu_provider::buffer();
    // Without a zone, the date-and-time field set: a zone-capable one
    // joins a weekday and a time with a comma where Node writes a space.
    let key = format!("{}|{:?}|{:?}", o.locale, prefs.hour_cycle, builder);
    let raw = if builder.zone_style.is_none() {
        let formatter = super::cached(key, || {
            let fs = builder.build_composite_datetime().map_err(cannot)?;
            DateTimeFormatter::try_new_with_buffer_provider(&buffer, prefs, fs).map_err(no_data)
        })?;
        let input: DateTime<Iso> = DateTime { date, time };
        pieces(&formatter.format(&input), "datetime")
    } else {
        let formatter = super::cached(key, || {
            let fs = builder.build_composite().map_err(cannot)?;
            DateTimeFormatter::try_new_with_buffer_provider(&buffer, prefs, fs).map_err(no_data)
        })?;
        let offset = UtcOffset::try_from_seconds(civil.offset as i32).map_err(|_| bad())?;
        let zones = super::cached(String::new(), || {
            IanaParser::try_new_with_buffer_provider(&buffer)
                .map_err(|e| IntlError::Range(format!("no time zone data: {e}")))
        })?;
        let zone = zones
            .as_borrowed()
            .parse(&o.time_zone)
            .with_offset(Some(offset))
            .at_date_time(DateTime { date, time });
        let input: ZonedDateTime<Iso, _> = ZonedDateTime { date, time, zone };
        pieces(&formatter.format(&input), "datetime")
    };
    let mut out = name_pieces(raw);
    pad_as_node(&mut out, o);
    if o.hour_cycle.as_deref() == Some("h24") && civil.hour == 0.0 {
        for p in out.iter_mut().filter(|p| p.kind == "hour") {
            p.text = "24".into();
        }
    }
    Ok(out)
}

/// Which numeric fields each locale pads with a zero, as Node's ICU
/// writes them (`scripts/intl_padding.js` records it): the day and month
/// of year-month-day, of month-day, the month of year-month, the hour in
/// the 12- and 24-hour cycles, and again with the seconds and the zone's
/// name shown.
const PADDING: &str = include_str!("padding.txt");

/// The padding flags of `locale` or of the nearest locale it falls back
/// to (`de-AT` to `de`).
fn padding_of(locale: &str) -> Option<&'static [u8]> {
    let mut tag = locale.split("-u-").next().unwrap_or(locale);
    loop {
        let found = PADDING
            .lines()
            .find_map(|line| line.strip_prefix(tag)?.strip_prefix(' '))
            .filter(|flags| flags.len() == 9);
        if let Some(flags) = found {
            return Some(flags.as_bytes());
        }
        tag = &tag[..tag.rfind('-')?];
    }
}

/// Pads or unpads the numeric day, month and hour as Node does for the
/// locale: ICU4X writes the fixed short date's padding (`05.03.2024`)
/// where Node takes the locale's numeric pattern (`5.3.2024`).
fn pad_as_node(out: &mut [Piece], o: &Options) {
    let Some(flags) = node_padding(o) else {
        return;
    };
    for p in out.iter_mut() {
        let flag = match p.kind.as_str() {
            "day" => flags.day,
            "month" => flags.month,
            "hour" => flags.hour,
            _ => None,
        };
        let Some(padded) = flag else { continue };
        if !p.text.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if padded && p.text.len() == 1 {
            p.text.insert(0, '0');
        } else if !padded && p.text.len() == 2 && p.text.starts_with('0') {
            p.text.remove(0);
        }
    }
}

/// Whether Node pads each field asked for as `numeric` (`None`: not asked
/// so, or no pattern of Node's to follow).
struct Padding {
    day: Option<bool>,
    month: Option<bool>,
    hour: Option<bool>,
}

fn node_padding(o: &Options) -> Option<Padding> {
    let found = super::cached(o.locale.clone(), || Ok::<_, ()>(padding_of(&o.locale)));
    let flags: &[u8] = (*found.ok()?)?;
    let numeric = |f: &Option<String>| f.as_deref() == Some("numeric");
    let all_numeric = matches!(o.month.as_deref(), Some("numeric" | "2-digit"));
    let (day, month) = match (o.year.is_some(), o.day.is_some()) {
        _ if !all_numeric => (None, None),
        (true, true) => (Some(flags[0]), Some(flags[1])),
        (false, true) => (Some(flags[2]), Some(flags[3])),
        (true, false) => (None, Some(flags[4])),
        (false, false) => (None, None),
    };
    let twelve = matches!(o.hour_cycle.as_deref(), Some("h11" | "h12"));
    let zone = if o.time_zone_name.is_some() && o.second.is_some() {
        2
    } else {
        0
    };
    let hour = flags[if twelve { 5 } else { 6 } + zone];
    let only = |asked: bool, flag: Option<u8>| flag.filter(|_| asked).map(|f| f == b'1');
    Some(Padding {
        day: only(numeric(&o.day), day),
        month: only(numeric(&o.month), month),
        hour: only(numeric(&o.hour), Some(hour)),
    })
}

/// The options as `resolvedOptions()` reports them: the widths of the
/// pattern written, as Node reports them (a padded hour is `2-digit`;
/// minutes and seconds after an hour are two digits).
pub(super) fn reported(o: &Options) -> Options {
    let mut r = o.clone();
    if let Some(p) = node_padding(o) {
        let two = |padded: Option<bool>, field: &mut Option<String>| {
            if padded == Some(true) {
                *field = Some("2-digit".into());
            }
        };
        two(p.day, &mut r.day);
        two(p.month, &mut r.month);
        two(p.hour, &mut r.hour);
    }
    if r.hour.is_some() && r.minute.is_some() {
        r.minute = Some("2-digit".into());
    }
    if r.minute.is_some() && r.second.is_some() {
        r.second = Some("2-digit".into());
    }
    r
}

/// ECMA-402's components as an ICU4X field set: the month's width (or the
/// weekday's) picks the length; a numeric year is written whole.
fn field_set(o: &Options) -> Result<FieldSetBuilder, IntlError> {
    let mut b = FieldSetBuilder::default();
    if o.date_style.is_some() || o.time_style.is_some() {
        b.length = Some(match o.date_style.as_deref().or(o.time_style.as_deref()) {
            Some("full" | "long") => Length::Long,
            Some("medium") => Length::Medium,
            _ => Length::Short,
        });
        b.date_fields = match o.date_style.as_deref() {
            Some("full") => Some(DateFields::YMDE),
            Some(_) => Some(DateFields::YMD),
            None => None,
        };
        b.time_precision = match o.time_style.as_deref() {
            Some("short") => Some(TimePrecision::Minute),
            Some(_) => Some(TimePrecision::Second),
            None => None,
        };
        b.zone_style = match o.time_style.as_deref() {
            Some("full") => Some(ZoneStyle::SpecificLong),
            Some("long") => Some(ZoneStyle::SpecificShort),
            _ => None,
        };
        return Ok(b);
    }
    let width = |w: &str| match w {
        "long" => Length::Long,
        "short" => Length::Medium,
        _ => Length::Short,
    };
    b.length = Some(match (&o.month, &o.weekday, &o.era) {
        (Some(m), _, _) => width(m),
        (None, Some(w), _) => width(w),
        (None, None, Some(e)) => width(e),
        _ => Length::Short,
    });
    let (y, m, d, e) = (
        o.year.is_some() || o.era.is_some(),
        o.month.is_some(),
        o.day.is_some(),
        o.weekday.is_some(),
    );
    b.date_fields = match (y, m, d, e) {
        (true, _, _, true) => Some(DateFields::YMDE),
        (true, _, true, false) => Some(DateFields::YMD),
        (true, true, false, false) => Some(DateFields::YM),
        (true, false, false, false) => Some(DateFields::Y),
        (false, true, _, true) => Some(DateFields::MDE),
        (false, true, true, false) => Some(DateFields::MD),
        (false, true, false, false) => Some(DateFields::M),
        (false, false, true, true) => Some(DateFields::DE),
        (false, false, true, false) => Some(DateFields::D),
        (false, false, false, true) => Some(DateFields::E),
        (false, false, false, false) => None,
    };
    b.time_precision = match (&o.hour, &o.minute, &o.second, o.fractional_second_digits) {
        (_, _, _, Some(n)) => Some(TimePrecision::Subsecond(
            SubsecondDigits::try_from_int(n as u8).unwrap_or(SubsecondDigits::S3),
        )),
        (_, _, Some(_), None) => Some(TimePrecision::Second),
        (_, Some(_), None, None) => Some(TimePrecision::Minute),
        (Some(_), None, None, None) => Some(TimePrecision::Hour),
        _ => None,
    };
    b.zone_style = o.time_zone_name.as_deref().map(|name| match name {
        "long" => ZoneStyle::SpecificLong,
        "shortOffset" => ZoneStyle::LocalizedOffsetShort,
        "longOffset" => ZoneStyle::LocalizedOffsetLong,
        "shortGeneric" => ZoneStyle::GenericShort,
        "longGeneric" => ZoneStyle::GenericLong,
        _ => ZoneStyle::SpecificShort,
    });
    if b.date_fields.is_some_and(|f| {
        matches!(
            f,
            DateFields::YMD | DateFields::YMDE | DateFields::YM | DateFields::Y
        )
    }) {
        b.year_style = Some(match (&o.era, o.year.as_deref()) {
            (Some(_), _) => YearStyle::WithEra,
            (None, Some("2-digit")) => YearStyle::Auto,
            _ => YearStyle::Full,
        });
    }
    let two_digit = |f: &Option<String>| f.as_deref() == Some("2-digit");
    if two_digit(&o.month) || two_digit(&o.day) || two_digit(&o.hour) {
        b.alignment = Some(Alignment::Column);
    }
    Ok(b)
}

/// ICU4X's part names as ECMA-402 writes them; unmarked text is literal,
/// and a second with its fraction is cut in two, as Node cuts it.
fn name_pieces(raw: Vec<(Option<writeable::Part>, String)>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    for (part, text) in raw {
        let kind = match part.map(|p| p.value) {
            Some("era") => "era",
            Some("year" | "relatedYear" | "extendedYear") => "year",
            Some("yearName") => "yearName",
            Some("month") => "month",
            Some("day") => "day",
            Some("weekday") => "weekday",
            Some("dayPeriod") => "dayPeriod",
            Some("hour") => "hour",
            Some("minute") => "minute",
            Some("second") => "second",
            Some("timeZoneName") => "timeZoneName",
            _ => "literal",
        };
        if kind == "second" {
            if let Some(at) = text.find(|c: char| !c.is_numeric()) {
                let sep_len = text[at..].chars().next().map_or(1, char::len_utf8);
                out.push(Piece {
                    kind: "second".into(),
                    text: text[..at].into(),
                });
                out.push(Piece {
                    kind: "literal".into(),
                    text: text[at..at + sep_len].into(),
                });
                out.push(Piece {
                    kind: "fractionalSecond".into(),
                    text: text[at + sep_len..].into(),
                });
                continue;
            }
        }
        match out.last_mut() {
            Some(last) if last.kind == "literal" && kind == "literal" => last.text.push_str(&text),
            _ => out.push(Piece {
                kind: kind.into(),
                text,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(json: serde_json::Value) -> Options {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn defaults_fill_in_only_what_the_caller_needs() {
        let date_only = resolve(
            options(serde_json::json!({"locale": "en-US", "hour": "numeric"})),
            Required::Date,
            Defaults::Date,
            "x",
        )
        .unwrap();
        assert_eq!(
            (date_only.year.as_deref(), date_only.hour.as_deref()),
            (Some("numeric"), Some("numeric"))
        );
        let time = resolve(
            options(serde_json::json!({"locale": "en-US"})),
            Required::Time,
            Defaults::Time,
            "x",
        )
        .unwrap();
        assert_eq!((time.year, time.second.as_deref()), (None, Some("numeric")));
        let any = resolve(
            options(serde_json::json!({"locale": "en-US", "weekday": "long"})),
            Required::Any,
            Defaults::All,
            "x",
        )
        .unwrap();
        assert_eq!((any.year, any.hour), (None, None));
    }

    #[test]
    fn hour12_keeps_the_locale_cycles_start_as_v8_does() {
        let cycle = |locale: &str, hour12: bool| {
            let o =
                options(serde_json::json!({"locale": locale, "hour": "numeric", "hour12": hour12}));
            resolve(o, Required::Time, Defaults::Time, "x")
                .unwrap()
                .hour_cycle
                .unwrap()
        };
        assert_eq!(
            [
                cycle("en-US", true),
                cycle("en-US", false),
                cycle("en-GB", true),
                cycle("en-GB", false)
            ],
            ["h12", "h24", "h11", "h23"]
        );
    }

    #[test]
    fn a_locale_falls_back_to_its_language_for_padding() {
        assert_eq!(padding_of("de-AT-u-ca-gregory"), padding_of("de"));
        assert!(padding_of("de").is_some());
        assert_eq!(padding_of("xx-YY"), None);
    }

    #[test]
    fn a_numeric_day_and_month_are_padded_as_the_locale_pads_them() {
        let civil = Civil {
            year: 2024.0,
            month: 3.0,
            day: 5.0,
            hour: 9.0,
            minute: 7.0,
            second: 0.0,
            millisecond: 0.0,
            offset: 0.0,
        };
        let text = |locale: &str| {
            let o = options(serde_json::json!({"locale": locale, "timeZone": "UTC"}));
            let o = resolve(o, Required::Date, Defaults::Date, "x").unwrap();
            format(&o, civil)
                .unwrap()
                .into_iter()
                .map(|p| p.text)
                .collect::<String>()
        };
        assert_eq!(
            [text("de-DE"), text("en-GB"), text("pl-PL"), text("en-US")],
            ["5.3.2024", "05/03/2024", "5.03.2024", "3/5/2024"]
        );
    }
}
