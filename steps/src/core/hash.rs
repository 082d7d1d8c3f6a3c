//! The one content hash: notices changes (chunks, manifests, cached
//! vectors); stable across runs and machines, not for security.

/// FNV-1a 64 over the parts (with a separator), as 16 hex digits. Used to
/// notice changes, not for security.
pub fn hex_hash(parts: &[&[u8]]) -> String {
    format!("{:016x}", hash64(parts))
}

/// [`hex_hash`]'s value as a number.
pub fn hash64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0xff;
            h = h.wrapping_mul(0x100000001b3);
        }
        for b in *p {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}
