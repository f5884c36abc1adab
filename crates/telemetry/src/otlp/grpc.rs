//! OTLP/gRPC (`TraceService/Export`) over tonic's channel.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use super::{SpanSink, proto};
use crate::otlp_json::Resource;
use crate::span::Span;
use crate::{Error, Result};

/// Sends each batch as one `Export` call; connects on first use (and again after a failure).
pub struct GrpcExporter {
    client: TraceServiceClient<Channel>,
    metrics: MetricsServiceClient<Channel>,
}

impl GrpcExporter {
    /// An exporter calling the collector at `url` (`http://host:4317`; `https://` with the
    /// web PKI's roots); `timeout` bounds the connect and each call.
    pub fn new(url: &str, timeout: Duration) -> Result<Self> {
        let error =
            |e: tonic::transport::Error| Error::Exporter(format!("grpc exporter for {url}: {e}"));
        let mut endpoint = Endpoint::from_shared(url.to_owned())
            .map_err(error)?
            .connect_timeout(timeout)
            .timeout(timeout);
        if url.starts_with("https://") {
            endpoint = endpoint
                .tls_config(ClientTlsConfig::new().with_webpki_roots())
                .map_err(error)?;
        }
        let channel = endpoint.connect_lazy();
        Ok(Self {
            client: TraceServiceClient::new(channel.clone()),
            metrics: MetricsServiceClient::new(channel),
        })
    }
}

impl SpanSink for GrpcExporter {
    async fn export(&mut self, resource: &Resource, spans: Vec<Span>) -> Result<()> {
        let request = proto::export_request(resource, spans);
        self.client
            .export(request)
            .await
            .map(|_| ())
            .map_err(|status| Error::Exporter(format!("grpc export: {status}")))
    }

    async fn export_metrics(&mut self, request: ExportMetricsServiceRequest) -> Result<()> {
        self.metrics
            .export(request)
            .await
            .map(|_| ())
            .map_err(|status| Error::Exporter(format!("grpc metrics export: {status}")))
    }
}
