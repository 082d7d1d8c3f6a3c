//! Vectors for the rows of a `kb` index, cached on disk and in memory.

use super::index::{ChunkRow, RowOrder};
use crate::retrieval::embed::cache::{Loaded, Vectors};
use crate::retrieval::embed::journal::Journal;
use crate::retrieval::embed::{topk, EmbedError, Embedder};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The text a chunk is embedded as (see [`super::chunk::embed_text`]).
pub fn chunk_text(r: &ChunkRow) -> String {
    super::chunk::embed_text(&r.title, &r.section, &r.text)
}

/// What the vectors need of an index commit's rows: each row's hash (its
/// vector's key), and the text of the rows to embed.
pub trait Rows {
    fn hashes(&self) -> Result<Arc<Vec<u64>>, EmbedError>;
    fn texts(&self, rows: &[usize]) -> Result<Vec<String>, EmbedError>;
}

/// What building the vectors did.
#[derive(Debug, Default, Clone)]
pub struct VectorStats {
    pub embedded: usize,
    pub reused: usize,
    pub dropped: usize,
    /// Rows with a vector, of `rows`.
    pub covered: usize,
    pub rows: usize,
    /// Why an unusable cache file was ignored.
    pub discarded: Option<String>,
}

/// What to embed before answering.
#[derive(Clone, Debug)]
pub enum Want {
    /// Every chunk.
    All,
    /// Every chunk when at most `limit` lack a vector; else only the
    /// missing ones among `rows` (best first), at most `at_most` of them,
    /// and the rest is left for later (`kb index --embed`, a server's
    /// background embedding).
    Now {
        rows: Vec<usize>,
        limit: usize,
        at_most: usize,
    },
    /// Nothing embedded, nothing written: how many chunks have a vector.
    Count,
}

/// The vectors of one index commit's rows.
#[derive(Clone)]
pub enum Coverage {
    /// Every row, in the index's row order: row `i` is the index's row `i`.
    Full(Arc<Vectors>),
    /// The rows that have a vector (some or all), found by their text.
    Partial(Arc<Partial>),
}

/// Vectors for some rows, held where they were found: the vector file, its
/// journal, and what this call embedded.
pub struct Partial {
    fingerprint: String,
    sources: Vec<Arc<Vectors>>,
    /// Per index row: its vector's (source, row).
    at: Vec<Option<(u32, u32)>>,
    covered: usize,
}

impl Coverage {
    /// The `k` rows closest to `query` among those `keep` allows and that
    /// have a vector, best first.
    pub fn top_k(
        &self,
        query: &[f32],
        dim: usize,
        k: usize,
        keep: impl Fn(usize) -> bool + Sync,
    ) -> Vec<(usize, f32)> {
        match self {
            Coverage::Full(v) => match v.matrix() {
                Some(m) => topk::top_k(query, m, dim, k, keep),
                None => topk::top_k_of(
                    query,
                    k,
                    (0..v.len()).filter(|i| keep(*i)).map(|i| (i, v.row(i))),
                ),
            },
            Coverage::Partial(p) => topk::top_k_of(
                query,
                k,
                p.at.iter().enumerate().filter_map(|(i, at)| {
                    let (s, r) = (*at)?;
                    keep(i).then(|| (i, p.sources[s as usize].row(r as usize)))
                }),
            ),
        }
    }

    /// Row `i`'s vector, if it has one.
    #[cfg(test)]
    fn row(&self, i: usize) -> Option<&[f32]> {
        match self {
            Coverage::Full(v) => Some(v.row(i)),
            Coverage::Partial(p) => p.at[i].map(|(s, r)| p.sources[s as usize].row(r as usize)),
        }
    }

    /// Whether this is every row of the commit named `fingerprint`.
    fn complete_for(&self, fingerprint: &str, rows: usize) -> bool {
        match self {
            Coverage::Full(v) => v.order.as_deref() == Some(fingerprint) && v.len() == rows,
            Coverage::Partial(p) => {
                p.fingerprint == fingerprint && p.at.len() == rows && p.covered == rows
            }
        }
    }
}

/// A knowledge base's complete vectors (by key and model id), in its
/// latest row order.
type Aligned = HashMap<(PathBuf, String), Coverage>;
/// One build at a time per knowledge base and model.
type Building = HashMap<(PathBuf, String), Arc<Mutex<()>>>;

/// Knowledge bases whose vectors are kept (see `core::cache`); mapped
/// vectors cost address space, not memory.
const MAX_CACHED: usize = 32;

/// Chunks embedded between two progress reports (and two appends to the
/// journal).
const EMBED_PART: usize = 256;

/// Chunks embedded between two checks of whether to stop: a tenth to a
/// third of a second on this 2-core machine (a SIGTERM during a 40,000-note
/// vault's embedding measured 0.09–0.28 s to exit). Fewer would leave a
/// core idle more often: each call ends when its slowest group does.
const STOP_CHECK: usize = 32;

/// Drops the vectors kept for the knowledge base `key` and `model`: the
/// next search maps (and checks) its files again.
pub fn forget(caches: &crate::core::cache::Caches, key: &Path, model: &str) {
    caches.with(|c: &mut Aligned| c.remove(&(key.to_path_buf(), model.to_string())));
}

/// The journal beside a vector file.
pub fn journal_path(file: &Path) -> PathBuf {
    file.with_extension("add")
}

/// The vectors of `order`'s rows. When the cache file at `file` (None:
/// memory only, keyed by `key`) is in that order it is used where it lies
/// (mapped); otherwise the rows' text (`table`) is read, vectors are found
/// by text in the file and its journal, and the chunks `want` asks for are
/// embedded and appended to the journal as they are made. `progress(done,
/// total)` follows the embedding; `stop()` is asked between batches: when
/// it says so, what was embedded is kept and [`EmbedError::Stopped`]
/// returned.
#[allow(clippy::too_many_arguments)]
pub fn vectors_for(
    caches: &crate::core::cache::Caches,
    embedder: &dyn Embedder,
    order: &RowOrder,
    source: &dyn Rows,
    key: &Path,
    file: Option<&Path>,
    progress: &dyn Fn(usize, usize),
    stop: &dyn Fn() -> bool,
    want: Want,
) -> Result<(Coverage, VectorStats), EmbedError> {
    vectors_in_parts(
        caches,
        embedder,
        order.len(),
        &order.fingerprint,
        source,
        &Store { key, file },
        progress,
        stop,
        EMBED_PART,
        want,
    )
}

/// Where vectors are kept: in memory under `key`, and in `file` if any.
struct Store<'a> {
    key: &'a Path,
    file: Option<&'a Path>,
}

/// [`vectors_for`] for `rows` rows in the order named `fingerprint`,
/// embedding `part_len` chunks at a time.
#[allow(clippy::too_many_arguments)]
fn vectors_in_parts(
    caches: &crate::core::cache::Caches,
    embedder: &dyn Embedder,
    rows: usize,
    fingerprint: &str,
    source: &dyn Rows,
    store: &Store,
    progress: &dyn Fn(usize, usize),
    stop: &dyn Fn() -> bool,
    part_len: usize,
    want: Want,
) -> Result<(Coverage, VectorStats), EmbedError> {
    let model = embedder.model_id().to_string();
    let dim = embedder.dim();
    let akey = (store.key.to_path_buf(), model.clone());
    let current = || caches.with(|c: &mut Aligned| c.get(&akey).cloned());
    let reused = |v: Coverage| {
        let stats = VectorStats {
            reused: rows,
            covered: rows,
            rows,
            ..Default::default()
        };
        (v, stats)
    };
    if let Some(v) = current().filter(|v| v.complete_for(fingerprint, rows)) {
        return Ok(reused(v));
    }
    // One process embeds a knowledge base once; other bases go on meanwhile.
    let lock = caches.with(|c: &mut Building| {
        let l = c.entry(akey.clone()).or_default().clone();
        crate::core::cache::bound(c, &akey, MAX_CACHED);
        l
    });
    // A search does not wait for a build under way (embedding a big base
    // takes hours): it embeds only its own candidates.
    let building = match &want {
        Want::All => Some(lock.lock().unwrap_or_else(|e| e.into_inner())),
        Want::Count => None,
        Want::Now { .. } => match lock.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        },
    };
    let keep = |v: Coverage| {
        caches.with(|c: &mut Aligned| {
            c.insert(akey.clone(), v.clone());
            crate::core::cache::bound(c, &akey, MAX_CACHED);
        });
        v
    };
    let mut stats = VectorStats {
        rows,
        ..Default::default()
    };
    // Where vectors may already be: the file (mapped) and its journal, or,
    // kept in memory only, what this process made before.
    let mut sources: Vec<Arc<Vectors>> = Vec::new();
    let mut journal_damaged = false;
    // Journal rows there when this call began: what was appended after
    // (by others too) is checked before the journal is retired.
    let mut journal_seen = 0;
    // Rows of the vector file itself (the first source, when there is one).
    let mut in_file = 0;
    match store.file {
        Some(f) => {
            if let Some(v) = current().filter(|v| v.complete_for(fingerprint, rows)) {
                return Ok(reused(v));
            }
            match Vectors::load(f, &model, dim) {
                (Some(v), _) if v.order.as_deref() == Some(fingerprint) && v.len() == rows => {
                    return Ok(reused(keep(Coverage::Full(Arc::new(v)))));
                }
                (Some(v), _) => {
                    in_file = v.len();
                    sources.push(Arc::new(v));
                }
                (None, Loaded::Discarded(why)) => stats.discarded = Some(why),
                (None, _) => {}
            }
            let j = read_journal(caches, &journal_path(f), &model, dim);
            journal_damaged = j.damaged;
            journal_seen = if j.damaged { 0 } else { j.len() };
            if j.damaged {
                // Its good rows stay mapped; new ones start a new journal
                // (after the damage they could not be read back).
                let _ = std::fs::remove_file(journal_path(f));
            }
            sources.extend(j.rows);
        }
        None => match current() {
            Some(v) if v.complete_for(fingerprint, rows) => return Ok(reused(v)),
            Some(Coverage::Full(v)) => sources.push(v),
            Some(Coverage::Partial(p)) => sources.extend(p.sources.iter().cloned()),
            None => {}
        },
    }

    let hashes = source.hashes()?;
    let mut found: HashMap<u64, (u32, u32)> = HashMap::new();
    for (s, v) in sources.iter().enumerate() {
        for (r, h) in v.hashes().iter().enumerate() {
            found.entry(*h).or_insert((s as u32, r as u32));
        }
    }
    let wanted: HashSet<u64> = hashes.iter().copied().collect();
    stats.dropped = found.keys().filter(|h| !wanted.contains(h)).count();
    // Chunks without a vector: each text once, however many rows share it.
    let mut missing: Vec<usize> = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    for (i, h) in hashes.iter().enumerate() {
        if !found.contains_key(h) && seen.insert(*h) {
            missing.push(i);
        }
    }
    let todo = match &want {
        Want::Now {
            rows: best,
            limit,
            at_most,
        } if missing.len() > *limit || building.is_none() => {
            let lacking: HashSet<usize> = missing.iter().copied().collect();
            let mut taken = HashSet::new();
            best.iter()
                .copied()
                .filter(|i| lacking.contains(i) && taken.insert(hashes[*i]))
                .take(*at_most)
                .collect()
        }
        Want::Count => Vec::new(),
        _ => missing,
    };
    let journal = store.file.map(journal_path);
    let embedded = embed_rows(
        embedder,
        source,
        &hashes,
        &todo,
        journal.as_deref(),
        progress,
        stop,
        part_len,
    )?;
    stats.embedded = embedded.count;
    // What went to the journal is read from there (mapped), not held.
    let mut fresh: Vec<Arc<Vectors>> = Vec::new();
    if embedded.journaled {
        if let Some(j) = journal.as_deref() {
            let j = read_journal(caches, j, &model, dim);
            journal_damaged |= j.damaged;
            fresh.extend(j.rows);
        }
    }
    fresh.extend(Some(embedded.held).filter(|v| !v.is_empty()).map(Arc::new));
    for v in fresh {
        let s = sources.len() as u32;
        for (r, h) in v.hashes().iter().enumerate() {
            found.entry(*h).or_insert((s, r as u32));
        }
        sources.push(v);
    }
    let at: Vec<Option<(u32, u32)>> = hashes.iter().map(|h| found.get(h).copied()).collect();
    stats.covered = at.iter().filter(|a| a.is_some()).count();
    stats.reused = stats.covered.saturating_sub(stats.embedded);
    let outside_file: usize = sources.iter().map(|v| v.len()).sum::<usize>() - in_file;
    let ordered_file = sources.first().is_some_and(|v| v.order.is_some()) && in_file > 0;
    let complete = stats.covered == rows;
    // Written out whole, in this order, when complete and the rows held
    // outside the file are many (or the file is not an index's): a fresh
    // process then maps it and reads no text. A few edited notes only
    // append to the journal.
    let write_out = match store.file {
        _ if matches!(want, Want::Count) => false,
        None => complete,
        Some(_) => {
            journal_damaged
                || (complete
                    && (matches!(want, Want::All) || !ordered_file || outside_file * 8 >= in_file))
        }
    };
    if write_out {
        if let Some(f) = store.file {
            // Saved and mapped, so that a served process holds pages the
            // kernel may drop rather than a copy of its own; written row by
            // row from where the vectors are, not gathered first. A cache
            // that cannot be written is only slower next time.
            let mut written: HashSet<u64> = HashSet::new();
            let saved = if complete {
                written.extend(hashes.iter().copied());
                let row = |i: usize| match at[i] {
                    Some((s, r)) => sources[s as usize].row(r as usize),
                    None => &[][..],
                };
                crate::retrieval::embed::cache::write_rows(
                    f,
                    &model,
                    dim,
                    Some(fingerprint.to_string()),
                    &hashes,
                    &row,
                )
            } else {
                let (h, data) = gather(&sources, &at, &hashes, dim, false);
                written.extend(h.iter().copied());
                Vectors::owned(&model, dim, None, h, data).save(f)
            };
            if saved.is_ok() {
                retire_journal(f, &model, dim, &written, journal_seen);
                if complete {
                    if let (Some(mapped), _) = Vectors::load(f, &model, dim) {
                        if mapped.order.as_deref() == Some(fingerprint) && mapped.len() == rows {
                            return Ok((keep(Coverage::Full(Arc::new(mapped))), stats));
                        }
                    }
                }
            }
        }
        if complete {
            let (h, data) = gather(&sources, &at, &hashes, dim, true);
            let built = Vectors::owned(&model, dim, Some(fingerprint.to_string()), h, data);
            return Ok((keep(Coverage::Full(Arc::new(built))), stats));
        }
    }
    let partial = Coverage::Partial(Arc::new(Partial {
        fingerprint: fingerprint.to_string(),
        sources,
        at,
        covered: stats.covered,
    }));
    Ok((if complete { keep(partial) } else { partial }, stats))
}

/// Journals read in this process, so that the next read checks only what
/// was appended since.
type Journals = HashMap<PathBuf, Journal>;

/// The journal at `path`, read from where this process last read it.
fn read_journal(
    caches: &crate::core::cache::Caches,
    path: &Path,
    model: &str,
    dim: usize,
) -> Journal {
    let key = path.to_path_buf();
    let before = caches.with(|c: &mut Journals| c.get(&key).cloned());
    let j = Journal::load_after(path, model, dim, before.as_ref());
    caches.with(|c: &mut Journals| {
        c.insert(key.clone(), j.clone());
        crate::core::cache::bound(c, &key, MAX_CACHED);
    });
    j
}

/// Removes the journal now written into the vector file, unless rows
/// appended after this call began (past its first `seen` rows: another
/// search's, for a newer commit of the index perhaps) are missing from the
/// file (`written` lacks them): then it stays, and they are read from it
/// next time (when the rows before them are dropped).
fn retire_journal(file: &Path, model: &str, dim: usize, written: &HashSet<u64>, seen: usize) {
    let path = journal_path(file);
    let j = Journal::load(&path, model, dim);
    let newer = j
        .rows
        .as_ref()
        .is_some_and(|v| v.hashes().iter().skip(seen).any(|h| !written.contains(h)));
    if !newer {
        let _ = std::fs::remove_file(path);
    }
}

/// What [`embed_rows`] made.
struct Embedded {
    /// Chunks embedded.
    count: usize,
    /// Some went to the journal (and are read back from there).
    journaled: bool,
    /// Those that did not (no journal, or it could not be written).
    held: Vectors,
}

/// Embeds the rows `todo` (by length within a part: the embedder batches
/// texts of similar length together), reading their text a part at a time
/// and appending each part to the journal as it is done, so a run killed or
/// stopped midway keeps what it embedded and a long run holds one part in
/// memory, not the vault.
#[allow(clippy::too_many_arguments)]
fn embed_rows(
    embedder: &dyn Embedder,
    source: &dyn Rows,
    hashes: &[u64],
    todo: &[usize],
    journal: Option<&Path>,
    progress: &dyn Fn(usize, usize),
    stop: &dyn Fn() -> bool,
    part_len: usize,
) -> Result<Embedded, EmbedError> {
    let (model, dim) = (embedder.model_id(), embedder.dim());
    let mut held_hashes: Vec<u64> = Vec::new();
    let mut held: Vec<f32> = Vec::new();
    let mut journaled = false;
    let mut count = 0;
    // A part's rows go to the journal, or are held when it cannot take them.
    let mut keep = |part_hashes: Vec<u64>, part: Vec<f32>| {
        let rows: Vec<(u64, &[f32])> = part_hashes
            .iter()
            .zip(part.chunks_exact(dim.max(1)))
            .map(|(h, r)| (*h, r))
            .collect();
        match journal.map(|j| Journal::append(j, model, dim, &rows)) {
            Some(Ok(())) => journaled |= !rows.is_empty(),
            _ => {
                held_hashes.extend(part_hashes);
                held.extend(part);
            }
        }
    };
    for part in todo.chunks(part_len) {
        let texts = source.texts(part)?;
        let mut by_len: Vec<usize> = (0..part.len()).collect();
        by_len.sort_by_key(|&k| texts[k].len());
        let mut part_hashes = Vec::with_capacity(part.len());
        let mut data = Vec::with_capacity(part.len() * dim);
        // A few chunks at a time, asking between them whether to stop: a
        // part takes seconds on a slow machine.
        for piece in by_len.chunks(STOP_CHECK) {
            let vecs = if stop() {
                Err(EmbedError::Stopped)
            } else {
                let batch: Vec<&str> = piece.iter().map(|&k| texts[k].as_str()).collect();
                embedder.embed(&batch)
            };
            let vecs = match vecs {
                Ok(v) => v,
                Err(e) => {
                    keep(part_hashes, data);
                    return Err(e);
                }
            };
            for (&k, v) in piece.iter().zip(&vecs) {
                part_hashes.push(hashes[part[k]]);
                data.extend_from_slice(v);
            }
        }
        count += part_hashes.len();
        keep(part_hashes, data);
        progress(count, todo.len());
    }
    Ok(Embedded {
        count,
        journaled,
        held: Vectors::owned(model, dim, None, held_hashes, held),
    })
}

/// The rows with a vector, copied out of `sources`: every row in index
/// order when `complete`, else each known vector once.
fn gather(
    sources: &[Arc<Vectors>],
    at: &[Option<(u32, u32)>],
    hashes: &[u64],
    dim: usize,
    complete: bool,
) -> (Vec<u64>, Vec<f32>) {
    let mut h = Vec::new();
    let mut data = Vec::new();
    if complete {
        data.reserve(at.len() * dim);
        for (i, a) in at.iter().enumerate() {
            if let Some((s, r)) = a {
                h.push(hashes[i]);
                data.extend_from_slice(sources[*s as usize].row(*r as usize));
            }
        }
    } else {
        let mut seen = HashSet::new();
        for v in sources {
            for (r, x) in v.hashes().iter().enumerate() {
                if seen.insert(*x) {
                    h.push(*x);
                    data.extend_from_slice(v.row(r));
                }
            }
        }
    }
    (h, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The real model, made to fail from its `after`-th call on: a run
    /// stopped midway (killed, timed out, out of memory).
    struct StopsAfter {
        model: crate::retrieval::embed::MiniLm,
        calls: AtomicUsize,
        after: usize,
    }

    impl Embedder for StopsAfter {
        fn model_id(&self) -> &str {
            self.model.model_id()
        }
        fn dim(&self) -> usize {
            self.model.dim()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            if self.calls.fetch_add(1, Ordering::SeqCst) >= self.after {
                return Err(EmbedError::Run("stopped".into()));
            }
            self.model.embed(texts)
        }
    }

    fn row(i: usize) -> ChunkRow {
        ChunkRow {
            id: format!("n{i}.md#1"),
            path: format!("n{i}.md"),
            title: format!("Note {i}"),
            section: String::new(),
            text: format!("Item {i}: a short line about topic number {i}."),
            metadata: serde_json::json!({}),
            mtime_ms: 0,
        }
    }

    /// Every row of a test's index.
    struct ChunkTable {
        rows: Vec<ChunkRow>,
    }

    impl ChunkTable {
        fn from_rows(rows: Vec<ChunkRow>) -> ChunkTable {
            ChunkTable { rows }
        }
    }

    /// A table whose reads are counted.
    struct Counted<'a> {
        table: &'a ChunkTable,
        reads: &'a AtomicUsize,
    }

    impl Rows for Counted<'_> {
        fn hashes(&self) -> Result<Arc<Vec<u64>>, EmbedError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(Arc::new(
                self.table
                    .rows
                    .iter()
                    .map(|r| super::super::chunk::embed_hash(&r.title, &r.section, &r.text))
                    .collect(),
            ))
        }
        fn texts(&self, rows: &[usize]) -> Result<Vec<String>, EmbedError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(rows
                .iter()
                .map(|&i| chunk_text(&self.table.rows[i]))
                .collect())
        }
    }

    /// Builds the vectors of `table` in the order named `order`, cached in
    /// `dir`'s `vectors.bin`, counting how often the table's text was read.
    fn build(
        caches: &crate::core::cache::Caches,
        embedder: &dyn Embedder,
        table: &Arc<ChunkTable>,
        order: &str,
        dir: &Path,
        reads: &AtomicUsize,
        part: usize,
    ) -> Result<(Coverage, VectorStats), EmbedError> {
        build_wanting(
            caches,
            embedder,
            table,
            order,
            dir,
            reads,
            part,
            &|| false,
            Want::All,
        )
    }

    /// [`build`], asking `stop` between batches and embedding what `want`
    /// asks for.
    #[allow(clippy::too_many_arguments)]
    fn build_wanting(
        caches: &crate::core::cache::Caches,
        embedder: &dyn Embedder,
        table: &Arc<ChunkTable>,
        order: &str,
        dir: &Path,
        reads: &AtomicUsize,
        part: usize,
        stop: &dyn Fn() -> bool,
        want: Want,
    ) -> Result<(Coverage, VectorStats), EmbedError> {
        let t = Counted { table, reads };
        let file = dir.join("vectors.bin");
        vectors_in_parts(
            caches,
            embedder,
            table.rows.len(),
            order,
            &t,
            &Store {
                key: dir,
                file: Some(&file),
            },
            &|_, _| {},
            stop,
            part,
            want,
        )
    }

    /// Rows kept on disk: the vector file's and its journal's.
    fn saved_rows(dir: &Path, e: &dyn Embedder) -> usize {
        let file = dir.join("vectors.bin");
        let (v, _) = Vectors::load(&file, e.model_id(), e.dim());
        v.map_or(0, |v| v.len()) + Journal::load(&journal_path(&file), e.model_id(), e.dim()).len()
    }

    #[test]
    fn a_stop_between_batches_keeps_what_was_embedded() {
        let Some(dir) = crate::retrieval::embed::test_model_dir() else {
            return;
        };
        let d = tempfile::tempdir().unwrap();
        const PART: usize = 8;
        let table = Arc::new(ChunkTable::from_rows((0..PART * 5).map(row).collect()));
        // The run is cancelled once three batches are embedded.
        let counting = StopsAfter {
            model: crate::retrieval::embed::MiniLm::load(&dir).unwrap(),
            calls: AtomicUsize::new(0),
            after: usize::MAX,
        };
        let stop = || counting.calls.load(Ordering::SeqCst) >= 3;
        let reads = AtomicUsize::new(0);
        let caches = crate::core::cache::Caches::default();
        let r = build_wanting(
            &caches,
            &counting,
            &table,
            "o1",
            d.path(),
            &reads,
            PART,
            &stop,
            Want::All,
        );
        assert!(matches!(r, Err(EmbedError::Stopped)), "{:?}", r.err());
        assert_eq!(
            counting.calls.load(Ordering::SeqCst),
            3,
            "no batch after the stop"
        );
        assert_eq!(
            saved_rows(d.path(), &counting),
            3 * PART,
            "everything embedded before the stop is kept"
        );
    }

    #[test]
    fn a_cold_run_stopped_midway_keeps_what_it_embedded() {
        let Some(dir) = crate::retrieval::embed::test_model_dir() else {
            return;
        };
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("vectors.bin");
        // Parts of 8 chunks: the schedule is the same at any size.
        const PART: usize = 8;
        let table = Arc::new(ChunkTable::from_rows((0..PART * 5).map(row).collect()));
        let load = || crate::retrieval::embed::MiniLm::load(&dir).unwrap();
        // Parts 1-3 embedded, part 4 fails: each part was appended as done.
        let stopping = StopsAfter {
            model: load(),
            calls: AtomicUsize::new(0),
            after: 3,
        };
        let reads = AtomicUsize::new(0);
        let caches = crate::core::cache::Caches::default();
        let r = build(&caches, &stopping, &table, "o1", d.path(), &reads, PART);
        assert!(r.is_err());
        assert!(!file.exists(), "only the journal is written midway");
        let journal = Journal::load(&journal_path(&file), stopping.model_id(), stopping.dim());
        assert_eq!(
            journal.len(),
            3 * PART,
            "what the first three parts embedded"
        );
        // The next run (another process: fresh caches) embeds only the rest.
        let model = load();
        let (_, stats) = build(
            &crate::core::cache::Caches::default(),
            &model,
            &table,
            "o1",
            d.path(),
            &reads,
            PART,
        )
        .unwrap();
        assert_eq!((stats.embedded, stats.reused), (2 * PART, 3 * PART));
    }

    #[test]
    fn a_file_in_the_index_order_is_used_where_it_lies_and_reused_by_hash_otherwise() {
        let Some(dir) = crate::retrieval::embed::test_model_dir() else {
            return;
        };
        let model = crate::retrieval::embed::MiniLm::load(&dir).unwrap();
        let dim = model.dim();
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("vectors.bin");
        let reads = AtomicUsize::new(0);
        // Rows 0 and 7 share a text: embedded once, both rows get it.
        let mut rows: Vec<ChunkRow> = (0..12).map(row).collect();
        rows[7].text = rows[0].text.clone();
        rows[7].title = rows[0].title.clone();
        let table = Arc::new(ChunkTable::from_rows(rows.clone()));
        let (first, stats) = build(
            &Default::default(),
            &model,
            &table,
            "o1",
            d.path(),
            &reads,
            5,
        )
        .unwrap();
        assert_eq!((stats.embedded, stats.reused), (11, 1));
        let first = full(&first);
        assert_eq!(first.row(7), first.row(0));
        let direct = model
            .embed(&[chunk_text(&rows[3]).as_str()])
            .unwrap()
            .remove(0);
        assert!(first
            .row(3)
            .iter()
            .zip(&direct)
            .all(|(a, b)| (a - b).abs() < 1e-6));

        // A fresh process whose index has that order maps the file and never
        // reads a chunk's text.
        let before = reads.load(Ordering::SeqCst);
        let (mapped, stats) = build(
            &Default::default(),
            &model,
            &table,
            "o1",
            d.path(),
            &reads,
            5,
        )
        .unwrap();
        assert_eq!(
            reads.load(Ordering::SeqCst),
            before,
            "the table was not read"
        );
        let mapped = full(&mapped);
        assert!(mapped.is_mapped());
        assert_eq!((stats.embedded, stats.reused), (0, 12));
        assert_eq!(mapped.matrix(), first.matrix());

        // The index changed (rows reordered, one gone, one new): vectors are
        // reused by text, only the new chunk is embedded, and the file is
        // rewritten in the new order.
        let mut changed: Vec<ChunkRow> = rows[1..].iter().rev().cloned().collect();
        changed.push(row(40));
        let changed = Arc::new(ChunkTable::from_rows(changed));
        let caches = crate::core::cache::Caches::default();
        let (v, stats) = build(&caches, &model, &changed, "o2", d.path(), &reads, 5).unwrap();
        assert_eq!(
            (stats.embedded, stats.reused, stats.dropped),
            (1, 11, 0),
            "row 0's text is row 7's"
        );
        let v = full(&v);
        assert_eq!(v.order.as_deref(), Some("o2"));
        let now = changed.rows.iter().position(|r| r.id == "n3.md#1").unwrap();
        assert_eq!(v.row(now), first.row(3), "row 3 moved with its vector");
        // In memory too: the same process asks again without reading anything.
        let before = reads.load(Ordering::SeqCst);
        let (again, _) = build(&caches, &model, &changed, "o2", d.path(), &reads, 5).unwrap();
        assert!(Arc::ptr_eq(v, full(&again)));
        assert_eq!(reads.load(Ordering::SeqCst), before);
        let (on_disk, _) = Vectors::load(&file, model.model_id(), dim);
        assert_eq!(on_disk.unwrap().order.as_deref(), Some("o2"));
    }

    fn full(c: &Coverage) -> &Arc<Vectors> {
        match c {
            Coverage::Full(v) => v,
            Coverage::Partial(_) => panic!("expected every row in index order"),
        }
    }

    /// Asked for an answer now: with too many chunks lacking a vector, only
    /// the best notes' chunks are embedded, each later question adds its
    /// own, and a few changed notes are appended, never a rewrite.
    #[test]
    fn answers_now_embed_the_best_notes_and_edits_only_append() {
        let Some(dir) = crate::retrieval::embed::test_model_dir() else {
            return;
        };
        let model = crate::retrieval::embed::MiniLm::load(&dir).unwrap();
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("vectors.bin");
        let reads = AtomicUsize::new(0);
        let table = Arc::new(ChunkTable::from_rows((0..30).map(row).collect()));
        // One chunk per note here: note i is row i.
        let now = |notes: &[usize], limit: usize| Want::Now {
            rows: notes.to_vec(),
            limit,
            at_most: 3,
        };
        let ask = |table: &Arc<ChunkTable>, order: &str, want: Want| {
            build_wanting(
                &Default::default(),
                &model,
                table,
                order,
                d.path(),
                &reads,
                4,
                &|| false,
                want,
            )
            .unwrap()
        };
        // 30 lack a vector, more than 10: the best 3 of the 4 notes named.
        let (c, stats) = ask(&table, "o1", now(&[5, 9, 2, 7], 10));
        assert_eq!((stats.embedded, stats.covered, stats.rows), (3, 3, 30));
        assert!(c.row(5).is_some() && c.row(9).is_some() && c.row(2).is_some());
        assert!(c.row(7).is_none());
        let hit = c.top_k(
            &model.embed(&[chunk_text(&table.rows[9]).as_str()]).unwrap()[0],
            model.dim(),
            5,
            |_| true,
        );
        assert_eq!(hit.len(), 3, "only rows with a vector are ranked");
        assert_eq!(hit[0].0, 9);
        assert!(!file.exists(), "appended to the journal only");
        // The next question (a fresh process) reuses them and adds its own.
        let (_, stats) = ask(&table, "o1", now(&[9, 7, 11], 10));
        assert_eq!((stats.embedded, stats.covered), (2, 5));
        // Few enough missing: everything, written out in order.
        let (c, stats) = ask(&table, "o1", now(&[], 25));
        assert_eq!((stats.embedded, stats.covered), (25, 30));
        assert_eq!(full(&c).order.as_deref(), Some("o1"));
        assert!(
            !journal_path(&file).exists(),
            "the journal went into the file"
        );
        let written = std::fs::read(&file).unwrap();
        // Two notes edited, one deleted: their rows go to the journal, the
        // file is left as it is, and every row has its vector.
        let mut rows: Vec<ChunkRow> = (0..29).map(row).collect();
        rows[3].text.push_str(" Edited.");
        rows[17].text.push_str(" Edited too.");
        let edited = Arc::new(ChunkTable::from_rows(rows));
        let (c, stats) = ask(&edited, "o2", now(&[], 25));
        assert_eq!((stats.embedded, stats.covered, stats.dropped), (2, 29, 3));
        assert!(matches!(c, Coverage::Partial(_)));
        assert_eq!(std::fs::read(&file).unwrap(), written, "not rewritten");
        let direct = model
            .embed(&[chunk_text(&edited.rows[3]).as_str()])
            .unwrap()
            .remove(0);
        assert_eq!(
            c.row(3).unwrap(),
            direct.as_slice(),
            "the edited text's vector"
        );
        assert_eq!(saved_rows(d.path(), &model), 32);
        // A journal cut short by a killed writer: its whole rows are used,
        // and it is written into the file.
        let j = journal_path(&file);
        let len = std::fs::metadata(&j).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&j)
            .unwrap()
            .set_len(len - 9)
            .unwrap();
        let (_, stats) = ask(&edited, "o2", now(&[], 25));
        assert_eq!((stats.embedded, stats.covered), (1, 29));
        assert!(!j.exists());
        assert_eq!(
            full(&ask(&edited, "o2", now(&[], 0)).0).order.as_deref(),
            Some("o2")
        );
    }
}
