//! The node state machine (docs/engine.md, "Node states").

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The state of one node activation.
///
/// ```text
/// READY ──► RUNNING ──► COMPLETED | FAILED | WAITING_INPUT
///   │          │  └──► READY      (re-queued: the process died while it ran)
///   │          └────► PRUNED
///   └──► PRUNED | SKIPPED
/// WAITING_INPUT ──► READY (answer submitted) | PRUNED
/// ```
///
/// COMPLETED, FAILED, PRUNED and SKIPPED are final. A node waiting for a human review is
/// represented by WAITING_INPUT with an interrupt of kind `review`, so clients see one
/// waiting state.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NodeState {
    /// Created, waiting to be scheduled.
    Ready,
    /// Its handler is executing.
    Running,
    /// Finished successfully; its result is recorded.
    Completed,
    /// Finished with a failure outcome or an error; its result or error is recorded.
    Failed,
    /// Stopped on an interrupt, waiting for an answer.
    WaitingInput,
    /// Removed by a user or by cancellation; produces no output.
    Pruned,
    /// Bypassed (a planned-but-skipped stage); routes on as a success with no output.
    Skipped,
}

impl NodeState {
    /// Every state, in lifecycle order.
    pub const ALL: [NodeState; 7] = [
        NodeState::Ready,
        NodeState::Running,
        NodeState::Completed,
        NodeState::Failed,
        NodeState::WaitingInput,
        NodeState::Pruned,
        NodeState::Skipped,
    ];

    /// Whether no further transition is possible.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            NodeState::Completed | NodeState::Failed | NodeState::Pruned | NodeState::Skipped
        )
    }

    /// Whether `self → to` is an edge of the state machine.
    pub fn can_transition_to(self, to: NodeState) -> bool {
        use NodeState::*;
        matches!(
            (self, to),
            (Ready, Running | Pruned | Skipped)
                | (Running, Completed | Failed | WaitingInput | Pruned | Ready)
                | (WaitingInput, Ready | Pruned)
        )
    }

    /// Checks `self → to` against the state machine.
    pub fn transition(self, to: NodeState) -> Result<NodeState, InvalidTransition> {
        if self.can_transition_to(to) {
            Ok(to)
        } else {
            Err(InvalidTransition { from: self, to })
        }
    }

    /// The upper-case name used on the wire and in the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Ready => "READY",
            NodeState::Running => "RUNNING",
            NodeState::Completed => "COMPLETED",
            NodeState::Failed => "FAILED",
            NodeState::WaitingInput => "WAITING_INPUT",
            NodeState::Pruned => "PRUNED",
            NodeState::Skipped => "SKIPPED",
        }
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A transition the state machine does not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidTransition {
    /// Current state.
    pub from: NodeState,
    /// Requested state.
    pub to: NodeState,
}

impl fmt::Display for InvalidTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid node transition {} → {}", self.from, self.to)
    }
}

impl std::error::Error for InvalidTransition {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_states_have_no_exit() {
        for from in NodeState::ALL.iter().copied().filter(|s| s.is_final()) {
            for to in NodeState::ALL {
                assert!(
                    from.transition(to).is_err(),
                    "{from} → {to} must be refused"
                );
            }
        }
    }

    #[test]
    fn lifecycle_edges() {
        use NodeState::*;
        assert!(Ready.transition(Running).is_ok());
        assert!(Running.transition(WaitingInput).is_ok());
        assert!(WaitingInput.transition(Ready).is_ok());
        assert!(Ready.transition(Completed).is_err());
        assert!(WaitingInput.transition(Completed).is_err());
        assert!(Running.transition(Skipped).is_err());
        let err = Ready.transition(Failed).unwrap_err();
        assert_eq!(err.to_string(), "invalid node transition READY → FAILED");
    }

    #[test]
    fn wire_names() {
        assert_eq!(
            serde_json::to_string(&NodeState::WaitingInput).unwrap(),
            "\"WAITING_INPUT\""
        );
    }
}
