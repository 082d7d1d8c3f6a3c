//! Steps that compute — rendering a step's inputs, `core.template`,
//! `merge`, scoring evidence, every action that does not wait on something
//! outside (see `Traits::waits`) — run beside the async workers, not on
//! them. On a runtime with several workers (`serve`, `mcp`, `worker`) the
//! work is done with `block_in_place`: the worker's other tasks move to a
//! fresh worker first, so a step that computes for seconds on a large
//! request holds up only its own run. Elsewhere (a one-off `run`, tests on
//! one thread) it runs where it is.

use std::future::Future;
use tokio::runtime::{Handle, RuntimeFlavor};

fn beside_the_workers() -> Option<Handle> {
    Handle::try_current()
        .ok()
        .filter(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Runs `f` beside the async workers.
pub(super) fn compute<R>(f: impl FnOnce() -> R) -> R {
    match beside_the_workers() {
        Some(_) => tokio::task::block_in_place(f),
        None => f(),
    }
}

/// Drives `fut` to its end beside the async workers (its timers and
/// channels still work: this thread polls it).
pub(super) async fn compute_async<F: Future>(fut: F) -> F::Output {
    match beside_the_workers() {
        Some(h) => tokio::task::block_in_place(|| h.block_on(fut)),
        None => fut.await,
    }
}
