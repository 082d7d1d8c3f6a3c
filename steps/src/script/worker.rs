//! The worker process: reads one JSON request per line on stdin, runs it in a
//! fresh boa context, and answers on stdout (log lines as they happen, then
//! the result). See `super::protocol`.

use super::protocol::{Failure, Reply, Request};
use super::runtime;
use std::io::{BufRead, Write};
use std::panic::AssertUnwindSafe;
use std::rc::Rc;

/// Native stack of the thread that runs scripts. Calls between JavaScript
/// functions do not use it (boa keeps those frames on its own heap), but
/// native re-entry does (`arr.map(f)` calling `f`, getters, `JSON` of deep
/// data), and boa's recursion limit counts those too, so this bounds them.
pub(crate) const SCRIPT_THREAD_STACK: usize = 256 << 20;

fn send(reply: &Reply) {
    let mut line = serde_json::to_string(reply).unwrap_or_else(|e| {
        serde_json::to_string(&Reply::Err(Failure::Internal {
            message: format!("cannot encode the reply: {e}"),
        }))
        .expect("plain reply")
    });
    line.push('\n');
    let mut out = std::io::stdout().lock();
    if out
        .write_all(line.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        // The host is gone: nothing left to do.
        std::process::exit(0);
    }
}

fn serve() -> i32 {
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return 0,
            Ok(_) => {}
        }
        if line.trim().is_empty() {
            continue;
        }
        let req: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                send(&Reply::Err(Failure::Internal {
                    message: format!("bad request from the host: {e}"),
                }));
                return 2;
            }
        };
        let console: super::js::ConsoleSink =
            Rc::new(|level, msg| send(&Reply::Log { level, msg }));
        let job = runtime::Job {
            code: &req.code,
            context: &req.context,
            globals: &req.globals,
            sandbox: req.sandbox.clone(),
            limits: req.limits,
        };
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| runtime::run(job, console)));
        match outcome {
            Ok(Ok(value)) => send(&Reply::Ok { value }),
            Ok(Err(f)) => send(&Reply::Err(f)),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                // The engine's state may be inconsistent now: answer, then quit
                // (the host retires workers that report an internal failure).
                send(&Reply::Err(Failure::Internal {
                    message: format!("internal JavaScript engine error: {msg}"),
                }));
                return 3;
            }
        }
        boa_engine::gc::force_collect();
    }
}

/// Entry point of a worker process (`<exe> __script-worker`).
pub fn worker_main() -> i32 {
    match std::thread::Builder::new()
        .name("script".into())
        .stack_size(SCRIPT_THREAD_STACK)
        .spawn(serve)
    {
        Ok(h) => h.join().unwrap_or(3),
        Err(e) => {
            eprintln!("script worker: cannot start its thread: {e}");
            4
        }
    }
}
