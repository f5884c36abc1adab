//! Errors of the sources.

/// What a source failed with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is incomplete or wrong.
    #[error("configuration: {0}")]
    Config(String),
    /// An HTTP request failed.
    #[error("{backend}: {message}")]
    Http {
        /// Who was asked (`searxng`, `brave`, `osv api`).
        backend: &'static str,
        /// What happened.
        message: String,
    },
    /// The rate limit refused a query.
    #[error(
        "rate limit of {per_minute} queries/minute reached (sources.web.rate_limit_per_minute); next query allowed in {wait_ms} ms"
    )]
    RateLimited {
        /// The configured limit.
        per_minute: u32,
        /// Time until the next query is allowed.
        wait_ms: u64,
    },
    /// The network is denied by the tools policy.
    #[error("network denied by tools.policy.network")]
    NetworkDenied,
    /// A file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What happened.
        message: String,
    },
    /// The search was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}
