//! Spans as an OTLP/JSON `ExportTraceServiceRequest`: the body a collector's
//! `POST /v1/traces` accepts with `Content-Type: application/json`, and the file format
//! of the collector's file exporter and `otel-cli`/`otel-desktop-viewer` imports.
//!
//! The JSON mapping of the protobuf types, as the OTLP specification fixes it: ids are
//! lower-case hex (not base64), 64-bit integers (times, `intValue`) are decimal strings,
//! enums are integers, field names lowerCamelCase, and fields at their default are left out.

use serde_json::{Map, Value as Json, json};

use crate::semconv;
use crate::span::{Attributes, Span, Status, Value, unix_nanos};

/// What produced the spans: the resource and instrumentation scope of the request.
#[derive(Clone, Debug)]
pub struct Resource {
    /// `service.name` (`trellis`).
    pub service_name: String,
    /// `service.version`.
    pub service_version: String,
}

impl Default for Resource {
    fn default() -> Self {
        Self {
            service_name: "trellis".to_owned(),
            service_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

impl Resource {
    /// The resource's attributes: `service.name`, `service.version`.
    pub fn attributes(&self) -> Attributes {
        let mut attrs = Attributes::default();
        attrs.set(semconv::SERVICE_NAME, self.service_name.as_str());
        attrs.set(semconv::SERVICE_VERSION, self.service_version.as_str());
        attrs
    }
}

/// The request carrying `spans`, all under one resource and one scope (`trellis`).
pub fn export_request(resource: &Resource, spans: &[Span]) -> Json {
    let res = resource.attributes();
    json!({
        "resourceSpans": [{
            "resource": { "attributes": attributes(&res) },
            "scopeSpans": [{
                "scope": { "name": "trellis", "version": resource.service_version },
                "spans": spans.iter().map(span).collect::<Vec<_>>(),
                "schemaUrl": semconv::SCHEMA_URL,
            }],
            "schemaUrl": semconv::SCHEMA_URL,
        }]
    })
}

fn span(s: &Span) -> Json {
    let mut o = Map::new();
    o.insert("traceId".into(), s.trace.hex().into());
    o.insert("spanId".into(), s.id.hex().into());
    if let Some(p) = s.parent {
        o.insert("parentSpanId".into(), p.hex().into());
    }
    o.insert("name".into(), s.name.clone().into());
    o.insert("kind".into(), (s.kind as i64).into());
    o.insert("startTimeUnixNano".into(), nanos(s.start_ms).into());
    o.insert("endTimeUnixNano".into(), nanos(s.end_ms).into());
    if !s.attributes.is_empty() {
        o.insert("attributes".into(), attributes(&s.attributes));
    }
    if !s.events.is_empty() {
        let events = s
            .events
            .iter()
            .map(|e| {
                let mut ev = Map::new();
                ev.insert("timeUnixNano".into(), nanos(e.at_ms).into());
                ev.insert("name".into(), e.name.clone().into());
                if !e.attributes.is_empty() {
                    ev.insert("attributes".into(), attributes(&e.attributes));
                }
                Json::Object(ev)
            })
            .collect();
        o.insert("events".into(), Json::Array(events));
    }
    if let Status::Error(message) = &s.status {
        // STATUS_CODE_ERROR = 2.
        o.insert("status".into(), json!({ "message": message, "code": 2 }));
    }
    Json::Object(o)
}

fn attributes(attrs: &Attributes) -> Json {
    attrs
        .iter()
        .map(|(key, v)| json!({ "key": key, "value": any_value(v) }))
        .collect()
}

fn any_value(v: &Value) -> Json {
    match v {
        Value::Str(s) => json!({ "stringValue": s }),
        Value::Int(i) => json!({ "intValue": i.to_string() }),
        Value::Double(d) => json!({ "doubleValue": d }),
        Value::Bool(b) => json!({ "boolValue": b }),
    }
}

/// Milliseconds since the epoch as OTLP/JSON's decimal nanoseconds.
fn nanos(ms: i64) -> String {
    unix_nanos(ms).to_string()
}
