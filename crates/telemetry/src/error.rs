//! What setting telemetry up can fail with.

/// A telemetry error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The OTLP exporter could not be built (a bad endpoint URL, a TLS setup).
    #[error("telemetry: {0}")]
    Exporter(String),
}

/// A telemetry result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
