//! `memory.recall`: FTS5 BM25 relevance × importance × freshness, and the
//! returned memories marked as used.

use super::args::{kinds, names, now_ms, round};
use super::db::{filter_sql, row, Memory, COLUMNS};
use super::{MemError, DAY_MS};
use crate::core::args::Args;
use crate::core::error::ActionError;
use crate::core::time::Clock;
use rusqlite::{params, Connection};
use serde_json::{json, Value};

pub(super) struct RecallArgs {
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

pub(super) fn recall_args(a: &Args, clock: &dyn Clock) -> Result<RecallArgs, ActionError> {
    // These have declared defaults, so a value is always there.
    let set = |name: &str, v: Option<f64>| v.ok_or_else(|| a.missing(name));
    Ok(RecallArgs {
        query: a.str("query")?.unwrap_or_default().to_string(),
        all_terms: a.chosen("match")? == "all",
        top_k: set("top_k", a.at_least("top_k", 1.0)?)?.min(10_000.0) as usize,
        kinds: kinds(a)?,
        tags: names(a, "tags")?,
        min_importance: a.unit("min_importance")?,
        half_life_days: set("half_life_days", a.positive("half_life_days")?)?,
        importance_weight: set("importance_weight", a.unit("importance_weight")?)?,
        recency_weight: set("recency_weight", a.unit("recency_weight")?)?,
        threshold: a.num("threshold")?,
        touch: a.bool("touch")?,
        now: now_ms(a, clock)?,
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

pub(super) fn recall(db: &mut Connection, a: RecallArgs) -> Result<Value, MemError> {
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
