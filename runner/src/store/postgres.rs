//! [`RunStore`] on PostgreSQL, shared by many servers and workers: the run
//! history and the queue of runs to do. All SQL of this store is in this
//! file.
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

use super::checkpoint::{self, CheckpointRow};
use super::writer::{writer_loop, Commit, Done, Op};
use super::{
    now_ms, NewRun, RunFilter, RunRecord, RunStore, Status, StepRow, StoreError, Write,
    IDEMPOTENCY_RETENTION,
};
use crate::engine::{Checkpoint, StepStatus};
use postgres::{Client, GenericClient, NoTls, Row, Transaction};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// The schema, one migration per entry; `marktoflow_schema.version` holds
/// how many have been applied. Only ever append.
const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE runs (
    seq BIGSERIAL UNIQUE,
    id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    file TEXT NOT NULL,
    version TEXT NOT NULL,
    trigger TEXT NOT NULL,
    retry_of TEXT,
    status TEXT NOT NULL,
    inputs TEXT NOT NULL,
    context TEXT,
    outputs TEXT,
    error TEXT,
    error_step TEXT,
    pid INTEGER,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT,
    duration_ms BIGINT,
    worker TEXT,
    lease_until BIGINT,
    attempt INTEGER NOT NULL DEFAULT 0,
    concurrency_key TEXT,
    concurrency_limit INTEGER
);
CREATE INDEX runs_by_bucket ON runs (concurrency_key) WHERE status IN ('queued', 'running');
CREATE INDEX runs_by_created ON runs (created_at, seq);
CREATE INDEX runs_by_workflow ON runs (workflow, created_at);
CREATE INDEX runs_waiting ON runs (created_at, seq) WHERE status = 'queued' AND worker IS NULL;
CREATE INDEX runs_leased ON runs (worker, lease_until) WHERE status IN ('queued', 'running');
CREATE TABLE steps (
    id BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    name TEXT NOT NULL,
    depth INTEGER NOT NULL,
    top_index INTEGER NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    started_at BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    output TEXT NOT NULL,
    error TEXT,
    reused BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX steps_by_run ON steps (run_id, id);
CREATE TABLE checkpoints (
    run_id TEXT NOT NULL,
    next_step INTEGER NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (run_id, next_step)
);
CREATE TABLE idempotency (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    role TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    draining BOOLEAN NOT NULL DEFAULT FALSE
);
"#];

/// The database's clock in milliseconds since the Unix epoch.
const DB_NOW: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// Advisory lock keys (any constant the application owns).
const MIGRATE_LOCK: i64 = 0x6d74_665f_6d69_6772;
const REAPER_LOCK: i64 = 0x6d74_665f_7265_6170;
const CLAIM_LOCK: i64 = 0x6d74_665f_636c_6169;

/// The channel that wakes workers when runs are queued.
const QUEUE_CHANNEL: &str = "marktoflow_queue";
/// The channel told each run id whose end is committed.
const DONE_CHANNEL: &str = "marktoflow_done";

/// Reader connections per process.
const READERS: usize = 4;

const RUN_COLUMNS: &str = "id, workflow, file, version, trigger, status, retry_of, inputs, outputs, error, error_step, pid, created_at, finished_at, duration_ms, worker, context";

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

/// A live process of the cluster, as `marktoflow workers` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerInfo {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub role: String,
    /// Milliseconds since the Unix epoch.
    pub started_at: i64,
    pub heartbeat_at: i64,
    /// Runs it holds (queued for it or running).
    pub leases: i64,
    pub draining: bool,
}

/// The queue's figures for `/metrics`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct QueueStats {
    /// Runs waiting for a worker.
    pub waiting: i64,
    /// Runs by stored status.
    pub by_status: Vec<(String, i64)>,
    /// Live workers.
    pub workers: i64,
}

fn pg_err(e: postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => StoreError::Db(format!("{} ({})", db.message(), db.code().code())),
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
}

pub struct PgStore {
    url: String,
    me: Arc<Member>,
    tx: Mutex<Option<mpsc::Sender<Op>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
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
        pool.call(migrate)?;
        let me = Arc::new(Member {
            id: uuid::Uuid::new_v4().simple().to_string(),
            opts,
            fences: Arc::default(),
        });
        let (tx, rx) = mpsc::channel();
        let backend = Pg {
            url: url.to_string(),
            conn: None,
            me: me.clone(),
        };
        let writer = std::thread::Builder::new()
            .name("marktoflow-store".into())
            .spawn(move || writer_loop(backend, rx))
            .map_err(|e| StoreError::Open {
                path: shown(url),
                message: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(PgStore {
            url: url.to_string(),
            me,
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
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

    fn send(&self, op: Op) {
        if let Ok(tx) = self.tx.lock() {
            if let Some(tx) = tx.as_ref() {
                let _ = tx.send(op);
            }
        }
    }

    /// Starts the heartbeat (once): registers this process in `workers`,
    /// pushes its leases on, and runs the reaper when no other process does.
    pub fn join_cluster(&self) {
        self.heartbeat.get_or_init(|| {
            let pool = self.pool.clone();
            let me = self.me.clone();
            let stop = self.stop.clone();
            let every = (self.me.opts.lease / 3).max(Duration::from_millis(100));
            std::thread::Builder::new()
                .name("marktoflow-heartbeat".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let beat = {
                            let me = me.clone();
                            pool.call(move |c| beat(c, &me).map_err(pg_err))
                        };
                        if let Err(e) = beat {
                            eprintln!("marktoflow: heartbeat failed: {e}");
                        }
                        // The reaper is cheap when nothing expired.
                        let _ = pool.call(|c| reap(c).map_err(pg_err));
                        sleep_unless(&stop, every);
                    }
                    let id = me.id.clone();
                    let _ = pool.call(move |c| {
                        c.execute("DELETE FROM workers WHERE id = $1", &[&id])
                            .map_err(pg_err)
                    });
                })
                .expect("a thread can be started")
        });
    }

    /// Says in `workers` that this process takes no new runs.
    pub fn set_draining(&self) -> Result<(), StoreError> {
        let id = self.me.id.clone();
        self.pool.call(move |c| {
            c.execute("UPDATE workers SET draining = TRUE WHERE id = $1", &[&id])
                .map(|_| ())
                .map_err(pg_err)
        })
    }

    /// Gives this process's unfinished runs back to the queue at once (a
    /// worker stopping before they end): other workers continue them from
    /// their last checkpoint, and this process can commit nothing more for
    /// them.
    pub fn release_held(&self) -> Result<usize, StoreError> {
        let me = self.me.clone();
        let n = self.pool.call(move |c| {
            let mut tx = c.transaction().map_err(pg_err)?;
            let n = tx
                .execute(
                    "UPDATE runs SET status = 'queued', worker = NULL, lease_until = NULL
                     WHERE worker = $1 AND status IN ('queued', 'running')",
                    &[&me.id],
                )
                .map_err(pg_err)?;
            if n > 0 {
                tx.batch_execute(&format!("NOTIFY {QUEUE_CHANNEL}"))
                    .map_err(pg_err)?;
            }
            tx.commit().map_err(pg_err)?;
            Ok(n as usize)
        })?;
        // The fences stay: what the runs still write here is refused.
        Ok(n)
    }

    /// Takes up to `max` queued runs of the workflows whose versions are
    /// `versions` (oldest first), leased to this process. Steps a previous
    /// holder journaled after its last checkpoint are dropped in the same
    /// transaction: they run again, and are journaled once.
    pub fn claim(&self, versions: &[String], max: usize) -> Result<Vec<RunRecord>, StoreError> {
        if versions.is_empty() || max == 0 {
            return Ok(Vec::new());
        }
        self.join_cluster();
        let versions = versions.to_vec();
        let me = self.me.clone();
        let claimed = self.pool.call(move |c| {
            let mut tx = c.transaction().map_err(pg_err)?;
            let lease = me.opts.lease.as_millis() as i64;
            // One claim at a time over the cluster: a `concurrency:` limit
            // counts the runs held, which must not change under the count.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CLAIM_LOCK])
                .map_err(pg_err)?;
            let rows = tx
                .query(
                    &format!(
                        "WITH waiting AS (
                            SELECT id, created_at, seq, concurrency_key, concurrency_limit,
                                row_number() OVER (PARTITION BY concurrency_key ORDER BY created_at, seq) AS place
                            FROM (SELECT * FROM runs
                                  WHERE status = 'queued' AND worker IS NULL AND version = ANY($1)
                                  ORDER BY created_at, seq LIMIT 5000) oldest),
                         held AS (
                            SELECT concurrency_key, count(*) AS n FROM runs
                            WHERE worker IS NOT NULL AND status IN ('queued', 'running')
                              AND concurrency_key IS NOT NULL
                            GROUP BY concurrency_key),
                         picked AS (
                            SELECT w.id FROM waiting w LEFT JOIN held h USING (concurrency_key)
                            WHERE w.concurrency_key IS NULL
                               OR COALESCE(h.n, 0) + w.place <= w.concurrency_limit
                            ORDER BY w.created_at, w.seq LIMIT $2)
                         UPDATE runs r SET worker = $3, pid = $4, lease_until = {DB_NOW} + $5,
                            attempt = r.attempt + 1
                         FROM picked WHERE r.id = picked.id
                         RETURNING r.id, r.attempt"
                    ),
                    &[
                        &versions,
                        &(max.min(10_000) as i64),
                        &me.id,
                        &(std::process::id() as i32),
                        &lease,
                    ],
                )
                .map_err(pg_err)?;
            let held: Vec<(String, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            let ids: Vec<String> = held.iter().map(|(id, _)| id.clone()).collect();
            if ids.is_empty() {
                tx.commit().map_err(pg_err)?;
                return Ok((Vec::new(), held));
            }
            tx.execute(
                "DELETE FROM steps s WHERE s.run_id = ANY($1) AND NOT s.reused
                 AND s.top_index > COALESCE(
                    (SELECT max(c.next_step) FROM checkpoints c WHERE c.run_id = s.run_id), 0)",
                &[&ids],
            )
            .map_err(pg_err)?;
            let runs = tx
                .query(
                    &format!(
                        "SELECT {RUN_COLUMNS}, {ALIVE} FROM runs WHERE id = ANY($1) ORDER BY created_at, seq"
                    ),
                    &[&ids],
                )
                .map_err(pg_err)?
                .iter()
                .map(run_of)
                .collect::<Result<Vec<_>, _>>()
                .map_err(pg_err)?;
            // Held before the commit makes them ours: no write of ours can
            // be checked against a missing fence.
            if let Ok(mut f) = me.fences.lock() {
                f.extend(held.iter().cloned());
            }
            match tx.commit() {
                Ok(()) => Ok((runs, held)),
                Err(e) => {
                    if let Ok(mut f) = me.fences.lock() {
                        for (id, _) in &held {
                            f.remove(id);
                        }
                    }
                    Err(pg_err(e))
                }
            }
        })?;
        Ok(claimed.0)
    }

    /// Waits until runs may have been queued (a notification) or `timeout`
    /// passed: polling remains the fallback when a notification is lost.
    pub async fn wait_for_work(&self, timeout: Duration) {
        self.listen();
        let _ = tokio::time::timeout(timeout, self.work.notified()).await;
    }

    /// Told (or dropped, which tells as much) when run `run_id` may have
    /// ended: its end's commit notifies, and a reconnect of the listener
    /// tells every waiter to look again.
    pub fn ended(&self, run_id: &str) -> tokio::sync::oneshot::Receiver<()> {
        self.listen();
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Ok(mut w) = self.done.lock() {
            // Waiters that stopped waiting (their run ended, or the
            // request gave up) are forgotten here.
            w.retain(|_, senders| {
                senders.retain(|s| !s.is_closed());
                !senders.is_empty()
            });
            w.entry(run_id.to_string()).or_default().push(tx);
        }
        rx
    }

    fn listen(&self) {
        self.listener.get_or_init(|| {
            let url = self.url.clone();
            let stop = self.stop.clone();
            let work = self.work.clone();
            let done = self.done.clone();
            std::thread::Builder::new()
                .name("marktoflow-listen".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let mut c = match connect(&url) {
                            Ok(c) => c,
                            Err(_) => {
                                sleep_unless(&stop, Duration::from_secs(1));
                                continue;
                            }
                        };
                        let listen = format!("LISTEN {QUEUE_CHANNEL}; LISTEN {DONE_CHANNEL}");
                        if c.batch_execute(&listen).is_err() {
                            continue;
                        }
                        // Nothing is known about what happened while not
                        // listening: look once, and let waiters look.
                        work.notify_one();
                        if let Ok(mut w) = done.lock() {
                            for (_, senders) in w.drain() {
                                senders.into_iter().for_each(|s| {
                                    let _ = s.send(());
                                });
                            }
                        }
                        while !stop.load(Ordering::SeqCst) && !c.is_closed() {
                            let mut n = c.notifications();
                            let mut it = n.timeout_iter(Duration::from_millis(500));
                            match postgres::fallible_iterator::FallibleIterator::next(&mut it) {
                                Ok(Some(note)) if note.channel() == DONE_CHANNEL => {
                                    let waiting =
                                        done.lock().ok().and_then(|mut w| w.remove(note.payload()));
                                    for s in waiting.into_iter().flatten() {
                                        let _ = s.send(());
                                    }
                                }
                                Ok(Some(_)) => work.notify_one(),
                                Ok(None) => {}
                                Err(_) => break,
                            }
                        }
                    }
                })
                .expect("a thread can be started")
        });
    }

    /// The live processes of the cluster (a heartbeat within three leases).
    pub fn workers(&self) -> Result<Vec<WorkerInfo>, StoreError> {
        let lease = self.me.opts.lease.as_millis() as i64;
        self.pool.call(move |c| {
            c.query(
                &format!(
                    "SELECT w.id, w.host, w.pid, w.role, w.started_at, w.heartbeat_at, w.draining,
                        (SELECT count(*) FROM runs r WHERE r.worker = w.id AND r.status IN ('queued', 'running'))
                     FROM workers w WHERE w.heartbeat_at >= {DB_NOW} - 3 * $1::bigint
                     ORDER BY w.started_at, w.id"
                ),
                &[&lease],
            )
            .map_err(pg_err)
            .map(|rows| {
                rows.iter()
                    .map(|r| WorkerInfo {
                        id: r.get(0),
                        host: r.get(1),
                        pid: r.get::<_, i32>(2).max(0) as u32,
                        role: r.get(3),
                        started_at: r.get(4),
                        heartbeat_at: r.get(5),
                        draining: r.get(6),
                        leases: r.get(7),
                    })
                    .collect()
            })
        })
    }

    /// What `/metrics` shows of the queue.
    pub fn queue_stats(&self) -> Result<QueueStats, StoreError> {
        let lease = self.me.opts.lease.as_millis() as i64;
        self.pool.call(move |c| {
            let waiting: i64 = c
                .query_one(
                    "SELECT count(*) FROM runs WHERE status = 'queued' AND worker IS NULL",
                    &[],
                )
                .map_err(pg_err)?
                .get(0);
            let by_status = c
                .query("SELECT status, count(*) FROM runs GROUP BY status ORDER BY status", &[])
                .map_err(pg_err)?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let workers: i64 = c
                .query_one(
                    &format!(
                        "SELECT count(*) FROM workers WHERE heartbeat_at >= {DB_NOW} - 3 * $1::bigint"
                    ),
                    &[&lease],
                )
                .map_err(pg_err)?
                .get(0);
            Ok(QueueStats {
                waiting,
                by_status,
                workers,
            })
        })
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
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Ok(mut w) = self.writer.lock() {
            if let Some(h) = w.take() {
                let _ = h.join();
            }
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.heartbeat.take() {
            let _ = h.join();
        }
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
    }
}

fn sleep_unless(stop: &AtomicBool, total: Duration) {
    let step = Duration::from_millis(50);
    let mut left = total;
    while !left.is_zero() && !stop.load(Ordering::SeqCst) {
        let d = left.min(step);
        std::thread::sleep(d);
        left -= d;
    }
}

fn migrate(c: &mut Client) -> Result<(), StoreError> {
    let mut tx = c.transaction().map_err(pg_err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])
        .map_err(pg_err)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS marktoflow_schema (version INTEGER NOT NULL)")
        .map_err(pg_err)?;
    let found: Option<i32> = tx
        .query_opt("SELECT version FROM marktoflow_schema", &[])
        .map_err(pg_err)?
        .map(|r| r.get(0));
    let known = MIGRATIONS.len() as i32;
    let at = found.unwrap_or(0);
    if at > known {
        return Err(StoreError::TooNew {
            path: "postgres".into(),
            found: at.into(),
            known: known.into(),
        });
    }
    for m in &MIGRATIONS[at.max(0) as usize..] {
        tx.batch_execute(m).map_err(pg_err)?;
    }
    if found.is_none() {
        tx.execute(
            "INSERT INTO marktoflow_schema (version) VALUES ($1)",
            &[&known],
        )
    } else {
        tx.execute("UPDATE marktoflow_schema SET version = $1", &[&known])
    }
    .map_err(pg_err)?;
    tx.commit().map_err(pg_err)
}

/// One heartbeat: this process is alive, and so are its leases.
fn beat(c: &mut Client, me: &Member) -> Result<(), postgres::Error> {
    let host = crate::store::hostname();
    let lease = me.opts.lease.as_millis() as i64;
    let mut tx = c.transaction()?;
    tx.execute(
        &format!(
            "INSERT INTO workers (id, host, pid, role, started_at, heartbeat_at)
             VALUES ($1, $2, $3, $4, {DB_NOW}, {DB_NOW})
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = {DB_NOW}"
        ),
        &[&me.id, &host, &(std::process::id() as i32), &me.opts.role],
    )?;
    tx.execute(
        &format!(
            "UPDATE runs SET lease_until = {DB_NOW} + $2
             WHERE worker = $1 AND status IN ('queued', 'running')"
        ),
        &[&me.id, &lease],
    )?;
    // Processes gone for a day are forgotten.
    tx.execute(
        &format!("DELETE FROM workers WHERE heartbeat_at < {DB_NOW} - 86400000"),
        &[],
    )?;
    tx.commit()
}

/// Puts back in the queue the runs whose lease ran out (their worker is
/// gone): one process at a time does it; the others skip.
fn reap(c: &mut Client) -> Result<usize, postgres::Error> {
    let mut tx = c.transaction()?;
    let mine: bool = tx
        .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&REAPER_LOCK])?
        .get(0);
    if !mine {
        tx.commit()?;
        return Ok(0);
    }
    let n = tx.execute(
        &format!(
            "UPDATE runs SET status = 'queued', worker = NULL, lease_until = NULL
             WHERE status IN ('queued', 'running') AND worker IS NOT NULL
               AND lease_until < {DB_NOW} AND trigger <> 'cli'"
        ),
        &[],
    )?;
    if n > 0 {
        tx.batch_execute(&format!("NOTIFY {QUEUE_CHANNEL}"))?;
    }
    tx.commit()?;
    Ok(n as usize)
}

/// Whether an unfinished run's holder lives: waiting for a worker counts as
/// alive; a lease that ran out does not.
const ALIVE: &str = "CASE WHEN status IN ('queued', 'running')
    THEN (worker IS NULL OR lease_until >= (extract(epoch from clock_timestamp()) * 1000)::bigint) END";

fn parse_json(text: Option<String>) -> Value {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

fn json_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A row of `RUN_COLUMNS, ALIVE`.
fn run_of(r: &Row) -> Result<RunRecord, postgres::Error> {
    let status: String = r.try_get(5)?;
    Ok(RunRecord {
        id: r.try_get(0)?,
        workflow: r.try_get(1)?,
        file: r.try_get(2)?,
        version: r.try_get(3)?,
        trigger: r.try_get(4)?,
        status: Status::parse(&status).unwrap_or(Status::Failed),
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
        alive: r.try_get(17)?,
    })
}

fn step_of(r: &Row) -> Result<StepRow, postgres::Error> {
    let status: String = r.try_get(4)?;
    Ok(StepRow {
        step_id: r.try_get(0)?,
        name: r.try_get(1)?,
        depth: r.try_get::<_, i32>(2)?.max(0) as usize,
        top_index: r.try_get::<_, i32>(3)?.max(0) as usize,
        status: match status.as_str() {
            "completed" => StepStatus::Completed,
            "skipped" => StepStatus::Skipped,
            _ => StepStatus::Failed,
        },
        attempts: r.try_get::<_, i32>(5)?.max(0) as u32,
        started_at: r.try_get(6)?,
        duration_ms: r.try_get::<_, i64>(7)?.max(0) as u64,
        output: parse_json(r.try_get(8)?),
        error: r.try_get(9)?,
        reused: r.try_get(10)?,
    })
}

fn step_status_str(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Completed => "completed",
        StepStatus::Failed => "failed",
        StepStatus::Skipped => "skipped",
    }
}

/// The PostgreSQL side of the writer.
struct Pg {
    url: String,
    conn: Option<Client>,
    me: Arc<Member>,
}

/// Why a batch's op was not applied (the rest of the batch was).
enum Refusal {
    /// The run is another worker's now (or gone).
    Fenced(String),
    /// The `Idempotency-Key` started another run within the retention.
    Duplicate(String),
}

impl Commit for Pg {
    fn commit(&mut self, batch: &[Op]) -> (Vec<Done>, Option<StoreError>) {
        // A dropped connection is reopened and the batch tried again whole
        // (a failed transaction left nothing behind).
        let mut last = None;
        for attempt in 0..3 {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200 * attempt));
            }
            if self.conn.as_ref().is_none_or(Client::is_closed) {
                match connect(&self.url) {
                    Ok(c) => self.conn = Some(c),
                    Err(e) => {
                        last = Some(e);
                        continue;
                    }
                }
            }
            let Some(conn) = self.conn.as_mut() else {
                continue;
            };
            match commit_batch(conn, &self.me, batch) {
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

fn commit_batch(
    conn: &mut Client,
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
        for r in tx.query(
            "SELECT id, worker, attempt FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            &[&touched],
        )? {
            holders.insert(r.get(0), (r.get(1), r.get(2)));
        }
    }
    let fences = me.fences.lock().map(|f| f.clone()).unwrap_or_default();
    let ending: HashSet<&str> = batch
        .iter()
        .filter_map(|op| match op {
            Op::Write(w) => match &**w {
                Write::Finish { run_id, .. } => Some(run_id.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let mut created: HashMap<String, i32> = HashMap::new();
    let mut finished: Vec<String> = Vec::new();
    let mut notify = false;
    let mut done = Vec::with_capacity(batch.len());
    for op in batch {
        let d = match op {
            Op::Create(run, at, _) => match insert_run(&mut tx, me, run, *at)? {
                Ok(attempt) => {
                    if let Some(a) = attempt {
                        created.insert(run.id.clone(), a);
                    } else {
                        notify = true;
                    }
                    Done::Unit(Ok(()))
                }
                Err(r) => Done::Unit(Err(refused(r))),
            },
            Op::Prune(cutoff, _) => Done::Count(prune(&mut tx, *cutoff).map_err(pg_err)),
            // Journals are the SQLite store's; nothing queues them here.
            Op::Absorb(..) | Op::Flush(_) => Done::Unit(Ok(())),
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
                } else if matches!(&**w, Write::Checkpoint { run_id, last: true, .. } if ending.contains(run_id.as_str()))
                {
                    Done::Unit(Ok(()))
                } else {
                    if let Write::Finish { run_id, .. } = &**w {
                        finished.push(run_id.clone());
                    }
                    apply(&mut tx, me, w)?;
                    Done::Unit(Ok(()))
                }
            }
        };
        done.push(d);
    }
    if notify {
        tx.batch_execute(&format!("NOTIFY {QUEUE_CHANNEL}"))?;
    }
    // A server waiting to answer for a run hears of its end at once.
    for id in &finished {
        tx.execute("SELECT pg_notify($1, $2)", &[&DONE_CHANNEL, id])?;
    }
    // Fences first, so a write queued right after the commit finds its own.
    if let Ok(mut f) = me.fences.lock() {
        f.extend(created.iter().map(|(k, v)| (k.clone(), *v)));
    }
    match tx.commit() {
        Ok(()) => {
            if let Ok(mut f) = me.fences.lock() {
                for id in &finished {
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

fn refused(r: Refusal) -> StoreError {
    match r {
        Refusal::Fenced(id) => StoreError::LeaseLost(id),
        Refusal::Duplicate(id) => StoreError::DuplicateKey(id),
    }
}

/// Inserts a run: leased to this process when it executes it (the attempt
/// it holds), else queued for the workers. An `Idempotency-Key` another
/// run holds within the retention refuses it.
fn insert_run(
    tx: &mut Transaction,
    me: &Member,
    run: &NewRun,
    now: i64,
) -> Result<Result<Option<i32>, Refusal>, postgres::Error> {
    if let Some(key) = &run.idempotency_key {
        // Unique across the cluster: the first run to take a key keeps it
        // for the retention; a later one is refused, not recorded.
        let cutoff = now - IDEMPOTENCY_RETENTION.as_millis() as i64;
        let taken = tx.query_opt(
            "INSERT INTO idempotency AS i (key, run_id, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (key) DO UPDATE SET run_id = EXCLUDED.run_id, created_at = EXCLUDED.created_at
             WHERE i.created_at < $4
             RETURNING run_id",
            &[key, &run.id, &now, &cutoff],
        )?;
        if taken.is_none() {
            let holder: String = tx
                .query_one("SELECT run_id FROM idempotency WHERE key = $1", &[key])?
                .get(0);
            return Ok(Err(Refusal::Duplicate(holder)));
        }
    }
    // A run with a `concurrency:` limit is claimed like any queued run, so
    // the claim counts it; the others run where they were accepted.
    // (A retry runs where it was asked for.)
    let queued = run.concurrency.is_some() && run.retry_of.is_none();
    let executes = me.opts.executes && run.owner.is_some() && !queued;
    let started = (run.status == Status::Running).then_some(now);
    let lease = me.opts.lease.as_millis() as i64;
    let attempt: i32 = if executes { 1 } else { 0 };
    tx.execute(
        &format!(
            "INSERT INTO runs (id, workflow, file, version, trigger, retry_of, status, inputs, context, pid,
                created_at, started_at, worker, lease_until, attempt, concurrency_key, concurrency_limit)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
                CASE WHEN $13::text IS NULL THEN NULL ELSE {DB_NOW} + $14 END, $15, $16, $17)"
        ),
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
            &run.pid.map(|p| p as i32),
            &now,
            &started,
            &executes.then(|| me.id.clone()),
            &lease,
            &attempt,
            &run.concurrency.as_ref().map(|(k, _)| k.clone()),
            &run.concurrency.as_ref().map(|(_, n)| (*n).min(i32::MAX as u32) as i32),
        ],
    )?;
    if let Some((from, reused)) = &run.retry_of {
        tx.execute(
            "INSERT INTO steps (run_id, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused)
             SELECT $1, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, TRUE
             FROM steps WHERE run_id = $2 AND top_index BETWEEN 1 AND $3 ORDER BY id",
            &[&run.id, from, &(*reused as i32)],
        )?;
    }
    Ok(Ok(executes.then_some(attempt)))
}

fn apply(tx: &mut Transaction, me: &Member, w: &Write) -> Result<(), postgres::Error> {
    match w {
        // Creates come as `Op::Create`; a journal's are not moved here.
        Write::Create { .. } => {}
        Write::Running {
            run_id, at, pid, ..
        } => {
            let lease = me.opts.lease.as_millis() as i64;
            tx.execute(
                &format!(
                    "UPDATE runs SET status = 'running', started_at = COALESCE(started_at, $2), pid = $3,
                        worker = $4, lease_until = {DB_NOW} + $5
                     WHERE id = $1 AND status IN ('queued', 'running')"
                ),
                &[run_id, at, &(*pid as i32), &me.id, &lease],
            )?;
        }
        Write::Step { run_id, row: s } => {
            tx.execute(
                "INSERT INTO steps (run_id, step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                &[
                    run_id,
                    &s.step_id,
                    &s.name,
                    &(s.depth.min(i32::MAX as usize) as i32),
                    &(s.top_index.min(i32::MAX as usize) as i32),
                    &step_status_str(s.status),
                    &(s.attempts.min(i32::MAX as u32) as i32),
                    &s.started_at,
                    &(s.duration_ms.min(i64::MAX as u64) as i64),
                    &json_text(&s.output),
                    &s.error,
                    &s.reused,
                ],
            )?;
        }
        Write::Checkpoint {
            run_id, checkpoint, ..
        } => {
            let state = serde_json::to_string(checkpoint).unwrap_or_default();
            tx.execute(
                "INSERT INTO checkpoints (run_id, next_step, state) VALUES ($1, $2, $3)
                 ON CONFLICT (run_id, next_step) DO UPDATE SET state = EXCLUDED.state",
                &[
                    run_id,
                    &(checkpoint.next_step().min(i32::MAX as usize) as i32),
                    &state,
                ],
            )?;
        }
        Write::Finish { run_id, end, at } => {
            tx.execute(
                "UPDATE runs SET status = $2, outputs = $3, error = $4, error_step = $5, finished_at = $6,
                    duration_ms = $7, lease_until = NULL
                 WHERE id = $1",
                &[
                    run_id,
                    &end.status.as_str(),
                    &json_text(&end.outputs),
                    &end.error,
                    &end.error_step,
                    at,
                    &(end.duration_ms.min(i64::MAX as u64) as i64),
                ],
            )?;
        }
    }
    Ok(())
}

fn prune(tx: &mut Transaction, cutoff: i64) -> Result<usize, postgres::Error> {
    const OLD: &str = "SELECT id FROM runs WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at < $1";
    tx.execute(
        &format!("DELETE FROM steps WHERE run_id IN ({OLD})"),
        &[&cutoff],
    )?;
    tx.execute(
        &format!("DELETE FROM checkpoints WHERE run_id IN ({OLD})"),
        &[&cutoff],
    )?;
    let keys_cutoff = now_ms().saturating_sub(IDEMPOTENCY_RETENTION.as_millis() as i64);
    tx.execute(
        "DELETE FROM idempotency WHERE created_at < $1",
        &[&keys_cutoff],
    )?;
    tx.execute(
        "DELETE FROM runs WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at < $1",
        &[&cutoff],
    )
    .map(|n| n as usize)
}

/// [`RunFilter`]'s conditions, its fields as `$1`…`$5`.
const RUN_FILTER: &str = "($1::text IS NULL OR workflow = $1) AND ($2::text IS NULL OR status = $2)
     AND ($3::text IS NULL OR trigger = $3) AND ($4::bigint IS NULL OR created_at >= $4)
     AND ($5::bigint IS NULL OR created_at < $5)";

/// [`RunFilter`]'s fields in the order of `RUN_FILTER`.
type FilterValues = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

fn filter_params(f: &RunFilter) -> FilterValues {
    (
        f.workflow.clone(),
        f.status.map(|s| s.as_str().to_string()),
        f.trigger.clone(),
        f.since,
        f.until,
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
    fn submit_run(
        &self,
        mut run: NewRun,
    ) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        if self.me.opts.executes {
            self.join_cluster();
            run.owner = Some(self.me.id.clone());
        } else {
            run.owner = None;
        }
        self.send(Op::Create(Box::new(run), now_ms(), reply));
        rx
    }

    fn mark_running(&self, run_id: &str) {
        self.send(Op::Write(Box::new(Write::Running {
            run_id: run_id.to_string(),
            at: now_ms(),
            pid: std::process::id(),
            owner: Some(self.me.id.clone()),
        })));
    }

    fn record_step(&self, run_id: &str, row: StepRow) {
        self.send(Op::Write(Box::new(Write::Step {
            run_id: run_id.to_string(),
            row,
        })));
    }

    fn save_checkpoint(&self, run_id: &str, row: CheckpointRow, last: bool) {
        self.send(Op::Write(Box::new(Write::Checkpoint {
            run_id: run_id.to_string(),
            checkpoint: row,
            last,
        })));
    }

    fn finish_run(&self, run_id: &str, end: super::RunEnd) {
        self.send(Op::Write(Box::new(Write::Finish {
            run_id: run_id.to_string(),
            end,
            at: now_ms(),
        })));
    }

    fn submit_flush(&self) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.send(Op::Flush(reply));
        rx
    }

    fn get_run(&self, id: &str) -> Result<RunRecord, StoreError> {
        if id.is_empty() || id.contains(['%', '_', '\\']) {
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
        match rows.as_slice() {
            [] => Err(StoreError::NotFound(id.to_string())),
            [one, ..] if one.id == id => Ok(one.clone()),
            [one] => Ok(one.clone()),
            _ => Err(StoreError::Ambiguous(id.to_string())),
        }
    }

    fn list_runs(&self, f: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        let (a, b, c3, d, e) = filter_params(f);
        let limit = f.limit.map(|n| n.min(i64::MAX as usize) as i64);
        let offset = f.offset.min(i64::MAX as usize) as i64;
        self.read(move |c| {
            list(
                c,
                &format!(
                    "SELECT {RUN_COLUMNS}, {ALIVE} FROM runs WHERE {RUN_FILTER}
                     ORDER BY created_at DESC, seq DESC LIMIT $6 OFFSET $7"
                ),
                &[&a, &b, &c3, &d, &e, &limit, &offset],
            )
        })
    }

    fn count_runs(&self, f: &RunFilter) -> Result<usize, StoreError> {
        let (a, b, c3, d, e) = filter_params(f);
        self.read(move |c| {
            c.query_one(
                &format!("SELECT count(*) FROM runs WHERE {RUN_FILTER}"),
                &[&a, &b, &c3, &d, &e],
            )
            .map(|r| r.get::<_, i64>(0).max(0) as usize)
        })
    }

    fn steps_of(&self, run_id: &str) -> Result<Vec<StepRow>, StoreError> {
        let id = run_id.to_string();
        self.read(move |c| {
            c.query(
                "SELECT step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused
                 FROM steps WHERE run_id = $1 ORDER BY id",
                &[&id],
            )?
            .iter()
            .map(step_of)
            .collect()
        })
    }

    fn checkpoint(
        &self,
        run_id: &str,
        next_step: Option<usize>,
    ) -> Result<Option<Checkpoint>, StoreError> {
        let id = run_id.to_string();
        let upto = next_step.map(|n| n.min(i32::MAX as usize) as i32);
        let texts: Vec<(i32, String)> = self.read(move |c| {
            c.query(
                "SELECT next_step, state FROM checkpoints WHERE run_id = $1 AND ($2::int IS NULL OR next_step <= $2)
                 ORDER BY next_step DESC",
                &[&id, &upto],
            )
            .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })?;
        let unreadable = |why: String| {
            StoreError::Db(format!("checkpoint of run `{run_id}` is unreadable: {why}"))
        };
        match (texts.first(), next_step) {
            (None, _) => return Ok(None),
            (Some((n, _)), Some(want)) if *n as i64 != want as i64 => return Ok(None),
            _ => {}
        }
        let mut rows = Vec::new();
        for (_, text) in &texts {
            let row: CheckpointRow =
                serde_json::from_str(text).map_err(|e| unreadable(e.to_string()))?;
            let whole = matches!(row, CheckpointRow::Whole(_));
            rows.push(row);
            if whole {
                break;
            }
        }
        checkpoint::fold(rows)
            .map(Some)
            .ok_or_else(|| unreadable("its earlier rows are missing".into()))
    }

    /// None: on a shared store, runs whose worker is gone go back to the
    /// queue when their lease runs out (the reaper), and workers claim them.
    fn incomplete_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }

    fn prune(&self, older_than: Duration) -> Result<usize, StoreError> {
        let cutoff = now_ms().saturating_sub(older_than.as_millis().min(i64::MAX as u128) as i64);
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.send(Op::Prune(cutoff, reply));
        rx.blocking_recv().map_err(|_| StoreError::Closed)?
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
}
