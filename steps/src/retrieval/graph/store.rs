//! The graph beside the index: `graph.db` in the index's folder (in memory
//! when the index is), one row per edge with the note and line it comes
//! from, and each note's names. Brought up to date note by note: a note
//! whose content hash changed has its edges read again, a note that is gone
//! loses them; the others are not read.

use super::extract::{self, key};
use crate::core::sqlite::{self, DbError};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE notes (path TEXT PRIMARY KEY, hash TEXT NOT NULL, name TEXT NOT NULL);
    CREATE TABLE names (key TEXT NOT NULL, path TEXT NOT NULL);
    CREATE INDEX names_key ON names(key);
    CREATE INDEX names_path ON names(path);
    CREATE TABLE edges (
        path TEXT NOT NULL, line INTEGER NOT NULL,
        src TEXT NOT NULL, src_key TEXT NOT NULL,
        rel TEXT NOT NULL,
        dst TEXT NOT NULL, dst_key TEXT NOT NULL,
        how TEXT NOT NULL, text TEXT NOT NULL
    );
    CREATE INDEX edges_src ON edges(src_key);
    CREATE INDEX edges_dst ON edges(dst_key);
    CREATE INDEX edges_path ON edges(path);
",
    "
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
",
    // Whose each note is, on its rows, so that a question sees the shared
    // notes and its tenant's only. The reader's version changed with it:
    // every note is read again.
    "
    ALTER TABLE notes ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    ALTER TABLE names ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    ALTER TABLE edges ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
",
];

/// The indexes of the tables, dropped and built again around a graph's
/// first build (the same as the first migration's).
const DROP_INDEXES: &str = "
    DROP INDEX IF EXISTS names_key; DROP INDEX IF EXISTS names_path;
    DROP INDEX IF EXISTS edges_src; DROP INDEX IF EXISTS edges_dst; DROP INDEX IF EXISTS edges_path;
";
const CREATE_INDEXES: &str = "
    CREATE INDEX IF NOT EXISTS names_key ON names(key);
    CREATE INDEX IF NOT EXISTS names_path ON names(path);
    CREATE INDEX IF NOT EXISTS edges_src ON edges(src_key);
    CREATE INDEX IF NOT EXISTS edges_dst ON edges(dst_key);
    CREATE INDEX IF NOT EXISTS edges_path ON edges(path);
";

/// The file in the index's folder.
pub const FILE: &str = "graph.db";

/// An edge as stored: as the note states it, with where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StoredEdge {
    pub path: String,
    pub line: u32,
    pub from: String,
    pub from_key: String,
    pub rel: String,
    pub to: String,
    pub to_key: String,
    pub how: String,
    pub text: String,
}

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncStats {
    pub notes: usize,
    pub read: usize,
    pub removed: usize,
    pub edges: usize,
}

pub struct GraphStore {
    conn: Connection,
    /// Whose notes the questions see besides the shared ones ("": none).
    tenant: String,
}

impl GraphStore {
    /// The graph in `dir` (the index's folder), or in memory.
    pub fn open(dir: Option<&Path>) -> Result<GraphStore, DbError> {
        let conn = match dir {
            Some(d) => {
                let conn = sqlite::open(&d.join(FILE), MIGRATIONS)?;
                // A first build sorts every edge's keys into the indexes:
                // in memory, not through temporary files (a 10,000-note
                // vault's graph sorts a few megabytes).
                conn.pragma_update(None, "temp_store", "MEMORY")?;
                conn.pragma_update(None, "cache_size", -32_768)?;
                conn
            }
            None => {
                let conn = Connection::open_in_memory()?;
                for m in MIGRATIONS {
                    conn.execute_batch(m)?;
                }
                conn
            }
        };
        Ok(GraphStore {
            conn,
            tenant: String::new(),
        })
    }

    /// Questions from now on see the shared notes and `tenant`'s (as
    /// [`crate::retrieval::frontmatter::tenant_key`] reads it), no others.
    pub fn for_tenant(mut self, tenant: &str) -> GraphStore {
        self.tenant = tenant.to_string();
        self
    }

    /// Brings the graph up to date with `files` (each note's path and
    /// content hash, as the index has them); `read` gives a note's text.
    /// `stop` is asked between notes: stopped, nothing is written.
    pub fn sync(
        &mut self,
        files: &[(String, String)],
        read: &(dyn Fn(&str) -> Option<String> + Sync),
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<Option<SyncStats>, DbError> {
        // Edges read by other rules than these are read again.
        let reader: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'reader'", [], |r| {
                r.get(0)
            })
            .optional()?;
        if reader.as_deref() != Some(extract::READER) {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute_batch(
                "DELETE FROM edges; DELETE FROM names; DELETE FROM notes; DELETE FROM meta WHERE key = 'files';",
            )?;
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('reader', ?1)",
                [extract::READER],
            )?;
            tx.commit()?;
        }
        // The same notes as at the last sync (the common case): nothing to
        // read, not even the graph's list of them.
        let fingerprint = crate::core::hash::hex_hash(
            &files
                .iter()
                .flat_map(|(p, h)| [p.as_bytes(), h.as_bytes()])
                .collect::<Vec<_>>(),
        );
        let last: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'files'", [], |r| {
                r.get(0)
            })
            .optional()?;
        if last.as_deref() == Some(fingerprint.as_str()) {
            return Ok(Some(SyncStats {
                notes: files.len(),
                read: 0,
                removed: 0,
                edges: self.edge_count()?,
            }));
        }
        let known: BTreeMap<String, String> = {
            let mut q = self.conn.prepare("SELECT path, hash FROM notes")?;
            let rows = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let wanted: BTreeSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        let removed: Vec<&String> = known
            .keys()
            .filter(|p| !wanted.contains(p.as_str()))
            .collect();
        let changed: Vec<&(String, String)> = files
            .iter()
            .filter(|(p, h)| known.get(p) != Some(h))
            .collect();
        // Read on several threads (the notes are independent), before the
        // write lock is taken; a stop is noticed between notes.
        type Read = (String, String, extract::NoteGraph);
        let read_part = |part: &[&(String, String)]| -> Option<Vec<Read>> {
            let mut out = Vec::with_capacity(part.len());
            for (path, hash) in part.iter().map(|x| (&x.0, &x.1)) {
                if stop() {
                    return None;
                }
                // A note gone since the index saw it has no edges.
                let g = read(path)
                    .map(|text| extract::note(path, &text))
                    .unwrap_or_default();
                out.push((path.clone(), hash.clone(), g));
            }
            Some(out)
        };
        let readers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4));
        let per = changed.len().div_ceil(readers).max(1);
        let parts: Vec<Option<Vec<Read>>> = std::thread::scope(|s| {
            let handles: Vec<_> = changed
                .chunks(per)
                .map(|part| s.spawn(move || read_part(part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        });
        let mut read_now = Vec::with_capacity(changed.len());
        for part in parts {
            match part {
                Some(p) => read_now.extend(p),
                None => return Ok(None),
            }
        }
        let mut stats = SyncStats {
            notes: files.len(),
            read: read_now.len(),
            removed: removed.len(),
            edges: 0,
        };
        // The write lock is taken first, waiting for another process's
        // sync; what that process wrote for these notes since `known` was
        // read (two runs at once on a new index) is replaced, never added to.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut gone = [
                tx.prepare_cached("DELETE FROM edges WHERE path = ?1")?,
                tx.prepare_cached("DELETE FROM names WHERE path = ?1")?,
                tx.prepare_cached("DELETE FROM notes WHERE path = ?1")?,
            ];
            let written = read_now.iter().map(|(p, _, _)| p);
            for path in removed.iter().copied().chain(written) {
                for q in &mut gone {
                    q.execute([path])?;
                }
            }
        }
        // A graph built from nothing is written without its indexes, which
        // are then built once, sorted: far quicker than row by row.
        let bulk = known.is_empty() && !read_now.is_empty();
        if bulk {
            tx.execute_batch(DROP_INDEXES)?;
        }
        {
            let mut note =
                tx.prepare("INSERT INTO notes (path, hash, name, tenant) VALUES (?1, ?2, ?3, ?4)")?;
            let mut name =
                tx.prepare("INSERT INTO names (key, path, tenant) VALUES (?1, ?2, ?3)")?;
            let mut edge = tx.prepare(
                "INSERT INTO edges (path, line, src, src_key, rel, dst, dst_key, how, text, tenant) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            for (path, hash, g) in &read_now {
                note.execute(params![path, hash, g.name, g.tenant])?;
                let keys: BTreeSet<String> = std::iter::once(&g.name)
                    .chain(&g.aliases)
                    .map(|n| key(n))
                    .filter(|k| !k.is_empty())
                    .collect();
                for k in keys {
                    name.execute(params![k, path, g.tenant])?;
                }
                // Most edges start at the note itself: its key once.
                let own = key(&g.name);
                let key_of = |n: &str| if n == g.name { own.clone() } else { key(n) };
                for e in &g.edges {
                    edge.execute(params![
                        path,
                        e.line,
                        e.from,
                        key_of(&e.from),
                        e.rel,
                        e.to,
                        key_of(&e.to),
                        e.how,
                        e.text,
                        g.tenant
                    ])?;
                }
            }
        }
        if bulk {
            tx.execute_batch(CREATE_INDEXES)?;
        }
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('files', ?1)",
            [&fingerprint],
        )?;
        tx.commit()?;
        stats.edges = self.edge_count()?;
        Ok(Some(stats))
    }

    /// The relations of the edges the questions see.
    pub fn relations(&self) -> Result<Vec<String>, DbError> {
        let mut q = self.conn.prepare_cached(
            "SELECT DISTINCT rel FROM edges WHERE tenant IN ('', ?1) ORDER BY rel",
        )?;
        let rows = q.query_map([&self.tenant], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The edges the questions see.
    fn edge_count(&self) -> Result<usize, DbError> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM edges WHERE tenant IN ('', ?1)",
            [&self.tenant],
            |r| r.get::<_, i64>(0),
        )? as usize)
    }

    /// The notes the questions see.
    pub fn note_count(&self) -> Result<usize, DbError> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM notes WHERE tenant IN ('', ?1)",
            [&self.tenant],
            |r| r.get::<_, i64>(0),
        )? as usize)
    }

    /// The notes a name is the title, file name or alias of.
    pub fn notes_named(&self, k: &str) -> Result<Vec<(String, String)>, DbError> {
        let mut q = self.conn.prepare_cached(
            "SELECT n.path, n.name FROM names k JOIN notes n ON n.path = k.path WHERE k.key = ?1 AND k.tenant IN ('', ?2) ORDER BY n.path",
        )?;
        let rows = q.query_map([k, &self.tenant], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The names (of notes, or used by edges) that start with the word
    /// `first` ("marcus" in "marcus oyelaran", "pay 1412" in "pay 1412
    /// tokenvault v2 migration"), at most `max`.
    pub fn names_starting(&self, first: &str, max: usize) -> Result<Vec<String>, DbError> {
        // Keys between "first " and "first!" are those that start with it.
        let mut q = self.conn.prepare_cached(
            "SELECT key FROM names WHERE key >= ?1 AND key < ?2 AND tenant IN ('', ?3)
             UNION SELECT src_key FROM edges WHERE src_key >= ?1 AND src_key < ?2 AND tenant IN ('', ?3)
             UNION SELECT dst_key FROM edges WHERE dst_key >= ?1 AND dst_key < ?2 AND tenant IN ('', ?3)
             LIMIT ?4",
        )?;
        let rows = q.query_map(
            params![
                format!("{first} "),
                format!("{first}!"),
                &self.tenant,
                max as i64
            ],
            |r| r.get(0),
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every name of these notes.
    pub fn names_of(&self, paths: &[String]) -> Result<Vec<String>, DbError> {
        let mut out = Vec::new();
        let mut q = self
            .conn
            .prepare_cached("SELECT key FROM names WHERE path = ?1 AND tenant IN ('', ?2)")?;
        for p in paths {
            let rows = q.query_map([p, &self.tenant], |r| r.get::<_, String>(0))?;
            for k in rows {
                out.push(k?);
            }
        }
        Ok(out)
    }

    /// The edges from (`outgoing`) or to one of `keys`.
    pub fn edges_at(&self, keys: &[String], outgoing: bool) -> Result<Vec<StoredEdge>, DbError> {
        let sql = if outgoing {
            "SELECT path, line, src, src_key, rel, dst, dst_key, how, text FROM edges WHERE src_key = ?1 AND tenant IN ('', ?2)"
        } else {
            "SELECT path, line, src, src_key, rel, dst, dst_key, how, text FROM edges WHERE dst_key = ?1 AND tenant IN ('', ?2)"
        };
        let mut q = self.conn.prepare_cached(sql)?;
        let mut out = Vec::new();
        for k in keys {
            let rows = q.query_map([k, &self.tenant], |r| {
                Ok(StoredEdge {
                    path: r.get(0)?,
                    line: r.get(1)?,
                    from: r.get(2)?,
                    from_key: r.get(3)?,
                    rel: r.get(4)?,
                    to: r.get(5)?,
                    to_key: r.get(6)?,
                    how: r.get(7)?,
                    text: r.get(8)?,
                })
            })?;
            for e in rows {
                out.push(e?);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// How a name is written in the notes: the first edge's spelling.
    pub fn spelling(&self, k: &str) -> Result<Option<String>, DbError> {
        let mut q = self.conn.prepare_cached(
            "SELECT src FROM edges WHERE src_key = ?1 AND tenant IN ('', ?2) UNION ALL SELECT dst FROM edges WHERE dst_key = ?1 AND tenant IN ('', ?2) LIMIT 1",
        )?;
        let mut rows = q.query([k, &self.tenant])?;
        Ok(match rows.next()? {
            Some(r) => Some(r.get(0)?),
            None => None,
        })
    }

    /// Whether a note or an edge has this name.
    pub fn knows(&self, k: &str) -> Result<bool, DbError> {
        let mut q = self.conn.prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM names WHERE key = ?1 AND tenant IN ('', ?2)) OR EXISTS(SELECT 1 FROM edges WHERE src_key = ?1 AND tenant IN ('', ?2)) OR EXISTS(SELECT 1 FROM edges WHERE dst_key = ?1 AND tenant IN ('', ?2))",
        )?;
        Ok(q.query_row([k, &self.tenant], |r| r.get::<_, bool>(0))?)
    }

    /// The notes one of whose names holds `k` as whole words ("billing
    /// review" in "billing review 2026 11 20"), at most `max`.
    pub fn notes_containing(&self, k: &str, max: usize) -> Result<Vec<String>, DbError> {
        let mut q = self.conn.prepare_cached(
            "SELECT DISTINCT path FROM names WHERE (' ' || key || ' ') LIKE ('% ' || ?1 || ' %') ESCAPE '\\' AND tenant IN ('', ?3) LIMIT ?2",
        )?;
        let escaped = k
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        let rows = q.query_map(rusqlite::params![escaped, max as i64, self.tenant], |r| {
            r.get::<_, String>(0)
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every name an edge or a note has, for "did you mean".
    pub fn all_keys(&self) -> Result<Vec<String>, DbError> {
        let mut q = self.conn.prepare(
            "SELECT src_key FROM edges WHERE tenant IN ('', ?1) UNION SELECT dst_key FROM edges WHERE tenant IN ('', ?1) UNION SELECT key FROM names WHERE tenant IN ('', ?1)",
        )?;
        let rows = q.query_map([&self.tenant], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_processes_building_the_same_new_graph_at_once_write_each_note_once() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![("a.md".to_string(), "1".to_string())];
        let text = || Some("Ann owns the billing service.\n".to_string());
        let mut first = GraphStore::open(Some(dir.path())).unwrap();
        // The second sync reads its notes while the first one runs whole
        // and commits, as two runs started together on a new index do.
        let interleaved = std::sync::Mutex::new(Some(GraphStore::open(Some(dir.path())).unwrap()));
        let read = |_: &str| {
            if let Some(mut other) = interleaved.lock().unwrap().take() {
                let s = other.sync(&files, &|_| text(), &|| false).unwrap().unwrap();
                assert_eq!((s.read, s.edges), (1, 1));
            }
            text()
        };
        let s = first.sync(&files, &read, &|| false).unwrap().unwrap();
        assert_eq!(
            s,
            SyncStats {
                notes: 1,
                read: 1,
                removed: 0,
                edges: 1
            }
        );
    }

    #[test]
    fn only_changed_notes_are_read_again_and_gone_ones_lose_their_edges() {
        let notes = std::sync::RwLock::new(BTreeMap::from([
            (
                "a.md".to_string(),
                "Ann owns the billing service.\n".to_string(),
            ),
            (
                "b.md".to_string(),
                "The billing service depends on ledger.\n".to_string(),
            ),
        ]));
        let read = |p: &str| notes.read().unwrap().get(p).cloned();
        let files = |h: &str| {
            vec![
                ("a.md".to_string(), "1".to_string()),
                ("b.md".to_string(), h.to_string()),
            ]
        };
        let mut g = GraphStore::open(None).unwrap();
        let s = g.sync(&files("1"), &read, &|| false).unwrap().unwrap();
        assert_eq!(
            s,
            SyncStats {
                notes: 2,
                read: 2,
                removed: 0,
                edges: 2
            }
        );
        notes.write().unwrap().insert(
            "b.md".into(),
            "The billing service depends on ledger and on auth.\n".into(),
        );
        let s = g.sync(&files("2"), &read, &|| false).unwrap().unwrap();
        assert_eq!(
            s,
            SyncStats {
                notes: 2,
                read: 1,
                removed: 0,
                edges: 3
            }
        );
        let s = g.sync(&files("2")[..1], &read, &|| false).unwrap().unwrap();
        assert_eq!(
            s,
            SyncStats {
                notes: 1,
                read: 0,
                removed: 1,
                edges: 1
            }
        );
        let e = g.edges_at(&["billing service".into()], false).unwrap();
        assert_eq!(
            (
                e[0].from.as_str(),
                e[0].rel.as_str(),
                e[0].path.as_str(),
                e[0].line
            ),
            ("Ann", "owns", "a.md", 1)
        );
    }
}
