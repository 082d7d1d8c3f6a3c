//! Numeric kernels of the embedding encoder, in a crate of their own so
//! that they are compiled optimised in every build: the tests embed real
//! notes with them, and unoptimised SIMD code is tens of times slower.

pub mod attention;
pub mod ops;
pub mod q8;

/// The mask of a 16-lane vector that holds the `left` numbers still to do
/// (all lanes when 16 or more).
#[inline(always)]
pub(crate) fn tail_mask(left: usize) -> u16 {
    if left >= 16 {
        u16::MAX
    } else {
        (1u16 << left) - 1
    }
}

#[cfg(test)]
pub(crate) mod tests {
    /// `n` numbers spread evenly over ±`spread`, the same for the same seed.
    pub fn numbers(n: usize, seed: &mut u32, spread: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (((*seed >> 8) % 20_001) as f32 / 10_000.0 - 1.0) * spread
            })
            .collect()
    }
}
