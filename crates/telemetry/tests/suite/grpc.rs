//! OTLP/gRPC: the live pipeline into a loopback tonic receiver (`TraceService` and
//! `MetricsService`), whose decoded requests carry the scripted run's span tree and counters.

use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tokio::sync::oneshot;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use trellis_telemetry::config::Protocol;

use super::fixture::{self, RUN};
use super::live::{export_scripted_run, export_to};

/// Keeps every request it is sent.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

/// Keeps every metrics request it is sent.
#[derive(Clone, Default)]
struct MetricsReceiver(Arc<Mutex<Vec<ExportMetricsServiceRequest>>>);

#[tonic::async_trait]
impl MetricsService for MetricsReceiver {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

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
    let metrics = MetricsReceiver::default();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .add_service(MetricsServiceServer::new(metrics.clone()))
            .serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
                let _ = stopped.await;
            }),
    );

    let export = export_to(format!("http://{addr}"), Protocol::Grpc);
    let stats = export_scripted_run(&export).await;
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    assert_eq!(stats.snapshot(), (9, 0, 0, 0), "every span sent over gRPC");

    // The counters, sent once at shutdown.
    let counted = metrics.0.lock().unwrap().clone();
    assert_eq!(counted.len(), 1);
    let names: Vec<_> = counted[0].resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert!(names.contains(&"trellis.tool_calls"), "{names:?}");

    let requests = receiver.0.lock().unwrap().clone();
    assert!(!requests.is_empty());
    let mut spans = Vec::new();
    for req in &requests {
        let rs = &req.resource_spans[0];
        let service = rs.resource.as_ref().unwrap().attributes.iter();
        let service = service.clone().find(|kv| kv.key == "service.name").unwrap();
        assert!(format!("{:?}", service.value).contains("trellis-test"));
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
    let failed = spans
        .iter()
        .find(|s| s.name == "node review" && s.status.is_some());
    assert_eq!(
        failed.unwrap().status.as_ref().unwrap().message,
        "tests failed"
    );
    let mut names: Vec<_> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, fixture::LIVE_SPAN_NAMES);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
