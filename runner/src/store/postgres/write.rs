//! The PostgreSQL side of the store's writer: one transaction per batch,
//! fenced (a run's writes commit only while this process holds it), and
//! the batch's rows sent in a few statements (arrays through `UNNEST`), with
//! statements prepared once per connection.

use super::{connect, pg_err, Member, DB_NOW, DONE_CHANNEL, QUEUE_CHANNEL};
use crate::store::wait::{Answered, Decision};
use crate::store::writer::{ending, needless, pruning, Commit, Done, Op, WaitDone, WaitOp};
use crate::store::{json_text, NewRun, RunStatus, StoreError, Write, IDEMPOTENCY_RETENTION};
use postgres::{Client, Statement, Transaction};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

pub(super) struct Pg {
    pub(super) url: String,
    pub(super) conn: Option<(Client, Statements)>,
    pub(super) me: Arc<Member>,
}

/// Step rows from arrays, in their order.
const STEPS_SQL: &str = "INSERT INTO steps (run_id, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused, inputs, usage)
     SELECT run_id, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused, inputs, usage
     FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::int[],
                 $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::bool[], $13::text[], $14::text[])
          WITH ORDINALITY AS u(run_id, step_id, name, depth, top_index, status, attempts,
                               started_at, duration_ms, output, error, reused, inputs, usage, n)
     ORDER BY n";

/// The writer's statements, prepared on its connection.
pub(super) struct Statements {
    holders: Statement,
    take_key: Statement,
    key_holder: Statement,
    insert_run: Statement,
    copy_steps: Statement,
    running: Statement,
    steps: Statement,
    checkpoints: Statement,
    finish: Statement,
    told_done: Statement,
    replies: Statement,
}

impl Statements {
    fn prepare(c: &mut Client) -> Result<Statements, postgres::Error> {
        Ok(Statements {
            holders: c.prepare(
                "SELECT id, worker, attempt FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            )?,
            take_key: c.prepare(
                "INSERT INTO idempotency AS i (key, run_id, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (key) DO UPDATE SET run_id = EXCLUDED.run_id, created_at = EXCLUDED.created_at
                 WHERE i.created_at < $4
                 RETURNING run_id",
            )?,
            key_holder: c.prepare("SELECT run_id FROM idempotency WHERE key = $1")?,
            insert_run: c.prepare(&format!(
                "INSERT INTO runs (id, workflow, file, version, trigger, retry_of, status, inputs, context, pid,
                    created_at, started_at, worker, lease_until, attempt, concurrency_key, concurrency_limit)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
                    CASE WHEN $13::text IS NULL THEN NULL ELSE {DB_NOW} + $14 END, $15, $16, $17)"
            ))?,
            copy_steps: c.prepare(
                "INSERT INTO steps (run_id, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused, inputs, usage)
                 SELECT $1, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, TRUE, inputs, usage
                 FROM steps WHERE run_id = $2 AND top_index BETWEEN 1 AND $3 ORDER BY id",
            )?,
            running: c.prepare(&format!(
                "UPDATE runs r SET status = 'running', started_at = COALESCE(r.started_at, u.at),
                    pid = u.pid, worker = $4, lease_until = {DB_NOW} + $5
                 FROM UNNEST($1::text[], $2::bigint[], $3::int[]) AS u(id, at, pid)
                 WHERE r.id = u.id AND r.status IN ('queued', 'running')"
            ))?,
            steps: c.prepare(STEPS_SQL)?,
            checkpoints: c.prepare(
                "INSERT INTO checkpoints (run_id, next_step, state)
                 SELECT * FROM UNNEST($1::text[], $2::int[], $3::text[])
                 ON CONFLICT (run_id, next_step) DO UPDATE SET state = EXCLUDED.state",
            )?,
            finish: c.prepare(
                "UPDATE runs r SET status = u.status, outputs = u.outputs, error = u.error,
                    error_step = u.error_step, duration_ms = u.dur, lease_until = NULL,
                    -- A waiting run has not finished, and no worker holds it.
                    finished_at = CASE WHEN u.status = 'waiting' THEN NULL ELSE u.at END,
                    worker = CASE WHEN u.status = 'waiting' THEN NULL ELSE r.worker END
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])
                      AS u(id, status, outputs, error, error_step, at, dur)
                 WHERE r.id = u.id",
            )?,
            replies: c.prepare(
                "INSERT INTO replies (key, run_id, text)
                 SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[])
                 ON CONFLICT (key) DO UPDATE SET run_id = EXCLUDED.run_id, text = EXCLUDED.text",
            )?,
            told_done: c.prepare(&format!(
                "SELECT pg_notify('{DONE_CHANNEL}', id) FROM UNNEST($1::text[]) AS id"
            ))?,
        })
    }
}

/// Why a batch's op was not applied (the rest of the batch was).
enum Refusal {
    /// The run is another worker's now (or gone).
    Fenced(String),
    /// The `Idempotency-Key` started another run within the retention.
    Duplicate(String),
}

fn refused(r: Refusal) -> StoreError {
    match r {
        Refusal::Fenced(id) => StoreError::LeaseLost(id),
        Refusal::Duplicate(id) => StoreError::DuplicateKey(id),
    }
}

/// How long a run's unawaited writes wait to share a commit (see
/// [`Commit::gather`]): a commit flushes the database's log to disk.
const GATHER: Duration = Duration::from_millis(3);

impl Commit for Pg {
    fn gather(&self) -> Duration {
        GATHER
    }

    fn commit(&mut self, batch: &[Op]) -> (Vec<Done>, Option<StoreError>) {
        // A dropped connection is reopened and the batch tried again whole
        // (a failed transaction left nothing behind).
        let mut last = None;
        for attempt in 0..3 {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200 * attempt));
            }
            if self.conn.as_ref().is_none_or(|(c, _)| c.is_closed()) {
                let opened = connect(&self.url).and_then(|mut c| {
                    let s = Statements::prepare(&mut c).map_err(pg_err)?;
                    Ok((c, s))
                });
                match opened {
                    Ok(c) => self.conn = Some(c),
                    Err(StoreError::Open { message, .. }) => {
                        last = Some(StoreError::Unavailable(message));
                        continue;
                    }
                    Err(e) => {
                        last = Some(e);
                        continue;
                    }
                }
            }
            let Some((conn, stmts)) = self.conn.as_mut() else {
                continue;
            };
            match commit_batch(conn, stmts, &self.me, batch) {
                Ok(done) => return (done, None),
                Err(e) => {
                    let lost = conn.is_closed();
                    last = Some(pg_err(e));
                    if !lost {
                        break;
                    }
                }
            }
        }
        (Vec::new(), last)
    }
}

/// The rows of a batch's writes, sent together at its end.
#[derive(Default)]
struct Rows {
    running: (Vec<String>, Vec<i64>, Vec<i32>),
    steps: StepColumns,
    /// (run, next step) → its place in `checkpoints` (the last write wins).
    checkpoint_at: HashMap<(String, i32), usize>,
    checkpoints: (Vec<String>, Vec<i32>, Vec<String>),
    finish_at: HashMap<String, usize>,
    finish: FinishColumns,
    /// key → its place in `replies` (the last write wins).
    reply_at: HashMap<String, usize>,
    replies: (Vec<String>, Vec<String>, Vec<String>),
    /// The waits of runs that stop at one (with their end).
    waits: Vec<(String, crate::engine::WaitRequest)>,
}

#[derive(Default)]
struct StepColumns {
    run_id: Vec<String>,
    step_id: Vec<String>,
    name: Vec<String>,
    depth: Vec<i32>,
    top_index: Vec<i32>,
    status: Vec<&'static str>,
    attempts: Vec<i32>,
    started_at: Vec<i64>,
    duration_ms: Vec<i64>,
    output: Vec<String>,
    error: Vec<Option<String>>,
    reused: Vec<bool>,
    inputs: Vec<Option<String>>,
    usage: Vec<Option<String>>,
}

#[derive(Default)]
struct FinishColumns {
    id: Vec<String>,
    status: Vec<&'static str>,
    outputs: Vec<String>,
    error: Vec<Option<String>>,
    error_step: Vec<Option<String>>,
    at: Vec<i64>,
    duration_ms: Vec<i64>,
}

impl StepColumns {
    /// Inserts the rows (none: nothing is sent) with `STEPS_SQL`.
    fn send(&self, tx: &mut Transaction, steps: &Statement) -> Result<(), postgres::Error> {
        if self.run_id.is_empty() {
            return Ok(());
        }
        tx.execute(
            steps,
            &[
                &self.run_id,
                &self.step_id,
                &self.name,
                &self.depth,
                &self.top_index,
                &self.status,
                &self.attempts,
                &self.started_at,
                &self.duration_ms,
                &self.output,
                &self.error,
                &self.reused,
                &self.inputs,
                &self.usage,
            ],
        )
        .map(drop)
    }
}

fn small(n: usize) -> i32 {
    n.min(i32::MAX as usize) as i32
}

impl Rows {
    fn add(&mut self, w: &Write) {
        match w {
            // Creates come as `Op::Create`; the reaper counts deaths.
            Write::Create { .. } | Write::Died { .. } => {}
            Write::Running {
                run_id, at, pid, ..
            } => {
                self.running.0.push(run_id.clone());
                self.running.1.push(*at);
                self.running.2.push((*pid).min(i32::MAX as u32) as i32);
            }
            Write::Step { run_id, row: s } => {
                let c = &mut self.steps;
                c.run_id.push(run_id.clone());
                c.step_id.push(s.step_id.clone());
                c.name.push(s.name.clone());
                c.depth.push(small(s.depth));
                c.top_index.push(small(s.top_index));
                c.status.push(s.status.as_str());
                c.attempts.push(s.attempts.min(i32::MAX as u32) as i32);
                c.started_at.push(s.started_at);
                c.duration_ms
                    .push(s.duration_ms.min(i64::MAX as u64) as i64);
                c.output.push(crate::store::stored_json(&s.output));
                c.error.push(s.error.clone());
                c.reused.push(s.reused);
                c.inputs.push(s.inputs.as_ref().map(json_text));
                c.usage
                    .push(s.usage.as_ref().and_then(|u| serde_json::to_string(u).ok()));
            }
            Write::Checkpoint {
                run_id, checkpoint, ..
            } => {
                let next = small(checkpoint.next_step());
                let state = serde_json::to_string(checkpoint).unwrap_or_default();
                match self.checkpoint_at.get(&(run_id.clone(), next)) {
                    Some(&i) => self.checkpoints.2[i] = state,
                    None => {
                        self.checkpoint_at
                            .insert((run_id.clone(), next), self.checkpoints.0.len());
                        self.checkpoints.0.push(run_id.clone());
                        self.checkpoints.1.push(next);
                        self.checkpoints.2.push(state);
                    }
                }
            }
            Write::Reply { run_id, key, text } => match self.reply_at.get(key) {
                Some(&i) => {
                    self.replies.1[i] = run_id.clone();
                    self.replies.2[i] = text.clone();
                }
                None => {
                    self.reply_at.insert(key.clone(), self.replies.0.len());
                    self.replies.0.push(key.clone());
                    self.replies.1.push(run_id.clone());
                    self.replies.2.push(text.clone());
                }
            },
            Write::Finish { run_id, end, at } => {
                let f = &mut self.finish;
                let i = match self.finish_at.get(run_id) {
                    Some(&i) => i,
                    None => {
                        self.finish_at.insert(run_id.clone(), f.id.len());
                        f.id.push(run_id.clone());
                        f.status.push("");
                        f.outputs.push(String::new());
                        f.error.push(None);
                        f.error_step.push(None);
                        f.at.push(0);
                        f.duration_ms.push(0);
                        f.id.len() - 1
                    }
                };
                if let Some(w) = &end.waiting {
                    self.waits.push((run_id.clone(), w.clone()));
                }
                f.status[i] = end.status.as_str();
                f.outputs[i] = crate::store::stored_json(&end.outputs);
                f.error[i] = end.error.clone();
                f.error_step[i] = end.error_step.clone();
                f.at[i] = *at;
                f.duration_ms[i] = end.duration_ms.min(i64::MAX as u64) as i64;
            }
        }
    }

    /// Sends the rows: running marks first, the runs' ends last.
    fn send(
        &self,
        tx: &mut Transaction,
        s: &Statements,
        me: &Member,
    ) -> Result<(), postgres::Error> {
        let lease = me.opts.lease.as_millis() as i64;
        if !self.running.0.is_empty() {
            let (ids, at, pid) = &self.running;
            tx.execute(&s.running, &[ids, at, pid, &me.id, &lease])?;
        }
        self.steps.send(tx, &s.steps)?;
        if !self.replies.0.is_empty() {
            let (keys, runs, texts) = &self.replies;
            tx.execute(&s.replies, &[keys, runs, texts])?;
        }
        if !self.checkpoints.0.is_empty() {
            let (ids, next, state) = &self.checkpoints;
            tx.execute(&s.checkpoints, &[ids, next, state])?;
        }
        for (run_id, w) in &self.waits {
            tx.execute(
                "INSERT INTO waits (run_id, step_id, workflow, mode, key, request, state, votes, created_at, deadline)
                 VALUES ($1, $2, (SELECT workflow FROM runs WHERE id = $1), $3, $4, $5, 'open', '[]', $6, $7)
                 ON CONFLICT (run_id, step_id) DO NOTHING",
                &[
                    run_id,
                    &w.step_id,
                    &w.mode.as_str(),
                    &w.key,
                    &serde_json::to_string(w).unwrap_or_default(),
                    &w.created_at,
                    &w.deadline,
                ],
            )?;
        }
        let f = &self.finish;
        if !f.id.is_empty() {
            tx.execute(
                &s.finish,
                &[
                    &f.id,
                    &f.status,
                    &f.outputs,
                    &f.error,
                    &f.error_step,
                    &f.at,
                    &f.duration_ms,
                ],
            )?;
            // Large checkpoints of runs that completed are not kept.
            tx.execute(
                "DELETE FROM checkpoints c USING UNNEST($1::text[], $2::text[]) AS u(id, status)
                 WHERE c.run_id = u.id AND u.status = 'completed'
                   AND (SELECT sum(length(state)) FROM checkpoints k WHERE k.run_id = u.id) > $3",
                &[&f.id, &f.status, &crate::store::KEPT_CHECKPOINTS_MAX],
            )?;
            // A server waiting to answer for a run hears of its end at once.
            tx.execute(&s.told_done, &[&f.id])?;
            // A pause asked of them is taken (or moot): they stopped.
            tx.execute("DELETE FROM pauses WHERE run_id = ANY($1)", &[&f.id])?;
        }
        Ok(())
    }
}

fn commit_batch(
    conn: &mut Client,
    s: &Statements,
    me: &Member,
    batch: &[Op],
) -> Result<Vec<Done>, postgres::Error> {
    let mut tx = conn.transaction()?;
    // Who holds each run written to, locked until the commit.
    let touched: Vec<String> = batch
        .iter()
        .filter_map(|op| match op {
            Op::Write(w) => Some(w.run_id().to_string()),
            _ => None,
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let mut holders: HashMap<String, (Option<String>, i32)> = HashMap::new();
    if !touched.is_empty() {
        for r in tx.query(&s.holders, &[&touched])? {
            holders.insert(r.get(0), (r.get(1), r.get(2)));
        }
    }
    let fences = me.fences.lock().map(|f| f.clone()).unwrap_or_default();
    let ending = ending(batch);
    let mut created: HashMap<String, i32> = HashMap::new();
    let mut rows = Rows::default();
    let mut notify = false;
    let mut done = Vec::with_capacity(batch.len());
    for op in batch {
        let d = match op {
            Op::Create(run, at, _) => match insert_run(&mut tx, s, me, run, *at)? {
                Ok(attempt) => {
                    match attempt {
                        Some(a) => drop(created.insert(run.id.clone(), a)),
                        None => notify = true,
                    }
                    Done::Unit(Ok(()))
                }
                Err(r) => Done::Unit(Err(refused(r))),
            },
            Op::Prune(cutoff, _) => Done::Count(prune(&mut tx, *cutoff).map_err(pg_err)),
            Op::Wait(op, _) => {
                let d = wait_op(&mut tx, op)?;
                notify |= d.requeued();
                Done::Wait(Ok(d))
            }
            // Journals are the SQLite store's; nothing queues them here.
            Op::Absorb(..) | Op::Flush(_) | Op::Then(_) => Done::Unit(Ok(())),
            Op::Write(w) => {
                let id = w.run_id();
                let ours = match (created.get(id), fences.get(id), holders.get(id)) {
                    (Some(_), ..) => true,
                    (None, Some(a), Some((Some(worker), at))) => *worker == me.id && at == a,
                    // Not executed here (a cancel of a queued run): only
                    // while no worker holds it.
                    (None, None, Some((None, _))) => true,
                    (None, None, Some((Some(worker), _))) => *worker == me.id,
                    _ => false,
                };
                if !ours {
                    Done::Unit(Err(refused(Refusal::Fenced(id.to_string()))))
                } else {
                    if !needless(w, &ending) {
                        rows.add(w);
                    }
                    Done::Unit(Ok(()))
                }
            }
        };
        done.push(d);
    }
    rows.send(&mut tx, s, me)?;
    if notify {
        tx.batch_execute(&format!("NOTIFY {QUEUE_CHANNEL}"))?;
    }
    // Fences first, so a write queued right after the commit finds its own.
    if let Ok(mut f) = me.fences.lock() {
        f.extend(created.iter().map(|(k, v)| (k.clone(), *v)));
    }
    match tx.commit() {
        Ok(()) => {
            if let Ok(mut f) = me.fences.lock() {
                for id in &rows.finish.id {
                    f.remove(id);
                }
            }
            Ok(done)
        }
        Err(e) => {
            if let Ok(mut f) = me.fences.lock() {
                for id in created.keys() {
                    f.remove(id);
                }
            }
            Err(e)
        }
    }
}

/// A change to waits inside the batch's transaction: the wait's row is
/// locked while it is decided, so two answers from two servers never both
/// decide. A decided or expired wait puts its run back in the queue (no
/// worker holds it), where any worker serving its workflow claims it.
fn wait_op(tx: &mut Transaction, op: &WaitOp) -> Result<WaitDone, postgres::Error> {
    let requeue = |tx: &mut Transaction, run_id: &str| {
        tx.execute(
            "UPDATE runs SET status = 'queued', worker = NULL, lease_until = NULL
             WHERE id = $1 AND status = 'waiting'",
            &[&run_id],
        )
    };
    match op {
        WaitOp::Answer(a, _) => {
            let row = tx.query_opt(
                "SELECT request, state, votes FROM waits WHERE run_id = $1 AND step_id = $2 FOR UPDATE",
                &[&a.run_id, &a.step_id],
            )?;
            let Some(row) = row else {
                return Ok(WaitDone::Answered(Answered::NotFound));
            };
            let (request, state, votes): (String, String, String) =
                (row.get(0), row.get(1), row.get(2));
            let outcome = match crate::store::wait::decided(&request, &state, &votes, &a.vote) {
                Decision::Final(outcome) => outcome,
                Decision::Counted(all, outcome) => {
                    tx.execute(
                        "UPDATE waits SET votes = $3 WHERE run_id = $1 AND step_id = $2",
                        &[&a.run_id, &a.step_id, &all],
                    )?;
                    outcome
                }
                Decision::Closes {
                    votes,
                    resolution,
                    at,
                    outcome,
                } => {
                    tx.execute(
                        "UPDATE waits SET state = 'answered', votes = $3, resolution = $4, closed_at = $5
                         WHERE run_id = $1 AND step_id = $2",
                        &[&a.run_id, &a.step_id, &votes, &resolution, &at],
                    )?;
                    requeue(tx, &a.run_id)?;
                    outcome
                }
            };
            Ok(WaitDone::Answered(outcome))
        }
        WaitOp::Expire(now, _) => {
            let resolution = crate::store::wait::expired_text(*now);
            let rows = tx.query(
                "UPDATE waits SET state = 'expired', resolution = $2, closed_at = $1
                 WHERE (run_id, step_id) IN (
                    SELECT run_id, step_id FROM waits
                    WHERE state = 'open' AND deadline IS NOT NULL AND deadline <= $1
                    ORDER BY deadline LIMIT 256 FOR UPDATE SKIP LOCKED)
                 RETURNING run_id",
                &[now, &resolution],
            )?;
            let mut runs = Vec::new();
            for r in rows {
                let id: String = r.get(0);
                if requeue(tx, &id)? > 0 {
                    runs.push(id);
                }
            }
            Ok(WaitDone::Expired(runs))
        }
        WaitOp::Cancel(run_id, now) => {
            tx.execute(
                "UPDATE waits SET state = 'cancelled', closed_at = $2 WHERE run_id = $1 AND state = 'open'",
                &[run_id, now],
            )?;
            let n = tx.execute(
                "UPDATE runs SET status = 'cancelled', finished_at = $2,
                 error = 'cancelled while it waited for an answer'
                 WHERE id = $1 AND status = 'waiting'",
                &[run_id, now],
            )?;
            Ok(WaitDone::Cancelled(n > 0))
        }
        WaitOp::Pause(run_id, at, by) => {
            let status: Option<String> = tx
                .query_opt(
                    "SELECT status FROM runs WHERE id = $1 FOR UPDATE",
                    &[run_id],
                )?
                .map(|r| r.get(0));
            Ok(WaitDone::Paused(super::super::writer::pause_asked(
                status.as_deref(),
                || {
                    tx.execute(
                        "INSERT INTO pauses (run_id, asked_at, by) VALUES ($1, $2, $3)
                         ON CONFLICT (run_id) DO UPDATE SET asked_at = $2, by = $3",
                        &[run_id, at, by],
                    )
                    .map(drop)
                },
            )?))
        }
    }
}

/// Inserts a run: leased to this process when it executes it (the attempt
/// it holds), else queued for the workers. An `Idempotency-Key` another
/// run holds within the retention refuses it.
fn insert_run(
    tx: &mut Transaction,
    s: &Statements,
    me: &Member,
    run: &NewRun,
    now: i64,
) -> Result<Result<Option<i32>, Refusal>, postgres::Error> {
    if let Some(key) = &run.idempotency_key {
        // Unique across the cluster: the first run to take a key keeps it
        // for the retention; a later one is refused, not recorded.
        let cutoff = now - IDEMPOTENCY_RETENTION.as_millis() as i64;
        if tx
            .query_opt(&s.take_key, &[key, &run.id, &now, &cutoff])?
            .is_none()
        {
            let holder: String = tx.query_one(&s.key_holder, &[key])?.get(0);
            return Ok(Err(Refusal::Duplicate(holder)));
        }
    }
    // A run with a `concurrency:` limit is claimed like any queued run, so
    // the claim counts it; the others run where they were accepted. (A
    // retry runs where it was asked for.)
    let queued = run.concurrency.is_some() && run.retry_of.is_none();
    let executes = me.opts.executes && run.owner.is_some() && !queued;
    let started = (run.status == RunStatus::Running).then_some(now);
    let lease = me.opts.lease.as_millis() as i64;
    let attempt: i32 = if executes { 1 } else { 0 };
    tx.execute(
        &s.insert_run,
        &[
            &run.id,
            &run.workflow,
            &run.file,
            &run.version,
            &run.trigger,
            &run.retry_of.as_ref().map(|(id, _)| id.clone()),
            &run.status.as_str(),
            &json_text(&Value::Object(run.inputs.clone())),
            &(!run.context.is_null()).then(|| json_text(&run.context)),
            &run.pid.map(|p| p.min(i32::MAX as u32) as i32),
            &now,
            &started,
            &executes.then(|| me.id.clone()),
            &lease,
            &attempt,
            &run.concurrency.as_ref().map(|(k, _)| k.clone()),
            &run.concurrency
                .as_ref()
                .map(|(_, n)| (*n).min(i32::MAX as u32) as i32),
        ],
    )?;
    if let Some((from, reused)) = &run.retry_of {
        tx.execute(&s.copy_steps, &[&run.id, from, &small(*reused)])?;
    }
    Ok(Ok(executes.then_some(attempt)))
}

fn prune(tx: &mut Transaction, cutoff: i64) -> Result<usize, postgres::Error> {
    let mut deleted = 0;
    for (sql, at) in pruning(cutoff) {
        deleted = tx.execute(sql, &[&at])?;
    }
    Ok(deleted as usize)
}

/// Copies finished runs and their steps in, in one transaction: a run whose
/// id is there already is left as it is. Returns (copied, already there).
pub(super) fn import_finished(
    c: &mut Client,
    runs: &[(crate::store::RunRecord, Vec<crate::store::StepRow>)],
) -> Result<(usize, usize), postgres::Error> {
    let mut tx = c.transaction()?;
    let insert = tx.prepare(
        "INSERT INTO runs (id, workflow, file, version, trigger, retry_of, status, inputs, outputs, error,
            error_step, pid, created_at, finished_at, duration_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
         ON CONFLICT (id) DO NOTHING",
    )?;
    let (mut copied, mut present) = (0, 0);
    let mut rows = Rows::default();
    for (r, steps) in runs {
        let n = tx.execute(
            &insert,
            &[
                &r.id,
                &r.workflow,
                &r.file,
                &r.version,
                &r.trigger,
                &r.retry_of,
                &r.status.as_str(),
                &json_text(&r.inputs),
                &json_text(&r.outputs),
                &r.error,
                &r.error_step,
                &r.pid.map(|p| p.min(i32::MAX as u32) as i32),
                &r.created_at,
                &r.finished_at,
                &r.duration_ms.map(|d| d.min(i64::MAX as u64) as i64),
            ],
        )?;
        if n == 0 {
            present += 1;
            continue;
        }
        copied += 1;
        for s in steps {
            rows.add(&Write::Step {
                run_id: r.id.clone(),
                row: s.clone(),
            });
        }
    }
    if !rows.steps.run_id.is_empty() {
        let steps = tx.prepare(STEPS_SQL)?;
        rows.steps.send(&mut tx, &steps)?;
    }
    tx.commit()?;
    Ok((copied, present))
}
