//! `marktoflow test`: workflows tested like code. A test file
//! (`NAME.test.md`, [`spec`]) holds cases — inputs, mocks standing in for
//! actions ([`mocks`]), expectations — each run with no run store, no key
//! and no network unless `--live` ([`run`]); outcomes are printed and
//! written as JUnit XML ([`junit`]).

pub mod eval;
pub mod junit;
pub mod mocks;
pub mod record;
pub mod replay;
pub mod run;
pub mod spec;
pub mod staged;
