//! The graph beside the index: `graph.bin` in the index's folder (in memory
//! when the index is): each note's names and the edges it states, with the
//! note and line each comes from. Brought up to date note by note: a note
//! whose content hash changed has its edges read again, a note that is gone
//! loses them; the others are not read.
//!
//! The file is written whole, in one go, and read whole: its strings in one
//! pool, its rows as numbers into that pool, names sorted so that a name is
//! found by a binary search. A graph kept in SQLite rows cost more to write
//! than reading the notes' edges did (a tenth of a 10,000-note index build
//! went to the rows alone); this costs a few hundredths of a second.
//!
//! Little-endian: `MTFG`, the format's version, then sections, each a
//! 64-bit byte length and its bytes: the reader's version (see
//! [`extract::READER`]), the fingerprint of the notes it was built from,
//! the pool, and the tables of [`Graph`]; last, the CRC-32 of all that. It
//! is written to a temporary file and renamed over the old one, so a
//! reader sees one whole graph; a file that does not read as one (damaged,
//! or of another version) is built again from the notes.

use super::extract::{self, key};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The file in the index's folder.
pub const FILE: &str = "graph.bin";

/// Where builds before this format kept the graph (SQLite): removed when
/// the graph is written.
const OLD_FILES: &[&str] = &["graph.db", "graph.db-wal", "graph.db-shm"];

const MAGIC: &[u8; 4] = b"MTFG";
const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("cannot read the graph {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the graph {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the graph of these notes is too large for one file (over 4 GiB of names and lines, or 4 billion rows)")]
    TooLarge,
}

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

/// A string of the pool: its offset and length.
type Span = [u32; 2];

/// The string `span` stands for, if it lies inside `pool`.
fn spanned(pool: &str, [o, l]: Span) -> Option<&str> {
    pool.get(o as usize..(o as usize).checked_add(l as usize)?)
}

// The columns of the tables' rows.
const N_PATH: usize = 0;
const N_HASH: usize = 1;
const N_NAME: usize = 2;
const N_TENANT: usize = 3;
const M_NOTE: usize = 0;
const M_KEY: usize = 1;
const E_NOTE: usize = 0;
const E_LINE: usize = 1;
const E_FROM: usize = 2;
const E_FROM_KEY: usize = 3;
const E_REL: usize = 4;
const E_TO: usize = 5;
const E_TO_KEY: usize = 6;
const E_HOW: usize = 7;
const E_TEXT: usize = 8;

/// The graph as held in memory and on disk.
#[derive(Debug, Default, PartialEq, Eq)]
struct Graph {
    /// The reader's version its edges were read with.
    reader: String,
    /// The fingerprint of the notes (paths and content hashes) it was
    /// built from.
    files: String,
    pool: String,
    /// Strings by id: paths, hashes, names as written, tenants, relations,
    /// how each edge was found, lines.
    strs: Vec<Span>,
    /// Names as compared ([`key`]), by id, in sorted order: comparing two
    /// ids compares the names.
    keys: Vec<Span>,
    /// Path, hash, name and tenant (string ids), sorted by path.
    notes: Vec<[u32; 4]>,
    /// Each note's names: note, key; sorted by note, then key.
    names: Vec<[u32; 2]>,
    /// `names` by key, then note.
    names_by_key: Vec<u32>,
    /// Note, line, from, from's key, relation, to, to's key, how, text;
    /// sorted by note, each note's in the order it states them.
    edges: Vec<[u32; 9]>,
    /// `edges` by from's key, then edge; and by to's key.
    by_from: Vec<u32>,
    by_to: Vec<u32>,
}

impl Graph {
    fn span<'g>(&'g self, table: &[Span], id: u32) -> &'g str {
        table
            .get(id as usize)
            .and_then(|&span| spanned(&self.pool, span))
            .unwrap_or("")
    }

    fn s(&self, id: u32) -> &str {
        self.span(&self.strs, id)
    }

    fn k(&self, id: u32) -> &str {
        self.span(&self.keys, id)
    }

    /// The first id of a name at or after `k`, as compared.
    fn first_key_from(&self, k: &str) -> u32 {
        self.keys
            .partition_point(|&span| spanned(&self.pool, span).unwrap_or("") < k) as u32
    }

    /// The id of a name as compared.
    fn key_id(&self, k: &str) -> Option<u32> {
        let i = self.first_key_from(k);
        ((i as usize) < self.keys.len() && self.k(i) == k).then_some(i)
    }

    /// The ids of the names from `lo` (included) to `hi` (excluded).
    fn key_range(&self, lo: &str, hi: &str) -> std::ops::Range<u32> {
        self.first_key_from(lo)..self.first_key_from(hi)
    }

    fn note_path(&self, note: u32) -> &str {
        self.notes
            .get(note as usize)
            .map_or("", |n| self.s(n[N_PATH]))
    }

    fn note_tenant(&self, note: u32) -> &str {
        self.notes
            .get(note as usize)
            .map_or("", |n| self.s(n[N_TENANT]))
    }

    /// The rows of a permutation whose key (read by `key_of`) is `k`.
    fn rows_with(perm: &[u32], k: u32, key_of: impl Fn(u32) -> u32) -> &[u32] {
        let lo = perm.partition_point(|&r| key_of(r) < k);
        let hi = perm.partition_point(|&r| key_of(r) <= k);
        perm.get(lo..hi).unwrap_or(&[])
    }

    fn edge_col(&self, e: u32, col: usize) -> u32 {
        self.edges.get(e as usize).map_or(u32::MAX, |r| r[col])
    }

    fn name_col(&self, m: u32, col: usize) -> u32 {
        self.names.get(m as usize).map_or(u32::MAX, |r| r[col])
    }

    fn edges_from(&self, k: u32) -> &[u32] {
        Self::rows_with(&self.by_from, k, |e| self.edge_col(e, E_FROM_KEY))
    }

    fn edges_to(&self, k: u32) -> &[u32] {
        Self::rows_with(&self.by_to, k, |e| self.edge_col(e, E_TO_KEY))
    }

    fn names_with(&self, k: u32) -> &[u32] {
        Self::rows_with(&self.names_by_key, k, |m| self.name_col(m, M_KEY))
    }

    /// The rows of a table sorted by note that are `note`'s.
    fn of_note<const N: usize>(rows: &[[u32; N]], note: u32) -> &[[u32; N]] {
        let (lo, hi) = (
            rows.partition_point(|r| r[0] < note),
            rows.partition_point(|r| r[0] <= note),
        );
        rows.get(lo..hi).unwrap_or(&[])
    }

    fn stored(&self, e: u32) -> Option<StoredEdge> {
        let r = self.edges.get(e as usize)?;
        Some(StoredEdge {
            path: self.note_path(r[E_NOTE]).to_string(),
            line: r[E_LINE],
            from: self.s(r[E_FROM]).to_string(),
            from_key: self.k(r[E_FROM_KEY]).to_string(),
            rel: self.s(r[E_REL]).to_string(),
            to: self.s(r[E_TO]).to_string(),
            to_key: self.k(r[E_TO_KEY]).to_string(),
            how: self.s(r[E_HOW]).to_string(),
            text: self.s(r[E_TEXT]).to_string(),
        })
    }

    fn to_bytes(&self) -> Vec<u8> {
        fn section(out: &mut Vec<u8>, bytes: &[u8]) {
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        fn rows<const N: usize>(out: &mut Vec<u8>, rows: &[[u32; N]]) {
            out.extend_from_slice(&((rows.len() * N * 4) as u64).to_le_bytes());
            for v in rows.iter().flatten() {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        let mut out = Vec::with_capacity(
            64 + self.pool.len() + 8 * (self.strs.len() + self.keys.len()) + 40 * self.edges.len(),
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        section(&mut out, self.reader.as_bytes());
        section(&mut out, self.files.as_bytes());
        section(&mut out, self.pool.as_bytes());
        rows(&mut out, &self.strs);
        rows(&mut out, &self.keys);
        rows(&mut out, &self.notes);
        rows(&mut out, &self.names);
        rows(&mut out, &one_column(&self.names_by_key));
        rows(&mut out, &self.edges);
        rows(&mut out, &one_column(&self.by_from));
        rows(&mut out, &one_column(&self.by_to));
        let check = crc32fast::hash(&out);
        out.extend_from_slice(&check.to_le_bytes());
        out
    }

    /// The graph a file holds, or None when it holds none this build
    /// reads (damaged, or another version).
    fn from_bytes(b: &[u8]) -> Option<Graph> {
        let (b, check) = b.split_last_chunk::<4>()?;
        if crc32fast::hash(b) != u32::from_le_bytes(*check) {
            return None;
        }
        let mut at = b.strip_prefix(MAGIC)?;
        let version = u32::from_le_bytes(at.get(..4)?.try_into().ok()?);
        if version != VERSION {
            return None;
        }
        at = &at[4..];
        let mut section = || -> Option<&[u8]> {
            let len = u64::from_le_bytes(at.get(..8)?.try_into().ok()?) as usize;
            let s = at.get(8..8usize.checked_add(len)?)?;
            at = &at[8 + len..];
            Some(s)
        };
        fn rows<const N: usize>(b: &[u8]) -> Option<Vec<[u32; N]>> {
            if !b.len().is_multiple_of(4 * N) {
                return None;
            }
            Some(
                b.chunks_exact(4 * N)
                    .map(|r| {
                        std::array::from_fn(|i| {
                            u32::from_le_bytes(r[4 * i..4 * i + 4].try_into().unwrap_or_default())
                        })
                    })
                    .collect(),
            )
        }
        let column = |b: &[u8]| Some(rows::<1>(b)?.into_iter().map(|[v]| v).collect());
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).ok();
        let reader = text(section()?)?;
        let files = text(section()?)?;
        let pool = text(section()?)?;
        let strs = rows::<2>(section()?)?;
        let keys = rows::<2>(section()?)?;
        let notes = rows::<4>(section()?)?;
        let names = rows::<2>(section()?)?;
        let names_by_key = column(section()?)?;
        let edges = rows::<9>(section()?)?;
        let by_from = column(section()?)?;
        let by_to = column(section()?)?;
        if !at.is_empty() {
            return None;
        }
        let g = Graph {
            reader,
            files,
            pool,
            strs,
            keys,
            notes,
            names,
            names_by_key,
            edges,
            by_from,
            by_to,
        };
        g.is_whole().then_some(g)
    }

    /// Whether every number points where it should: each string inside the
    /// pool, each id inside its table, the permutations each row once.
    fn is_whole(&self) -> bool {
        let spans = |t: &[Span]| t.iter().all(|&span| spanned(&self.pool, span).is_some());
        let (s, k, n) = (
            self.strs.len() as u32,
            self.keys.len() as u32,
            self.notes.len() as u32,
        );
        let permutation = |p: &[u32], len: usize| {
            let mut seen = vec![false; len];
            p.len() == len
                && p.iter().all(|&i| {
                    seen.get_mut(i as usize)
                        .is_some_and(|x| !std::mem::replace(x, true))
                })
        };
        spans(&self.strs)
            && spans(&self.keys)
            && self.notes.iter().flatten().all(|&i| i < s)
            && self.names.iter().all(|r| r[M_NOTE] < n && r[M_KEY] < k)
            && self.edges.iter().all(|r| {
                r[E_NOTE] < n
                    && [E_FROM, E_REL, E_TO, E_HOW, E_TEXT]
                        .iter()
                        .all(|&c| r[c] < s)
                    && r[E_FROM_KEY] < k
                    && r[E_TO_KEY] < k
            })
            && permutation(&self.names_by_key, self.names.len())
            && permutation(&self.by_from, self.edges.len())
            && permutation(&self.by_to, self.edges.len())
    }
}

fn one_column(v: &[u32]) -> Vec<[u32; 1]> {
    v.iter().map(|&x| [x]).collect()
}

/// A note whose edges were just read, with its names as compared: read
/// at a sync, or ahead of one ([`ReadNote::read`]).
pub struct ReadNote {
    path: String,
    hash: String,
    g: extract::NoteGraph,
    names: BTreeSet<String>,
    /// Each edge's from and to, as compared.
    keys: Vec<[String; 2]>,
}

impl ReadNote {
    /// Reads a note's edges ahead of the sync that will keep them
    /// ([`GraphStore::sync_with`]): on a thread of the caller's, while the
    /// other notes are still being read from the disk.
    pub fn read(path: &str, hash: &str, text: &str) -> ReadNote {
        ReadNote::new(
            path.to_string(),
            hash.to_string(),
            extract::note(path, text),
        )
    }

    fn new(path: String, hash: String, g: extract::NoteGraph) -> ReadNote {
        let names = std::iter::once(&g.name)
            .chain(&g.aliases)
            .map(|n| key(n))
            .filter(|k| !k.is_empty())
            .collect();
        // Most edges start at the note itself: its key once.
        let own = key(&g.name);
        let key_of = |n: &str| if n == g.name { own.clone() } else { key(n) };
        let keys = g
            .edges
            .iter()
            .map(|e| [key_of(&e.from), key_of(&e.to)])
            .collect();
        ReadNote {
            path,
            hash,
            g,
            names,
            keys,
        }
    }
}

/// A new graph, note by note in path order: the strings of each row are
/// pooled once.
#[derive(Default)]
struct Builder<'a> {
    strs: Vec<&'a str>,
    // Hundreds of thousands of lookups, many of whole lines: a fast hash
    // (seeded per process, as std's).
    str_ids: foldhash::HashMap<&'a str, u32>,
    keys: Vec<&'a str>,
    key_ids: foldhash::HashMap<&'a str, u32>,
    notes: Vec<[u32; 4]>,
    names: Vec<[u32; 2]>,
    edges: Vec<[u32; 9]>,
}

impl<'a> Builder<'a> {
    fn s(&mut self, x: &'a str) -> u32 {
        *self.str_ids.entry(x).or_insert_with(|| {
            self.strs.push(x);
            self.strs.len() as u32 - 1
        })
    }

    fn k(&mut self, x: &'a str) -> u32 {
        *self.key_ids.entry(x).or_insert_with(|| {
            self.keys.push(x);
            self.keys.len() as u32 - 1
        })
    }

    fn note(&mut self, path: &'a str, hash: &'a str, name: &'a str, tenant: &'a str) -> u32 {
        let row = [self.s(path), self.s(hash), self.s(name), self.s(tenant)];
        self.notes.push(row);
        self.notes.len() as u32 - 1
    }

    /// A note read now.
    fn read(&mut self, r: &'a ReadNote) {
        let note = self.note(&r.path, &r.hash, &r.g.name, &r.g.tenant);
        for k in &r.names {
            let k = self.k(k);
            self.names.push([note, k]);
        }
        for (e, [from_key, to_key]) in r.g.edges.iter().zip(&r.keys) {
            let row = [
                note,
                e.line,
                self.s(&e.from),
                self.k(from_key),
                self.s(&e.rel),
                self.s(&e.to),
                self.k(to_key),
                self.s(e.how),
                self.s(&e.text),
            ];
            self.edges.push(row);
        }
    }

    /// A note kept from the graph before, unchanged.
    fn kept(&mut self, old: &'a Graph, id: u32) {
        let Some(&[path, hash, name, tenant]) = old.notes.get(id as usize) else {
            return;
        };
        let note = self.note(old.s(path), old.s(hash), old.s(name), old.s(tenant));
        for r in Graph::of_note(&old.names, id) {
            let k = self.k(old.k(r[M_KEY]));
            self.names.push([note, k]);
        }
        for r in Graph::of_note(&old.edges, id) {
            let row = [
                note,
                r[E_LINE],
                self.s(old.s(r[E_FROM])),
                self.k(old.k(r[E_FROM_KEY])),
                self.s(old.s(r[E_REL])),
                self.s(old.s(r[E_TO])),
                self.k(old.k(r[E_TO_KEY])),
                self.s(old.s(r[E_HOW])),
                self.s(old.s(r[E_TEXT])),
            ];
            self.edges.push(row);
        }
    }

    fn finish(mut self, reader: &str, files: String) -> Result<Graph, GraphError> {
        // Offsets and ids are 32-bit.
        let bytes: usize = self.strs.iter().chain(&self.keys).map(|s| s.len()).sum();
        let rows = [
            self.strs.len(),
            self.keys.len(),
            self.edges.len(),
            self.names.len(),
        ];
        if bytes > u32::MAX as usize || rows.iter().any(|&n| n > u32::MAX as usize) {
            return Err(GraphError::TooLarge);
        }
        // Keys renumbered in sorted order.
        let mut order: Vec<u32> = (0..self.keys.len() as u32).collect();
        order.sort_unstable_by_key(|&i| self.keys[i as usize]);
        let mut new_id = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_id[old as usize] = new as u32;
        }
        for r in &mut self.names {
            r[M_KEY] = new_id[r[M_KEY] as usize];
        }
        for r in &mut self.edges {
            r[E_FROM_KEY] = new_id[r[E_FROM_KEY] as usize];
            r[E_TO_KEY] = new_id[r[E_TO_KEY] as usize];
        }
        self.names.sort_unstable();
        let mut pool = String::with_capacity(bytes);
        let mut span = |s: &str| {
            let at = [pool.len() as u32, s.len() as u32];
            pool.push_str(s);
            at
        };
        let strs: Vec<Span> = self.strs.iter().map(|s| span(s)).collect();
        let keys: Vec<Span> = order.iter().map(|&i| span(self.keys[i as usize])).collect();
        // Rows in the order of a key column, ties in row order: sorted as
        // (key, row) pairs in one number.
        let perm = |keys: Vec<u32>| {
            let mut p: Vec<u64> = (0u64..)
                .zip(keys)
                .map(|(i, k)| (u64::from(k) << 32) | i)
                .collect();
            p.sort_unstable();
            p.into_iter().map(|x| x as u32).collect::<Vec<u32>>()
        };
        let names_by_key = perm(self.names.iter().map(|r| r[M_KEY]).collect());
        let by_from = perm(self.edges.iter().map(|r| r[E_FROM_KEY]).collect());
        let by_to = perm(self.edges.iter().map(|r| r[E_TO_KEY]).collect());
        Ok(Graph {
            reader: reader.to_string(),
            files,
            pool,
            strs,
            keys,
            notes: self.notes,
            names: self.names,
            names_by_key,
            edges: self.edges,
            by_from,
            by_to,
        })
    }
}

pub struct GraphStore {
    graph: Graph,
    /// The index's folder, where the graph is kept (None: in memory).
    dir: Option<PathBuf>,
    /// Whose notes the questions see besides the shared ones ("": none).
    tenant: String,
}

impl GraphStore {
    /// The graph in `dir` (the index's folder), or in memory. A folder
    /// with no graph yet (or one this build does not read) has an empty
    /// one, built on the first sync.
    pub fn open(dir: Option<&Path>) -> Result<GraphStore, GraphError> {
        let graph = match dir {
            Some(d) => {
                let path = d.join(FILE);
                match std::fs::read(&path) {
                    Ok(b) => Graph::from_bytes(&b).unwrap_or_default(),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Graph::default(),
                    Err(source) => return Err(GraphError::Read { path, source }),
                }
            }
            None => Graph::default(),
        };
        Ok(GraphStore {
            graph,
            dir: dir.map(Path::to_path_buf),
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
    ) -> Result<Option<SyncStats>, GraphError> {
        self.sync_with(files, Vec::new(), read, stop)
    }

    /// Each note's content hash as the graph holds it, by path; none
    /// when its edges were read by other rules than these (every note is
    /// read again). A note held with the hash it has now need not be read
    /// ahead.
    pub fn held(&self) -> HashMap<&str, &str> {
        if self.graph.reader != extract::READER {
            return HashMap::new();
        }
        let g = &self.graph;
        g.notes
            .iter()
            .map(|n| (g.s(n[N_PATH]), g.s(n[N_HASH])))
            .collect()
    }

    /// [`GraphStore::sync`], with notes already read (`ahead`): one that
    /// `files` lists with the hash it was read with is not read again.
    pub fn sync_with(
        &mut self,
        files: &[(String, String)],
        ahead: Vec<ReadNote>,
        read: &(dyn Fn(&str) -> Option<String> + Sync),
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<Option<SyncStats>, GraphError> {
        // Edges read by other rules than these are read again.
        let empty = Graph::default();
        let old = if self.graph.reader == extract::READER {
            &self.graph
        } else {
            &empty
        };
        // The same notes as at the last sync (the common case): nothing to
        // read, nothing to write.
        let fingerprint = crate::core::hash::hex_hash(
            &files
                .iter()
                .flat_map(|(p, h)| [p.as_bytes(), h.as_bytes()])
                .collect::<Vec<_>>(),
        );
        if old.files == fingerprint {
            return Ok(Some(SyncStats {
                notes: files.len(),
                read: 0,
                removed: 0,
                edges: self.edge_count(),
            }));
        }
        let known: BTreeMap<&str, (&str, u32)> = old
            .notes
            .iter()
            .enumerate()
            .map(|(i, n)| (old.s(n[N_PATH]), (old.s(n[N_HASH]), i as u32)))
            .collect();
        let wanted: BTreeSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        let removed = known.keys().filter(|p| !wanted.contains(*p)).count();
        let changed: Vec<&(String, String)> = files
            .iter()
            .filter(|(p, h)| known.get(p.as_str()).map(|k| k.0) != Some(h.as_str()))
            .collect();
        let mut ahead: HashMap<String, ReadNote> =
            ahead.into_iter().map(|r| (r.path.clone(), r)).collect();
        let mut read_now = Vec::with_capacity(changed.len());
        let mut to_read = Vec::with_capacity(changed.len());
        for c in changed {
            match ahead.remove(&c.0) {
                Some(r) if r.hash == c.1 => read_now.push(r),
                _ => to_read.push(c),
            }
        }
        // Read on several threads (the notes are independent); a stop is
        // noticed between notes.
        let read_part = |part: &[&(String, String)]| -> Option<Vec<ReadNote>> {
            let mut out = Vec::with_capacity(part.len());
            for (path, hash) in part.iter().map(|x| (&x.0, &x.1)) {
                if stop() {
                    return None;
                }
                // A note gone since the index saw it has no edges.
                let g = read(path)
                    .map(|text| extract::note(path, &text))
                    .unwrap_or_default();
                out.push(ReadNote::new(path.clone(), hash.clone(), g));
            }
            Some(out)
        };
        let readers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4));
        let per = to_read.len().div_ceil(readers).max(1);
        let parts: Vec<Option<Vec<ReadNote>>> = std::thread::scope(|s| {
            let handles: Vec<_> = to_read
                .chunks(per)
                .map(|part| s.spawn(move || read_part(part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().ok().flatten())
                .collect()
        });
        for part in parts {
            match part {
                Some(p) => read_now.extend(p),
                None => return Ok(None),
            }
        }
        let stats = SyncStats {
            notes: files.len(),
            read: read_now.len(),
            removed,
            edges: 0,
        };
        // Every note the index has, in path order: read now, or kept.
        let fresh: HashMap<&str, &ReadNote> =
            read_now.iter().map(|r| (r.path.as_str(), r)).collect();
        let mut b = Builder::default();
        for p in &wanted {
            match (fresh.get(p), known.get(p)) {
                (Some(r), _) => b.read(r),
                (None, Some(&(_, id))) => b.kept(old, id),
                (None, None) => {}
            }
        }
        let graph = b.finish(extract::READER, fingerprint)?;
        if let Some(d) = &self.dir {
            let path = d.join(FILE);
            crate::core::files::atomic_write(&path, &graph.to_bytes())
                .map_err(|source| GraphError::Write { path, source })?;
            for f in OLD_FILES {
                let _ = std::fs::remove_file(d.join(f));
            }
        }
        self.graph = graph;
        Ok(Some(SyncStats {
            edges: self.edge_count(),
            ..stats
        }))
    }

    fn visible(&self, note: u32) -> bool {
        crate::retrieval::frontmatter::sees(&self.tenant, self.graph.note_tenant(note))
    }

    fn edge_visible(&self, e: u32) -> bool {
        self.visible(self.graph.edge_col(e, E_NOTE))
    }

    fn name_visible(&self, m: u32) -> bool {
        self.visible(self.graph.name_col(m, M_NOTE))
    }

    /// The relations of the edges the questions see.
    pub fn relations(&self) -> Vec<String> {
        let g = &self.graph;
        let rels: BTreeSet<&str> = g
            .edges
            .iter()
            .filter(|r| self.visible(r[E_NOTE]))
            .map(|r| g.s(r[E_REL]))
            .collect();
        rels.into_iter().map(str::to_string).collect()
    }

    /// The edges the questions see.
    fn edge_count(&self) -> usize {
        self.graph
            .edges
            .iter()
            .filter(|r| self.visible(r[E_NOTE]))
            .count()
    }

    /// The notes the questions see.
    pub fn note_count(&self) -> usize {
        (0..self.graph.notes.len() as u32)
            .filter(|&n| self.visible(n))
            .count()
    }

    /// The notes a name is the title, file name or alias of: path and name,
    /// by path.
    pub fn notes_named(&self, k: &str) -> Vec<(String, String)> {
        let g = &self.graph;
        let Some(id) = g.key_id(k) else {
            return Vec::new();
        };
        let mut notes: Vec<u32> = g
            .names_with(id)
            .iter()
            .map(|&m| g.name_col(m, M_NOTE))
            .filter(|&n| self.visible(n))
            .collect();
        notes.sort_unstable();
        notes.dedup();
        notes
            .into_iter()
            .map(|n| {
                let row = g.notes[n as usize];
                (g.s(row[N_PATH]).to_string(), g.s(row[N_NAME]).to_string())
            })
            .collect()
    }

    /// Whether the questions see a note or an edge with this name (by id).
    fn sees_key(&self, id: u32) -> bool {
        let g = &self.graph;
        g.names_with(id).iter().any(|&m| self.name_visible(m))
            || g.edges_from(id).iter().any(|&e| self.edge_visible(e))
            || g.edges_to(id).iter().any(|&e| self.edge_visible(e))
    }

    /// The names (of notes, or used by edges) that start with the word
    /// `first` ("marcus" in "marcus oyelaran", "pay 1412" in "pay 1412
    /// tokenvault v2 migration"), at most `max`, in order.
    pub fn names_starting(&self, first: &str, max: usize) -> Vec<String> {
        // Keys between "first " and "first!" are those that start with it.
        self.graph
            .key_range(&format!("{first} "), &format!("{first}!"))
            .filter(|&id| self.sees_key(id))
            .take(max)
            .map(|id| self.graph.k(id).to_string())
            .collect()
    }

    /// Every name of these notes.
    pub fn names_of(&self, paths: &[String]) -> Vec<String> {
        let g = &self.graph;
        let mut out = Vec::new();
        for p in paths {
            let n = g.notes.partition_point(|r| g.s(r[N_PATH]) < p.as_str());
            if n >= g.notes.len() || g.note_path(n as u32) != p || !self.visible(n as u32) {
                continue;
            }
            out.extend(
                Graph::of_note(&g.names, n as u32)
                    .iter()
                    .map(|r| g.k(r[M_KEY]).to_string()),
            );
        }
        out
    }

    /// The edges from (`outgoing`) or to one of `keys`.
    pub fn edges_at(&self, keys: &[String], outgoing: bool) -> Vec<StoredEdge> {
        let g = &self.graph;
        let mut out: Vec<StoredEdge> = keys
            .iter()
            .filter_map(|k| g.key_id(k))
            .flat_map(|id| {
                if outgoing {
                    g.edges_from(id)
                } else {
                    g.edges_to(id)
                }
            })
            .filter(|&&e| self.edge_visible(e))
            .filter_map(|&e| g.stored(e))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// How a name is written in the notes: the first edge's spelling.
    pub fn spelling(&self, k: &str) -> Option<String> {
        let g = &self.graph;
        let id = g.key_id(k)?;
        let first = |edges: &[u32], col: usize| {
            edges
                .iter()
                .find(|&&e| self.edge_visible(e))
                .map(|&e| g.s(g.edge_col(e, col)).to_string())
        };
        first(g.edges_from(id), E_FROM).or_else(|| first(g.edges_to(id), E_TO))
    }

    /// Whether a note or an edge has this name.
    pub fn knows(&self, k: &str) -> bool {
        self.graph.key_id(k).is_some_and(|id| self.sees_key(id))
    }

    /// The notes one of whose names holds `k` as whole words ("billing
    /// review" in "billing review 2026 11 20"), at most `max`.
    pub fn notes_containing(&self, k: &str, max: usize) -> Vec<String> {
        let g = &self.graph;
        let needle = format!(" {k} ");
        let mut spaced = String::new();
        let mut holds = |name: &str| {
            spaced.clear();
            spaced.extend([" ", name, " "]);
            spaced.contains(&needle)
        };
        let mut out: Vec<String> = Vec::new();
        for r in &g.names {
            if out.len() >= max {
                break;
            }
            let path = g.note_path(r[M_NOTE]);
            if self.visible(r[M_NOTE])
                && out.last().map(String::as_str) != Some(path)
                && holds(g.k(r[M_KEY]))
            {
                out.push(path.to_string());
            }
        }
        out
    }

    /// Every name an edge or a note has, for "did you mean".
    pub fn all_keys(&self) -> Vec<String> {
        (0..self.graph.keys.len() as u32)
            .filter(|&id| self.sees_key(id))
            .map(|id| self.graph.k(id).to_string())
            .collect()
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
        // and writes, as two runs started together on a new index do.
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
        let again = GraphStore::open(Some(dir.path())).unwrap();
        assert_eq!(again.edges_at(&["billing service".into()], false).len(), 1);
    }

    fn three_notes() -> (Vec<(String, String)>, BTreeMap<String, String>) {
        let notes = BTreeMap::from([
            (
                "a.md".to_string(),
                "Ann owns the billing service.\n".to_string(),
            ),
            (
                "b.md".to_string(),
                "---\ntenant_id: acme\n---\nThe billing service depends on [[Ledger]].\n"
                    .to_string(),
            ),
            (
                "c.md".to_string(),
                "# Ledger\nLedger is run by Bo.\n".to_string(),
            ),
        ]);
        let files = notes.keys().map(|p| (p.clone(), "1".to_string())).collect();
        (files, notes)
    }

    #[test]
    fn a_graph_reads_back_as_written_and_a_damaged_file_is_built_again_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (files, notes) = three_notes();
        let read = |p: &str| notes.get(p).cloned();
        let mut g = GraphStore::open(Some(dir.path())).unwrap();
        g.sync(&files, &read, &|| false).unwrap().unwrap();
        let bytes = std::fs::read(dir.path().join(FILE)).unwrap();
        assert_eq!(Graph::from_bytes(&bytes).as_ref(), Some(&g.graph));
        // Cut anywhere or with any byte changed, a file reads as no graph.
        for cut in 0..bytes.len() {
            assert_eq!(Graph::from_bytes(&bytes[..cut]), None, "cut at {cut}");
        }
        let body = &bytes[..bytes.len() - 4];
        for at in 0..body.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut damaged = body.to_vec();
                damaged[at] ^= flip;
                // As damaged, it fails its check.
                let plain = [damaged.as_slice(), &bytes[bytes.len() - 4..]].concat();
                assert_eq!(Graph::from_bytes(&plain), None, "byte {at} ^ {flip}");
                // Made to pass it (a file written to mislead), it reads as a
                // graph whose numbers all point inside it, or as none; asked
                // anything, it answers without a panic.
                let check = crc32fast::hash(&damaged).to_le_bytes();
                damaged.extend_from_slice(&check);
                if let Some(d) = Graph::from_bytes(&damaged) {
                    let s = GraphStore {
                        graph: d,
                        dir: None,
                        tenant: "acme".into(),
                    };
                    s.all_keys();
                    s.relations();
                    for k in ["ann", "billing service", "ledger", "bo"] {
                        s.edges_at(&[k.into()], true);
                        s.edges_at(&[k.into()], false);
                        s.notes_named(k);
                        s.names_starting(k, 3);
                        s.spelling(k);
                        s.notes_containing(k, 3);
                    }
                    s.names_of(&["a.md".into(), "c.md".into()]);
                    let mut b = Builder::default();
                    for id in 0..s.graph.notes.len() as u32 {
                        b.kept(&s.graph, id);
                    }
                    b.finish("r", String::new()).unwrap();
                }
            }
        }
        std::fs::write(dir.path().join(FILE), &bytes[..bytes.len() / 2]).unwrap();
        let mut again = GraphStore::open(Some(dir.path())).unwrap();
        let s = again.sync(&files, &read, &|| false).unwrap().unwrap();
        // (b.md is a tenant's: its two edges are not counted here.)
        assert_eq!((s.read, s.edges), (3, 2));
        assert_eq!(std::fs::read(dir.path().join(FILE)).unwrap(), bytes);
    }

    #[test]
    fn a_graph_read_by_other_rules_or_kept_by_an_older_build_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let (files, notes) = three_notes();
        let read = |p: &str| notes.get(p).cloned();
        for old in OLD_FILES {
            std::fs::write(dir.path().join(old), "SQLite format 3").unwrap();
        }
        let mut g = GraphStore::open(Some(dir.path())).unwrap();
        assert_eq!(g.sync(&files, &read, &|| false).unwrap().unwrap().read, 3);
        for old in OLD_FILES {
            assert!(!dir.path().join(old).exists(), "{old} is left");
        }
        // The same notes: nothing read, nothing written.
        let written = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .modified()
            .unwrap();
        let mut g = GraphStore::open(Some(dir.path())).unwrap();
        assert_eq!(g.sync(&files, &read, &|| false).unwrap().unwrap().read, 0);
        assert_eq!(
            std::fs::metadata(dir.path().join(FILE))
                .unwrap()
                .modified()
                .unwrap(),
            written
        );
        // Edges read by another version of the reader are read again.
        g.graph.reader = "an older reader".into();
        std::fs::write(dir.path().join(FILE), g.graph.to_bytes()).unwrap();
        let mut g = GraphStore::open(Some(dir.path())).unwrap();
        assert_eq!(g.sync(&files, &read, &|| false).unwrap().unwrap().read, 3);
    }

    #[test]
    fn notes_read_ahead_are_kept_unless_they_changed_since() {
        let dir = tempfile::tempdir().unwrap();
        let (files, notes) = three_notes();
        let asked = std::sync::Mutex::new(Vec::new());
        let read = |p: &str| {
            asked.lock().unwrap().push(p.to_string());
            notes.get(p).cloned()
        };
        let mut whole = GraphStore::open(Some(dir.path())).unwrap();
        let mut g = GraphStore::open(None).unwrap();
        assert!(g.held().is_empty());
        // a.md read ahead as it is; c.md read ahead from an older text.
        let ahead = vec![
            ReadNote::read("a.md", "1", &notes["a.md"]),
            ReadNote::read("c.md", "0", "# Ledger\nLedger is run by Cy.\n"),
        ];
        let s = g
            .sync_with(&files, ahead, &read, &|| false)
            .unwrap()
            .unwrap();
        assert_eq!((s.notes, s.read), (3, 3));
        let mut asked_for = asked.lock().unwrap().clone();
        asked_for.sort();
        assert_eq!(asked_for, ["b.md", "c.md"]);
        // The same graph as one read whole.
        whole.sync(&files, &read, &|| false).unwrap().unwrap();
        assert_eq!(g.graph.to_bytes(), whole.graph.to_bytes());
        // Held as read: nothing of it needs reading ahead again.
        let held = g.held();
        assert_eq!(held.len(), 3);
        assert_eq!(held.get("c.md"), Some(&"1"));
        // Read by other rules: every note is read again.
        g.graph.reader = "an older reader".into();
        assert!(g.held().is_empty());
    }

    #[test]
    fn a_tenant_sees_the_shared_notes_and_its_own() {
        let (files, notes) = three_notes();
        let mut g = GraphStore::open(None).unwrap();
        g.sync(&files, &|p| notes.get(p).cloned(), &|| false)
            .unwrap();
        let seen = |g: &GraphStore| {
            (
                g.note_count(),
                g.edges_at(&["billing service".into()], true).len(),
                g.knows("ledger"),
                g.all_keys(),
            )
        };
        let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            seen(&g),
            (
                2,
                0,
                true,
                keys(&["a", "ann", "billing service", "bo", "c", "ledger"])
            )
        );
        let g = g.for_tenant("acme");
        assert_eq!(
            seen(&g),
            (
                3,
                1,
                true,
                keys(&["a", "ann", "b", "billing service", "bo", "c", "ledger"])
            )
        );
        assert_eq!(g.notes_containing("ledger", 3), ["c.md"]);
        assert_eq!(g.names_starting("billing", 3), ["billing service"]);
        let g = g.for_tenant("other");
        assert_eq!(seen(&g).1, 0);
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
        let e = g.edges_at(&["billing service".into()], false);
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
