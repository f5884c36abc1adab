//! Errors of the agents layer.

use std::path::PathBuf;

/// An agents error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A role file is invalid.
    #[error("{}: invalid role: {message}", path.display())]
    Role {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A workflow names an agent no role file defines.
    #[error(
        "no role `{name}`{}; known roles: {known} (add `.trellis/agents/{name}.yaml` to define it)",
        suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default()
    )]
    UnknownRole {
        /// The name asked for.
        name: String,
        /// The nearest known name.
        suggestion: Option<String>,
        /// Every known name.
        known: String,
    },
    /// Reading a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A model call failed (after retries).
    #[error("model call failed: {0}")]
    Model(#[from] trellis_llm::Error),
    /// A saved agent state could not be read back.
    #[error("cannot resume the agent: {0}")]
    Resume(String),
    /// The run was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// A configuration value is invalid (the message names the key).
    #[error("{0}")]
    Config(String),
    /// A typed output could not be normalised.
    #[error("the answer cannot be read as the typed output: {0}")]
    Output(trellis_llm::normalise::NormaliseError),
    /// The orchestrator could not pick a workflow.
    #[error("orchestrator: {0}")]
    Orchestrator(String),
}

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
