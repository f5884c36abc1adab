//! The OTLP span exporter [`Export`] names: OTLP/HTTP with protobuf bodies through the
//! workspace's one HTTP client (reqwest on rustls with ring), or OTLP/gRPC (tonic, rustls
//! with ring). Neither pulls native-tls or OpenSSL.

use std::time::Duration;

use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};

use crate::config::{Export, Protocol};
use crate::{Error, Result};

/// Builds the exporter for `export`. `timeout` bounds one export (connect included).
pub fn exporter(export: &Export, timeout: Duration) -> Result<opentelemetry_otlp::SpanExporter> {
    let built = match export.protocol {
        Protocol::HttpProtobuf => {
            let client = trellis_fetch::client(timeout, Some(timeout))
                .map_err(|e| Error::Exporter(e.to_string()))?;
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client)
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(export.url.clone())
                .with_timeout(timeout)
                .build()
        }
        Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(export.url.clone())
            .with_timeout(timeout)
            .build(),
    };
    built.map_err(|e| {
        Error::Exporter(format!(
            "{} exporter for {}: {e}",
            export.protocol.as_str(),
            export.url
        ))
    })
}
