//! Int8 linear layers for the encoder, where the CPU has AVX-512 VNNI.
//!
//! Each weight row (one output) is quantized to i8 with its own scale when
//! the model loads; each input row (one token) to u8 with its own scale and
//! zero point as it runs; the products are summed exactly in i32 by
//! `vpdpbusd`, which does 64 multiply-adds per instruction: four times what
//! f32 FMA does on the same core. Embedding a vault is almost all these
//! products. Per-row scales keep the error small: the vectors stay within
//! 0.01 of the f32 encoder's on the retrieval benchmarks (see
//! `docs/benchmarks.md`). Elsewhere the encoder stays f32.

use crate::ops::Act;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Outputs per register (16 i32 lanes), registers per panel, outputs per panel.
const LANES: usize = 16;
const NR: usize = 4;
const PANEL: usize = LANES * NR;
/// Rows per micro-kernel: 6 × 4 accumulators, 4 weight registers and the
/// broadcast input fit in the 32 vector registers.
const MR: usize = 6;

/// Whether this CPU runs the int8 layers (checked once).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vnni")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether a layer of `k` inputs fits: its sums, at most 255 · 127 · k,
/// must stay within i32.
pub fn fits(k: usize) -> bool {
    k <= 65_536
}

/// Rows of inputs quantized to u8, each with its own scale and zero point
/// (`x ≈ s · (q − z)`): done once for all the layers that read the same
/// rows (query, key and value). Kept between calls, so that its room is
/// reused.
#[derive(Default)]
pub struct Input {
    k: usize,
    q: Vec<u8>,
    /// Each row's scale and zero point.
    params: Vec<Params>,
}

/// A row's scale and zero point.
type Params = (f32, i32);

impl Input {
    /// `x`: rows of `k` numbers.
    pub fn new(x: &[f32], k: usize) -> Input {
        let mut input = Input::default();
        input.set(x, k);
        input
    }

    /// Quantizes `x` (rows of `k` numbers) in place of what was here.
    pub fn set(&mut self, x: &[f32], k: usize) {
        assert!(available(), "int8 layers need AVX-512 VNNI");
        assert!(k > 0 && x.len().is_multiple_of(k));
        let m = x.len() / k;
        let kp = k.div_ceil(4) * 4;
        self.k = k;
        // Zeroed, so that the padding to kp is zero; the rest is written
        // below.
        self.q.clear();
        self.q.resize(m * kp, 0);
        self.params.clear();
        self.params.resize(m, (0.0, 0));
        for ((x, q), p) in x
            .chunks_exact(k)
            .zip(self.q.chunks_exact_mut(kp))
            .zip(&mut self.params)
        {
            // SAFETY: `available` checked the CPU's features.
            *p = unsafe { quantize_row(x, &mut q[..k]) };
        }
    }

    fn rows(&self) -> usize {
        self.params.len()
    }
}

/// `x · Wᵀ + b` with W quantized: n outputs of k inputs.
pub struct Linear {
    n: usize,
    k: usize,
    /// k rounded up to a multiple of 4 (one `vpdpbusd` step).
    kp: usize,
    panels: usize,
    /// Panel by panel, then 4 inputs at a time: `[panel][k/4][NR][LANES][4]`.
    w: Vec<i8>,
    /// Per output, padded to whole panels with zeros.
    scale: Vec<f32>,
    /// Σ of each output's quantized weights (for the inputs' zero points).
    sum: Vec<i32>,
    bias: Vec<f32>,
}

impl Linear {
    /// Quantizes `w` (n × k, row-major: one row per output) and keeps `b`.
    pub fn new(w: &[f32], b: &[f32], n: usize, k: usize) -> Linear {
        assert!(w.len() == n * k && b.len() == n && n > 0 && k > 0 && fits(k));
        let kp = k.div_ceil(4) * 4;
        let panels = n.div_ceil(PANEL);
        let mut packed = vec![0i8; panels * PANEL * kp];
        let mut scale = vec![0f32; panels * PANEL];
        let mut sum = vec![0i32; panels * PANEL];
        let mut bias = vec![0f32; panels * PANEL];
        for (j, row) in w.chunks_exact(k).enumerate() {
            let amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = if amax > 0.0 { amax / 127.0 } else { 1.0 };
            let (p, r) = (j / PANEL, j % PANEL);
            let (reg, lane) = (r / LANES, r % LANES);
            let mut total = 0i32;
            for (kk, v) in row.iter().enumerate() {
                let q = (v / s).round().clamp(-127.0, 127.0) as i8;
                total += q as i32;
                let at = ((p * (kp / 4) + kk / 4) * NR + reg) * (LANES * 4) + lane * 4 + kk % 4;
                packed[at] = q;
            }
            scale[j] = s;
            sum[j] = total;
            bias[j] = b[j];
        }
        Linear {
            n,
            k,
            kp,
            panels,
            w: packed,
            scale,
            sum,
            bias,
        }
    }

    /// `out = x · Wᵀ + b` for every row of `x`, then `act` on each number
    /// (while it is still in the cache); `out` becomes rows × n.
    pub fn forward(&self, x: &Input, act: Option<Act>, out: &mut Vec<f32>) {
        assert_eq!(x.k, self.k, "input rows of another width");
        // Every number is written below: the buffer is only sized.
        out.resize(x.rows() * self.n, 0.0);
        if x.rows() > 0 {
            self.rows(x, act, out);
        }
    }

    /// The outputs of every input row.
    fn rows(&self, x: &Input, act: Option<Act>, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Input::new` checked that the CPU has the features; out
        // holds a row of n for each of x's rows.
        unsafe {
            self.rows_vnni(x, act, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (x, act, out);
            unreachable!("int8 layers need AVX-512 VNNI")
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows_vnni(&self, x: &Input, act: Option<Act>, out: &mut [f32]) {
        let kp = self.kp;
        let m = out.len() / self.n;
        assert!(m <= x.rows());
        let params = &x.params[..];
        for p in 0..self.panels {
            let w = self.w.as_ptr().add(p * PANEL * kp);
            let mut r = 0;
            while r < m {
                let rows = (m - r).min(MR);
                let a = x.q.as_ptr().add(r * kp);
                let t = Tile {
                    rows: r,
                    panel: p,
                    params,
                };
                match rows {
                    6 => self.store(&t, &dot::<6>(a, kp, w), out),
                    5 => self.store(&t, &dot::<5>(a, kp, w), out),
                    4 => self.store(&t, &dot::<4>(a, kp, w), out),
                    3 => self.store(&t, &dot::<3>(a, kp, w), out),
                    2 => self.store(&t, &dot::<2>(a, kp, w), out),
                    _ => self.store(&t, &dot::<1>(a, kp, w), out),
                }
                if let Some(act) = act {
                    let cols = p * PANEL..((p + 1) * PANEL).min(self.n);
                    for row in r..r + rows {
                        let at = row * self.n;
                        crate::ops::activate_part(act, &mut out[at + cols.start..at + cols.end]);
                    }
                }
                r += rows;
            }
        }
    }

    /// Turns a tile's sums into outputs: `sx·sw·(acc − zx·Σw) + b`, the
    /// padding columns left out.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn store<const R: usize>(&self, t: &Tile, acc: &[[__m512i; NR]; R], out: &mut [f32]) {
        let n = self.n;
        for (i, acc) in acc.iter().enumerate() {
            let row = t.rows + i;
            let (sx, zx) = t.params[row];
            let (sx, zx) = (_mm512_set1_ps(sx), _mm512_set1_epi32(zx));
            for (c, acc) in acc.iter().enumerate() {
                let j = t.panel * PANEL + c * LANES;
                if j >= n {
                    break;
                }
                let sum = _mm512_loadu_si512(self.sum.as_ptr().add(j) as *const _);
                let scale = _mm512_loadu_ps(self.scale.as_ptr().add(j));
                let bias = _mm512_loadu_ps(self.bias.as_ptr().add(j));
                let v = _mm512_cvtepi32_ps(_mm512_sub_epi32(*acc, _mm512_mullo_epi32(zx, sum)));
                let f = _mm512_fmadd_ps(v, _mm512_mul_ps(scale, sx), bias);
                let mask = crate::tail_mask(n - j);
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(row * n + j), mask, f);
            }
        }
    }
}

/// Where a tile of sums goes: its first row and its panel, and the rows'
/// input scales and zero points.
struct Tile<'a> {
    rows: usize,
    panel: usize,
    params: &'a [Params],
}

/// `R` rows of u8 inputs (stride `kp`) times one panel of weights: the
/// i32 sums, 64 outputs per row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn dot<const R: usize>(a: *const u8, kp: usize, w: *const i8) -> [[__m512i; NR]; R] {
    let mut acc = [[_mm512_setzero_si512(); NR]; R];
    for s in 0..kp / 4 {
        let wp = w.add(s * PANEL * 4) as *const __m512i;
        let b = [
            _mm512_loadu_si512(wp),
            _mm512_loadu_si512(wp.add(1)),
            _mm512_loadu_si512(wp.add(2)),
            _mm512_loadu_si512(wp.add(3)),
        ];
        for (r, acc) in acc.iter_mut().enumerate() {
            let four = (a.add(r * kp + s * 4) as *const i32).read_unaligned();
            let x = _mm512_set1_epi32(four);
            for (acc, b) in acc.iter_mut().zip(b) {
                *acc = _mm512_dpbusd_epi32(*acc, x, b);
            }
        }
    }
    acc
}

/// One row to u8 with a zero point: `x ≈ s · (q − z)`; the range always
/// holds 0, so a zero stays exactly zero.
///
/// The same as [`quantize`], sixteen at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn quantize_row(x: &[f32], q: &mut [u8]) -> (f32, i32) {
    let n = x.len().min(q.len());
    let mask = |i: usize| crate::tail_mask(n - i);
    let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    for i in (0..n).step_by(LANES) {
        let v = _mm512_maskz_loadu_ps(mask(i), x.as_ptr().add(i));
        lo = _mm512_min_ps(v, lo);
        hi = _mm512_max_ps(v, hi);
    }
    let (lo, hi) = (_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi));
    let (s, z, inv) = range(lo, hi);
    let (inv, zf) = (_mm512_set1_ps(inv), _mm512_set1_ps(z));
    let (zero, top) = (_mm512_setzero_ps(), _mm512_set1_ps(255.0));
    for i in (0..n).step_by(LANES) {
        let m = mask(i);
        let v = _mm512_maskz_loadu_ps(m, x.as_ptr().add(i));
        let v = _mm512_add_ps(_mm512_mul_ps(v, inv), zf);
        // NaN becomes 0, as `quantize` makes it.
        let v = _mm512_min_ps(_mm512_max_ps(v, zero), top);
        let v = _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
        _mm512_mask_cvtepi32_storeu_epi8(q.as_mut_ptr().add(i) as *mut _, m, v);
    }
    (s, z as i32)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn quantize_row(x: &[f32], q: &mut [u8]) -> (f32, i32) {
    quantize(x, q)
}

#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline(always)]
fn quantize(x: &[f32], q: &mut [u8]) -> (f32, i32) {
    // Sixteen running minima and maxima, so that the loop is one vector's.
    let (mut lo, mut hi) = ([0f32; LANES], [0f32; LANES]);
    let mut parts = x.chunks_exact(LANES);
    for part in &mut parts {
        for ((lo, hi), &v) in lo.iter_mut().zip(&mut hi).zip(part) {
            *lo = if v < *lo { v } else { *lo };
            *hi = if v > *hi { v } else { *hi };
        }
    }
    let tail = parts.remainder();
    let lo = lo.iter().chain(tail).fold(0f32, |a, &v| a.min(v));
    let hi = hi.iter().chain(tail).fold(0f32, |a, &v| a.max(v));
    let (s, z, inv) = range(lo, hi);
    for (q, v) in q.iter_mut().zip(x) {
        *q = (v * inv + z).round_ties_even().clamp(0.0, 255.0) as u8;
    }
    (s, z as i32)
}

/// A row's scale, zero point and 1 / scale from its least and greatest
/// numbers (0 always in the range, so a zero stays exactly zero).
#[inline(always)]
fn range(lo: f32, hi: f32) -> (f32, f32, f32) {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let s = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
    let z = (-lo / s).round_ties_even().clamp(0.0, 255.0);
    (s, z, 1.0 / s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::numbers;

    /// The same quantized sums done one by one: what the kernel must give
    /// exactly, before the float scaling.
    fn reference(l: &Linear, x: &[f32]) -> Vec<f32> {
        let mut out = Vec::new();
        for row in x.chunks_exact(l.k) {
            let mut q = vec![0u8; l.k];
            let (s, z) = quantize(row, &mut q);
            for j in 0..l.n {
                let (p, r) = (j / PANEL, j % PANEL);
                let mut acc = 0i32;
                for (kk, &qv) in q.iter().enumerate() {
                    let at = ((p * (l.kp / 4) + kk / 4) * NR + r / LANES) * (LANES * 4)
                        + (r % LANES) * 4
                        + kk % 4;
                    acc += qv as i32 * l.w[at] as i32;
                }
                out.push((acc - z * l.sum[j]) as f32 * (l.scale[j] * s) + l.bias[j]);
            }
        }
        out
    }

    #[test]
    fn the_kernel_gives_the_exact_sums_and_stays_near_f32() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI");
            return;
        }
        let mut seed = 7;
        // Odd sizes: rows not a multiple of 6, outputs not of 64, inputs not of 4.
        for (m, n, k) in [
            (1, 384, 384),
            (13, 100, 37),
            (7, 64, 4),
            (40, 1536, 384),
            (500, 384, 1536),
        ] {
            let w = numbers(n * k, &mut seed, 0.2);
            let b = numbers(n, &mut seed, 0.5);
            let x = numbers(m * k, &mut seed, 3.0);
            let l = Linear::new(&w, &b, n, k);
            let mut got = Vec::new();
            l.forward(&Input::new(&x, k), None, &mut got);
            assert_eq!(got.len(), m * n);
            // The activation while the outputs are in the cache: the same
            // numbers as after.
            let mut activated = Vec::new();
            l.forward(&Input::new(&x, k), Some(Act::Gelu), &mut activated);
            let mut after = got.clone();
            crate::ops::activate(Act::Gelu, &mut after);
            assert_eq!(activated, after, "{m}×{n}×{k}");
            let want = reference(&l, &x);
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                    "{g} vs {w} ({m}×{n}×{k})"
                );
            }
            // And near the f32 product.
            let mut worst = 0f32;
            let mut norm = 0f32;
            for (i, xr) in x.chunks_exact(k).enumerate() {
                for (j, wr) in w.chunks_exact(k).enumerate() {
                    let f: f32 = xr.iter().zip(wr).map(|(a, b)| a * b).sum::<f32>() + b[j];
                    worst = worst.max((f - got[i * n + j]).abs());
                    norm = norm.max(f.abs());
                }
            }
            assert!(worst <= 0.02 * norm, "{m}×{n}×{k}: error {worst} of {norm}");
        }
    }

    #[test]
    fn zeros_stay_zero_and_a_constant_row_is_kept() {
        if available() {
            // The vector version gives the same bytes.
            let mut seed = 3;
            for n in [1, 15, 16, 17, 384, 1000] {
                let mut x = numbers(n, &mut seed, 4.0);
                x[n / 2] = f32::NAN;
                let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
                // SAFETY: the CPU has the features.
                let got = unsafe { quantize_row(&x, &mut a) };
                assert_eq!(got, quantize(&x, &mut b));
                assert_eq!(a, b, "{n}");
            }
        }
        let mut q = [0u8; 4];
        let (s, z) = quantize(&[0.0, 0.0, 0.0, 0.0], &mut q);
        assert!(q.iter().all(|&v| (v as i32 - z) as f32 * s == 0.0));
        let (s, z) = quantize(&[2.0, 2.0, 0.0, 2.0], &mut q);
        let back: Vec<f32> = q.iter().map(|&v| (v as i32 - z) as f32 * s).collect();
        assert_eq!(back, [2.0, 2.0, 0.0, 2.0]);
        let (s, z) = quantize(&[-1.0, 1.0, 0.0, 0.5], &mut q);
        let back: Vec<f32> = q.iter().map(|&v| (v as i32 - z) as f32 * s).collect();
        assert!(
            back.iter()
                .zip([-1.0, 1.0, 0.0, 0.5])
                .all(|(a, b)| (a - b).abs() <= s / 2.0 + 1e-6),
            "{back:?}"
        );
        assert_eq!(back[2], 0.0);
    }
}
