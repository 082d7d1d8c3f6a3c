//! `marktoflow serve`: webhook triggers over HTTP, a thin layer over the engine.
//!
//! Routes come from each workflow's `webhook` triggers. A request's JSON body
//! (and query string) supply inputs by name, converted and checked exactly as
//! on the command line. Runs are synchronous by default; `Prefer:
//! respond-async`, `?async=true` or `response: async` on the trigger answer
//! 202 at once. Request data never widens the sandbox: its roots are fixed
//! when the server starts.
//!
//! Here: the server's state and admission (slots, queue, idempotency,
//! resuming stored runs). Beside it: `http` (the routes' handlers),
//! `routes` (webhook triggers compiled, auth failing closed), `schedule`
//! and [`cron`], [`file_watch`].

mod answers;
mod api;
mod console;
pub mod cron;
pub mod file_watch;
mod http;
pub mod links;
pub mod listen;
pub mod metrics;
pub mod pauses;
pub mod replay;
mod request;
mod routes;
mod runs;
pub mod schedule;
mod state;
pub mod tenants;
pub mod triggers;
mod webhook;
pub mod worker;

pub use answers::{answer_from, expire_waits, NotTaken, OutsideAnswer};
pub use api::ApiAccess;
pub use file_watch::run_file_watches;
pub use http::{router, worker_router};
pub use links::Links;
pub use request::bearer_matches;
pub use routes::{
    event_of, event_wanted, input_mapping, request_context, request_inputs, routes_of, Route,
};
use runs::{reserve, start_reserved, start_run};
pub use runs::{resume_stored_runs, start_new, Job, Started};
pub use schedule::{run_schedules, schedules_of, Schedule};
pub use state::{Refused, ServeConfig, Served, ServerState};
use state::{RunEntry, MAX_RUNS_KEPT};

use std::path::PathBuf;

/// Every `.md` file under the given files and folders, as the one walker
/// lists them (ignore files honoured, hidden entries and `.marktoflow/`
/// skipped); callers skip files without a workflow's frontmatter.
pub fn workflow_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_file() {
            out.push(p.clone());
            continue;
        }
        let opts = marktoflow_steps::core::walk::WalkOptions {
            extensions: vec!["md".into()],
            ..Default::default()
        };
        // An unreadable folder yields nothing here; loading reports it.
        for e in marktoflow_steps::core::walk::walk(p, &opts).unwrap_or_default() {
            out.push(e.abs_path);
        }
    }
    out
}
