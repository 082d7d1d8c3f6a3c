//! Span and trace ids: random, except where a run's span must have the id
//! its run id gives it, so that the run's later parts (after a wait, a
//! crash or a retry) find it again without storing it anywhere.

use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use sha2::{Digest, Sha256};
use std::cell::Cell;

thread_local! {
    /// The ids the next span started on this thread takes (see [`pinned`]).
    static NEXT: Cell<(Option<TraceId>, Option<SpanId>)> = const { Cell::new((None, None)) };
}

/// The ids of a run's first span: its trace (unless a caller's trace
/// holds it) and its span, derived from the run's id.
pub(super) fn trace_of(run_id: &str) -> TraceId {
    let d = Sha256::digest(format!("marktoflow trace {run_id}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[15] |= 1; // never the invalid all-zero id
    TraceId::from_bytes(b)
}

pub(super) fn span_of(run_id: &str) -> SpanId {
    let d = Sha256::digest(format!("marktoflow run span {run_id}").as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    b[7] |= 1;
    SpanId::from_bytes(b)
}

/// Runs `start` (which starts one span) with the ids that span takes:
/// `trace` when it has no parent, `span` as its own.
pub(super) fn pinned<T>(trace: Option<TraceId>, span: SpanId, start: impl FnOnce() -> T) -> T {
    NEXT.with(|n| n.set((trace, Some(span))));
    let out = start();
    NEXT.with(|n| n.set((None, None)));
    out
}

#[derive(Debug)]
pub(super) struct RunIds;

impl IdGenerator for RunIds {
    fn new_trace_id(&self) -> TraceId {
        let (trace, span) = NEXT.with(|n| n.get());
        NEXT.with(|n| n.set((None, span)));
        trace.unwrap_or_else(|| RandomIdGenerator::default().new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        let (trace, span) = NEXT.with(|n| n.get());
        NEXT.with(|n| n.set((trace, None)));
        span.unwrap_or_else(|| RandomIdGenerator::default().new_span_id())
    }
}
