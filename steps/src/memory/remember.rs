//! `memory.remember`: store a text, or update the one with the same text
//! and kind.

use super::args::{input, now_ms, opt_bool, opt_str, str_list, time_ms, unit};
use super::db::{row, tag_text, Memory, COLUMNS};
use super::MemError;
use crate::core::error::{type_name, ActionError};
use crate::core::time::Clock;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

pub(super) struct RememberArgs {
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

pub(super) fn remember_args(
    inputs: &Value,
    clock: &dyn Clock,
) -> Result<RememberArgs, ActionError> {
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
