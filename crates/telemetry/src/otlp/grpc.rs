//! OTLP/gRPC (`TraceService/Export`) over tonic's channel.
//!
//! A batch's request is written by [`proto::encode_request`], as for OTLP/HTTP, and sent as
//! it is ([`Encoded`]: a codec whose message is the encoded bytes).

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use super::{SpanSink, proto};
use crate::otlp_json::Resource;
use crate::span::Span;
use crate::{Error, Result};

/// Sends each batch as one `Export` call; connects on first use (and again after a failure).
pub struct GrpcExporter {
    client: tonic::client::Grpc<Channel>,
    metrics: MetricsServiceClient<Channel>,
    /// The requests' buffer (its memory is taken back once a request has been sent).
    buf: BytesMut,
}

/// The method a batch of spans is sent to.
const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

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
            client: tonic::client::Grpc::new(channel.clone()),
            metrics: MetricsServiceClient::new(channel),
            buf: BytesMut::new(),
        })
    }
}

impl SpanSink for GrpcExporter {
    async fn export(&mut self, resource: &Resource, spans: Vec<Span>) -> Result<()> {
        self.buf.clear();
        self.buf.reserve(proto::request_len(resource, &spans));
        proto::encode_request(resource, &spans, &mut self.buf);
        drop(spans);
        let request = tonic::Request::new(self.buf.split().freeze());
        self.client
            .ready()
            .await
            .map_err(|e| Error::Exporter(format!("grpc export: {e}")))?;
        let path = http::uri::PathAndQuery::from_static(EXPORT);
        self.client
            .unary::<_, ExportTraceServiceResponse, _>(request, path, Encoded)
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

/// The codec of a request already encoded: its bytes go out as they are; the answer is
/// decoded as `ExportTraceServiceResponse`.
struct Encoded;

impl Codec for Encoded {
    type Encode = Bytes;
    type Decode = ExportTraceServiceResponse;
    type Encoder = Encoded;
    type Decoder = Encoded;

    fn encoder(&mut self) -> Self::Encoder {
        Encoded
    }

    fn decoder(&mut self) -> Self::Decoder {
        Encoded
    }
}

impl Encoder for Encoded {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> std::result::Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Encoded {
    type Item = ExportTraceServiceResponse;
    type Error = Status;

    fn decode(
        &mut self,
        src: &mut DecodeBuf<'_>,
    ) -> std::result::Result<Option<Self::Item>, Status> {
        ExportTraceServiceResponse::decode(src)
            .map(Some)
            .map_err(|e| Status::internal(format!("the collector's answer: {e}")))
    }
}
