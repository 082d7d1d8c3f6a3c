//! The tantivy index behind `kb.*`: schema, incremental updates and a
//! per-process cache of opened indexes.
//!
//! Crash safety: the manifest (path → mtime, size, hash) is written to a new
//! file named after its content, and the tantivy commit payload names it, so
//! index and manifest change together in one atomic `meta.json` rename. A
//! crash before the commit leaves the previous commit (and its manifest) in
//! place; the next run sees the differences and redoes them. Uncommitted
//! segment files are garbage-collected by tantivy, stale manifests by us.

use super::chunk::{chunk_document, ChunkOptions, KbError};
use crate::core::cache::Caches;
use crate::core::hash::hex_hash;
use crate::core::walk::{Entry, WalkOptions};
use crate::retrieval::frontmatter::tenant_of;
use crate::retrieval::graph::store::{GraphError, GraphStore, ReadNote};
use crate::retrieval::syntax::{DateRange, ParsedQuery};
use chrono::NaiveDate;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tantivy::collector::{DocSetCollector, TopDocs};
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query, RangeQuery,
    RegexQuery, TermQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value as _, FAST, INDEXED,
    STORED, STRING,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, Term};

/// Bumped when the schema or chunking changes: an index with another version
/// is rebuilt.
const SCHEMA_VERSION: u32 = 5;
const MANIFEST_PREFIX: &str = "kb-manifest-";
const TOKENIZER: &str = "kb_en";

#[derive(Clone, Copy)]
struct Fields {
    id: Field,
    path: Field,
    path_prefix: Field,
    title: Field,
    section: Field,
    body: Field,
    date: Field,
    mtime: Field,
    meta: Field,
    filter: Field,
    /// The hash of the text the chunk is embedded as: its vector's key.
    hash: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_stored().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let f = Fields {
        id: b.add_text_field("id", STRING | STORED),
        path: b.add_text_field("path", STRING | STORED),
        // Every folder prefix of the path, lower-cased: `in:work` is a term lookup.
        path_prefix: b.add_text_field("path_prefix", STRING),
        title: b.add_text_field("title", text.clone()),
        section: b.add_text_field("section", text.clone()),
        body: b.add_text_field("body", text),
        // Days since 1970-01-01 of the note's date.
        date: b.add_i64_field("date", INDEXED | FAST | STORED),
        mtime: b.add_i64_field("mtime", STORED | FAST),
        meta: b.add_text_field("meta", STORED),
        // `key=value` (lower-case) for every scalar metadata value.
        filter: b.add_text_field("filter", STRING),
        hash: b.add_u64_field("hash", FAST),
    };
    (b.build(), f)
}

fn register_tokenizer(index: &Index) {
    let analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(
            StopWordFilter::new(Language::English).expect("English stop words ship with tantivy"),
        )
        .filter(Stemmer::new(Language::English))
        .build();
    index.tokenizers().register(TOKENIZER, analyzer);
}

#[derive(Debug, Clone, Default)]
struct Manifest {
    version: u32,
    /// What the chunks depend on besides the files (chunk options).
    options: String,
    files: BTreeMap<String, FileEntry>,
}

#[derive(Debug, Clone)]
struct FileEntry {
    mtime_ms: i64,
    size: u64,
    hash: String,
    chunks: u32,
}

impl Manifest {
    /// One line per file, `mtime size chunks hash path` tab-separated (path
    /// last, JSON-quoted): about 10x faster to read back than JSON objects,
    /// which matters because every fresh process reads it.
    fn to_text(&self) -> String {
        let mut out = format!(
            "kb-manifest\t{}\t{}\n",
            self.version,
            self.options.replace(['\t', '\n'], " ")
        );
        for (p, e) in &self.files {
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\n",
                e.mtime_ms,
                e.size,
                e.chunks,
                e.hash,
                Value::String(p.clone())
            ));
        }
        // Marks a complete file: a manifest cut short is not taken as valid.
        out.push_str(&format!("end\t{}\n", self.files.len()));
        out
    }

    /// None when the text is not a manifest (then the index is rebuilt).
    fn from_text(text: &str) -> Option<Manifest> {
        let mut lines = text.lines();
        let mut head = lines.next()?.splitn(3, '\t');
        if head.next()? != "kb-manifest" {
            return None;
        }
        let version = head.next()?.parse().ok()?;
        let options = head.next().unwrap_or("").to_string();
        // Written in path order, so collecting is a bulk build, not 10,000 inserts.
        let mut files = Vec::new();
        for l in lines {
            if let Some(n) = l.strip_prefix("end\t") {
                let files: BTreeMap<String, FileEntry> = files.into_iter().collect();
                return (n.parse::<usize>().ok()? == files.len()).then_some(Manifest {
                    version,
                    options,
                    files,
                });
            }
            let mut f = l.splitn(5, '\t');
            let mtime_ms = f.next()?.parse().ok()?;
            let size = f.next()?.parse().ok()?;
            let chunks = f.next()?.parse().ok()?;
            let hash = f.next()?.to_string();
            let quoted = f.next()?;
            // Most paths need no unescaping; JSON only for those that do.
            let path = match quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
                Some(plain) if !plain.contains(['\\', '"']) => plain.to_string(),
                _ => serde_json::from_str(quoted).ok()?,
            };
            files.push((
                path,
                FileEntry {
                    mtime_ms,
                    size,
                    hash,
                    chunks,
                },
            ));
        }
        None
    }
}

/// What an update did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateStats {
    /// Notes left out: not UTF-8 (relative paths).
    pub skipped: Vec<String>,
    pub files: usize,
    pub chunks: usize,
    pub added: usize,
    pub updated: usize,
    pub removed: usize,
    pub unchanged: usize,
    pub rebuilt: bool,
}

impl UpdateStats {
    pub fn changed(&self) -> bool {
        self.added + self.updated + self.removed > 0 || self.rebuilt
    }
}

struct State {
    /// Shared, not copied: an update compares against it without a clone.
    manifest: Arc<Manifest>,
    /// (mtime, size) of meta.json when `manifest` was read, to notice
    /// commits made by other processes.
    meta_stamp: Option<(i64, u64)>,
    last_check: Option<Instant>,
}

/// An opened index for one knowledge base.
pub struct KbIndex {
    pub root: PathBuf,
    /// None when the index lives in memory (the index directory was not writable).
    pub dir: Option<PathBuf>,
    index: Index,
    reader: IndexReader,
    f: Fields,
    state: Mutex<State>,
    /// One update at a time within this process (tantivy's lock covers others).
    writing: Mutex<()>,
    /// The row order of the last commit seen, by searcher generation.
    order: Mutex<Option<(u64, Arc<RowOrder>)>>,
    /// A search read past the end of one of its mapped files (see
    /// `core::mapped`): its folder was cleared, and the next open builds
    /// it again instead of using this one.
    damaged: std::sync::atomic::AtomicBool,
}

/// One chunk, as stored in the index.
#[derive(Debug, Clone)]
pub struct ChunkRow {
    pub id: String,
    pub path: String,
    pub title: String,
    pub section: String,
    pub text: String,
    pub metadata: Value,
    pub mtime_ms: i64,
}

/// The live chunks of one commit in row order (by segment, then by
/// document), without their text. `fingerprint` names these rows in this
/// order in any process: segments never change once written and are named
/// by random ids, and a segment's deletions only grow, so vectors stored in
/// this order stay valid for as long as the fingerprint matches.
pub struct RowOrder {
    pub fingerprint: String,
    /// The commit the addresses belong to (kept open while they are used).
    searcher: tantivy::Searcher,
    addrs: Vec<tantivy::DocAddress>,
    /// Each row's [`embed_hash`](super::chunk::embed_hash), read once.
    hashes: std::sync::OnceLock<Arc<Vec<u64>>>,
}

impl RowOrder {
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }
}

/// Indexes kept open (see `core::cache`).
const MAX_OPEN_INDEXES: usize = 32;

fn index_err(dir: &Path, e: impl std::fmt::Display) -> KbError {
    KbError::Index {
        path: dir.display().to_string(),
        message: e.to_string(),
    }
}

impl KbIndex {
    /// The cached index for `root` stored in `dir` (None: in memory), opened
    /// or created on first use. A damaged or outdated index directory is
    /// emptied and created again.
    pub fn open(caches: &Caches, root: &Path, dir: Option<&Path>) -> Result<Arc<KbIndex>, KbError> {
        let key = match dir {
            Some(d) => d.to_path_buf(),
            None => PathBuf::from(format!("ram:{}", root.display())),
        };
        // Opened under the lock: one open of a folder at a time.
        caches.with(|c: &mut HashMap<PathBuf, Arc<KbIndex>>| {
            if let Some(ix) = c.get(&key) {
                if !ix.damaged.load(std::sync::atomic::Ordering::SeqCst) {
                    return Ok(ix.clone());
                }
            }
            let ix = Arc::new(Self::open_uncached(root, dir)?);
            c.insert(key.clone(), ix.clone());
            crate::core::cache::bound(c, &key, MAX_OPEN_INDEXES);
            Ok(ix)
        })
    }

    fn open_uncached(root: &Path, dir: Option<&Path>) -> Result<KbIndex, KbError> {
        let (schema, f) = schema();
        let open = |d: Option<&Path>| -> tantivy::Result<(Index, IndexReader)> {
            let index = match d {
                None => Index::create_in_ram(schema.clone()),
                Some(d) => open_dir(d, &schema)?,
            };
            register_tokenizer(&index);
            let reader = index
                .reader_builder()
                .reload_policy(ReloadPolicy::Manual)
                .try_into()?;
            Ok((index, reader))
        };
        if let Some(d) = dir {
            std::fs::create_dir_all(d).map_err(|e| KbError::io(d, e))?;
        }
        let (index, reader) = match open(dir) {
            Ok(x) => x,
            Err(e) => match dir {
                // Unreadable, damaged or from another schema: it is derived
                // data, start over.
                Some(d) => {
                    clear_dir(d)?;
                    open(dir).map_err(|e| index_err(d, e))?
                }
                None => return Err(index_err(root, e)),
            },
        };
        let ix = KbIndex {
            root: root.to_path_buf(),
            dir: dir.map(Path::to_path_buf),
            index,
            reader,
            f,
            state: Mutex::new(State {
                manifest: Arc::default(),
                meta_stamp: None,
                last_check: None,
            }),
            writing: Mutex::new(()),
            order: Mutex::new(None),
            damaged: std::sync::atomic::AtomicBool::new(false),
        };
        ix.load_manifest()?;
        Ok(ix)
    }

    fn meta_stamp(&self) -> Option<(i64, u64)> {
        let m = std::fs::metadata(self.dir.as_ref()?.join("meta.json")).ok()?;
        Some((crate::core::walk::mtime_ms(&m), m.len()))
    }

    /// Rereads the manifest from the last commit when another process committed.
    fn load_manifest(&self) -> Result<(), KbError> {
        let stamp = self.meta_stamp();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.meta_stamp.is_some() && st.meta_stamp == stamp {
            return Ok(());
        }
        let metas = self
            .index
            .load_metas()
            .map_err(|e| index_err(self.shown(), e))?;
        st.manifest = Arc::new(match metas.payload.as_deref() {
            Some(p) => self.read_manifest(p).unwrap_or_default(),
            None => Manifest::default(),
        });
        st.meta_stamp = stamp;
        drop(st);
        self.reader.reload().map_err(|e| index_err(self.shown(), e))
    }

    /// The manifest a commit payload points at: `file:NAME` in the index
    /// directory, or `inline:TEXT` for an index in memory.
    fn read_manifest(&self, payload: &str) -> Option<Manifest> {
        if let Some(t) = payload.strip_prefix("inline:") {
            return Manifest::from_text(t);
        }
        let name = payload.strip_prefix("file:")?;
        let text = std::fs::read_to_string(self.dir.as_ref()?.join(name)).ok()?;
        Manifest::from_text(&text)
    }

    /// Writes the manifest for the coming commit and returns the payload that
    /// names it. Not fsynced (that doubled the time of a small update): after
    /// a power loss a missing or cut manifest fails to read (see the `end`
    /// line), and the index is rebuilt.
    fn write_manifest(&self, m: &Manifest) -> Result<String, KbError> {
        let text = m.to_text();
        let Some(dir) = &self.dir else {
            return Ok(format!("inline:{text}"));
        };
        let name = format!("{MANIFEST_PREFIX}{}.tsv", hex_hash(&[text.as_bytes()]));
        let path = dir.join(&name);
        let tmp = dir.join(format!("{name}.tmp"));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| KbError::io(&path, e))?;
        Ok(format!("file:{name}"))
    }

    /// Removes manifests other than the committed one (left by earlier
    /// commits or by a crash before a commit). Best effort.
    fn remove_stale_manifests(&self, keep: &str) {
        let Some(dir) = &self.dir else { return };
        let keep = keep.strip_prefix("file:").unwrap_or(keep);
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let n = e.file_name();
                let n = n.to_string_lossy();
                if n.starts_with(MANIFEST_PREFIX) && n != keep {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    fn shown(&self) -> &Path {
        self.dir.as_deref().unwrap_or(&self.root)
    }

    /// True when the index was checked against the files less than `interval` ago.
    pub fn fresh_within(&self, interval: Duration) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.last_check.is_some_and(|t| t.elapsed() < interval)
    }

    pub fn is_empty(&self) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.manifest.version == 0
    }

    /// Notes and chunks in the index, as of its last commit seen.
    pub fn counts(&self) -> (usize, usize) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let chunks = st.manifest.files.values().map(|f| f.chunks as usize).sum();
        (st.manifest.files.len(), chunks)
    }

    /// Each indexed note's path and content hash, as the last update left
    /// them (what the graph beside the index is kept in step with).
    pub fn file_hashes(&self) -> Vec<(String, String)> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.manifest
            .files
            .iter()
            .map(|(p, e)| (p.clone(), e.hash.clone()))
            .collect()
    }

    /// Brings the index up to date with the files: only new, changed and
    /// deleted files are touched (mtime + size first, then the content hash).
    /// `progress(done, total)` is called while files are indexed.
    pub fn update(
        &self,
        walk: &WalkOptions,
        chunking: &ChunkOptions,
        force: bool,
        progress: &dyn Fn(usize, usize),
        stop: &dyn Fn() -> bool,
    ) -> Result<UpdateStats, KbError> {
        let _one = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        self.load_manifest()?;
        let files = crate::core::walk::walk(&self.root, walk)?;
        // Notes are read below the root's descriptor, never following a
        // symlink: a folder swapped for a link after the walk cannot lead out.
        let root_dir = crate::core::confined::Dir::open_path(&self.root)
            .map_err(|e| KbError::io(&self.root, e))?;
        let options = format!("{chunking:?}");
        let old = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .manifest
            .clone();
        let rebuild = force || old.version != SCHEMA_VERSION || old.options != options;
        let mut stats = UpdateStats {
            files: files.len(),
            rebuilt: rebuild && !old.files.is_empty(),
            ..Default::default()
        };
        // Nothing changed (the common case), checked in one pass over both
        // sorted lists without building a new manifest; past this point
        // something is new, changed, touched or gone, and is committed.
        if !rebuild
            && files.len() == old.files.len()
            && files
                .iter()
                .zip(&old.files)
                .all(|(f, (p, e))| f.rel_path == *p && f.mtime_ms == e.mtime_ms && f.size == e.size)
        {
            stats.unchanged = files.len();
            stats.chunks = old.files.values().map(|e| e.chunks as usize).sum();
            self.mark_checked();
            return Ok(stats);
        }
        let mut next = Manifest {
            version: SCHEMA_VERSION,
            options,
            files: BTreeMap::new(),
        };
        // The graph beside the index reads the notes' edges as the loop
        // below reads the notes (one core), on the other core.
        let ahead = self.dir.as_deref().map(GraphAhead::start);
        // Files whose content must be (re)indexed, with their text.
        let mut todo: Vec<(&Entry, Arc<String>, bool)> = Vec::new();
        for file in &files {
            // Between notes: a step timeout or a cancel stops indexing, and
            // the index stays as it was (nothing is committed).
            if stop() {
                return Err(KbError::Stopped(self.shown().display().to_string()));
            }
            let prev = if rebuild {
                None
            } else {
                old.files.get(&file.rel_path)
            };
            if let Some(p) = prev {
                if p.mtime_ms == file.mtime_ms && p.size == file.size {
                    stats.unchanged += 1;
                    stats.chunks += p.chunks as usize;
                    next.files.insert(file.rel_path.clone(), p.clone());
                    continue;
                }
            }
            let bytes = match root_dir.read_rel(&file.rel_path) {
                Ok(b) => b,
                // Deleted since the walk listed it: as if the walk had not.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(KbError::io(&file.abs_path, e)),
            };
            let Ok(text) = String::from_utf8(bytes) else {
                // One odd file must not stop the whole knowledge base.
                stats.skipped.push(file.rel_path.clone());
                continue;
            };
            let hash = hex_hash(&[text.as_bytes()]);
            if let Some(p) = prev.filter(|p| p.hash == hash) {
                // Touched, not edited: remember the new mtime, keep the chunks.
                stats.unchanged += 1;
                stats.chunks += p.chunks as usize;
                next.files.insert(
                    file.rel_path.clone(),
                    FileEntry {
                        mtime_ms: file.mtime_ms,
                        size: file.size,
                        ..p.clone()
                    },
                );
                continue;
            }
            let existed = prev.is_some();
            let text = Arc::new(text);
            if let Some(a) = &ahead {
                a.send(&file.rel_path, &hash, &text);
            }
            next.files.insert(
                file.rel_path.clone(),
                FileEntry {
                    mtime_ms: file.mtime_ms,
                    size: file.size,
                    hash,
                    chunks: 0,
                },
            );
            todo.push((file, text, existed));
        }
        let removed: Vec<&String> = if rebuild {
            Vec::new()
        } else {
            old.files
                .keys()
                .filter(|k| !next.files.contains_key(*k))
                .collect()
        };
        stats.removed = removed.len();
        // An index with documents but no readable manifest is rebuilt from scratch
        // (its files are unknown, so stale ones could not be removed one by one).
        let first_build = self.reader.searcher().num_docs() == 0;

        // The graph of the notes is brought up to date beside the index, on
        // a thread of its own, from the edges read ahead and the texts just
        // read: it is built with the index rather than on the first
        // question. Should it fail (its file cannot be written), `kb.graph`
        // brings it up to date itself and says why it cannot.
        let hashes: Vec<(String, String)> = next
            .files
            .iter()
            .map(|(p, e)| (p.clone(), e.hash.clone()))
            .collect();
        let texts: std::collections::HashMap<&str, &str> = todo
            .iter()
            .map(|(f, t, _)| (f.rel_path.as_str(), t.as_str()))
            .collect();
        let payload = std::thread::scope(|s| {
            let graph = ahead.map(|a| {
                let (hashes, texts, root) = (&hashes, &texts, &root_dir);
                s.spawn(move || a.finish(hashes, texts, root))
            });
            let indexed = (|| -> Result<String, KbError> {
                let threads = if todo.len() > 200 { 2 } else { 1 };
                let mut writer = self.writer(threads)?;
                if rebuild && !first_build {
                    writer
                        .delete_all_documents()
                        .map_err(|e| index_err(self.shown(), e))?;
                }
                for path in &removed {
                    writer.delete_term(Term::from_field_text(self.f.path, path));
                }
                let total = todo.len();
                for (n, (file, text, existed)) in todo.iter().enumerate() {
                    if stop() {
                        return Err(KbError::Stopped(self.shown().display().to_string()));
                    }
                    // Deleted even when new to our manifest: another process may have
                    // indexed it since we read that manifest (no duplicates then).
                    writer.delete_term(Term::from_field_text(self.f.path, &file.rel_path));
                    if *existed {
                        stats.updated += 1;
                    } else {
                        stats.added += 1;
                    }
                    let chunks = chunk_document(&file.rel_path, text, chunking);
                    if let Some(e) = next.files.get_mut(&file.rel_path) {
                        e.chunks = chunks.len() as u32;
                    }
                    stats.chunks += chunks.len();
                    for mut c in chunks {
                        // Inside a note too: a huge note is thousands of chunks.
                        if stop() {
                            return Err(KbError::Stopped(self.shown().display().to_string()));
                        }
                        c.mtime_ms = file.mtime_ms;
                        writer
                            .add_document(self.document(&c))
                            .map_err(|e| index_err(self.shown(), e))?;
                    }
                    if n % 100 == 99 {
                        progress(n + 1, total);
                    }
                }
                if total > 0 {
                    progress(total, total);
                }
                let payload = self.write_manifest(&next)?;
                let mut prepared = writer
                    .prepare_commit()
                    .map_err(|e| index_err(self.shown(), e))?;
                prepared.set_payload(&payload);
                prepared.commit().map_err(|e| index_err(self.shown(), e))?;
                drop(writer);
                Ok(payload)
            })();
            if let Some(g) = graph {
                // Its failure is `kb.graph`'s to report (above).
                let _ = g.join();
            }
            indexed
        })?;
        self.remove_stale_manifests(&payload);
        self.reader
            .reload()
            .map_err(|e| index_err(self.shown(), e))?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.manifest = Arc::new(next);
        st.meta_stamp = self.meta_stamp();
        st.last_check = Some(Instant::now());
        Ok(stats)
    }

    fn mark_checked(&self) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_check = Some(Instant::now());
    }

    /// The writer, waiting up to 5 s for another process to release the lock.
    fn writer(&self, threads: usize) -> Result<tantivy::IndexWriter, KbError> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self
                .index
                .writer_with_num_threads(threads, threads * 30_000_000)
            {
                Ok(w) => return Ok(w),
                Err(tantivy::TantivyError::LockFailure(..)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(tantivy::TantivyError::LockFailure(..)) => {
                    return Err(KbError::Locked(self.shown().display().to_string()))
                }
                Err(e) => return Err(index_err(self.shown(), e)),
            }
        }
    }

    fn document(&self, c: &super::chunk::Chunk) -> TantivyDocument {
        let f = &self.f;
        let mut d = TantivyDocument::default();
        d.add_text(f.id, &c.id);
        d.add_text(f.path, &c.path);
        let lower = c.path.to_lowercase();
        let mut acc = String::new();
        for part in lower.split('/') {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(part);
            d.add_text(f.path_prefix, &acc);
        }
        d.add_text(f.title, &c.title);
        // A note's first chunk is headed by its title: counted once, as the
        // title, not again as a section heading.
        let section = if c.section.trim().eq_ignore_ascii_case(c.title.trim()) {
            ""
        } else {
            &c.section
        };
        if !section.is_empty() {
            d.add_text(f.section, section);
        }
        d.add_text(f.body, &c.text);
        // Of the fields as stored, as `chunk_rows` reads them back.
        d.add_u64(f.hash, super::chunk::embed_hash(&c.title, section, &c.text));
        if let Some(days) = c
            .metadata
            .get("date")
            .and_then(Value::as_str)
            .and_then(|s| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
            .map(days)
        {
            d.add_i64(f.date, days);
        }
        d.add_i64(f.mtime, c.mtime_ms);
        d.add_text(f.meta, Value::Object(c.metadata.clone()).to_string());
        d.add_text(f.filter, tenant_term(&tenant_of(&c.metadata)));
        for (k, v) in &c.metadata {
            let k = k.to_lowercase();
            let vals: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            for v in vals {
                if let Some(s) = scalar(v) {
                    d.add_text(f.filter, format!("{k}={}", s.to_lowercase()));
                }
            }
        }
        d
    }

    /// Runs a search; hits are JSON objects, best first, and the number of
    /// matching chunks.
    /// Searches; a search that read past the end of a mapped file of the
    /// index (cut short under us) fails, and the index is built again when
    /// next used (issue 49, item 9: it answered from zero pages, silently).
    pub fn search(&self, req: &SearchRequest) -> Result<(Vec<Value>, usize), KbError> {
        let faults = crate::core::mapped::faults();
        let found = self.search_pages(req);
        if crate::core::mapped::faults() > faults {
            if let Some(d) = &self.dir {
                self.damaged
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                // Unlinked files stay readable to whoever maps them now.
                let _ = clear_dir(d);
            }
            return Err(KbError::Damaged(self.shown().display().to_string()));
        }
        found
    }

    fn search_pages(&self, req: &SearchRequest) -> Result<(Vec<Value>, usize), KbError> {
        let searcher = self.reader.searcher();
        let f = self.f;
        let mut analyzer = self
            .index
            .tokenizer_for_field(f.body)
            .map_err(|e| index_err(self.shown(), e))?;
        // Tokens with their positions (stop words leave gaps that phrases keep).
        let mut tokens = |s: &str| -> Vec<(usize, String)> {
            let mut out = Vec::new();
            let mut ts = analyzer.token_stream(s);
            ts.process(&mut |t| out.push((t.position, t.text.clone())));
            out
        };
        let fields = [
            (f.title, req.boosts[0]),
            (f.section, req.boosts[1]),
            (f.body, req.boosts[2]),
        ];
        let p = &req.parsed;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut must: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let terms: Vec<&str> = if req.question_words {
            p.terms.iter().map(String::as_str).collect()
        } else {
            crate::retrieval::syntax::content_terms(&p.terms)
        };
        for t in terms {
            let toks = tokens(t);
            if toks.len() > 1 {
                // One word that splits into several (`X-Api-Key`,
                // `switch-over`): the phrase, and each part and the parts
                // written together as words, so "switch-over" also finds
                // "switchover" and a note that says "switch ... over".
                should.push((Occur::Should, across(&fields, |fl| phrase_q(fl, &toks))));
                let joined: String = t.chars().filter(|c| c.is_alphanumeric()).collect();
                let mut parts: Vec<String> = toks.iter().map(|(_, w)| w.clone()).collect();
                parts.extend(tokens(&joined).into_iter().map(|(_, w)| w));
                parts.sort();
                parts.dedup();
                for w in parts {
                    should.push((Occur::Should, across(&fields, |fl| term_q(fl, &w))));
                }
            } else if let Some((_, tok)) = toks.first() {
                should.push((Occur::Should, across(&fields, |fl| term_q(fl, tok))));
            }
        }
        for ph in &p.phrases {
            let toks = tokens(ph);
            if toks.is_empty() {
                continue;
            }
            must.push((Occur::Must, across(&fields, |fl| phrase_q(fl, &toks))));
        }
        for pre in &p.prefixes {
            let lower: String = pre.to_lowercase();
            // The index holds stems; a prefix is matched against them, which
            // also covers most inflections (`deploy*` finds "deployment").
            // The index holds stems, shorter than some prefixes (`plann*` vs
            // "plan"): the prefix's own stem-length truncations match too.
            let n = lower.chars().count();
            let mut alts = vec![format!("{}.*", regex_escape(&lower))];
            for keep in n.saturating_sub(2).max(3)..n {
                alts.push(regex_escape(&lower.chars().take(keep).collect::<String>()));
            }
            let pattern = alts.join("|");
            let q = across(&fields, |fl| match RegexQuery::from_pattern(&pattern, fl) {
                Ok(q) => Box::new(q),
                Err(_) => Box::new(tantivy::query::EmptyQuery),
            });
            should.push((Occur::Should, q));
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let positive = !should.is_empty() || !must.is_empty();
        if !should.is_empty() {
            clauses.push((Occur::Must, Box::new(BooleanQuery::new(should))));
        }
        clauses.extend(must);
        if !positive {
            clauses.push((Occur::Must, Box::new(AllQuery)));
        }
        for ex in &p.excluded {
            for (_, tok) in tokens(ex) {
                clauses.push((Occur::MustNot, across(&fields, |fl| term_q(fl, &tok))));
            }
        }
        clauses.extend(filter_clauses(&f, &searcher, req));
        let query = BooleanQuery::new(clauses);

        let want = req.top_k.max(1);
        let limit = if req.collapse { want * 4 + 10 } else { want };
        let (top, total) = searcher
            .search(
                &query,
                &(
                    TopDocs::with_limit(limit).order_by_score(),
                    tantivy::collector::Count,
                ),
            )
            .map_err(|e| index_err(self.shown(), e))?;
        let mut snippets = tantivy::snippet::SnippetGenerator::create(&searcher, &query, f.body)
            .map_err(|e| index_err(self.shown(), e))?;
        snippets.set_max_num_chars(req.snippet_chars);
        let mut hits: Vec<Value> = Vec::new();
        // With `collapse`: each note's hit, and whether it may still take in
        // its note's next matching chunk (see `INTRO_CHARS`).
        let mut by_path: std::collections::HashMap<String, (usize, bool)> =
            std::collections::HashMap::new();
        for (score, addr) in top {
            if req.threshold.is_some_and(|t| (score as f64) < t) {
                break;
            }
            let doc: TantivyDocument =
                searcher.doc(addr).map_err(|e| index_err(self.shown(), e))?;
            let s = |fl: Field| {
                doc.get_first(fl)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            let path = s(f.path);
            if req.collapse {
                if let Some((at, open)) = by_path.get_mut(&path) {
                    if *open {
                        // A note's short intro ranked first: its best
                        // section comes with it, so the hit says something.
                        *open = false;
                        let hit = &mut hits[*at];
                        let section = s(f.section);
                        let mut text = hit["text"].as_str().unwrap_or("").to_string();
                        text.push_str("\n\n");
                        if !section.is_empty() {
                            text.push_str(&format!("## {section}\n\n"));
                        }
                        text.push_str(&s(f.body));
                        hit["text"] = json!(text);
                        hit["section"] = json!(section);
                        hit["merged"] = json!([hit["id"].clone(), json!(s(f.id))]);
                    }
                    continue;
                }
                if hits.len() >= want {
                    // Full: later chunks only complete notes already in.
                    continue;
                }
            }
            let text = s(f.body);
            let snippet = snippet_text(&snippets.snippet(&text), &text, req.snippet_chars);
            let metadata: Value = serde_json::from_str(&s(f.meta)).unwrap_or(json!({}));
            let mtime = doc.get_first(f.mtime).and_then(|v| v.as_i64()).unwrap_or(0);
            if req.collapse {
                let intro = s(f.section).is_empty() && text.chars().count() <= INTRO_CHARS;
                by_path.insert(path.clone(), (hits.len(), intro));
            }
            hits.push(json!({
                "id": s(f.id),
                "path": path,
                "title": s(f.title),
                "section": s(f.section),
                "text": text,
                "snippet": snippet,
                "score": round(score as f64),
                "metadata": metadata,
                "mtime_ms": mtime,
            }));
            if hits.len() >= want && !req.collapse {
                break;
            }
        }
        Ok((hits, total))
    }

    /// The rows of the current commit (see [`RowOrder`]): cheap, no chunk
    /// is read.
    pub fn row_order(&self) -> Arc<RowOrder> {
        let searcher = self.reader.searcher();
        let generation = searcher.generation().generation_id();
        let mut last = self.order.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, order)) = last.as_ref().filter(|(g, _)| *g == generation) {
            return order.clone();
        }
        let mut addrs = Vec::with_capacity(searcher.num_docs() as usize);
        let mut named = String::new();
        for (ord, seg) in searcher.segment_readers().iter().enumerate() {
            named.push_str(&format!(
                "{}:{}:{};",
                seg.segment_id().uuid_string(),
                seg.max_doc(),
                seg.num_deleted_docs()
            ));
            addrs.extend(
                seg.doc_ids_alive()
                    .map(|d| tantivy::DocAddress::new(ord as u32, d)),
            );
        }
        let order = Arc::new(RowOrder {
            fingerprint: hex_hash(&[named.as_bytes()]),
            searcher,
            addrs,
            hashes: Default::default(),
        });
        *last = Some((generation, order.clone()));
        order
    }

    /// Which rows of `order` match `req`'s folders, filters and date range
    /// (None: it has none).
    pub fn matching_rows(
        &self,
        order: &RowOrder,
        req: &SearchRequest,
    ) -> Result<Option<Vec<bool>>, KbError> {
        let clauses = filter_clauses(&self.f, &order.searcher, req);
        if clauses.is_empty() {
            return Ok(None);
        }
        let mut all: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, Box::new(AllQuery))];
        all.extend(clauses);
        let matched = order
            .searcher
            .search(&BooleanQuery::new(all), &DocSetCollector)
            .map_err(|e| index_err(self.shown(), e))?;
        let mut keep = vec![false; order.len()];
        for addr in matched {
            if let Ok(i) = order.addrs.binary_search(&addr) {
                keep[i] = true;
            }
        }
        Ok(Some(keep))
    }

    /// Each row's embedding hash, from a column: no chunk is read.
    pub fn row_hashes(&self, order: &RowOrder) -> Result<Arc<Vec<u64>>, KbError> {
        if let Some(h) = order.hashes.get() {
            return Ok(h.clone());
        }
        let mut out = Vec::with_capacity(order.len());
        let mut seg = u32::MAX;
        let mut column = None;
        for a in &order.addrs {
            if a.segment_ord != seg {
                seg = a.segment_ord;
                let reader = order.searcher.segment_reader(seg);
                column = Some(
                    reader
                        .fast_fields()
                        .u64("hash")
                        .map_err(|e| index_err(self.shown(), e))?,
                );
            }
            out.push(column.as_ref().and_then(|c| c.first(a.doc_id)).unwrap_or(0));
        }
        Ok(order.hashes.get_or_init(|| Arc::new(out)).clone())
    }

    /// The rows of `order` that belong to `paths`, note by note in the
    /// order given, each note's rows in row order.
    pub fn rows_of_notes(&self, order: &RowOrder, paths: &[String]) -> Result<Vec<usize>, KbError> {
        let mut out = Vec::new();
        for p in paths {
            let q = TermQuery::new(
                Term::from_field_text(self.f.path, p),
                IndexRecordOption::Basic,
            );
            let found = order
                .searcher
                .search(&q, &DocSetCollector)
                .map_err(|e| index_err(self.shown(), e))?;
            let mut rows: Vec<usize> = found
                .into_iter()
                .filter_map(|a| order.addrs.binary_search(&a).ok())
                .collect();
            rows.sort_unstable();
            out.extend(rows);
        }
        Ok(out)
    }

    /// The chunks at `rows` of `order`.
    pub fn chunk_rows(&self, order: &RowOrder, rows: &[usize]) -> Result<Vec<ChunkRow>, KbError> {
        let f = self.f;
        rows.iter()
            .map(|&i| {
                let doc: TantivyDocument = order
                    .searcher
                    .doc(order.addrs[i])
                    .map_err(|e| index_err(self.shown(), e))?;
                let s = |fl: Field| {
                    doc.get_first(fl)
                        .and_then(|v| v.as_str())
                        .unwrap_or("")
                        .to_string()
                };
                Ok(ChunkRow {
                    id: s(f.id),
                    path: s(f.path),
                    title: s(f.title),
                    section: s(f.section),
                    text: s(f.body),
                    metadata: serde_json::from_str(&s(f.meta)).unwrap_or(json!({})),
                    mtime_ms: doc.get_first(f.mtime).and_then(|v| v.as_i64()).unwrap_or(0),
                })
            })
            .collect()
    }

    /// Distinct values of a metadata field (or `folder`, the top-level
    /// directory) over the files matching `req`'s filters, with file counts.
    pub fn facets(
        &self,
        field: &str,
        req: &SearchRequest,
    ) -> Result<(Vec<(String, usize)>, usize), KbError> {
        let searcher = self.reader.searcher();
        let f = self.f;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, Box::new(AllQuery))];
        clauses.extend(filter_clauses(&f, &searcher, req));
        let docs = searcher
            .search(&BooleanQuery::new(clauses), &DocSetCollector)
            .map_err(|e| index_err(self.shown(), e))?;
        let mut per_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for addr in docs {
            let doc: TantivyDocument =
                searcher.doc(addr).map_err(|e| index_err(self.shown(), e))?;
            let path = doc
                .get_first(f.path)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string();
            if per_file.contains_key(&path) {
                continue;
            }
            let vals = if field == "folder" {
                vec![path.split('/').next().unwrap_or("").to_string()]
                    .into_iter()
                    .filter(|_| path.contains('/'))
                    .collect()
            } else {
                let meta: Map<String, Value> = doc
                    .get_first(f.meta)
                    .and_then(|v| v.as_str())
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or_default();
                match meta.get(field) {
                    Some(Value::Array(a)) => a.iter().filter_map(scalar).collect(),
                    Some(v) => scalar(v).into_iter().collect(),
                    None => Vec::new(),
                }
            };
            per_file.insert(path, vals);
        }
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for vals in per_file.values() {
            for v in vals {
                *counts.entry(v.clone()).or_default() += 1;
            }
        }
        let mut out: Vec<(String, usize)> = counts.into_iter().collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok((out, per_file.len()))
    }
}

/// A note's first chunk without a heading of its own (its title and
/// metadata lines) at most this long is an intro: as a note's best hit it
/// takes in the note's next matching chunk, rather than spending a result
/// on a few lines of metadata.
const INTRO_CHARS: usize = 400;

/// Parsed `kb.search` inputs.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub parsed: ParsedQuery,
    pub paths: Vec<String>,
    pub filters: Vec<Filter>,
    pub date: Option<DateRange>,
    pub top_k: usize,
    pub threshold: Option<f64>,
    /// Title, section, body.
    pub boosts: [f32; 3],
    pub snippet_chars: usize,
    /// One hit per file (its best chunk).
    pub collapse: bool,
    /// Search question words too (see [`super::query::QUESTION_WORDS`]).
    pub question_words: bool,
    /// Whose notes besides the shared ones may match ("": only the shared
    /// ones), as [`tenant_key`] reads a requested tenant.
    pub tenant: String,
}

/// Whether some note is a tenant's: a tenant term other than the shared one
/// is in a segment's dictionary (a deleted note's term may linger, which
/// only filters when nothing needs it). A dictionary that cannot be read
/// counts as yes.
fn any_tenant(f: &Fields, searcher: &tantivy::Searcher) -> bool {
    let shared = tenant_term("");
    // The byte after `=`: the end of the tenant terms' range.
    let end = shared.replace('=', ">");
    searcher.segment_readers().iter().any(|seg| {
        let Ok(ix) = seg.inverted_index(f.filter) else {
            return true;
        };
        match ix.terms().range().gt(&shared).lt(&end).into_stream() {
            Ok(mut terms) => terms.advance(),
            Err(_) => true,
        }
    })
}

/// The filter term of a note's tenant ("" for a shared note): a name no
/// frontmatter field can have, so no `filters:` entry reaches it.
fn tenant_term(tenant: &str) -> String {
    format!("\u{1}tenant={tenant}")
}

/// `field` must equal one of `values` (case-insensitive); `negate` inverts.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub field: String,
    pub values: Vec<String>,
    pub negate: bool,
}

/// Clauses for the request's folders, metadata filters and date range; they
/// restrict without changing scores.
fn filter_clauses(
    f: &Fields,
    searcher: &tantivy::Searcher,
    req: &SearchRequest,
) -> Vec<(Occur, Box<dyn Query>)> {
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut filters: Vec<Box<dyn Query>> = Vec::new();
    // The notes every tenant shares, and the requester's own. Skipped when
    // no note is a tenant's (the common case: no filter to run).
    let shared = Term::from_field_text(f.filter, &tenant_term(""));
    if any_tenant(f, searcher) {
        let mut visible = vec![shared];
        if !req.tenant.is_empty() {
            visible.push(Term::from_field_text(f.filter, &tenant_term(&req.tenant)));
        }
        filters.push(any_of(visible.into_iter()));
    }
    if !req.paths.is_empty() {
        filters.push(any_of(
            req.paths
                .iter()
                .map(|p| p.trim_matches('/').to_lowercase())
                .map(|p| Term::from_field_text(f.path_prefix, &p)),
        ));
    }
    for fl in &req.filters {
        let q = any_of(fl.values.iter().map(|v| {
            Term::from_field_text(
                f.filter,
                &format!("{}={}", fl.field.to_lowercase(), v.to_lowercase()),
            )
        }));
        if fl.negate {
            clauses.push((Occur::MustNot, q));
        } else {
            filters.push(q);
        }
    }
    if let Some(r) = &req.date {
        let b = |d: Option<NaiveDate>| match d {
            Some(d) => Bound::Included(Term::from_field_i64(f.date, days(d))),
            None => Bound::Unbounded,
        };
        let (lo, hi) = match (r.from, r.to) {
            // Open at both ends: any note that has a date.
            (None, None) => (
                Bound::Included(Term::from_field_i64(f.date, i64::MIN)),
                Bound::Unbounded,
            ),
            _ => (b(r.from), b(r.to)),
        };
        filters.push(Box::new(RangeQuery::new(lo, hi)));
    }
    for q in filters {
        clauses.push((Occur::Must, Box::new(ConstScoreQuery::new(q, 0.0))));
    }
    clauses
}

fn term_q(field: Field, tok: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, tok),
        IndexRecordOption::WithFreqs,
    ))
}

fn phrase_q(field: Field, toks: &[(usize, String)]) -> Box<dyn Query> {
    match toks {
        [(_, one)] => term_q(field, one),
        _ => {
            let base = toks[0].0;
            Box::new(PhraseQuery::new_with_offset(
                toks.iter()
                    .map(|(p, t)| (p - base, Term::from_field_text(field, t)))
                    .collect(),
            ))
        }
    }
}

/// The same query over title, section and body, each with its boost, summed.
fn across(fields: &[(Field, f32)], mut q: impl FnMut(Field) -> Box<dyn Query>) -> Box<dyn Query> {
    Box::new(BooleanQuery::new(
        fields
            .iter()
            .filter(|(_, b)| *b > 0.0)
            .map(|(fl, b)| {
                let inner = q(*fl);
                let boosted: Box<dyn Query> = if (*b - 1.0).abs() < f32::EPSILON {
                    inner
                } else {
                    Box::new(BoostQuery::new(inner, *b))
                };
                (Occur::Should, boosted)
            })
            .collect(),
    ))
}

fn any_of(terms: impl Iterator<Item = Term>) -> Box<dyn Query> {
    Box::new(BooleanQuery::new(
        terms
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::Basic));
                (Occur::Should, q)
            })
            .collect(),
    ))
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if s.len() <= 200 => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn days(d: NaiveDate) -> i64 {
    (d - NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date")).num_days()
}

fn round(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The snippet with matches in `**bold**`; the text's start when nothing
/// matched in the body (e.g. a title-only match).
fn snippet_text(s: &tantivy::snippet::Snippet, text: &str, max: usize) -> String {
    if s.is_empty() || s.highlighted().is_empty() {
        let mut end = text.len().min(max);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        return collapse_ws(&text[..end]);
    }
    let frag = s.fragment();
    let mut out = String::new();
    let mut at = 0;
    for r in s.highlighted() {
        out.push_str(&frag[at..r.start]);
        out.push_str("**");
        out.push_str(&frag[r.clone()]);
        out.push_str("**");
        at = r.end;
    }
    out.push_str(&frag[at..]);
    collapse_ws(&out)
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn open_dir(d: &Path, schema: &Schema) -> tantivy::Result<Index> {
    // Its files are mapped: one cut short under us must not kill the process.
    crate::core::mapped::guard();
    let dir = tantivy::directory::MmapDirectory::open(d)?;
    let index = Index::open_or_create(dir, schema.clone())?;
    Ok(index)
}

/// Removes the index files in `d`: only names tantivy and we write (segment
/// files are 32 hex digits plus an extension), never anything else, so an
/// `index_dir` pointed at a folder of other files loses none of them.
fn clear_dir(d: &Path) -> Result<(), KbError> {
    for e in std::fs::read_dir(d).map_err(|e| KbError::io(d, e))? {
        let e = e.map_err(|e| KbError::io(d, e))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let segment = name
            .split_once('.')
            .is_some_and(|(h, _)| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        let ours = segment
            || name.starts_with(MANIFEST_PREFIX)
            || matches!(
                name.as_ref(),
                "meta.json" | ".managed.json" | ".tantivy-meta.lock" | ".tantivy-writer.lock"
            );
        if ours && e.file_type().is_ok_and(|t| t.is_file()) {
            let p = e.path();
            std::fs::remove_file(&p).map_err(|e| KbError::io(&p, e))?;
        }
    }
    Ok(())
}

/// A note read by the index, for the graph: its path, content hash and
/// text (shared, not copied).
type NoteRead = (String, String, Arc<String>);

/// What the graph's reader gives back: the graph as it was, and the notes
/// it read.
type ReadAhead = Result<(GraphStore, Vec<ReadNote>), GraphError>;

/// The graph beside the index, reading the edges of the notes the index
/// reads as they are read, on a thread of its own: reading the notes keeps
/// one core busy, and most of the graph is read meanwhile rather than
/// beside the index's own threads.
struct GraphAhead {
    dir: PathBuf,
    notes: Option<std::sync::mpsc::Sender<NoteRead>>,
    reader: Option<std::thread::JoinHandle<ReadAhead>>,
    /// Set when the update ends without the graph (stopped, or failed):
    /// the notes still waiting are not read.
    abandoned: Arc<std::sync::atomic::AtomicBool>,
}

impl GraphAhead {
    fn start(dir: &Path) -> GraphAhead {
        let (notes, rx) = std::sync::mpsc::channel::<NoteRead>();
        let abandoned = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (at, gone) = (dir.to_path_buf(), abandoned.clone());
        let reader = std::thread::spawn(move || {
            let g = GraphStore::open(Some(&at))?;
            let mut read = Vec::new();
            {
                let held = g.held();
                for (path, hash, text) in rx {
                    if gone.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    if held.get(path.as_str()) != Some(&hash.as_str()) {
                        read.push(ReadNote::read(&path, &hash, &text));
                    }
                }
            }
            Ok((g, read))
        });
        GraphAhead {
            dir: dir.to_path_buf(),
            notes: Some(notes),
            reader: Some(reader),
            abandoned,
        }
    }

    /// A note just read, with its content hash.
    fn send(&self, path: &str, hash: &str, text: &Arc<String>) {
        // A reader gone (it could not open the graph): `finish` returns
        // why, and `kb.graph` says it.
        if let Some(n) = &self.notes {
            let _ = n.send((path.to_string(), hash.to_string(), text.clone()));
        }
    }

    /// Brings the graph up to date with the notes the index now holds:
    /// those read ahead, the texts just read from memory, any other from
    /// the disk.
    fn finish(
        mut self,
        files: &[(String, String)],
        texts: &HashMap<&str, &str>,
        root: &crate::core::confined::Dir,
    ) -> Result<(), GraphError> {
        drop(self.notes.take());
        let joined = self.reader.take().map(|r| r.join());
        // A reader that panicked read nothing that can be kept.
        let (mut g, ahead) = match joined {
            Some(Ok(r)) => r?,
            _ => (GraphStore::open(Some(&self.dir))?, Vec::new()),
        };
        let read = |p: &str| match texts.get(p) {
            Some(t) => Some(t.to_string()),
            None => root
                .read_rel(p)
                .ok()
                .and_then(|b| String::from_utf8(b).ok()),
        };
        g.sync_with(files, ahead, &read, &|| false)?;
        Ok(())
    }
}

impl Drop for GraphAhead {
    /// An update that ends before `finish` (stopped, or failed) leaves no
    /// reader behind.
    fn drop(&mut self) {
        self.abandoned
            .store(true, std::sync::atomic::Ordering::Relaxed);
        drop(self.notes.take());
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}
