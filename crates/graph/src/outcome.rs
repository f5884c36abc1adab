//! [`RunOutcome`]: where a run stands, as the engine reports it (the engine builds it from
//! the run's state; a graph's continuation reads it).

use crate::state::State;

pub use trellis_protocol::records::NodeView;

/// Where a run stands: returned when it finishes or pauses, and by
/// [`Engine::inspect`](crate::Engine::inspect) — the wire's
/// [`RunState`](trellis_protocol::records::RunState) with the channel values as the engine
/// holds them; [`wire`] gives the wire's form.
pub type RunOutcome = trellis_protocol::records::RunState<State>;

/// `outcome` as the wire shows it (the channel values as one JSON object).
pub fn wire(outcome: &RunOutcome) -> trellis_protocol::records::RunState {
    outcome.clone().map_state(|s| s.to_json())
}
