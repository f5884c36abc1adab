//! Tool calls and change sets: what the agents ran, and each run's batch of changes with
//! its review state and the applies, undos and redos of it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::RunId;

/// One recorded tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    /// Row id (0 before insertion).
    pub id: i64,
    /// The run, if the call belonged to one.
    pub run_id: Option<RunId>,
    /// The graph node, if known.
    pub node_id: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// The arguments, as JSON text.
    pub args: String,
    /// How it was authorised (`auto`, `allowed`, `approved`, `denied`, `policy_denied`).
    pub decision: String,
    /// Whether the result was an error.
    pub is_error: bool,
    /// A short summary of the result.
    pub summary: String,
    /// Wall time of the call.
    pub duration_ms: i64,
    /// When it started (ms since epoch).
    pub started_at: i64,
}

/// A run's change set and its review state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeSetRecord {
    /// The run.
    pub run_id: RunId,
    /// The user's repository (working tree root).
    pub repo: String,
    /// The run's branch (`trellis/run-<id>`).
    pub branch: String,
    /// The commit the run started from (HEAD plus the user's uncommitted changes).
    pub base_commit: String,
    /// The worktree directory while it exists.
    pub worktree: Option<String>,
    /// Review state.
    pub state: String,
    /// The last review outcome, as JSON text.
    pub review: Option<String>,
    /// Creation time (ms since epoch).
    pub created_at: i64,
    /// Last update (ms since epoch).
    pub updated_at: i64,
}

/// One apply / undo / redo of a change set onto the user's working tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeOpRecord {
    /// The run.
    pub run_id: RunId,
    /// Order within the run, from 1.
    pub seq: i64,
    /// `apply`, `undo` or `redo`.
    pub kind: String,
    /// `pending` or `done`.
    pub state: String,
    /// The operation's journal directory.
    pub journal: String,
    /// Files it touches.
    pub files: i64,
    /// When it was prepared (ms since epoch).
    pub created_at: i64,
    /// When it completed.
    pub finished_at: Option<i64>,
}
