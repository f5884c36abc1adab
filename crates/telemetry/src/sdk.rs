//! Trellis's spans as the OpenTelemetry SDK's [`SpanData`], so any SDK span exporter (the
//! in-memory one of tests, a vendor's) can take the live pipeline's batches: [`SdkSink`].
//! The OTLP exporters of [`crate::otlp`] do not go through it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Event, SpanContext, SpanId as OtelSpanId, SpanKind as OtelKind, Status as OtelStatus,
    TraceFlags, TraceId as OtelTraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};

use crate::otlp::SpanSink;
use crate::otlp_json::Resource as Producer;
use crate::span::{Attributes, Span, SpanKind, Status, Value};
use crate::{Error, Result};

/// An SDK span exporter as the live pipeline's sink.
pub struct SdkSink<X> {
    exporter: X,
    scope: InstrumentationScope,
    resource_set: bool,
}

impl<X: SpanExporter + 'static> SdkSink<X> {
    /// Sends the pipeline's batches to `exporter`.
    pub fn new(exporter: X) -> Self {
        Self {
            exporter,
            scope: scope(),
            resource_set: false,
        }
    }
}

impl<X: SpanExporter + 'static> SpanSink for SdkSink<X> {
    async fn export(&mut self, resource: &Producer, spans: Vec<Span>) -> Result<()> {
        if !self.resource_set {
            self.exporter.set_resource(&sdk_resource(resource));
            self.resource_set = true;
        }
        let batch = spans
            .into_iter()
            .map(|s| span_data(s, &self.scope))
            .collect();
        self.exporter
            .export(batch)
            .await
            .map_err(|e| Error::Exporter(e.to_string()))
    }
}

fn sdk_resource(resource: &Producer) -> Resource {
    Resource::builder_empty()
        .with_service_name(resource.service_name.clone())
        .with_schema_url(
            [KeyValue::new(
                crate::semconv::SERVICE_VERSION,
                resource.service_version.clone(),
            )],
            crate::semconv::SCHEMA_URL,
        )
        .build()
}

/// The scope every span is reported under.
pub fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("trellis")
        .with_version(env!("CARGO_PKG_VERSION"))
        .with_schema_url(crate::semconv::SCHEMA_URL)
        .build()
}

/// `span` as SDK span data under `scope`.
pub fn span_data(span: Span, scope: &InstrumentationScope) -> SpanData {
    let context = SpanContext::new(
        OtelTraceId::from_bytes(span.trace.0),
        OtelSpanId::from_bytes(span.id.0),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    let mut events = SpanEvents::default();
    events.events = span
        .events
        .into_iter()
        .map(|e| Event::new(e.name, time(e.at_ms), key_values(&e.attributes), 0))
        .collect();
    SpanData {
        span_context: context,
        parent_span_id: span
            .parent
            .map_or(OtelSpanId::INVALID, |p| OtelSpanId::from_bytes(p.0)),
        parent_span_is_remote: false,
        span_kind: match span.kind {
            SpanKind::Internal => OtelKind::Internal,
            SpanKind::Client => OtelKind::Client,
        },
        name: span.name.into(),
        start_time: time(span.start_ms),
        end_time: time(span.end_ms),
        attributes: key_values(&span.attributes),
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status: match span.status {
            Status::Unset => OtelStatus::Unset,
            Status::Error(message) => OtelStatus::error(message),
        },
        instrumentation_scope: scope.clone(),
    }
}

fn time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn key_values(attrs: &Attributes) -> Vec<KeyValue> {
    attrs
        .iter()
        .map(|(k, v)| match v {
            Value::Str(s) => KeyValue::new(k, s.clone()),
            Value::Int(i) => KeyValue::new(k, *i),
            Value::Double(d) => KeyValue::new(k, *d),
            Value::Bool(b) => KeyValue::new(k, *b),
        })
        .collect()
}
