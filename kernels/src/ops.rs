//! The encoder's element-wise steps: activations, layer norm, softmax.
//! Each loop is written so that it runs 16 lanes at a time where the CPU
//! has AVX-512 (the same code compiled for it, chosen when it runs), with
//! polynomials instead of library calls for erf and exp.

/// A BERT activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// `gelu`: the exact one, with erf.
    Gelu,
    /// `gelu_new` / `gelu_pytorch_tanh`: the tanh approximation.
    GeluTanh,
    Relu,
}

/// `act` on every number of `x`.
pub fn activate(act: Act, x: &mut [f32]) {
    wide(|| activate_part(act, x))
}

/// Each row of `x` (rows of `w.len()`): plus the same row of `residual` if
/// given, then layer norm with weights `w`, biases `b`.
pub fn add_norm(x: &mut [f32], residual: Option<&[f32]>, w: &[f32], b: &[f32], eps: f32) {
    let h = w.len();
    assert!(h > 0 && b.len() == h && x.len().is_multiple_of(h));
    assert!(residual.is_none_or(|r| r.len() == x.len()));
    wide(|| {
        for (j, row) in x.chunks_exact_mut(h).enumerate() {
            if let Some(r) = residual {
                row.iter_mut()
                    .zip(&r[j * h..(j + 1) * h])
                    .for_each(|(v, r)| *v += r);
            }
            let n = row.len() as f32;
            let mean = lanes_sum(row, |v| v) / n;
            let var = lanes_sum(row, |v| (v - mean) * (v - mean)) / n;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(w).zip(b) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    })
}

/// Runs `f` compiled for AVX-512 where the CPU has it, so that its loops
/// (inlined here) run 16 lanes at a time; elsewhere as it is.
#[inline(always)]
fn wide<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the feature.
            return unsafe { avx512(f) };
        }
    }
    f()
}

/// The sum of `f` over `row`, in sixteen running sums (one vector's lanes).
#[inline(always)]
fn lanes_sum(row: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 16];
    let mut parts = row.chunks_exact(16);
    for part in &mut parts {
        acc.iter_mut().zip(part).for_each(|(a, &v)| *a += f(v));
    }
    acc.iter().sum::<f32>() + parts.remainder().iter().map(|&v| f(v)).sum::<f32>()
}

#[inline(always)]
pub(crate) fn activate_part(act: Act, x: &mut [f32]) {
    match act {
        Act::Gelu => x
            .iter_mut()
            .for_each(|v| *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2))),
        Act::GeluTanh => x.iter_mut().for_each(|v| {
            let u = 0.797_884_6 * (*v + 0.044_715 * *v * *v * *v);
            *v = 0.5 * *v * (1.0 + u.tanh())
        }),
        Act::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
    }
}

/// erf as a ratio of two polynomials on [−4, 4] (±1 beyond, in f32):
/// within 5e-7 of the exact one, and unlike a library call it runs 16
/// lanes at a time. The coefficients are the usual minimax fit (as in Eigen).
#[inline(always)]
fn erf(a: f32) -> f32 {
    let x = a.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p - 2.101_024e-6;
    p = x2 * p - 5.692_506_4e-5;
    p = x2 * p - 7.349_906_3e-4;
    p = x2 * p - 2.9546e-3;
    p = x2 * p - 1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 - 2.133_740_6e-4;
    q = x2 * q - 1.682_827e-3;
    q = x2 * q - 7.373_329e-3;
    q = x2 * q - 1.426_474e-2;
    x * p / q
}

/// Softmax of `row`, in place.
pub(crate) fn softmax_row(row: &mut [f32]) {
    if row.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has the feature.
        return unsafe { softmax_avx512(row) };
    }
    softmax(row)
}

/// [`softmax`] sixteen at a time, the row's tail masked.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_avx512(row: &mut [f32]) {
    use std::arch::x86_64::*;
    let (n, p) = (row.len(), row.as_mut_ptr());
    let mask = |i: usize| crate::tail_mask(n - i);
    let low = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut top = low;
    for i in (0..n).step_by(16) {
        top = _mm512_max_ps(top, _mm512_mask_loadu_ps(low, mask(i), p.add(i)));
    }
    let max = _mm512_set1_ps(_mm512_reduce_max_ps(top));
    let mut sum = _mm512_setzero_ps();
    for i in (0..n).step_by(16) {
        let m = mask(i);
        let x = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, p.add(i)), max);
        // e^x as in `exp_le0`: 2^k · e^r, the 2^k by `vscalefps`.
        let x = _mm512_max_ps(x, _mm512_set1_ps(-87.0));
        let k = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E)),
        );
        let r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693_145_75), x);
        let r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.428_606_8e-6), r);
        let mut e = _mm512_set1_ps(1.0 / 720.0);
        for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
            e = _mm512_fmadd_ps(e, r, _mm512_set1_ps(c));
        }
        let e = _mm512_scalef_ps(e, k);
        sum = _mm512_mask_add_ps(sum, m, sum, e);
        _mm512_mask_storeu_ps(p.add(i), m, e);
    }
    let inv = _mm512_set1_ps(1.0 / _mm512_reduce_add_ps(sum));
    for i in (0..n).step_by(16) {
        let m = mask(i);
        _mm512_mask_storeu_ps(
            p.add(i),
            m,
            _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p.add(i)), inv),
        );
    }
}

#[inline(always)]
fn softmax(row: &mut [f32]) {
    let mut top = [f32::NEG_INFINITY; 16];
    let mut parts = row.chunks_exact(16);
    for part in &mut parts {
        top.iter_mut()
            .zip(part)
            .for_each(|(t, &v)| *t = if v > *t { v } else { *t });
    }
    let max = top
        .iter()
        .chain(parts.remainder())
        .fold(f32::NEG_INFINITY, |a, &v| a.max(v));
    row.iter_mut().for_each(|v| *v = exp_le0(*v - max));
    let inv = 1.0 / lanes_sum(row, |v| v);
    row.iter_mut().for_each(|v| *v *= inv);
}

/// e^x for x ≤ 0 (a score minus the row's largest): 2^n · e^r with
/// |r| ≤ ln 2 / 2 and a degree-6 polynomial, within 4e-7 relative; below
/// −87 it is e^−87, nothing next to the row's largest term (1).
#[inline(always)]
fn exp_le0(x: f32) -> f32 {
    let x = x.clamp(-87.0, 0.0);
    let n = (x * std::f32::consts::LOG2_E).round_ties_even();
    // ln 2 in two parts, so that n · ln 2 is subtracted without rounding.
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_4e7_of_the_library_one() {
        for i in 0..=900_000 {
            let x = -(i as f32) / 10_000.0;
            let (got, want) = (exp_le0(x), x.max(-87.0).exp());
            assert!((got - want).abs() <= 4e-7 * want, "{x}: {got} vs {want}");
        }
        let mut row = [1.0, 2.0, 3.0, f32::NEG_INFINITY];
        softmax(&mut row);
        let want = [0.090_030_57, 0.244_728_48, 0.665_240_94, 0.0];
        assert!(
            row.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6),
            "{row:?}"
        );
        // Rows of every tail length, the vector way against the plain one.
        for len in [1, 5, 16, 17, 40, 100] {
            let scores: Vec<f32> = (0..len * 3)
                .map(|i| ((i * 37) % 23) as f32 - 11.0)
                .collect();
            let (mut a, mut b) = (scores.clone(), scores);
            a.chunks_exact_mut(len).for_each(softmax_row);
            b.chunks_exact_mut(len).for_each(softmax);
            assert!(
                a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-6),
                "{len}"
            );
            let total: f32 = a[..len].iter().sum();
            assert!((total - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn erf_is_within_5e7_of_the_library_one() {
        let mut worst = 0f32;
        for i in -70_000..=70_000 {
            let x = i as f32 / 10_000.0;
            worst = worst.max((erf(x) - libm::erff(x)).abs());
        }
        assert!(worst < 5e-7, "{worst}");
        assert_eq!(erf(0.0), 0.0);
        assert!((erf(f32::INFINITY) - 1.0).abs() < 5e-7);
    }

    #[test]
    fn layer_norm_of_a_row_plus_its_residual() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0];
        let residual = vec![0.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0, 9.0];
        add_norm(&mut x, Some(&residual), &[1.0; 4], &[0.5; 4], 1e-12);
        // Row one: mean 2.5, variance 1.25.
        let want = [-1.341_640_8, -0.447_213_6, 0.447_213_6, 1.341_640_8];
        for (g, w) in x[..4].iter().zip(want) {
            assert!((g - (w + 0.5)).abs() < 1e-5, "{x:?}");
        }
        // Row two is its residual's: three equal, one above.
        assert!(x[4] == x[5] && x[5] == x[6] && x[7] > x[4]);
        let mut g = vec![-1.0, 0.0, 1.0];
        activate(Act::Relu, &mut g);
        assert_eq!(g, [0.0, 0.0, 1.0]);
        let mut g = vec![-1.0, 0.0, 1.0];
        activate(Act::Gelu, &mut g);
        assert!(
            (g[0] + 0.158_655_3).abs() < 1e-6 && g[1] == 0.0 && (g[2] - 0.841_344_7).abs() < 1e-6
        );
    }
}
