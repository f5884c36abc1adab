//! The crate's error type.

/// Errors of the tool graph.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] trellis_store::Error),
    /// The embedder failed.
    #[error("tool search could not embed: {0}")]
    Embedding(#[from] trellis_index::Error),
    /// An execution named a data dependency between calls it does not have.
    #[error(
        "data dependency {from} → {to} names a call the execution does not have (it has {calls} \
         calls, numbered from 0) or a call feeding itself; fix the execution's data_edges"
    )]
    BadDataEdge {
        /// The producing call's index.
        from: usize,
        /// The consuming call's index.
        to: usize,
        /// The number of calls.
        calls: usize,
    },
    /// A graph algorithm (graphrs) refused the graph.
    #[error("the tool graph's {algorithm} failed: {detail}")]
    Algorithm {
        /// Which algorithm.
        algorithm: &'static str,
        /// What it said.
        detail: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
