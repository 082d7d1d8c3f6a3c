//! [`RunStore`] on PostgreSQL, shared by many servers and workers: the run
//! history and the queue of runs to do: the reads here, the writer's side
//! in `write.rs`, the queue and leases in `cluster.rs`.
//!
//! - **Queue.** A run accepted by a server that does not execute it is
//!   stored `queued` with no worker, and `NOTIFY marktoflow_queue` wakes the
//!   workers; [`PgStore::claim`] takes some with `FOR UPDATE SKIP LOCKED`.
//! - **Leases.** A run belongs to one worker (`runs.worker`) until
//!   `runs.lease_until`, which that worker's heartbeat pushes on every
//!   third of the lease. A killed worker's leases run out; the reaper (one
//!   process at a time, by an advisory lock) puts its runs back in the
//!   queue, and the next worker continues each from its last checkpoint.
//! - **Fencing.** Every claim counts an attempt; a worker's writes for a
//!   run are committed only while the run is still its own at that attempt,
//!   checked in the same transaction (`FOR UPDATE`). A worker that lost its
//!   lease cannot commit anything for the run again.
//! - **Time** for leases is the database's, never a host's clock.
//!
//! Connections: one writer (see [`super::writer`]), a few readers (each a
//! thread owning a connection, so callers block on a channel and never on
//! an async runtime), one listener once a worker waits for work.

mod cluster;
mod schema;
mod write;

pub use cluster::{QueueStats, WorkerInfo};

use super::checkpoint;
use super::writer::{WaitDone, WaitOp, Writes};
use super::{
    is_run_key, named_run, now_ms, parse_json, prune_cutoff, NewRun, RunFilter, RunRecord,
    RunStatus, RunStore, StepRow, StoreError, Write, IDEMPOTENCY_RETENTION,
};
use crate::engine::{Checkpoint, StepStatus};
use postgres::{Client, GenericClient, NoTls, Row};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// The database's clock in milliseconds since the Unix epoch.
const DB_NOW: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// The channel that wakes workers when runs are queued.
const QUEUE_CHANNEL: &str = "marktoflow_queue";
/// The channel told each run id whose end is committed.
const DONE_CHANNEL: &str = "marktoflow_done";

/// Reader connections per process.
const READERS: usize = 4;

const RUN_COLUMNS: &str = "id, workflow, file, version, trigger, status, retry_of, inputs, outputs, error, error_step, pid, created_at, finished_at, duration_ms, worker, context, deaths";

/// Whether `location` names a PostgreSQL store rather than a file.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// `url` without its password, for messages.
pub fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_string(),
    }
}

/// How this process takes part in the cluster.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Whether it executes runs (a worker, a server without
    /// `--no-execute`, a CLI run): runs it accepts are its own, leased.
    pub executes: bool,
    /// How long a lease lasts without a heartbeat.
    pub lease: Duration,
    /// What it is, as `marktoflow workers` shows it.
    pub role: String,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            executes: true,
            lease: Duration::from_secs(10),
            role: "cli".into(),
        }
    }
}

fn pg_err(e: postgres::Error) -> StoreError {
    use std::error::Error as _;
    match e.as_db_error() {
        // The server is shutting down or the connection is being ended.
        Some(db) if db.code().code().starts_with("57P") => {
            StoreError::Unavailable(db.message().to_string())
        }
        Some(db) => StoreError::Db(format!("{} ({})", db.message(), db.code().code())),
        None if e.is_closed() || e.source().is_some_and(|s| s.is::<std::io::Error>()) => {
            StoreError::Unavailable(e.to_string())
        }
        None => StoreError::Db(e.to_string()),
    }
}

fn connect(url: &str) -> Result<Client, StoreError> {
    let mut config: postgres::Config =
        url.parse().map_err(|e: postgres::Error| StoreError::Open {
            path: shown(url),
            message: format!("not a PostgreSQL URL: {e}"),
        })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    config.application_name("marktoflow");
    // A process paused (SIGSTOP, a frozen VM) inside a transaction would
    // hold its locks, the claim lock among them, and stall every worker:
    // the server ends such a session instead.
    if config.get_options().is_none() {
        config.options("-c idle_in_transaction_session_timeout=10000");
    }
    config.connect(NoTls).map_err(|e| StoreError::Open {
        path: shown(url),
        message: e.to_string(),
    })
}

type Job = Box<dyn FnOnce(Result<&mut Client, StoreError>) + Send>;

/// Connections owned by threads of their own: a caller sends a job and
/// waits on a channel, which is safe from any thread, async or not.
struct Pool {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Pool {
    fn new(url: &str, n: usize) -> Result<Pool, StoreError> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::new();
        for i in 0..n {
            let rx = rx.clone();
            let url_of_thread = url.to_string();
            let t = std::thread::Builder::new()
                .name(format!("marktoflow-pg-{i}"))
                .spawn(move || {
                    let mut conn: Option<Client> = None;
                    loop {
                        let job = match rx.lock().map(|r| r.recv()) {
                            Ok(Ok(job)) => job,
                            _ => return,
                        };
                        if conn.as_ref().is_none_or(Client::is_closed) {
                            conn = None;
                            match connect(&url_of_thread) {
                                Ok(c) => conn = Some(c),
                                Err(e) => {
                                    job(Err(e));
                                    continue;
                                }
                            }
                        }
                        match conn.as_mut() {
                            Some(c) => job(Ok(c)),
                            None => job(Err(StoreError::Closed)),
                        }
                    }
                })
                .map_err(|e| StoreError::Open {
                    path: shown(url),
                    message: format!("cannot start a connection thread: {e}"),
                })?;
            threads.push(t);
        }
        Ok(Pool {
            tx: Mutex::new(Some(tx)),
            threads: Mutex::new(threads),
        })
    }

    /// Runs `f` on one of the connections and waits for its answer.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = mpsc::channel();
        let job: Job = Box::new(move |c| {
            let _ = reply.send(c.and_then(f));
        });
        match self.tx.lock().ok().and_then(|t| t.clone()) {
            Some(tx) => tx.send(job).map_err(|_| StoreError::Closed)?,
            None => return Err(StoreError::Closed),
        }
        answer.recv().map_err(|_| StoreError::Closed)?
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Ok(mut threads) = self.threads.lock() {
            for t in threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

/// The attempt this process holds of each run it executes: its writes for
/// a run commit only while the row still says this worker and attempt.
type Fences = Arc<Mutex<HashMap<String, i32>>>;

/// This process in the cluster.
struct Member {
    id: String,
    opts: PgOptions,
    fences: Fences,
    /// When the last heartbeat that pushed this process's leases on began,
    /// and the runs whose leases it pushed on: until that plus a lease,
    /// those are this process's for sure.
    renewed: Mutex<Option<(std::time::Instant, std::collections::HashSet<String>)>>,
}

/// Whether this process still holds one run (see [`crate::engine::Lease`]):
/// sure without asking while the last heartbeat is recent, else asked of
/// the database (a process that was paused past its lease finds out here,
/// before its next step).
struct PgLease {
    run_id: String,
    me: Arc<Member>,
    pool: Arc<Pool>,
}

impl crate::engine::Lease for PgLease {
    fn held(&self) -> bool {
        let Some(attempt) = self
            .me
            .fences
            .lock()
            .ok()
            .and_then(|f| f.get(&self.run_id).copied())
        else {
            // Not a run this process holds by a lease.
            return true;
        };
        let fresh = self.me.renewed.lock().ok().is_some_and(|r| {
            r.as_ref().is_some_and(|(at, held)| {
                at.elapsed() < self.me.opts.lease / 2 && held.contains(&self.run_id)
            })
        });
        if fresh {
            return true;
        }
        let (id, me) = (self.run_id.clone(), self.me.id.clone());
        let asked = self.pool.call(move |c| {
            c.query_opt(
                &format!(
                    "SELECT 1 FROM runs WHERE id = $1 AND worker = $2 AND attempt = $3
                     AND lease_until > {DB_NOW}"
                ),
                &[&id, &me, &attempt],
            )
            .map(|r| r.is_some())
            .map_err(pg_err)
        });
        // A database that cannot answer cannot say it is lost: the run's
        // writes stay fenced either way.
        asked.unwrap_or(true)
    }
}

pub struct PgStore {
    url: String,
    me: Arc<Member>,
    writes: Writes,
    pool: Arc<Pool>,
    /// Set when the store is dropped: the heartbeat and listener stop.
    stop: Arc<AtomicBool>,
    heartbeat: OnceLock<JoinHandle<()>>,
    listener: OnceLock<JoinHandle<()>>,
    /// Woken by `NOTIFY marktoflow_queue` (see [`PgStore::wait_for_work`]).
    work: Arc<tokio::sync::Notify>,
    /// Who waits for which run to end (`NOTIFY marktoflow_done, 'RUN_ID'`).
    done: Waiters,
}

type Waiters = Arc<Mutex<HashMap<String, Vec<tokio::sync::oneshot::Sender<()>>>>>;

impl PgStore {
    /// Connects to the store at `url` and brings its schema up to date
    /// (one process at a time, by an advisory lock).
    pub fn open(url: &str, opts: PgOptions) -> Result<PgStore, StoreError> {
        let pool = Arc::new(Pool::new(url, READERS)?);
        pool.call(schema::migrate)?;
        let me = Arc::new(Member {
            id: uuid::Uuid::new_v4().simple().to_string(),
            opts,
            fences: Arc::default(),
            renewed: Mutex::new(None),
        });
        let writes = Writes::start(write::Pg {
            url: url.to_string(),
            conn: None,
            me: me.clone(),
        })
        .map_err(|e| StoreError::Open {
            path: shown(url),
            message: format!("cannot start the writer thread: {e}"),
        })?;
        Ok(PgStore {
            url: url.to_string(),
            me,
            writes,
            pool,
            stop: Arc::default(),
            heartbeat: OnceLock::new(),
            listener: OnceLock::new(),
            work: Arc::default(),
            done: Arc::default(),
        })
    }

    /// This process's id in the cluster (`runs.worker` of its runs).
    pub fn member_id(&self) -> &str {
        &self.me.id
    }

    pub fn lease(&self) -> Duration {
        self.me.opts.lease
    }

    /// Copies finished runs (from another store) in with their steps;
    /// returns how many were copied and how many were there already.
    pub fn import_finished(
        &self,
        runs: Vec<(RunRecord, Vec<StepRow>)>,
    ) -> Result<(usize, usize), StoreError> {
        if runs.is_empty() {
            return Ok((0, 0));
        }
        self.read(move |c| write::import_finished(c, &runs))
    }

    fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.pool.call(move |c| f(c).map_err(pg_err))
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // The writer commits what is queued, then stops; then the heartbeat
        // says goodbye (its leases lapse at once for the reaper).
        self.writes.stop();
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.heartbeat.take() {
            let _ = h.join();
        }
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
    }
}

/// Whether an unfinished run's holder lives: waiting for a worker counts as
/// alive; a lease that ran out does not.
const ALIVE: &str = "CASE WHEN status IN ('queued', 'running')
    THEN (worker IS NULL OR lease_until >= (extract(epoch from clock_timestamp()) * 1000)::bigint) END";

/// A row of `RUN_COLUMNS, ALIVE`.
fn run_of(r: &Row) -> Result<RunRecord, postgres::Error> {
    let status: String = r.try_get(5)?;
    Ok(RunRecord {
        id: r.try_get(0)?,
        workflow: r.try_get(1)?,
        file: r.try_get(2)?,
        version: r.try_get(3)?,
        trigger: r.try_get(4)?,
        status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
        retry_of: r.try_get(6)?,
        inputs: parse_json(r.try_get(7)?),
        outputs: parse_json(r.try_get(8)?),
        error: r.try_get(9)?,
        error_step: r.try_get(10)?,
        pid: r.try_get::<_, Option<i32>>(11)?.map(|p| p.max(0) as u32),
        created_at: r.try_get(12)?,
        finished_at: r.try_get(13)?,
        duration_ms: r.try_get::<_, Option<i64>>(14)?.map(|d| d.max(0) as u64),
        owner: r.try_get(15)?,
        context: parse_json(r.try_get(16)?),
        deaths: r.try_get::<_, i32>(17)?.max(0) as u32,
        alive: r.try_get(18)?,
    })
}

fn step_of(r: &Row) -> Result<StepRow, postgres::Error> {
    let status: String = r.try_get(4)?;
    Ok(StepRow {
        step_id: r.try_get(0)?,
        name: r.try_get(1)?,
        depth: r.try_get::<_, i32>(2)?.max(0) as usize,
        top_index: r.try_get::<_, i32>(3)?.max(0) as usize,
        status: StepStatus::from_stored(&status),
        attempts: r.try_get::<_, i32>(5)?.max(0) as u32,
        started_at: r.try_get(6)?,
        duration_ms: r.try_get::<_, i64>(7)?.max(0) as u64,
        output: parse_json(r.try_get(8)?),
        error: r.try_get(9)?,
        reused: r.try_get(10)?,
        inputs: r
            .try_get::<_, Option<String>>(11)?
            .and_then(|t| serde_json::from_str(&t).ok()),
        usage: r
            .try_get::<_, Option<String>>(12)?
            .and_then(|t| serde_json::from_str(&t).ok()),
    })
}

/// [`RunFilter`]'s conditions, its fields as `$1`…`$6` (the text lower-cased).
const RUN_FILTER: &str = "($1::text IS NULL OR workflow = $1) AND ($2::text IS NULL OR status = $2)
     AND ($3::text IS NULL OR trigger = $3) AND ($4::bigint IS NULL OR created_at >= $4)
     AND ($5::bigint IS NULL OR created_at < $5)
     AND ($6::text IS NULL OR strpos(lower(inputs), $6) > 0
          OR strpos(lower(coalesce(outputs, '')), $6) > 0 OR strpos(lower(coalesce(error, '')), $6) > 0)";

/// [`RunFilter`]'s fields in the order of `RUN_FILTER`.
type FilterValues = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

fn filter_params(f: &RunFilter) -> FilterValues {
    (
        f.workflow.clone(),
        f.status.map(|s| s.as_str().to_string()),
        f.trigger.clone(),
        f.since,
        f.until,
        f.text.as_deref().map(str::to_lowercase),
    )
}

fn list<C: GenericClient>(
    c: &mut C,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<Vec<RunRecord>, postgres::Error> {
    c.query(sql, params)?.iter().map(run_of).collect()
}

impl RunStore for PgStore {
    fn answer_wait(&self, a: crate::store::AnswerIn) -> Result<crate::store::Answered, StoreError> {
        match self.writes.wait(WaitOp::Answer(Box::new(a), None))? {
            WaitDone::Answered(r) => Ok(r),
            _ => Err(StoreError::Db("unexpected answer to a wait change".into())),
        }
    }

    fn expire_waits(&self, now: i64) -> Result<Vec<String>, StoreError> {
        match self.writes.wait(WaitOp::Expire(now, None))? {
            WaitDone::Expired(r) => Ok(r),
            _ => Err(StoreError::Db("unexpected answer to a wait change".into())),
        }
    }

    fn cancel_waiting(&self, run_id: &str) -> Result<bool, StoreError> {
        match self
            .writes
            .wait(WaitOp::Cancel(run_id.to_string(), now_ms()))?
        {
            WaitDone::Cancelled(r) => Ok(r),
            _ => Err(StoreError::Db("unexpected answer to a wait change".into())),
        }
    }

    fn ask_pause(&self, run_id: &str, by: &str) -> Result<crate::store::PauseAsked, StoreError> {
        match self
            .writes
            .wait(WaitOp::Pause(run_id.to_string(), now_ms(), by.to_string()))?
        {
            WaitDone::Paused(r) => Ok(r),
            _ => Err(StoreError::Db("unexpected answer to a wait change".into())),
        }
    }

    fn asked_pauses(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.read(|c| {
            c.query("SELECT run_id, asked_at FROM pauses", &[])
                .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn waits(
        &self,
        f: &crate::store::WaitFilter,
    ) -> Result<Vec<crate::store::WaitRecord>, StoreError> {
        let (run_id, open, key) = (f.run_id.clone(), f.open, f.key.clone());
        let limit = f.limit.unwrap_or(500).min(10_000) as i64;
        let rows = self.read(move |c| {
            c.query(
                "SELECT run_id, workflow, request, state, votes, resolution, closed_at FROM waits
                 WHERE ($1::text IS NULL OR run_id = $1) AND (NOT $2 OR state = 'open')
                   AND ($3::text IS NULL OR key = $3)
                 ORDER BY created_at DESC LIMIT $4",
                &[&run_id, &open, &key, &limit],
            )
        })?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                crate::store::wait::record(
                    r.get(0),
                    r.get(1),
                    r.get::<_, String>(2).as_str(),
                    r.get::<_, String>(3).as_str(),
                    r.get::<_, String>(4).as_str(),
                    r.get::<_, Option<String>>(5).as_deref(),
                    r.get(6),
                )
            })
            .collect())
    }

    fn submit_run(
        &self,
        mut run: NewRun,
    ) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        if self.me.opts.executes {
            self.join_cluster();
            run.owner = Some(self.me.id.clone());
        } else {
            run.owner = None;
        }
        self.writes.create(run, now_ms(), true)
    }

    fn write(&self, w: Write) {
        self.writes.write(w);
    }

    fn owner_token(&self) -> Option<String> {
        Some(self.me.id.clone())
    }

    /// The reaper counts deaths here, when it puts a run back in the queue.
    fn record_deaths(&self, _run_id: &str, _deaths: u32) {}

    fn submit_flush(&self) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        self.writes.flush()
    }

    fn after_commit(&self, then: super::AfterCommit) {
        self.writes.then(then);
    }

    fn get_run(&self, id: &str) -> Result<RunRecord, StoreError> {
        if !is_run_key(id) {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let want = id.to_string();
        let rows = self.read(move |c| {
            list(
                c,
                &format!(
                    "SELECT {RUN_COLUMNS}, {ALIVE} FROM runs
                     WHERE id = $1 OR id LIKE $1 || '%' OR id LIKE '%' || $1
                     ORDER BY (id = $1) DESC LIMIT 2"
                ),
                &[&want],
            )
        })?;
        named_run(id, rows)
    }

    fn list_runs(&self, f: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        let (a, b, c3, d, e, t) = filter_params(f);
        let limit = f.limit.map(|n| n.min(i64::MAX as usize) as i64);
        let offset = f.offset.min(i64::MAX as usize) as i64;
        self.read(move |c| {
            list(
                c,
                &format!(
                    "SELECT {RUN_COLUMNS}, {ALIVE} FROM runs WHERE {RUN_FILTER}
                     ORDER BY created_at DESC, seq DESC LIMIT $7 OFFSET $8"
                ),
                &[&a, &b, &c3, &d, &e, &t, &limit, &offset],
            )
        })
    }

    fn count_runs(&self, f: &RunFilter) -> Result<usize, StoreError> {
        let (a, b, c3, d, e, t) = filter_params(f);
        self.read(move |c| {
            c.query_one(
                &format!("SELECT count(*) FROM runs WHERE {RUN_FILTER}"),
                &[&a, &b, &c3, &d, &e, &t],
            )
            .map(|r| r.get::<_, i64>(0).max(0) as usize)
        })
    }

    fn steps_of(&self, run_id: &str) -> Result<Vec<StepRow>, StoreError> {
        let id = run_id.to_string();
        self.read(move |c| {
            c.query(
                "SELECT step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused, inputs, usage
                 FROM steps WHERE run_id = $1 ORDER BY id",
                &[&id],
            )?
            .iter()
            .map(step_of)
            .collect()
        })
    }

    fn spent_since(
        &self,
        workflow: &str,
        since: i64,
        except: &str,
    ) -> Result<crate::engine::Spend, StoreError> {
        let (workflow, except) = (workflow.to_string(), except.to_string());
        let texts: Vec<String> = self.read(move |c| {
            c.query(
                "SELECT s.usage FROM steps s JOIN runs r ON r.id = s.run_id
                 WHERE r.workflow = $1 AND s.started_at >= $2 AND r.id <> $3
                   AND s.usage IS NOT NULL AND NOT s.reused",
                &[&workflow, &since, &except],
            )?
            .iter()
            .map(|r| r.try_get(0))
            .collect()
        })?;
        Ok(super::spend_of(&texts))
    }

    fn checkpoint(
        &self,
        run_id: &str,
        next_step: Option<usize>,
    ) -> Result<Option<Checkpoint>, StoreError> {
        let id = run_id.to_string();
        let upto = next_step.map(|n| n.min(i32::MAX as usize) as i32);
        let texts: Vec<(i64, String)> = self.read(move |c| {
            c.query(
                "SELECT next_step, state FROM checkpoints WHERE run_id = $1 AND ($2::int IS NULL OR next_step <= $2)
                 ORDER BY next_step DESC",
                &[&id, &upto],
            )
            .map(|rows| {
                rows.iter()
                    .map(|r| (i64::from(r.get::<_, i32>(0)), r.get(1)))
                    .collect()
            })
        })?;
        checkpoint::from_rows(run_id, next_step, &texts)
    }

    /// None: on a shared store, runs whose worker is gone go back to the
    /// queue when their lease runs out (the reaper), and workers claim them.
    fn incomplete_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }

    fn prune(&self, older_than: Duration) -> Result<usize, StoreError> {
        self.writes.prune(prune_cutoff(older_than))
    }

    fn recall_reply(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_string();
        self.read(move |c| {
            c.query_opt("SELECT text FROM replies WHERE key = $1", &[&key])
                .map(|r| r.map(|r| r.get(0)))
        })
    }

    fn run_for_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        let since = now_ms().saturating_sub(IDEMPOTENCY_RETENTION.as_millis() as i64);
        let key = key.to_string();
        self.read(move |c| {
            c.query_opt(
                "SELECT run_id FROM idempotency WHERE key = $1 AND created_at >= $2",
                &[&key, &since],
            )
            .map(|r| r.map(|r| r.get(0)))
        })
    }

    fn shared(&self) -> Option<&PgStore> {
        Some(self)
    }

    fn lease(&self, run_id: &str) -> Option<Arc<dyn crate::engine::Lease>> {
        Some(Arc::new(PgLease {
            run_id: run_id.to_string(),
            me: self.me.clone(),
            pool: self.pool.clone(),
        }))
    }
}
