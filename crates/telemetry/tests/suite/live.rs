//! The live exporter: the scripted run's events broadcast as a service publishes them, to the
//! SDK's in-memory exporter; to a loopback OTLP/HTTP receiver that decodes the protobuf; and
//! to a collector that never answers, which must cost the run nothing.

use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point};
use opentelemetry_sdk::trace::InMemorySpanExporter;
use prost::Message;
use tokio::sync::broadcast;
use trellis_protocol::{RunStatus, ServiceEvent};
use trellis_telemetry::config::{Export, Protocol};
use trellis_telemetry::live::{LiveOptions, Stats, spawn};
use trellis_telemetry::otlp;
use trellis_telemetry::sdk::SdkSink;

use super::fixture::{self, RUN, SECRET_PROMPT};

/// A broadcast event as the service's `LiveEvent`: derefs to its `ServiceEvent`.
#[derive(Debug)]
pub(super) struct Live(pub(super) ServiceEvent);

impl Deref for Live {
    type Target = ServiceEvent;
    fn deref(&self) -> &ServiceEvent {
        &self.0
    }
}

/// The scripted run's events in the order a service would broadcast them.
fn broadcast_order() -> Vec<Arc<Live>> {
    let mut all = fixture::stored(Some(RunStatus::Succeeded)).streams.concat();
    all.sort_by_key(|e| e.ts);
    all.into_iter().map(|e| Arc::new(Live(e))).collect()
}

#[tokio::test]
async fn the_span_tree_reaches_the_sdks_in_memory_exporter() {
    let exporter = InMemorySpanExporter::default();
    let (tx, rx) = broadcast::channel(1024);
    let pipeline = spawn(rx, SdkSink::new(exporter.clone()), LiveOptions::default());
    for ev in broadcast_order() {
        tx.send(ev).unwrap();
    }
    // Read before the shutdown: the in-memory exporter forgets its spans when shut down.
    let mut spans = Vec::new();
    for _ in 0..100 {
        spans = exporter.get_finished_spans().unwrap();
        if spans.len() >= 9 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stats = pipeline.shutdown(Duration::from_secs(10)).await;
    assert_eq!(
        stats.snapshot(),
        (9, 0, 0, 0),
        "every span, nothing dropped"
    );
    assert_eq!(spans.len(), 9);
    let find = |name: &str| {
        spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "no {name}: {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
    };
    let run = find("invoke_workflow feature");
    assert_eq!(run.span_context.trace_id().to_string(), RUN);
    assert_eq!(run.parent_span_id, opentelemetry::trace::SpanId::INVALID);
    let node = find("node code");
    assert_eq!(node.parent_span_id, run.span_context.span_id());
    let agent = find("invoke_agent coder");
    assert_eq!(agent.parent_span_id, node.span_context.span_id());
    // Live, a turn's model is the one its `turnStarted` names.
    let turns: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "chat coder-model")
        .collect();
    assert_eq!(turns.len(), 2);
    let model = turns[0]
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "gen_ai.request.model")
        .map(|kv| kv.value.clone());
    assert_eq!(model, Some(opentelemetry::Value::from("coder-model")));
    assert!(
        turns
            .iter()
            .all(|t| t.parent_span_id == agent.span_context.span_id())
    );
    assert_eq!(turns[0].span_kind, SpanKind::Client);
    let tokens = turns[0]
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "gen_ai.usage.input_tokens")
        .map(|kv| kv.value.clone());
    assert_eq!(tokens, Some(opentelemetry::Value::I64(1200)));
    let tool = find("execute_tool read_file");
    assert_eq!(tool.parent_span_id, agent.span_context.span_id());
    let failed = spans.iter().find(|s| s.name == "node review").unwrap();
    assert_eq!(failed.status, Status::error("tests failed"));
    // No content unless enabled.
    assert!(spans.iter().all(|s| {
        s.attributes
            .iter()
            .all(|kv| !kv.value.to_string().contains(SECRET_PROMPT))
    }));
}

/// The scripted run exported to `export`'s collector through the live pipeline, flushed.
pub(super) async fn export_scripted_run(export: &Export) -> Arc<Stats> {
    let exporter = otlp::exporter(export, Duration::from_secs(5)).unwrap();
    let (tx, rx) = broadcast::channel(1024);
    let pipeline = spawn(
        rx,
        exporter,
        LiveOptions {
            service_name: export.service_name.clone(),
            ..LiveOptions::default()
        },
    );
    for ev in broadcast_order() {
        tx.send(ev).unwrap();
    }
    pipeline.shutdown(Duration::from_secs(10)).await
}

pub(super) fn export_to(url: String, protocol: Protocol) -> Export {
    Export {
        metrics_url: Some(url.replace("/v1/traces", "/v1/metrics")),
        url,
        protocol,
        capture_content: false,
        queue: 64,
        service_name: "trellis-test".into(),
    }
}

#[tokio::test]
async fn a_loopback_receiver_decodes_the_otlp_http_protobuf() {
    let server = trellis_test_http::Server::start(|_| {
        trellis_test_http::Response::new(200, "application/x-protobuf", Vec::new())
    });
    let export = export_to(
        format!("{}/v1/traces", server.url()),
        Protocol::HttpProtobuf,
    );
    let stats = export_scripted_run(&export).await;
    assert_eq!(stats.snapshot().0, 9, "{:?}", stats.snapshot());

    let requests = server.requests();
    let (metrics, requests): (Vec<_>, Vec<_>) =
        requests.iter().partition(|r| r.target == "/v1/metrics");
    assert!(!requests.is_empty());
    // The metrics, sent once at shutdown (the interval is a minute).
    assert_eq!(metrics.len(), 1);
    assert_eq!(
        metrics[0].header("content-type"),
        Some("application/x-protobuf")
    );
    let counted = ExportMetricsServiceRequest::decode(metrics[0].body.as_slice()).unwrap();
    let scope = &counted.resource_metrics[0].scope_metrics[0];
    let tokens = scope
        .metrics
        .iter()
        .find(|m| m.name == "trellis.gen_ai.tokens")
        .unwrap();
    let Some(Data::Sum(sum)) = &tokens.data else {
        panic!("tokens are a sum: {tokens:?}");
    };
    assert!(sum.is_monotonic);
    let input = sum
        .data_points
        .iter()
        .find(|p| format!("{:?}", p.attributes).contains("\"input\""))
        .unwrap();
    assert_eq!(input.value, Some(number_data_point::Value::AsInt(2700)));
    assert!(input.start_time_unix_nano <= input.time_unix_nano);
    let mut names = Vec::new();
    for r in &requests {
        assert_eq!(
            (r.method.as_str(), r.target.as_str()),
            ("POST", "/v1/traces")
        );
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
        let req = ExportTraceServiceRequest::decode(r.body.as_slice()).unwrap();
        let rs = &req.resource_spans[0];
        let service = rs
            .resource
            .as_ref()
            .unwrap()
            .attributes
            .iter()
            .find(|kv| kv.key == "service.name")
            .unwrap();
        assert_eq!(
            format!("{:?}", service.value),
            format!(
                "{:?}",
                Some(opentelemetry_proto::tonic::common::v1::AnyValue {
                    value: Some(
                        opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(
                            "trellis-test".into()
                        )
                    ),
                })
            )
        );
        for ss in &rs.scope_spans {
            assert_eq!(ss.scope.as_ref().unwrap().name, "trellis");
            for s in &ss.spans {
                assert_eq!(hex(&s.trace_id), RUN);
                names.push(s.name.clone());
            }
        }
    }
    names.sort();
    assert_eq!(names, fixture::LIVE_SPAN_NAMES);
}

#[tokio::test]
async fn a_collector_that_never_answers_costs_the_run_nothing() {
    // Accepts connections and never answers.
    let silent = trellis_test_http::Server::concurrent(|_| {
        trellis_test_http::Response::new(200, "application/x-protobuf", Vec::new())
            .after(Duration::from_secs(30))
    });
    let export = export_to(
        format!("{}/v1/traces", silent.url()),
        Protocol::HttpProtobuf,
    );
    let exporter = otlp::exporter(&export, Duration::from_millis(300)).unwrap();
    let (tx, rx) = broadcast::channel(1 << 16);
    let pipeline = spawn(
        rx,
        exporter,
        LiveOptions {
            queue: 4,
            batch: 2,
            linger: Duration::from_millis(1),
            export_timeout: Duration::from_millis(300),
            ..LiveOptions::default()
        },
    );
    // 200 runs' worth of events: publishing never waits for the exporter.
    let events = broadcast_order();
    let started = Instant::now();
    for i in 0..200 {
        for ev in &events {
            let mut e = ev.0.clone();
            if let trellis_protocol::StreamId::Run(_) = e.stream {
                e.stream = trellis_protocol::StreamId::Run(trellis_protocol::RunId::from_string(
                    format!("{RUN}-{i}"),
                ));
            }
            tx.send(Arc::new(Live(e))).unwrap();
        }
    }
    let published = started.elapsed();
    assert!(
        published < Duration::from_millis(500),
        "publishing took {published:?}"
    );
    let stopping = Instant::now();
    let stats = pipeline.shutdown(Duration::from_secs(2)).await;
    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "shutdown took {:?}",
        stopping.elapsed()
    );
    let (exported, dropped, failed, _) = stats.snapshot();
    assert_eq!(exported, 0);
    assert!(
        dropped > 0,
        "a full queue drops spans: {:?}",
        stats.snapshot()
    );
    assert!(
        failed > 0,
        "timed-out batches are counted: {:?}",
        stats.snapshot()
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
