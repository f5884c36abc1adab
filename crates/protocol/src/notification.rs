//! Notifications: a run needs input, failed or finished, as told to people outside the run —
//! the body of a `[notify]` webhook POST, the text of a desktop notification, the
//! `_trellis/notification` of ACP clients (docs/conventions.md, "Notifications").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{InterruptKind, NodeId, RunId};

/// What a run did that someone may want to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NotificationKind {
    /// The run waits for a person: a question, an approval or a review (an interrupt).
    Input,
    /// The run failed.
    Failed,
    /// The run succeeded.
    Finished,
}

impl NotificationKind {
    /// Every kind, in the order they are documented.
    pub const ALL: [NotificationKind; 3] = [
        NotificationKind::Input,
        NotificationKind::Failed,
        NotificationKind::Finished,
    ];

    /// The wire name (`input`, `failed`, `finished`).
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationKind::Input => "input",
            NotificationKind::Failed => "failed",
            NotificationKind::Finished => "finished",
        }
    }
}

/// One notification (version 1 of the webhook body).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// What happened.
    pub event: NotificationKind,
    /// The run.
    pub run: RunId,
    /// The run's workflow, when the process saw the run start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// `waiting_input`, `failed` or `succeeded`.
    pub outcome: String,
    /// One line for people: the question asked, the error, "succeeded".
    pub message: String,
    /// The node that asks (`input` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeId>,
    /// What it asks for (`input` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InterruptKind>,
    /// The run in the web UI, when the server's address is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The position of the event in the run's log: with `run` and `event`, the notification's
    /// identity (a receiver may drop a repeat of the same three).
    pub seq: u64,
    /// When it happened, RFC 3339 UTC (`2026-12-01T13:05:25.123Z`).
    pub timestamp: String,
}

impl Notification {
    /// The notification's identity: `<run>:<event>:<seq>` (the `X-Trellis-Delivery` header).
    pub fn id(&self) -> String {
        format!("{}:{}:{}", self.run, self.event.as_str(), self.seq)
    }

    /// A title for a desktop notification (`Trellis: run 1a2b3c4d needs input`).
    pub fn title(&self) -> String {
        let what = match self.event {
            NotificationKind::Input => "needs input",
            NotificationKind::Failed => "failed",
            NotificationKind::Finished => "finished",
        };
        match &self.workflow {
            Some(w) => format!("Trellis: {w} run {} {what}", self.run.short()),
            None => format!("Trellis: run {} {what}", self.run.short()),
        }
    }
}
