//! `kb.search` with `dense`: BM25 and dense hits fused into one ranking.
//!
//! Each list is min-max normalised over its own hits (its best 1, its last
//! 0), and a hit scores `(1 - w) * bm25 + w * dense`, 0 for a list it is
//! missing from. Hits are fused by note (`per_file`) or by chunk. The
//! default weight and the list lengths were chosen by two-fold
//! cross-validation on `bench/lifeos_questions.jsonl`
//! (`python3 bench/lifeos_eval.py --cv`); the lengths matter, since the last
//! hit of each list is its zero.

use serde_json::{json, Value};
use std::collections::HashMap;

/// BM25 hits fused (notes or chunks).
pub const BM25_CANDIDATES: usize = 30;
/// Dense chunks fused (before they are grouped by note).
pub const DENSE_CANDIDATES: usize = 60;

fn key(hit: &Value, by_note: bool) -> String {
    let field = if by_note { "path" } else { "id" };
    hit[field].as_str().unwrap_or("").to_string()
}

/// Hits by key, best first, with their normalised scores.
fn normalised(hits: &[Value], by_note: bool) -> Vec<(String, f64, &Value)> {
    let mut seen = std::collections::HashSet::new();
    let kept: Vec<(String, f64, &Value)> = hits
        .iter()
        .filter_map(|h| {
            let k = key(h, by_note);
            seen.insert(k.clone())
                .then(|| (k, h["score"].as_f64().unwrap_or(0.0), h))
        })
        .collect();
    let hi = kept.first().map_or(0.0, |k| k.1);
    let lo = kept.last().map_or(0.0, |k| k.1);
    kept.into_iter()
        .map(|(k, s, h)| {
            let n = if hi > lo { (s - lo) / (hi - lo) } else { 1.0 };
            (k, n, h)
        })
        .collect()
}

/// The fused ranking: BM25's hit where it has one (its snippet marks the
/// matched words), else the dense one; `score` is the fused score,
/// `bm25_score` and `dense_score` the lists' own (absent where missing).
pub fn fuse(
    bm25: &[Value],
    dense: &[Value],
    w: f64,
    dense_min: f64,
    by_note: bool,
    top_k: usize,
) -> Vec<Value> {
    let b = normalised(bm25, by_note);
    let d = normalised(dense, by_note);
    let mut order: Vec<String> = Vec::new();
    let mut fused: HashMap<String, (f64, Value)> = HashMap::new();
    for (k, n, h) in &b {
        order.push(k.clone());
        let mut hit = (*h).clone();
        hit["bm25_score"] = h["score"].clone();
        fused.insert(k.clone(), ((1.0 - w) * n, hit));
    }
    for (k, n, h) in &d {
        match fused.get_mut(k) {
            Some((score, hit)) => {
                *score += w * n;
                hit["dense_score"] = h["score"].clone();
            }
            // Found by meaning alone and not close: noise, not a match.
            None if h["score"].as_f64().unwrap_or(0.0) < dense_min => {}
            None => {
                order.push(k.clone());
                let mut hit = (*h).clone();
                hit["dense_score"] = h["score"].clone();
                fused.insert(k.clone(), (w * n, hit));
            }
        }
    }
    let mut ranked: Vec<(f64, Value)> =
        order.into_iter().filter_map(|k| fused.remove(&k)).collect();
    // Stable: ties keep BM25's order, then dense's.
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranked
        .into_iter()
        .take(top_k)
        .map(|(s, mut hit)| {
            hit["score"] = json!((s * 1e4).round() / 1e4);
            hit
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(path: &str, id: &str, score: f64) -> Value {
        json!({"path": path, "id": id, "score": score})
    }

    #[test]
    fn fuses_by_note_with_each_list_normalised_over_its_own_hits() {
        let bm25 = [
            hit("a.md", "a#1", 9.0),
            hit("b.md", "b#1", 5.0),
            hit("c.md", "c#1", 1.0),
        ];
        // Dense has chunks; a note's best chunk counts, once.
        let dense = [
            hit("c.md", "c#2", 0.8),
            hit("c.md", "c#1", 0.7),
            hit("d.md", "d#1", 0.6),
            hit("a.md", "a#1", 0.2),
        ];
        let paths = |hits: &[Value]| -> Vec<String> {
            hits.iter()
                .map(|h| h["path"].as_str().unwrap().to_string())
                .collect()
        };
        // Words only, meaning only, and both.
        assert_eq!(
            paths(&fuse(&bm25, &dense, 0.0, 0.0, true, 10)),
            ["a.md", "b.md", "c.md", "d.md"]
        );
        assert_eq!(
            paths(&fuse(&bm25, &dense, 1.0, 0.0, true, 10))[..2],
            ["c.md", "d.md"]
        );
        let both = fuse(&bm25, &dense, 0.6, 0.0, true, 3);
        // c: 0.4*0 + 0.6*1 = 0.6; a: 0.4*1 + 0 = 0.4; d: 0.6*(0.4/0.6) = 0.4; b: 0.4*0.5 = 0.2
        assert_eq!(paths(&both), ["c.md", "a.md", "d.md"]);
        assert_eq!(both[0]["score"], 0.6);
        assert_eq!(both[0]["id"], "c#1", "BM25's hit is kept where it has one");
        assert_eq!(
            (
                both[0]["bm25_score"].as_f64(),
                both[0]["dense_score"].as_f64()
            ),
            (Some(1.0), Some(0.8))
        );
        assert!(both[2].get("bm25_score").is_none());
    }

    #[test]
    fn by_chunk_keeps_chunks_apart_and_empty_lists_are_fine() {
        let dense = [hit("c.md", "c#2", 0.8), hit("c.md", "c#1", 0.7)];
        assert_eq!(fuse(&[], &dense, 0.5, 0.0, false, 10).len(), 2);
        assert_eq!(fuse(&[], &dense, 0.5, 0.0, true, 10).len(), 1);
        assert!(fuse(&[], &[], 0.5, 0.0, true, 10).is_empty());
        // Found by meaning alone below the floor: dropped; with words: kept.
        let bm25 = [hit("a.md", "a#1", 2.0)];
        let weak = [hit("a.md", "a#1", 0.1), hit("z.md", "z#1", 0.2)];
        let kept = fuse(&bm25, &weak, 0.6, 0.3, true, 10);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0]["path"], "a.md");
    }
}
