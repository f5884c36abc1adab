//! Trellis's spans as the OpenTelemetry SDK's [`SpanData`], so any SDK exporter (OTLP over
//! HTTP or gRPC, the in-memory one of tests) can send them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Event, SpanContext, SpanId as OtelSpanId, SpanKind as OtelKind, Status as OtelStatus,
    TraceFlags, TraceId as OtelTraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use crate::span::{Attributes, Span, SpanKind, Status, Value};

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
