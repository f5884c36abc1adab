//! Trellis's spans as the OTLP protobuf messages (`opentelemetry-proto`'s prost types): one
//! `ExportTraceServiceRequest` per batch, under one resource and one scope, each span's
//! strings moved into it.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource as ProtoResource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status as ProtoStatus};
use opentelemetry_proto::tonic::trace::v1::{Span as ProtoSpan, span::Event};

use crate::otlp_json::Resource;
use crate::semconv;
use crate::span::{Attributes, Span, Status, Value, unix_nanos as nanos};

/// `STATUS_CODE_ERROR`.
const STATUS_ERROR: i32 = 2;
/// `SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`: the parent is known not to be remote.
const FLAGS_HAS_IS_REMOTE: u32 = 0x100;

/// The request carrying `spans`, produced by `resource`, under the scope `trellis`.
pub fn export_request(resource: &Resource, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(self::resource(resource)),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "trellis".to_owned(),
                    version: resource.service_version.clone(),
                    ..Default::default()
                }),
                spans: spans.into_iter().map(span).collect(),
                schema_url: semconv::SCHEMA_URL.to_owned(),
            }],
            schema_url: semconv::SCHEMA_URL.to_owned(),
        }],
    }
}

/// The resource: `service.name` and `service.version`.
pub(crate) fn resource(resource: &Resource) -> ProtoResource {
    let mut res = Attributes::default();
    res.set(semconv::SERVICE_NAME, resource.service_name.as_str());
    res.set(semconv::SERVICE_VERSION, resource.service_version.as_str());
    ProtoResource {
        attributes: key_values(res),
        ..Default::default()
    }
}

fn span(s: Span) -> ProtoSpan {
    ProtoSpan {
        trace_id: s.trace.0.to_vec(),
        span_id: s.id.0.to_vec(),
        parent_span_id: s.parent.map(|p| p.0.to_vec()).unwrap_or_default(),
        flags: FLAGS_HAS_IS_REMOTE,
        name: s.name,
        kind: s.kind as i32,
        start_time_unix_nano: nanos(s.start_ms),
        end_time_unix_nano: nanos(s.end_ms),
        attributes: key_values(s.attributes),
        events: s
            .events
            .into_iter()
            .map(|e| Event {
                time_unix_nano: nanos(e.at_ms),
                name: e.name,
                attributes: key_values(e.attributes),
                dropped_attributes_count: 0,
            })
            .collect(),
        status: match s.status {
            Status::Unset => None,
            Status::Error(message) => Some(ProtoStatus {
                message,
                code: STATUS_ERROR,
            }),
        },
        ..Default::default()
    }
}

fn key_values(attrs: Attributes) -> Vec<KeyValue> {
    attrs
        .into_iter()
        .map(|(key, v)| KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(match v {
                    Value::Str(s) => any_value::Value::StringValue(s),
                    Value::Int(i) => any_value::Value::IntValue(i),
                    Value::Double(d) => any_value::Value::DoubleValue(d),
                    Value::Bool(b) => any_value::Value::BoolValue(b),
                }),
            }),
            ..Default::default()
        })
        .collect()
}
