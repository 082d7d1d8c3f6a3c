//! Vectors of chunks, cached on disk by chunk hash for one model.
//!
//! One file: `MTFV`, a format version, a JSON header (model id, dimension,
//! the chunk hashes in row order), then the rows as little-endian f32. It is
//! written atomically; a file that does not parse, belongs to another model
//! or is cut short is ignored (and rebuilt by the caller), never trusted.

use std::collections::{HashMap, HashSet};
use std::path::Path;

const MAGIC: &[u8; 4] = b"MTFV";
const VERSION: u32 = 1;

#[derive(Debug, Default)]
pub struct VectorCache {
    pub model_id: String,
    pub dim: usize,
    hashes: Vec<String>,
    rows: HashMap<String, usize>,
    data: Vec<f32>,
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
    hashes: Vec<String>,
}

impl VectorCache {
    pub fn new(model_id: &str, dim: usize) -> Self {
        VectorCache {
            model_id: model_id.to_string(),
            dim,
            ..Default::default()
        }
    }

    pub fn load(path: &Path, model_id: &str, dim: usize) -> (Self, Loaded) {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(_) => return (Self::new(model_id, dim), Loaded::Missing),
        };
        match Self::parse(&bytes, model_id, dim) {
            Ok(c) => {
                let n = c.len();
                (c, Loaded::Ok(n))
            }
            Err(why) => (Self::new(model_id, dim), Loaded::Discarded(why)),
        }
    }

    fn parse(b: &[u8], model_id: &str, dim: usize) -> Result<Self, String> {
        if b.len() < 12 || &b[..4] != MAGIC {
            return Err("not a vector cache".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if u32_at(4) != VERSION {
            return Err(format!("format version {}", u32_at(4)));
        }
        let hlen = u32_at(8) as usize;
        let body = b.get(12..12 + hlen).ok_or("cut short")?;
        let h: Header = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        if h.model_id != model_id || h.dim != dim {
            return Err(format!("made by `{}` (dimension {})", h.model_id, h.dim));
        }
        let raw = &b[12 + hlen..];
        if raw.len() != h.hashes.len() * dim * 4 {
            return Err("cut short".into());
        }
        let data: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let rows = h
            .hashes
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i))
            .collect();
        Ok(VectorCache {
            model_id: h.model_id,
            dim,
            hashes: h.hashes,
            rows,
            data,
        })
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    pub fn row_of(&self, hash: &str) -> Option<usize> {
        self.rows.get(hash).copied()
    }

    pub fn hash_of(&self, row: usize) -> &str {
        &self.hashes[row]
    }

    pub fn matrix(&self) -> &[f32] {
        &self.data
    }

    pub fn insert(&mut self, hash: &str, v: &[f32]) {
        debug_assert_eq!(v.len(), self.dim);
        if let Some(&r) = self.rows.get(hash) {
            self.data[r * self.dim..(r + 1) * self.dim].copy_from_slice(v);
            return;
        }
        self.rows.insert(hash.to_string(), self.hashes.len());
        self.hashes.push(hash.to_string());
        self.data.extend_from_slice(v);
    }

    /// Drops rows whose hash is not in `keep`; returns how many went.
    pub fn retain(&mut self, keep: &HashSet<&str>) -> usize {
        let before = self.len();
        if keep.len() >= before && self.hashes.iter().all(|h| keep.contains(h.as_str())) {
            return 0;
        }
        let mut out = VectorCache::new(&self.model_id, self.dim);
        for (i, h) in self.hashes.iter().enumerate() {
            if keep.contains(h.as_str()) {
                out.insert(h, &self.data[i * self.dim..(i + 1) * self.dim]);
            }
        }
        *self = out;
        before - self.len()
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let header = serde_json::to_vec(&Header {
            model_id: self.model_id.clone(),
            dim: self.dim,
            hashes: self.hashes.clone(),
        })?;
        let mut b = Vec::with_capacity(12 + header.len() + self.data.len() * 4);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(&header);
        for x in &self.data {
            b.extend_from_slice(&x.to_le_bytes());
        }
        crate::core::files::atomic_write(path, &b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let d = std::env::temp_dir().join(format!("mtf-vcache-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("v.bin");
        let mut c = VectorCache::new("m1", 3);
        c.insert("a", &[1.0, 0.0, 0.0]);
        c.insert("b", &[0.0, 1.0, 0.5]);
        c.save(&p).unwrap();
        let (back, state) = VectorCache::load(&p, "m1", 3);
        assert_eq!(state, Loaded::Ok(2));
        assert_eq!(back.row_of("b"), Some(1));
        assert_eq!(&back.matrix()[3..6], &[0.0, 1.0, 0.5]);
        // Another model's vectors are not used.
        let (_, state) = VectorCache::load(&p, "m2", 3);
        assert!(matches!(state, Loaded::Discarded(_)), "{state:?}");
        // A file cut short (a crash mid-copy elsewhere) is discarded, not trusted.
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 2]).unwrap();
        let (empty, state) = VectorCache::load(&p, "m1", 3);
        assert_eq!(state, Loaded::Discarded("cut short".into()));
        assert!(empty.is_empty());
        let mut c = back;
        assert_eq!(c.retain(&["b"].into_iter().collect()), 1);
        assert_eq!(c.row_of("b"), Some(0));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
