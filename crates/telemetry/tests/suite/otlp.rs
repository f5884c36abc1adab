//! The OTLP/JSON of a run, read back by the reference implementation of the JSON mapping
//! (opentelemetry-proto's serde types, the OpenTelemetry Rust SDK's decoder): every field
//! is one the protocol has, with the type it has, and nothing is lost on the way.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use trellis_protocol::RunStatus;
use trellis_telemetry::otlp_json::{Resource, export_request};
use trellis_telemetry::{Options, run_spans};

use super::fixture::{self, RUN, T0};

#[test]
fn the_export_request_decodes_as_otlp_and_round_trips_unchanged() {
    let spans = run_spans(
        fixture::stored(Some(RunStatus::Succeeded)),
        Options::default(),
    );
    let json = export_request(&Resource::default(), &spans);
    let text = serde_json::to_string(&json).unwrap();
    let req: ExportTraceServiceRequest = serde_json::from_str(&text).unwrap();

    // Nothing the decoder does not know was written: every field of the document is in
    // what it reads back, with the same value (a field unknown to OTLP would be dropped, a
    // wrong type fail or change). The reference writes fields at their defaults too.
    let back = serde_json::to_value(&req).unwrap();
    subset(&json, &back, "$");

    let rs = &req.resource_spans[0];
    let service = rs.resource.as_ref().unwrap().attributes[0].clone();
    assert_eq!(service.key, "service.name");
    let decoded = &rs.scope_spans[0].spans;
    assert_eq!(decoded.len(), spans.len());
    let root = &decoded[0];
    assert_eq!(root.trace_id, hex(RUN));
    assert!(root.parent_span_id.is_empty());
    assert_eq!(root.start_time_unix_nano, T0 as u64 * 1_000_000);
    assert_eq!(root.end_time_unix_nano, (T0 as u64 + 1000) * 1_000_000);
    let turn = decoded
        .iter()
        .find(|s| s.name == "chat coder-model")
        .unwrap();
    assert_eq!(turn.kind, 3, "a model call is a CLIENT span");
    let tokens = turn
        .attributes
        .iter()
        .find(|kv| kv.key == "gen_ai.usage.input_tokens")
        .and_then(|kv| kv.value.as_ref()?.value.clone());
    assert_eq!(tokens, Some(Any::IntValue(1200)));
    let failed = decoded.iter().find(|s| s.name == "node review").unwrap();
    let status = failed.status.as_ref().unwrap();
    assert_eq!((status.code, status.message.as_str()), (2, "tests failed"));
    // Every parent is a span of the request.
    for s in decoded {
        assert!(
            s.parent_span_id.is_empty() || decoded.iter().any(|p| p.span_id == s.parent_span_id),
            "{} has no parent in the request",
            s.name
        );
    }
}

/// Whether every key of `mine` is in `theirs`, recursively, with equal values.
fn subset(mine: &serde_json::Value, theirs: &serde_json::Value, path: &str) {
    use serde_json::Value::{Array, Object};
    match (mine, theirs) {
        (Object(a), Object(b)) => {
            for (k, v) in a {
                let at = format!("{path}.{k}");
                let other = b
                    .get(k)
                    .unwrap_or_else(|| panic!("{at}: not an OTLP field"));
                subset(v, other, &at);
            }
        }
        (Array(a), Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                subset(x, y, &format!("{path}[{i}]"));
            }
        }
        (x, y) => assert_eq!(x, y, "{path}"),
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn the_protobuf_request_is_what_prost_writes_and_carries_what_the_json_does() {
    use prost::Message;
    use trellis_telemetry::otlp::proto;

    let mut spans = run_spans(
        fixture::stored(Some(RunStatus::Failed)),
        Options {
            capture_content: true,
        },
    );
    // Every kind of attribute value, and a span event with attributes of its own.
    spans[0].attributes.set("test.double", 0.25);
    spans[0].attributes.set("test.negative", -3_i64);
    spans[0].attributes.set("test.empty", "");
    let mut event = trellis_telemetry::SpanEvent {
        at_ms: spans[1].start_ms,
        name: "graph:interrupt_raised".into(),
        attributes: Default::default(),
    };
    event.attributes.set("trellis.interrupt.kind", "question");
    spans[1].events.push(event);
    assert!(
        spans
            .iter()
            .any(|s| s.status != trellis_telemetry::Status::Unset),
        "no failed span"
    );
    let resource = Resource::default();
    let mut bytes = Vec::new();
    proto::encode_request(&resource, &spans, &mut bytes);
    assert_eq!(bytes.len(), proto::request_len(&resource, &spans));

    // prost reads it, and writes it back byte for byte: fields in tag order, defaults left
    // out, lengths right.
    let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
    assert_eq!(decoded.encode_to_vec(), bytes);

    // The same request as the OTLP/JSON writer's, read by the JSON mapping's reference.
    let json = serde_json::to_string(&export_request(&resource, &spans)).unwrap();
    let mut from_json: ExportTraceServiceRequest = serde_json::from_str(&json).unwrap();
    // OTLP/JSON leaves out the span flags (the parent is not remote).
    for span in &mut from_json.resource_spans[0].scope_spans[0].spans {
        span.flags = 0x100;
    }
    assert_eq!(decoded, from_json);
}
