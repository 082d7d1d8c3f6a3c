//! The write side of the SQLite store: batches of writes committed in one
//! transaction by the writer thread (retried while the file is busy), the
//! WAL checkpointed as it grows, journals absorbed, old runs pruned.

use super::super::wait::{decided, expired_text, Answered, Decision};
use super::super::writer::{
    ending, needless, pause_asked, pruning, writes_of, Commit, Done, Op, WaitDone, WaitOp,
};
use super::super::{json_text, NewRun, RunStatus, StoreError, Write};
use super::db_err;
use marktoflow_steps::core::sqlite::{self};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Another process holds the write lock past the busy timeout.
pub(super) fn busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// How often a batch is tried again while the database is locked (each try
/// already waits up to the busy timeout): a write is never dropped for a
/// lock another process holds a while.
pub(super) const LOCKED_RETRIES: u32 = 12;

/// Applies `batch` in one transaction; a lock held by another process
/// rolls it back and it is tried again, whole.
pub(super) fn commit_batch(
    conn: &mut Connection,
    batch: &[Op],
) -> (Vec<Applied>, Option<rusqlite::Error>) {
    let ending = ending(batch);
    let starts = starts(writes_of(batch), &ending);
    let mut tries = 0;
    loop {
        let mut done = Vec::with_capacity(batch.len());
        let outcome = (|| -> Result<(), rusqlite::Error> {
            let tx = conn.transaction()?;
            for op in batch {
                let d = match op {
                    Op::Create(run, at, _) => match insert_run(&tx, run, *at) {
                        Ok(Some(holder)) => Applied::Duplicate(holder),
                        other => Applied::Unit(other.map(|_| ())),
                    },
                    Op::Prune(cutoff, _) => Applied::Count(prune(&tx, *cutoff)),
                    Op::Wait(op, _) => Applied::Wait(wait_op(&tx, op)),
                    Op::Absorb(journals, _) => Applied::Unit(absorb(&tx, journals)),
                    Op::Write(w) if skipped(w, &ending) => Applied::Unit(Ok(())),
                    Op::Write(w) => Applied::Unit(apply(&tx, w, &starts)),
                    Op::Flush(_) | Op::Then(_) => Applied::Unit(Ok(())),
                };
                if let Applied::Unit(Err(e)) | Applied::Count(Err(e)) | Applied::Wait(Err(e)) = &d {
                    if busy(e) {
                        return Err(rusqlite::Error::SqliteFailure(
                            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                            None,
                        ));
                    }
                }
                done.push(d);
            }
            tx.commit()
        })();
        match outcome {
            Err(e) if busy(&e) && tries < LOCKED_RETRIES => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(50 * u64::from(tries)));
            }
            Err(e) => return (done, Some(e)),
            Ok(()) => return (done, None),
        }
    }
}

/// What this backend does not write: what no backend needs, and the start
/// of a run whose end is in the same batch (the end's UPDATE writes it,
/// see [`starts`]).
fn skipped(w: &Write, ending: &HashSet<&str>) -> bool {
    needless(w, ending)
        || matches!(w, Write::Running { run_id, .. } if ending.contains(run_id.as_str()))
}

/// The start (time, pid, owner) of each run that also ends among `writes`:
/// one UPDATE writes both, as nobody can see the run between them.
type Starts<'a> = std::collections::HashMap<&'a str, (i64, u32, Option<&'a str>)>;

fn starts<'a>(writes: impl Iterator<Item = &'a Write>, ending: &HashSet<&str>) -> Starts<'a> {
    let mut found = Starts::new();
    for w in writes {
        if let Write::Running {
            run_id,
            at,
            pid,
            owner,
        } = w
        {
            if ending.contains(run_id.as_str()) {
                found
                    .entry(run_id.as_str())
                    .or_insert((*at, *pid, owner.as_deref()));
            }
        }
    }
    found
}

/// The SQLite side of the writer: a batch is one transaction.
pub(super) struct Sqlite {
    pub(super) conn: Connection,
    /// The checkpointer (None: the writer's own connection checkpoints,
    /// SQLite's default).
    pub(super) checkpoints: Option<Checkpointer>,
}

/// How the writer and the checkpointer thread meet.
pub(crate) struct Checkpointer {
    /// Wakes the checkpointer after a commit.
    wake: mpsc::SyncSender<()>,
    /// Held by the writer for each commit, and by the checkpointer while it
    /// ends a checkpoint that lets the WAL start over.
    gate: Arc<Mutex<()>>,
    thread: std::thread::JoinHandle<()>,
    /// The WAL's frames after the writer's last commit (SQLite's WAL hook
    /// on the writer's connection writes it; kept alive while it is set).
    frames: Arc<AtomicI64>,
    /// Frames at which the writer copies the WAL itself next.
    backstop_at: i64,
}

/// How often the WAL is checkpointed at most while commits come.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_millis(50);

/// Frames (pages) in the WAL past which a checkpoint also makes it start
/// over from its beginning (the size of SQLite's automatic checkpoints).
pub(super) const RESTART_FRAMES: i64 = 1000;

/// Frames in the WAL at which the writer copies them itself: the
/// checkpointer is behind (a thread starved of CPU, a slow disk) and the
/// WAL would otherwise grow with every commit, whatever the scheduling.
pub(super) const BACKSTOP_FRAMES: i64 = 4 * RESTART_FRAMES;

/// How long the writer's own copy waits for a copy under way or for
/// readers of older pages: a WAL that readers still need is copied at the
/// next backstop, never by holding commits up long.
const BACKSTOP_WAIT: Duration = Duration::from_millis(250);

/// SQLite's WAL hook: the frames in the WAL after a commit.
unsafe extern "C" fn wal_frames(
    frames_seen: *mut std::ffi::c_void,
    _db: *mut rusqlite::ffi::sqlite3,
    _name: *const std::ffi::c_char,
    frames: std::ffi::c_int,
) -> std::ffi::c_int {
    // SAFETY: `frames_seen` is the `AtomicI64` of the `Checkpointer`, which
    // outlives the hook (removed, or the connection closed, before it goes).
    unsafe { (*(frames_seen as *const AtomicI64)).store(frames.into(), Ordering::Relaxed) };
    rusqlite::ffi::SQLITE_OK
}

/// Checkpoints the WAL on a thread and connection of their own, so a commit
/// never waits for pages to be copied into the database and synced (the
/// writer's connection would do that every 1,000 pages, inside a commit).
/// PASSIVE: it copies what no reader still needs and never blocks the
/// writer. Returns how to reach it, or None (and the writer keeps SQLite's
/// automatic checkpoints) when it cannot be started.
///
/// SQLite starts the WAL over only once every frame in it was copied, and
/// a checkpoint running beside commits never copies the last ones: under
/// steady load the WAL grew without end (a gigabyte in five seconds of
/// `serve_bench`), every commit writing to pages the file did not have.
/// So past [`RESTART_FRAMES`] the frames committed during the copy are
/// copied again with commits held back, and the next commit writes from the
/// WAL's beginning.
pub(super) fn start_checkpointer(path: &Path, write: &Connection) -> Option<Checkpointer> {
    let conn = sqlite::connect(path).ok()?;
    Checkpointer::start(write, move |woken, held| {
        // The WAL's size in frames, as the checkpoint found it.
        let passive = || {
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1))
                .unwrap_or(0)
        };
        // Ends with the writer (its sender gone).
        while woken.recv().is_ok() {
            let mut frames = passive();
            if frames >= RESTART_FRAMES {
                // Copies what came during the last copy, beside the
                // commits, while that is much: commits wait only for
                // a short tail.
                for _ in 0..4 {
                    let now = passive();
                    let new = now - std::mem::replace(&mut frames, now);
                    if new < RESTART_FRAMES / 8 {
                        break;
                    }
                }
                let _no_commit = held.lock();
                passive();
            }
            // Commits meanwhile leave one wake-up: one checkpoint per
            // interval, not one (and a sync) per commit.
            std::thread::sleep(CHECKPOINT_EVERY);
        }
    })
}

impl Checkpointer {
    /// `run` on a thread of its own, woken after commits and holding the
    /// gate to hold commits back; the writer's automatic checkpoints off,
    /// its WAL's size watched.
    pub(super) fn start(
        write: &Connection,
        run: impl FnOnce(mpsc::Receiver<()>, Arc<Mutex<()>>) + Send + 'static,
    ) -> Option<Checkpointer> {
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let gate = Arc::new(Mutex::new(()));
        let held = gate.clone();
        let thread = std::thread::Builder::new()
            .name("marktoflow-checkpoint".into())
            .spawn(move || run(woken, held))
            .ok()?;
        write.pragma_update(None, "wal_autocheckpoint", 0).ok()?;
        // (After the pragma: SQLite's automatic checkpoints are a WAL hook
        // of their own, which this one replaces.)
        let frames = Arc::new(AtomicI64::new(0));
        // SAFETY: the hook only stores into `frames`, which the returned
        // Checkpointer keeps; `Sqlite::close` removes the hook before it
        // drops it, and a `Sqlite` dropped whole closes its connection
        // (declared first) before its checkpointer.
        unsafe {
            rusqlite::ffi::sqlite3_wal_hook(
                write.handle(),
                Some(wal_frames),
                Arc::as_ptr(&frames) as *mut std::ffi::c_void,
            );
        }
        Some(Checkpointer {
            wake,
            gate,
            thread,
            frames,
            backstop_at: BACKSTOP_FRAMES,
        })
    }
}

/// The writer's own copy of the WAL, when the checkpointer is behind:
/// FULL waits (briefly) for a copy under way, copies every frame, and the
/// next commit starts the WAL over. Whether every frame was copied.
fn backstop(conn: &Connection) -> bool {
    let _ = conn.busy_timeout(BACKSTOP_WAIT);
    let copied = conn
        .query_row("PRAGMA wal_checkpoint(FULL)", [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .is_ok_and(|(busy, log, done)| busy == 0 && done >= log);
    let _ = conn.busy_timeout(sqlite::BUSY_TIMEOUT);
    copied
}

/// How long a write nobody waits for may stay queued: a commit here is
/// cheap (no sync to disk), so this only lets the writes of a run that is
/// about to end share its end's commit.
pub(super) const GATHER: Duration = Duration::from_millis(1);

impl Commit for Sqlite {
    fn gather(&self) -> Duration {
        GATHER
    }

    fn close(&mut self) {
        // The last writer of this process: copy the WAL into the database
        // and cut it to nothing, so no WAL of a finished burst stays on disk
        // (another process still reading or writing makes this a no-op).
        // Our own checkpointer is let finish first: one still copying a
        // large WAL would make it a no-op too (a starved machine's exit
        // left a run's dropped checkpoints on disk, in the WAL).
        if let Some(Checkpointer { wake, thread, .. }) = self.checkpoints.take() {
            // SAFETY: removes the hook whose counter goes with the
            // checkpointer.
            unsafe {
                rusqlite::ffi::sqlite3_wal_hook(self.conn.handle(), None, std::ptr::null_mut());
            }
            drop(wake);
            let _ = thread.join();
        }
        // Never hold up an exit for another process's readers.
        let _ = self.conn.busy_timeout(Duration::from_millis(100));
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }

    fn commit(&mut self, batch: &[Op]) -> (Vec<Done>, Option<StoreError>) {
        let held = self.checkpoints.as_ref().map(|c| c.gate.lock());
        let (done, failed) = commit_batch(&mut self.conn, batch);
        drop(held);
        if let Some(c) = &mut self.checkpoints {
            let frames = c.frames.load(Ordering::Relaxed);
            if frames < BACKSTOP_FRAMES {
                c.backstop_at = BACKSTOP_FRAMES;
            } else if frames >= c.backstop_at {
                // Copied whole, the WAL starts over at the next commit;
                // held by readers, it is tried again as many frames on.
                c.backstop_at = if backstop(&self.conn) {
                    BACKSTOP_FRAMES
                } else {
                    frames + BACKSTOP_FRAMES
                };
            }
            // Full: a wake-up is already pending.
            let _ = c.wake.try_send(());
        }
        let done = done
            .into_iter()
            .map(|d| match d {
                Applied::Unit(r) => Done::Unit(r.map_err(db_err)),
                Applied::Count(r) => Done::Count(r.map_err(db_err)),
                Applied::Wait(r) => Done::Wait(r.map_err(db_err)),
                Applied::Duplicate(holder) => Done::Unit(Err(StoreError::DuplicateKey(holder))),
            })
            .collect();
        (done, failed.map(db_err))
    }
}

/// What one queued write came to inside its transaction.
pub(super) enum Applied {
    Unit(Result<(), rusqlite::Error>),
    Count(Result<usize, rusqlite::Error>),
    Wait(Result<WaitDone, rusqlite::Error>),
    /// A run refused: its `Idempotency-Key` started this other run.
    Duplicate(String),
}

/// Inserts a run, unless its `Idempotency-Key` started another run within
/// the retention: then nothing is written and the holder is the answer.
pub(super) fn insert_run(
    tx: &rusqlite::Transaction,
    run: &NewRun,
    now: i64,
) -> Result<Option<String>, rusqlite::Error> {
    if let Some(key) = &run.idempotency_key {
        let since = now.saturating_sub(super::super::IDEMPOTENCY_RETENTION.as_millis() as i64);
        let holder: Option<String> = tx
            .prepare_cached("SELECT run_id FROM idempotency WHERE key = ?1 AND created_at >= ?2")?
            .query_row(params![key, since], |r| r.get(0))
            .optional()?;
        if let Some(holder) = holder.filter(|h| *h != run.id) {
            return Ok(Some(holder));
        }
    }
    let started = (run.status == RunStatus::Running).then_some(now);
    tx.prepare_cached(
        "INSERT INTO runs (id, workflow, file, version, trigger, retry_of, status, inputs, pid, created_at, started_at, owner, context)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        run.id,
        run.workflow,
        run.file,
        run.version,
        run.trigger,
        run.retry_of.as_ref().map(|(id, _)| id),
        run.status.as_str(),
        serde_json::to_string(&run.inputs).unwrap_or_else(|_| "{}".into()),
        run.pid,
        now,
        started,
        run.owner,
        (!run.context.is_null()).then(|| json_text(&run.context)),
    ])?;
    if let Some(key) = &run.idempotency_key {
        // With the run, in its transaction: a repeat after a crash finds it.
        // (A key past its retention is taken over.)
        tx.prepare_cached(
            "INSERT OR REPLACE INTO idempotency (key, run_id, created_at) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![key, run.id, now])?;
    }
    if let Some((from, reused)) = &run.retry_of {
        tx.prepare_cached(
            "INSERT INTO steps (run_id, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused, inputs, usage)
             SELECT ?1, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, 1, inputs, usage
             FROM steps WHERE run_id = ?2 AND top_index BETWEEN 1 AND ?3 ORDER BY id",
        )?
        .execute(params![run.id, from, *reused as i64])?;
    }
    Ok(None)
}

pub(super) fn apply(
    tx: &rusqlite::Transaction,
    w: &Write,
    starts: &Starts,
) -> Result<(), rusqlite::Error> {
    match w {
        // Journaled runs (of `marktoflow run`) carry no key.
        Write::Create { run, at } => {
            insert_run(tx, run, *at)?;
        }
        Write::Running {
            run_id,
            at,
            pid,
            owner,
        } => {
            tx.prepare_cached(
                "UPDATE runs SET status = 'running', started_at = COALESCE(started_at, ?2), pid = ?3,
                 owner = COALESCE(?4, owner)
                 WHERE id = ?1 AND status IN ('queued', 'running')",
            )?
            .execute(params![run_id, at, pid, owner])?;
        }
        Write::Step { run_id, row: s } => {
            tx.prepare_cached(
                "INSERT INTO steps (run_id, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused, inputs, usage)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )?
            .execute(params![
                run_id,
                s.step_id,
                s.name,
                s.depth as i64,
                s.top_index as i64,
                s.status.as_str(),
                s.attempts,
                s.started_at,
                s.duration_ms as i64,
                super::super::stored_json(&s.output),
                s.error,
                s.reused,
                s.inputs.as_ref().map(super::super::json_text),
                s.usage.as_ref().and_then(|u| serde_json::to_string(u).ok()),
            ])?;
        }
        Write::Checkpoint {
            run_id, checkpoint, ..
        } => {
            let state = serde_json::to_string(checkpoint).unwrap_or_default();
            tx.prepare_cached(
                "INSERT OR REPLACE INTO checkpoints (run_id, next_step, state) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![run_id, checkpoint.next_step() as i64, state])?;
        }
        Write::Died { run_id, deaths } => {
            tx.prepare_cached("UPDATE runs SET deaths = MAX(deaths, ?2) WHERE id = ?1")?
                .execute(params![run_id, deaths])?;
        }
        Write::Reply { run_id, key, text } => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO replies (key, run_id, text) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![key, run_id, text])?;
        }
        Write::Finish { run_id, end, at } => {
            let start = starts.get(run_id.as_str());
            if let Some(w) = &end.waiting {
                insert_wait(tx, run_id, w)?;
            }
            // A pause asked of it is taken (or moot): the run stopped.
            tx.prepare_cached("DELETE FROM pauses WHERE run_id = ?1")?
                .execute([run_id])?;
            // A waiting run has not finished: no end time, so it is never pruned.
            tx.prepare_cached(
                "UPDATE runs SET status = ?2, outputs = ?3, error = ?4, error_step = ?5,
                 finished_at = CASE WHEN ?2 = 'waiting' THEN NULL ELSE ?6 END, duration_ms = ?7,
                 started_at = COALESCE(started_at, ?8), pid = COALESCE(?9, pid), owner = COALESCE(?10, owner)
                 WHERE id = ?1",
            )?
            .execute(params![
                run_id,
                end.status.as_str(),
                super::super::stored_json(&end.outputs),
                end.error,
                end.error_step,
                at,
                end.duration_ms as i64,
                start.map(|s| s.0),
                start.map(|s| s.1),
                start.and_then(|s| s.2),
            ])?;
            if end.status == RunStatus::Completed {
                // Large checkpoints of a run that completed are not kept,
                // and their space goes back to the disk (in a store made
                // with incremental vacuum; an older one reuses it).
                let dropped = tx
                    .prepare_cached(
                        "DELETE FROM checkpoints WHERE run_id = ?1
                         AND (SELECT sum(length(state)) FROM checkpoints WHERE run_id = ?1) > ?2",
                    )?
                    .execute(params![run_id, super::super::KEPT_CHECKPOINTS_MAX])?;
                if dropped > 0 {
                    // Stepped to its end: each step gives back a page.
                    let mut vacuum = tx.prepare_cached("PRAGMA incremental_vacuum")?;
                    let mut rows = vacuum.query([])?;
                    while rows.next()?.is_some() {}
                }
            }
        }
    }
    Ok(())
}

/// Records the wait a run stops at, open (kept as it is when the run
/// stops there again: resumed before anyone answered).
fn insert_wait(
    tx: &rusqlite::Transaction,
    run_id: &str,
    w: &crate::engine::WaitRequest,
) -> Result<(), rusqlite::Error> {
    tx.prepare_cached(
        "INSERT INTO waits (run_id, step_id, workflow, mode, key, request, state, votes, created_at, deadline)
         VALUES (?1, ?2, (SELECT workflow FROM runs WHERE id = ?1), ?3, ?4, ?5, 'open', '[]', ?6, ?7)
         ON CONFLICT (run_id, step_id) DO NOTHING",
    )?
    .execute(params![
        run_id,
        w.step_id,
        w.mode.as_str(),
        w.key,
        serde_json::to_string(w).unwrap_or_default(),
        w.created_at,
        w.deadline,
    ])?;
    Ok(())
}

/// A change to waits, inside the writer's transaction: the reads and the
/// writes it decides by are one snapshot (a stale one is refused as busy
/// and the batch tried again), so two answers never both decide.
fn wait_op(tx: &rusqlite::Transaction, op: &WaitOp) -> Result<WaitDone, rusqlite::Error> {
    let requeue = |run_id: &str, owner: &Option<String>| {
        tx.prepare_cached(
            "UPDATE runs SET status = 'queued', owner = ?2, pid = ?3 WHERE id = ?1 AND status = 'waiting'",
        )?
        .execute(params![run_id, owner, std::process::id()])
    };
    match op {
        WaitOp::Answer(a, owner) => {
            let row: Option<(String, String, String)> = tx
                .prepare_cached(
                    "SELECT request, state, votes FROM waits WHERE run_id = ?1 AND step_id = ?2",
                )?
                .query_row(params![a.run_id, a.step_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()?;
            let Some((request, state, votes)) = row else {
                return Ok(WaitDone::Answered(Answered::NotFound));
            };
            let outcome = match decided(&request, &state, &votes, &a.vote) {
                Decision::Final(outcome) => outcome,
                Decision::Counted(all, outcome) => {
                    tx.prepare_cached(
                        "UPDATE waits SET votes = ?3 WHERE run_id = ?1 AND step_id = ?2",
                    )?
                    .execute(params![a.run_id, a.step_id, all])?;
                    outcome
                }
                Decision::Closes {
                    votes,
                    resolution,
                    at,
                    outcome,
                } => {
                    tx.prepare_cached(
                        "UPDATE waits SET state = 'answered', votes = ?3, resolution = ?4, closed_at = ?5
                         WHERE run_id = ?1 AND step_id = ?2",
                    )?
                    .execute(params![a.run_id, a.step_id, votes, resolution, at])?;
                    requeue(&a.run_id, owner)?;
                    outcome
                }
            };
            Ok(WaitDone::Answered(outcome))
        }
        WaitOp::Expire(now, owner) => {
            let due: Vec<(String, String)> = tx
                .prepare_cached(
                    "SELECT run_id, step_id FROM waits
                     WHERE state = 'open' AND deadline IS NOT NULL AND deadline <= ?1
                     ORDER BY deadline LIMIT 256",
                )?
                .query_map(params![now], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            let resolution = expired_text(*now);
            let mut runs = Vec::new();
            for (run_id, step_id) in due {
                tx.prepare_cached(
                    "UPDATE waits SET state = 'expired', resolution = ?3, closed_at = ?4
                     WHERE run_id = ?1 AND step_id = ?2 AND state = 'open'",
                )?
                .execute(params![run_id, step_id, resolution, now])?;
                if requeue(&run_id, owner)? > 0 {
                    runs.push(run_id);
                }
            }
            Ok(WaitDone::Expired(runs))
        }
        WaitOp::Cancel(run_id, now) => {
            tx.prepare_cached(
                "UPDATE waits SET state = 'cancelled', closed_at = ?2 WHERE run_id = ?1 AND state = 'open'",
            )?
            .execute(params![run_id, now])?;
            let n = tx
                .prepare_cached(
                    "UPDATE runs SET status = 'cancelled', finished_at = ?2,
                     error = 'cancelled while it waited for an answer'
                     WHERE id = ?1 AND status = 'waiting'",
                )?
                .execute(params![run_id, now])?;
            Ok(WaitDone::Cancelled(n > 0))
        }
        WaitOp::Pause(run_id, at, by) => {
            let status: Option<String> = tx
                .prepare_cached("SELECT status FROM runs WHERE id = ?1")?
                .query_row([run_id], |r| r.get(0))
                .optional()?;
            Ok(WaitDone::Paused(pause_asked(status.as_deref(), || {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO pauses (run_id, asked_at, by) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![run_id, at, by])
                .map(drop)
            })?))
        }
    }
}

/// Moves journals in: each run's rows are replaced by its journal, so moving
/// the same journal twice (it grew meanwhile) leaves one copy. A run already
/// finished in the database is never replaced by a journal that is not.
pub(super) fn absorb(
    tx: &rusqlite::Transaction,
    journals: &[Vec<Write>],
) -> Result<(), rusqlite::Error> {
    for writes in journals {
        let Some(id) = writes.first().map(Write::run_id) else {
            continue;
        };
        let finished = writes.iter().any(|w| matches!(w, Write::Finish { .. }));
        let stored: Option<(String, String, Option<String>, i64)> = tx
            .prepare_cached("SELECT status, trigger, owner, created_at FROM runs WHERE id = ?1")?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()?;
        if let Some((status, trigger, owner, created_at)) = &stored {
            // Only a run an earlier reading of this journal created is
            // replaced: never one a server (or another journal) recorded.
            let ours = match writes.first() {
                Some(Write::Create { run, at }) => {
                    *trigger == run.trigger && *owner == run.owner && created_at == at
                }
                _ => false,
            };
            if !ours || (!finished && RunStatus::parse(status).is_some_and(RunStatus::is_finished))
            {
                continue;
            }
        }
        for table in ["steps", "checkpoints", "replies"] {
            tx.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), [id])?;
        }
        tx.execute("DELETE FROM runs WHERE id = ?1", [id])?;
        let ending: HashSet<&str> = finished.then_some(id).into_iter().collect();
        let starts = starts(writes.iter(), &ending);
        // A completed run would drop large checkpoints at its end: they
        // are not written at all.
        let completed = writes
            .iter()
            .any(|w| matches!(w, Write::Finish { end, .. } if end.status == RunStatus::Completed));
        let large = completed && checkpoint_bytes(writes) > super::super::KEPT_CHECKPOINTS_MAX;
        for w in writes.iter().filter(|w| w.run_id() == id) {
            let dropped = large && matches!(w, Write::Checkpoint { .. });
            if !dropped && !skipped(w, &ending) {
                apply(tx, w, &starts)?;
            }
        }
    }
    Ok(())
}

/// How much the checkpoints among `writes` hold, as stored.
pub(super) fn checkpoint_bytes(writes: &[Write]) -> i64 {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Checkpoint { checkpoint, .. } => serde_json::to_string(checkpoint)
                .ok()
                .map(|t| t.len() as i64),
            _ => None,
        })
        .sum()
}

pub(super) fn prune(tx: &rusqlite::Transaction, cutoff: i64) -> Result<usize, rusqlite::Error> {
    let mut deleted = 0;
    for (sql, at) in pruning(cutoff) {
        deleted = tx.execute(sql, [at])?;
    }
    Ok(deleted)
}
