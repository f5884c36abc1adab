//! Errors of the model layer, with retry policy attached.

use std::time::Duration;

use crate::budget::BudgetExceeded;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong talking to a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint answered with an HTTP error status.
    #[error("{provider}: HTTP {status}: {message}")]
    Http {
        /// Profile or provider name.
        provider: String,
        /// The status code.
        status: u16,
        /// The error body (truncated) or reason.
        message: String,
        /// The server's `Retry-After` (or `retry-after-ms`), if any.
        retry_after: Option<Duration>,
    },
    /// Connecting, sending or reading failed (including timeouts).
    #[error("{provider}: transport error: {message}")]
    Transport {
        /// Profile or provider name.
        provider: String,
        /// What failed.
        message: String,
        /// Whether it was a timeout.
        timeout: bool,
    },
    /// The response stream ended before the model finished: with neither a finish nor an
    /// error, or the connection broke off.
    #[error("{provider}: stream ended before the response was complete ({received})")]
    StreamCut {
        /// Profile or provider name.
        provider: String,
        /// What arrived before the end (`received 3 events (12 characters of text) and no
        /// finish`).
        received: String,
    },
    /// The task producing the response panicked (a bug, not a property of the endpoint).
    #[error("{provider}: the model call's task panicked: {message}")]
    Panicked {
        /// Profile or provider name.
        provider: String,
        /// The panic's message.
        message: String,
    },
    /// The endpoint sent something that does not follow its wire format, or reported an
    /// error inside the stream.
    #[error("{provider}: {message}")]
    Protocol {
        /// Profile or provider name.
        provider: String,
        /// What was wrong.
        message: String,
        /// Whether the endpoint said it was overloaded (retryable).
        overloaded: bool,
    },
    /// The call was cancelled through its token.
    #[error("cancelled")]
    Cancelled,
    /// The request exceeds a budget; it was not sent.
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
    /// Model configuration is invalid (names the key and what to do).
    #[error("{0}")]
    Config(String),
    /// Reading configuration failed.
    #[error(transparent)]
    ConfigFile(#[from] trellis_config::Error),
    /// The request asks for something this provider cannot do.
    #[error("{provider}: unsupported: {message}")]
    Unsupported {
        /// Profile or provider name.
        provider: String,
        /// What is not supported.
        message: String,
    },
    /// The API key environment variable is not set.
    #[error("{provider}: environment variable {var} (the API key) is not set")]
    MissingApiKey {
        /// Profile name.
        provider: String,
        /// The variable named by `api_key_env`.
        var: String,
    },
    /// The embedded runtime failed (loading, tokenising, decoding).
    #[error("embedded model: {0}")]
    Embedded(String),
    /// Fetching or verifying model weights failed.
    #[error("model download: {0}")]
    Download(#[from] trellis_fetch::Error),
    /// A structured answer could not be parsed or repaired.
    #[error(transparent)]
    Structured(#[from] crate::normalise::NormaliseError),
    /// The scripted test provider ran out of turns or was told to fail.
    #[error("scripted provider: {0}")]
    Scripted(String),
}

impl Error {
    /// Whether retrying the same request may succeed: 408, 409, 429, 5xx, timeouts,
    /// connection failures, cut streams and overload reports.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Http { status, .. } => matches!(status, 408 | 409 | 429 | 500..=599),
            Error::Transport { .. } | Error::StreamCut { .. } => true,
            Error::Protocol { overloaded, .. } => *overloaded,
            _ => false,
        }
    }

    /// A stable, machine-readable name of the error's kind (for events and clients).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Http { status: 429, .. } => "rate_limited",
            Error::Http {
                status: 401 | 403, ..
            } => "unauthorized",
            Error::Http { .. } => "http",
            Error::Transport { timeout: true, .. } => "timeout",
            Error::Transport { .. } => "transport",
            Error::StreamCut { .. } => "stream_cut",
            Error::Panicked { .. } => "panicked",
            Error::Protocol {
                overloaded: true, ..
            } => "overloaded",
            Error::Protocol { .. } => "protocol",
            Error::Cancelled => "cancelled",
            Error::Budget(_) => "budget_exceeded",
            Error::Config(_) | Error::ConfigFile(_) => "config",
            Error::Unsupported { .. } => "unsupported",
            Error::MissingApiKey { .. } => "missing_api_key",
            Error::Embedded(_) => "embedded",
            Error::Download(_) => "download",
            Error::Structured(_) => "structured_output",
            Error::Scripted(_) => "scripted",
        }
    }

    /// The delay the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
