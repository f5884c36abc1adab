//! The OTLP exporters [`Export`] names: OTLP/HTTP with protobuf bodies through the
//! workspace's one HTTP client (reqwest on rustls with ring), or OTLP/gRPC (tonic, rustls with
//! ring; the `grpc` feature). Neither pulls native-tls or OpenSSL.
//!
//! Spans go straight from Trellis's [`Span`]s into the OTLP protobuf wire format, one request
//! per batch ([`proto::encode_request`]): no SDK span data or message structs in between.

#[cfg(feature = "grpc")]
mod grpc;
mod http;
pub mod metrics;
pub mod proto;

use std::future::Future;
use std::time::Duration;

use crate::config::{Export, Protocol};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;

use crate::Result;
use crate::otlp_json::Resource;
use crate::span::Span;

#[cfg(feature = "grpc")]
pub use grpc::GrpcExporter;
pub use http::HttpExporter;

/// Where the live pipeline sends its batches of finished spans.
pub trait SpanSink: Send + 'static {
    /// Sends `spans` as produced by `resource`. The caller bounds the time it may take.
    fn export(
        &mut self,
        resource: &Resource,
        spans: Vec<Span>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Sends the process's metrics ([`metrics::export_request`]). A sink without a metrics
    /// endpoint drops them.
    fn export_metrics(
        &mut self,
        request: ExportMetricsServiceRequest,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = request;
        std::future::ready(Ok(()))
    }
}

/// The exporter of the configured protocol.
pub enum Exporter {
    /// OTLP/HTTP, protobuf bodies.
    Http(HttpExporter),
    /// OTLP/gRPC.
    #[cfg(feature = "grpc")]
    Grpc(Box<GrpcExporter>),
}

/// Builds the exporter for `export`. `timeout` bounds one export (connect included).
pub fn exporter(export: &Export, timeout: Duration) -> Result<Exporter> {
    match export.protocol {
        Protocol::HttpProtobuf => Ok(Exporter::Http(HttpExporter::new(
            &export.url,
            export.metrics_url.as_deref(),
            timeout,
        )?)),
        #[cfg(feature = "grpc")]
        Protocol::Grpc => Ok(Exporter::Grpc(Box::new(GrpcExporter::new(
            &export.url,
            timeout,
        )?))),
        #[cfg(not(feature = "grpc"))]
        Protocol::Grpc => Err(crate::Error::Exporter(format!(
            "OTLP/gRPC export to {} needs a build with the `grpc` feature (cargo install \
             --path crates/cli --features grpc); this one speaks OTLP/HTTP (protocol = \
             \"http/protobuf\", port 4318)",
            export.url
        ))),
    }
}

impl SpanSink for Exporter {
    async fn export(&mut self, resource: &Resource, spans: Vec<Span>) -> Result<()> {
        match self {
            Exporter::Http(e) => e.export(resource, spans).await,
            #[cfg(feature = "grpc")]
            Exporter::Grpc(e) => e.export(resource, spans).await,
        }
    }

    async fn export_metrics(&mut self, request: ExportMetricsServiceRequest) -> Result<()> {
        match self {
            Exporter::Http(e) => e.export_metrics(request).await,
            #[cfg(feature = "grpc")]
            Exporter::Grpc(e) => e.export_metrics(request).await,
        }
    }
}

#[cfg(all(test, not(feature = "grpc")))]
mod tests {
    use super::*;

    #[test]
    fn grpc_without_the_feature_says_how_to_get_it() {
        let export = Export {
            url: "http://127.0.0.1:4317".to_owned(),
            metrics_url: None,
            protocol: Protocol::Grpc,
            capture_content: false,
            queue: 1,
            service_name: "t".to_owned(),
        };
        let Err(e) = exporter(&export, Duration::from_secs(1)) else {
            panic!("a build without grpc refuses it");
        };
        assert!(e.to_string().contains("--features grpc"), "{e}");
    }
}
