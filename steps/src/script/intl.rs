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
  // V8 joins a list's items with ',' (boa with ', ').
  Object.defineProperty(Array.prototype, 'toLocaleString', {
    value: { toLocaleString(locales, options) {
      return Array.prototype.map.call(this, (x) => (x === undefined || x === null ? '' : x.toLocaleString(locales, options))).join(',');
    } }.toLocaleString,
    writable: true,
    configurable: true,
  });
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

/// The JavaScript locale methods templates may call, and which argument
/// is the locale.
const LOCALE_METHODS: &[(&str, usize)] = &[("toLocaleString", 0), ("localeCompare", 1)];

/// `receiver.method(...args)` for JavaScript's locale methods
/// (`toLocaleString` of a number or a list, `localeCompare` of a text),
/// computed by the same `Intl` as script steps, for templates, which have
/// no JavaScript engine of their own. Only built-in methods run, on JSON
/// values: nothing a template gives is evaluated as code. `Err` is the
/// JavaScript error's text.
pub fn locale_method(
    receiver: &serde_json::Value,
    method: &str,
    args: &[serde_json::Value],
) -> Result<serde_json::Value, String> {
    let Some(&(method, locale_at)) = LOCALE_METHODS.iter().find(|(m, _)| *m == method) else {
        return Err(format!("{method} is not a locale method"));
    };
    let mut args = args.to_vec();
    // The process's own locale may be unset: take Node's default then, as
    // script workers do.
    if default_locale_env().is_some() && args.get(locale_at).is_none_or(|l| l.is_null()) {
        args.resize(args.len().max(locale_at + 1), serde_json::Value::Null);
        args[locale_at] = serde_json::Value::from("en-US");
    }
    let (reply, answer) = std::sync::mpsc::channel();
    send(LocaleCall {
        receiver: receiver.clone(),
        method,
        args,
        reply,
    })?;
    answer
        .recv()
        .map_err(|_| "the locale engine stopped".to_string())?
}

/// A call for the locale engine's thread.
struct LocaleCall {
    receiver: serde_json::Value,
    method: &'static str,
    args: Vec<serde_json::Value>,
    reply: std::sync::mpsc::Sender<Result<serde_json::Value, String>>,
}

/// Hands `call` to the one engine of the process, started on first use
/// (again if it stopped). One engine on a thread of its own, living as
/// long as the process: a boa context belongs to its thread, and one kept
/// per thread would be made again on every new thread (and cannot be
/// dropped safely when its thread ends).
fn send(mut call: LocaleCall) -> Result<(), String> {
    static ENGINE: std::sync::Mutex<Option<std::sync::mpsc::Sender<LocaleCall>>> =
        std::sync::Mutex::new(None);
    let mut slot = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..2 {
        let engine = match slot.take() {
            Some(engine) => engine,
            None => start()?,
        };
        match engine.send(call) {
            Ok(()) => {
                *slot = Some(engine);
                return Ok(());
            }
            Err(std::sync::mpsc::SendError(back)) => call = back,
        }
    }
    Err("the locale engine stopped".to_string())
}

fn start() -> Result<std::sync::mpsc::Sender<LocaleCall>, String> {
    let (engine, calls) = std::sync::mpsc::channel::<LocaleCall>();
    std::thread::Builder::new()
        .name("marktoflow-locale".into())
        .spawn(move || {
            let mut ctx = Context::default();
            let ready = install(&mut ctx).map_err(|e| e.to_string());
            for call in calls {
                let out = match &ready {
                    Ok(()) => call_in(&mut ctx, &call),
                    Err(e) => Err(e.clone()),
                };
                let _ = call.reply.send(out);
            }
        })
        .map_err(|e| format!("cannot start the locale engine: {e}"))?;
    Ok(engine)
}

fn call_in(ctx: &mut Context, call: &LocaleCall) -> Result<serde_json::Value, String> {
    let run = |ctx: &mut Context| -> boa_engine::JsResult<serde_json::Value> {
        let this = boa_engine::JsValue::from_json(&call.receiver, ctx)?;
        let args = call
            .args
            .iter()
            .map(|a| match a {
                serde_json::Value::Null => Ok(boa_engine::JsValue::undefined()),
                a => boa_engine::JsValue::from_json(a, ctx),
            })
            .collect::<boa_engine::JsResult<Vec<_>>>()?;
        let f = this
            .to_object(ctx)?
            .get(boa_engine::JsString::from(call.method), ctx)?;
        let f = f.as_callable().ok_or_else(|| {
            boa_engine::JsNativeError::typ()
                .with_message(format!("{} is not a function", call.method))
        })?;
        let v = f.call(&this, &args, ctx)?;
        Ok(v.to_json(ctx)?.unwrap_or(serde_json::Value::Null))
    };
    run(ctx).map_err(|e| super::js::thrown_message(e, ctx))
}
