//! Process-wide caches (open indexes, loaded models, vectors) serve a
//! long-running `serve` well, but the keys come from inputs a request may
//! choose: each cache keeps at most a fixed number of entries.

use std::collections::HashMap;
use std::hash::Hash;

/// Drops entries other than `keep` until `map` holds at most `cap`; the
/// ones dropped are chosen at random (no entry is pinned by a request
/// pattern), and are simply built again when asked for.
pub fn bound<K: Eq + Hash + Clone, V>(map: &mut HashMap<K, V>, keep: &K, cap: usize) {
    while map.len() > cap.max(1) {
        let others: Vec<K> = map.keys().filter(|k| *k != keep).cloned().collect();
        if others.is_empty() {
            return;
        }
        let victim = &others[fastrand::usize(..others.len())];
        map.remove(victim);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_at_most_cap_and_the_newest() {
        let mut m = std::collections::HashMap::new();
        for i in 0..100 {
            m.insert(i, i);
            super::bound(&mut m, &i, 8);
            assert!(m.len() <= 8);
            assert!(m.contains_key(&i));
        }
    }
}
