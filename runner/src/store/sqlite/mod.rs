//! [`RunStore`] on one SQLite file: the schema and the reads here, the
//! writer's side in `write.rs`.
//!
//! One writer thread owns the write connection and commits whatever is
//! queued as one transaction, so a busy server pays for one commit per batch,
//! not per event. WAL mode with `synchronous=NORMAL`: a commit survives the
//! process being killed (it is in the OS's cache once `create_run` returns),
//! not a power cut right after it. Reads use their own connection and never
//! wait for the writer.

mod write;

use write::{start_checkpointer, Sqlite};

use super::checkpoint;
use super::journal;
use super::wait::{AnswerIn, Answered, WaitFilter, WaitRecord};
use super::writer::{WaitDone, WaitOp, Writes};
use super::{
    is_run_key, named_run, now_ms, parse_json, prune_cutoff, NewRun, RunFilter, RunRecord,
    RunStatus, RunStore, StepRow, StoreError, Write,
};
use crate::engine::{Checkpoint, StepStatus};
use marktoflow_steps::core::sqlite::{self, DbError};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The schema, one migration per entry; `schema_version` holds how many
/// have been applied. Only ever append.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    file TEXT NOT NULL,
    version TEXT NOT NULL,
    trigger TEXT NOT NULL,
    retry_of TEXT,
    status TEXT NOT NULL,
    inputs TEXT NOT NULL,
    outputs TEXT,
    error TEXT,
    error_step TEXT,
    pid INTEGER,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    duration_ms INTEGER
);
CREATE INDEX runs_by_created ON runs (created_at);
CREATE INDEX runs_by_workflow ON runs (workflow, created_at);
CREATE INDEX runs_unfinished ON runs (status) WHERE status IN ('queued', 'running');
CREATE TABLE steps (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    name TEXT NOT NULL,
    depth INTEGER NOT NULL,
    top_index INTEGER NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    output TEXT NOT NULL,
    error TEXT,
    reused INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX steps_by_run ON steps (run_id, id);
CREATE TABLE checkpoints (
    run_id TEXT NOT NULL,
    next_step INTEGER NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (run_id, next_step)
) WITHOUT ROWID;
"#,
    "ALTER TABLE runs ADD COLUMN owner TEXT;",
    r#"
CREATE TABLE idempotency (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
"#,
    "ALTER TABLE runs ADD COLUMN context TEXT;",
    r#"
CREATE TABLE replies (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    text TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX replies_by_run ON replies (run_id);
"#,
    // How many times a process died while running the run (see
    // `RunRecord::deaths`).
    "ALTER TABLE runs ADD COLUMN deaths INTEGER NOT NULL DEFAULT 0;",
    // Runs stopped at a `wait` for a person or an event (see `store::wait`).
    r#"
CREATE TABLE waits (
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    workflow TEXT NOT NULL,
    mode TEXT NOT NULL,
    key TEXT,
    request TEXT NOT NULL,
    state TEXT NOT NULL,
    votes TEXT NOT NULL,
    resolution TEXT,
    created_at INTEGER NOT NULL,
    deadline INTEGER,
    closed_at INTEGER,
    PRIMARY KEY (run_id, step_id)
) WITHOUT ROWID;
CREATE INDEX waits_open ON waits (state, deadline);
CREATE INDEX waits_by_key ON waits (key) WHERE key IS NOT NULL;
"#,
    // `/metrics` counts the waiting runs.
    "CREATE INDEX runs_waiting_for_answer ON runs (status) WHERE status = 'waiting';",
    // An action's inputs as it was called, shown beside its output.
    "ALTER TABLE steps ADD COLUMN inputs TEXT;",
    // Pauses asked from another process (see `RunStore::ask_pause`).
    "CREATE TABLE pauses (run_id TEXT PRIMARY KEY, asked_at INTEGER NOT NULL, by TEXT NOT NULL) WITHOUT ROWID;",
    // What a step's model calls spent (`Spend` as JSON): shown with the run,
    // and summed for a workflow's daily budget.
    "ALTER TABLE steps ADD COLUMN usage TEXT;",
];

pub struct SqliteStore {
    path: PathBuf,
    writes: Writes,
    /// Opened on first use: a CLI run only writes.
    read: Mutex<Option<Connection>>,
    /// This process as the owner of the runs it records: taken at the
    /// first write (readers such as `history` never take one).
    owner: std::sync::OnceLock<Option<super::owner::Owner>>,
}

fn db_err(e: rusqlite::Error) -> StoreError {
    StoreError::Db(e.to_string())
}

/// A store's error for a failure of the one SQLite helper.
fn open_err(path: &Path, e: DbError) -> StoreError {
    match e {
        DbError::TooNew { found, known } => StoreError::TooNew {
            path: path.display().to_string(),
            found,
            known,
        },
        e => StoreError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        },
    }
}

impl SqliteStore {
    /// Opens (creating it and its folder when missing) the store at `path`,
    /// bringing its schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, start_checkpointer)
    }

    /// [`SqliteStore::open`] with the WAL's checkpointer `start` makes.
    fn open_with(
        path: &Path,
        start: impl FnOnce(&Path, &rusqlite::Connection) -> Option<write::Checkpointer>,
    ) -> Result<SqliteStore, StoreError> {
        let write = sqlite::open(path, MIGRATIONS).map_err(|e| open_err(path, e))?;
        let checkpoints = start(path, &write);
        let writes = Writes::start(Sqlite {
            conn: write,
            checkpoints,
        })
        .map_err(|e| StoreError::Open {
            path: path.display().to_string(),
            message: format!("cannot start the writer thread: {e}"),
        })?;
        let store = SqliteStore {
            path: path.to_path_buf(),
            writes,
            read: Mutex::new(None),
            owner: std::sync::OnceLock::new(),
        };
        store.absorb_journals()?;
        Ok(store)
    }

    /// `r` with whether its owner lives (for runs not finished).
    fn live(&self, mut r: RunRecord) -> RunRecord {
        if !r.status.is_finished() {
            r.alive = r
                .owner
                .as_deref()
                .map(|t| super::owner::is_alive(&self.path, t));
        }
        r
    }

    /// Moves in the runs recorded as journals (see [`super::journal`]).
    fn absorb_journals(&self) -> Result<(), StoreError> {
        let dir = journal::dir_of(&self.path);
        if !journal::any_pending(&dir) {
            return Ok(());
        }
        let _lock = journal::lock(&dir)?;
        let pending = journal::read_pending(&self.path);
        if pending.is_empty() {
            return Ok(());
        }
        let (done, writes): (Vec<_>, Vec<_>) = pending
            .into_iter()
            .map(|p| (p.complete.then_some(p.path), p.writes))
            .unzip();
        self.writes.absorb(writes)?;
        for path in done.into_iter().flatten() {
            // Another process may have moved and deleted it first.
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, StoreError> {
        self.absorb_journals()?;
        self.read_as_is(f)
    }

    /// The pauses asked in the database `c` (none before the table exists).
    pub fn asked_pauses_in(c: &Connection) -> Result<Vec<(String, i64)>, rusqlite::Error> {
        let made: bool = c.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pauses')",
            [],
            |r| r.get(0),
        )?;
        if !made {
            return Ok(Vec::new());
        }
        let mut st = c.prepare_cached("SELECT run_id, asked_at FROM pauses")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect()
    }

    /// A read of what the database holds now, the journals not moved in.
    fn read_as_is<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
    ) -> Result<T, StoreError> {
        let mut conn = self
            .read
            .lock()
            .map_err(|_| StoreError::Db("read connection poisoned".into()))?;
        if conn.is_none() {
            *conn = Some(sqlite::connect(&self.path).map_err(|e| open_err(&self.path, e))?);
        }
        match conn.as_ref() {
            Some(c) => f(c).map_err(db_err),
            None => Err(StoreError::Closed),
        }
    }
}

/// [`RunFilter`]'s conditions, its fields as `?1`…`?6` (the text lower-cased).
const RUN_FILTER: &str = "(?1 IS NULL OR workflow = ?1) AND (?2 IS NULL OR status = ?2)
     AND (?3 IS NULL OR trigger = ?3) AND (?4 IS NULL OR created_at >= ?4)
     AND (?5 IS NULL OR created_at < ?5)
     AND (?6 IS NULL OR instr(lower(inputs), ?6) > 0 OR instr(lower(coalesce(outputs, '')), ?6) > 0
          OR instr(lower(coalesce(error, '')), ?6) > 0)";

const RUN_COLUMNS: &str = "id, workflow, file, version, trigger, status, retry_of, inputs, outputs, error, error_step, pid, created_at, finished_at, duration_ms, owner, context, deaths";

fn run_of(r: &Row) -> Result<RunRecord, rusqlite::Error> {
    let status: String = r.get(5)?;
    Ok(RunRecord {
        id: r.get(0)?,
        workflow: r.get(1)?,
        file: r.get(2)?,
        version: r.get(3)?,
        trigger: r.get(4)?,
        // Unknown text (a newer writer) reads as failed rather than panicking.
        status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
        retry_of: r.get(6)?,
        inputs: parse_json(r.get(7)?),
        outputs: parse_json(r.get(8)?),
        error: r.get(9)?,
        error_step: r.get(10)?,
        pid: r.get(11)?,
        created_at: r.get(12)?,
        finished_at: r.get(13)?,
        duration_ms: r.get::<_, Option<i64>>(14)?.map(|d| d.max(0) as u64),
        owner: r.get(15)?,
        alive: None,
        context: parse_json(r.get(16)?),
        deaths: r.get::<_, i64>(17)?.clamp(0, u32::MAX as i64) as u32,
    })
}

fn step_of(r: &Row) -> Result<StepRow, rusqlite::Error> {
    let status: String = r.get(4)?;
    Ok(StepRow {
        step_id: r.get(0)?,
        name: r.get(1)?,
        depth: r.get::<_, i64>(2)?.max(0) as usize,
        top_index: r.get::<_, i64>(3)?.max(0) as usize,
        status: StepStatus::from_stored(&status),
        attempts: r.get(5)?,
        started_at: r.get(6)?,
        duration_ms: r.get::<_, i64>(7)?.max(0) as u64,
        output: parse_json(r.get(8)?),
        error: r.get(9)?,
        reused: r.get(10)?,
        inputs: r
            .get::<_, Option<String>>(11)?
            .and_then(|t| serde_json::from_str(&t).ok()),
        usage: r
            .get::<_, Option<String>>(12)?
            .and_then(|t| serde_json::from_str(&t).ok()),
    })
}

impl RunStore for SqliteStore {
    fn submit_run(
        &self,
        mut run: NewRun,
    ) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        run.owner = run.owner.or_else(|| self.owner_token());
        self.writes.create(run, now_ms(), true)
    }

    fn queue_run(&self, mut run: NewRun) -> tokio::sync::oneshot::Receiver<Result<(), StoreError>> {
        run.owner = run.owner.or_else(|| self.owner_token());
        self.writes.create(run, now_ms(), false)
    }

    fn write(&self, w: Write) {
        self.writes.write(w);
    }

    fn owner_token(&self) -> Option<String> {
        self.owner
            .get_or_init(|| super::owner::Owner::acquire(&self.path).ok())
            .as_ref()
            .map(|o| o.token.clone())
    }

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
        let rows = self.read(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1 OR id LIKE ?1 || '%' OR id LIKE '%' || ?1
                 ORDER BY id = ?1 DESC LIMIT 2"
            ))?;
            let rows = st.query_map([id], run_of)?;
            rows.collect::<Result<Vec<_>, _>>()
        })?;
        named_run(id, rows).map(|r| self.live(r))
    }

    fn list_runs(&self, f: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        self.read(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE {RUN_FILTER}
                 ORDER BY created_at DESC, rowid DESC LIMIT ?7 OFFSET ?8"
            ))?;
            let limit = f.limit.map(|n| n as i64).unwrap_or(-1);
            let rows = st.query_map(
                params![
                    f.workflow,
                    f.status.map(RunStatus::as_str),
                    f.trigger,
                    f.since,
                    f.until,
                    f.text.as_deref().map(str::to_lowercase),
                    limit,
                    f.offset as i64
                ],
                run_of,
            )?;
            rows.collect::<Result<Vec<_>, _>>()
        })
        .map(|rows| rows.into_iter().map(|r| self.live(r)).collect())
    }

    fn count_runs(&self, f: &RunFilter) -> Result<usize, StoreError> {
        self.read(|c| {
            let mut st =
                c.prepare_cached(&format!("SELECT count(*) FROM runs WHERE {RUN_FILTER}"))?;
            st.query_row(
                params![
                    f.workflow,
                    f.status.map(RunStatus::as_str),
                    f.trigger,
                    f.since,
                    f.until,
                    f.text.as_deref().map(str::to_lowercase)
                ],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| n.max(0) as usize)
    }

    fn steps_of(&self, run_id: &str) -> Result<Vec<StepRow>, StoreError> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT step_id, name, depth, top_index, status, attempts, started_at, duration_ms, output, error, reused, inputs, usage
                 FROM steps WHERE run_id = ?1 ORDER BY id",
            )?;
            let rows = st.query_map([run_id], step_of)?;
            rows.collect()
        })
    }

    fn spent_since(
        &self,
        workflow: &str,
        since: i64,
        except: &str,
    ) -> Result<crate::engine::Spend, StoreError> {
        let texts: Vec<String> = self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT s.usage FROM steps s JOIN runs r ON r.id = s.run_id
                 WHERE r.workflow = ?1 AND s.started_at >= ?2 AND r.id <> ?3
                   AND s.usage IS NOT NULL AND s.reused = 0",
            )?;
            let rows = st.query_map(params![workflow, since, except], |r| r.get(0))?;
            rows.collect()
        })?;
        Ok(super::spend_of(&texts))
    }

    fn checkpoint(
        &self,
        run_id: &str,
        next_step: Option<usize>,
    ) -> Result<Option<Checkpoint>, StoreError> {
        // The rows up to it, latest first, down to the nearest whole one.
        let texts: Vec<(i64, String)> = self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT next_step, state FROM checkpoints WHERE run_id = ?1 AND (?2 IS NULL OR next_step <= ?2)
                 ORDER BY next_step DESC",
            )?;
            let rows = st.query_map(params![run_id, next_step.map(|n| n as i64)], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
            rows.collect()
        })?;
        checkpoint::from_rows(run_id, next_step, &texts)
    }

    fn incomplete_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self.read(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs
                 WHERE status IN ('queued', 'running') AND trigger <> 'cli' ORDER BY created_at, rowid"
            ))?;
            let rows = st.query_map([], run_of)?;
            rows.collect::<Result<Vec<_>, _>>()
        })?;
        // How each owner died, read once (its file goes with the reading).
        let mut deaths: std::collections::HashMap<String, Option<super::death::Death>> =
            std::collections::HashMap::new();
        Ok(rows
            .into_iter()
            .map(|r| {
                let death = match &r.owner {
                    Some(t) => deaths
                        .entry(t.clone())
                        .or_insert_with(|| super::owner::death_of(&self.path, t))
                        .clone(),
                    None => None,
                };
                (self.live(r), death)
            })
            .filter(|(r, _)| r.is_interrupted())
            .map(|(mut r, death)| {
                // Its process died while running it: weighed by whether it
                // was to blame (see `death`).
                if r.status == RunStatus::Running {
                    let weight = death
                        .unwrap_or(super::death::Death::Unexplained)
                        .weight(&r.id);
                    r.deaths = r.deaths.saturating_add(weight);
                }
                r
            })
            .collect())
    }

    fn recall_reply(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.read(|c| {
            c.prepare_cached("SELECT text FROM replies WHERE key = ?1")?
                .query_row([key], |r| r.get(0))
                .optional()
        })
    }

    fn run_for_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        let since = now_ms().saturating_sub(super::IDEMPOTENCY_RETENTION.as_millis() as i64);
        self.read(|c| {
            c.prepare_cached("SELECT run_id FROM idempotency WHERE key = ?1 AND created_at >= ?2")?
                .query_row(params![key, since], |r| r.get(0))
                .optional()
        })
    }

    fn prune(&self, older_than: Duration) -> Result<usize, StoreError> {
        self.absorb_journals()?;
        self.writes.prune(prune_cutoff(older_than))
    }

    fn answer_wait(&self, a: AnswerIn) -> Result<Answered, StoreError> {
        self.absorb_journals()?;
        match self
            .writes
            .wait(WaitOp::Answer(Box::new(a), self.owner_token()))?
        {
            WaitDone::Answered(r) => Ok(r),
            _ => Err(StoreError::Db("unexpected answer to a wait change".into())),
        }
    }

    fn expire_waits(&self, now: i64) -> Result<Vec<String>, StoreError> {
        self.absorb_journals()?;
        match self.writes.wait(WaitOp::Expire(now, self.owner_token()))? {
            WaitDone::Expired(r) => Ok(r),
            _ => Err(StoreError::Db("unexpected answer to a wait change".into())),
        }
    }

    fn cancel_waiting(&self, run_id: &str) -> Result<bool, StoreError> {
        self.absorb_journals()?;
        match self
            .writes
            .wait(WaitOp::Cancel(run_id.to_string(), now_ms()))?
        {
            WaitDone::Cancelled(r) => Ok(r),
            _ => Err(StoreError::Db("unexpected answer to a wait change".into())),
        }
    }

    fn ask_pause(&self, run_id: &str, by: &str) -> Result<super::PauseAsked, StoreError> {
        // A CLI run's progress is in its journal until moved in.
        self.absorb_journals()?;
        match self
            .writes
            .wait(WaitOp::Pause(run_id.to_string(), now_ms(), by.to_string()))?
        {
            WaitDone::Paused(r) => Ok(r),
            _ => Err(StoreError::Db("unexpected answer to a wait change".into())),
        }
    }

    fn asked_pauses(&self) -> Result<Vec<(String, i64)>, StoreError> {
        // Looked at often by the processes that execute runs, so the
        // journals are not moved in for it (a pause is asked after a move).
        self.read_as_is(Self::asked_pauses_in)
    }

    fn waits(&self, f: &WaitFilter) -> Result<Vec<WaitRecord>, StoreError> {
        let limit = f.limit.unwrap_or(500).min(10_000) as i64;
        let rows = self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT run_id, workflow, request, state, votes, resolution, closed_at FROM waits
                 WHERE (?1 IS NULL OR run_id = ?1) AND (?2 = 0 OR state = 'open') AND (?3 IS NULL OR key = ?3)
                 ORDER BY created_at DESC LIMIT ?4",
            )?;
            let rows = st.query_map(
                params![f.run_id, f.open as i64, f.key, limit],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, Option<String>>(5)?,
                        r.get::<_, Option<i64>>(6)?,
                    ))
                },
            )?;
            rows.collect::<Result<Vec<_>, _>>()
        })?;
        Ok(rows
            .into_iter()
            .filter_map(
                |(run_id, workflow, request, state, votes, resolution, closed_at)| {
                    super::wait::record(
                        run_id,
                        workflow,
                        &request,
                        &state,
                        &votes,
                        resolution.as_deref(),
                        closed_at,
                    )
                },
            )
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::writer::Op;
    use super::write::commit_batch;
    use super::*;
    use crate::store::{CheckpointRow, RunEnd};
    use serde_json::json;
    use serde_json::Value;
    use std::sync::Arc;

    fn new_run(id: &str, workflow: &str, trigger: &str, pid: Option<u32>) -> NewRun {
        NewRun {
            id: id.into(),
            workflow: workflow.into(),
            file: "/tmp/w.md".into(),
            version: "v1".into(),
            inputs: json!({"q": "x"}).as_object().unwrap().clone(),
            trigger: trigger.into(),
            status: RunStatus::Queued,
            retry_of: None,
            // A dead process's run names an owner whose lock nobody holds.
            owner: (pid == Some(u32::MAX)).then(|| "gone".to_string()),
            pid,
            idempotency_key: None,
            context: Value::Null,
            concurrency: None,
        }
    }

    fn step(id: &str, top: usize) -> StepRow {
        StepRow {
            step_id: id.into(),
            name: id.into(),
            depth: 0,
            top_index: top,
            status: StepStatus::Completed,
            attempts: 1,
            started_at: 0,
            duration_ms: 3,
            output: json!({"n": top}),
            error: None,
            reused: false,
            inputs: None,
            usage: None,
        }
    }

    /// Whether run `id` is in the database file, read by a connection of
    /// its own.
    fn stored(path: &Path, id: &str) -> bool {
        let c = Connection::open(path).unwrap();
        c.query_row("SELECT count(*) FROM runs WHERE id = ?1", [id], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap()
            == 1
    }

    #[test]
    fn writes_nobody_waits_for_are_committed_within_the_gather_time() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("runs.db");
        let store = SqliteStore::open(&path).unwrap();
        // A run queued unhurried, then a step: nothing that wakes the
        // writer at once, and no flush after them.
        let mut created = store.queue_run(new_run("lazy-1", "w", "webhook", None));
        store.record_step("lazy-1", step("s1", 1));
        let start = std::time::Instant::now();
        let answer = loop {
            match created.try_recv() {
                Ok(r) => break r,
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {
                    assert!(
                        start.elapsed() < Duration::from_secs(10),
                        "an unhurried write was never committed"
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("{e}"),
            }
        };
        answer.unwrap();
        assert!(stored(&path, "lazy-1"));
        assert_eq!(store.steps_of("lazy-1").unwrap().len(), 1);
    }

    #[test]
    fn a_call_after_the_commit_sees_the_runs_writes_and_is_made_once() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("runs.db");
        let store = SqliteStore::open(&path).unwrap();
        let _created = store.queue_run(new_run("then-1", "w", "webhook", None));
        store.finish_run(
            "then-1",
            RunEnd {
                status: RunStatus::Completed,
                outputs: json!({"ok": true}),
                error: None,
                error_step: None,
                duration_ms: 1,
                waiting: None,
            },
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = path.clone();
        store.after_commit(crate::store::AfterCommit::new(move |r| {
            // Made on the writer's thread, after the commit: the run is in
            // the file for any other connection.
            let _ = tx.send((r.is_ok(), stored(&seen, "then-1")));
        }));
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            (true, true)
        );
        // Exactly once: the sender is gone with the call.
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        // A call that panics does not stop the writer.
        store.after_commit(crate::store::AfterCommit::new(|_| {
            panic!("a bug in a call")
        }));
        store
            .create_run(new_run("then-2", "w", "webhook", None))
            .unwrap();
        store.flush().unwrap();
        assert!(stored(&path, "then-2"));
        // A call queued on a stopped writer is made, saying so.
        store.writes.stop();
        let (tx, rx) = std::sync::mpsc::channel();
        store.after_commit(crate::store::AfterCommit::new(move |r| {
            let _ = tx.send(matches!(r, Err(StoreError::Closed)));
        }));
        assert!(rx.recv_timeout(Duration::from_secs(1)).unwrap());
    }

    #[test]
    fn a_run_started_and_ended_in_one_commit_is_written_once_with_its_start() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("runs.db");
        SqliteStore::open(&path)
            .unwrap()
            .create_run(new_run("fold-1", "w", "webhook", None))
            .unwrap();
        let write = |w: Write| Op::Write(Box::new(w));
        let batch = [
            write(Write::Running {
                run_id: "fold-1".into(),
                at: 1234,
                pid: 77,
                owner: Some("token".into()),
            }),
            write(Write::Finish {
                run_id: "fold-1".into(),
                end: RunEnd {
                    status: RunStatus::Completed,
                    outputs: json!({"ok": true}),
                    error: None,
                    error_step: None,
                    duration_ms: 9,
                    waiting: None,
                },
                at: 2000,
            }),
        ];
        let mut conn = sqlite::connect(&path).unwrap();
        let (_, failed) = commit_batch(&mut conn, &batch);
        assert!(failed.is_none());
        let row: (
            String,
            Option<i64>,
            Option<u32>,
            Option<String>,
            Option<i64>,
        ) = conn
            .query_row(
                "SELECT status, started_at, pid, owner, finished_at FROM runs WHERE id = 'fold-1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap();
        assert_eq!(
            row,
            (
                "completed".into(),
                Some(1234),
                Some(77),
                Some("token".into()),
                Some(2000)
            )
        );
        // Not among the unfinished runs' index.
        let unfinished: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(unfinished, 0);
    }

    #[test]
    fn the_wal_is_checkpointed_while_the_store_stays_open() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("runs.db");
        let s = SqliteStore::open(&path).unwrap();
        let db_size = || std::fs::metadata(&path).unwrap().len();
        let before = db_size();
        for i in 0..300 {
            s.create_run(new_run(&format!("cp-{i:04}"), "w", "webhook", None))
                .unwrap();
        }
        // The writer never checkpoints (wal_autocheckpoint is 0): the rows
        // reach the database file only through the checkpointer thread.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while db_size() <= before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(db_size() > before, "checkpointed into the database file");
        assert_eq!(s.count_runs(&RunFilter::default()).unwrap(), 300);
    }

    /// Queues `steps` rows of about 1.4 kB each as fast as they can be
    /// committed (the checkpointer never finds the WAL idle), and gives the
    /// largest size the WAL file reached (it keeps it).
    fn wal_after_steady_writes(s: &SqliteStore, dir: &Path, steps: usize) -> u64 {
        s.create_run(new_run("wal-run", "w", "webhook", None))
            .unwrap();
        let payload = "x".repeat(1000);
        for i in 0..steps {
            let mut row = step(&format!("s{i}"), 1);
            row.output = json!({"text": payload});
            s.record_step("wal-run", row);
        }
        s.flush().unwrap();
        assert_eq!(s.steps_of("wal-run").unwrap().len(), steps);
        std::fs::metadata(dir.join("runs.db-wal")).unwrap().len()
    }

    #[test]
    fn the_wal_starts_over_under_steady_writes() {
        let d = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&d.path().join("runs.db")).unwrap();
        // About 140 MB of rows; the WAL keeps about 25 MB: one interval and
        // one copy's worth of commits.
        let wal = wal_after_steady_writes(&s, d.path(), 100_000);
        assert!(
            wal < 48 << 20,
            "the WAL reached {wal} bytes: it never started over"
        );
    }

    #[test]
    fn the_wal_starts_over_under_steady_writes_with_its_checkpointer_starved() {
        let d = tempfile::tempdir().unwrap();
        // A checkpointer that never gets to copy anything (as a thread the
        // machine never runs): the writer's own copies must bound the WAL.
        let s = SqliteStore::open_with(&d.path().join("runs.db"), |_, write| {
            write::Checkpointer::start(write, |woken, _| while woken.recv().is_ok() {})
        })
        .unwrap();
        let wal = wal_after_steady_writes(&s, d.path(), 50_000);
        // The backstop's frames and one batch's.
        assert!(
            wal < 24 << 20,
            "the WAL reached {wal} bytes: it never started over"
        );
    }

    #[test]
    fn records_lists_checkpoints_and_prunes_on_a_real_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("deep/runs.db");
        {
            let s = SqliteStore::open(&path).unwrap();
            s.create_run(new_run("aaaa-1", "w1", "webhook", Some(u32::MAX)))
                .unwrap();
            s.create_run(new_run("aaab-2", "w2", "cli", None)).unwrap();
            s.record_step("aaaa-1", step("one", 1));
            s.save_checkpoint(
                "aaaa-1",
                CheckpointRow::Whole(Arc::new(Checkpoint {
                    next_step: 1,
                    variables: json!({"x": 1}).as_object().unwrap().clone(),
                    ..Default::default()
                })),
                false,
            );
            s.finish_run(
                "aaab-2",
                RunEnd {
                    status: RunStatus::Failed,
                    outputs: json!({}),
                    error: Some("boom".into()),
                    error_step: Some("s".into()),
                    duration_ms: 5,
                    waiting: None,
                },
            );
            s.flush().unwrap();
        }
        // Reopened: everything was committed.
        let s = SqliteStore::open(&path).unwrap();
        assert!(matches!(s.get_run("aaa"), Err(StoreError::Ambiguous(_))));
        // LIKE's wildcards and escape name no run (both backends).
        for key in ["", "%", "aaa%", "_aaa-1", "aaaa\\", "a\\%"] {
            assert!(
                matches!(s.get_run(key), Err(StoreError::NotFound(_))),
                "{key:?}"
            );
        }
        let a = s.get_run("aaaa").unwrap();
        assert_eq!(
            (a.status, a.trigger.as_str()),
            (RunStatus::Queued, "webhook")
        );
        assert!(a.is_interrupted(), "its process is gone");
        let b = s.get_run("aaab-2").unwrap();
        assert_eq!(
            (b.status, b.error.as_deref()),
            (RunStatus::Failed, Some("boom"))
        );
        assert_eq!(s.steps_of("aaaa-1").unwrap()[0].output, json!({"n": 1}));
        let cp = s.checkpoint("aaaa-1", None).unwrap().unwrap();
        assert_eq!((cp.next_step, &cp.variables["x"]), (1, &json!(1)));
        assert!(s.checkpoint("aaaa-1", Some(3)).unwrap().is_none());
        // What a restarted server resumes: not finished, not from the CLI.
        let todo: Vec<String> = s
            .incomplete_runs()
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(todo, ["aaaa-1"]);
        let failed = s
            .list_runs(&RunFilter {
                status: Some(RunStatus::Failed),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(failed.len(), 1);
        let w1 = s
            .list_runs(&RunFilter {
                workflow: Some("w1".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(w1[0].id, "aaaa-1");
        // Pruning removes finished runs only.
        assert_eq!(s.prune(std::time::Duration::ZERO).unwrap(), 1);
        assert!(matches!(s.get_run("aaab-2"), Err(StoreError::NotFound(_))));
        assert!(s.get_run("aaaa-1").is_ok());
    }

    #[test]
    fn a_file_that_is_not_a_store_is_an_error_not_a_panic() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.db");
        std::fs::write(&p, "not sqlite at all, just text that is long enough").unwrap();
        let e = SqliteStore::open(&p).err().expect("refused");
        assert!(e.to_string().contains("x.db"), "{e}");
    }

    #[test]
    fn a_store_locked_by_another_process_for_a_while_loses_no_write() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("runs.db");
        let s = SqliteStore::open(&path).unwrap();
        s.create_run(new_run("cccc-1", "w", "cli", None)).unwrap();
        // Another connection takes the write lock and holds it past the
        // busy timeout (5 s): the writer must wait it out, not drop rows.
        let (locked_tx, locked) = std::sync::mpsc::channel();
        let holder = {
            let path = path.clone();
            std::thread::spawn(move || {
                let c = Connection::open(&path).unwrap();
                c.execute_batch("BEGIN IMMEDIATE").unwrap();
                locked_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_secs(6));
                c.execute_batch("COMMIT").unwrap();
            })
        };
        locked.recv().unwrap();
        s.record_step("cccc-1", step("one", 1));
        s.save_checkpoint(
            "cccc-1",
            CheckpointRow::Whole(Arc::new(Checkpoint {
                next_step: 1,
                ..Default::default()
            })),
            false,
        );
        s.flush().expect("written once the lock is free");
        holder.join().unwrap();
        assert_eq!(s.steps_of("cccc-1").unwrap().len(), 1);
        assert!(s.checkpoint("cccc-1", Some(1)).unwrap().is_some());
    }
}
