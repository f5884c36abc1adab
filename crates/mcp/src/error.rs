//! Errors of the MCP client.

use crate::status::ServerState;

/// An MCP client error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `[mcp]` configuration is wrong.
    #[error("{0}")]
    Config(String),
    /// A server could not be started or did not complete the handshake.
    #[error("MCP server `{server}` did not start: {message}")]
    Start {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// A server's connection ended.
    #[error("MCP server `{server}` exited ({reason})")]
    Exited {
        /// The server.
        server: String,
        /// How.
        reason: String,
    },
    /// A tool was called while its server is not connected.
    #[error("MCP server `{server}` is {state}{}", if why.is_empty() { String::new() } else { format!(": {why}") })]
    NotReady {
        /// The server.
        server: String,
        /// Its state.
        state: ServerState,
        /// Its last error.
        why: String,
    },
}

/// A result of this crate.
pub type Result<T> = std::result::Result<T, Error>;
