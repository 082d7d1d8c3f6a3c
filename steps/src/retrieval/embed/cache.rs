//! A knowledge base's chunk vectors for one model, on disk.
//!
//! Version 2, little-endian: `MTFV`, the version, the header's length, a
//! JSON header (model id, dimension, row count, and the row order the rows
//! follow, if they are complete), zero padding to a multiple of 8, one
//! 64-bit chunk hash per row, then the rows as f32. A process whose index
//! is in that row order maps the file and scans it where it lies: nothing
//! is parsed or copied, so a fresh process pays for the pages it touches,
//! not for reading 200 MB. Otherwise the hashes say which rows can be
//! reused. Written atomically; a file that does not parse, belongs to
//! another model or is cut short is ignored (and rebuilt by the caller),
//! never trusted. Version 1 (hex hashes in JSON, rows in embedding order)
//! is still read, so an upgrade does not embed again.

use std::collections::HashMap;
use std::path::Path;

const MAGIC: &[u8; 4] = b"MTFV";
const VERSION: u32 = 2;
/// The rows start on a multiple of this from the file's start (a mapping
/// starts on a page), so the mapped bytes can be read as u64 and f32.
const ALIGN: usize = 8;

/// Rows of vectors with each row's chunk hash.
pub struct Vectors {
    pub model_id: String,
    pub dim: usize,
    /// The row order the rows follow, when they are the full set of an
    /// index commit's chunks in its order ([`super::search`]).
    pub order: Option<String>,
    rows: usize,
    backing: Backing,
}

enum Backing {
    Owned {
        hashes: Vec<u64>,
        data: Vec<f32>,
    },
    /// The file itself; `hashes` and `data` are byte offsets into it.
    Mapped {
        map: memmap2::Mmap,
        hashes: usize,
        data: usize,
    },
    /// Rows spaced `stride` bytes apart in a mapped file, the first at
    /// `first` (a journal's records); their hashes read out.
    Strided {
        map: memmap2::Mmap,
        hashes: Vec<u64>,
        first: usize,
        stride: usize,
    },
}

/// What loading found.
#[derive(Debug, PartialEq, Eq)]
pub enum Loaded {
    Missing,
    Ok(usize),
    /// Unusable (named why): start empty.
    Discarded(String),
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    model_id: String,
    dim: usize,
    rows: usize,
    order: Option<String>,
}

#[derive(serde::Deserialize)]
struct HeaderV1 {
    model_id: String,
    dim: usize,
    hashes: Vec<String>,
}

impl std::fmt::Debug for Vectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vectors")
            .field("model_id", &self.model_id)
            .field("dim", &self.dim)
            .field("order", &self.order)
            .field("rows", &self.rows)
            .field("mapped", &matches!(self.backing, Backing::Mapped { .. }))
            .finish()
    }
}

/// Writes a vector file of `hashes.len()` rows, row `i` being `row(i)`,
/// without gathering them in memory first (atomically, as [`Vectors::save`]).
pub fn write_rows<'a>(
    path: &Path,
    model_id: &str,
    dim: usize,
    order: Option<String>,
    hashes: &[u64],
    row: &dyn Fn(usize) -> &'a [f32],
) -> std::io::Result<()> {
    let header = serde_json::to_vec(&Header {
        model_id: model_id.to_string(),
        dim,
        rows: hashes.len(),
        order,
    })?;
    crate::core::files::atomic_write_with(path, |w| {
        w.write_all(MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(&(header.len() as u32).to_le_bytes())?;
        w.write_all(&header)?;
        let pad = (12 + header.len()).next_multiple_of(ALIGN) - (12 + header.len());
        w.write_all(&[0u8; ALIGN][..pad])?;
        for h in hashes {
            w.write_all(&h.to_le_bytes())?;
        }
        for i in 0..hashes.len() {
            let r = row(i);
            if cfg!(target_endian = "little") {
                w.write_all(bytemuck::cast_slice(r))?;
            } else {
                for x in r {
                    w.write_all(&x.to_le_bytes())?;
                }
            }
        }
        Ok(())
    })
}

/// A version 1 hash (`core::hash::hex_hash`'s hex) as version 2 stores it.
fn v1_hash(hex: &str) -> u64 {
    // Not a hash of ours: any stable value will do; it is never looked up.
    u64::from_str_radix(hex, 16).unwrap_or_else(|_| crate::core::hash::hash64(&[hex.as_bytes()]))
}

impl Vectors {
    /// Rows held in memory; `data` has `hashes.len() * dim` values.
    pub fn owned(
        model_id: &str,
        dim: usize,
        order: Option<String>,
        hashes: Vec<u64>,
        data: Vec<f32>,
    ) -> Self {
        debug_assert_eq!(data.len(), hashes.len() * dim);
        Vectors {
            model_id: model_id.to_string(),
            dim,
            order,
            rows: hashes.len(),
            backing: Backing::Owned { hashes, data },
        }
    }

    pub fn load(path: &Path, model_id: &str, dim: usize) -> (Option<Self>, Loaded) {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(_) => return (None, Loaded::Missing),
        };
        // SAFETY: the file is only ever replaced by a rename (atomic_write),
        // never written in place, so the mapped bytes do not change under us;
        // a file cut short by another program reads as zeros, not a crash.
        crate::core::mapped::guard();
        let map = match unsafe { memmap2::Mmap::map(&file) } {
            Ok(m) => m,
            Err(e) => return (None, Loaded::Discarded(e.to_string())),
        };
        match Self::parse(map, model_id, dim) {
            Ok(v) => {
                let n = v.len();
                (Some(v), Loaded::Ok(n))
            }
            Err(why) => (None, Loaded::Discarded(why)),
        }
    }

    fn parse(map: memmap2::Mmap, model_id: &str, dim: usize) -> Result<Self, String> {
        let b = &map[..];
        if b.len() < 12 || &b[..4] != MAGIC {
            return Err("not a vector cache".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let hlen = u32_at(8) as usize;
        let body = b.get(12..12 + hlen).ok_or("cut short")?;
        let version = u32_at(4);
        if version == 1 {
            return Self::parse_v1(body, &b[12 + hlen..], model_id, dim);
        }
        if version != VERSION {
            return Err(format!("format version {version}"));
        }
        let h: Header = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        if h.model_id != model_id || h.dim != dim {
            return Err(format!("made by `{}` (dimension {})", h.model_id, h.dim));
        }
        let hashes = (12 + hlen).next_multiple_of(ALIGN);
        let data = h
            .rows
            .checked_mul(8)
            .and_then(|n| n.checked_add(hashes))
            .ok_or("cut short")?;
        let end = h
            .rows
            .checked_mul(dim * 4)
            .and_then(|n| n.checked_add(data))
            .ok_or("cut short")?;
        if b.len() != end {
            return Err("cut short".into());
        }
        let mapped = cfg!(target_endian = "little")
            && bytemuck::try_cast_slice::<u8, u64>(&b[hashes..data]).is_ok()
            && bytemuck::try_cast_slice::<u8, f32>(&b[data..]).is_ok();
        let backing = if mapped {
            Backing::Mapped { map, hashes, data }
        } else {
            // Not where the values can be read in place: decode them.
            Backing::Owned {
                hashes: b[hashes..data]
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
                data: le_f32s(&b[data..]),
            }
        };
        Ok(Vectors {
            model_id: h.model_id,
            dim,
            order: h.order,
            rows: h.rows,
            backing,
        })
    }

    fn parse_v1(header: &[u8], raw: &[u8], model_id: &str, dim: usize) -> Result<Self, String> {
        let h: HeaderV1 = serde_json::from_slice(header).map_err(|e| e.to_string())?;
        if h.model_id != model_id || h.dim != dim {
            return Err(format!("made by `{}` (dimension {})", h.model_id, h.dim));
        }
        if raw.len() != h.hashes.len() * dim * 4 {
            return Err("cut short".into());
        }
        let hashes = h.hashes.iter().map(|x| v1_hash(x)).collect();
        Ok(Vectors::owned(model_id, dim, None, hashes, le_f32s(raw)))
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Rows `f32` values each `stride` bytes apart in `map` from `first`
    /// (which the caller checked: in bounds, 4-byte aligned, little-endian).
    pub(crate) fn strided(
        model_id: &str,
        dim: usize,
        map: memmap2::Mmap,
        hashes: Vec<u64>,
        first: usize,
        stride: usize,
    ) -> Self {
        Vectors {
            model_id: model_id.to_string(),
            dim,
            order: None,
            rows: hashes.len(),
            backing: Backing::Strided {
                map,
                hashes,
                first,
                stride,
            },
        }
    }

    pub fn is_mapped(&self) -> bool {
        !matches!(self.backing, Backing::Owned { .. })
    }

    pub fn hashes(&self) -> &[u64] {
        match &self.backing {
            Backing::Owned { hashes, .. } | Backing::Strided { hashes, .. } => hashes,
            Backing::Mapped { map, hashes, data } => bytemuck::cast_slice(&map[*hashes..*data]),
        }
    }

    /// Row-major, `dim` columns, when the rows lie one after another.
    pub fn matrix(&self) -> Option<&[f32]> {
        match &self.backing {
            Backing::Owned { data, .. } => Some(data),
            Backing::Mapped { map, data, .. } => Some(bytemuck::cast_slice(&map[*data..])),
            Backing::Strided { .. } => None,
        }
    }

    pub fn row(&self, i: usize) -> &[f32] {
        let d = self.dim;
        match &self.backing {
            Backing::Owned { data, .. } => &data[i * d..(i + 1) * d],
            Backing::Mapped { map, data, .. } => {
                bytemuck::cast_slice(&map[data + i * d * 4..data + (i + 1) * d * 4])
            }
            Backing::Strided {
                map, first, stride, ..
            } => {
                let at = first + i * stride;
                bytemuck::cast_slice(&map[at..at + d * 4])
            }
        }
    }

    /// Each hash's row (the first, should a hash repeat).
    pub fn rows_by_hash(&self) -> HashMap<u64, usize> {
        let mut m = HashMap::with_capacity(self.rows);
        for (i, h) in self.hashes().iter().enumerate() {
            m.entry(*h).or_insert(i);
        }
        m
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        write_rows(
            path,
            &self.model_id,
            self.dim,
            self.order.clone(),
            self.hashes(),
            &|i| self.row(i),
        )
    }
}

fn le_f32s(raw: &[u8]) -> Vec<f32> {
    raw.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_mapped_and_corruption() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v.bin");
        let v = Vectors::owned(
            "m1",
            3,
            Some("order-1".into()),
            vec![7, 9],
            vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.5],
        );
        v.save(&p).unwrap();
        let (back, state) = Vectors::load(&p, "m1", 3);
        assert_eq!(state, Loaded::Ok(2));
        let back = back.unwrap();
        assert!(back.is_mapped(), "read where it lies");
        assert_eq!(back.order.as_deref(), Some("order-1"));
        assert_eq!(back.hashes(), &[7, 9]);
        assert_eq!(back.row(1), &[0.0, 1.0, 0.5]);
        assert_eq!(back.rows_by_hash()[&9], 1);
        // Another model's vectors, or another dimension, are not used.
        for (m, dim) in [("m2", 3), ("m1", 4)] {
            let (none, state) = Vectors::load(&p, m, dim);
            assert!(
                none.is_none() && matches!(state, Loaded::Discarded(_)),
                "{state:?}"
            );
        }
        // A file cut short (a crash mid-copy elsewhere) is discarded, not trusted.
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 2]).unwrap();
        let (none, state) = Vectors::load(&p, "m1", 3);
        assert_eq!(state, Loaded::Discarded("cut short".into()));
        assert!(none.is_none());
        // A row count that would overflow is cut short too, not a panic.
        let mut evil = bytes.clone();
        let h = br#"{"model_id":"m1","dim":3,"rows":18446744073709551615,"order":null}"#;
        evil.truncate(8);
        evil.extend_from_slice(&(h.len() as u32).to_le_bytes());
        evil.extend_from_slice(h);
        std::fs::write(&p, &evil).unwrap();
        assert_eq!(
            Vectors::load(&p, "m1", 3).1,
            Loaded::Discarded("cut short".into())
        );
        std::fs::write(&p, b"MTFV\x09\0\0\0\x02\0\0\0{}").unwrap();
        assert_eq!(
            Vectors::load(&p, "m1", 3).1,
            Loaded::Discarded("format version 9".into())
        );
        assert_eq!(
            Vectors::load(&d.path().join("none"), "m1", 3).1,
            Loaded::Missing
        );
    }

    #[test]
    fn reads_version_1() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v1.bin");
        let header =
            br#"{"model_id":"m1","dim":2,"hashes":["00000000000000ff","0000000000000010"]}"#;
        let mut b = b"MTFV\x01\0\0\0".to_vec();
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(header);
        for x in [1.0f32, 2.0, 3.0, 4.0] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        std::fs::write(&p, &b).unwrap();
        let (v, state) = Vectors::load(&p, "m1", 2);
        assert_eq!(state, Loaded::Ok(2));
        let v = v.unwrap();
        assert_eq!(
            (v.hashes(), v.row(1)),
            (&[255u64, 16][..], &[3.0f32, 4.0][..])
        );
        assert_eq!(v.order, None, "an old file's rows follow no index order");
        assert_eq!(v1_hash("00000000000000ff"), 255);
    }
}
