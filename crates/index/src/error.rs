//! The index error type.

use std::path::PathBuf;

/// Everything that can go wrong while indexing or retrieving.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The metadata database failed.
    #[error("index metadata database: {0}")]
    Db(#[from] rusqlite::Error),
    /// The full-text index failed.
    #[error("full-text index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// An exclude glob in the configuration is invalid.
    #[error("invalid exclude glob `{glob}`: {message}")]
    Glob {
        /// The glob as configured.
        glob: String,
        /// What is wrong with it.
        message: String,
    },
    /// The embedding model could not be fetched, loaded or run.
    #[error("embedding: {0}")]
    Embedding(String),
    /// The embedding endpoint answered with an error or an unexpected body.
    #[error("embedding endpoint {url}: {message}")]
    Endpoint {
        /// The URL called.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The rerank endpoint answered with an error or an unexpected body, or not in time.
    #[error("rerank endpoint {url}: {message}")]
    Rerank {
        /// The URL called.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The configuration is inconsistent (the message says which field and what to do).
    #[error("index configuration: {0}")]
    Config(String),
    /// The on-disk index was written by an incompatible version; delete `.trellis/index` to rebuild.
    #[error("index at {0} has an incompatible format; delete it to rebuild")]
    Incompatible(PathBuf),
    /// The operation was cancelled; everything committed so far is consistent.
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether retrying the same operation later may succeed (network and I/O failures).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Io { .. } | Error::Endpoint { .. } | Error::Rerank { .. }
        )
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(feature = "embed")]
impl From<trellis_encoder::Error> for Error {
    fn from(e: trellis_encoder::Error) -> Self {
        match e {
            trellis_encoder::Error::Io { path, source } => Error::Io { path, source },
            trellis_encoder::Error::Model(m) => Error::Embedding(m),
        }
    }
}
