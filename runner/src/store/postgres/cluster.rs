//! The cluster on a shared store: the heartbeat, the reaper, claiming
//! queued runs, waking workers, and the list of live processes.

use super::{
    connect, pg_err, run_of, Member, PgStore, ALIVE, DB_NOW, DONE_CHANNEL, QUEUE_CHANNEL,
    RUN_COLUMNS,
};
use crate::store::{RunRecord, StoreError};
use postgres::Client;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Advisory lock keys (any constant the application owns).
const REAPER_LOCK: i64 = 0x6d74_665f_7265_6170;
const CLAIM_LOCK: i64 = 0x6d74_665f_636c_6169;

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

impl PgStore {
    /// Starts the heartbeat (once): registers this process in `workers`,
    /// pushes its leases on, and runs the reaper when no other process does.
    pub fn join_cluster(&self) {
        self.heartbeat.get_or_init(|| {
            let pool = self.pool.clone();
            let me = self.me.clone();
            let stop = self.stop.clone();
            // Leases are pushed on and expired ones reaped at least twice a
            // second: a killed process's runs continue elsewhere within the
            // lease and half a second.
            let every = (self.me.opts.lease / 3)
                .min(Duration::from_millis(500))
                .max(Duration::from_millis(100));
            std::thread::Builder::new()
                .name("marktoflow-heartbeat".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let began = std::time::Instant::now();
                        let beat = {
                            let me = me.clone();
                            pool.call(move |c| beat(c, &me).map_err(pg_err))
                        };
                        match beat {
                            Ok(held) => {
                                if let Ok(mut r) = me.renewed.lock() {
                                    *r = Some((began, held.into_iter().collect()));
                                }
                            }
                            Err(e) => eprintln!("marktoflow: heartbeat failed: {e}"),
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
            // A claim lost in a crash of the database leaves the run
            // queued, and this worker's writes for it fenced: it need not
            // wait for the log's flush.
            tx.batch_execute("SET LOCAL synchronous_commit = off")
                .map_err(pg_err)?;
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

/// One heartbeat: this process is alive, and so are its leases.
fn beat(c: &mut Client, me: &Member) -> Result<Vec<String>, postgres::Error> {
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
    let held = tx
        .query(
            &format!(
                "UPDATE runs SET lease_until = {DB_NOW} + $2
                 WHERE worker = $1 AND status IN ('queued', 'running') RETURNING id"
            ),
            &[&me.id, &lease],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    // Processes gone for a day are forgotten.
    tx.execute(
        &format!("DELETE FROM workers WHERE heartbeat_at < {DB_NOW} - 86400000"),
        &[],
    )?;
    tx.commit()?;
    Ok(held)
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
            "UPDATE runs SET status = 'queued', worker = NULL, lease_until = NULL,
                deaths = deaths + (CASE WHEN status = 'running' THEN 1 ELSE 0 END)
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
