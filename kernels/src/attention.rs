//! Multi-head self-attention of one sequence over its own tokens.
//!
//! Why not a general matrix product: a head's products are small (a
//! sentence's 20–256 tokens by 32 numbers), called 72 times per sequence,
//! and a library's packing and dispatch cost more than the sums. Here both
//! products (scores = q·kᵀ, then probabilities · v) are the same register
//! block, 8 rows by 32 columns kept in 16 AVX-512 registers; the keys are
//! laid out once per head so that the block reads whole vectors of them.

use crate::ops;

/// Query rows per block; columns (keys, or a head's numbers) per block.
const ROWS: usize = 8;
const COLS: usize = 32;

/// Room reused between calls: a head's keys transposed, its values where
/// a row of them is not whole blocks, the last block's queries, a block's
/// scores.
#[derive(Default)]
pub struct Scratch {
    keys: Vec<f32>,
    values: Vec<f32>,
    queries: Vec<f32>,
    scores: Vec<f32>,
}

impl Scratch {
    /// Sized for `shape`, keys (and values, where copied) padded with
    /// zeros to whole blocks: the blocks never read past them, and a
    /// padding key's score is not used (softmax and the weighted sum stop
    /// at `len`).
    fn prepare(&mut self, s: Shape) {
        let copied = if s.d.is_multiple_of(COLS) {
            0
        } else {
            s.len * s.dp
        };
        for (buf, n) in [
            (&mut self.keys, s.d * s.lp),
            (&mut self.values, copied),
            (&mut self.queries, ROWS * s.d),
            (&mut self.scores, ROWS * s.lp),
        ] {
            buf.clear();
            buf.resize(n, 0.0);
        }
    }
}

/// `out = softmax(q_h · k_hᵀ / √d) · v_h` for each head h: `q`, `k`, `v`
/// and `out` are `len` rows of `heads × d` numbers, head h in columns
/// `h·d..(h+1)·d`.
pub fn attend(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    len: usize,
    heads: usize,
    out: &mut [f32],
    scratch: &mut Scratch,
) {
    assert!(len > 0 && heads > 0);
    let h = q.len() / len;
    assert!(h > 0 && h.is_multiple_of(heads) && q.len() == len * h);
    assert!(k.len() == q.len() && v.len() == q.len() && out.len() == q.len());
    let d = h / heads;
    let shape = Shape {
        len,
        heads,
        d,
        lp: len.next_multiple_of(COLS),
        dp: d.next_multiple_of(COLS),
    };
    scratch.prepare(shape);
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features.
        return unsafe { all_heads_avx512(q, k, v, out, shape, scratch) };
    }
    let fused = fused_multiply_add();
    let block = |a: &[f32], sa, b: &[f32], sb, n, to: Dest| block(a, sa, b, sb, n, to, fused);
    all_heads(q, k, v, out, shape, scratch, block, transpose_keys)
}

/// A sequence's sizes: tokens, heads, numbers per head, and the first and
/// last padded to whole blocks.
#[derive(Clone, Copy)]
struct Shape {
    len: usize,
    heads: usize,
    d: usize,
    lp: usize,
    dp: usize,
}

/// Where a block's sums go: `rows` rows of `width` numbers, `stride` apart.
struct Dest<'a> {
    out: &'a mut [f32],
    stride: usize,
    rows: usize,
    width: usize,
}

/// [`all_heads`] compiled for AVX-512: each block's sums in 16 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn all_heads_avx512(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
    shape: Shape,
    scratch: &mut Scratch,
) {
    let block = |a: &[f32], sa, b: &[f32], sb, n, to: Dest| {
        // SAFETY: this function runs only where the CPU has AVX-512.
        unsafe { block_avx512(a, sa, b, sb, n, to) }
    };
    let keys = |k: &[f32], c, s: Shape, scale, keys: &mut [f32]| {
        if s.d.is_multiple_of(16) {
            // SAFETY: as above.
            unsafe { keys_avx512(k, c, s, scale, keys) }
        } else {
            transpose_keys(k, c, s, scale, keys)
        }
    };
    all_heads(q, k, v, out, shape, scratch, block, keys)
}

/// Whether `f32::mul_add` is one instruction here; where it is not, it is
/// a slow library call.
fn fused_multiply_add() -> bool {
    #[cfg(target_arch = "x86_64")]
    return is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    cfg!(target_arch = "aarch64")
}

/// Every head of the sequence (see [`attend`]); `block` is [`block`] and
/// `transpose` is [`transpose_keys`], or the same for this CPU.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn all_heads(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
    shape: Shape,
    scratch: &mut Scratch,
    block: impl Fn(&[f32], usize, &[f32], usize, usize, Dest),
    transpose: impl Fn(&[f32], usize, Shape, f32, &mut [f32]),
) {
    let Shape {
        len,
        heads,
        d,
        lp,
        dp,
    } = shape;
    let Scratch {
        keys,
        values,
        queries,
        scores,
    } = scratch;
    let h = heads * d;
    let scale = 1.0 / (d as f32).sqrt();
    for head in 0..heads {
        let c = head * d;
        transpose(k, c, shape, scale, keys);
        // The values are read in place when a head's row is whole blocks.
        let (vals, vstride) = if values.is_empty() {
            (&v[c..], h)
        } else {
            for j in 0..len {
                values[j * dp..][..d].copy_from_slice(&v[j * h + c..][..d]);
            }
            (&values[..], dp)
        };
        for first in (0..len).step_by(ROWS) {
            let rows = (len - first).min(ROWS);
            // The queries are read in place but in the last block, where
            // the rows past `len` are zeros.
            let (qs, qstride) = if rows == ROWS {
                (&q[first * h + c..], h)
            } else {
                queries.fill(0.0);
                for r in 0..rows {
                    queries[r * d..][..d].copy_from_slice(&q[(first + r) * h + c..][..d]);
                }
                (&queries[..], d)
            };
            for col in (0..lp).step_by(COLS) {
                let to = Dest {
                    out: &mut scores[col..],
                    stride: lp,
                    rows,
                    width: COLS,
                };
                block(qs, qstride, &keys[col..], lp, d, to);
            }
            for r in 0..rows {
                ops::softmax_row(&mut scores[r * lp..][..len]);
            }
            for col in (0..d).step_by(COLS) {
                let to = Dest {
                    out: &mut out[first * h + c + col..],
                    stride: h,
                    rows,
                    width: (d - col).min(COLS),
                };
                block(scores, lp, &vals[col..], vstride, len, to);
            }
        }
    }
}

/// Head `c..c + d` of the keys, times `scale`, transposed into `keys`:
/// number t of key j at `t·lp + j`.
#[inline(always)]
fn transpose_keys(k: &[f32], c: usize, s: Shape, scale: f32, keys: &mut [f32]) {
    let h = s.heads * s.d;
    for j in 0..s.len {
        for (t, &x) in k[j * h + c..][..s.d].iter().enumerate() {
            keys[t * s.lp + j] = x * scale;
        }
    }
}

/// [`transpose_keys`] 16 keys by 16 numbers at a time, in registers (the
/// scalar way writes one number per instruction, and was a third of the
/// attention's time). `s.d` must be a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn keys_avx512(k: &[f32], c: usize, s: Shape, scale: f32, keys: &mut [f32]) {
    use std::arch::x86_64::*;
    let h = s.heads * s.d;
    assert!(s.d.is_multiple_of(16) && c + s.d <= h && k.len() >= s.len * h);
    assert!(s.lp.is_multiple_of(16) && s.lp >= s.len && keys.len() >= s.d * s.lp);
    let scale = _mm512_set1_ps(scale);
    for j in (0..s.len).step_by(16) {
        for t in (0..s.d).step_by(16) {
            // Keys j.. (zeros past the last), numbers t..t + 16.
            let mut r = [_mm512_setzero_ps(); 16];
            for (i, r) in r.iter_mut().enumerate().take(s.len - j) {
                *r = _mm512_loadu_ps(k.as_ptr().add((j + i) * h + c + t));
            }
            // Pairs of numbers, then fours, then 128-bit quarters, then halves.
            let mut u = [_mm512_setzero_ps(); 16];
            for i in 0..8 {
                u[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                u[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
            }
            let (lo, hi) = (
                |a: __m512, b: __m512| {
                    _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
                },
                |a: __m512, b: __m512| {
                    _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
                },
            );
            for b in (0..16).step_by(4) {
                r[b] = lo(u[b], u[b + 2]);
                r[b + 1] = hi(u[b], u[b + 2]);
                r[b + 2] = lo(u[b + 1], u[b + 3]);
                r[b + 3] = hi(u[b + 1], u[b + 3]);
            }
            for g in [0, 8] {
                for i in g..g + 4 {
                    u[i] = _mm512_shuffle_f32x4::<0x88>(r[i], r[i + 4]);
                    u[i + 4] = _mm512_shuffle_f32x4::<0xdd>(r[i], r[i + 4]);
                }
            }
            for i in 0..8 {
                r[i] = _mm512_shuffle_f32x4::<0x88>(u[i], u[i + 8]);
                r[i + 8] = _mm512_shuffle_f32x4::<0xdd>(u[i], u[i + 8]);
            }
            for (i, r) in r.iter().enumerate() {
                let at = (t + i) * s.lp + j;
                _mm512_storeu_ps(keys.as_mut_ptr().add(at), _mm512_mul_ps(*r, scale));
            }
        }
    }
}

/// A block: `Σ_t a[r·a_stride + t] · b[t·b_stride + l]` for t < `n`, for
/// 8 rows r of `a` and 32 columns l of `b`, the first `to.rows` rows and
/// `to.width` columns written to `to`; with one rounding per step where
/// the CPU `fused` multiply and add.
#[inline(always)]
fn block(a: &[f32], a_stride: usize, b: &[f32], b_stride: usize, n: usize, to: Dest, fused: bool) {
    check(a, a_stride, b, b_stride, n);
    let mut acc = [[0f32; COLS]; ROWS];
    for t in 0..n {
        // SAFETY: `check` bounds every index read.
        let bt: &[f32; COLS] = unsafe { &*(b.as_ptr().add(t * b_stride) as *const [f32; COLS]) };
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: as above.
            let x = unsafe { *a.get_unchecked(r * a_stride + t) };
            if fused {
                for (acc, b) in acc.iter_mut().zip(bt) {
                    *acc = x.mul_add(*b, *acc);
                }
            } else {
                for (acc, b) in acc.iter_mut().zip(bt) {
                    *acc += x * b;
                }
            }
        }
    }
    for (r, acc) in acc.iter().enumerate().take(to.rows) {
        to.out[r * to.stride..][..to.width].copy_from_slice(&acc[..to.width]);
    }
}

/// That a block's reads stay within `a` and `b`.
#[inline(always)]
fn check(a: &[f32], a_stride: usize, b: &[f32], b_stride: usize, n: usize) {
    assert!(n > 0 && a.len() >= (ROWS - 1) * a_stride + n);
    assert!(b.len() >= (n - 1) * b_stride + COLS);
}

/// [`block`] written for AVX-512: the sums in 16 registers, each step two
/// loads of `b` and a broadcast of `a` per row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn block_avx512(a: &[f32], a_stride: usize, b: &[f32], b_stride: usize, n: usize, to: Dest) {
    use std::arch::x86_64::*;
    check(a, a_stride, b, b_stride, n);
    let mut acc = [[_mm512_setzero_ps(); 2]; ROWS];
    let (a, b) = (a.as_ptr(), b.as_ptr());
    for t in 0..n {
        let bt = b.add(t * b_stride);
        let (b0, b1) = (_mm512_loadu_ps(bt), _mm512_loadu_ps(bt.add(16)));
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = _mm512_set1_ps(*a.add(r * a_stride + t));
            acc[0] = _mm512_fmadd_ps(x, b0, acc[0]);
            acc[1] = _mm512_fmadd_ps(x, b1, acc[1]);
        }
    }
    let masks = [
        crate::tail_mask(to.width),
        crate::tail_mask(to.width.saturating_sub(16)),
    ];
    for (r, acc) in acc.iter().enumerate().take(to.rows) {
        let row = &mut to.out[r * to.stride..][..to.width];
        for (half, (acc, mask)) in acc.iter().zip(masks).enumerate() {
            if mask != 0 {
                // SAFETY: the mask stops at the row's `width` numbers.
                _mm512_mask_storeu_ps(row.as_mut_ptr().add(half * 16), mask, *acc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same, written out plainly.
    fn reference(q: &[f32], k: &[f32], v: &[f32], len: usize, heads: usize) -> Vec<f32> {
        let h = q.len() / len;
        let d = h / heads;
        let mut out = vec![0f32; q.len()];
        for head in 0..heads {
            let c = head * d;
            for i in 0..len {
                let s: Vec<f64> = (0..len)
                    .map(|j| {
                        (0..d)
                            .map(|t| q[i * h + c + t] as f64 * k[j * h + c + t] as f64)
                            .sum::<f64>()
                            / (d as f64).sqrt()
                    })
                    .collect();
                let top = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = e.iter().sum();
                for t in 0..d {
                    let sum: f64 = (0..len).map(|j| e[j] * v[j * h + c + t] as f64).sum();
                    out[i * h + c + t] = (sum / total) as f32;
                }
            }
        }
        out
    }

    #[test]
    fn every_size_gives_the_plain_sums() {
        let mut seed = 11u32;
        let mut numbers = |n, spread| crate::tests::numbers(n, &mut seed, spread);
        let mut scratch = Scratch::default();
        // Lengths around the blocks' edges; heads of 32 (MiniLM), 64 (BERT
        // base) and sizes that fill no vector.
        for (len, heads, d) in [
            (1, 12, 32),
            (7, 12, 32),
            (8, 2, 32),
            (9, 2, 32),
            (33, 12, 32),
            (100, 12, 32),
            (257, 2, 32),
            (40, 2, 64),
            (17, 3, 20),
            (5, 1, 3),
        ] {
            let n = len * heads * d;
            let (q, k, v) = (numbers(n, 3.0), numbers(n, 3.0), numbers(n, 1.0));
            // One scratch for every size, larger before smaller: nothing of
            // a call may leak into the next.
            let want = reference(&q, &k, &v, len, heads);
            let mut out = vec![f32::NAN; n];
            attend(&q, &k, &v, len, heads, &mut out, &mut scratch);
            let mut outs = vec![("this CPU's", out)];
            // And the plain code, with and without fused multiply-add.
            for fused in [true, false] {
                let mut out = vec![f32::NAN; n];
                let (lp, dp) = (len.next_multiple_of(COLS), d.next_multiple_of(COLS));
                let shape = Shape {
                    len,
                    heads,
                    d,
                    lp,
                    dp,
                };
                scratch.prepare(shape);
                let plain =
                    |a: &[f32], sa, b: &[f32], sb, n, to: Dest| block(a, sa, b, sb, n, to, fused);
                all_heads(
                    &q,
                    &k,
                    &v,
                    &mut out,
                    shape,
                    &mut scratch,
                    plain,
                    transpose_keys,
                );
                outs.push((if fused { "fused" } else { "unfused" }, out));
            }
            for (which, out) in outs {
                for (i, (g, w)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        (g - w).abs() <= 2e-5,
                        "{which}: {len}×{heads}×{d}, number {i}: {g} vs {w}"
                    );
                }
            }
        }
    }
}
