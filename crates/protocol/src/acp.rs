//! Parameters of the `_trellis/...` extension methods of `trellis acp` (Agent Client
//! Protocol): graph control and change-set review from the editor. Every method names the ACP session; `run`
//! defaults to the session's latest run (it must be one of the session's runs).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{NodeId, Notification, ReviewAction};

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

/// `_trellis/requestChanges`: the runtime service's `requestChanges` op for one of the
/// session's runs — on a finished run's change set the stage that changed the files (or
/// `node`) runs again with the feedback, on a waiting review the node gets it. The request
/// lasts like a prompt turn: the revision streams as `session/update`s, its approvals and
/// its new change set come as permission requests, and `session/cancel` stops it.
pub const REQUEST_CHANGES_METHOD: &str = "_trellis/requestChanges";

/// `_trellis/question`: the one extension method the agent calls on the client — a
/// workflow's question (an interrupt of kind `question`) asked during a turn, answered with
/// free text. Only for a client that lists it in `initialize` under
/// `clientCapabilities._meta["trellis.dev/extensions"].methods`; other clients' turns answer
/// questions with "decide yourself".
pub const QUESTION_METHOD: &str = "_trellis/question";

/// The `_meta` key of a `session/request_permission` answer (the selected outcome) that
/// carries text the user typed with it: with a reject option, the rejection's comment — for a
/// human-review gate, the feedback its stage is revised with. Without it a rejection says
/// "rejected in the editor".
pub const FEEDBACK_META: &str = "trellis.dev/feedback";

/// `_trellis/question` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionParams {
    /// The ACP session.
    pub session_id: String,
    /// The tool call shown for the question in the session (`<node>/question-<n>`).
    pub tool_call_id: String,
    /// The node that asks.
    pub node: NodeId,
    /// The question.
    pub question: String,
}

/// `_trellis/question` result: the answer, or the question dismissed (the turn ends
/// cancelled and the run waits, resumable).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum QuestionResponse {
    /// Answered.
    Answered {
        /// The answer.
        answer: String,
    },
    /// Dismissed.
    Cancelled,
}

/// `_trellis/notification`: a notification (the agent tells the client) that a run of the
/// session needs input, failed or finished — the same [`Notification`] as a `[notify]`
/// webhook's body — for a client that lists it in `initialize` under
/// `clientCapabilities._meta["trellis.dev/extensions"].methods` and wants to alert its user
/// outside the thread (a window in the background). The session's updates say the same
/// things in the thread; this is the signal to raise.
pub const NOTIFICATION_METHOD: &str = "_trellis/notification";

/// `_trellis/notification` parameters: the ACP session, and the notification's fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationParams {
    /// The ACP session.
    pub session_id: String,
    /// What happened.
    #[serde(flatten)]
    pub notification: Notification,
}

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

/// `_trellis/requestChanges` parameters (the `requestChanges` op's fields).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequestChangesParams {
    /// The ACP session.
    pub session_id: String,
    /// One of the session's runs; default: its latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The stage (node) to revise; default: the waiting node, else the last stage that
    /// changed files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeId>,
    /// An artifact id, to request changes on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<i64>,
    /// What to change (line comments as `file:line: comment`, one a line, for instance).
    pub feedback: String,
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
