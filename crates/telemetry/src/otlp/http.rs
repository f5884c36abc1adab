//! OTLP/HTTP with protobuf bodies.

use std::time::Duration;

use prost::Message;

use super::{SpanSink, proto};
use crate::otlp_json::Resource;
use crate::span::Span;
use crate::{Error, Result};

/// Posts each batch as one `ExportTraceServiceRequest` to a collector's `/v1/traces`.
pub struct HttpExporter {
    client: reqwest::Client,
    url: String,
}

impl HttpExporter {
    /// An exporter posting to `url` (the full `…/v1/traces` URL); `timeout` bounds the
    /// connect and each read.
    pub fn new(url: &str, timeout: Duration) -> Result<Self> {
        let client = trellis_fetch::client(timeout, Some(timeout))
            .map_err(|e| Error::Exporter(format!("http/protobuf exporter for {url}: {e}")))?;
        reqwest::Url::parse(url)
            .map_err(|e| Error::Exporter(format!("http/protobuf exporter for {url}: {e}")))?;
        Ok(Self {
            client,
            url: url.to_owned(),
        })
    }
}

impl SpanSink for HttpExporter {
    async fn export(&mut self, resource: &Resource, spans: Vec<Span>) -> Result<()> {
        let body = proto::export_request(resource, spans).encode_to_vec();
        let response = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body)
            .send()
            .await
            .map_err(|e| Error::Exporter(format!("POST {}: {e}", self.url)))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(Error::Exporter(format!("POST {}: {status}", self.url)))
        }
    }
}
