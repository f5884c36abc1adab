//! Trellis agents (seed 000 layers 0 and 1, seed 001 prompt structure).
//!
//! - [`agent`]: the agent loop (model ↔ tools) with streaming progress, interrupts for
//!   approvals, questions and budgets, and a typed [`StageReport`] parsed with the normaliser;
//! - [`roles`]: roles as data files (`crates/agents/roles/*.yaml`, `.trellis/agents/`);
//! - [`prompt`]: the seed 001 prompt structure and context messages separated by kind;
//! - [`orchestrator`]: workflow and optional-stage selection with one structured call;
//! - [`retrieval`]: the retrieval agent (upfront context per stage, adaptive enrichment);
//! - [`interaction`]: the tools' [`Interaction`](trellis_tools::Interaction) backed by
//!   graph interrupts;
//! - [`usage`]: a run's budget ledger persisting every model call into the store and
//!   restoring what the run spent before.

pub mod agent;
pub mod config;
mod error;
pub mod interaction;
pub mod orchestrator;
pub mod output;
pub mod prompt;
pub mod retrieval;
pub mod roles;
pub mod usage;

pub use agent::{
    AgentOutcome, AgentReport, AgentRun, INTERRUPTED_TOOL, Inbox, Resume, SessionSink, SinkFactory,
};
pub use config::{AgentsConfig, RetrievalAgentConfig};
pub use error::{Error, Result};
pub use interaction::{GraphInteraction, PendingInput};
pub use orchestrator::{
    DecidedBy, Orchestration, Overrides, ProjectContext, StageDecision, orchestrate,
};
pub use output::StageReport;
pub use retrieval::{
    PackedItem, RetrievalAgent, RetrievalError, RetrievalMode, RetrievalOptions, SourceReport,
    StagePack,
};
pub use roles::{RoleCatalog, RoleSource, RoleSpec};
