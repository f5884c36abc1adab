//! Errors of the graph engine.

use trellis_protocol::{InvalidTransition, NodeId};

use crate::JournalError;

/// An engine error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The graph definition is inconsistent (reported by [`crate::GraphBuilder::build`]).
    #[error("invalid graph `{graph}`: {problems}")]
    InvalidGraph {
        /// Graph name.
        graph: String,
        /// Every problem found, one per line.
        problems: String,
    },
    /// A transition the node state machine does not allow.
    #[error("node {node}#{attempt}: {source}")]
    InvalidTransition {
        /// Node.
        node: NodeId,
        /// Activation.
        attempt: u32,
        /// The refused transition.
        source: InvalidTransition,
    },
    /// A router returned a target outside its declared targets, or failed.
    #[error("routing after {node} failed: {message}")]
    Routing {
        /// Source node.
        node: NodeId,
        /// What went wrong.
        message: String,
    },
    /// Applying a write to a channel failed.
    #[error("node {node} wrote channel `{channel}`: {message}")]
    Reducer {
        /// Writing node.
        node: NodeId,
        /// Channel.
        channel: String,
        /// What went wrong.
        message: String,
    },
    /// The run's initial input is not acceptable.
    #[error("invalid run input: {0}")]
    Input(String),
    /// The step limit (loop guard) was reached.
    #[error(
        "step limit of {0} reached (raise it with GraphBuilder::max_steps if the loop is intended)"
    )]
    StepLimit(u64),
    /// The stored log cannot be replayed against this graph.
    #[error("cannot replay run {run}: {message}")]
    Replay {
        /// Run.
        run: String,
        /// What does not match.
        message: String,
    },
    /// The graph's continuation could not name the graph the run continues with.
    #[error("{0}")]
    Continuation(String),
    /// The run cannot be resumed or forked in its current state.
    #[error("{0}")]
    NotResumable(String),
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The run task ended abnormally.
    #[error("run task failed: {0}")]
    Task(String),
    /// The run was stopped where it was ([`crate::RunStopper::stop`]); it resumes from its
    /// log.
    #[error("run stopped where it was; it can be resumed")]
    Stopped,
}

impl Error {
    /// Whether retrying the same operation may succeed (journal hiccups); definition and
    /// replay errors are permanent.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Journal(JournalError::Backend(_)) | Error::Journal(JournalError::Busy { .. })
        )
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
