//! Sessions: where an agent's turns are recorded. An agent node of run R is session
//! `R:<node>` ([`SessionId::for_node`]); every activation of the node adds its turns to it,
//! so a node that runs again (a retry, a revision, a resume after a crash) continues the
//! numbering and, after a crash, its conversation.

use std::sync::Arc;

use futures::future::BoxFuture;
use trellis_agents::SessionSink;
use trellis_protocol::{
    NodeId, RunId, SessionEvent, SessionId, SessionOwner, StreamId, SubmissionId, WorkspaceEvent,
};
use trellis_runtime::sessions::{OpenedSession, Sessions};
use trellis_store::Store;

use super::bus::Bus;

/// Opens sessions and routes their events to the recorder.
pub struct SessionHub {
    bus: Bus,
    store: Arc<Store>,
}

impl SessionHub {
    pub(crate) fn new(bus: Bus, store: Arc<Store>) -> Self {
        Self { bus, store }
    }

    /// Every stored event of a session.
    pub fn history(&self, id: &SessionId) -> trellis_store::Result<Vec<SessionEvent>> {
        self.stored(id).map(|(events, _)| events)
    }

    /// The session's stored events and the seq of the last one (0: none).
    fn stored(&self, id: &SessionId) -> trellis_store::Result<(Vec<SessionEvent>, u64)> {
        let stored = self
            .store
            .stream_events(&StreamId::Session(id.clone()), 0, None)?;
        let last = stored.last().map_or(0, |e| e.seq);
        let events = stored
            .into_iter()
            .filter_map(|e| match e.event {
                trellis_protocol::ServiceEventBody::Session(s) => Some(s),
                _ => None,
            })
            .collect();
        Ok((events, last))
    }

    async fn open_agent_session(
        &self,
        run: &RunId,
        node: &NodeId,
        role: &str,
        attempt: u32,
        cause: Option<SubmissionId>,
    ) -> trellis_store::Result<OpenedSession> {
        let id = SessionId::for_node(run, node);
        // Everything this process recorded of the session must be readable before its
        // history is read; a session it never touched (every first activation of a node)
        // is complete in the store already.
        if self.bus.may_hold(&StreamId::Session(id.clone())) {
            self.bus.flush().await;
        }
        let (history, last) = self.stored(&id)?;
        // The recorder numbers the session's next events from there without reading the
        // store again (the run's claim keeps other processes off the session).
        self.bus.stored_up_to(&StreamId::Session(id.clone()), last);
        if history.is_empty() {
            let owner = SessionOwner::Agent {
                run: run.clone(),
                node: node.clone(),
                role: role.to_owned(),
            };
            self.bus.session(
                &id,
                cause.clone(),
                SessionEvent::SessionStarted {
                    owner: owner.clone(),
                },
            );
            self.bus.workspace(
                cause.clone(),
                WorkspaceEvent::SessionCreated {
                    session: id.clone(),
                    owner,
                },
            );
        }
        let first_turn = next_turn(&history);
        let recorded = unfinished_activation(&history, attempt);
        Ok(OpenedSession {
            sink: self.sink(&id, cause),
            id,
            first_turn,
            recorded,
        })
    }
}

impl Sessions for SessionHub {
    fn workspace(&self, cause: Option<SubmissionId>, event: WorkspaceEvent) {
        self.bus.workspace(cause, event);
    }

    fn sink(&self, id: &SessionId, cause: Option<SubmissionId>) -> SessionSink {
        let bus = self.bus.clone();
        let id = id.clone();
        Arc::new(move |event| bus.session(&id, cause.clone(), event))
    }

    fn open_agent<'a>(
        &'a self,
        run: &'a RunId,
        node: &'a NodeId,
        role: &'a str,
        attempt: u32,
        cause: Option<SubmissionId>,
    ) -> BoxFuture<'a, trellis_store::Result<OpenedSession>> {
        Box::pin(self.open_agent_session(run, node, role, attempt, cause))
    }
}

/// The number the next turn of a session takes.
pub(crate) fn next_turn(history: &[SessionEvent]) -> u32 {
    history
        .iter()
        .filter_map(|e| match e {
            SessionEvent::TurnStarted { turn, .. } => Some(*turn),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        + 1
}

/// The events of activation `attempt` when it started and did not finish: from its last
/// `promptSet` on, unless a `sessionCompleted` or `sessionError` follows.
pub(crate) fn unfinished_activation(history: &[SessionEvent], attempt: u32) -> Vec<SessionEvent> {
    let Some(start) = history
        .iter()
        .rposition(|e| matches!(e, SessionEvent::PromptSet { attempt: a, .. } if *a == attempt))
    else {
        return Vec::new();
    };
    let tail = &history[start..];
    let finished = tail.iter().any(|e| {
        matches!(
            e,
            SessionEvent::SessionCompleted { .. } | SessionEvent::SessionError { .. }
        )
    });
    if finished { Vec::new() } else { tail.to_vec() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(attempt: u32) -> SessionEvent {
        SessionEvent::PromptSet {
            attempt,
            messages: Vec::new(),
        }
    }

    #[test]
    fn unfinished_activation_is_the_tail_of_its_attempt() {
        let started = |turn| SessionEvent::TurnStarted {
            turn,
            attempt: 1,
            model: None,
        };
        let done = SessionEvent::SessionCompleted {
            output: serde_json::Value::Null,
        };
        let h = vec![prompt(1), started(1), done.clone(), prompt(2), started(2)];
        assert_eq!(unfinished_activation(&h, 2), h[3..].to_vec());
        assert!(
            unfinished_activation(&h, 1).is_empty(),
            "attempt 1 finished"
        );
        assert!(unfinished_activation(&h, 3).is_empty());
        assert_eq!(next_turn(&h), 3);
        assert_eq!(next_turn(&[]), 1);
    }

    /// A node's first activation reads its session without waiting for the recorder (the
    /// process never recorded anything of it); a second activation right after the first
    /// still sees what the first recorded, although it may not be committed yet.
    #[tokio::test]
    async fn a_reopened_session_sees_what_this_process_just_recorded() {
        let dir = tempfile::tempdir().expect("test");
        let store = Store::open_workspace(dir.path(), trellis_store::StoreOptions::default())
            .expect("test");
        let bus = Bus::start(store.clone(), crate::service::bus::RecordOptions::default());
        let hub = SessionHub::new(bus.clone(), store);
        let (run, node) = (RunId::from_string("r1"), NodeId::from("n"));
        let stream = StreamId::Session(SessionId::for_node(&run, &node));
        assert!(!bus.may_hold(&stream));
        let first = hub
            .open_agent_session(&run, &node, "coder", 1, None)
            .await
            .expect("test");
        assert_eq!(first.first_turn, 1);
        assert!(bus.may_hold(&stream));
        for turn in 1..=3 {
            (first.sink)(SessionEvent::TurnStarted {
                turn,
                attempt: 1,
                model: None,
            });
        }
        let again = hub
            .open_agent_session(&run, &node, "coder", 2, None)
            .await
            .expect("test");
        assert_eq!(again.first_turn, 4);
        let other = StreamId::Session(SessionId::for_node(&run, &NodeId::from("m")));
        assert!(!bus.may_hold(&other));
    }
}
