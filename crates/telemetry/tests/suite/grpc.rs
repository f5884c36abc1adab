//! OTLP/gRPC: the live pipeline into a loopback tonic `TraceService` receiver, whose decoded
//! requests carry the scripted run's span tree.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tokio::sync::{broadcast, oneshot};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use trellis_protocol::RunStatus;
use trellis_telemetry::config::{Export, Protocol};
use trellis_telemetry::live::{LiveOptions, spawn};
use trellis_telemetry::otlp;

use super::fixture::{self, RUN};
use super::live::Live;

/// Keeps every request it is sent.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::test]
async fn a_loopback_grpc_receiver_decodes_the_span_tree() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = Receiver::default();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
                let _ = stopped.await;
            }),
    );

    let export = Export {
        url: format!("http://{addr}"),
        metrics_url: None,
        protocol: Protocol::Grpc,
        capture_content: false,
        queue: 64,
        service_name: "trellis-grpc-test".into(),
    };
    let exporter = otlp::exporter(&export, Duration::from_secs(5)).unwrap();
    let (tx, rx) = broadcast::channel(1024);
    let pipeline = spawn(
        rx,
        exporter,
        LiveOptions {
            service_name: export.service_name.clone(),
            ..LiveOptions::default()
        },
    );
    let mut events = fixture::stored(Some(RunStatus::Succeeded)).streams.concat();
    events.sort_by_key(|e| e.ts);
    for ev in events {
        tx.send(Arc::new(Live(ev))).unwrap();
    }
    let stats = pipeline.shutdown(Duration::from_secs(10)).await;
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    assert_eq!(stats.snapshot(), (9, 0, 0, 0), "every span sent over gRPC");

    let requests = receiver.0.lock().unwrap().clone();
    assert!(!requests.is_empty());
    let mut spans = Vec::new();
    for req in &requests {
        let rs = &req.resource_spans[0];
        let service = rs.resource.as_ref().unwrap().attributes.iter();
        let service = service.clone().find(|kv| kv.key == "service.name").unwrap();
        assert!(format!("{:?}", service.value).contains("trellis-grpc-test"));
        for ss in &rs.scope_spans {
            assert_eq!(ss.scope.as_ref().unwrap().name, "trellis");
            spans.extend(ss.spans.iter().cloned());
        }
    }
    let find = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let run = find("invoke_workflow feature");
    assert_eq!(hex(&run.trace_id), RUN);
    assert!(run.parent_span_id.is_empty());
    let node = find("node code");
    assert_eq!(node.parent_span_id, run.span_id);
    let agent = find("invoke_agent coder");
    assert_eq!(agent.parent_span_id, node.span_id);
    let tool = find("execute_tool read_file");
    assert_eq!(tool.parent_span_id, agent.span_id);
    assert!(tool.end_time_unix_nano >= tool.start_time_unix_nano);
    let failed = spans.iter().find(|s| s.name == "node review" && s.status.is_some());
    assert_eq!(failed.unwrap().status.as_ref().unwrap().message, "tests failed");
    let mut names: Vec<_> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        fixture::LIVE_SPAN_NAMES
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
