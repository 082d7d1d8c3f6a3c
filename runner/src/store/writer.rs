//! The one writer of a store: writes are queued from any thread and
//! committed in order, whatever queued meanwhile in the same transaction, so
//! a busy server pays for one commit per batch, not per event. Each backend
//! (`sqlite/write.rs`, `postgres/write.rs`) says how a batch is committed
//! ([`Commit`]); the queue, the thread, the batching and the answers are
//! here ([`Writes`]), shared by both.

use super::wait::{AnswerIn, Answered, PauseAsked};
use super::{NewRun, StoreError, Write};
use std::collections::HashSet;
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most writes committed in one transaction: a flood of queued writes is
/// committed in pieces, so the WAL's copy (which waits between commits to
/// let the WAL start over) is never held off for long.
pub(super) const MAX_BATCH: usize = 1024;

pub(super) type Reply<T> = tokio::sync::oneshot::Sender<Result<T, StoreError>>;

pub(super) enum Op {
    Create(Box<NewRun>, i64, Reply<()>),
    Write(Box<Write>),
    /// Runs' journals (see [`super::journal`]) to move in, each replacing
    /// what an earlier move of the same run left.
    Absorb(Vec<Vec<Write>>, mpsc::Sender<Result<(), StoreError>>),
    Prune(i64, Reply<usize>),
    /// A change to waits that must see the store as it is (see [`WaitOp`]).
    Wait(Box<WaitOp>, Reply<WaitDone>),
    Flush(Reply<()>),
    /// A flush whose answer is a call, made on the writer's thread.
    Then(AfterCommit),
}

/// A change to waits, decided inside the writer's transaction.
pub(super) enum WaitOp {
    /// An answer, recorded for the owner token (the run's next owner).
    Answer(Box<AnswerIn>, Option<String>),
    /// Waits past their deadline at this time closed, for the owner token.
    Expire(i64, Option<String>),
    /// A waiting run cancelled at this time.
    Cancel(String, i64),
    /// A pause of a queued or running run asked at this time, by someone.
    Pause(String, i64, String),
}

/// Whether a run of `status` (None: no such run) may be asked to pause;
/// `record` records the request when it may.
pub(super) fn pause_asked<E>(
    status: Option<&str>,
    record: impl FnOnce() -> Result<(), E>,
) -> Result<PauseAsked, E> {
    let Some(status) = status else {
        return Ok(PauseAsked::NotFound);
    };
    match super::RunStatus::parse(status) {
        Some(super::RunStatus::Queued | super::RunStatus::Running) => {
            record()?;
            Ok(PauseAsked::Asked)
        }
        Some(other) => Ok(PauseAsked::NotRunning(other)),
        None => Ok(PauseAsked::NotFound),
    }
}

/// What a [`WaitOp`] did.
pub(super) enum WaitDone {
    Answered(Answered),
    Expired(Vec<String>),
    Cancelled(bool),
    Paused(PauseAsked),
}

impl WaitDone {
    /// Whether runs went back to the queue (a shared store tells its workers).
    pub(super) fn requeued(&self) -> bool {
        match self {
            WaitDone::Answered(a) => matches!(a, Answered::Resumes { .. }),
            WaitDone::Expired(runs) => !runs.is_empty(),
            WaitDone::Cancelled(_) | WaitDone::Paused(_) => false,
        }
    }
}

/// What to call once everything queued before it is committed, with the
/// outcome (see [`super::RunStore::after_commit`]). Called exactly once: a
/// call dropped unmade (the store stopped first) is made with
/// [`StoreError::Closed`].
pub struct AfterCommit(Option<Call>);

type Call = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

impl AfterCommit {
    pub fn new(f: impl FnOnce(Result<(), StoreError>) + Send + 'static) -> AfterCommit {
        AfterCommit(Some(Box::new(f)))
    }

    /// Makes the call. A panic inside it is contained: the writer's
    /// thread goes on.
    pub fn call(mut self, outcome: Result<(), StoreError>) {
        if let Some(f) = self.0.take() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(outcome)));
        }
    }
}

impl Drop for AfterCommit {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                f(Err(StoreError::Closed))
            }));
        }
    }
}

/// A store's writer: the queue every write of the store goes through, and
/// the thread that commits it with the store's backend.
pub(super) struct Writes {
    queue: Arc<Queue>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

type Answer<T> = tokio::sync::oneshot::Receiver<Result<T, StoreError>>;

impl Writes {
    /// Starts the writer thread committing with `backend`.
    pub(super) fn start(backend: impl Commit + Send + 'static) -> std::io::Result<Writes> {
        let queue = Arc::new(Queue::new());
        let rx = queue.clone();
        let thread = std::thread::Builder::new()
            .name("marktoflow-store".into())
            .spawn(move || writer_loop(backend, rx))?;
        Ok(Writes {
            queue,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a new run, taken at `at`; `hurry`: somebody waits for its
    /// commit now (else it may share the commit of the run's next writes).
    pub(super) fn create(&self, run: NewRun, at: i64, hurry: bool) -> Answer<()> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.queue.push(Op::Create(Box::new(run), at, reply), hurry);
        rx
    }

    /// Queues a write nobody waits for (see [`Writes::flush`]).
    pub(super) fn write(&self, w: Write) {
        self.queue.send(Op::Write(Box::new(w)));
    }

    /// Answers once everything queued before is committed.
    pub(super) fn flush(&self) -> Answer<()> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.queue.send(Op::Flush(reply));
        rx
    }

    /// [`Writes::flush`] whose answer is a call (see [`AfterCommit`]).
    pub(super) fn then(&self, then: AfterCommit) {
        self.queue.send(Op::Then(then));
    }

    /// Deletes the finished runs that ended before `cutoff`, waiting for
    /// the commit; returns how many.
    pub(super) fn prune(&self, cutoff: i64) -> Result<usize, StoreError> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.queue.send(Op::Prune(cutoff, reply));
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// Makes a change to waits, waiting for its commit.
    pub(super) fn wait(&self, op: WaitOp) -> Result<WaitDone, StoreError> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.queue.send(Op::Wait(Box::new(op), reply));
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// Moves runs' journals in, waiting for the commit.
    pub(super) fn absorb(&self, journals: Vec<Vec<Write>>) -> Result<(), StoreError> {
        let (reply, answer) = mpsc::channel();
        self.queue.send(Op::Absorb(journals, reply));
        answer.recv().map_err(|_| StoreError::Closed)?
    }

    /// Commits what is queued and stops the thread (a write queued later
    /// is dropped, its answer saying the store stopped). Called by a drop
    /// made on the writer's own thread (by a call after a commit), it only
    /// closes the queue: the thread ends by itself once the queue is empty.
    pub(super) fn stop(&self) {
        self.queue.close();
        let Ok(mut slot) = self.thread.lock() else {
            return;
        };
        if let Some(h) = slot.take() {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Writes {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What one queued write came to inside its transaction.
pub(super) enum Done {
    Unit(Result<(), StoreError>),
    Count(Result<usize, StoreError>),
    Wait(Result<WaitDone, StoreError>),
}

/// How a backend commits a batch: one [`Done`] per op in order, and the
/// error that rolled the whole transaction back, if any.
pub(super) trait Commit {
    fn commit(&mut self, batch: &[Op]) -> (Vec<Done>, Option<StoreError>);

    /// How long a write nobody waits for (a run's steps and checkpoints)
    /// may stay queued before it is committed, when no write somebody waits
    /// for comes to take it along.
    fn gather(&self) -> Duration;

    /// Called once the queue is closed and everything in it committed.
    fn close(&mut self) {}
}

/// Whether someone waits for `op`'s commit. A run's writes, its end
/// included, are waited for through a flush queued after them.
fn hurried(op: &Op) -> bool {
    !matches!(op, Op::Write(_))
}

/// The writes waiting for the writer. Unlike a channel, a write nobody
/// waits for does not wake a writer that has something to wait for
/// already: a run's start, steps and checkpoints ride along with the next
/// commit somebody waits for (its flush, another run's), so a busy server
/// wakes the writer and commits about once per answered request or less,
/// not once per write. Nothing waits longer than [`Commit::gather`].
pub(super) struct Queue {
    state: Mutex<Queued>,
    wake: Condvar,
}

#[derive(Default)]
struct Queued {
    ops: Vec<Op>,
    /// Somebody waits for one of `ops`.
    hurried: bool,
    /// When the oldest of `ops` was queued.
    since: Option<Instant>,
    closed: bool,
    writer: Writer,
}

/// What the writer is doing, so a push wakes it only when needed.
#[derive(Default, PartialEq)]
enum Writer {
    #[default]
    Busy,
    /// Nothing queued: any write wakes it.
    Idle,
    /// Writes queued that nobody waits for: it wakes when they are due, or
    /// for one somebody waits for.
    Lingering,
}

impl Queue {
    pub(super) fn new() -> Queue {
        Queue {
            state: Mutex::default(),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queued> {
        // Nothing panics while holding it; a poisoned queue is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `op`, committed soon when `hurry` (somebody waits for it),
    /// else within the backend's gather time. A closed queue drops it (its
    /// reply, if any, then reads as the store having stopped).
    pub(super) fn push(&self, op: Op, hurry: bool) {
        let mut q = self.lock();
        if q.closed {
            return;
        }
        q.ops.push(op);
        q.hurried |= hurry;
        if q.since.is_none() {
            q.since = Some(Instant::now());
        }
        let wake = match q.writer {
            Writer::Busy => false,
            Writer::Idle => true,
            Writer::Lingering => hurry,
        };
        drop(q);
        if wake {
            self.wake.notify_one();
        }
    }

    /// [`Queue::push`], hurried when somebody waits for `op` by its kind.
    pub(super) fn send(&self, op: Op) {
        let hurry = hurried(&op);
        self.push(op, hurry);
    }

    /// No more writes: the writer commits what is queued and stops.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// The writer's next batch: at once when somebody waits for a queued
    /// write, else when the oldest has waited `gather`; None once closed
    /// and empty.
    fn next_batch(&self, gather: Duration) -> Option<Vec<Op>> {
        let mut q = self.lock();
        loop {
            let due = q.hurried || q.closed || q.since.is_some_and(|t| t.elapsed() >= gather);
            if due && !q.ops.is_empty() {
                let batch = if q.ops.len() <= MAX_BATCH {
                    std::mem::take(&mut q.ops)
                } else {
                    q.ops.drain(..MAX_BATCH).collect()
                };
                // What is left (past MAX_BATCH) goes next, at once.
                q.hurried = !q.ops.is_empty();
                q.since = (!q.ops.is_empty()).then(Instant::now);
                q.writer = Writer::Busy;
                return Some(batch);
            }
            if q.closed {
                return None;
            }
            q = match q.since {
                Some(t) => {
                    q.writer = Writer::Lingering;
                    let left = gather.saturating_sub(t.elapsed());
                    self.wake
                        .wait_timeout(q, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => {
                    q.writer = Writer::Idle;
                    self.wake.wait(q).unwrap_or_else(PoisonError::into_inner)
                }
            };
            q.writer = Writer::Busy;
        }
    }
}

/// The writer thread's loop: until the queue is closed and empty, commits
/// what is queued and answers each op. An error of a write nobody waits for
/// is reported at the next flush.
fn writer_loop(mut backend: impl Commit, queue: Arc<Queue>) {
    let mut deferred: Option<StoreError> = None;
    let gather = backend.gather();
    while let Some(batch) = queue.next_batch(gather) {
        let (done, commit_err) = backend.commit(&batch);
        // Lost writes nobody waits for are told at the next flush; ops
        // that wait hear of it themselves (a refused run does not make the
        // next run's end look unrecorded).
        if let Some(e) = &commit_err {
            if batch.iter().any(|op| matches!(op, Op::Write(_))) {
                deferred.get_or_insert_with(|| e.clone());
            }
        }
        let mut done = done.into_iter();
        for op in batch {
            let d = done.next();
            match op {
                Op::Create(_, _, reply) => {
                    let _ = reply.send(unit(d, &commit_err));
                }
                Op::Absorb(_, reply) => {
                    let _ = reply.send(unit(d, &commit_err));
                }
                Op::Prune(_, reply) => {
                    let r = match (d, &commit_err) {
                        (_, Some(e)) => Err(e.clone()),
                        (Some(Done::Count(r)), None) => r,
                        _ => Ok(0),
                    };
                    let _ = reply.send(r);
                }
                Op::Wait(_, reply) => {
                    let r = match (d, &commit_err) {
                        (_, Some(e)) => Err(e.clone()),
                        (Some(Done::Wait(r)), None) => r,
                        _ => Err(StoreError::Db("the wait change was not made".into())),
                    };
                    let _ = reply.send(r);
                }
                Op::Write(_) => {
                    if let Some(Done::Unit(Err(e))) = d {
                        deferred.get_or_insert(e);
                    }
                }
                Op::Flush(reply) => {
                    let _ = reply.send(flushed(&mut deferred, &commit_err));
                }
                Op::Then(then) => then.call(flushed(&mut deferred, &commit_err)),
            }
        }
    }
    backend.close();
}

/// A flush's answer: the first error since the last flush, if any.
fn flushed(
    deferred: &mut Option<StoreError>,
    commit_err: &Option<StoreError>,
) -> Result<(), StoreError> {
    match (deferred.take(), commit_err) {
        (Some(e), _) => Err(e),
        (None, Some(e)) => Err(e.clone()),
        (None, None) => Ok(()),
    }
}

/// The answer to an op that waits for its own outcome: the commit's error
/// when the transaction failed, else the op's own (typed, as the backend
/// gave it).
fn unit(d: Option<Done>, commit_err: &Option<StoreError>) -> Result<(), StoreError> {
    match (d, commit_err) {
        (_, Some(e)) => Err(e.clone()),
        (Some(Done::Unit(r)), None) => r,
        _ => Ok(()),
    }
}

/// The checkpoint after the last step of a run whose end is in the same
/// batch: no backend needs to write it (a finished run is never resumed,
/// and `retry --from` starts before a step).
pub(super) fn needless(w: &Write, ending: &HashSet<&str>) -> bool {
    matches!(w, Write::Checkpoint { run_id, last: true, .. } if ending.contains(run_id.as_str()))
}

/// What pruning runs that ended before `cutoff` deletes, as SQL statements
/// both backends run in order in one transaction, each with its one
/// parameter `$1` (a named parameter in SQLite, bound by position as in
/// PostgreSQL). The last one deletes the runs: its count is the answer.
/// Idempotency keys go when their retention is over, whatever `cutoff`.
pub(super) fn pruning(cutoff: i64) -> [(&'static str, i64); 7] {
    let keys = super::now_ms().saturating_sub(super::IDEMPOTENCY_RETENTION.as_millis() as i64);
    [
        ("DELETE FROM steps WHERE run_id IN (SELECT id FROM runs WHERE status IN ('completed', 'failed', 'cancelled', 'rejected') AND finished_at < $1)", cutoff),
        ("DELETE FROM checkpoints WHERE run_id IN (SELECT id FROM runs WHERE status IN ('completed', 'failed', 'cancelled', 'rejected') AND finished_at < $1)", cutoff),
        ("DELETE FROM waits WHERE run_id IN (SELECT id FROM runs WHERE status IN ('completed', 'failed', 'cancelled', 'rejected') AND finished_at < $1)", cutoff),
        ("DELETE FROM replies WHERE run_id IN (SELECT id FROM runs WHERE status IN ('completed', 'failed', 'cancelled', 'rejected') AND finished_at < $1)", cutoff),
        ("DELETE FROM idempotency WHERE created_at < $1", keys),
        // Asked of a run that ended before it could pause.
        ("DELETE FROM pauses WHERE asked_at < $1", cutoff),
        ("DELETE FROM runs WHERE status IN ('completed', 'failed', 'cancelled', 'rejected') AND finished_at < $1", cutoff),
    ]
}

/// The writes among `batch`, in order.
pub(super) fn writes_of(batch: &[Op]) -> impl Iterator<Item = &Write> {
    batch.iter().filter_map(|op| match op {
        Op::Write(w) => Some(&**w),
        _ => None,
    })
}

/// The runs whose end is in `batch`: their checkpoint after the last step
/// is never needed once the end is committed with it.
pub(super) fn ending(batch: &[Op]) -> HashSet<&str> {
    writes_of(batch)
        .filter_map(|w| match w {
            Write::Finish { run_id, .. } => Some(run_id.as_str()),
            _ => None,
        })
        .collect()
}
