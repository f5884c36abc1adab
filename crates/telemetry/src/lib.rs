//! OpenTelemetry for Trellis: runs, node activations, agents, model calls and tool calls as
//! spans with the GenAI semantic conventions' attributes.
//!
//! Every span comes from Trellis's events ([`trellis_protocol::ServiceEvent`]) through one
//! mapping, [`Mapper`]: a stored run after the fact ([`run_spans`], `trellis runs trace`)
//! and the live broadcast of a running service ([`live`], with the `otlp` feature) map the
//! same way, with the same span ids. The spans are written as an OTLP/JSON export request
//! ([`otlp_json`]) or in the Chrome trace event format for Perfetto ([`chrome`]), or sent to
//! a collector over OTLP with the run counters of [`metrics`] ([`otlp`]: HTTP/protobuf with
//! the `otlp` feature, gRPC too with `grpc`). The `[telemetry]` section is [`config`]. See
//! `docs/observability.md`.

pub mod chrome;
pub mod config;
mod error;
#[cfg(feature = "otlp")]
pub mod live;
mod mapper;
pub mod metrics;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod otlp_json;
#[cfg(feature = "otlp")]
pub mod sdk;
pub mod semconv_1_44;
mod span;
mod stored;

pub use semconv_1_44 as semconv;

pub use config::TelemetryConfig;
pub use error::{Error, Result};
pub use mapper::{Mapper, Options};
pub use span::{Attributes, Span, SpanEvent, SpanId, SpanKind, Status, TraceId, Value};
pub use stored::{StoredRun, run_spans};
