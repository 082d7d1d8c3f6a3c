//! Small helpers shared by the native modules: per-job state, argument
//! checks with Node-like messages, and error construction.

use crate::core::sandbox::Sandbox;
use crate::core::signals::LogLevel;
use boa_engine::builtins::error::Error as ErrorData;
use boa_engine::error::{EngineError, RuntimeLimitError};
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::{
    js_string, Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue,
    NativeFunction,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Where `console.*` lines go.
pub(crate) type ConsoleSink = Rc<dyn Fn(LogLevel, String)>;

/// Per-job state stored in the boa `Context` (dropped with it).
pub(crate) struct JobState {
    pub sandbox: Sandbox,
    pub console: ConsoleSink,
    /// `require` cache: module objects built on first use.
    pub modules: RefCell<HashMap<&'static str, JsObject>>,
    /// Prototypes of `fs.Stats` and `fs.Dirent` objects, built once per job.
    pub protos: RefCell<HashMap<&'static str, JsObject>>,
}

pub(crate) fn state(ctx: &Context) -> &JobState {
    ctx.get_data::<JobState>()
        .expect("script job state is installed before any code runs")
}

/// A named native function object.
pub(crate) fn fn_obj(ctx: &mut Context, name: &str, f: NativeFunction, len: usize) -> JsObject {
    FunctionObjectBuilder::new(ctx.realm(), f)
        .name(js_string!(name))
        .length(len)
        .constructor(false)
        .build()
        .into()
}

/// Describes a received value the way Node's ERR_INVALID_ARG_TYPE does.
pub(crate) fn describe(v: &JsValue) -> String {
    if v.is_undefined() {
        return "undefined".into();
    }
    if v.is_null() {
        return "null".into();
    }
    if let Some(o) = v.as_object() {
        if o.is_callable() {
            return "function".into();
        }
        return "an instance of Object".into();
    }
    if let Some(s) = v.as_string() {
        let s = s.to_std_string_lossy();
        let short: String = s.chars().take(25).collect();
        let more = if short.len() < s.len() { "..." } else { "" };
        return format!("type string ('{short}'{more})");
    }
    let shown = v.display().to_string();
    format!("type {} ({shown})", v.type_of())
}

/// `TypeError: The "<name>" argument must be of type <ty>. Received ...`, as
/// Node's ERR_INVALID_ARG_TYPE reads.
pub(crate) fn arg_error(name: &str, ty: &str, got: &JsValue) -> JsError {
    JsNativeError::typ()
        .with_message(format!(
            "The \"{name}\" argument must be of type {ty}. Received {}",
            describe(got)
        ))
        .into()
}

/// A string argument, or Node's type error.
pub(crate) fn str_of(v: &JsValue, name: &str) -> JsResult<String> {
    match v.as_string() {
        Some(s) => Ok(s.to_std_string_lossy()),
        None => Err(arg_error(name, "string", v)),
    }
}

/// Builds an `Error` object with `message` and extra properties, as a throwable.
pub(crate) fn error_with(ctx: &mut Context, message: String, props: &[(&str, JsValue)]) -> JsError {
    let obj = JsNativeError::error()
        .with_message(message)
        .into_opaque(ctx);
    for (k, v) in props {
        let _ = obj.set(js_string!(*k), v.clone(), false, ctx);
    }
    JsError::from_opaque(obj.into())
}

pub(crate) fn jstr(s: &str) -> JsValue {
    JsValue::from(JsString::from(s))
}

/// `String(thrown)`, like Node prints an uncaught error's first line.
pub(crate) fn thrown_message(err: JsError, ctx: &mut Context) -> String {
    if let Some(engine) = err.as_engine() {
        return match engine {
            EngineError::RuntimeLimit(RuntimeLimitError::Recursion)
            | EngineError::RuntimeLimit(RuntimeLimitError::StackSize) => {
                "RangeError: Maximum call stack size exceeded".to_string()
            }
            EngineError::RuntimeLimit(other) => format!("RangeError: {other}"),
            other => format!("internal JavaScript engine error: {other}"),
        };
    }
    match err.into_opaque(ctx) {
        Ok(v) => value_message(&v, ctx),
        Err(e) => e.to_string(),
    }
}

pub(crate) fn value_message(v: &JsValue, ctx: &mut Context) -> String {
    match v.as_object() {
        Some(o) if o.is::<ErrorData>() => match v.to_string(ctx) {
            Ok(s) => s.to_std_string_lossy(),
            Err(_) => "Error".to_string(),
        },
        Some(_) => super::inspect::inspect(v, ctx),
        None => match v.as_string() {
            Some(s) => s.to_std_string_lossy(),
            None => super::inspect::inspect(v, ctx),
        },
    }
}
