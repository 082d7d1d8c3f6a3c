//! Exact top-k by dot product over unit vectors (= cosine similarity).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Dot product in four independent lanes, which the compiler turns into
/// SIMD; plain `zip().sum()` is a single dependent chain.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, ra) = a.split_at(a.len() - a.len() % 8);
    let (cb, rb) = b.split_at(ca.len());
    for (x, y) in ca.chunks_exact(8).zip(cb.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

#[derive(PartialEq)]
struct Scored(f32, usize);
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scored {
    // Reversed, so the heap's top is the worst kept score (ties: later row worse).
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.partial_cmp(&self.0)
            .unwrap_or(Ordering::Equal)
            .then(self.1.cmp(&o.1))
    }
}

/// Rows scanned per task when a matrix is big enough to scan on all cores.
const BLOCK_ROWS: usize = 8192;

/// The `k` rows of `matrix` (row-major, `dim` columns) most similar to
/// `query`, best first (ties: lower row first), as `(row, score)`; rows for
/// which `keep` is false are skipped. A big matrix is scanned in blocks on
/// all cores: in a fresh process most of the time goes to faulting in the
/// mapped pages, which parallelises.
pub fn top_k(
    query: &[f32],
    matrix: &[f32],
    dim: usize,
    k: usize,
    keep: impl Fn(usize) -> bool + Sync,
) -> Vec<(usize, f32)> {
    if k == 0 || dim == 0 {
        return Vec::new();
    }
    let rows = matrix.len() / dim;
    let best = if rows > 2 * BLOCK_ROWS {
        use rayon::prelude::*;
        matrix[..rows * dim]
            .par_chunks(BLOCK_ROWS * dim)
            .enumerate()
            .map(|(b, block)| scan(query, block, dim, k, b * BLOCK_ROWS, &keep))
            .reduce(Vec::new, |mut a, b| {
                a.extend(b);
                a
            })
    } else {
        scan(query, matrix, dim, k, 0, &keep)
    };
    ranked(best, k)
}

/// [`top_k`] over rows given one by one, as `(row, vector)`: for vectors
/// that are not one matrix (some rows only, from several places).
pub fn top_k_of<'a>(
    query: &[f32],
    k: usize,
    rows: impl Iterator<Item = (usize, &'a [f32])>,
) -> Vec<(usize, f32)> {
    if k == 0 {
        return Vec::new();
    }
    let mut heap: BinaryHeap<Scored> = BinaryHeap::with_capacity(k + 1);
    for (row, v) in rows {
        push(&mut heap, k, Scored(dot(query, v), row));
    }
    ranked(heap.into_vec(), k)
}

fn push(heap: &mut BinaryHeap<Scored>, k: usize, s: Scored) {
    if heap.len() < k {
        heap.push(s);
    } else if heap.peek().is_some_and(|w| s.0 > w.0) {
        heap.pop();
        heap.push(s);
    }
}

/// Best first (ties: lower row first), at most `k`.
fn ranked(best: Vec<Scored>, k: usize) -> Vec<(usize, f32)> {
    let mut out: Vec<(usize, f32)> = best.into_iter().map(|Scored(s, r)| (r, s)).collect();
    out.sort_by(|a, b| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(Ordering::Equal)
            .then(a.0.cmp(&b.0))
    });
    out.truncate(k);
    out
}

/// The best `k` rows of `block`, whose first row is `first`.
fn scan(
    query: &[f32],
    block: &[f32],
    dim: usize,
    k: usize,
    first: usize,
    keep: &(impl Fn(usize) -> bool + Sync),
) -> Vec<Scored> {
    let mut heap: BinaryHeap<Scored> = BinaryHeap::with_capacity(k + 1);
    for (i, v) in block.chunks_exact(dim).enumerate() {
        let row = first + i;
        if !keep(row) {
            continue;
        }
        push(&mut heap, k, Scored(dot(query, v), row));
    }
    heap.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_best_rows_in_order() {
        let dim = 10;
        let mut m = Vec::new();
        for r in 0..50 {
            let mut v = vec![0.0f32; dim];
            v[r % dim] = 1.0;
            v[(r + 1) % dim] = r as f32 / 100.0;
            m.extend(v);
        }
        let mut q = vec![0.0f32; dim];
        q[3] = 1.0;
        let got = top_k(&q, &m, dim, 3, |_| true);
        // Rows with a 1.0 at index 3 (3, 13, 23, …) score 1.0; row 2 scores 0.02.
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![3, 13, 23]);
        assert!((got[0].1 - 1.0).abs() < 1e-6);
        let got = top_k(&q, &m, dim, 2, |r| r % 10 != 3);
        assert_eq!(got.len(), 2);
        assert!(got[0].1 < 0.5, "filtered rows are skipped: {got:?}");
        assert_eq!(dot(&[1.0; 13], &[2.0; 13]), 26.0);
    }

    #[test]
    fn a_matrix_scanned_in_blocks_ranks_as_one_scan() {
        let dim = 8;
        let rows = 3 * BLOCK_ROWS + 17;
        let mut rng = fastrand::Rng::with_seed(7);
        let m: Vec<f32> = (0..rows * dim).map(|_| rng.f32() - 0.5).collect();
        let q: Vec<f32> = (0..dim).map(|_| rng.f32() - 0.5).collect();
        let keep = |r: usize| !r.is_multiple_of(3);
        let got = top_k(&q, &m, dim, 25, keep);
        let whole = scan(&q, &m, dim, 25, 0, &keep);
        let mut want: Vec<(usize, f32)> = whole.into_iter().map(|Scored(s, r)| (r, s)).collect();
        want.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
        assert_eq!(got, want);
        assert!(got.iter().all(|(r, _)| !r.is_multiple_of(3)));
        // Equal scores in different blocks: the lower row wins.
        let mut m = vec![0f32; rows * dim];
        for r in [5, BLOCK_ROWS + 1, 2 * BLOCK_ROWS + 2] {
            m[r * dim] = 1.0;
        }
        let mut q = vec![0f32; dim];
        q[0] = 1.0;
        let got = top_k(&q, &m, dim, 2, |_| true);
        assert_eq!(got, vec![(5, 1.0), (BLOCK_ROWS + 1, 1.0)]);
        // Rows one by one rank as the matrix does.
        let some = (0..rows)
            .filter(|r| r % 5 == 0)
            .map(|r| (r, &m[r * dim..(r + 1) * dim]));
        let every_fifth = top_k(&q, &m, dim, 3, |r| r % 5 == 0);
        assert_eq!(top_k_of(&q, 3, some), every_fifth);
    }
}
