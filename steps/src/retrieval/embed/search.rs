//! Vectors for the chunks of a `kb` index, cached on disk and in memory.

use super::cache::{Loaded, VectorCache};
use super::{EmbedError, Embedder};
use crate::retrieval::kb::chunk::hex_hash;
use crate::retrieval::kb::index::{ChunkRow, ChunkTable};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

struct Aligned {
    generation: u64,
    matrix: Arc<Vec<f32>>,
}

type Vectors = HashMap<PathBuf, VectorCache>;
type AlignedMap = HashMap<(PathBuf, String), Aligned>;

/// Knowledge bases whose vectors are kept in memory (see `core::cache`).
const MAX_CACHED: usize = 32;

/// Chunks embedded between two progress reports.
const EMBED_PART: usize = 256;

/// Row-major vectors aligned with `table.rows`. Only chunks whose text is
/// new to the cache are embedded; the cache file at `file` (None: memory
/// only, keyed by `key`) is rewritten atomically when it changed.
/// `progress(done, total)` follows the embedding of new chunks.
pub fn vectors_for(
    caches: &crate::core::cache::Caches,
    embedder: &dyn Embedder,
    table: &ChunkTable,
    key: &Path,
    file: Option<&Path>,
    progress: &dyn Fn(usize, usize),
) -> Result<(Arc<Vec<f32>>, VectorStats), EmbedError> {
    vectors_in_parts(caches, embedder, table, key, file, progress, EMBED_PART)
}

/// [`vectors_for`], embedding `part` chunks at a time.
fn vectors_in_parts(
    caches: &crate::core::cache::Caches,
    embedder: &dyn Embedder,
    table: &ChunkTable,
    key: &Path,
    file: Option<&Path>,
    progress: &dyn Fn(usize, usize),
    part_len: usize,
) -> Result<(Arc<Vec<f32>>, VectorStats), EmbedError> {
    let model = embedder.model_id().to_string();
    let akey = (key.to_path_buf(), model.clone());
    let ready = caches.with(|c: &mut AlignedMap| {
        c.get(&akey)
            .filter(|a| a.generation == table.generation)
            .map(|a| a.matrix.clone())
    });
    if let Some(matrix) = ready {
        return Ok((
            matrix,
            VectorStats {
                reused: table.rows.len(),
                ..Default::default()
            },
        ));
    }
    let dim = embedder.dim();
    let mut stats = VectorStats::default();
    let cache_key = file
        .map(Path::to_path_buf)
        .unwrap_or_else(|| key.to_path_buf());
    // Embedding happens under the lock: one process embeds a knowledge base once.
    let matrix = caches.with(|all: &mut Vectors| -> Result<Vec<f32>, EmbedError> {
        if !all.contains_key(&cache_key) {
            crate::core::cache::bound(all, &cache_key, MAX_CACHED - 1);
        }
        let cache = all.entry(cache_key.clone()).or_insert_with(|| match file {
            Some(f) => {
                let (c, state) = VectorCache::load(f, &model, dim);
                if let Loaded::Discarded(why) = state {
                    stats.discarded = Some(why);
                }
                c
            }
            None => VectorCache::new(&model, dim),
        });
        if cache.model_id != model || cache.dim != dim {
            *cache = VectorCache::new(&model, dim);
        }
        let texts: Vec<String> = table.rows.iter().map(chunk_text).collect();
        let hashes: Vec<String> = texts.iter().map(|t| hex_hash(&[t.as_bytes()])).collect();
        let mut missing: Vec<usize> = Vec::new();
        let mut seen = HashSet::new();
        for (i, h) in hashes.iter().enumerate() {
            if cache.row_of(h).is_none() && seen.insert(h.as_str()) {
                missing.push(i);
            }
        }
        if !missing.is_empty() {
            // In parts, so that progress can be shown. Sorted by length first,
            // as the embedder sorts its batches: similar lengths pad least.
            missing.sort_by_key(|&i| texts[i].len());
            let mut next_save = 1;
            for (n, part) in missing.chunks(part_len).enumerate() {
                let batch: Vec<&str> = part.iter().map(|&i| texts[i].as_str()).collect();
                let vecs = embedder.embed(&batch)?;
                for (&i, v) in part.iter().zip(&vecs) {
                    cache.insert(&hashes[i], v);
                }
                progress(
                    (n * part_len + part.len()).min(missing.len()),
                    missing.len(),
                );
                // Saved as it goes, after parts 1, 2, 4, 8, …: a run killed
                // midway keeps at least half of what it embedded, and the
                // saves cost at most twice the final one.
                if n + 1 == next_save && n + 1 < missing.len().div_ceil(part_len) {
                    next_save *= 2;
                    if let Some(f) = file {
                        let _ = cache.save(f);
                    }
                }
            }
            stats.embedded = missing.len();
        }
        stats.reused = table.rows.len() - stats.embedded;
        let keep: HashSet<&str> = hashes.iter().map(String::as_str).collect();
        stats.dropped = cache.retain(&keep);
        if let Some(f) = file {
            if stats.embedded > 0 || stats.dropped > 0 || stats.discarded.is_some() {
                // A cache that cannot be written is only slower next time.
                let _ = cache.save(f);
            }
        }
        let mut matrix = Vec::with_capacity(table.rows.len() * dim);
        for h in &hashes {
            let r = cache.row_of(h).unwrap_or(0);
            matrix.extend_from_slice(&cache.matrix()[r * dim..(r + 1) * dim]);
        }
        Ok(matrix)
    })?;
    let matrix = Arc::new(matrix);
    caches.with(|aligned: &mut AlignedMap| {
        aligned.insert(
            akey.clone(),
            Aligned {
                generation: table.generation,
                matrix: matrix.clone(),
            },
        );
        crate::core::cache::bound(aligned, &akey, MAX_CACHED);
    });
    Ok((matrix, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The real model, made to fail from its `after`-th call on: a run
    /// stopped midway (killed, timed out, out of memory).
    struct StopsAfter {
        model: super::super::minilm::MiniLm,
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

    #[test]
    fn a_cold_run_stopped_midway_keeps_what_it_embedded() {
        let Some(dir) = super::super::test_model_dir() else {
            return;
        };
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("vectors.bin");
        // Parts of 8 chunks: the schedule is the same at any size.
        const PART: usize = 8;
        let table = ChunkTable::from_rows((0..PART * 5).map(row).collect());
        let load = || super::super::minilm::MiniLm::load(&dir).unwrap();
        // Parts 1-3 embedded, part 4 fails: saved after parts 1 and 2.
        let stopping = StopsAfter {
            model: load(),
            calls: AtomicUsize::new(0),
            after: 3,
        };
        let caches = crate::core::cache::Caches::default();
        let r = vectors_in_parts(
            &caches,
            &stopping,
            &table,
            d.path(),
            Some(&file),
            &|_, _| {},
            PART,
        );
        assert!(r.is_err());
        let (saved, _) = VectorCache::load(&file, stopping.model_id(), stopping.dim());
        assert_eq!(saved.len(), 2 * PART, "what the first two parts embedded");
        // The next run (another process: fresh caches) embeds only the rest.
        let model = load();
        let (_, stats) = vectors_in_parts(
            &crate::core::cache::Caches::default(),
            &model,
            &table,
            d.path(),
            Some(&file),
            &|_, _| {},
            PART,
        )
        .unwrap();
        assert_eq!((stats.embedded, stats.reused), (3 * PART, 2 * PART));
    }
}
