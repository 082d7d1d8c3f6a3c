//! The one way to open a SQLite file (the run store, memory databases):
//! its folder created, WAL mode with `synchronous=NORMAL` (a commit survives
//! the process being killed, not a power cut right after it), a busy
//! timeout so that several processes can share it, and the schema brought
//! up to date by numbered migrations.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use std::path::Path;
use std::time::Duration;

/// How long a connection waits for another process's write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("cannot create its folder `{path}`: {message}")]
    Folder { path: String, message: String },
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
    #[error("its schema version {found} is newer than this marktoflow knows ({known}); upgrade marktoflow")]
    TooNew { found: i64, known: i64 },
}

impl DbError {
    /// Another process holds the lock past the busy timeout: worth a retry.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            DbError::Sql(e) if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            )
        )
    }
}

/// A connection to `path` (created with its folder when missing), its
/// schema brought up to date: `migrations[i]` is applied when the file's
/// `schema_version` is at most `i`. Only ever append to `migrations`.
pub fn open(path: &Path, migrations: &[&str]) -> Result<Connection, DbError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| DbError::Folder {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
    }
    let mut conn = connect(path)?;
    migrate(&mut conn, migrations)?;
    Ok(conn)
}

/// Another connection to a file [`open`] has set up (no migration).
pub fn connect(path: &Path) -> Result<Connection, DbError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Before anything is written: a new file gives space freed by large
    // deletes back to the disk (`PRAGMA incremental_vacuum`); on a file
    // that has tables already it changes nothing.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // A WAL that grew under a burst of writes is cut back to this once a
    // checkpoint lets it start over, instead of keeping its largest size.
    conn.pragma_update(None, "journal_size_limit", WAL_KEPT_BYTES)?;
    Ok(conn)
}

/// The most of a WAL kept on disk once it starts over (see [`connect`]).
pub const WAL_KEPT_BYTES: i64 = 64 << 20;

fn version(conn: &Connection) -> Result<Option<i64>, rusqlite::Error> {
    conn.query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))
        .optional()
        .map(Option::flatten)
}

fn migrate(conn: &mut Connection, migrations: &[&str]) -> Result<(), DbError> {
    let known = migrations.len() as i64;
    // Up to date (the common case): one read, no write lock taken.
    if version(conn).ok().flatten() == Some(known) {
        return Ok(());
    }

    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
        [],
    )?;
    let found = version(&tx)?.unwrap_or(0);
    if found > known {
        return Err(DbError::TooNew { found, known });
    }
    for m in &migrations[found as usize..] {
        tx.execute_batch(m)?;
    }
    if found < known {
        tx.execute("DELETE FROM schema_version", [])?;
        tx.execute("INSERT INTO schema_version (version) VALUES (?1)", [known])?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "CREATE TABLE a (x INTEGER);";
    const V2: &str = "ALTER TABLE a ADD COLUMN y TEXT;";

    #[test]
    fn migrations_apply_once_in_order_and_a_newer_file_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("deep/er/x.db");
        let c = open(&p, &[V1]).unwrap();
        c.execute("INSERT INTO a (x) VALUES (1)", []).unwrap();
        drop(c);
        // Reopened with one more migration: only the new one runs.
        let c = open(&p, &[V1, V2]).unwrap();
        c.execute("UPDATE a SET y = 'kept'", []).unwrap();
        let y: String = c.query_row("SELECT y FROM a", [], |r| r.get(0)).unwrap();
        assert_eq!(y, "kept");
        let mode: String = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(c);
        assert_eq!(open(&p, &[V1, V2]).map(|_| ()).ok(), Some(()));
        // A binary that knows fewer migrations than the file has.
        match open(&p, &[V1]) {
            Err(DbError::TooNew { found: 2, known: 1 }) => {}
            other => panic!("{:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn a_file_that_is_not_a_database_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.db");
        std::fs::write(&p, "plain text that is long enough to be read as a header").unwrap();
        assert!(matches!(open(&p, &[V1]), Err(DbError::Sql(_))));
    }
}
