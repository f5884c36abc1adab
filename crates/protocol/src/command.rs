//! Commands a client sends to a live (or paused) run, and the payloads they carry.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::NodeId;

/// A command on a run (docs/engine.md, "Commands on a live run").
///
/// Commands are recorded in the run's event log (`commandReceived`) before they take effect;
/// a command that cannot apply is answered with `commandRefused` and a reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Command {
    /// Send a message to a node: buffered while it is READY or WAITING_INPUT, delivered to the
    /// mailbox of a RUNNING handler, refused once the node is final (a FAILED or COMPLETED
    /// node takes a [`Command::Revise`] instead).
    SendMessage {
        /// Target node.
        node: NodeId,
        /// The message.
        message: Message,
    },
    /// Prune a node and every node it spawned (cascading). Running handlers are cancelled;
    /// COMPLETED and FAILED nodes cannot be pruned.
    Prune {
        /// Root of the pruned subtree.
        node: NodeId,
        /// Why, for the audit trail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Add nodes (instances of the graph's templates) and unconditional edges.
    Inject {
        /// New nodes.
        #[serde(default)]
        nodes: Vec<InjectNode>,
        /// New edges.
        #[serde(default)]
        edges: Vec<EdgeSpec>,
    },
    /// Answer a node waiting on an interrupt.
    Answer {
        /// The WAITING_INPUT node.
        node: NodeId,
        /// The answer handed to the node's handler when it runs again.
        answer: Answer,
    },
    /// Request a revision (a review's NEEDS_REVISION, a user's "request changes"): run a node
    /// whose latest activation is COMPLETED or FAILED again, as a new activation with
    /// `message` in its `messages`; routing then continues after it as usual. Reopens a run
    /// that has succeeded or failed (not a cancelled one). Refused for active nodes (send a
    /// message instead), pruned, skipped or never-reached nodes, and when the node's
    /// `max_attempts` would be exceeded.
    Revise {
        /// The node to run again.
        node: NodeId,
        /// The feedback handed to the new activation.
        message: Message,
    },
    /// Cancel the run: prune everything that has not finished and stop.
    Cancel {
        /// Why, for the audit trail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl Command {
    /// A short name for logs and tables.
    pub fn name(&self) -> &'static str {
        match self {
            Command::SendMessage { .. } => "sendMessage",
            Command::Prune { .. } => "prune",
            Command::Inject { .. } => "inject",
            Command::Answer { .. } => "answer",
            Command::Revise { .. } => "revise",
            Command::Cancel { .. } => "cancel",
        }
    }
}

/// A user (or agent) message to a node's agent (`graph:agent_message_received`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// The text.
    pub text: String,
    /// Who sent it (`user`, an agent name…), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl Message {
    /// A message from the user.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            from: Some("user".into()),
        }
    }
}

/// What a node asks when it stops in WAITING_INPUT.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    /// Question, approval or review.
    pub kind: InterruptKind,
    /// The text shown to the person answering.
    pub prompt: String,
    /// Structured details (a diff summary, options…).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub data: Value,
}

impl Interrupt {
    /// A free-text question.
    pub fn question(prompt: impl Into<String>) -> Self {
        Self {
            kind: InterruptKind::Question,
            prompt: prompt.into(),
            data: Value::Null,
        }
    }

    /// A yes/no approval gate.
    pub fn approval(prompt: impl Into<String>) -> Self {
        Self {
            kind: InterruptKind::Approval,
            prompt: prompt.into(),
            data: Value::Null,
        }
    }

    /// A human review request: the node waits for a person to approve it or ask for a revision.
    pub fn review(prompt: impl Into<String>) -> Self {
        Self {
            kind: InterruptKind::Review,
            prompt: prompt.into(),
            data: Value::Null,
        }
    }
}

/// The kind of an [`Interrupt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum InterruptKind {
    /// Expects free text.
    Question,
    /// Expects approve / reject (with an optional comment).
    Approval,
    /// Expects approve / request revision with feedback.
    Review,
}

/// An answer to an interrupt. Approvals are `{"approved": bool, "comment": …}`; questions are
/// any JSON value, usually a string.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Answer(pub Value);

impl Answer {
    /// Free text.
    pub fn text(text: impl Into<String>) -> Self {
        Self(Value::String(text.into()))
    }

    /// An approval.
    pub fn approve() -> Self {
        Self(serde_json::json!({ "approved": true }))
    }

    /// A rejection with the reason.
    pub fn reject(comment: impl Into<String>) -> Self {
        Self(serde_json::json!({ "approved": false, "comment": comment.into() }))
    }

    /// Whether this answer approves (`{"approved": true}`, `true`, or the text `yes`/`approve`).
    pub fn is_approval(&self) -> bool {
        match &self.0 {
            Value::Bool(b) => *b,
            Value::String(s) => {
                matches!(
                    s.trim().to_ascii_lowercase().as_str(),
                    "y" | "yes" | "approve" | "approved"
                )
            }
            Value::Object(o) => o.get("approved").and_then(Value::as_bool).unwrap_or(false),
            _ => false,
        }
    }
}

/// A node to add to a live run, instantiated from one of the graph's templates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InjectNode {
    /// The new node's id (must be unused).
    pub id: NodeId,
    /// Template (handler) name registered on the graph.
    pub template: String,
    /// Input handed to the handler.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub input: Value,
    /// Parent in the spawn tree (pruning the parent prunes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<NodeId>,
    /// Schedule it in the next step (otherwise it runs when an edge reaches it).
    #[serde(default)]
    pub activate: bool,
}

/// An unconditional edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeSpec {
    /// Source node.
    pub from: NodeId,
    /// Target node.
    pub to: NodeId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revise_has_a_camel_case_wire_form() {
        let c = Command::Revise {
            node: NodeId::new("review"),
            message: Message::user("handle the empty list"),
        };
        let s = serde_json::to_string(&c).unwrap();
        assert_eq!(
            s,
            r#"{"type":"revise","node":"review","message":{"text":"handle the empty list","from":"user"}}"#
        );
        assert_eq!(serde_json::from_str::<Command>(&s).unwrap(), c);
        assert_eq!(c.name(), "revise");
    }
}
