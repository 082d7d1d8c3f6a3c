//! The memory database: which file, its schema, and one stored memory as
//! a row and as JSON.

use super::args::{iso, round};
use super::MemError;
use crate::core::args::Args;
use crate::core::{action::Call, error::ActionError};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The database file for this call: a `db` the workflow names is reached
/// through its folder opened inside the write roots (see
/// `core::confined`), so SQLite cannot be sent out of them; the default file
/// sits at a fixed place in the state folder.
pub(super) enum DbFile {
    Confined(crate::core::confined::Dir, std::ffi::OsString),
    Fixed(PathBuf),
}

impl DbFile {
    /// The path SQLite opens (through the open folder when confined).
    pub(super) fn path(&self) -> PathBuf {
        match self {
            DbFile::Confined(dir, name) => dir.fd_path(name),
            DbFile::Fixed(p) => p.clone(),
        }
    }

    pub(super) fn shown(&self) -> String {
        match self {
            DbFile::Confined(dir, name) => dir.path.join(name).display().to_string(),
            DbFile::Fixed(p) => p.display().to_string(),
        }
    }
}

pub(super) fn db_path(call: &Call<'_>, a: &Args) -> Result<DbFile, ActionError> {
    let sb = &call.caps.sandbox;
    match a.str("db")? {
        Some(p) => {
            let (dir, name, _) = sb
                .parent_of(p, crate::core::confined::Access::Write, true)
                .map_err(|e| {
                    ActionError::failed(format!("{e} (it is `db`; pass `--allow-write` for it)"))
                })?;
            Ok(DbFile::Confined(dir, name))
        }
        // The default file is written even without a write root: it sits at a
        // fixed place in the state folder and holds only what memory steps put
        // there, so a workflow can neither choose where it writes nor read
        // anything new.
        None => Ok(DbFile::Fixed(call.caps.state.memory_db())),
    }
}

pub(super) fn open(path: &Path) -> Result<Connection, MemError> {
    // Several runs (a server, a cron) may share one file.
    Ok(crate::core::sqlite::open(path, MIGRATIONS)?)
}

/// The schema, one migration per entry. Only ever append.
/// `decayed_at` / `decay_queries` make repeated decays compound correctly:
/// each run only counts the time and queries since the last.
pub(super) const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE IF NOT EXISTS memories (
  rowid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  text TEXT NOT NULL,
  kind TEXT NOT NULL,
  tags TEXT NOT NULL DEFAULT '[]',
  importance REAL NOT NULL,
  source TEXT,
  metadata TEXT NOT NULL DEFAULT '{}',
  created_at INTEGER NOT NULL,
  last_access INTEGER NOT NULL,
  query_count INTEGER NOT NULL DEFAULT 0,
  decayed_at INTEGER,
  decay_queries INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS memories_kind ON memories(kind);
CREATE INDEX IF NOT EXISTS memories_created ON memories(created_at);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts
  USING fts5(text, tags, tokenize = 'porter unicode61');
"#];

/// One stored memory.
#[derive(Debug, Clone)]
pub(super) struct Memory {
    pub(super) rowid: i64,
    pub(super) id: String,
    pub(super) text: String,
    pub(super) kind: String,
    pub(super) tags: Vec<String>,
    pub(super) importance: f64,
    pub(super) source: Option<String>,
    pub(super) metadata: Value,
    pub(super) created_at: i64,
    pub(super) last_access: i64,
    pub(super) query_count: i64,
    pub(super) decayed_at: Option<i64>,
    pub(super) decay_queries: i64,
}

pub(super) const COLUMNS: &str = "rowid, id, text, kind, tags, importance, source, metadata, created_at, last_access, query_count, decayed_at, decay_queries";

pub(super) fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Memory> {
    let tags: String = r.get(4)?;
    let meta: String = r.get(7)?;
    Ok(Memory {
        rowid: r.get(0)?,
        id: r.get(1)?,
        text: r.get(2)?,
        kind: r.get(3)?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        importance: r.get(5)?,
        source: r.get(6)?,
        metadata: serde_json::from_str(&meta).unwrap_or_else(|_| json!({})),
        created_at: r.get(8)?,
        last_access: r.get(9)?,
        query_count: r.get(10)?,
        decayed_at: r.get(11)?,
        decay_queries: r.get(12)?,
    })
}

impl Memory {
    /// The memory as a hit, shaped like a `kb.search` hit.
    pub(super) fn to_json(&self) -> Value {
        let title: String = self.text.chars().take(80).collect();
        json!({
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "type": self.kind,
            "tags": self.tags,
            "importance": round(self.importance),
            "source": self.source,
            "metadata": self.metadata,
            "created_at": iso(self.created_at),
            "last_access": iso(self.last_access),
            "query_count": self.query_count,
            "path": format!("memory:{}", self.id),
            "title": title,
            "section": self.kind,
            "mtime_ms": self.created_at,
        })
    }
}

/// Tags as FTS text, so `#tag` words in a query find them.
pub(super) fn tag_text(tags: &[String]) -> String {
    tags.join(" ")
}

// ---------------------------------------------------------------- remember

pub(super) fn all(db: &Connection, kinds: &[String]) -> rusqlite::Result<Vec<Memory>> {
    let mut p = Vec::new();
    let wh = filter_sql(kinds, None, &mut p);
    let mut st = db.prepare(&format!(
        "SELECT {COLUMNS} FROM memories m WHERE {wh} ORDER BY m.created_at"
    ))?;
    let rows = st.query_map(rusqlite::params_from_iter(p.iter()), row)?;
    rows.collect()
}

pub(super) fn filter_sql(
    kinds: &[String],
    min_importance: Option<f64>,
    out: &mut Vec<rusqlite::types::Value>,
) -> String {
    let mut w = Vec::new();
    if !kinds.is_empty() {
        let marks: Vec<String> = kinds
            .iter()
            .map(|k| {
                out.push(k.clone().into());
                format!("?{}", out.len())
            })
            .collect();
        w.push(format!("m.kind IN ({})", marks.join(",")));
    }
    if let Some(mi) = min_importance {
        out.push(mi.into());
        w.push(format!("m.importance >= ?{}", out.len()));
    }
    if w.is_empty() {
        "1".into()
    } else {
        w.join(" AND ")
    }
}
