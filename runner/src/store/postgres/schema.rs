//! The shared store's schema and its migrations.

use super::pg_err;
use crate::store::StoreError;
use postgres::Client;

/// The schema, one migration per entry; `marktoflow_schema.version` holds
/// how many have been applied. Only ever append.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
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
"#,
    r#"
CREATE TABLE replies (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX replies_by_run ON replies (run_id);
"#,
    // How many times a worker died while running the run: the reaper counts
    // a lease that ran out on a running run (see `RunRecord::deaths`).
    "ALTER TABLE runs ADD COLUMN deaths INTEGER NOT NULL DEFAULT 0;",
    // The waits of runs stopped for a person (see `store::wait`).
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
    created_at BIGINT NOT NULL,
    deadline BIGINT,
    closed_at BIGINT,
    PRIMARY KEY (run_id, step_id)
);
CREATE INDEX waits_open ON waits (state, deadline);
CREATE INDEX waits_by_key ON waits (key) WHERE key IS NOT NULL;
"#,
    // `/metrics` counts the waiting runs.
    "CREATE INDEX runs_waiting_for_answer ON runs (status) WHERE status = 'waiting';",
    // An action's inputs as it was called, shown beside its output.
    "ALTER TABLE steps ADD COLUMN inputs TEXT;",
    // Pauses asked from another process (see `RunStore::ask_pause`).
    "CREATE TABLE pauses (run_id TEXT PRIMARY KEY, asked_at BIGINT NOT NULL, by TEXT NOT NULL);",
    // What a step's model calls spent (`Spend` as JSON): shown with the run,
    // and summed for a workflow's daily budget.
    "ALTER TABLE steps ADD COLUMN usage TEXT;",
];

/// Advisory lock key of migrations (any constant the application owns).
const MIGRATE_LOCK: i64 = 0x6d74_665f_6d69_6772;

/// Brings the schema up to date, one process at a time.
pub(super) fn migrate(c: &mut Client) -> Result<(), StoreError> {
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
