//! The crate's error type.

/// An LSP client error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server could not be started.
    #[error("cannot start {program}: {message}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        message: String,
    },
    /// A request failed.
    #[error("{server}: {method} failed: {message}")]
    Request {
        /// The server.
        server: String,
        /// The LSP method.
        method: &'static str,
        /// Why.
        message: String,
    },
    /// A path outside the workspace, or unreadable.
    #[error("{0}")]
    Path(String),
}

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
