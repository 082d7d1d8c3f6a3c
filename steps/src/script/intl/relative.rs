//! `Intl.RelativeTimeFormat` ("in 3 days", "yesterday"), which boa lacks,
//! over ICU4X's relative-time formatter: its patterns from ICU4X's
//! experimental data, numbers and plural rules from boa's.

use fixed_decimal::{Decimal, FloatPrecision, Sign, SignedRoundingMode, UnsignedRoundingMode};
use icu_decimal::options::GroupingStrategy;
use icu_experimental::relativetime::options::{Numeric, RelativeTimeFormatterOptions};
use icu_experimental::relativetime::provider::*;
use icu_experimental::relativetime::{RelativeTimeFormatter, RelativeTimeFormatterPreferences};
use icu_locale_core::Locale;
use serde::{Deserialize, Serialize};
use writeable::Writeable;

use super::parts::{pieces, Piece};
use super::IntlError;

/// `resolvedOptions()` of a relative time format, as Node writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Resolved {
    locale: String,
    style: String,
    numeric: String,
    #[serde(default = "latn")]
    numbering_system: String,
}

fn latn() -> String {
    "latn".into()
}

/// What a script asked for, made text as ECMA-402's GetOption does, and
/// the locale resolved.
#[derive(Debug, Deserialize)]
pub(super) struct Asked {
    locale: String,
    style: Option<String>,
    numeric: Option<String>,
}

fn one_of(name: &str, value: Option<&str>, allowed: &[&str]) -> Result<String, IntlError> {
    match value {
        None => Ok(allowed[0].to_string()),
        Some(v) if allowed.contains(&v) => Ok(v.to_string()),
        Some(v) => Err(IntlError::Range(format!(
            "Value {v} out of range for Intl.RelativeTimeFormat options property {name}"
        ))),
    }
}

pub(super) fn resolve(asked: Asked) -> Result<Resolved, IntlError> {
    Ok(Resolved {
        locale: asked.locale,
        style: one_of(
            "style",
            asked.style.as_deref(),
            &["long", "short", "narrow"],
        )?,
        numeric: one_of("numeric", asked.numeric.as_deref(), &["always", "auto"])?,
        numbering_system: latn(),
    })
}

/// The units ECMA-402 takes, singular or plural.
const UNITS: &[&str] = &[
    "second", "minute", "hour", "day", "week", "month", "quarter", "year",
];

/// `value` `unit`s from now as `resolved` writes it, cut into
/// `formatToParts`'s pieces (the number's carry the unit).
pub(super) fn format(resolved: &Resolved, value: f64, unit: &str) -> Result<Vec<Piece>, IntlError> {
    if !value.is_finite() {
        return Err(IntlError::Range(
            "Value need to be finite number for Intl.RelativeTimeFormat.prototype.format()".into(),
        ));
    }
    let singular = unit.strip_suffix('s').unwrap_or(unit);
    let Some(unit) = UNITS.iter().find(|u| **u == singular) else {
        return Err(IntlError::Range(format!(
            "Invalid unit argument for Intl.RelativeTimeFormat.prototype.format() '{unit}'"
        )));
    };
    let locale: Locale = resolved.locale.parse().map_err(|_| {
        IntlError::Range(format!(
            "Incorrect locale information provided: {}",
            resolved.locale
        ))
    })?;
    let mut number = Decimal::try_from_f64(value, FloatPrecision::RoundTrip)
        .map_err(|_| IntlError::Range(format!("{value} cannot be formatted")))?;
    // A number format's defaults: up to three fraction digits.
    number.round_with_mode(
        -3,
        SignedRoundingMode::Unsigned(UnsignedRoundingMode::HalfExpand),
    );
    number.absolute.trim_end();
    if value.is_sign_negative() {
        number.set_sign(Sign::Negative);
    }
    let key = format!(
        "relative|{}|{}|{}|{unit}",
        resolved.locale, resolved.style, resolved.numeric
    );
    let formatter = super::cached(key, || {
        make(&locale, &resolved.style, &resolved.numeric, unit)
    })?;
    let text = formatter
        .format(number.clone())
        .write_to_string()
        .into_owned();
    // The number's own parts, where it stands in the text ("yesterday"
    // has none).
    let digits = number.clone().with_sign(Sign::None);
    let decimal =
        super::number::decimal_formatter(&resolved.locale, &locale, GroupingStrategy::Auto)?;
    let written = decimal.format(&digits).write_to_string().into_owned();
    let literal = |text: &str| Piece {
        kind: "literal".into(),
        text: text.into(),
    };
    let Some(at) = text.find(&written).filter(|_| !written.is_empty()) else {
        return Ok(vec![literal(&text)]);
    };
    let mut out = Vec::new();
    if at > 0 {
        out.push(literal(&text[..at]));
    }
    for (part, t) in pieces(&decimal.format(&digits), "decimal") {
        out.push(Piece {
            kind: part.map_or("literal", |p| p.value).into(),
            text: t,
        });
    }
    if at + written.len() < text.len() {
        out.push(literal(&text[at + written.len()..]));
    }
    Ok(out)
}

fn make(
    locale: &Locale,
    style: &str,
    numeric: &str,
    unit: &str,
) -> Result<RelativeTimeFormatter, IntlError> {
    let prefs = RelativeTimeFormatterPreferences::from(locale);
    let mut options = RelativeTimeFormatterOptions::default();
    if numeric == "auto" {
        options.numeric = Numeric::Auto;
    }
    type New = fn(
        &Data,
        RelativeTimeFormatterPreferences,
        RelativeTimeFormatterOptions,
    ) -> Result<RelativeTimeFormatter, icu_provider::DataError>;
    let make: New = match (style, unit) {
        ("long", "second") => RelativeTimeFormatter::try_new_long_second_unstable,
        ("long", "minute") => RelativeTimeFormatter::try_new_long_minute_unstable,
        ("long", "hour") => RelativeTimeFormatter::try_new_long_hour_unstable,
        ("long", "day") => RelativeTimeFormatter::try_new_long_day_unstable,
        ("long", "week") => RelativeTimeFormatter::try_new_long_week_unstable,
        ("long", "month") => RelativeTimeFormatter::try_new_long_month_unstable,
        ("long", "quarter") => RelativeTimeFormatter::try_new_long_quarter_unstable,
        ("long", _) => RelativeTimeFormatter::try_new_long_year_unstable,
        ("short", "second") => RelativeTimeFormatter::try_new_short_second_unstable,
        ("short", "minute") => RelativeTimeFormatter::try_new_short_minute_unstable,
        ("short", "hour") => RelativeTimeFormatter::try_new_short_hour_unstable,
        ("short", "day") => RelativeTimeFormatter::try_new_short_day_unstable,
        ("short", "week") => RelativeTimeFormatter::try_new_short_week_unstable,
        ("short", "month") => RelativeTimeFormatter::try_new_short_month_unstable,
        ("short", "quarter") => RelativeTimeFormatter::try_new_short_quarter_unstable,
        ("short", _) => RelativeTimeFormatter::try_new_short_year_unstable,
        (_, "second") => RelativeTimeFormatter::try_new_narrow_second_unstable,
        (_, "minute") => RelativeTimeFormatter::try_new_narrow_minute_unstable,
        (_, "hour") => RelativeTimeFormatter::try_new_narrow_hour_unstable,
        (_, "day") => RelativeTimeFormatter::try_new_narrow_day_unstable,
        (_, "week") => RelativeTimeFormatter::try_new_narrow_week_unstable,
        (_, "month") => RelativeTimeFormatter::try_new_narrow_month_unstable,
        (_, "quarter") => RelativeTimeFormatter::try_new_narrow_quarter_unstable,
        (_, _) => RelativeTimeFormatter::try_new_narrow_year_unstable,
    };
    make(&Data, prefs, options).map_err(|e| IntlError::Range(format!("no relative time data: {e}")))
}

/// The relative-time formatter's data.
struct Data;

super::data::from_baked!(
    Data,
    LongSecondRelativeV1,
    ShortSecondRelativeV1,
    NarrowSecondRelativeV1,
    LongMinuteRelativeV1,
    ShortMinuteRelativeV1,
    NarrowMinuteRelativeV1,
    LongHourRelativeV1,
    ShortHourRelativeV1,
    NarrowHourRelativeV1,
    LongDayRelativeV1,
    ShortDayRelativeV1,
    NarrowDayRelativeV1,
    LongWeekRelativeV1,
    ShortWeekRelativeV1,
    NarrowWeekRelativeV1,
    LongMonthRelativeV1,
    ShortMonthRelativeV1,
    NarrowMonthRelativeV1,
    LongQuarterRelativeV1,
    ShortQuarterRelativeV1,
    NarrowQuarterRelativeV1,
    LongYearRelativeV1,
    ShortYearRelativeV1,
    NarrowYearRelativeV1,
);
super::data::from_boa!(
    Data,
    icu_decimal::provider::DecimalSymbolsV1,
    icu_decimal::provider::DecimalDigitsV1,
    icu_plurals::provider::PluralsCardinalV1,
);
