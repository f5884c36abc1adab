//! The crate's errors: what went wrong between the window and the agent, said so a user can
//! act on it.

use std::path::PathBuf;

/// An error of the desktop client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The agent process could not be started.
    #[error("could not start the agent `{program}`: {source} (set its path with --agent)")]
    Spawn {
        /// The program that was run.
        program: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The agent's stdin or stdout was not available after spawning it.
    #[error("the agent `{0}` started without piped stdin/stdout")]
    Pipes(PathBuf),
    /// A request failed: the agent answered with an error, or the connection is gone.
    #[error("{method}: {message}")]
    Request {
        /// The ACP method.
        method: String,
        /// The agent's message (with its code and data, if any).
        message: String,
    },
    /// The agent answered with something this client does not understand.
    #[error("{method}: unexpected answer: {message}")]
    Answer {
        /// The ACP method.
        method: String,
        /// What did not parse.
        message: String,
    },
    /// The connection to the agent is closed.
    #[error("not connected to the agent")]
    Closed,
    /// A file of the workspace could not be read.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The async runtime could not be started.
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The window could not be opened or run.
    #[error("the window: {0}")]
    Window(String),
}

impl Error {
    /// A failed request to `method`.
    pub(crate) fn request(method: &str, e: &agent_client_protocol::Error) -> Self {
        let mut message = e.to_string();
        if let Some(data) = &e.data {
            message.push_str(&format!(" ({data})"));
        }
        Self::Request {
            method: method.to_owned(),
            message,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
