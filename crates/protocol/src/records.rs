//! What the runtime service answers about a workspace's records: runs and their checkpoints,
//! model usage, agent and channel sessions with their turns, change sets and tool calls, the
//! sessions of editor clients, the tool knowledge graph. The store writes and reads these
//! rows; every front-end receives them through the runtime service's queries, never from the
//! store.

mod changes;
mod clients;
mod instructions;
mod runs;
mod sessions;
mod tools;
mod usage;

pub use changes::{ChangeOpRecord, ChangeSetRecord, ToolCallRecord};
pub use clients::{ClientSession, ClientTurn};
pub use instructions::{
    INSTRUCTIONS_ARTIFACT, IncludedRecord, InstructionFileRecord, InstructionsUsed,
};
pub use runs::{
    Checkpoint, NodeView, Owner, RunFilter, RunGraph, RunGroup, RunPlanned, RunRecord, RunState,
    RunSummary, RunView, files_changed,
};
pub use sessions::{
    SessionFilter, SessionRecord, SessionStatus, TurnRecord, TurnStatus, TurnToolRecord,
};
pub use tools::{SpeculationReport, ToolEdge, ToolGraphView, ToolNode};
pub use usage::{ModelCallRecord, RunUsage, UsageTotals};

/// The workflows a run can use, and the workflow files that failed to load.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowCatalog {
    /// One entry per workflow: name, description, source, stages (docs/workflows.md).
    pub workflows: serde_json::Value,
    /// Each file that failed to load, with the reason.
    pub errors: Vec<String>,
}
