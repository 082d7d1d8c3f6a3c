//! Keeping the store small and current: `memory.decay`, `memory.cleanup`,
//! `memory.stats`.

use super::args::{input, iso, kinds, now_ms, round};
use super::db::{all, Memory, MIGRATIONS};
use super::{MemError, DAY_MS};
use crate::core::args::Args;
use crate::core::error::ActionError;
use crate::core::time::Clock;
use rusqlite::{params, Connection};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub(super) struct DecayArgs {
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

pub(super) fn decay_args(a: &Args, clock: &dyn Clock) -> Result<DecayArgs, ActionError> {
    let factor = a.unit("factor")?;
    if factor.is_some() && a.is_given("half_life_days") {
        return Err(input("give `half_life_days` or `factor`, not both"));
    }
    // These have declared defaults, so a value is always there.
    let set = |name: &str, v: Option<f64>| v.ok_or_else(|| a.missing(name));
    Ok(DecayArgs {
        half_life_days: match factor {
            None => Some(set("half_life_days", a.positive("half_life_days")?)?),
            Some(_) => None,
        },
        factor,
        boost_after: a.number("boost_after_queries")?.max(0.0) as i64,
        boost_step: set("boost_per_query", a.unit("boost_per_query")?)?,
        boost_max: set("max_boost", a.unit("max_boost")?)?,
        floor: set("floor", a.unit("floor")?)?,
        kinds: kinds(a)?,
        dry_run: a.bool("dry_run")?,
        now: now_ms(a, clock)?,
        report_limit: a.number("report_limit")?.max(0.0) as usize,
    })
}

pub(super) fn decay(db: &mut Connection, a: DecayArgs) -> Result<Value, MemError> {
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

pub(super) struct CleanupArgs {
    max_age_days: Option<f64>,
    min_importance: Option<f64>,
    by_last_access: bool,
    kinds: Vec<String>,
    dry_run: bool,
    now: i64,
    report_limit: usize,
}

pub(super) fn cleanup_args(a: &Args, clock: &dyn Clock) -> Result<CleanupArgs, ActionError> {
    let max_age_days = a.at_least("max_age_days", 0.0)?;
    let min_importance = a.unit("min_importance")?;
    if max_age_days.is_none() && min_importance.is_none() {
        // Without a rule every memory would go: make the caller say so.
        return Err(input(
            "give `max_age_days` and/or `min_importance` (what makes a memory removable)",
        ));
    }
    Ok(CleanupArgs {
        max_age_days,
        min_importance,
        by_last_access: a.chosen("age_from")? == "last_access",
        kinds: kinds(a)?,
        dry_run: a.bool("dry_run")?,
        now: now_ms(a, clock)?,
        report_limit: a.number("report_limit")?.max(0.0) as usize,
    })
}

pub(super) fn cleanup(db: &mut Connection, a: CleanupArgs) -> Result<Value, MemError> {
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

pub(super) fn stats(db: &Connection, kinds: &[String]) -> Result<Value, MemError> {
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
