//! Trellis's spans written straight into the OTLP protobuf wire format: one
//! `ExportTraceServiceRequest` per batch, under one resource and one scope (`trellis`).
//!
//! No message structs in between: building `opentelemetry-proto`'s prost types first cost a
//! dozen heap allocations a span (ids as `Vec`s, every attribute key copied, a `Vec` of
//! key-values) and was a third of the live exporter's time (docs/benchmarks.md, "Telemetry").
//! The bytes are what prost writes for those messages — fields in tag order, proto3 defaults
//! left out — which the tests check by decoding them with `opentelemetry-proto` and encoding
//! them again. The wire primitives (keys, varints) are prost's.

use bytes::BufMut;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use crate::otlp_json::Resource;
use crate::semconv;
use crate::span::{Attributes, Span, SpanEvent, Status, Value, unix_nanos as nanos};

/// `STATUS_CODE_ERROR`.
const STATUS_ERROR: u64 = 2;
/// `SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`: the parent is known not to be remote.
const FLAGS_HAS_IS_REMOTE: u32 = 0x100;
/// The instrumentation scope's name.
const SCOPE: &str = "trellis";

/// The encoded length of the request carrying `spans`.
pub fn request_len(resource: &Resource, spans: &[Span]) -> usize {
    field(1, resource_spans_len(resource, spans))
}

/// Writes the request carrying `spans`, produced by `resource`, under the scope `trellis`
/// ([`request_len`] bytes).
pub fn encode_request(resource: &Resource, spans: &[Span], buf: &mut impl BufMut) {
    head(1, resource_spans_len(resource, spans), buf);
    // ResourceSpans
    let attrs = resource.attributes();
    head(1, attributes_len(1, &attrs), buf);
    put_attributes(1, &attrs, buf);
    head(2, scope_spans_len(resource, spans), buf);
    // ScopeSpans
    head(1, scope_len(resource), buf);
    put_str(1, SCOPE, buf);
    put_str(2, &resource.service_version, buf);
    for span in spans {
        head(2, span_len(span), buf);
        put_span(span, buf);
    }
    put_str(3, semconv::SCHEMA_URL, buf);
    put_str(3, semconv::SCHEMA_URL, buf);
}

fn resource_spans_len(resource: &Resource, spans: &[Span]) -> usize {
    field(1, attributes_len(1, &resource.attributes()))
        + field(2, scope_spans_len(resource, spans))
        + str_len(3, semconv::SCHEMA_URL)
}

fn scope_spans_len(resource: &Resource, spans: &[Span]) -> usize {
    field(1, scope_len(resource))
        + spans.iter().map(|s| field(2, span_len(s))).sum::<usize>()
        + str_len(3, semconv::SCHEMA_URL)
}

fn scope_len(resource: &Resource) -> usize {
    str_len(1, SCOPE) + str_len(2, &resource.service_version)
}

fn span_len(s: &Span) -> usize {
    field(1, s.trace.0.len())
        + field(2, s.id.0.len())
        + s.parent.map_or(0, |p| field(4, p.0.len()))
        + str_len(5, &s.name)
        + varint_len(6, s.kind as u64)
        + fixed64_len(7, nanos(s.start_ms))
        + fixed64_len(8, nanos(s.end_ms))
        + attributes_len(9, &s.attributes)
        + s.events
            .iter()
            .map(|e| field(11, event_len(e)))
            .sum::<usize>()
        + status_len(&s.status).map_or(0, |len| field(15, len))
        + key_len(16)
        + 4
}

fn put_span(s: &Span, buf: &mut impl BufMut) {
    put_bytes(1, &s.trace.0, buf);
    put_bytes(2, &s.id.0, buf);
    if let Some(p) = s.parent {
        put_bytes(4, &p.0, buf);
    }
    put_str(5, &s.name, buf);
    put_varint(6, s.kind as u64, buf);
    put_fixed64(7, nanos(s.start_ms), buf);
    put_fixed64(8, nanos(s.end_ms), buf);
    put_attributes(9, &s.attributes, buf);
    for e in &s.events {
        head(11, event_len(e), buf);
        put_fixed64(1, nanos(e.at_ms), buf);
        put_str(2, &e.name, buf);
        put_attributes(3, &e.attributes, buf);
    }
    if let (Some(len), Status::Error(message)) = (status_len(&s.status), &s.status) {
        head(15, len, buf);
        put_str(2, message, buf);
        put_varint(3, STATUS_ERROR, buf);
    }
    encode_key(16, WireType::ThirtyTwoBit, buf);
    buf.put_u32_le(FLAGS_HAS_IS_REMOTE);
}

fn event_len(e: &SpanEvent) -> usize {
    fixed64_len(1, nanos(e.at_ms)) + str_len(2, &e.name) + attributes_len(3, &e.attributes)
}

/// The length of a span's `Status` message, if it has one.
fn status_len(status: &Status) -> Option<usize> {
    match status {
        Status::Unset => None,
        Status::Error(message) => Some(str_len(2, message) + varint_len(3, STATUS_ERROR)),
    }
}

/// The length of `attrs` as repeated `KeyValue` field `tag`.
fn attributes_len(tag: u32, attrs: &Attributes) -> usize {
    attrs
        .iter()
        .map(|(k, v)| field(tag, key_value_len(k, v)))
        .sum()
}

fn put_attributes(tag: u32, attrs: &Attributes, buf: &mut impl BufMut) {
    for (key, value) in attrs.iter() {
        head(tag, key_value_len(key, value), buf);
        put_str(1, key, buf);
        head(2, any_value_len(value), buf);
        // `AnyValue`'s `oneof`: the field is written even at its default.
        match value {
            Value::Str(s) => {
                head(1, s.len(), buf);
                buf.put_slice(s.as_bytes());
            }
            Value::Bool(b) => {
                encode_key(2, WireType::Varint, buf);
                encode_varint(u64::from(*b), buf);
            }
            Value::Int(i) => {
                encode_key(3, WireType::Varint, buf);
                // int64: two's complement, as prost writes it.
                encode_varint(*i as u64, buf);
            }
            Value::Double(d) => {
                encode_key(4, WireType::SixtyFourBit, buf);
                buf.put_f64_le(*d);
            }
        }
    }
}

fn key_value_len(key: &str, value: &Value) -> usize {
    str_len(1, key) + field(2, any_value_len(value))
}

fn any_value_len(value: &Value) -> usize {
    match value {
        Value::Str(s) => field(1, s.len()),
        Value::Bool(_) => key_len(2) + 1,
        Value::Int(i) => key_len(3) + encoded_len_varint(*i as u64),
        Value::Double(_) => key_len(4) + 8,
    }
}

/// The length of length-delimited field `tag` holding `len` bytes.
fn field(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// The key and length of length-delimited field `tag` holding `len` bytes.
fn head(tag: u32, len: usize, buf: &mut impl BufMut) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

/// A string field (left out when empty, as proto3 does).
fn str_len(tag: u32, s: &str) -> usize {
    if s.is_empty() { 0 } else { field(tag, s.len()) }
}

fn put_str(tag: u32, s: &str, buf: &mut impl BufMut) {
    put_bytes(tag, s.as_bytes(), buf);
}

fn put_bytes(tag: u32, bytes: &[u8], buf: &mut impl BufMut) {
    if !bytes.is_empty() {
        head(tag, bytes.len(), buf);
        buf.put_slice(bytes);
    }
}

fn varint_len(tag: u32, v: u64) -> usize {
    if v == 0 {
        0
    } else {
        key_len(tag) + encoded_len_varint(v)
    }
}

fn put_varint(tag: u32, v: u64, buf: &mut impl BufMut) {
    if v != 0 {
        encode_key(tag, WireType::Varint, buf);
        encode_varint(v, buf);
    }
}

fn fixed64_len(tag: u32, v: u64) -> usize {
    if v == 0 { 0 } else { key_len(tag) + 8 }
}

fn put_fixed64(tag: u32, v: u64, buf: &mut impl BufMut) {
    if v != 0 {
        encode_key(tag, WireType::SixtyFourBit, buf);
        buf.put_u64_le(v);
    }
}
