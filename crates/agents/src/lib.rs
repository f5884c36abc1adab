//! Trellis agents: the orchestrator, the agent loop, the retrieval agent and the prompt
//! structure (`docs/workflows.md`, "Roles").
//!
//! - [`agent`]: the agent loop (model ↔ tools) with streaming progress, interrupts for
//!   approvals, questions and budgets, and a typed [`StageReport`] parsed with the normaliser;
//! - [`roles`]: roles as data files (`crates/agents/roles/*.yaml`, `.trellis/agents/`);
//! - [`prompt`]: the prompt structure and context messages separated by kind;
//! - [`context`]: per-role input caps, the summarisation middleware and tool-output handles
//!   that keep every prompt inside its cap and its model's window (`docs/context.md`);
//! - [`compress`]: handoff fields compressed to their limits (model summary, deterministic
//!   fallback, every repair logged);
//! - [`orchestrator`]: workflow and optional-stage selection with one structured call;
//! - [`retrieval`]: the retrieval agent (upfront context per stage, adaptive enrichment);
//! - [`interaction`]: the tools' [`Interaction`](trellis_tools::Interaction) backed by
//!   graph interrupts;
//! - [`usage`]: a run's budget ledger persisting every model call into the store and
//!   restoring what the run spent before.

pub mod agent;
pub mod compress;
pub mod config;
pub mod context;
mod error;
pub mod interaction;
pub mod orchestrator;
pub mod output;
pub mod prompt;
pub mod retrieval;
pub mod roles;
pub mod usage;

pub use agent::{
    AgentOutcome, AgentReport, AgentRun, EXECUTE_DAG, INTERRUPTED_TOOL, Inbox, PathNotes,
    REPLAN_DAG, Resume, SEARCH_TOOLS, ScriptLanguage, ScriptRun, SessionSink, SinkFactory,
    TestOutcome, TestProbe,
};
pub use compress::{Compressed, FieldRepair, FieldRepairMethod, compress_field};
pub use config::{AgentsConfig, RetrievalAgentConfig};
pub use context::{ContextConfig, ContextPolicy};
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
