//! Scripts' `Intl` is boa's, with ICU's data compiled in: numbers grouped
//! and rounded by locale, dates by locale and time zone, `localeCompare`
//! by the locale's collation, plural rules, list formats. Where boa's
//! differs from Node's, ours is put in front of it (`prelude.js`):
//!
//! - the default locale is the system's, as Node's is, and `en-US` where
//!   the system names none (`C`, `POSIX`, unset), as Node's is too (boa
//!   would take the undetermined locale, which formats dates as ISO);
//! - numbers in every style (number.rs, units.rs): boa lacks the percent,
//!   currency and unit styles, and writes ∞ and always-on grouping
//!   otherwise than Node (the scientific and engineering notations and
//!   other numbering systems stay boa's);
//! - dates (date.rs): boa writes a numeric year with two digits and a
//!   zone's name as `GMT+?` (`dayPeriod`, other calendars and numbering
//!   systems stay boa's);
//! - `formatToParts` of both (parts.rs);
//! - `Intl.RelativeTimeFormat`, which boa lacks (relative.rs).

mod data;
mod date;
mod number;
mod parts;
mod relative;
mod units;

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::{
    js_string, Context, JsNativeError, JsResult, JsString, JsValue, NativeFunction, Source,
};

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

/// Why a format could not be made: JavaScript's RangeError or TypeError.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IntlError {
    Range(String),
    Type(String),
}

impl From<IntlError> for boa_engine::JsError {
    fn from(e: IntlError) -> Self {
        match e {
            IntlError::Range(m) => JsNativeError::range().with_message(m).into(),
            IntlError::Type(m) => JsNativeError::typ().with_message(m).into(),
        }
    }
}

/// The formatter made for `key` before on this thread, or a new one:
/// ICU4X's formatters load their locale's data when made, which costs
/// more than formatting (a script formats many values alike). A few
/// dozen are kept; past that the cache starts over.
fn cached<T: 'static, E>(
    key: String,
    make: impl FnOnce() -> Result<T, E>,
) -> Result<std::rc::Rc<T>, E> {
    use std::any::{Any, TypeId};
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::rc::Rc;
    type Cache = HashMap<(TypeId, String), Rc<dyn Any>>;
    thread_local! {
        static CACHE: RefCell<Cache> = RefCell::new(HashMap::new());
    }
    let key = (TypeId::of::<T>(), key);
    if let Some(found) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        if let Ok(found) = found.downcast::<T>() {
            return Ok(found);
        }
    }
    let made = Rc::new(make()?);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= 64 {
            c.clear();
        }
        c.insert(key, made.clone() as Rc<dyn Any>);
    });
    Ok(made)
}

/// Argument `i` as text (`undefined` where it is missing).
fn text_arg(args: &[JsValue], i: usize, ctx: &mut Context) -> JsResult<String> {
    Ok(args
        .get(i)
        .cloned()
        .unwrap_or_default()
        .to_string(ctx)?
        .to_std_string_escaped())
}

/// Argument `i`, JSON text, read as `T`.
fn json_arg<T: serde::de::DeserializeOwned>(
    args: &[JsValue],
    i: usize,
    ctx: &mut Context,
) -> JsResult<T> {
    serde_json::from_str(&text_arg(args, i, ctx)?).map_err(bad_op)
}

fn number_arg(args: &[JsValue], i: usize, ctx: &mut Context) -> JsResult<f64> {
    args.get(i).cloned().unwrap_or_default().to_number(ctx)
}

fn json_text(v: &impl serde::Serialize) -> JsResult<JsValue> {
    let text =
        serde_json::to_string(v).map_err(|e| JsNativeError::typ().with_message(e.to_string()))?;
    Ok(JsString::from(text).into())
}

fn joined(pieces: Vec<parts::Piece>) -> String {
    pieces.into_iter().map(|p| p.text).collect()
}

fn parts_to_js(pieces: Vec<parts::Piece>, ctx: &mut Context) -> JsResult<JsValue> {
    let list: Vec<serde_json::Value> = pieces
        .into_iter()
        .map(|p| serde_json::json!({"type": p.kind, "value": p.text}))
        .collect();
    JsValue::from_json(&serde_json::Value::Array(list), ctx)
}

/// `number('resolve', asked)` → resolved; `number('format' | 'parts',
/// resolved, x)`; options as JSON text.
fn number_native(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    match text_arg(args, 0, ctx)?.as_str() {
        "resolve" => json_text(&number::resolve(json_arg(args, 1, ctx)?)?),
        op @ ("format" | "parts") => {
            let resolved: number::Resolved = json_arg(args, 1, ctx)?;
            let pieces = number::format(&resolved, number_arg(args, 2, ctx)?)?;
            if op == "format" {
                Ok(JsString::from(joined(pieces)).into())
            } else {
                parts_to_js(pieces, ctx)
            }
        }
        _ => Err(JsNativeError::typ()
            .with_message("unknown number operation")
            .into()),
    }
}

/// `date('resolve', asked, required, defaults, caller)` → resolved;
/// `date('reported', resolved)` → what `resolvedOptions()` shows;
/// `date('format' | 'parts', resolved, year, month, day, hour, minute,
/// second, millisecond, offset)`, the fields in the format's zone.
fn date_native(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    match text_arg(args, 0, ctx)?.as_str() {
        "resolve" => {
            let required =
                serde_json::from_value(text_arg(args, 2, ctx)?.into()).map_err(bad_op)?;
            let defaults =
                serde_json::from_value(text_arg(args, 3, ctx)?.into()).map_err(bad_op)?;
            let caller = text_arg(args, 4, ctx)?;
            json_text(&date::resolve(
                json_arg(args, 1, ctx)?,
                required,
                defaults,
                &caller,
            )?)
        }
        "reported" => json_text(&date::reported(&json_arg(args, 1, ctx)?)),
        op @ ("format" | "parts") => {
            let resolved: date::Options = json_arg(args, 1, ctx)?;
            let mut field = [0.0; 8];
            for (i, f) in field.iter_mut().enumerate() {
                *f = number_arg(args, i + 2, ctx)?;
            }
            let pieces = date::format(&resolved, date::Civil::from(field))?;
            if op == "format" {
                // V8's format writes a plain space where ICU writes a
                // narrow no-break one (before AM/PM); its parts keep it.
                Ok(JsString::from(joined(pieces).replace('\u{202f}', " ")).into())
            } else {
                parts_to_js(pieces, ctx)
            }
        }
        _ => Err(JsNativeError::typ()
            .with_message("unknown date operation")
            .into()),
    }
}

/// `relative('resolve', asked)` → resolved; `relative('format' | 'parts',
/// resolved, value, unit)`.
fn relative_native(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    match text_arg(args, 0, ctx)?.as_str() {
        "resolve" => json_text(&relative::resolve(json_arg(args, 1, ctx)?)?),
        op @ ("format" | "parts") => {
            let resolved: relative::Resolved = json_arg(args, 1, ctx)?;
            let value = number_arg(args, 2, ctx)?;
            let unit = text_arg(args, 3, ctx)?;
            let pieces = relative::format(&resolved, value, &unit)?;
            if op == "format" {
                return Ok(JsString::from(joined(pieces)).into());
            }
            // The number's parts name the unit, as Node's do.
            let singular = unit.strip_suffix('s').unwrap_or(&unit);
            let list: Vec<serde_json::Value> = pieces
                .into_iter()
                .map(|p| match p.kind.as_str() {
                    "literal" => serde_json::json!({"type": p.kind, "value": p.text}),
                    _ => serde_json::json!({"type": p.kind, "value": p.text, "unit": singular}),
                })
                .collect();
            JsValue::from_json(&serde_json::Value::Array(list), ctx)
        }
        _ => Err(JsNativeError::typ()
            .with_message("unknown relative time operation")
            .into()),
    }
}

fn bad_op(e: serde_json::Error) -> boa_engine::JsError {
    JsNativeError::typ()
        .with_message(format!("bad Intl options: {e}"))
        .into()
}

/// Puts ours in front of boa's `Intl.NumberFormat`, `Intl.DateTimeFormat`
/// and the locale methods of numbers, lists and dates.
pub(crate) fn install(ctx: &mut Context) -> JsResult<()> {
    let prelude = ctx.eval(Source::from_bytes(include_str!("prelude.js")))?;
    let prelude = prelude
        .as_callable()
        .ok_or_else(|| JsNativeError::typ().with_message("the Intl prelude is not a function"))?;
    let number =
        FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(number_native))
            .name(js_string!("number"))
            .length(3)
            .build();
    let date = FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(date_native))
        .name(js_string!("date"))
        .length(5)
        .build();
    let relative =
        FunctionObjectBuilder::new(ctx.realm(), NativeFunction::from_fn_ptr(relative_native))
            .name(js_string!("relative"))
            .length(4)
            .build();
    prelude
        .call(
            &JsValue::undefined(),
            &[number.into(), date.into(), relative.into()],
            ctx,
        )
        .map(|_| ())
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
