//! Which run the current thread is working for, so that a process that
//! aborts (a failed allocation, a stack overflow) can say which run it died
//! in, and a restarted server blames that run alone (see the runner's
//! `store::death`).
//!
//! The mark is a fixed-size thread-local with a constant initialiser and no
//! destructor: a signal handler may read it.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The longest run id a mark holds; a longer one marks nothing.
pub const MAX_ID: usize = 63;

/// A run's id, as a thread carries it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RunMark {
    len: u8,
    id: [u8; MAX_ID],
}

impl RunMark {
    /// No run: work of the process itself.
    pub const NONE: RunMark = RunMark {
        len: 0,
        id: [0; MAX_ID],
    };

    pub fn new(run_id: &str) -> RunMark {
        let b = run_id.as_bytes();
        if b.is_empty() || b.len() > MAX_ID {
            return RunMark::NONE;
        }
        let mut id = [0; MAX_ID];
        id[..b.len()].copy_from_slice(b);
        RunMark {
            len: b.len() as u8,
            id,
        }
    }

    /// The run id's bytes (empty for [`RunMark::NONE`]).
    pub fn as_bytes(&self) -> &[u8] {
        &self.id[..self.len as usize]
    }
}

impl std::fmt::Debug for RunMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RunMark({})", String::from_utf8_lossy(self.as_bytes()))
    }
}

thread_local! {
    static CURRENT: Cell<RunMark> = const { Cell::new(RunMark::NONE) };
}

/// The run this thread is working for now.
pub fn current() -> RunMark {
    CURRENT.with(Cell::get)
}

/// Runs `f` with this thread marked as working for `mark`.
pub fn with_mark<R>(mark: RunMark, f: impl FnOnce() -> R) -> R {
    struct Restore(RunMark);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(mark)));
    f()
}

/// A future whose every poll marks its thread as working for one run.
pub struct InRun<F> {
    mark: RunMark,
    inner: Pin<Box<F>>,
}

impl<F: Future> InRun<F> {
    pub fn new(run_id: &str, inner: F) -> Self {
        InRun {
            mark: RunMark::new(run_id),
            inner: Box::pin(inner),
        }
    }
}

impl<F: Future> Future for InRun<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let inner = this.inner.as_mut();
        with_mark(this.mark, || inner.poll(cx))
    }
}

/// [`tokio::task::spawn_blocking`], with the blocking thread marked for the
/// run the caller works for: heavy work a step hands off is still its run's.
pub fn spawn_blocking<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let mark = current();
    tokio::task::spawn_blocking(move || with_mark(mark, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_holds_while_its_run_is_polled_and_follows_blocking_work() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(current(), RunMark::NONE);
        let (inside, handed_off) = rt.block_on(InRun::new("run-1", async {
            let inside = current();
            let handed_off = spawn_blocking(current).await.unwrap();
            (inside, handed_off)
        }));
        assert_eq!(inside.as_bytes(), b"run-1");
        assert_eq!(handed_off.as_bytes(), b"run-1");
        // Outside the run's polls the thread is nobody's again.
        assert_eq!(current(), RunMark::NONE);
        assert_eq!(RunMark::new(&"x".repeat(MAX_ID + 1)), RunMark::NONE);
    }
}
