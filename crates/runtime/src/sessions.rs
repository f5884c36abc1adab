//! Where a run's agents record their turns. The runtime service's session hub implements
//! [`Sessions`]; a run composed here only sees the trait, so the run's composition does not
//! depend on the service.

use futures::future::BoxFuture;
use trellis_agents::SessionSink;
use trellis_protocol::{NodeId, RunId, SessionEvent, SessionId, SubmissionId, WorkspaceEvent};

/// What an agent needs to record its activation.
pub struct OpenedSession {
    /// The session.
    pub id: SessionId,
    /// Where its events go.
    pub sink: SessionSink,
    /// The number of the next turn.
    pub first_turn: u32,
    /// The recorded events of this activation (from its `promptSet` on), when the process
    /// that ran it stopped before it finished; empty otherwise.
    pub recorded: Vec<SessionEvent>,
}

/// Records sessions and workspace events for a run's nodes.
pub trait Sessions: Send + Sync {
    /// Publishes a workspace event (an artifact's status, …) tagged with `cause`.
    fn workspace(&self, cause: Option<SubmissionId>, event: WorkspaceEvent);

    /// The sink of session `id`: events are tagged with `cause`.
    fn sink(&self, id: &SessionId, cause: Option<SubmissionId>) -> SessionSink;

    /// Opens (creating on first use) the session of agent `node` of `run` for activation
    /// `attempt`.
    fn open_agent<'a>(
        &'a self,
        run: &'a RunId,
        node: &'a NodeId,
        role: &'a str,
        attempt: u32,
        cause: Option<SubmissionId>,
    ) -> BoxFuture<'a, trellis_store::Result<OpenedSession>>;
}
