//! One run's spans, read from its events: a span for the run (for each
//! part of it: a run that waits or is retried goes on in a new span of the
//! same trace, linked to its first), one per step under it (nested as the
//! steps are), and one per model call under its step, named and described
//! by OpenTelemetry's GenAI conventions.

use super::ids;
use crate::engine::{Event, EventSink, RunEvent, RunStatus, StepStatus};
use marktoflow_steps::core::action::hosts::Trace;
use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, Span};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Which part of a run a traced segment is.
#[derive(Debug, Clone, PartialEq)]
pub enum Lineage {
    /// Its first start.
    New,
    /// Going on after a wait, a pause or a crash.
    Resumed,
    /// A new run retrying run `.0` (its trace is that run's).
    RetryOf(String),
}

/// The spans of one run segment, made from its events.
pub struct RunTrace {
    tracer: SdkTracer,
    /// The run span's parent (a caller's span, or the run's first part).
    parent: Context,
    links: Vec<Link>,
    /// The run span's pinned ids (its first part only): trace, span.
    pin: Option<(Option<TraceId>, SpanId)>,
    lineage: Lineage,
    /// `webhook`, `schedule`, … (the trigger's `type`).
    trigger: Option<String>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    run: Option<Span>,
    run_cx: Context,
    /// Steps started and not finished, outermost first.
    open: Vec<Open>,
}

struct Open {
    id: String,
    depth: usize,
    kind: &'static str,
    action: Option<String>,
    span: Span,
    cx: Context,
    retries: u32,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: Option<f64>,
    model: Option<String>,
}

impl RunTrace {
    /// The trace of run `run_id`'s segment, when traces are sent. `trigger`
    /// is what started it: a webhook's `traceparent` header makes the run
    /// part of the caller's trace.
    pub fn start(run_id: &str, lineage: Lineage, trigger: &Value) -> Option<Arc<RunTrace>> {
        let tracer = super::tracer()?;
        let caller = trigger
            .pointer("/headers/traceparent")
            .and_then(Value::as_str)
            .and_then(parse_traceparent);
        // The trace the run belongs to: its caller's, or its own (the one
        // the first run of a retry chain's id gives).
        let root = match &lineage {
            Lineage::RetryOf(of) => of.as_str(),
            _ => run_id,
        };
        let trace = caller
            .as_ref()
            .map(|c| c.trace_id())
            .unwrap_or_else(|| ids::trace_of(root));
        let first = |id: &str| {
            SpanContext::new(
                trace,
                ids::span_of(id),
                TraceFlags::SAMPLED,
                true,
                TraceState::default(),
            )
        };
        let (parent, links, pin) = match &lineage {
            Lineage::New => {
                let parent = caller
                    .clone()
                    .map(|c| Context::new().with_remote_span_context(c))
                    .unwrap_or_default();
                let pin = (caller.is_none().then_some(trace), ids::span_of(run_id));
                (parent, Vec::new(), Some(pin))
            }
            // Under the run's first part, and linked to it across the gap.
            Lineage::Resumed => {
                let f = first(run_id);
                let link = Link::new(
                    f.clone(),
                    vec![KeyValue::new("marktoflow.link", "resumed")],
                    0,
                );
                (Context::new().with_remote_span_context(f), vec![link], None)
            }
            // Under the run it retries; its own first span is pinned (a
            // later part of the retry finds it).
            Lineage::RetryOf(of) => {
                let f = first(of);
                let link = Link::new(
                    f.clone(),
                    vec![KeyValue::new("marktoflow.link", "retry")],
                    0,
                );
                let parent = Context::new().with_remote_span_context(f);
                (parent, vec![link], Some((None, ids::span_of(run_id))))
            }
        };
        Some(Arc::new(RunTrace {
            tracer,
            parent,
            links,
            pin,
            lineage,
            trigger: trigger
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_string),
            state: Mutex::default(),
        }))
    }

    /// The sink that turns the run's events into spans.
    pub fn sink(self: &Arc<Self>) -> EventSink {
        let me = self.clone();
        Arc::new(move |e: &Event| me.on(e))
    }

    fn on(&self, e: &Event) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let at = time(e.at_ms);
        match &e.kind {
            RunEvent::RunStarted {
                run_id, workflow, ..
            } => {
                let segment = match &self.lineage {
                    Lineage::New => "first",
                    Lineage::Resumed => "resumed",
                    Lineage::RetryOf(_) => "retry",
                };
                let mut attrs = vec![
                    KeyValue::new("marktoflow.run.id", run_id.clone()),
                    KeyValue::new("marktoflow.workflow", workflow.clone()),
                    KeyValue::new("marktoflow.run.segment", segment),
                ];
                if let Some(t) = &self.trigger {
                    attrs.push(KeyValue::new("marktoflow.trigger", t.clone()));
                }
                if let Lineage::RetryOf(of) = &self.lineage {
                    attrs.push(KeyValue::new("marktoflow.retry_of", of.clone()));
                }
                let kind = if self.trigger.as_deref() == Some("webhook") {
                    SpanKind::Server
                } else {
                    SpanKind::Internal
                };
                let builder = self
                    .tracer
                    .span_builder(format!("run {workflow}"))
                    .with_kind(kind)
                    .with_start_time(at)
                    .with_attributes(attrs)
                    .with_links(self.links.clone());
                let span = match self.pin {
                    Some((trace, span)) => ids::pinned(trace, span, || {
                        self.tracer.build_with_context(builder, &self.parent)
                    }),
                    None => self.tracer.build_with_context(builder, &self.parent),
                };
                st.run_cx = Context::new().with_remote_span_context(span.span_context().clone());
                st.run = Some(span);
            }
            RunEvent::StepStarted {
                id,
                name,
                depth,
                kind,
                detail,
                ..
            } => {
                let parent = st
                    .open
                    .iter()
                    .rev()
                    .find(|o| o.depth < *depth)
                    .map(|o| o.cx.clone())
                    .unwrap_or_else(|| st.run_cx.clone());
                let mut attrs = vec![
                    KeyValue::new("marktoflow.step.id", id.clone()),
                    KeyValue::new("marktoflow.step.kind", *kind),
                ];
                if let Some(a) = detail {
                    attrs.push(KeyValue::new("marktoflow.action", a.clone()));
                }
                let builder = self
                    .tracer
                    .span_builder(name.clone())
                    .with_start_time(at)
                    .with_attributes(attrs);
                let span = self.tracer.build_with_context(builder, &parent);
                let cx = Context::new().with_remote_span_context(span.span_context().clone());
                st.open.push(Open {
                    id: id.clone(),
                    depth: *depth,
                    kind,
                    action: detail.clone(),
                    span,
                    cx,
                    retries: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    cost_usd: None,
                    model: None,
                });
            }
            RunEvent::StepRetry {
                id,
                attempt,
                error,
                delay_ms,
            } => {
                if let Some(o) = st.open.iter_mut().rev().find(|o| o.id == *id) {
                    o.retries = *attempt;
                    o.span.add_event_with_timestamp(
                        "retry",
                        at,
                        vec![
                            KeyValue::new("marktoflow.attempt", i64::from(*attempt)),
                            KeyValue::new("error.message", error.clone()),
                            KeyValue::new("marktoflow.retry.delay_ms", *delay_ms as i64),
                        ],
                    );
                }
            }
            RunEvent::ModelCall {
                step,
                provider,
                model,
                input_tokens,
                output_tokens,
                cost_usd,
                duration_ms,
            } => {
                let Some(o) = st.open.iter_mut().rev().find(|o| o.id == *step) else {
                    return;
                };
                let mut attrs = vec![
                    KeyValue::new("gen_ai.operation.name", "chat"),
                    KeyValue::new("gen_ai.provider.name", provider.clone()),
                    KeyValue::new("gen_ai.system", provider.clone()),
                    KeyValue::new("gen_ai.request.model", model.clone()),
                    KeyValue::new("gen_ai.usage.input_tokens", *input_tokens as i64),
                    KeyValue::new("gen_ai.usage.output_tokens", *output_tokens as i64),
                ];
                if let Some(c) = cost_usd {
                    attrs.push(KeyValue::new("marktoflow.cost_usd", *c));
                }
                let builder = self
                    .tracer
                    .span_builder(format!("chat {model}"))
                    .with_kind(SpanKind::Client)
                    .with_start_time(at - Duration::from_millis(*duration_ms))
                    .with_attributes(attrs);
                let mut span = self.tracer.build_with_context(builder, &o.cx);
                span.end_with_timestamp(at);
                o.input_tokens += input_tokens;
                o.output_tokens += output_tokens;
                if let Some(c) = cost_usd {
                    o.cost_usd = Some(o.cost_usd.unwrap_or(0.0) + c);
                }
                o.model = Some(model.clone());
            }
            RunEvent::StepFinished {
                id,
                depth,
                status,
                error,
                inputs,
                ..
            } => {
                let Some(i) = st
                    .open
                    .iter()
                    .rposition(|o| o.id == *id && o.depth == *depth)
                else {
                    return;
                };
                let mut o = st.open.remove(i);
                o.span
                    .set_attribute(KeyValue::new("marktoflow.step.status", status.as_str()));
                o.span.set_attribute(KeyValue::new(
                    "marktoflow.step.retries",
                    i64::from(o.retries),
                ));
                if let Some(m) = &o.model {
                    o.span
                        .set_attribute(KeyValue::new("gen_ai.request.model", m.clone()));
                    o.span.set_attribute(KeyValue::new(
                        "gen_ai.usage.input_tokens",
                        o.input_tokens as i64,
                    ));
                    o.span.set_attribute(KeyValue::new(
                        "gen_ai.usage.output_tokens",
                        o.output_tokens as i64,
                    ));
                }
                if let Some(c) = o.cost_usd {
                    o.span
                        .set_attribute(KeyValue::new("marktoflow.cost_usd", c));
                }
                let http = o.kind == "action"
                    && o.action.as_deref().is_some_and(|a| a.starts_with("http."));
                if let Some(host) = inputs
                    .as_ref()
                    .filter(|_| http)
                    .and_then(|i| i.get("url"))
                    .and_then(Value::as_str)
                    .and_then(host_of)
                {
                    o.span.set_attribute(KeyValue::new("server.address", host));
                }
                if *status == StepStatus::Failed {
                    let message = error.clone().unwrap_or_default();
                    o.span.set_status(Status::error(message));
                }
                o.span.end_with_timestamp(at);
            }
            RunEvent::Waiting(w) => {
                if let Some(run) = st.run.as_mut() {
                    run.add_event_with_timestamp(
                        "waiting",
                        at,
                        vec![KeyValue::new("marktoflow.step.id", w.step_id.clone())],
                    );
                }
            }
            RunEvent::RunFinished { status, .. } => {
                // Steps a cancelled run left open end with it.
                for mut o in std::mem::take(&mut st.open).into_iter().rev() {
                    o.span.end_with_timestamp(at);
                }
                if let Some(mut run) = st.run.take() {
                    run.set_attribute(KeyValue::new("marktoflow.run.status", status.as_str()));
                    if matches!(status, RunStatus::Failed) {
                        run.set_status(Status::error("the run failed"));
                    }
                    run.end_with_timestamp(at);
                }
            }
            RunEvent::Log { .. } | RunEvent::Progress { .. } | RunEvent::Checkpoint(_) => {}
        }
    }
}

impl Trace for RunTrace {
    fn traceparent(&self, step: &str) -> Option<String> {
        let st = self.state.lock().ok()?;
        let sc = st
            .open
            .iter()
            .rev()
            .find(|o| o.id == step)
            .map(|o| o.span.span_context().clone())?;
        Some(format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        ))
    }
}

/// A W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), as a remote
/// parent; None when it is not one (an invalid header is ignored, as the
/// W3C says).
pub(super) fn parse_traceparent(h: &str) -> Option<SpanContext> {
    let parts: Vec<&str> = h.trim().split('-').collect();
    let [version, trace, span, flags, ..] = parts[..] else {
        return None;
    };
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    // Version 00 has exactly four fields.
    if version == "00" && parts.len() != 4 {
        return None;
    }
    let trace = TraceId::from_hex(&trace.to_ascii_lowercase()).ok()?;
    let span = SpanId::from_hex(&span.to_ascii_lowercase()).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let sc = SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    sc.is_valid().then_some(sc)
}

/// The host (and port) of an `http(s)://` URL.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    (!host.is_empty()).then(|| host.to_string())
}

fn time(at_ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(at_ms.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_as_the_w3c_writes_it_and_nothing_else() {
        let sc =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_sampled() && sc.is_remote());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        assert!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-later")
                .is_some(),
            "a later version may add fields"
        );
        assert_eq!(
            host_of("https://user@api.example.com:8443/x?y"),
            Some("api.example.com:8443".into())
        );
    }
}
