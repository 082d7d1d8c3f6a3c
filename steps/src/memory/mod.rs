//! `memory.*`: a long-term memory store in a SQLite file (the 02luka design).
//!
//! - `memory.remember` stores a text with a kind, tags, importance (0..1),
//!   source and metadata (same text and kind again updates the old one);
//! - `memory.recall` ranks memories by FTS5 BM25 relevance × importance ×
//!   freshness and marks the returned ones as used (`last_access`,
//!   `query_count`);
//! - `memory.decay` halves importance every `half_life_days` without use,
//!   or multiplies it by `factor`; frequently recalled memories gain some back;
//! - `memory.cleanup` removes (or with `dry_run` lists) old or unimportant
//!   memories;
//! - `memory.stats` counts them.
//!
//! The file is `.marktoflow/memory.db` beside the workflow unless `db` names one.
//! Hits have the fields of `kb.search` hits (`id`, `text`, `score`, `path`,
//! `title`, `section`, `metadata`, `mtime_ms`) so `rank.*` and `context.pack`
//! take them as they are.

use crate::core::time::{epoch_ms, parse_date_text, Clock, DateText};
use crate::core::{
    action::{Action, Call},
    error::{type_name, ActionError},
};
use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct MemoryAction;

const DAY_MS: f64 = 86_400_000.0;

#[async_trait]
impl Action for MemoryAction {
    fn specs(&self) -> &'static [crate::core::catalog::Spec] {
        SPECS
    }

    async fn call(&self, call: &Call<'_>, inputs: Value) -> Result<Value, ActionError> {
        if !inputs.is_object() {
            return Err(ActionError::Input(format!(
                "`memory.{}` takes a mapping of inputs, got {}",
                call.method,
                type_name(&inputs)
            )));
        }
        // Templated inputs render an unset value as "": treat it as not given,
        // so workflows can pass optional inputs through unconditionally.
        let inputs = match inputs {
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .filter(|(_, v)| {
                        !v.is_null() && v.as_str().is_none_or(|s| !s.trim().is_empty())
                    })
                    .collect(),
            ),
            other => other,
        };
        // Inputs are all checked before the file is touched.
        let clock = call.caps.clock.as_ref();
        let job = match call.method {
            "remember" => Job::Remember(remember_args(&inputs, clock)?),
            "recall" => Job::Recall(recall_args(&inputs, clock)?),
            "decay" => Job::Decay(decay_args(&inputs, clock)?),
            "cleanup" => Job::Cleanup(cleanup_args(&inputs, clock)?),
            "stats" => Job::Stats(kinds(&inputs)?),
            m => return Err(ActionError::Input(format!("unknown method `memory.{m}`"))),
        };
        let file = db_path(call, &inputs)?;
        let shown = file.shown();
        let work = tokio::task::spawn_blocking(move || -> Result<Value, MemError> {
            // `file` (and its open folder) lives as long as the connection.
            let mut db = open(&file.path())?;
            match job {
                Job::Remember(a) => remember(&mut db, a),
                Job::Recall(a) => recall(&mut db, a),
                Job::Decay(a) => decay(&mut db, a),
                Job::Cleanup(a) => cleanup(&mut db, a),
                Job::Stats(k) => stats(&db, &k),
            }
        });
        let mut out = tokio::select! {
            _ = call.caps.cancel.cancelled() => return Err(ActionError::Cancelled),
            r = work => r
                .map_err(|e| ActionError::failed(format!("memory.{}: stopped: {e}", call.method)))?
                .map_err(|e| e.into_action(&shown))?,
        };
        out["db"] = json!(shown);
        Ok(out)
    }
}

enum Job {
    Remember(RememberArgs),
    Recall(RecallArgs),
    Decay(DecayArgs),
    Cleanup(CleanupArgs),
    Stats(Vec<String>),
}

#[derive(Debug)]
enum MemError {
    Sql(rusqlite::Error),
    Io(String),
    Schema(String),
}

impl From<crate::core::sqlite::DbError> for MemError {
    fn from(e: crate::core::sqlite::DbError) -> Self {
        use crate::core::sqlite::DbError;
        match e {
            DbError::Sql(e) => MemError::Sql(e),
            DbError::Folder { .. } => MemError::Io(e.to_string()),
            DbError::TooNew { .. } => MemError::Schema(e.to_string()),
        }
    }
}

impl From<rusqlite::Error> for MemError {
    fn from(e: rusqlite::Error) -> Self {
        MemError::Sql(e)
    }
}

impl MemError {
    fn into_action(self, db: &str) -> ActionError {
        match self {
            MemError::Sql(e) => {
                let busy = matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                );
                let msg = format!("memory database `{db}`: {e}");
                if busy {
                    ActionError::retryable(msg)
                } else {
                    ActionError::failed(msg)
                }
            }
            MemError::Io(m) | MemError::Schema(m) => {
                ActionError::failed(format!("memory database `{db}`: {m}"))
            }
        }
    }
}

// ---------------------------------------------------------------- inputs

fn input(msg: impl Into<String>) -> ActionError {
    ActionError::Input(msg.into())
}

fn opt_str<'v>(inputs: &'v Value, field: &str) -> Result<Option<&'v str>, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(input(format!(
            "input `{field}` must be a string, got {}",
            type_name(other)
        ))),
    }
}

fn opt_num(inputs: &Value, field: &str) -> Result<Option<f64>, ActionError> {
    let n = match inputs.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_f64(),
        // Inputs from the CLI and webhooks often arrive as strings.
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    };
    match n {
        Some(x) if x.is_finite() => Ok(Some(x)),
        _ => Err(input(format!(
            "input `{field}` must be a number, got {}",
            inputs.get(field).map_or("nothing", type_name)
        ))),
    }
}

fn opt_bool(inputs: &Value, field: &str, default: bool) -> Result<bool, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(other) => Err(input(format!(
            "input `{field}` must be true or false, got {}",
            type_name(other)
        ))),
    }
}

fn unit(inputs: &Value, field: &str) -> Result<Option<f64>, ActionError> {
    match opt_num(inputs, field)? {
        Some(x) if !(0.0..=1.0).contains(&x) => Err(input(format!(
            "input `{field}` must be between 0 and 1, got {x}"
        ))),
        x => Ok(x),
    }
}

fn positive(inputs: &Value, field: &str) -> Result<Option<f64>, ActionError> {
    match opt_num(inputs, field)? {
        Some(x) if x <= 0.0 => Err(input(format!("input `{field}` must be above 0, got {x}"))),
        x => Ok(x),
    }
}

/// A list of strings: a YAML list, or one string split at commas.
fn str_list(inputs: &Value, field: &str) -> Result<Vec<String>, ActionError> {
    let items: Vec<String> = match inputs.get(field) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split(',').map(str::to_string).collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                other => Err(input(format!(
                    "input `{field}` must list strings, got a {}",
                    type_name(other)
                ))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => Err(input(format!(
            "input `{field}` must be a list of strings, got {}",
            type_name(other)
        )))?,
    };
    let mut out: Vec<String> = Vec::new();
    for s in items {
        let s = s.trim().trim_start_matches('#').trim().to_string();
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

/// `kind` (or `type`) as a filter: one or several kinds.
fn kinds(inputs: &Value) -> Result<Vec<String>, ActionError> {
    let field = if inputs.get("kind").is_some_and(|v| !v.is_null()) {
        "kind"
    } else {
        "type"
    };
    str_list(inputs, field)
}

/// A time as milliseconds since 1970: RFC 3339, `YYYY-MM-DD` or a number of ms.
fn time_ms(inputs: &Value, field: &str) -> Result<Option<i64>, ActionError> {
    match inputs.get(field) {
        None | Some(Value::Null) => Ok(None),
        // Keeps the arithmetic in range: 1970 up to the year 9999.
        Some(Value::Number(n)) => n
            .as_f64()
            .and_then(epoch_ms)
            .filter(|ms| *ms >= 0)
            .map(Some)
            .ok_or_else(|| {
                input(format!(
                    "input `{field}` must be milliseconds (or seconds) since 1970, up to the year 9999"
                ))
            }),
        Some(Value::String(s)) => {
            let s = s.trim();
            match parse_date_text(s) {
                Some(DateText::Zoned(t)) => return Ok(Some(t.timestamp_millis())),
                Some(DateText::Wall(t)) => return Ok(Some(t.and_utc().timestamp_millis())),
                None => {}
            }
            Err(input(format!(
                "input `{field}` must be a date like 2026-11-20 or 2026-11-20T09:30:00Z, got `{s}`"
            )))
        }
        Some(other) => Err(input(format!(
            "input `{field}` must be a date, got {}",
            type_name(other)
        ))),
    }
}

fn now_ms(inputs: &Value, clock: &dyn Clock) -> Result<i64, ActionError> {
    Ok(time_ms(inputs, "now")?.unwrap_or_else(|| clock.now_ms()))
}

fn iso(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn round(x: f64) -> f64 {
    (x * 1_000_000.0).round() / 1_000_000.0
}

// ---------------------------------------------------------------- the file

/// The database file for this call: a `db` the workflow names is reached
/// through its folder opened inside the write roots (see
/// `core::confined`), so SQLite cannot be sent out of them; the default file
/// sits at a fixed place in the state folder.
enum DbFile {
    Confined(crate::core::confined::Dir, std::ffi::OsString),
    Fixed(PathBuf),
}

impl DbFile {
    /// The path SQLite opens (through the open folder when confined).
    fn path(&self) -> PathBuf {
        match self {
            DbFile::Confined(dir, name) => dir.fd_path(name),
            DbFile::Fixed(p) => p.clone(),
        }
    }

    fn shown(&self) -> String {
        match self {
            DbFile::Confined(dir, name) => dir.path.join(name).display().to_string(),
            DbFile::Fixed(p) => p.display().to_string(),
        }
    }
}

fn db_path(call: &Call<'_>, inputs: &Value) -> Result<DbFile, ActionError> {
    let sb = &call.caps.sandbox;
    match opt_str(inputs, "db")? {
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

fn open(path: &Path) -> Result<Connection, MemError> {
    // Several runs (a server, a cron) may share one file.
    Ok(crate::core::sqlite::open(path, MIGRATIONS)?)
}

/// The schema, one migration per entry. Only ever append.
/// `decayed_at` / `decay_queries` make repeated decays compound correctly:
/// each run only counts the time and queries since the last.
const MIGRATIONS: &[&str] = &[r#"
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
struct Memory {
    rowid: i64,
    id: String,
    text: String,
    kind: String,
    tags: Vec<String>,
    importance: f64,
    source: Option<String>,
    metadata: Value,
    created_at: i64,
    last_access: i64,
    query_count: i64,
    decayed_at: Option<i64>,
    decay_queries: i64,
}

const COLUMNS: &str = "rowid, id, text, kind, tags, importance, source, metadata, created_at, last_access, query_count, decayed_at, decay_queries";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Memory> {
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
    fn to_json(&self) -> Value {
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
fn tag_text(tags: &[String]) -> String {
    tags.join(" ")
}

// ---------------------------------------------------------------- remember

struct RememberArgs {
    text: String,
    kind: String,
    tags: Vec<String>,
    importance: Option<f64>,
    source: Option<String>,
    metadata: Option<Value>,
    id: Option<String>,
    created_at: Option<i64>,
    now: i64,
    dedupe: bool,
}

fn remember_args(inputs: &Value, clock: &dyn Clock) -> Result<RememberArgs, ActionError> {
    let text = match inputs.get("text").or_else(|| inputs.get("content")) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(input("missing input `text` (what to remember)"))
        }
        Some(other) => {
            return Err(input(format!(
                "input `text` must be a string, got {}",
                type_name(other)
            )))
        }
    };
    let kind_field = if inputs.get("kind").is_some_and(|v| !v.is_null()) {
        "kind"
    } else {
        "type"
    };
    let kind = match opt_str(inputs, kind_field)? {
        Some(k) if !k.trim().is_empty() => k.trim().to_string(),
        _ => "note".to_string(),
    };
    let meta_field = if inputs.get("metadata").is_some_and(|v| !v.is_null()) {
        "metadata"
    } else {
        "meta"
    };
    let metadata = match inputs.get(meta_field) {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(Value::Object(m.clone())),
        Some(other) => {
            return Err(input(format!(
                "input `{meta_field}` must be a mapping, got {}",
                type_name(other)
            )))
        }
    };
    let id = match opt_str(inputs, "id")? {
        Some(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    };
    Ok(RememberArgs {
        text,
        kind,
        tags: str_list(inputs, "tags")?,
        importance: unit(inputs, "importance")?,
        source: opt_str(inputs, "source")?.map(str::to_string),
        metadata,
        id,
        created_at: time_ms(inputs, "created_at")?,
        now: now_ms(inputs, clock)?,
        dedupe: opt_bool(inputs, "dedupe", true)?,
    })
}

fn find(
    db: &Connection,
    sql_where: &str,
    p: impl rusqlite::Params,
) -> rusqlite::Result<Option<Memory>> {
    db.query_row(
        &format!("SELECT {COLUMNS} FROM memories WHERE {sql_where} LIMIT 1"),
        p,
        row,
    )
    .optional()
}

fn remember(db: &mut Connection, a: RememberArgs) -> Result<Value, MemError> {
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let existing = match &a.id {
        Some(id) => find(&tx, "id = ?1", params![id])?,
        None if a.dedupe => find(&tx, "text = ?1 AND kind = ?2", params![a.text, a.kind])?,
        None => None,
    };
    let (m, created) = match existing {
        // Remembering again refreshes it: new fields win, use counts stay.
        Some(old) => {
            let mut tags = old.tags.clone();
            for t in &a.tags {
                if !tags.contains(t) {
                    tags.push(t.clone());
                }
            }
            let mut metadata = old.metadata.clone();
            if let (Some(Value::Object(new)), Some(m)) = (&a.metadata, metadata.as_object_mut()) {
                for (k, v) in new {
                    m.insert(k.clone(), v.clone());
                }
            }
            let m = Memory {
                text: a.text.clone(),
                kind: a.kind.clone(),
                tags,
                importance: a.importance.unwrap_or(old.importance),
                source: a.source.clone().or(old.source.clone()),
                metadata,
                created_at: a.created_at.unwrap_or(old.created_at),
                last_access: a.now.max(old.last_access),
                ..old
            };
            tx.execute(
                "UPDATE memories SET text=?2, kind=?3, tags=?4, importance=?5, source=?6,
                   metadata=?7, created_at=?8, last_access=?9 WHERE rowid=?1",
                params![
                    m.rowid,
                    m.text,
                    m.kind,
                    serde_json::to_string(&m.tags).unwrap_or_default(),
                    m.importance,
                    m.source,
                    m.metadata.to_string(),
                    m.created_at,
                    m.last_access
                ],
            )?;
            tx.execute("DELETE FROM memories_fts WHERE rowid=?1", params![m.rowid])?;
            (m, false)
        }
        None => {
            let created_at = a.created_at.unwrap_or(a.now);
            let id =
                a.id.clone()
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let metadata = a.metadata.clone().unwrap_or_else(|| json!({}));
            let importance = a.importance.unwrap_or(0.5);
            tx.execute(
                "INSERT INTO memories (id, text, kind, tags, importance, source, metadata,
                   created_at, last_access, query_count) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,0)",
                params![
                    id,
                    a.text,
                    a.kind,
                    serde_json::to_string(&a.tags).unwrap_or_default(),
                    importance,
                    a.source,
                    metadata.to_string(),
                    created_at,
                    created_at.max(a.now)
                ],
            )?;
            let rowid = tx.last_insert_rowid();
            let m = Memory {
                rowid,
                id,
                text: a.text.clone(),
                kind: a.kind.clone(),
                tags: a.tags.clone(),
                importance,
                source: a.source.clone(),
                metadata,
                created_at,
                last_access: created_at.max(a.now),
                query_count: 0,
                decayed_at: None,
                decay_queries: 0,
            };
            (m, true)
        }
    };
    tx.execute(
        "INSERT INTO memories_fts (rowid, text, tags) VALUES (?1, ?2, ?3)",
        params![m.rowid, m.text, tag_text(&m.tags)],
    )?;
    tx.commit()?;
    Ok(json!({"id": m.id, "created": created, "memory": m.to_json()}))
}

// ---------------------------------------------------------------- recall

struct RecallArgs {
    query: String,
    all_terms: bool,
    top_k: usize,
    kinds: Vec<String>,
    tags: Vec<String>,
    min_importance: Option<f64>,
    half_life_days: f64,
    importance_weight: f64,
    recency_weight: f64,
    threshold: Option<f64>,
    touch: bool,
    now: i64,
}

fn recall_args(inputs: &Value, clock: &dyn Clock) -> Result<RecallArgs, ActionError> {
    let query = match inputs.get("query") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(input(format!(
                "input `query` must be a string, got {}",
                type_name(other)
            )))
        }
    };
    let all_terms = match opt_str(inputs, "match")? {
        None | Some("any") => false,
        Some("all") => true,
        Some(other) => {
            return Err(input(format!(
                "input `match` must be any or all, got `{other}`"
            )))
        }
    };
    let top_k = match opt_num(inputs, "top_k")?.or(opt_num(inputs, "topK")?) {
        None => 5,
        Some(k) if k >= 1.0 => k.min(10_000.0) as usize,
        Some(_) => return Err(input("input `top_k` must be at least 1")),
    };
    Ok(RecallArgs {
        query,
        all_terms,
        top_k,
        kinds: kinds(inputs)?,
        tags: str_list(inputs, "tags")?,
        min_importance: unit(inputs, "min_importance")?,
        half_life_days: positive(inputs, "half_life_days")?.unwrap_or(30.0),
        importance_weight: unit(inputs, "importance_weight")?.unwrap_or(1.0),
        recency_weight: unit(inputs, "recency_weight")?.unwrap_or(0.5),
        threshold: opt_num(inputs, "threshold")?,
        touch: opt_bool(inputs, "touch", true)?,
        now: now_ms(inputs, clock)?,
    })
}

/// The words of `q` as an FTS5 query: each one a quoted string (so no user
/// text is ever read as FTS5 syntax), joined with OR (any) or AND (all).
/// None when `q` has no words.
pub fn fts_query(q: &str, all_terms: bool) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for w in q.split(|c: char| !c.is_alphanumeric()) {
        let w = w.to_lowercase();
        if !w.is_empty() && !words.contains(&w) {
            words.push(w);
        }
    }
    if words.is_empty() {
        return None;
    }
    // Only alphanumerics are left, but double any quote anyway: the quoting
    // must hold even if the split above changes.
    let quoted: Vec<String> = words
        .iter()
        .take(64)
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    Some(quoted.join(if all_terms { " AND " } else { " OR " }))
}

fn filter_sql(
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

fn recall(db: &mut Connection, a: RecallArgs) -> Result<Value, MemError> {
    let mut p: Vec<rusqlite::types::Value> = Vec::new();
    let has_query = !a.query.trim().is_empty();
    let fts = fts_query(&a.query, a.all_terms);
    // Candidates: BM25 order first (many more than asked, so importance and
    // freshness can reorder them), or every memory without a query.
    let candidates: Vec<(Memory, f64)> = if has_query {
        let Some(fq) = fts else {
            return Ok(
                json!({"query": a.query, "found": false, "count": 0, "total": 0, "hits": []}),
            );
        };
        p.push(fq.into());
        let wh = filter_sql(&a.kinds, a.min_importance, &mut p);
        let cols = COLUMNS
            .split(", ")
            .map(|c| format!("m.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {cols}, bm25(memories_fts, 1.0, 0.5) AS b FROM memories_fts
             JOIN memories m ON m.rowid = memories_fts.rowid
             WHERE memories_fts MATCH ?1 AND {wh} ORDER BY b LIMIT {}",
            (a.top_k * 20).max(200)
        );
        let mut st = db.prepare(&sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| {
            Ok((row(r)?, r.get::<_, f64>(13)?))
        })?;
        rows.collect::<Result<_, _>>()?
    } else {
        let wh = filter_sql(&a.kinds, a.min_importance, &mut p);
        let cols = COLUMNS
            .split(", ")
            .map(|c| format!("m.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("SELECT {cols} FROM memories m WHERE {wh}");
        let mut st = db.prepare(&sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(p.iter()), |r| Ok((row(r)?, 0.0)))?;
        rows.collect::<Result<_, _>>()?
    };
    let candidates: Vec<(Memory, f64)> = candidates
        .into_iter()
        .filter(|(m, _)| {
            a.tags
                .iter()
                .all(|t| m.tags.iter().any(|x| x.eq_ignore_ascii_case(t)))
        })
        .collect();
    let total = candidates.len();
    // SQLite's bm25 is negative, lower is better: flip it and scale to 0..1
    // so the composite stays comparable across queries.
    let best = candidates.iter().map(|(_, b)| -b).fold(0.0f64, f64::max);
    let mut scored: Vec<(f64, f64, f64, Memory, f64)> = candidates
        .into_iter()
        .map(|(m, b)| {
            let relevance = if has_query && best > 0.0 {
                (-b).max(0.0) / best
            } else {
                1.0
            };
            let days = a.now.saturating_sub(m.last_access).max(0) as f64 / DAY_MS;
            let freshness = 0.5f64.powf(days / a.half_life_days);
            let score = relevance
                * (1.0 - a.importance_weight + a.importance_weight * m.importance)
                * (1.0 - a.recency_weight + a.recency_weight * freshness);
            (score, relevance, freshness, m, -b)
        })
        .collect();
    scored.sort_by(|x, y| {
        y.0.total_cmp(&x.0)
            .then(y.3.created_at.cmp(&x.3.created_at))
    });
    if let Some(t) = a.threshold {
        scored.retain(|s| s.0 >= t);
    }
    scored.truncate(a.top_k);
    if a.touch && !scored.is_empty() {
        let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut st = tx.prepare(
                "UPDATE memories SET last_access = MAX(last_access, ?2), query_count = query_count + 1 WHERE rowid = ?1",
            )?;
            for s in &mut scored {
                st.execute(params![s.3.rowid, a.now])?;
                s.3.last_access = s.3.last_access.max(a.now);
                s.3.query_count = s.3.query_count.saturating_add(1);
            }
        }
        tx.commit()?;
    }
    let hits: Vec<Value> = scored
        .into_iter()
        .map(|(score, relevance, freshness, m, bm25)| {
            let mut h = m.to_json();
            h["score"] = json!(round(score));
            h["relevance"] = json!(round(relevance));
            h["freshness"] = json!(round(freshness));
            h["bm25"] = json!(round(bm25));
            h
        })
        .collect();
    Ok(json!({
        "query": a.query,
        "found": !hits.is_empty(),
        "count": hits.len(),
        "total": total,
        "hits": hits,
    }))
}

// ---------------------------------------------------------------- decay

struct DecayArgs {
    half_life_days: Option<f64>,
    factor: Option<f64>,
    boost_after: i64,
    boost_step: f64,
    boost_max: f64,
    floor: f64,
    kinds: Vec<String>,
    dry_run: bool,
    now: i64,
    report_limit: usize,
}

fn decay_args(inputs: &Value, clock: &dyn Clock) -> Result<DecayArgs, ActionError> {
    let half_life_days = positive(inputs, "half_life_days")?;
    let factor = unit(inputs, "factor")?;
    if half_life_days.is_some() && factor.is_some() {
        return Err(input("give `half_life_days` or `factor`, not both"));
    }
    Ok(DecayArgs {
        half_life_days: if factor.is_none() {
            Some(half_life_days.unwrap_or(30.0))
        } else {
            None
        },
        factor,
        boost_after: opt_num(inputs, "boost_after_queries")?
            .unwrap_or(10.0)
            .max(0.0) as i64,
        boost_step: unit(inputs, "boost_per_query")?.unwrap_or(0.01),
        boost_max: unit(inputs, "max_boost")?.unwrap_or(0.15),
        floor: unit(inputs, "floor")?.unwrap_or(0.0),
        kinds: kinds(inputs)?,
        dry_run: opt_bool(inputs, "dry_run", false)?,
        now: now_ms(inputs, clock)?,
        report_limit: opt_num(inputs, "report_limit")?.unwrap_or(100.0).max(0.0) as usize,
    })
}

fn all(db: &Connection, kinds: &[String]) -> rusqlite::Result<Vec<Memory>> {
    let mut p = Vec::new();
    let wh = filter_sql(kinds, None, &mut p);
    let mut st = db.prepare(&format!(
        "SELECT {COLUMNS} FROM memories m WHERE {wh} ORDER BY m.created_at"
    ))?;
    let rows = st.query_map(rusqlite::params_from_iter(p.iter()), row)?;
    rows.collect()
}

fn decay(db: &mut Connection, a: DecayArgs) -> Result<Value, MemError> {
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mems = all(&tx, &a.kinds)?;
    let (mut changed, mut boosted) = (0usize, 0usize);
    let mut changes = Vec::new();
    {
        let mut st = tx.prepare(
            "UPDATE memories SET importance = ?2, decayed_at = ?3, decay_queries = ?4 WHERE rowid = ?1",
        )?;
        for m in &mems {
            // Only the time since the later of last use and last decay counts,
            // so running decay daily compounds to the same as running it once.
            let since = m.last_access.max(m.decayed_at.unwrap_or(i64::MIN));
            let days = a.now.saturating_sub(since).max(0) as f64 / DAY_MS;
            let f = match (a.factor, a.half_life_days) {
                (Some(f), _) => f,
                (None, Some(h)) => 0.5f64.powf(days / h),
                (None, None) => 1.0,
            };
            let mut imp = m.importance * f;
            // The seed's query boost, for the queries since the last decay.
            let new_queries = m.query_count.saturating_sub(m.decay_queries);
            let mut boost = 0.0;
            if new_queries > a.boost_after {
                boost = (new_queries as f64 * a.boost_step).min(a.boost_max);
                imp += boost;
                boosted += 1;
            }
            let imp = imp.clamp(a.floor.min(m.importance), 1.0);
            if (imp - m.importance).abs() > 1e-9 {
                changed += 1;
                if changes.len() < a.report_limit {
                    changes.push(json!({
                        "id": m.id, "kind": m.kind,
                        "before": round(m.importance), "after": round(imp),
                        "days_idle": round(days), "boost": round(boost),
                    }));
                }
            }
            if !a.dry_run {
                st.execute(params![m.rowid, imp, a.now, m.query_count])?;
            }
        }
    }
    if a.dry_run {
        tx.rollback()?;
    } else {
        tx.commit()?;
    }
    Ok(json!({
        "dry_run": a.dry_run,
        "memories": mems.len(),
        "decayed": changed,
        "boosted": boosted,
        "unchanged": mems.len() - changed,
        "half_life_days": a.half_life_days,
        "factor": a.factor,
        "changes": changes,
    }))
}

// ---------------------------------------------------------------- cleanup

struct CleanupArgs {
    max_age_days: Option<f64>,
    min_importance: Option<f64>,
    by_last_access: bool,
    kinds: Vec<String>,
    dry_run: bool,
    now: i64,
    report_limit: usize,
}

fn cleanup_args(inputs: &Value, clock: &dyn Clock) -> Result<CleanupArgs, ActionError> {
    let max_age_days = opt_num(inputs, "max_age_days")?;
    if max_age_days.is_some_and(|d| d < 0.0) {
        return Err(input("input `max_age_days` must not be negative"));
    }
    let min_importance = unit(inputs, "min_importance")?;
    if max_age_days.is_none() && min_importance.is_none() {
        // Without a rule every memory would go: make the caller say so.
        return Err(input(
            "give `max_age_days` and/or `min_importance` (what makes a memory removable)",
        ));
    }
    let by_last_access = match opt_str(inputs, "age_from")? {
        None | Some("created_at") => false,
        Some("last_access") => true,
        Some(other) => {
            return Err(input(format!(
                "input `age_from` must be created_at or last_access, got `{other}`"
            )))
        }
    };
    Ok(CleanupArgs {
        max_age_days,
        min_importance,
        by_last_access,
        kinds: kinds(inputs)?,
        dry_run: opt_bool(inputs, "dry_run", false)?,
        now: now_ms(inputs, clock)?,
        report_limit: opt_num(inputs, "report_limit")?.unwrap_or(100.0).max(0.0) as usize,
    })
}

fn cleanup(db: &mut Connection, a: CleanupArgs) -> Result<Value, MemError> {
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mems = all(&tx, &a.kinds)?;
    let total: i64 = tx.query_row("SELECT COUNT(*) FROM memories", [], |r| r.get(0))?;
    let (mut too_old, mut low, mut both) = (0usize, 0usize, 0usize);
    let mut report = Vec::new();
    let mut gone = Vec::new();
    for m in &mems {
        let t = if a.by_last_access {
            m.last_access
        } else {
            m.created_at
        };
        let age = a.now.saturating_sub(t).max(0) as f64 / DAY_MS;
        let old = a.max_age_days.is_some_and(|d| age > d);
        let weak = a.min_importance.is_some_and(|mi| m.importance < mi);
        let reason = match (old, weak) {
            (true, true) => {
                both += 1;
                "combined"
            }
            (true, false) => {
                too_old += 1;
                "too_old"
            }
            (false, true) => {
                low += 1;
                "low_importance"
            }
            (false, false) => continue,
        };
        gone.push(m.rowid);
        if report.len() < a.report_limit {
            let preview: String = m.text.chars().take(120).collect();
            report.push(json!({
                "id": m.id, "kind": m.kind, "text": preview,
                "importance": round(m.importance), "created_at": iso(m.created_at),
                "last_access": iso(m.last_access), "age_days": round(age), "reason": reason,
            }));
        }
    }
    if !a.dry_run {
        let mut d1 = tx.prepare("DELETE FROM memories WHERE rowid = ?1")?;
        let mut d2 = tx.prepare("DELETE FROM memories_fts WHERE rowid = ?1")?;
        for r in &gone {
            d1.execute(params![r])?;
            d2.execute(params![r])?;
        }
    }
    tx.commit()?;
    let n = gone.len();
    Ok(json!({
        "dry_run": a.dry_run,
        "matched": n,
        "removed": if a.dry_run { 0 } else { n },
        "kept": total as usize - if a.dry_run { 0 } else { n },
        "reasons": {"too_old": too_old, "low_importance": low, "combined": both},
        "memories": report,
    }))
}

// ---------------------------------------------------------------- stats

fn stats(db: &Connection, kinds: &[String]) -> Result<Value, MemError> {
    let mems = all(db, kinds)?;
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_tag: BTreeMap<String, usize> = BTreeMap::new();
    for m in &mems {
        *by_kind.entry(m.kind.clone()).or_default() += 1;
        for t in &m.tags {
            *by_tag.entry(t.clone()).or_default() += 1;
        }
    }
    let n = mems.len();
    let avg = if n == 0 {
        Value::Null
    } else {
        json!(round(
            mems.iter().map(|m| m.importance).sum::<f64>() / n as f64
        ))
    };
    let oldest = mems.iter().min_by_key(|m| m.created_at);
    let newest = mems.iter().max_by_key(|m| m.created_at);
    let most = mems
        .iter()
        .filter(|m| m.query_count > 0)
        .max_by_key(|m| m.query_count);
    let brief = |m: Option<&Memory>| match m {
        Some(m) => json!({"id": m.id, "text": m.text.chars().take(120).collect::<String>(),
            "created_at": iso(m.created_at), "query_count": m.query_count}),
        None => Value::Null,
    };
    let by_kind: Map<String, Value> = by_kind.into_iter().map(|(k, v)| (k, json!(v))).collect();
    let by_tag: Map<String, Value> = by_tag.into_iter().map(|(k, v)| (k, json!(v))).collect();
    Ok(json!({
        "count": n,
        "by_kind": by_kind,
        "by_tag": by_tag,
        "avg_importance": avg,
        "total_queries": mems.iter().fold(0i64, |a, m| a.saturating_add(m.query_count)),
        "oldest": brief(oldest),
        "newest": brief(newest),
        "most_recalled": brief(most),
        "schema_version": MIGRATIONS.len(),
    }))
}

use crate::core::catalog::{
    alias, input as arg, spec, Input, Spec, ANY, BOOLEAN, EFFECTS, INTEGER, MAPPING, NUMBER,
    STRING, STRING_OR_LIST,
};

const DB: Input = arg(
    "db",
    STRING,
    "The memory file (default `.marktoflow/memory.db` beside the workflow).",
);
const NOW: Input = arg(
    "now",
    ANY,
    "The current time (RFC 3339, YYYY-MM-DD or epoch ms).",
);
const KIND: Input = arg("kind", STRING_OR_LIST, "Only memories of these kinds.");
const KIND_ALIAS: Input = alias("type", "kind");
const DRY_RUN: Input =
    arg("dry_run", BOOLEAN, "Report without changing anything.").default("false");
const REPORT: Input = arg(
    "report_limit",
    INTEGER,
    "At most this many rows in the report.",
)
.default("100");
const HALF_LIFE: Input = arg(
    "half_life_days",
    NUMBER,
    "Days for freshness (or importance) to halve.",
)
.default("30");
const MIN_IMPORTANCE: Input = arg("min_importance", NUMBER, "Importance threshold (0..1).");

/// The contracts of `memory.*`.
pub const SPECS: &[Spec] = &[
    spec("memory", "remember", "Stores a memory (or updates the same one).")
        .inputs(&[
            arg("text", STRING, "What to remember.").required(),
            alias("content", "text"),
            arg("kind", STRING, "Its kind.").default("note"),
            KIND_ALIAS,
            arg("tags", STRING_OR_LIST, "Tags (a list or comma-separated)."),
            arg("importance", NUMBER, "0..1.").default("0.5"),
            arg("source", STRING, "Where it came from."),
            arg("metadata", MAPPING, "Any fields."),
            alias("meta", "metadata"),
            arg("id", STRING, "Update this memory."),
            arg("created_at", ANY, "When it was made (default now)."),
            arg("dedupe", BOOLEAN, "The same text and kind updates instead of adding.").default("true"),
            NOW,
            DB,
        ])
        .returns("{id, created, memory, db}")
        .traits(EFFECTS),
    spec("memory", "recall", "Finds memories: BM25 × importance × freshness.")
        .inputs(&[
            arg("query", STRING, "The words (empty: every memory)."),
            arg("top_k", INTEGER, "How many.").default("5"),
            alias("topK", "top_k"),
            KIND,
            KIND_ALIAS,
            arg("tags", STRING_OR_LIST, "All must be present."),
            MIN_IMPORTANCE,
            arg("match", STRING, "Any word, or every word.").default("any").one_of(&["any", "all"]),
            HALF_LIFE,
            arg("importance_weight", NUMBER, "0..1.").default("1"),
            arg("recency_weight", NUMBER, "0..1.").default("0.5"),
            arg("threshold", NUMBER, "The lowest score kept."),
            arg("touch", BOOLEAN, "Count the recall on returned memories.").default("true"),
            NOW,
            DB,
        ])
        .returns("{query, found, count, total, hits, db}")
        .traits(EFFECTS),
    spec("memory", "decay", "Lowers importance with time; boosts often-recalled memories.")
        .inputs(&[
            HALF_LIFE,
            arg("factor", NUMBER, "Multiply importance by this instead (0..1)."),
            KIND,
            KIND_ALIAS,
            arg("boost_after_queries", INTEGER, "Recalls before a boost.").default("10"),
            arg("boost_per_query", NUMBER, "Boost per recall.").default("0.01"),
            arg("max_boost", NUMBER, "Largest boost.").default("0.15"),
            arg("floor", NUMBER, "Importance never goes below this.").default("0"),
            DRY_RUN,
            REPORT,
            NOW,
            DB,
        ])
        .returns("{dry_run, memories, decayed, boosted, unchanged, half_life_days, factor, changes, db}")
        .traits(EFFECTS),
    spec("memory", "cleanup", "Removes old or unimportant memories.")
        .inputs(&[
            arg("max_age_days", NUMBER, "Older than this goes."),
            MIN_IMPORTANCE,
            arg("age_from", STRING, "Which time counts.")
                .default("created_at")
                .one_of(&["created_at", "last_access"]),
            KIND,
            KIND_ALIAS,
            DRY_RUN,
            REPORT,
            NOW,
            DB,
        ])
        .returns("{dry_run, matched, removed, kept, reasons, memories, db}")
        .traits(EFFECTS),
    spec("memory", "stats", "Counts and summaries of the memories.")
        .inputs(&[KIND, KIND_ALIAS, DB])
        .returns("{count, by_kind, by_tag, avg_importance, total_queries, oldest, newest, most_recalled, schema_version, db}")
        .traits(EFFECTS),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn remember_args_now(inputs: &Value) -> Result<RememberArgs, ActionError> {
        remember_args(inputs, &crate::core::time::SystemClock)
    }

    fn recall_args_now(inputs: &Value) -> Result<RecallArgs, ActionError> {
        recall_args(inputs, &crate::core::time::SystemClock)
    }

    fn decay_args_now(inputs: &Value) -> Result<DecayArgs, ActionError> {
        decay_args(inputs, &crate::core::time::SystemClock)
    }

    fn cleanup_args_now(inputs: &Value) -> Result<CleanupArgs, ActionError> {
        cleanup_args(inputs, &crate::core::time::SystemClock)
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "mtf-mem-{}-{name}-{}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d.join("memory.db")
    }

    fn put(db: &mut Connection, v: Value) -> Value {
        remember(db, remember_args_now(&v).unwrap()).unwrap()
    }

    const NOW: &str = "2026-11-20T12:00:00Z";

    fn seeded(name: &str) -> (PathBuf, Connection) {
        let p = tmp(name);
        let mut db = open(&p).unwrap();
        put(
            &mut db,
            json!({"text": "Phase 7.2 delegation complete: 89% token savings", "kind": "insight", "importance": 0.9, "tags": ["delegation", "tokens"], "now": NOW}),
        );
        put(
            &mut db,
            json!({"text": "Token budget for the nightly report is 4000", "kind": "fact", "importance": 0.4, "now": NOW}),
        );
        put(
            &mut db,
            json!({"text": "Buy oat milk", "kind": "todo", "importance": 0.1, "created_at": "2026-06-01", "now": "2026-06-01"}),
        );
        (p, db)
    }

    #[test]
    fn fts_query_quotes_every_word() {
        assert_eq!(
            fts_query("token savings", false).unwrap(),
            "\"token\" OR \"savings\""
        );
        assert_eq!(
            fts_query("a AND b", true).unwrap(),
            "\"a\" AND \"and\" AND \"b\""
        );
        assert_eq!(fts_query("\"){}*:^-NEAR(", false).unwrap(), "\"near\"");
        assert!(fts_query("!!! ??", false).is_none());
    }

    #[test]
    fn hostile_queries_never_break_the_match() {
        let (_p, mut db) = seeded("hostile");
        for q in [
            "\"",
            "token*",
            "text:token",
            "NOT token",
            "a\"b OR (c",
            "NEAR(token savings)",
            "^token",
            "-",
            "'; DROP TABLE memories; --",
            "日本語 トークン",
        ] {
            let r = recall(
                &mut db,
                recall_args_now(&json!({"query": q, "now": NOW})).unwrap(),
            );
            assert!(r.is_ok(), "{q}: {r:?}");
        }
        assert_eq!(stats(&db, &[]).unwrap()["count"], 3);
    }

    #[test]
    fn filters_and_an_empty_query() {
        let (_p, mut db) = seeded("filters");
        let q = |db: &mut Connection, v: Value| recall(db, recall_args_now(&v).unwrap()).unwrap();
        // No query: every memory, by importance × freshness.
        let r = q(&mut db, json!({"now": NOW, "touch": false}));
        assert_eq!(r["count"], 3);
        assert_eq!(r["hits"][0]["kind"], "insight");
        assert_eq!(r["hits"][2]["kind"], "todo");
        let r = q(
            &mut db,
            json!({"query": "token", "tags": ["tokens"], "now": NOW}),
        );
        assert_eq!(r["count"], 1, "{r}");
        let r = q(&mut db, json!({"kind": ["fact", "todo"], "now": NOW}));
        assert_eq!(r["count"], 2);
        let r = q(&mut db, json!({"min_importance": 0.5, "now": NOW}));
        assert_eq!(r["count"], 1);
        let r = q(
            &mut db,
            json!({"query": "token budget", "match": "all", "now": NOW}),
        );
        assert_eq!(r["hits"][0]["kind"], "fact");
        assert_eq!(r["count"], 1);
        // Punctuation only: no words, no hits (and no error).
        assert_eq!(q(&mut db, json!({"query": "?!*"}))["count"], 0);
        assert!(matches!(
            time_ms(&json!({"now": -5}), "now"),
            Err(ActionError::Input(m)) if m.contains("`now`")
        ));
    }

    #[test]
    fn remember_recall_ranks_and_touches() {
        let (p, mut db) = seeded("recall");
        let r = recall(
            &mut db,
            recall_args_now(&json!({"query": "token savings", "now": NOW})).unwrap(),
        )
        .unwrap();
        assert_eq!(r["count"], 2, "{r}");
        let top = &r["hits"][0];
        assert_eq!(top["kind"], "insight");
        assert_eq!(top["query_count"], 1);
        assert!(top["score"].as_f64().unwrap() > r["hits"][1]["score"].as_f64().unwrap());
        assert_eq!(
            top["path"],
            format!("memory:{}", top["id"].as_str().unwrap())
        );
        // The bump is on disk: a fresh connection sees it.
        drop(db);
        let db = open(&p).unwrap();
        let s = stats(&db, &[]).unwrap();
        assert_eq!(s["total_queries"], 2);
        assert_eq!(s["by_kind"]["insight"], 1);
        assert_eq!(s["most_recalled"]["query_count"], 1);
    }

    #[test]
    fn importance_can_outrank_relevance() {
        let p = tmp("importance");
        let mut db = open(&p).unwrap();
        put(
            &mut db,
            json!({"text": "deploy deploy deploy checklist", "importance": 0.05, "now": NOW}),
        );
        put(
            &mut db,
            json!({"text": "deploy notes for the release", "importance": 1.0, "now": NOW}),
        );
        let r = recall(
            &mut db,
            recall_args_now(&json!({"query": "deploy", "now": NOW, "touch": false})).unwrap(),
        )
        .unwrap();
        assert_eq!(r["hits"][0]["importance"], 1.0, "{r}");
        let r = recall(
            &mut db,
            recall_args_now(&json!({"query": "deploy", "now": NOW, "importance_weight": 0}))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(r["hits"][0]["importance"], 0.05, "{r}");
    }

    #[test]
    fn remember_again_updates_instead_of_duplicating() {
        let (_p, mut db) = seeded("dedupe");
        let again = put(
            &mut db,
            json!({"text": "Buy oat milk", "kind": "todo", "importance": 0.3, "tags": "shopping", "now": NOW}),
        );
        assert_eq!(again["created"], false);
        assert_eq!(again["memory"]["importance"], 0.3);
        assert_eq!(again["memory"]["tags"], json!(["shopping"]));
        assert_eq!(stats(&db, &[]).unwrap()["count"], 3);
        let r = recall(
            &mut db,
            recall_args_now(&json!({"query": "shopping", "now": NOW})).unwrap(),
        )
        .unwrap();
        assert_eq!(r["count"], 1, "tags are searchable: {r}");
        let id = again["id"].as_str().unwrap();
        let by_id = put(
            &mut db,
            json!({"id": id, "text": "Buy oat milk and bread", "kind": "todo", "now": NOW}),
        );
        assert_eq!(by_id["created"], false);
        let r = recall(
            &mut db,
            recall_args_now(&json!({"query": "bread", "kind": "todo", "now": NOW})).unwrap(),
        )
        .unwrap();
        assert_eq!(r["hits"][0]["id"], id);
        assert_eq!(
            recall(
                &mut db,
                recall_args_now(&json!({"query": "oat", "kind": "fact", "now": NOW})).unwrap()
            )
            .unwrap()["count"],
            0
        );
    }

    #[test]
    fn decay_halves_per_half_life_and_compounds() {
        let (_p, mut db) = seeded("decay");
        let later = "2026-12-20T12:00:00Z";
        let d = decay(
            &mut db,
            decay_args_now(&json!({"half_life_days": 30, "now": later, "dry_run": true})).unwrap(),
        )
        .unwrap();
        assert_eq!(d["decayed"], 3);
        assert_eq!(
            stats(&db, &["insight".into()]).unwrap()["avg_importance"],
            0.9,
            "dry run"
        );
        let d = decay(
            &mut db,
            decay_args_now(&json!({"half_life_days": 30, "now": later})).unwrap(),
        )
        .unwrap();
        let insight = d["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "insight")
            .unwrap();
        assert_eq!(insight["after"], 0.45);
        // Same moment again: no time has passed since the last decay.
        let d = decay(
            &mut db,
            decay_args_now(&json!({"half_life_days": 30, "now": later})).unwrap(),
        )
        .unwrap();
        assert_eq!(d["decayed"], 0, "{d}");
        let d = decay(
            &mut db,
            decay_args_now(&json!({"factor": 0.5, "kind": "fact"})).unwrap(),
        )
        .unwrap();
        assert_eq!(d["changes"][0]["after"], 0.1);
    }

    #[test]
    fn frequently_recalled_memories_gain_importance() {
        let (_p, mut db) = seeded("boost");
        for _ in 0..12 {
            recall(
                &mut db,
                recall_args_now(&json!({"query": "delegation", "now": NOW})).unwrap(),
            )
            .unwrap();
        }
        let d = decay(&mut db, decay_args_now(&json!({"now": NOW})).unwrap()).unwrap();
        assert_eq!(d["boosted"], 1);
        let c = d["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "insight")
            .unwrap();
        assert_eq!(c["after"], 1.0, "{d}");
    }

    #[test]
    fn cleanup_dry_run_then_real() {
        let (_p, mut db) = seeded("cleanup");
        let a = json!({"max_age_days": 90, "min_importance": 0.3, "now": NOW, "dry_run": true});
        let c = cleanup(&mut db, cleanup_args_now(&a).unwrap()).unwrap();
        assert_eq!(c["matched"], 1);
        assert_eq!(c["removed"], 0);
        assert_eq!(c["reasons"]["combined"], 1);
        assert_eq!(c["memories"][0]["text"], "Buy oat milk");
        assert_eq!(stats(&db, &[]).unwrap()["count"], 3);
        let a = json!({"min_importance": 0.5, "now": NOW});
        let c = cleanup(&mut db, cleanup_args_now(&a).unwrap()).unwrap();
        assert_eq!(c["removed"], 2);
        assert_eq!(c["kept"], 1);
        assert_eq!(stats(&db, &[]).unwrap()["count"], 1);
        let r = recall(
            &mut db,
            recall_args_now(&json!({"query": "milk budget"})).unwrap(),
        )
        .unwrap();
        assert_eq!(r["count"], 0, "the FTS rows went too: {r}");
    }

    #[test]
    fn bad_inputs_name_the_field() {
        let e = |r: Result<RememberArgs, ActionError>| match r {
            Err(ActionError::Input(m)) => m,
            _ => panic!("expected an input error"),
        };
        assert!(e(remember_args_now(&json!({}))).contains("`text`"));
        assert!(
            e(remember_args_now(&json!({"text": "x", "importance": 2}))).contains("`importance`")
        );
        assert!(e(remember_args_now(&json!({"text": "x", "tags": {"a": 1}}))).contains("`tags`"));
        assert!(e(remember_args_now(&json!({"text": "x", "metadata": [1]}))).contains("`metadata`"));
        assert!(e(remember_args_now(
            &json!({"text": "x", "created_at": "yesterday-ish"})
        ))
        .contains("`created_at`"));
        assert!(
            matches!(cleanup_args_now(&json!({})), Err(ActionError::Input(m)) if m.contains("max_age_days"))
        );
        assert!(
            matches!(recall_args_now(&json!({"top_k": 0})), Err(ActionError::Input(m)) if m.contains("`top_k`"))
        );
        assert!(
            matches!(recall_args_now(&json!({"query": 3})), Err(ActionError::Input(m)) if m.contains("`query`"))
        );
        assert!(matches!(
            decay_args_now(&json!({"factor": 0.5, "half_life_days": 3})),
            Err(ActionError::Input(_))
        ));
        assert!(
            matches!(decay_args_now(&json!({"half_life_days": 0})), Err(ActionError::Input(m)) if m.contains("`half_life_days`"))
        );
    }

    #[test]
    fn concurrent_writers_share_one_file() {
        let p = tmp("concurrent");
        drop(open(&p).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let p = p.clone();
                std::thread::spawn(move || {
                    let mut db = open(&p).unwrap();
                    let mut returned = 0;
                    for i in 0..25 {
                        put(&mut db, json!({"text": format!("thread {t} memory {i}")}));
                        let r = recall(
                            &mut db,
                            recall_args_now(&json!({"query": "memory"})).unwrap(),
                        )
                        .unwrap();
                        returned += r["count"].as_i64().unwrap();
                    }
                    returned
                })
            })
            .collect();
        let returned: i64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let db = open(&p).unwrap();
        let s = stats(&db, &[]).unwrap();
        assert_eq!(s["count"], 100);
        assert_eq!(
            s["total_queries"], returned,
            "every returned hit was bumped once"
        );
    }

    #[test]
    fn newer_schema_is_refused() {
        let p = tmp("schema");
        drop(open(&p).unwrap());
        let c = Connection::open(&p).unwrap();
        c.execute("INSERT INTO schema_version (version) VALUES (99)", [])
            .unwrap();
        drop(c);
        assert!(matches!(open(&p), Err(MemError::Schema(_))));
    }
}
