//! Runs one script in a fresh boa `Context` (inside a worker process).
//!
//! The code becomes the body of an async function, so `return` and `await`
//! work at top level: `(async function(){\n<code>\n})()`. Promise jobs run
//! until that promise settles; `setTimeout` & co. are served by a small event
//! loop that sleeps until the next timer is due.

use super::inspect;
use super::js::{
    error_with, fn_obj, jstr, state, thrown_message, value_message, ConsoleSink, JobState,
};
use super::protocol::{EngineLimits, Failure};
use crate::core::sandbox::Sandbox;
use crate::core::signals::LogLevel;
use boa_engine::builtins::promise::PromiseState;
use boa_engine::job::{GenericJob, Job as EngineJob, JobExecutor, PromiseJob};
use boa_engine::object::builtins::JsPromise;
use boa_engine::object::ObjectInitializer;
use boa_engine::property::Attribute;
use boa_engine::{
    js_string, Context, JsArgs, JsNativeError, JsObject, JsResult, JsString, JsValue,
    NativeFunction, Script, Source,
};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Line added before the code by the async-function wrapper.
const PREFIX: &str = "(async function(){\n";
const SUFFIX: &str = "\n})()";

// ---- event loop ----

struct Timer {
    id: u64,
    callback: JsValue,
    args: Vec<JsValue>,
    repeat: Option<Duration>,
}

/// Job executor: FIFO promise jobs plus timers ordered by due time.
#[derive(Default)]
struct EventLoop {
    promise_jobs: RefCell<VecDeque<PromiseJob>>,
    generic_jobs: RefCell<VecDeque<GenericJob>>,
    timers: RefCell<BTreeMap<(Instant, u64), Timer>>,
    next_id: Cell<u64>,
}

impl JobExecutor for EventLoop {
    fn enqueue_job(self: Rc<Self>, job: EngineJob, _ctx: &mut Context) {
        match job {
            EngineJob::PromiseJob(p) => self.promise_jobs.borrow_mut().push_back(p),
            EngineJob::GenericJob(g) => self.generic_jobs.borrow_mut().push_back(g),
            // Nothing this runtime exposes creates the other kinds.
            _ => {}
        }
    }

    /// Runs microtasks until none are left (timers are driven by [`run`]).
    fn run_jobs(self: Rc<Self>, ctx: &mut Context) -> JsResult<()> {
        loop {
            let job = self.promise_jobs.borrow_mut().pop_front();
            if let Some(job) = job {
                job.call(ctx)?;
                continue;
            }
            let job = self.generic_jobs.borrow_mut().pop_front();
            match job {
                Some(job) => {
                    job.call(ctx)?;
                }
                None => break,
            }
        }
        ctx.clear_kept_objects();
        Ok(())
    }
}

impl EventLoop {
    fn add_timer(&self, delay: Duration, timer_args: (JsValue, Vec<JsValue>, bool)) -> u64 {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        let (callback, args, repeat) = timer_args;
        let t = Timer {
            id,
            callback,
            args,
            repeat: repeat.then_some(delay.max(Duration::from_millis(1))),
        };
        self.timers
            .borrow_mut()
            .insert((Instant::now() + delay, id), t);
        id
    }

    fn clear_timer(&self, id: u64) {
        self.timers.borrow_mut().retain(|_, t| t.id != id);
    }

    fn pop_timer(&self) -> Option<(Instant, Timer)> {
        let mut timers = self.timers.borrow_mut();
        let key = *timers.keys().next()?;
        timers.remove(&key).map(|t| (key.0, t))
    }
}

fn event_loop(ctx: &Context) -> Rc<EventLoop> {
    ctx.downcast_job_executor::<EventLoop>()
        .expect("the script context uses EventLoop")
}

fn timer_fn(repeat: bool) -> NativeFunction {
    NativeFunction::from_copy_closure(move |_, args, ctx| {
        let cb = args.get_or_undefined(0).clone();
        if !cb.as_object().is_some_and(|o| o.is_callable()) {
            return Err(JsNativeError::typ()
                .with_message("The \"callback\" argument must be of type function")
                .into());
        }
        let ms = args.get_or_undefined(1).to_number(ctx)?;
        let ms = if ms.is_finite() && ms > 0.0 { ms } else { 0.0 };
        let rest = args.get(2..).unwrap_or(&[]).to_vec();
        let id = event_loop(ctx).add_timer(
            crate::core::time::from_secs(ms / 1000.0).unwrap_or(crate::core::time::MAX),
            (cb, rest, repeat),
        );
        Ok(JsValue::from(id as f64))
    })
}

fn set_immediate(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let cb = args.get_or_undefined(0).clone();
    let rest = args.get(1..).unwrap_or(&[]).to_vec();
    let id = event_loop(ctx).add_timer(Duration::ZERO, (cb, rest, false));
    Ok(JsValue::from(id as f64))
}

fn clear_timer(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    if let Some(n) = args.get_or_undefined(0).as_number() {
        event_loop(ctx).clear_timer(n as u64);
    }
    Ok(JsValue::undefined())
}

fn queue_microtask(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let Some(f) = args
        .get_or_undefined(0)
        .as_object()
        .and_then(|o| boa_engine::object::builtins::JsFunction::from_object(o.clone()))
    else {
        return Err(JsNativeError::typ()
            .with_message("The \"callback\" argument must be of type function")
            .into());
    };
    JsPromise::resolve(JsValue::undefined(), ctx)?.then(Some(f), None, ctx)?;
    Ok(JsValue::undefined())
}

// ---- globals ----

fn console_fn(level: LogLevel) -> NativeFunction {
    NativeFunction::from_copy_closure(move |_, args, ctx| {
        let line = inspect::format_args(args, ctx);
        let sink = state(ctx).console.clone();
        sink(level, line);
        Ok(JsValue::undefined())
    })
}

fn console_object(ctx: &mut Context) -> JsObject {
    let entries = [
        ("log", LogLevel::Info),
        ("info", LogLevel::Info),
        ("warn", LogLevel::Warn),
        ("error", LogLevel::Error),
        ("debug", LogLevel::Debug),
        ("trace", LogLevel::Debug),
        ("dir", LogLevel::Info),
    ];
    let mut init = ObjectInitializer::new(ctx);
    for (name, level) in entries {
        init.function(console_fn(level), JsString::from(name), 0);
    }
    init.build()
}

fn require(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let name = args.get_or_undefined(0);
    let Some(name) = name.as_string() else {
        return Err(super::js::arg_error("id", "string", name));
    };
    let name = name.to_std_string_lossy();
    let key: &'static str = match name.strip_prefix("node:").unwrap_or(&name) {
        "fs" => "fs",
        "path" | "path/posix" => "path",
        "fs/promises" => "fs/promises",
        _ => {
            return Err(error_with(
                ctx,
                format!("Cannot find module '{name}'"),
                &[("code", jstr("MODULE_NOT_FOUND"))],
            ))
        }
    };
    if let Some(m) = state(ctx).modules.borrow().get(key) {
        return Ok(m.clone().into());
    }
    let m = match key {
        "fs" => super::fs::module(ctx),
        "fs/promises" => super::fs::promises_module(ctx),
        _ => super::path::module(ctx),
    };
    state(ctx).modules.borrow_mut().insert(key, m.clone());
    Ok(m.into())
}

/// Freezes an object and everything inside it.
const DEEP_FREEZE: &str = "(function freeze(o) { if (o !== null && typeof o === 'object') { Object.freeze(o); for (const k of Object.keys(o)) freeze(o[k]); } return o; })";

fn install_globals(
    ctx: &mut Context,
    context_value: &Value,
    frozen: &serde_json::Map<String, Value>,
) -> JsResult<()> {
    let value = JsValue::from_json(context_value, ctx)?;
    ctx.register_global_property(js_string!("context"), value, Attribute::all())?;
    if !frozen.is_empty() {
        let freeze = ctx.eval(Source::from_bytes(DEEP_FREEZE))?;
        let freeze = freeze
            .as_callable()
            .ok_or_else(|| JsNativeError::typ().with_message("deep freeze is not callable"))?
            .clone();
        for (name, v) in frozen {
            let v = JsValue::from_json(v, ctx)?;
            let v = freeze.call(&JsValue::undefined(), &[v], ctx)?;
            // Read-only and not configurable: a script cannot swap them either.
            ctx.register_global_property(JsString::from(name.as_str()), v, Attribute::ENUMERABLE)?;
        }
    }
    let console = console_object(ctx);
    ctx.register_global_property(js_string!("console"), console, Attribute::all())?;
    let natives: [(&str, NativeFunction, usize); 8] = [
        ("require", NativeFunction::from_fn_ptr(require), 1),
        ("setTimeout", timer_fn(false), 2),
        ("setInterval", timer_fn(true), 2),
        (
            "setImmediate",
            NativeFunction::from_fn_ptr(set_immediate),
            1,
        ),
        ("clearTimeout", NativeFunction::from_fn_ptr(clear_timer), 1),
        ("clearInterval", NativeFunction::from_fn_ptr(clear_timer), 1),
        (
            "clearImmediate",
            NativeFunction::from_fn_ptr(clear_timer),
            1,
        ),
        (
            "queueMicrotask",
            NativeFunction::from_fn_ptr(queue_microtask),
            1,
        ),
    ];
    for (name, f, len) in natives {
        let func = fn_obj(ctx, name, f, len);
        ctx.register_global_property(
            JsString::from(name),
            func,
            Attribute::WRITABLE | Attribute::CONFIGURABLE,
        )?;
    }
    Ok(())
}

// ---- errors and results ----

/// The promise's value as JSON, with `JSON.stringify` semantics (functions and
/// `undefined` members dropped, `toJSON` honoured, so a Date becomes its ISO
/// string); `undefined` itself becomes `null`.
fn to_json(v: &JsValue, ctx: &mut Context) -> Result<Value, String> {
    if v.is_undefined() {
        return Ok(Value::Null);
    }
    let stringify = ctx
        .intrinsics()
        .objects()
        .json()
        .get(js_string!("stringify"), ctx)
        .map_err(|e| thrown_message(e, ctx))?;
    let stringify = stringify
        .as_callable()
        .ok_or("JSON.stringify is not callable")?;
    let text = stringify
        .call(&JsValue::undefined(), std::slice::from_ref(v), ctx)
        .map_err(|e| {
            format!(
                "the script's result cannot be converted to JSON: {}",
                thrown_message(e, ctx)
            )
        })?;
    let Some(text) = text.as_string() else {
        return Ok(Value::Null);
    };
    match serde_json::from_str(&text.to_std_string_lossy()) {
        Ok(v) => Ok(v),
        // Lone surrogates: serde refuses their escapes; take boa's own conversion.
        Err(_) => v
            .to_json(ctx)
            .map(|j| j.unwrap_or(Value::Null))
            .map_err(|e| thrown_message(e, ctx)),
    }
}

/// Splits boa's "… at line L, col C" into the message and a position within
/// the user's code (the wrapper adds one line before it).
fn compile_failure(message: &str, code: &str) -> Failure {
    let code_lines = code.split('\n').count() as u32;
    let (msg, pos) = match message.rfind(" at line ") {
        Some(i) => {
            let tail = &message[i + " at line ".len()..];
            let mut it = tail.splitn(2, ", col ");
            let line = it.next().and_then(|l| l.trim().parse::<u32>().ok());
            let col = it.next().and_then(|c| c.trim().parse::<u32>().ok());
            match (line, col) {
                (Some(l), Some(c)) => (message[..i].to_string(), Some((l, c))),
                _ => (message.to_string(), None),
            }
        }
        None => (message.to_string(), None),
    };
    let (line, column) = match pos {
        Some((l, c)) => {
            let l = l.saturating_sub(1);
            if l == 0 {
                (1, 1)
            } else if l > code_lines {
                // Reported on the wrapper's closing line: the code ended early.
                let last = code.split('\n').next_back().unwrap_or("");
                (code_lines, last.chars().count() as u32 + 1)
            } else {
                (l, c)
            }
        }
        None => {
            let last = code.split('\n').next_back().unwrap_or("");
            (code_lines, last.chars().count() as u32 + 1)
        }
    };
    Failure::Compile {
        message: msg,
        line: Some(line),
        column: Some(column),
    }
}

/// Where a script's code fails to parse, as running it would say: the
/// message, and the line and column within the code. None when it parses,
/// and also when it nests too deeply to be parsed safely in this process
/// (the worker that runs it is where such code fails, apart).
pub fn syntax_error(code: &str) -> Option<(String, u32, u32)> {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for b in code.bytes() {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > 256 || code.len() > 1 << 20 {
        return None;
    }
    let mut ctx = Context::default();
    let wrapped = format!("{PREFIX}{code}{SUFFIX}");
    let err = match Script::parse(Source::from_bytes(wrapped.as_bytes()), None, &mut ctx) {
        Ok(script) => script.codeblock(&mut ctx).err()?,
        Err(e) => e,
    };
    let message = match err.as_native() {
        Some(n) => n.message().to_string(),
        None => err.to_string(),
    };
    match compile_failure(&message, code) {
        Failure::Compile {
            message,
            line,
            column,
        } => Some((message, line.unwrap_or(1), column.unwrap_or(1))),
        _ => None,
    }
}

/// Everything one job needs.
pub(crate) struct Job<'a> {
    pub code: &'a str,
    pub context: &'a Value,
    pub globals: &'a serde_json::Map<String, Value>,
    pub sandbox: Sandbox,
    pub limits: EngineLimits,
}

/// Runs a script to completion in a fresh context.
pub(crate) fn run(job: Job<'_>, console: ConsoleSink) -> Result<Value, Failure> {
    let thrown = |message: String| Failure::Thrown { message };
    let mut ctx = Context::builder()
        .job_executor(Rc::new(EventLoop::default()))
        .build()
        .map_err(|e| thrown(format!("cannot start the JavaScript engine: {e}")))?;
    ctx.runtime_limits_mut()
        .set_recursion_limit(job.limits.recursion);
    ctx.runtime_limits_mut()
        .set_stack_size_limit(job.limits.stack_size);
    ctx.insert_data(JobState {
        sandbox: job.sandbox,
        console,
        modules: RefCell::new(HashMap::new()),
        protos: RefCell::new(HashMap::new()),
    });
    let ctx = &mut ctx;
    if let Err(e) = super::fast::install(ctx)
        .and_then(|()| super::legacy_date::install(ctx))
        .and_then(|()| super::intl::install(ctx))
        .and_then(|()| install_globals(ctx, job.context, job.globals))
    {
        return Err(thrown(format!(
            "cannot set up the script's globals: {}",
            thrown_message(e, ctx)
        )));
    }

    let wrapped = format!("{PREFIX}{}{SUFFIX}", job.code);
    let script = match Script::parse(Source::from_bytes(wrapped.as_bytes()), None, ctx) {
        Ok(s) => s,
        Err(e) => {
            let msg = match e.as_native() {
                Some(n) => n.message().to_string(),
                None => e.to_string(),
            };
            return Err(compile_failure(&msg, job.code));
        }
    };
    if let Err(e) = script.codeblock(ctx) {
        let msg = match e.as_native() {
            Some(n) => n.message().to_string(),
            None => e.to_string(),
        };
        return Err(compile_failure(&msg, job.code));
    }
    let value = script
        .evaluate(ctx)
        .map_err(|e| thrown(thrown_message(e, ctx)))?;
    let promise = value
        .as_object()
        .and_then(|o| JsPromise::from_object(o.clone()).ok())
        .ok_or_else(|| {
            thrown("internal error: the script wrapper did not return a promise".into())
        })?;

    let lp = event_loop(ctx);
    loop {
        ctx.run_jobs().map_err(|e| thrown(thrown_message(e, ctx)))?;
        if !matches!(promise.state(), PromiseState::Pending) {
            break;
        }
        let Some((due, timer)) = lp.pop_timer() else {
            break;
        };
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if let Some(every) = timer.repeat {
            // Re-arm under the same id (before the call, so that the callback
            // can clearInterval it).
            lp.timers.borrow_mut().insert(
                (Instant::now() + every, timer.id),
                Timer {
                    id: timer.id,
                    callback: timer.callback.clone(),
                    args: timer.args.clone(),
                    repeat: Some(every),
                },
            );
        }
        if let Some(f) = timer.callback.as_callable() {
            f.call(&JsValue::undefined(), &timer.args, ctx)
                .map_err(|e| thrown(thrown_message(e, ctx)))?;
        }
    }
    match promise.state() {
        PromiseState::Fulfilled(v) => to_json(&v, ctx).map_err(thrown),
        PromiseState::Rejected(v) => Err(thrown(value_message(&v, ctx))),
        PromiseState::Pending => Err(thrown(
            "the script never finished: it awaits a promise that is never settled".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_positions_are_relative_to_the_code() {
        let f = compile_failure("expected token ';', got 'x' at line 3, col 7", "a\nb\nc");
        assert_eq!(
            f,
            Failure::Compile {
                message: "expected token ';', got 'x'".into(),
                line: Some(2),
                column: Some(7)
            }
        );
        let f = compile_failure("abrupt end", "let a = {\n  b: 1");
        assert_eq!(
            f,
            Failure::Compile {
                message: "abrupt end".into(),
                line: Some(2),
                column: Some(7)
            }
        );
    }

    #[test]
    fn syntax_errors_are_found_without_running() {
        assert_eq!(syntax_error("const x = 1;\nreturn x;"), None);
        let (message, line, column) = syntax_error("const a = 1;\nconst x = ;\nreturn x;").unwrap();
        assert_eq!((line, column), (2, 11), "{message}");
        assert_eq!(syntax_error(&"(".repeat(100_000)), None);
    }
}
