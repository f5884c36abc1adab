//! [`RunOutcome`]: where a run stands, as the engine reports it (the engine builds it from
//! the run's state; a graph's continuation reads it).

use std::collections::BTreeMap;

use serde::Serialize;
use trellis_protocol::{Interrupt, NodeId, RunId, RunStatus};

use crate::state::State;

pub use trellis_protocol::records::NodeView;

/// Where a run stands: returned when it finishes or pauses, and by [`Engine::inspect`](crate::Engine::inspect).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunOutcome {
    /// The run.
    pub run: RunId,
    /// Its status.
    pub status: RunStatus,
    /// Terminal reached.
    pub terminal: Option<NodeId>,
    /// Error text for failures.
    pub error: Option<String>,
    /// Steps executed.
    pub steps: u64,
    /// Seq of the last event.
    pub last_seq: u64,
    /// Final (or current) channel values.
    #[serde(serialize_with = "ser_state")]
    pub state: State,
    /// Named counters.
    pub counters: BTreeMap<String, i64>,
    /// Every node.
    pub nodes: Vec<NodeView>,
    /// Questions waiting for an answer.
    pub waiting: Vec<(NodeId, Interrupt)>,
}

fn ser_state<S: serde::Serializer>(state: &State, s: S) -> std::result::Result<S::Ok, S::Error> {
    state.to_json().serialize(s)
}

impl RunOutcome {
    /// The outcome as the wire shows it (the channel values as one JSON object).
    pub fn to_state(&self) -> trellis_protocol::records::RunState {
        trellis_protocol::records::RunState {
            run: self.run.clone(),
            status: self.status,
            terminal: self.terminal.clone(),
            error: self.error.clone(),
            steps: self.steps,
            last_seq: self.last_seq,
            state: self.state.to_json(),
            counters: self.counters.clone(),
            nodes: self.nodes.clone(),
            waiting: self.waiting.clone(),
        }
    }

    /// The node view for `id`.
    pub fn node(&self, id: &str) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.id == id)
    }
}
