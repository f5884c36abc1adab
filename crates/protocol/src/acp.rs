//! Parameters of the `_trellis/...` extension methods of `trellis acp` (Agent Client
//! Protocol): graph control and change-set review from the editor. Every method names the ACP session; `run`
//! defaults to the session's latest run (it must be one of the session's runs).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{NodeId, ReviewAction};

/// `_trellis/graph`: the run's graph as it stands (nodes, states, attempts).
pub const GRAPH_METHOD: &str = "_trellis/graph";
/// `_trellis/message`: a message to a node (delivered before a running agent's next model
/// call, buffered for one that has not started).
pub const MESSAGE_METHOD: &str = "_trellis/message";
/// `_trellis/prune`: prune a ready or running node (its edits rolled back).
pub const PRUNE_METHOD: &str = "_trellis/prune";

/// `_trellis/review`: a review op on a run's change set (show it, select hunks, apply the
/// accepted ones, reject, undo) — the runtime service's `review` op for one of the session's
/// runs.
pub const REVIEW_METHOD: &str = "_trellis/review";

/// `_trellis/graph` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GraphParams {
    /// The ACP session.
    pub session_id: String,
    /// One of the session's runs; default: its latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

/// `_trellis/message` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageNodeParams {
    /// The ACP session.
    pub session_id: String,
    /// One of the session's runs; default: its latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The node (its id in the run's graph, as `_trellis/graph` lists it).
    pub node: NodeId,
    /// The message.
    pub text: String,
}

/// `_trellis/prune` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PruneNodeParams {
    /// The ACP session.
    pub session_id: String,
    /// One of the session's runs; default: its latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The node.
    pub node: NodeId,
    /// Also prune the nodes it routes to that have not run.
    #[serde(default)]
    pub subtree: bool,
    /// Why, for the audit trail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `_trellis/review` parameters: the session, the run, and the review action's fields
/// (`{"action": "show"}`, `{"action": "apply", "accept": [{"file", "hunks"}]}`, …).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewParams {
    /// The ACP session.
    pub session_id: String,
    /// One of the session's runs; default: its latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// What to do.
    #[serde(flatten)]
    pub action: ReviewAction,
}
