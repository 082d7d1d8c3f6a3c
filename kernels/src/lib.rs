//! Numeric kernels of the embedding encoder, in a crate of their own so
//! that they are compiled optimised in every build: the tests embed real
//! notes with them, and unoptimised SIMD code is tens of times slower.

pub mod ops;
pub mod q8;
