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
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"MTFJ";
const VERSION: u32 = 2;

/// A journal as read: its rows (None when there are none) and whether a
/// damaged or foreign tail was dropped (then: write the journal out).
#[derive(Clone)]
pub struct Journal {
    pub rows: Option<Arc<Vectors>>,
    pub damaged: bool,
    /// What was read, so that a later read checks only what came after.
    read: Option<Read>,
}

/// Which file was read, how far, and the check words of its first and last
/// record read (a file put in its place under the same inode differs there).
#[derive(Clone, PartialEq)]
struct Read {
    file: (u64, u64),
    bytes: usize,
    checks: (u64, u64),
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

/// The check words of the first record and of the one ending at `bytes`,
/// read without mapping the file.
fn check_words(path: &Path, bytes: usize, size: usize, head: usize) -> Option<(u64, u64)> {
    use std::io::{Read as _, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let mut word = |end: usize| -> Option<u64> {
        let mut b = [0u8; 8];
        f.seek(SeekFrom::Start((end - 8) as u64)).ok()?;
        f.read_exact(&mut b).ok()?;
        Some(u64::from_le_bytes(b))
    };
    Some((word(head + size)?, word(bytes)?))
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
        Self::load_after(path, model_id, dim, None)
    }

    /// [`Journal::load`], checking only the records appended since `before`
    /// (a read of the same file): a search during a long background
    /// embedding does not check the whole journal again, nor touch its
    /// pages.
    pub fn load_after(
        path: &Path,
        model_id: &str,
        dim: usize,
        before: Option<&Journal>,
    ) -> Journal {
        let none = |damaged| Journal {
            rows: None,
            damaged,
            read: None,
        };
        let Ok(file) = std::fs::File::open(path) else {
            return none(false);
        };
        let Ok(meta) = file.metadata() else {
            return none(false);
        };
        let id = (meta.dev(), meta.ino());
        let size = 16 + dim * 4;
        let head = header(model_id, dim);
        // What an earlier read of this file found good, if it is this file.
        let known = before.filter(|b| !b.damaged).and_then(|b| {
            let r = b.read.as_ref()?;
            (r.file == id && meta.len() as usize >= r.bytes).then_some((b, r))
        });
        if let Some((b, r)) = known.filter(|(_, r)| meta.len() as usize == r.bytes) {
            if check_words(path, r.bytes, size, head.len()) == Some(r.checks) {
                return b.clone();
            }
        }
        crate::core::mapped::guard();
        // SAFETY: records are only ever appended, never changed in place,
        // and the length is fixed when mapped; a file cut short by another
        // program reads as zeros (the guard), which fail their checks.
        let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
            return none(true);
        };
        if !map.starts_with(&head) {
            return none(!map.is_empty());
        }
        let check_at =
            |end: usize| u64::from_le_bytes(map[end - 8..end].try_into().unwrap_or_default());
        let (mut hashes, from) = match known {
            Some((b, r))
                if r.bytes > head.len()
                    && (check_at(head.len() + size), check_at(r.bytes)) == r.checks =>
            {
                let prior = b.rows.as_ref().map_or(&[][..], |v| v.hashes());
                (prior.to_vec(), r.bytes)
            }
            _ => (Vec::new(), head.len()),
        };
        let mut damaged = false;
        for rec in map[from..].chunks(size) {
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
        let bytes = head.len() + hashes.len() * size;
        let read = Read {
            file: id,
            bytes,
            checks: (check_at(head.len() + size), check_at(bytes)),
        };
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
            rows: Some(Arc::new(rows)),
            damaged,
            read: Some(read),
        }
    }

    /// Rows in the journal.
    pub fn len(&self) -> usize {
        self.rows.as_ref().map_or(0, |v| v.len())
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

    #[test]
    fn a_later_read_checks_only_what_was_appended_and_sees_a_new_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v.add");
        Journal::append(&p, "m", 2, &[(1, &[1.0, 1.0]), (2, &[2.0, 2.0])]).unwrap();
        let first = Journal::load(&p, "m", 2);
        // Nothing appended: the same rows, not read again.
        let same = Journal::load_after(&p, "m", 2, Some(&first));
        assert!(Arc::ptr_eq(
            same.rows.as_ref().unwrap(),
            first.rows.as_ref().unwrap()
        ));
        Journal::append(&p, "m", 2, &[(3, &[3.0, 3.0])]).unwrap();
        let more = Journal::load_after(&p, "m", 2, Some(&first));
        assert_eq!(hashes(&more), [1, 2, 3]);
        assert_eq!(more.rows.as_ref().unwrap().row(2), [3.0, 3.0]);
        // Removed and written anew: read whole, whatever inode it gets.
        std::fs::remove_file(&p).unwrap();
        Journal::append(
            &p,
            "m",
            2,
            &[(7, &[7.0, 7.0]), (8, &[8.0, 8.0]), (9, &[9.0, 9.0])],
        )
        .unwrap();
        let fresh = Journal::load_after(&p, "m", 2, Some(&more));
        assert_eq!(hashes(&fresh), [7, 8, 9]);
        assert_eq!(fresh.rows.as_ref().unwrap().row(0), [7.0, 7.0]);
    }
}
