//! Checks short of running: authoring checks of one workflow ([`lint`]) and
//! everything `validate`, `run` and `serve` verify before they start
//! ([`verify`]: sub-workflows, triggers as `serve` compiles them).

pub mod lint;
pub mod verify;
