//! `memory.remember`: store a text, or update the one with the same text
//! and kind.

use super::args::{names, now_ms, time_ms};
use super::db::{row, tag_text, Memory, COLUMNS};
use super::MemError;
use crate::core::args::Args;
use crate::core::error::ActionError;
use crate::core::time::Clock;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

pub(super) struct RememberArgs {
    text: String,
    kind: String,
    tags: Vec<String>,
    importance: Option<f64>,
    new_importance: f64,
    source: Option<String>,
    metadata: Option<Value>,
    id: Option<String>,
    created_at: Option<i64>,
    now: i64,
    dedupe: bool,
}

pub(super) fn remember_args(a: &Args, clock: &dyn Clock) -> Result<RememberArgs, ActionError> {
    // Given, it replaces a remembered memory's importance; a new memory
    // takes the declared default.
    let importance = a
        .unit("importance")?
        .ok_or_else(|| a.missing("importance"))?;
    Ok(RememberArgs {
        text: a.required_str("text")?.trim().to_string(),
        kind: a.text("kind")?.trim().to_string(),
        tags: names(a, "tags")?,
        importance: a.is_given("importance").then_some(importance),
        new_importance: importance,
        source: a.str("source")?.map(str::to_string),
        metadata: a
            .mapping("metadata")?
            .map(|m| Value::Object(m.into_owned())),
        id: a.str("id")?.map(|s| s.trim().to_string()),
        created_at: time_ms(a, "created_at")?,
        now: now_ms(a, clock)?,
        dedupe: a.bool("dedupe")?,
    })
}

pub(super) fn find(
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

pub(super) fn remember(db: &mut Connection, a: RememberArgs) -> Result<Value, MemError> {
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
            let importance = a.importance.unwrap_or(a.new_importance);
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
