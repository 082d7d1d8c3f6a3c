//! Numeric kernels of the embedding encoder, in a crate of their own so
//! that they are compiled optimised in every build: the tests embed real
//! notes with them, and unoptimised SIMD code is tens of times slower.

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
