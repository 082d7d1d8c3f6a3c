//! What is kept between runs (open indexes, loaded models, vectors): a
//! long-running `serve` gains most from it, but the keys come from inputs a
//! request may choose, so each kind keeps at most a fixed number of entries
//! ([`bound`]). [`Caches`] belongs to the [`Capabilities`] runs are given: a
//! server shares one across its runs, a test makes its own.
//!
//! [`Capabilities`]: crate::core::action::Capabilities

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// One map per kind of thing kept, each with its own lock (building an index
/// does not hold up loading a model).
#[derive(Default)]
pub struct Caches {
    kinds: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.kinds.lock().map(|k| k.len()).unwrap_or(0);
        write!(f, "Caches({n} kinds)")
    }
}

impl Caches {
    /// Runs `f` on the map of keys `K` to values `V` (empty at first),
    /// holding that map's lock; `f` bounds it with [`bound`].
    pub fn with<K, V, R>(&self, f: impl FnOnce(&mut HashMap<K, V>) -> R) -> R
    where
        K: Send + 'static,
        V: Send + 'static,
    {
        let kind = {
            let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
            kinds
                .entry(TypeId::of::<(K, V)>())
                .or_insert_with(|| Arc::new(Mutex::new(HashMap::<K, V>::new())))
                .clone()
        };
        let map = kind
            .downcast_ref::<Mutex<HashMap<K, V>>>()
            .expect("each TypeId holds the map of its own (K, V)");
        let mut guard = map.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }
}

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
    fn kinds_are_kept_apart_and_caches_apart() {
        let a = super::Caches::default();
        a.with(|m: &mut std::collections::HashMap<String, u32>| m.insert("x".into(), 1));
        a.with(|m: &mut std::collections::HashMap<String, String>| {
            m.insert("x".into(), "s".into())
        });
        assert_eq!(
            a.with(|m: &mut std::collections::HashMap<String, u32>| m.get("x").copied()),
            Some(1)
        );
        assert_eq!(
            a.with(|m: &mut std::collections::HashMap<String, String>| m.get("x").cloned()),
            Some("s".to_string())
        );
        let b = super::Caches::default();
        assert_eq!(
            b.with(|m: &mut std::collections::HashMap<String, u32>| m.len()),
            0
        );
    }

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
