//! Traces: OpenTelemetry spans of runs, their steps and their model calls,
//! sent over OTLP/HTTP (protobuf) when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. The exporter reads the
//! standard `OTEL_*` variables itself (headers, timeout, compression, the
//! batch delay); `OTEL_SERVICE_NAME` names the service (`marktoflow` when
//! unset).
//!
//! One process has one exporter, started by [`start`] at the edge (the
//! CLI) and flushed by [`Telemetry::shutdown`]; each run's spans come from
//! its events ([`RunTrace`]), so the engine knows nothing of tracing.

mod ids;
mod run;

pub use run::{Lineage, RunTrace};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::sync::OnceLock;

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Why traces cannot be sent (said once, as a warning: the runs go on).
#[derive(Debug, thiserror::Error)]
#[error("traces are not sent: {0}")]
pub struct TelemetryError(String);

/// The process's exporter, while it runs; [`Telemetry::shutdown`] sends
/// what is still queued.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Starts sending traces when `env` asks for them (`OTEL_EXPORTER_OTLP_*`
/// set, and neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`).
pub fn start(env: &dyn Fn(&str) -> Option<String>) -> Result<Telemetry, TelemetryError> {
    let off = Telemetry { provider: None };
    let asked = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|k| env(k).is_some_and(|v| !v.trim().is_empty()));
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
    if !asked || disabled {
        return Ok(off);
    }
    marktoflow_steps::core::net::install_tls();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| TelemetryError(e.to_string()))?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("marktoflow");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_id_generator(ids::RunIds)
        .with_resource(
            resource
                .with_attribute(opentelemetry::KeyValue::new(
                    "service.version",
                    env!("CARGO_PKG_VERSION"),
                ))
                .build(),
        )
        .build();
    // A second start in one process (tests) keeps the first exporter.
    let _ = PROVIDER.set(provider.clone());
    Ok(Telemetry {
        provider: Some(provider),
    })
}

impl Telemetry {
    /// Sends what is queued and stops the exporter (waits for the
    /// collector, within the exporter's timeout).
    pub fn shutdown(self) {
        if let Some(p) = self.provider {
            let _ = p.shutdown();
        }
    }
}

/// The tracer runs' spans come from, when traces are sent.
fn tracer() -> Option<SdkTracer> {
    PROVIDER.get().map(|p| p.tracer("marktoflow"))
}
