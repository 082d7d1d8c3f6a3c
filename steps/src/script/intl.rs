//! Scripts' `Intl` is boa's, with ICU's data compiled in: numbers grouped
//! and rounded by locale, dates by locale and time zone, `localeCompare`
//! by the locale's collation, plural rules, list formats. Two things are
//! added here:
//!
//! - the default locale is the system's, as Node's is, and `en-US` where
//!   the system names none (`C`, `POSIX`, unset), as Node's is too (boa
//!   would take the undetermined locale, which formats dates as ISO);
//! - the number styles boa does not have (`percent`, `currency`, `unit`)
//!   are refused with an error that says so: boa formats a percentage as
//!   the bare number and fails a currency with "unimplemented".

use boa_engine::{Context, JsResult, Source};

/// The variable and value to start a script worker with so that its
/// default locale is the one Node would take; `None` when the system's
/// own locale is a language (boa reads it as Node does).
pub(crate) fn default_locale_env() -> Option<(&'static str, &'static str)> {
    // sys-locale's order, which boa follows.
    let named = ["LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
    let language = named
        .as_deref()
        .and_then(|v| v.split([':', '.', '@', '_', '-']).next())
        .unwrap_or("");
    if language.is_empty() || language == "C" || language == "POSIX" {
        Some(("LANGUAGE", "en-US"))
    } else {
        None
    }
}

const REFUSE_STYLES: &str = r#"(function () {
  const BoaNumberFormat = Intl.NumberFormat;
  function check(options) {
    if (options === undefined || options === null) return;
    const style = Object(options).style;
    if (style === undefined || String(style) === 'decimal') return;
    throw new TypeError("Intl.NumberFormat's style '" + String(style) + "' is not supported in script steps " +
      "(boa's Intl has no percent, currency or unit formats yet): format the number and add the sign " +
      "yourself, e.g. (x * 100).toLocaleString('en-US', { maximumFractionDigits: 1 }) + '%' or " +
      "'$' + x.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })");
  }
  const NumberFormat = function NumberFormat(locales, options) {
    check(options);
    return Reflect.construct(BoaNumberFormat, [locales, options], new.target === undefined ? BoaNumberFormat : new.target);
  };
  Object.defineProperty(NumberFormat, 'prototype', { value: BoaNumberFormat.prototype, writable: false });
  Object.defineProperty(BoaNumberFormat.prototype, 'constructor', { value: NumberFormat, writable: true, configurable: true });
  NumberFormat.supportedLocalesOf = BoaNumberFormat.supportedLocalesOf;
  Object.defineProperty(Intl, 'NumberFormat', { value: NumberFormat, writable: true, configurable: true });
  const toLocaleString = Number.prototype.toLocaleString;
  Object.defineProperty(Number.prototype, 'toLocaleString', {
    value: { toLocaleString(locales, options) { check(options); return toLocaleString.call(this, locales, options); } }.toLocaleString,
    writable: true,
    configurable: true,
  });
})()"#;

/// Puts the number-style check in front of boa's `Intl.NumberFormat` and
/// `Number.prototype.toLocaleString`.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    ctx.eval(Source::from_bytes(REFUSE_STYLES)).map(|_| ())
}
