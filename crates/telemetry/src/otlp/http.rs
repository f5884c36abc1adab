//! OTLP/HTTP with protobuf bodies.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use prost::Message;

use super::{SpanSink, proto};
use crate::otlp_json::Resource;
use crate::span::Span;
use crate::{Error, Result};

/// Posts each batch as one `ExportTraceServiceRequest` to a collector's `/v1/traces`, and
/// the metrics to its `/v1/metrics`.
pub struct HttpExporter {
    client: reqwest::Client,
    url: String,
    metrics_url: Option<String>,
    /// The request bodies' buffer: a body's memory is taken back for the next one once the
    /// client has let go of it.
    buf: BytesMut,
}

impl HttpExporter {
    /// An exporter posting spans to `url` (the full `…/v1/traces` URL) and metrics to
    /// `metrics_url` (none: metrics are not sent); `timeout` bounds the connect and each read.
    pub fn new(url: &str, metrics_url: Option<&str>, timeout: Duration) -> Result<Self> {
        let client = trellis_fetch::client(timeout, Some(timeout))
            .map_err(|e| Error::Exporter(format!("http/protobuf exporter for {url}: {e}")))?;
        reqwest::Url::parse(url)
            .map_err(|e| Error::Exporter(format!("http/protobuf exporter for {url}: {e}")))?;
        Ok(Self {
            client,
            url: url.to_owned(),
            metrics_url: metrics_url.map(str::to_owned),
            buf: BytesMut::new(),
        })
    }

    async fn post(&self, url: &str, body: impl Into<Bytes>) -> Result<()> {
        let response = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body.into())
            .send()
            .await
            .map_err(|e| Error::Exporter(format!("POST {url}: {e}")))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(Error::Exporter(format!("POST {url}: {status}")))
        }
    }
}

impl SpanSink for HttpExporter {
    async fn export(&mut self, resource: &Resource, spans: Vec<Span>) -> Result<()> {
        self.buf.clear();
        self.buf.reserve(proto::request_len(resource, &spans));
        proto::encode_request(resource, &spans, &mut self.buf);
        drop(spans);
        let body = self.buf.split().freeze();
        self.post(&self.url, body).await
    }

    async fn export_metrics(&mut self, request: ExportMetricsServiceRequest) -> Result<()> {
        match &self.metrics_url {
            Some(url) => self.post(url, request.encode_to_vec()).await,
            None => Ok(()),
        }
    }
}
