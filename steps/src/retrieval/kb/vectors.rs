//! Vectors for the rows of a `kb` index, cached on disk and in memory.

use super::index::{ChunkRow, ChunkTable, RowOrder};
use crate::core::hash::hash64;
use crate::retrieval::embed::cache::{Loaded, Vectors};
use crate::retrieval::embed::{EmbedError, Embedder};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The text a chunk is embedded as: its title, its section, its text.
pub fn chunk_text(r: &ChunkRow) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if !r.title.is_empty() {
        parts.push(&r.title);
    }
    if !r.section.is_empty() && r.section != r.title {
        parts.push(&r.section);
    }
    parts.push(&r.text);
    parts.join("\n")
}

/// What building the vectors did.
#[derive(Debug, Default, Clone)]
pub struct VectorStats {
    pub embedded: usize,
    pub reused: usize,
    pub dropped: usize,
    /// Why an unusable cache file was ignored.
    pub discarded: Option<String>,
}

/// A knowledge base's vectors (by key and model id), in its latest row order.
type Aligned = HashMap<(PathBuf, String), Arc<Vectors>>;
/// One build at a time per knowledge base and model.
type Building = HashMap<(PathBuf, String), Arc<Mutex<()>>>;

/// Knowledge bases whose vectors are kept (see `core::cache`); mapped
/// vectors cost address space, not memory.
const MAX_CACHED: usize = 32;

/// Chunks embedded between two progress reports.
const EMBED_PART: usize = 256;

/// Chunks embedded between two checks of whether to stop: about a third of
/// a second on this 2-core machine (a SIGTERM measured 0.17 s to exit at 8,
/// 0.7 s at 32), with no cost to throughput measured (3,000 chunks: 63.5 s
/// in calls of 32, 65.0 s in calls of 8).
const STOP_CHECK: usize = 16;

/// The vectors of `order`'s rows, in that order. When the cache file at
/// `file` (None: memory only, keyed by `key`) is in that order it is used
/// where it lies (mapped); otherwise the rows' text (`table`) is read, the
/// chunks new to the cache are embedded, and the file is rewritten in the
/// new order. `progress(done, total)` follows the embedding of new chunks;
/// `stop()` is asked between batches: when it says so, what was embedded
/// is saved and [`EmbedError::Stopped`] returned.
#[allow(clippy::too_many_arguments)]
pub fn vectors_for(
    caches: &crate::core::cache::Caches,
    embedder: &dyn Embedder,
    order: &RowOrder,
    table: &dyn Fn() -> Result<Arc<ChunkTable>, EmbedError>,
    key: &Path,
    file: Option<&Path>,
    progress: &dyn Fn(usize, usize),
    stop: &dyn Fn() -> bool,
) -> Result<(Arc<Vectors>, VectorStats), EmbedError> {
    vectors_in_parts(
        caches,
        embedder,
        order.len(),
        &order.fingerprint,
        table,
        key,
        file,
        progress,
        stop,
        EMBED_PART,
    )
}

/// [`vectors_for`] for `rows` rows in the order named `fingerprint`,
/// embedding `part_len` chunks at a time.
#[allow(clippy::too_many_arguments)]
fn vectors_in_parts(
    caches: &crate::core::cache::Caches,
    embedder: &dyn Embedder,
    rows: usize,
    fingerprint: &str,
    table: &dyn Fn() -> Result<Arc<ChunkTable>, EmbedError>,
    key: &Path,
    file: Option<&Path>,
    progress: &dyn Fn(usize, usize),
    stop: &dyn Fn() -> bool,
    part_len: usize,
) -> Result<(Arc<Vectors>, VectorStats), EmbedError> {
    let model = embedder.model_id().to_string();
    let dim = embedder.dim();
    let akey = (key.to_path_buf(), model.clone());
    let in_order = |v: &Vectors| v.order.as_deref() == Some(fingerprint) && v.len() == rows;
    let current = || caches.with(|c: &mut Aligned| c.get(&akey).cloned());
    let reused = |v: Arc<Vectors>| {
        let stats = VectorStats {
            reused: rows,
            ..Default::default()
        };
        (v, stats)
    };
    if let Some(v) = current().filter(|v| in_order(v)) {
        return Ok(reused(v));
    }
    // One process embeds a knowledge base once; other bases go on meanwhile.
    let lock = caches.with(|c: &mut Building| {
        let l = c.entry(akey.clone()).or_default().clone();
        crate::core::cache::bound(c, &akey, MAX_CACHED);
        l
    });
    let _building = lock.lock().unwrap_or_else(|e| e.into_inner());
    let keep = |v: Arc<Vectors>| {
        caches.with(|c: &mut Aligned| {
            c.insert(akey.clone(), v.clone());
            crate::core::cache::bound(c, &akey, MAX_CACHED);
        });
        v
    };
    let mut stats = VectorStats::default();
    let previous = match current() {
        Some(v) if in_order(&v) => return Ok(reused(v)),
        Some(v) => Some(v),
        None => match file.map(|f| Vectors::load(f, &model, dim)) {
            Some((Some(v), _)) if in_order(&v) => return Ok(reused(keep(Arc::new(v)))),
            Some((v, state)) => {
                if let Loaded::Discarded(why) = state {
                    stats.discarded = Some(why);
                }
                v.map(Arc::new)
            }
            None => None,
        },
    };

    let table = table()?;
    let texts: Vec<String> = table.rows.iter().map(chunk_text).collect();
    let hashes: Vec<u64> = texts.iter().map(|t| hash64(&[t.as_bytes()])).collect();
    let mut data = vec![0f32; rows * dim];
    let mut filled = vec![false; rows];
    let mut used: HashSet<u64> = HashSet::new();
    if let Some(prev) = &previous {
        let at = prev.rows_by_hash();
        for (i, h) in hashes.iter().enumerate() {
            if let Some(&r) = at.get(h) {
                data[i * dim..(i + 1) * dim].copy_from_slice(prev.row(r));
                filled[i] = true;
                used.insert(*h);
            }
        }
        stats.dropped = prev.hashes().iter().filter(|h| !used.contains(h)).count();
    }
    // Chunks to embed: each text once, however many rows share it.
    let mut first_row: HashMap<u64, usize> = HashMap::new();
    let mut missing: Vec<usize> = Vec::new();
    for (i, h) in hashes.iter().enumerate() {
        if !filled[i] {
            if let std::collections::hash_map::Entry::Vacant(e) = first_row.entry(*h) {
                e.insert(i);
                missing.push(i);
            }
        }
    }
    if !missing.is_empty() {
        // In parts, so that progress can be shown, shortest first: the
        // embedder batches texts of similar length together.
        missing.sort_by_key(|&i| texts[i].len());
        let parts = missing.len().div_ceil(part_len);
        let mut next_save = 1;
        for (n, part) in missing.chunks(part_len).enumerate() {
            // A few chunks at a time, asking between them whether to stop:
            // a part takes seconds on a slow machine.
            for piece in part.chunks(STOP_CHECK) {
                if stop() {
                    if let Some(f) = file {
                        let _ = partial(&model, dim, &hashes, &data, &filled).save(f);
                    }
                    return Err(EmbedError::Stopped);
                }
                let batch: Vec<&str> = piece.iter().map(|&i| texts[i].as_str()).collect();
                let vecs = embedder.embed(&batch)?;
                for (&i, v) in piece.iter().zip(&vecs) {
                    data[i * dim..(i + 1) * dim].copy_from_slice(v);
                    filled[i] = true;
                }
            }
            progress(
                (n * part_len + part.len()).min(missing.len()),
                missing.len(),
            );
            // Saved as it goes, after parts 1, 2, 4, 8, …: a run killed
            // midway keeps at least half of what it embedded, and the
            // saves cost at most twice the final one.
            if n + 1 == next_save && n + 1 < parts {
                next_save *= 2;
                if let Some(f) = file {
                    let _ = partial(&model, dim, &hashes, &data, &filled).save(f);
                }
            }
        }
        // Rows whose text another row had.
        for (i, h) in hashes.iter().enumerate() {
            if !filled[i] {
                let from = first_row[h];
                data.copy_within(from * dim..(from + 1) * dim, i * dim);
            }
        }
        stats.embedded = missing.len();
    }
    stats.reused = rows - stats.embedded;
    let built = Vectors::owned(&model, dim, Some(fingerprint.to_string()), hashes, data);
    // Saved and mapped, so that a served process holds pages the kernel may
    // drop rather than a copy of its own. A cache that cannot be written is
    // only slower next time.
    if let Some(f) = file {
        if built.save(f).is_ok() {
            if let (Some(mapped), _) = Vectors::load(f, &model, dim) {
                if in_order(&mapped) {
                    return Ok((keep(Arc::new(mapped)), stats));
                }
            }
        }
    }
    Ok((keep(Arc::new(built)), stats))
}

/// The rows embedded so far, in no index order.
fn partial(model: &str, dim: usize, hashes: &[u64], data: &[f32], filled: &[bool]) -> Vectors {
    let mut h = Vec::new();
    let mut d = Vec::new();
    for (i, _) in filled.iter().enumerate().filter(|(_, f)| **f) {
        h.push(hashes[i]);
        d.extend_from_slice(&data[i * dim..(i + 1) * dim]);
    }
    Vectors::owned(model, dim, None, h, d)
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
    ) -> Result<(Arc<Vectors>, VectorStats), EmbedError> {
        build_until(caches, embedder, table, order, dir, reads, part, &|| false)
    }

    /// [`build`], asking `stop` between batches.
    #[allow(clippy::too_many_arguments)]
    fn build_until(
        caches: &crate::core::cache::Caches,
        embedder: &dyn Embedder,
        table: &Arc<ChunkTable>,
        order: &str,
        dir: &Path,
        reads: &AtomicUsize,
        part: usize,
        stop: &dyn Fn() -> bool,
    ) -> Result<(Arc<Vectors>, VectorStats), EmbedError> {
        let t = || {
            reads.fetch_add(1, Ordering::SeqCst);
            Ok(table.clone())
        };
        let file = dir.join("vectors.bin");
        vectors_in_parts(
            caches,
            embedder,
            table.rows.len(),
            order,
            &t,
            dir,
            Some(&file),
            &|_, _| {},
            stop,
            part,
        )
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
        let r = build_until(
            &caches,
            &counting,
            &table,
            "o1",
            d.path(),
            &reads,
            PART,
            &stop,
        );
        assert!(matches!(r, Err(EmbedError::Stopped)), "{:?}", r.err());
        assert_eq!(
            counting.calls.load(Ordering::SeqCst),
            3,
            "no batch after the stop"
        );
        let (saved, _) = Vectors::load(
            &d.path().join("vectors.bin"),
            counting.model_id(),
            counting.dim(),
        );
        assert_eq!(
            saved.unwrap().len(),
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
        // Parts 1-3 embedded, part 4 fails: saved after parts 1 and 2.
        let stopping = StopsAfter {
            model: load(),
            calls: AtomicUsize::new(0),
            after: 3,
        };
        let reads = AtomicUsize::new(0);
        let caches = crate::core::cache::Caches::default();
        let r = build(&caches, &stopping, &table, "o1", d.path(), &reads, PART);
        assert!(r.is_err());
        let (saved, _) = Vectors::load(&file, stopping.model_id(), stopping.dim());
        let saved = saved.unwrap();
        assert_eq!(saved.len(), 2 * PART, "what the first two parts embedded");
        assert_eq!(saved.order, None, "a part is in no index order");
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
        assert_eq!((stats.embedded, stats.reused), (3 * PART, 2 * PART));
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
        assert_eq!(v.order.as_deref(), Some("o2"));
        let now = changed.rows.iter().position(|r| r.id == "n3.md#1").unwrap();
        assert_eq!(v.row(now), first.row(3), "row 3 moved with its vector");
        // In memory too: the same process asks again without reading anything.
        let before = reads.load(Ordering::SeqCst);
        let (again, _) = build(&caches, &model, &changed, "o2", d.path(), &reads, 5).unwrap();
        assert!(Arc::ptr_eq(&v, &again));
        assert_eq!(reads.load(Ordering::SeqCst), before);
        let (on_disk, _) = Vectors::load(&file, model.model_id(), dim);
        assert_eq!(on_disk.unwrap().order.as_deref(), Some("o2"));
    }
}
