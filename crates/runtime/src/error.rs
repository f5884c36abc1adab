//! Errors of the runtime.

/// A runtime error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Configuration.
    #[error(transparent)]
    Config(#[from] trellis_config::Error),
    /// Models.
    #[error(transparent)]
    Model(#[from] trellis_llm::Error),
    /// Tools, worktrees.
    #[error(transparent)]
    Tools(#[from] trellis_tools::Error),
    /// The store.
    #[error(transparent)]
    Store(#[from] trellis_store::Error),
    /// Workflows and plans.
    #[error(transparent)]
    Workflow(#[from] trellis_workflow::Error),
    /// Agents, roles, the orchestrator.
    #[error(transparent)]
    Agents(#[from] trellis_agents::Error),
    /// The engine.
    #[error(transparent)]
    Graph(#[from] trellis_graph::Error),
    /// The index.
    #[error(transparent)]
    Index(#[from] trellis_index::Error),
    /// MCP servers.
    #[error(transparent)]
    Mcp(#[from] trellis_mcp::Error),
    /// The MCP gateway cannot serve.
    #[error("{0}")]
    Gateway(String),
    /// A run cannot be resumed.
    #[error("{0}")]
    Resume(String),
}

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
