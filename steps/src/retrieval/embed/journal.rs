//! Vectors added since the last full write of a knowledge base's vector
//! file: appended, never rewritten, so a question that embeds a few chunks
//! or an edited note costs the bytes of those rows, not of the whole file;
//! and read where they lie (mapped), so a vault embedded in the background
//! is held by the page cache, not by the process.
//!
//! Little-endian: `MTFJ`, version 2, the dimension, the model id's length,
//! the model id, zero padding to a multiple of 8; then records of a 64-bit
//! chunk hash, `dim` f32 values and a 64-bit check of both. A record cut
//! short (a killed writer) or failing its check ends the journal: what
//! precedes it is used, the rest is dropped, and the caller writes the
//! journal into the vector file. The header is whole before the file
//! appears (a link of a finished temporary file), so an appender never
//! writes before it.

use super::cache::Vectors;
use crate::core::hash::hash64;
use std::io::Write;
use std::path::Path;

const MAGIC: &[u8; 4] = b"MTFJ";
const VERSION: u32 = 2;

/// A journal as read: its rows (None when there are none) and whether a
/// damaged or foreign tail was dropped (then: write the journal out).
pub struct Journal {
    pub rows: Option<Vectors>,
    pub damaged: bool,
}

fn header(model_id: &str, dim: usize) -> Vec<u8> {
    let mut h = Vec::with_capacity(24 + model_id.len());
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&(dim as u32).to_le_bytes());
    h.extend_from_slice(&(model_id.len() as u32).to_le_bytes());
    h.extend_from_slice(model_id.as_bytes());
    h.resize(h.len().next_multiple_of(8), 0);
    h
}

fn record(hash: u64, row: &[f32], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&hash.to_le_bytes());
    for x in row {
        out.extend_from_slice(&x.to_le_bytes());
    }
    let check = hash64(&[&out[start..]]);
    out.extend_from_slice(&check.to_le_bytes());
}

impl Journal {
    /// The journal at `path` (no rows when there is none).
    pub fn load(path: &Path, model_id: &str, dim: usize) -> Journal {
        let none = |damaged| Journal {
            rows: None,
            damaged,
        };
        let Ok(file) = std::fs::File::open(path) else {
            return none(false);
        };
        crate::core::mapped::guard();
        // SAFETY: records are only ever appended, never changed in place,
        // and the length is fixed when mapped; a file cut short by another
        // program reads as zeros (the guard), which fail their checks.
        let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
            return none(true);
        };
        let head = header(model_id, dim);
        if !map.starts_with(&head) {
            return none(!map.is_empty());
        }
        let size = 16 + dim * 4;
        let mut hashes = Vec::new();
        let mut damaged = false;
        for rec in map[head.len()..].chunks(size) {
            let (content, check) = rec.split_at(rec.len().saturating_sub(8));
            if rec.len() != size || check != hash64(&[content]).to_le_bytes().as_slice() {
                damaged = true;
                break;
            }
            hashes.push(u64::from_le_bytes(
                content[..8].try_into().unwrap_or_default(),
            ));
        }
        if hashes.is_empty() {
            return none(damaged);
        }
        let first = head.len() + 8;
        // The header keeps records 8-byte aligned, so rows read in place.
        let rows = if cfg!(target_endian = "little") {
            Vectors::strided(model_id, dim, map, hashes, first, size)
        } else {
            let data = (0..hashes.len())
                .flat_map(|i| {
                    let at = first + i * size;
                    map[at..at + dim * 4]
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect::<Vec<_>>()
                })
                .collect();
            Vectors::owned(model_id, dim, None, hashes, data)
        };
        Journal {
            rows: Some(rows),
            damaged,
        }
    }

    /// Rows in the journal.
    pub fn len(&self) -> usize {
        self.rows.as_ref().map_or(0, Vectors::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `rows` (hash, vector) to the journal at `path`, creating it.
    /// One write: appenders in other processes do not interleave rows.
    pub fn append(
        path: &Path,
        model_id: &str,
        dim: usize,
        rows: &[(u64, &[f32])],
    ) -> std::io::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        if !path.exists() {
            let tmp = path.with_extension(format!("new-{}", std::process::id()));
            std::fs::write(&tmp, header(model_id, dim))?;
            // Only one creator wins; the others append to its file.
            let linked = std::fs::hard_link(&tmp, path);
            let _ = std::fs::remove_file(&tmp);
            match linked {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        let mut buf = Vec::with_capacity(rows.len() * (16 + dim * 4));
        for (h, row) in rows {
            debug_assert_eq!(row.len(), dim);
            record(*h, row, &mut buf);
        }
        let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
        f.write_all(&buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(j: &Journal) -> Vec<u64> {
        j.rows.as_ref().map_or(Vec::new(), |v| v.hashes().to_vec())
    }

    #[test]
    fn appends_reload_mapped_and_a_cut_tail_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v.add");
        assert!(Journal::load(&p, "m", 3).is_empty());
        Journal::append(
            &p,
            "model",
            3,
            &[(1, &[1.0, 2.0, 3.0]), (2, &[4.0, 5.0, 6.0])],
        )
        .unwrap();
        Journal::append(&p, "model", 3, &[(3, &[7.0, 8.0, 9.0])]).unwrap();
        let j = Journal::load(&p, "model", 3);
        assert_eq!(hashes(&j), [1, 2, 3]);
        let rows = j.rows.as_ref().unwrap();
        assert!(rows.is_mapped());
        assert_eq!(rows.row(2), [7.0, 8.0, 9.0]);
        assert_eq!(rows.row(0), [1.0, 2.0, 3.0]);
        assert!(!j.damaged);
        // Another model's or dimension's journal is not read.
        assert!(Journal::load(&p, "other", 3).is_empty());
        assert!(Journal::load(&p, "model", 4).damaged);
        // A writer killed mid-record: the whole rows before it are kept.
        let len = std::fs::metadata(&p).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(len - 5).unwrap();
        let j = Journal::load(&p, "model", 3);
        assert_eq!((hashes(&j), j.damaged), (vec![1u64, 2], true));
        // A flipped byte fails its row's check.
        let mut bytes = std::fs::read(&p).unwrap();
        let at = header("model", 3).len() + 10;
        bytes[at] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        let j = Journal::load(&p, "model", 3);
        assert_eq!((j.len(), j.damaged), (0, true));
    }
}
