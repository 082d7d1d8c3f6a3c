//! `Intl.NumberFormat` in every style (boa lacks percent, currency and
//! unit) and its `formatToParts`: ECMA-402's option rules and rounding on
//! ICU4X's `Decimal`, written by ICU4X's decimal, percent and currency
//! formatters. Grouping and digits come from boa's locale data,
//! the percent and currency patterns and symbols from ICU4X's
//! experimental data, the units' patterns from `units.txt`.

use fixed_decimal::{
    Decimal, FloatPrecision, RoundingIncrement, Sign, SignDisplay, SignedRoundingMode,
    UnsignedRoundingMode,
};
use icu_decimal::options::{DecimalFormatterOptions, GroupingStrategy};
use icu_decimal::provider::{DecimalDigitsV1, DecimalSymbolsV1};
use icu_decimal::{DecimalFormatter, DecimalFormatterPreferences};
use icu_experimental::dimension::currency::formatter::{
    CurrencyFormatter, CurrencyFormatterPreferences,
};
use icu_experimental::dimension::currency::options::{CurrencyFormatterOptions, CurrencyUsage};
use icu_experimental::dimension::currency::CurrencyType;
use icu_experimental::dimension::percent::formatter::{
    PercentFormatter, PercentFormatterPreferences,
};
use icu_experimental::dimension::percent::options::{Display, PercentFormatterOptions};
use icu_experimental::dimension::provider::currency::essentials::CurrencyEssentialsV1;
use icu_experimental::dimension::provider::currency::extended::CurrencyExtendedDataV1;
use icu_experimental::dimension::provider::currency::fractions::{
    CurrencyFractions, CurrencyFractionsV1, FractionInfo, Rounding,
};
use icu_experimental::dimension::provider::currency::patterns::CurrencyPatternsDataV1;
use icu_experimental::dimension::provider::currency::symbols::CurrencySymbolsV1;
use icu_experimental::provider::Baked;
use icu_locale_core::Locale;
use icu_provider::prelude::*;
use serde::{Deserialize, Serialize};

use super::data::Boa;
use super::parts::{pieces, Piece};
use super::units;
use super::IntlError;
use writeable::Writeable;

/// `resolvedOptions()` of a number format, as Node writes it; also what
/// a format is made from again for each call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Resolved {
    locale: String,
    #[serde(default = "latn")]
    numbering_system: String,
    #[serde(default = "decimal")]
    style: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    currency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    currency_display: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    currency_sign: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    unit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    unit_display: Option<String>,
    #[serde(default = "one")]
    minimum_integer_digits: u8,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    minimum_fraction_digits: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    maximum_fraction_digits: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    minimum_significant_digits: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    maximum_significant_digits: Option<u8>,
    #[serde(default = "auto")]
    use_grouping: serde_json::Value,
    #[serde(default = "standard")]
    notation: String,
    #[serde(default = "auto_text")]
    sign_display: String,
    #[serde(default = "half_expand")]
    rounding_mode: String,
    #[serde(default = "one_u16")]
    rounding_increment: u16,
    #[serde(default = "auto_text")]
    trailing_zero_display: String,
    #[serde(default = "auto_text")]
    rounding_priority: String,
}

fn latn() -> String {
    "latn".into()
}
fn decimal() -> String {
    "decimal".into()
}
fn one() -> u8 {
    1
}
fn one_u16() -> u16 {
    1
}
fn auto() -> serde_json::Value {
    "auto".into()
}
fn auto_text() -> String {
    "auto".into()
}
fn standard() -> String {
    "standard".into()
}
fn half_expand() -> String {
    "halfExpand".into()
}

/// The options a script gave, each already made a string, a number or a
/// boolean as ECMA-402's GetOption does, and the locale boa resolved.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Asked {
    locale: String,
    style: Option<String>,
    currency: Option<String>,
    currency_display: Option<String>,
    currency_sign: Option<String>,
    unit: Option<String>,
    unit_display: Option<String>,
    minimum_integer_digits: Option<f64>,
    minimum_fraction_digits: Option<f64>,
    maximum_fraction_digits: Option<f64>,
    minimum_significant_digits: Option<f64>,
    maximum_significant_digits: Option<f64>,
    use_grouping: Option<serde_json::Value>,
    sign_display: Option<String>,
    notation: Option<String>,
    rounding_mode: Option<String>,
    rounding_increment: Option<f64>,
    trailing_zero_display: Option<String>,
    /// The function an error names, as V8's do (`Intl.NumberFormat`,
    /// `Number.prototype.toLocaleString`).
    caller: Option<String>,
}

fn one_of(
    caller: &str,
    name: &str,
    value: Option<&str>,
    allowed: &[&str],
    default: &str,
) -> Result<String, IntlError> {
    match value {
        None => Ok(default.to_string()),
        Some(v) if allowed.contains(&v) => Ok(v.to_string()),
        Some(v) => Err(IntlError::Range(format!(
            "Value {v} out of range for {caller} options property {name}"
        ))),
    }
}

fn digits(name: &str, value: Option<f64>, min: u8, max: u8) -> Result<Option<u8>, IntlError> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v.floor() >= f64::from(min) && v.floor() <= f64::from(max) => {
            Ok(Some(v.floor() as u8))
        }
        Some(_) => Err(IntlError::Range(format!("{name} value is out of range."))),
    }
}

/// ECMA-402's InitializeNumberFormat for the options ours formats.
pub(super) fn resolve(asked: Asked) -> Result<Resolved, IntlError> {
    let caller = asked
        .caller
        .clone()
        .unwrap_or_else(|| "Intl.NumberFormat".into());
    let one_of = |name: &str, value: Option<&str>, allowed: &[&str], default: &str| {
        one_of(&caller, name, value, allowed, default)
    };
    let style = one_of(
        "style",
        asked.style.as_deref(),
        &["decimal", "percent", "currency", "unit"],
        "decimal",
    )?;
    let (unit, unit_display) = if style == "unit" {
        let unit = asked.unit.clone().unwrap_or_default();
        if !units::known(&unit) {
            let error = format!("Invalid unit argument for {caller}() '{unit}'");
            return Err(match unit.split_once("-per-") {
                _ if unit.is_empty() => IntlError::Type(error),
                // Two units Node would join: CLDR's own compounds only.
                Some((a, b)) if units::known(a) && units::known(b) => IntlError::Type(format!(
                    "Intl.NumberFormat's unit '{unit}' is not supported in script steps: of the \
                     compound units, only those CLDR names itself (kilometer-per-hour, \
                     meter-per-second, mile-per-hour, liter-per-kilometer, mile-per-gallon)"
                )),
                _ => IntlError::Range(error),
            });
        }
        let display = one_of(
            "unitDisplay",
            asked.unit_display.as_deref(),
            &["short", "narrow", "long"],
            "short",
        )?;
        (Some(unit), Some(display))
    } else {
        (None, None)
    };
    let currency = match (&asked.currency, style.as_str()) {
        (Some(c), _) if !(c.len() == 3 && c.bytes().all(|b| b.is_ascii_alphabetic())) => {
            return Err(IntlError::Range(format!("Invalid currency code : {c}")))
        }
        (Some(c), "currency") => Some(c.to_ascii_uppercase()),
        (None, "currency") => {
            return Err(IntlError::Type(
                "Currency code is required with currency style.".into(),
            ))
        }
        _ => None,
    };
    let (currency_display, currency_sign) = if currency.is_some() {
        (
            Some(one_of(
                "currencyDisplay",
                asked.currency_display.as_deref(),
                &["symbol", "narrowSymbol", "code", "name"],
                "symbol",
            )?),
            Some(one_of(
                "currencySign",
                asked.currency_sign.as_deref(),
                &["standard", "accounting"],
                "standard",
            )?),
        )
    } else {
        (None, None)
    };
    let notation = one_of(
        "notation",
        asked.notation.as_deref(),
        &["standard", "scientific", "engineering", "compact"],
        "standard",
    )?;
    if notation != "standard" {
        return Err(IntlError::Type(format!(
            "Intl.NumberFormat's notation '{notation}' with style '{style}' is not supported in script steps"
        )));
    }
    let minimum_integer_digits =
        digits("minimumIntegerDigits", asked.minimum_integer_digits, 1, 21)?.unwrap_or(1);
    // The defaults of ECMA-402's SetNumberFormatDigitOptions: a currency's
    // own digits (ISO 4217), none for a percentage, up to 3 otherwise.
    let (fd_min_default, fd_max_default) = match (style.as_str(), &currency) {
        ("currency", Some(c)) => {
            let d = currency_digits(c);
            (d, d)
        }
        ("percent", _) => (0, 0),
        _ => (0, 3),
    };
    let mnsd = digits(
        "minimumSignificantDigits",
        asked.minimum_significant_digits,
        1,
        21,
    )?;
    let mxsd = digits(
        "maximumSignificantDigits",
        asked.maximum_significant_digits,
        1,
        21,
    )?;
    let mnfd = digits(
        "minimumFractionDigits",
        asked.minimum_fraction_digits,
        0,
        100,
    )?;
    let mxfd = digits(
        "maximumFractionDigits",
        asked.maximum_fraction_digits,
        0,
        100,
    )?;
    let rounding_increment = match asked.rounding_increment {
        None => 1,
        Some(v) => INCREMENTS
            .iter()
            .map(|(n, _, _)| *n)
            .find(|n| v.is_finite() && f64::from(*n) == v.floor())
            .ok_or_else(|| IntlError::Range("roundingIncrement value is out of range.".into()))?,
    };
    let (mut fraction, mut significant) = ((None, None), (None, None));
    if mnsd.is_some() || mxsd.is_some() {
        let min = mnsd.unwrap_or(1);
        let max = mxsd.unwrap_or(21);
        if min > max {
            return Err(IntlError::Range(
                "maximumSignificantDigits value is out of range.".into(),
            ));
        }
        significant = (Some(min), Some(max));
    } else {
        fraction = match (mnfd, mxfd) {
            (None, None) => (Some(fd_min_default), Some(fd_max_default)),
            (Some(min), None) => (Some(min), Some(fd_max_default.max(min))),
            (None, Some(max)) => (Some(fd_min_default.min(max)), Some(max)),
            (Some(min), Some(max)) if min > max => {
                return Err(IntlError::Range(
                    "maximumFractionDigits value is out of range.".into(),
                ))
            }
            (Some(min), Some(max)) => (Some(min), Some(max)),
        };
    }
    if rounding_increment != 1 && fraction.0 != fraction.1 {
        return Err(IntlError::Range(
            "maximumFractionDigits not equal to minimumFractionDigits".into(),
        ));
    }
    let use_grouping = match asked.use_grouping {
        None => auto(),
        Some(serde_json::Value::Bool(true)) => "always".into(),
        Some(serde_json::Value::Bool(false)) => false.into(),
        Some(serde_json::Value::String(s)) if ["always", "auto", "min2"].contains(&s.as_str()) => {
            s.into()
        }
        Some(serde_json::Value::String(s)) if s == "true" || s == "false" => auto(),
        Some(other) => {
            return Err(IntlError::Range(format!(
                "Value {other} out of range for {caller} options property useGrouping"
            )))
        }
    };
    Ok(Resolved {
        locale: asked.locale,
        numbering_system: latn(),
        style,
        currency,
        currency_display,
        currency_sign,
        unit,
        unit_display,
        minimum_integer_digits,
        minimum_fraction_digits: fraction.0,
        maximum_fraction_digits: fraction.1,
        minimum_significant_digits: significant.0,
        maximum_significant_digits: significant.1,
        use_grouping,
        notation,
        sign_display: one_of(
            "signDisplay",
            asked.sign_display.as_deref(),
            &["auto", "never", "always", "exceptZero", "negative"],
            "auto",
        )?,
        rounding_increment,
        rounding_mode: one_of(
            "roundingMode",
            asked.rounding_mode.as_deref(),
            &[
                "ceil",
                "floor",
                "expand",
                "trunc",
                "halfCeil",
                "halfFloor",
                "halfExpand",
                "halfTrunc",
                "halfEven",
            ],
            "halfExpand",
        )?,
        rounding_priority: auto_text(),
        trailing_zero_display: one_of(
            "trailingZeroDisplay",
            asked.trailing_zero_display.as_deref(),
            &["auto", "stripIfInteger"],
            "auto",
        )?,
    })
}

/// ECMA-402's rounding increments: a multiple of 1, 2, 5 or 25 at a
/// power of ten (`250` is 25 at 10¹).
const INCREMENTS: &[(u16, RoundingIncrement, i16)] = &[
    (1, RoundingIncrement::MultiplesOf1, 0),
    (2, RoundingIncrement::MultiplesOf2, 0),
    (5, RoundingIncrement::MultiplesOf5, 0),
    (10, RoundingIncrement::MultiplesOf1, 1),
    (20, RoundingIncrement::MultiplesOf2, 1),
    (25, RoundingIncrement::MultiplesOf25, 0),
    (50, RoundingIncrement::MultiplesOf5, 1),
    (100, RoundingIncrement::MultiplesOf1, 2),
    (200, RoundingIncrement::MultiplesOf2, 2),
    (250, RoundingIncrement::MultiplesOf25, 1),
    (500, RoundingIncrement::MultiplesOf5, 2),
    (1000, RoundingIncrement::MultiplesOf1, 3),
    (2000, RoundingIncrement::MultiplesOf2, 3),
    (2500, RoundingIncrement::MultiplesOf25, 2),
    (5000, RoundingIncrement::MultiplesOf5, 3),
];

/// A currency's minor-unit digits (2 where the data names none).
fn currency_digits(code: &str) -> u8 {
    let Ok(currency) = CurrencyType::try_from_str(code) else {
        return 2;
    };
    DataProvider::<CurrencyFractionsV1>::load(&Baked, Default::default())
        .map(|r| r.payload.get().resolve(currency).digits)
        .unwrap_or(2)
}

/// `x` as `resolved` formats it, cut into `formatToParts`'s pieces.
pub(super) fn format(resolved: &Resolved, x: f64) -> Result<Vec<Piece>, IntlError> {
    // A decimal format's parts are ours from boa's resolved options:
    // its compact and scientific notations are not.
    if resolved.notation != "standard" {
        return Err(IntlError::Type(format!(
            "Intl.NumberFormat's notation '{}' is not supported in script steps' formatToParts",
            resolved.notation
        )));
    }
    let locale: Locale = resolved.locale.parse().map_err(|_| {
        IntlError::Range(format!(
            "Incorrect locale information provided: {}",
            resolved.locale
        ))
    })?;
    // NaN and the infinities are written where the number stands, in a
    // pattern made for a zero of the same sign (ICU4X's Decimal has none).
    let (mut value, stand_in) = if x.is_finite() {
        let mut value = Decimal::try_from_f64(x, FloatPrecision::RoundTrip)
            .map_err(|_| IntlError::Range(format!("{x} cannot be formatted")))?;
        if resolved.style == "percent" {
            value.multiply_pow10(2);
        }
        round(&mut value, resolved);
        (value, None)
    } else {
        let sign = if x < 0.0 { Sign::Negative } else { Sign::None };
        let (kind, text) = if x.is_nan() {
            (NAN, "NaN")
        } else {
            (INFINITY, "∞")
        };
        (
            Decimal::from(0).with_sign(sign),
            Some(vec![(Some(kind), text.to_string())]),
        )
    };
    value.apply_sign_display(sign_display(&resolved.sign_display));
    if x.is_nan() && value.sign() == Sign::Negative {
        value.set_sign(Sign::None);
    }
    let data =
        |e: DataError| IntlError::Range(format!("no locale data for {}: {e}", resolved.locale));
    let grouping = match &resolved.use_grouping {
        serde_json::Value::Bool(false) => GroupingStrategy::Never,
        serde_json::Value::String(s) if s == "always" => GroupingStrategy::Always,
        serde_json::Value::String(s) if s == "min2" => GroupingStrategy::Min2,
        _ => GroupingStrategy::Auto,
    };
    // Each formatter is made once per thread for its locale and options.
    let formatter =
        |grouping: GroupingStrategy| decimal_formatter(&resolved.locale, &locale, grouping);
    let decimal = formatter(grouping)?;
    // The number's own parts, written as the styled text writes it (its
    // sign is the pattern's there).
    let unsigned = value.clone().with_sign(Sign::None);
    let number = match stand_in {
        Some(pieces) if matches!(resolved.style.as_str(), "decimal" | "unit") => {
            let mut out = pieces_of_sign(&value);
            out.extend(pieces);
            out
        }
        Some(pieces) => pieces,
        None if matches!(resolved.style.as_str(), "decimal" | "unit") => {
            pieces(&decimal.format(&value), "decimal")
        }
        None => pieces(&decimal.format(&unsigned), "decimal"),
    };
    let (styled, written) = match (resolved.style.as_str(), &resolved.currency) {
        ("percent", _) => {
            let written = decimal.format(&unsigned).write_to_string().into_owned();
            // The pattern writes a plus sign, not the number.
            let display = if value.sign() == Sign::Positive {
                value.set_sign(Sign::None);
                Display::ExplicitSign
            } else {
                Display::Standard
            };
            let key = format!("{}|{grouping:?}|{display:?}", resolved.locale);
            let f = super::cached(key, || {
                PercentFormatter::try_new_with_decimal_formatter_unstable(
                    &Baked,
                    PercentFormatterPreferences::from(&locale),
                    DecimalFormatter::clone(&decimal),
                    PercentFormatterOptions::from(display),
                )
                .map_err(data)
            })?;
            (f.format(&value).write_to_string().into_owned(), written)
        }
        ("currency", Some(code)) => {
            let currency = CurrencyType::try_from_str(code)
                .map_err(|_| IntlError::Range(format!("Invalid currency code : {code}")))?;
            // The digits are ours (rounded above): the formatter's own
            // rounding to the currency's digits is told to keep them.
            let provider = Currency {
                digits: u8::try_from(-*value.absolute.magnitude_range().start()).unwrap_or(0),
            };
            let prefs = CurrencyFormatterPreferences::from(&locale);
            let usage = if resolved.currency_sign.as_deref() == Some("accounting") {
                CurrencyUsage::Accounting
            } else {
                CurrencyUsage::Standard
            };
            let options = CurrencyFormatterOptions::from(usage);
            let key = format!(
                "{}|{code}|{:?}|{usage:?}|{}",
                resolved.locale, resolved.currency_display, provider.digits
            );
            let f = super::cached(key, || {
                match resolved.currency_display.as_deref() {
                    Some("code") => CurrencyFormatter::try_new_code_unstable(
                        &provider, prefs, currency, options,
                    ),
                    Some("name") => {
                        CurrencyFormatter::try_new_name_unstable(&provider, prefs, currency)
                    }
                    Some("narrowSymbol") => CurrencyFormatter::try_new_symbol_narrow_unstable(
                        &provider, prefs, currency, options,
                    ),
                    _ => CurrencyFormatter::try_new_symbol_unstable(
                        &provider, prefs, currency, options,
                    ),
                }
                .map_err(data)
            })?;
            // The currency formatter groups as the locale does: its number
            // is replaced by ours, grouped as asked.
            let written = formatter(GroupingStrategy::Auto)?
                .format(&unsigned)
                .write_to_string()
                .into_owned();
            let text = f
                .format_fixed_decimal(&value)
                .write_to_string()
                .into_owned();
            (text, written)
        }
        ("unit", _) => {
            let unit = resolved.unit.as_deref().unwrap_or_default();
            let width = resolved.unit_display.as_deref().unwrap_or("short");
            let key = format!("{}|{unit}|{width}", resolved.locale);
            let patterns = super::cached(key, || {
                units::patterns(&resolved.locale, unit, width).ok_or_else(|| {
                    IntlError::Range(format!(
                        "Invalid unit argument for Intl.NumberFormat() '{unit}'"
                    ))
                })
            })?;
            let rules = super::cached(resolved.locale.clone(), || {
                icu_plurals::PluralRules::try_new_cardinal_unstable(
                    &Boa,
                    icu_plurals::PluralRulesPreferences::from(&locale),
                )
                .map_err(data)
            })?;
            let category = category_name(rules.category_for(&value.absolute));
            let pattern = patterns
                .iter()
                .find(|(c, _)| c == category)
                .or_else(|| patterns.iter().find(|(c, _)| c == "other"))
                .map(|(_, p)| p.as_str())
                .unwrap_or("{0}");
            let written: String = number.iter().map(|(_, t)| t.as_str()).collect();
            (pattern.replacen("{0}", &written, 1), written)
        }
        _ => {
            return Ok(always_grouped(
                name_pieces(number, resolved),
                grouping,
                &decimal,
            ))
        }
    };
    Ok(always_grouped(
        splice(&styled, &written, number, resolved),
        grouping,
        &decimal,
    ))
}

/// `useGrouping: 'always'` (and `true`) as ECMA-402 means it: ICU4X's
/// Always is its Auto, so a locale that groups only from five digits (es,
/// pl) would write `1234` where Node writes `1.234`.
fn always_grouped(
    written: Vec<Piece>,
    grouping: GroupingStrategy,
    decimal: &DecimalFormatter,
) -> Vec<Piece> {
    if grouping != GroupingStrategy::Always || written.iter().any(|p| p.kind == "group") {
        return written;
    }
    let sample = pieces(&decimal.format(&Decimal::from(1_234_567)), "decimal");
    let Some(separator) = sample
        .into_iter()
        .find(|(p, _)| p.is_some_and(|p| p.value == "group"))
        .map(|(_, t)| t)
    else {
        return written;
    };
    let mut out = Vec::new();
    for piece in written {
        let digits: Vec<char> = piece.text.chars().collect();
        if piece.kind != "integer" || digits.len() <= 3 {
            out.push(piece);
            continue;
        }
        let first = match digits.len() % 3 {
            0 => 3,
            n => n,
        };
        let mut at = 0;
        let mut width = first;
        while at < digits.len() {
            if at > 0 {
                out.push(Piece {
                    kind: "group".into(),
                    text: separator.clone(),
                });
            }
            out.push(Piece {
                kind: "integer".into(),
                text: digits[at..at + width].iter().collect(),
            });
            at += width;
            width = 3;
        }
    }
    out
}

fn category_name(c: icu_plurals::PluralCategory) -> &'static str {
    use icu_plurals::PluralCategory as C;
    match c {
        C::Zero => "zero",
        C::One => "one",
        C::Two => "two",
        C::Few => "few",
        C::Many => "many",
        C::Other => "other",
    }
}

const NAN: writeable::Part = writeable::Part {
    category: "decimal",
    value: "nan",
};
const INFINITY: writeable::Part = writeable::Part {
    category: "decimal",
    value: "infinity",
};

/// A decimal-style sign for a stand-in zero.
fn pieces_of_sign(value: &Decimal) -> Vec<(Option<writeable::Part>, String)> {
    match value.sign() {
        Sign::Negative => vec![(Some(icu_decimal::parts::MINUS_SIGN), "-".into())],
        Sign::Positive => vec![(Some(icu_decimal::parts::PLUS_SIGN), "+".into())],
        Sign::None => vec![],
    }
}

/// The styled text's pieces: `number`'s where the formatter wrote its
/// number (`written`), the pattern's text around it named by
/// `name_pieces`.
fn splice(
    styled: &str,
    written: &str,
    number: Vec<(Option<writeable::Part>, String)>,
    resolved: &Resolved,
) -> Vec<Piece> {
    let Some(at) = styled.find(written).filter(|_| !written.is_empty()) else {
        return name_pieces(vec![(None, styled.to_string())], resolved);
    };
    let mut raw = vec![(None, styled[..at].to_string())];
    raw.extend(number);
    raw.push((None, styled[at + written.len()..].to_string()));
    name_pieces(raw, resolved)
}

/// `locale`'s decimal formatter (`tag` is its text), made once per
/// thread, from boa's data.
pub(super) fn decimal_formatter(
    tag: &str,
    locale: &Locale,
    grouping: GroupingStrategy,
) -> Result<std::rc::Rc<DecimalFormatter>, IntlError> {
    super::cached(format!("{tag}|{grouping:?}"), || {
        DecimalFormatter::try_new_unstable(
            &Boa,
            DecimalFormatterPreferences::from(locale),
            DecimalFormatterOptions::from(grouping),
        )
        .map_err(|e| IntlError::Range(format!("no locale data for {tag}: {e}")))
    })
}

/// Rounds by ECMA-402's digit options: fraction digits, or significant
/// digits where they were given; then the integer digits' minimum.
fn round(value: &mut Decimal, resolved: &Resolved) {
    let mode = rounding_mode(&resolved.rounding_mode);
    match (
        resolved.minimum_significant_digits,
        resolved.maximum_significant_digits,
    ) {
        (Some(min), Some(max)) => {
            let top = if value.absolute.is_zero() {
                0
            } else {
                value.absolute.nonzero_magnitude_start()
            };
            value.round_with_mode(top - i16::from(max) + 1, mode);
            value.absolute.trim_end();
            let top = if value.absolute.is_zero() {
                0
            } else {
                value.absolute.nonzero_magnitude_start()
            };
            value.absolute.pad_end((top - i16::from(min) + 1).min(0));
        }
        _ => {
            let max = resolved.maximum_fraction_digits.unwrap_or(3);
            let min = resolved.minimum_fraction_digits.unwrap_or(0).min(max);
            let (_, increment, power) = INCREMENTS
                .iter()
                .find(|(n, _, _)| *n == resolved.rounding_increment)
                .unwrap_or(&INCREMENTS[0]);
            value.round_with_mode_and_increment(-i16::from(max) + power, mode, *increment);
            value.absolute.trim_end();
            value.absolute.pad_end(-i16::from(min));
        }
    }
    // An integer loses the fraction digits it was padded to.
    if resolved.trailing_zero_display == "stripIfInteger"
        && (value.absolute.is_zero() || value.absolute.nonzero_magnitude_end() >= 0)
    {
        value.absolute.trim_end();
    }
    value
        .absolute
        .pad_start(i16::from(resolved.minimum_integer_digits));
}

fn rounding_mode(name: &str) -> SignedRoundingMode {
    use UnsignedRoundingMode as U;
    match name {
        "ceil" => SignedRoundingMode::Ceil,
        "floor" => SignedRoundingMode::Floor,
        "halfCeil" => SignedRoundingMode::HalfCeil,
        "halfFloor" => SignedRoundingMode::HalfFloor,
        "expand" => SignedRoundingMode::Unsigned(U::Expand),
        "trunc" => SignedRoundingMode::Unsigned(U::Trunc),
        "halfTrunc" => SignedRoundingMode::Unsigned(U::HalfTrunc),
        "halfEven" => SignedRoundingMode::Unsigned(U::HalfEven),
        _ => SignedRoundingMode::Unsigned(U::HalfExpand),
    }
}

fn sign_display(name: &str) -> SignDisplay {
    match name {
        "never" => SignDisplay::Never,
        "always" => SignDisplay::Always,
        "exceptZero" => SignDisplay::ExceptZero,
        "negative" => SignDisplay::Negative,
        _ => SignDisplay::Auto,
    }
}

/// Names the text ICU4X's parts leave unmarked: the percent sign, the
/// currency's symbol, code or name, and the literal rest.
fn name_pieces(raw: Vec<(Option<writeable::Part>, String)>, resolved: &Resolved) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let mut push = |kind: &str, text: &str| {
        if text.is_empty() {
            return;
        }
        match out.last_mut() {
            Some(last) if last.kind == kind && kind == "literal" => last.text.push_str(text),
            _ => out.push(Piece {
                kind: kind.into(),
                text: text.into(),
            }),
        }
    };
    for (part, text) in raw {
        if let Some(part) = part {
            push(part.value, &text);
            continue;
        }
        // A unit's affix: the unit's name between spaces.
        if resolved.style == "unit" {
            let inner = text.trim();
            let (lead, trail) = text.split_at(text.find(inner).unwrap_or(0));
            push("literal", lead);
            push("unit", inner);
            push("literal", &trail[inner.len()..]);
            continue;
        }
        // Unmarked text is the pattern's: signs, symbols and spaces.
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let c = rest.chars().next().unwrap_or(' ');
            let len = c.len_utf8();
            if c.is_whitespace()
                || c == '\u{200e}'
                || c == '\u{200f}'
                || c == '\u{61c}'
                || c == '('
                || c == ')'
            {
                push("literal", &rest[..len]);
                rest = &rest[len..];
            } else if "%٪‰".contains(c) {
                push("percentSign", &rest[..len]);
                rest = &rest[len..];
            } else if "-−‐‑".contains(c) {
                push("minusSign", &rest[..len]);
                rest = &rest[len..];
            } else if c == '+' {
                push("plusSign", &rest[..len]);
                rest = &rest[len..];
            } else if c == '~' || c == '≈' {
                push("approximatelySign", &rest[..len]);
                rest = &rest[len..];
            } else {
                // A currency's symbol, code or name: up to the next space
                // or sign, or to the end (a name has spaces inside).
                let end = if resolved.currency_display.as_deref() == Some("name") {
                    rest.len()
                } else {
                    rest.find(|c: char| c.is_whitespace() || "%٪-−+()".contains(c))
                        .unwrap_or(rest.len())
                };
                let end = end.max(len);
                push(
                    if resolved.currency.is_some() {
                        "currency"
                    } else {
                        "literal"
                    },
                    &rest[..end],
                );
                rest = &rest[end..];
            }
        }
    }
    out
}

/// The currency formatter's data: its patterns and names from ICU4X's
/// experimental data, decimal symbols from boa's, and the fraction digits
/// set to those the value already has.
struct Currency {
    digits: u8,
}

super::data::from_baked!(
    Currency,
    CurrencyEssentialsV1,
    CurrencySymbolsV1,
    CurrencyExtendedDataV1,
    CurrencyPatternsDataV1
);
super::data::from_boa!(
    Currency,
    DecimalSymbolsV1,
    DecimalDigitsV1,
    icu_plurals::provider::PluralsCardinalV1
);

impl DataProvider<CurrencyFractionsV1> for Currency {
    fn load(&self, _req: DataRequest) -> Result<DataResponse<CurrencyFractionsV1>, DataError> {
        let info = FractionInfo {
            digits: self.digits,
            rounding: Rounding::R1,
            cash_digits: None,
            cash_rounding: None,
        };
        Ok(DataResponse {
            metadata: Default::default(),
            payload: DataPayload::from_owned(CurrencyFractions {
                fractions: Default::default(),
                default: info,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(json: serde_json::Value) -> Asked {
        serde_json::from_value(json).unwrap()
    }

    fn text(resolved: &Resolved, x: f64) -> String {
        format(resolved, x)
            .unwrap()
            .into_iter()
            .map(|p| p.text)
            .collect()
    }

    #[test]
    fn a_currency_takes_its_own_digits_unless_told() {
        let jpy = resolve(asked(
            serde_json::json!({"locale": "en-US", "style": "currency", "currency": "jpy"}),
        ))
        .unwrap();
        assert_eq!(
            (jpy.minimum_fraction_digits, jpy.maximum_fraction_digits),
            (Some(0), Some(0))
        );
        assert_eq!(jpy.currency.as_deref(), Some("JPY"));
        assert_eq!(text(&jpy, 1234.5), "¥1,235");
        let kwd = resolve(asked(
            serde_json::json!({"locale": "en-US", "style": "currency", "currency": "KWD"}),
        ))
        .unwrap();
        assert_eq!(kwd.maximum_fraction_digits, Some(3));
        let usd = resolve(asked(serde_json::json!({"locale": "en-US", "style": "currency", "currency": "USD", "maximumFractionDigits": 0}))).unwrap();
        assert_eq!(
            (usd.minimum_fraction_digits, usd.maximum_fraction_digits),
            (Some(0), Some(0))
        );
        assert_eq!(text(&usd, 2.5), "$3");
    }

    #[test]
    fn digit_options_out_of_order_or_range_are_range_errors() {
        let e = resolve(asked(
            serde_json::json!({"locale": "en-US", "style": "percent", "minimumFractionDigits": 3, "maximumFractionDigits": 1}),
        ));
        assert_eq!(
            e.unwrap_err(),
            IntlError::Range("maximumFractionDigits value is out of range.".into())
        );
        let e = resolve(asked(
            serde_json::json!({"locale": "en-US", "style": "percent", "minimumIntegerDigits": 0}),
        ));
        assert_eq!(
            e.unwrap_err(),
            IntlError::Range("minimumIntegerDigits value is out of range.".into())
        );
        let e = resolve(asked(
            serde_json::json!({"locale": "en-US", "style": "percent", "signDisplay": "sometimes"}),
        ));
        assert_eq!(
            e.unwrap_err(),
            IntlError::Range(
                "Value sometimes out of range for Intl.NumberFormat options property signDisplay"
                    .into()
            )
        );
    }

    #[test]
    fn rounding_follows_the_mode_and_the_significant_digits() {
        let r = |o: serde_json::Value| resolve(asked(o)).unwrap();
        let trunc = r(
            serde_json::json!({"locale": "en-US", "style": "percent", "roundingMode": "trunc", "maximumFractionDigits": 1}),
        );
        assert_eq!(text(&trunc, 0.12399), "12.3%");
        let even = r(
            serde_json::json!({"locale": "en-US", "style": "percent", "roundingMode": "halfEven"}),
        );
        assert_eq!(text(&even, 0.125), "12%");
        let sig = r(
            serde_json::json!({"locale": "en-US", "style": "percent", "minimumSignificantDigits": 3}),
        );
        assert_eq!(text(&sig, 0.0), "0.00%");
        let sig = r(
            serde_json::json!({"locale": "en-US", "style": "currency", "currency": "USD", "maximumSignificantDigits": 2}),
        );
        assert_eq!(text(&sig, 99.5), "$100");
    }

    #[test]
    fn units_are_written_as_the_locale_writes_them_and_unknown_ones_refused() {
        let r = |o: serde_json::Value| resolve(asked(o));
        let long = r(serde_json::json!({"locale": "de-DE", "style": "unit", "unit": "megabyte", "unitDisplay": "long"})).unwrap();
        assert_eq!(text(&long, 1.5), "1,5 Megabyte");
        let short = r(
            serde_json::json!({"locale": "en-US", "style": "unit", "unit": "kilometer-per-hour"}),
        )
        .unwrap();
        assert_eq!(text(&short, -12.0), "-12 km/h");
        let e = r(serde_json::json!({"locale": "en-US", "style": "unit", "unit": "furlong"}))
            .unwrap_err();
        assert_eq!(
            e,
            IntlError::Range("Invalid unit argument for Intl.NumberFormat() 'furlong'".into())
        );
        let e = r(serde_json::json!({"locale": "en-US", "style": "unit"})).unwrap_err();
        assert_eq!(
            e,
            IntlError::Type("Invalid unit argument for Intl.NumberFormat() ''".into())
        );
        let e = r(serde_json::json!({"locale": "en-US", "style": "unit", "unit": "byte-per-week"}))
            .unwrap_err();
        assert!(
            matches!(&e, IntlError::Type(m) if m.starts_with("Intl.NumberFormat's unit 'byte-per-week' is not supported")),
            "{e:?}"
        );
        let e =
            r(serde_json::json!({"locale": "en-US", "style": "percent", "notation": "compact"}))
                .unwrap_err();
        assert_eq!(
            e,
            IntlError::Type("Intl.NumberFormat's notation 'compact' with style 'percent' is not supported in script steps".into())
        );
    }
}
