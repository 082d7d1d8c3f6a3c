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

mod args;
mod db;
mod maintain;
mod recall;
mod remember;
mod specs;

use crate::core::{
    action::{Action, Call},
    args::Args,
    error::{type_name, ActionError},
};
use args::kinds;
use async_trait::async_trait;
use db::{db_path, open};
use maintain::{cleanup, cleanup_args, decay, decay_args, stats, CleanupArgs, DecayArgs};
use recall::{recall, recall_args, RecallArgs};
use remember::{remember, remember_args, RememberArgs};
use serde_json::{json, Value};
pub use specs::SPECS;

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
        let a = Args::of(SPECS, call, &inputs)?;
        let clock = call.caps.clock.as_ref();
        let job = match call.method {
            "remember" => Job::Remember(remember_args(&a, clock)?),
            "recall" => Job::Recall(recall_args(&a, clock)?),
            "decay" => Job::Decay(decay_args(&a, clock)?),
            "cleanup" => Job::Cleanup(cleanup_args(&a, clock)?),
            "stats" => Job::Stats(kinds(&a)?),
            m => return Err(ActionError::Input(format!("unknown method `memory.{m}`"))),
        };
        let file = db_path(call, &a)?;
        let shown = file.shown();
        let work = crate::core::blame::spawn_blocking(move || -> Result<Value, MemError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use args::time_ms;
    use recall::fts_query;
    use rusqlite::Connection;
    use std::path::PathBuf;

    /// `inputs` read as `memory.METHOD` declares them.
    fn read<T>(
        method: &str,
        inputs: &Value,
        f: impl Fn(&Args, &dyn crate::core::time::Clock) -> Result<T, ActionError>,
    ) -> Result<T, ActionError> {
        let spec = crate::core::args::spec_of(SPECS, method, method).unwrap();
        f(&Args::new(spec, inputs)?, &crate::core::time::SystemClock)
    }

    fn remember_args_now(inputs: &Value) -> Result<RememberArgs, ActionError> {
        read("remember", inputs, remember_args)
    }

    fn recall_args_now(inputs: &Value) -> Result<RecallArgs, ActionError> {
        read("recall", inputs, recall_args)
    }

    fn decay_args_now(inputs: &Value) -> Result<DecayArgs, ActionError> {
        read("decay", inputs, decay_args)
    }

    fn cleanup_args_now(inputs: &Value) -> Result<CleanupArgs, ActionError> {
        read("cleanup", inputs, cleanup_args)
    }

    /// A memory file in a folder of its own, removed when the test ends.
    struct TmpDb {
        path: PathBuf,
        _dir: tempfile::TempDir,
    }

    impl std::ops::Deref for TmpDb {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.path
        }
    }

    fn tmp(name: &str) -> TmpDb {
        let dir = tempfile::Builder::new()
            .prefix(&format!("mtf-mem-{name}-"))
            .tempdir()
            .unwrap();
        TmpDb {
            path: dir.path().join("memory.db"),
            _dir: dir,
        }
    }

    fn put(db: &mut Connection, v: Value) -> Value {
        remember(db, remember_args_now(&v).unwrap()).unwrap()
    }

    const NOW: &str = "2026-11-20T12:00:00Z";

    fn seeded(name: &str) -> (TmpDb, Connection) {
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
            read("recall", &json!({"now": -5}), |a, _| time_ms(a, "now")),
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
                let p = p.to_path_buf();
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
        let c = Connection::open(&*p).unwrap();
        c.execute("INSERT INTO schema_version (version) VALUES (99)", [])
            .unwrap();
        drop(c);
        assert!(matches!(open(&p), Err(MemError::Schema(_))));
    }
}
