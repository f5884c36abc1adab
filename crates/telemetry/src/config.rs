//! The `[telemetry]` section: where live spans go, and whether they carry content.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The section's name in the configuration.
pub const SECTION: &str = "telemetry";

/// The standard variable naming a collector for every signal (`http://host:4318`).
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The standard variable naming a collector for traces alone (a full URL, used as is).
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The standard variable naming a collector for metrics alone (a full URL, used as is).
pub const METRICS_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// The standard variable choosing the protocol (`http/protobuf`, `grpc`).
pub const PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";

/// Spans held while a collector is slow, by default: about what the ~16 k events a
/// service's broadcast holds make (2048 overflowed while back-to-back engine runs were
/// mapped faster than one request of 512 spans was sent; docs/benchmarks.md, "Telemetry").
pub const DEFAULT_QUEUE: usize = 8192;

/// The `[telemetry]` section. Export is off unless an endpoint is configured here or in the
/// standard OpenTelemetry variables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP endpoint: `http://localhost:4318` (HTTP; `/v1/traces` is added)
    /// or `http://localhost:4317` (gRPC). Unset: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); neither: nothing is exported.
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` or `grpc`. Unset: `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`.
    pub protocol: Option<Protocol>,
    /// Put prompts, answers, tool arguments and results, and questions in the spans. Off by
    /// default: they may hold code and secrets.
    pub capture_content: bool,
    /// Spans held while the collector is slow or down (default 8192); beyond that new spans
    /// are dropped and counted, so a dead collector never holds a run up.
    pub queue: Option<usize>,
    /// The `service.name` of the spans (default `trellis`).
    pub service_name: Option<String>,
}

/// How spans travel to the collector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies (port 4318).
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP/gRPC (port 4317).
    #[serde(rename = "grpc")]
    Grpc,
}

impl Protocol {
    /// The name `OTEL_EXPORTER_OTLP_PROTOCOL` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "http/protobuf" => Some(Protocol::HttpProtobuf),
            "grpc" => Some(Protocol::Grpc),
            _ => None,
        }
    }
}

/// Where and how to export, once the section and the environment are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// The URL spans are sent to: for HTTP the full `…/v1/traces` URL, for gRPC the server.
    pub url: String,
    /// For HTTP, the full `…/v1/metrics` URL metrics are sent to; `None` when only a traces
    /// endpoint was given (gRPC sends metrics to the server of `url`).
    pub metrics_url: Option<String>,
    /// The protocol.
    pub protocol: Protocol,
    /// Whether spans carry content.
    pub capture_content: bool,
    /// The span queue's bound.
    pub queue: usize,
    /// `service.name`.
    pub service_name: String,
}

impl TelemetryConfig {
    /// What to export given the environment (`env` looks a variable up: `std::env::var`
    /// in the binary, a map in tests); `None` when no endpoint is set anywhere (the default).
    pub fn export(&self, env: impl Fn(&str) -> Option<String>) -> Option<Export> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let protocol = self
            .protocol
            .or_else(|| var(PROTOCOL_ENV).and_then(|p| Protocol::parse(&p)))
            .unwrap_or_default();
        let signal = |url: &str, path: &str| match protocol {
            Protocol::HttpProtobuf => format!("{}/v1/{path}", url.trim_end_matches('/')),
            Protocol::Grpc => url.to_owned(),
        };
        let base = match &self.otlp_endpoint {
            Some(url) if !url.trim().is_empty() => Some(url.trim().to_owned()),
            _ => var(ENDPOINT_ENV),
        };
        let from_base = self
            .otlp_endpoint
            .as_ref()
            .is_some_and(|u| !u.trim().is_empty());
        let url = match (from_base, var(TRACES_ENDPOINT_ENV)) {
            (false, Some(traces)) => traces,
            _ => signal(base.as_deref()?, "traces"),
        };
        let metrics_url = match (from_base, var(METRICS_ENDPOINT_ENV)) {
            (false, Some(metrics)) => Some(metrics),
            _ => base.as_deref().map(|b| signal(b, "metrics")),
        };
        Some(Export {
            url,
            metrics_url,
            protocol,
            capture_content: self.capture_content,
            queue: self.queue.unwrap_or(DEFAULT_QUEUE).max(1),
            service_name: self
                .service_name
                .clone()
                .unwrap_or_else(|| "trellis".to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        let cfg = TelemetryConfig::default();
        assert_eq!(cfg.export(env(&[])), None);
        let on = cfg
            .export(env(&[(ENDPOINT_ENV, "http://collector:4318/")]))
            .unwrap();
        assert_eq!(on.url, "http://collector:4318/v1/traces");
        assert_eq!(
            on.metrics_url.as_deref(),
            Some("http://collector:4318/v1/metrics")
        );
        assert_eq!(
            (on.protocol, on.queue),
            (Protocol::HttpProtobuf, DEFAULT_QUEUE)
        );
        let traces = cfg
            .export(env(&[(TRACES_ENDPOINT_ENV, "http://c:4318/custom")]))
            .unwrap();
        assert_eq!(traces.url, "http://c:4318/custom");
        assert_eq!(traces.metrics_url, None, "no metrics endpoint named");
    }

    #[test]
    fn the_section_wins_over_the_environment() {
        let cfg: TelemetryConfig = serde_json::from_value(serde_json::json!({
            "otlp_endpoint": "http://127.0.0.1:4317",
            "protocol": "grpc",
            "capture_content": true,
        }))
        .unwrap();
        let e = cfg
            .export(env(&[
                (ENDPOINT_ENV, "http://other:4318"),
                (PROTOCOL_ENV, "http/protobuf"),
            ]))
            .unwrap();
        assert_eq!(e.url, "http://127.0.0.1:4317");
        assert_eq!(e.protocol, Protocol::Grpc);
        assert!(e.capture_content);
        let grpc_env = TelemetryConfig::default()
            .export(env(&[
                (ENDPOINT_ENV, "http://c:4317"),
                (PROTOCOL_ENV, "grpc"),
            ]))
            .unwrap();
        assert_eq!(
            (grpc_env.url.as_str(), grpc_env.protocol),
            ("http://c:4317", Protocol::Grpc)
        );
    }
}
