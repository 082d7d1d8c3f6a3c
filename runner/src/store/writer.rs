//! The one writer of a store: writes are queued from any thread and
//! committed in order, whatever queued meanwhile in the same transaction, so
//! a busy server pays for one commit per batch, not per event. Each backend
//! (`sqlite.rs`, `postgres.rs`) says how a batch is committed; the queue,
//! the batching and the answers are here.

use super::{NewRun, StoreError, Write};
use std::sync::mpsc;
use std::time::Duration;

/// Most writes committed in one transaction.
pub(super) const MAX_BATCH: usize = 4096;

pub(super) type Reply<T> = tokio::sync::oneshot::Sender<Result<T, StoreError>>;

pub(super) enum Op {
    Create(Box<NewRun>, i64, Reply<()>),
    Write(Box<Write>),
    /// Runs' journals (see [`super::journal`]) to move in, each replacing
    /// what an earlier move of the same run left.
    Absorb(Vec<Vec<Write>>, mpsc::Sender<Result<(), StoreError>>),
    Prune(i64, Reply<usize>),
    Flush(Reply<()>),
}

/// What one queued write came to inside its transaction.
pub(super) enum Done {
    Unit(Result<(), StoreError>),
    Count(Result<usize, StoreError>),
}

/// How a backend commits a batch: one [`Done`] per op in order, and the
/// error that rolled the whole transaction back, if any.
pub(super) trait Commit {
    fn commit(&mut self, batch: &[Op]) -> (Vec<Done>, Option<StoreError>);

    /// How long a batch of writes nobody waits for (a run's steps and
    /// checkpoints) may wait for more before its commit: worth it where a
    /// commit is expensive (a flush to disk on another machine), not where
    /// it is cheap.
    fn gather(&self) -> Duration {
        Duration::ZERO
    }
}

/// Whether someone waits for `op`'s commit.
fn awaited(op: &Op) -> bool {
    !matches!(op, Op::Write(w) if !matches!(**w, super::Write::Finish { .. }))
}

/// The writer thread's loop: until every sender is gone, commits what is
/// queued and answers each op. An error of a write nobody waits for is
/// reported at the next flush.
pub(super) fn writer_loop(mut backend: impl Commit, rx: mpsc::Receiver<Op>) {
    let mut deferred: Option<String> = None;
    let gather = backend.gather();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        // Nobody waits yet: a little longer, for the rest of the runs'
        // writes (their ends and flushes follow soon) to share the commit.
        if !gather.is_zero() && !batch.iter().any(awaited) {
            let until = std::time::Instant::now() + gather;
            while batch.len() < MAX_BATCH {
                let left = until.saturating_duration_since(std::time::Instant::now());
                match rx.recv_timeout(left) {
                    Ok(op) => {
                        let urgent = awaited(&op);
                        batch.push(op);
                        if urgent {
                            while batch.len() < MAX_BATCH {
                                match rx.try_recv() {
                                    Ok(op) => batch.push(op),
                                    Err(_) => break,
                                }
                            }
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        }
        let (done, failed) = backend.commit(&batch);
        let commit_err = failed.map(|e| e.to_string());
        if let Some(e) = &commit_err {
            deferred.get_or_insert_with(|| e.clone());
        }
        let failed_as = |e: &String| StoreError::Db(e.clone());
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
                        (_, Some(e)) => Err(failed_as(e)),
                        (Some(Done::Count(r)), None) => r,
                        _ => Ok(0),
                    };
                    let _ = reply.send(r);
                }
                Op::Write(_) => {
                    if let Some(Done::Unit(Err(e))) = d {
                        deferred.get_or_insert_with(|| e.to_string());
                    }
                }
                Op::Flush(reply) => {
                    let r = match (deferred.take(), &commit_err) {
                        (Some(e), _) => Err(StoreError::Db(e)),
                        (None, Some(e)) => Err(failed_as(e)),
                        (None, None) => Ok(()),
                    };
                    let _ = reply.send(r);
                }
            }
        }
    }
}

/// The answer to an op that waits for its own outcome: the commit's error
/// when the transaction failed, else the op's own (typed, as the backend
/// gave it).
fn unit(d: Option<Done>, commit_err: &Option<String>) -> Result<(), StoreError> {
    match (d, commit_err) {
        (_, Some(e)) => Err(StoreError::Db(e.clone())),
        (Some(Done::Unit(r)), None) => r,
        _ => Ok(()),
    }
}

/// The runs whose end is in `batch`: their checkpoint after the last step
/// is never needed once the end is committed with it.
pub(super) fn ending(batch: &[Op]) -> std::collections::HashSet<&str> {
    batch
        .iter()
        .filter_map(|op| match op {
            Op::Write(w) => match &**w {
                super::Write::Finish { run_id, .. } => Some(run_id.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}
