//! Channel sessions (the discussion agent): a conversation about the codebase with
//! read-only tools, persisted as a session stream and resumable, running beside workflow
//! runs on the same workspace.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_protocol::{SessionEvent, SessionId, SessionOwner, SubmissionId, WorkspaceEvent};

use super::{OpError, OpResult, Service, lock};

/// A channel session known to this service.
pub(crate) struct Channel {
    pub id: SessionId,
    pub channel: String,
    /// Cancels the turn in progress.
    turn: Mutex<CancellationToken>,
    /// One turn at a time.
    busy: tokio::sync::Mutex<()>,
}

impl Channel {
    fn new(id: SessionId, channel: String) -> Self {
        Self {
            id,
            channel,
            turn: Mutex::new(CancellationToken::new()),
            busy: tokio::sync::Mutex::new(()),
        }
    }

    pub fn cancel(&self) {
        lock(&self.turn).cancel();
    }
}

impl Service {
    pub(crate) async fn start_channel(
        self: &Arc<Self>,
        sub: &SubmissionId,
        channel: String,
        message: Option<String>,
    ) -> OpResult {
        if channel.trim().is_empty() {
            return Err(OpError::new("a channel needs a name"));
        }
        let id = SessionId::new();
        let owner = SessionOwner::Channel {
            channel: channel.clone(),
        };
        self.bus.session(
            &id,
            Some(sub.clone()),
            SessionEvent::SessionStarted {
                owner: owner.clone(),
            },
        );
        self.bus.workspace(
            Some(sub.clone()),
            WorkspaceEvent::SessionCreated {
                session: id.clone(),
                owner,
            },
        );
        lock(&self.channels).insert(id.clone(), Arc::new(Channel::new(id.clone(), channel)));
        // The session is in the store before its id is handed out: a client that reads it
        // right away finds it.
        self.bus.flush().await;
        let mut out = json!({ "session": id });
        if let Some(text) = message {
            let answer = self.session_message(sub, &id, text).await?;
            out["answer"] = answer["answer"].clone();
        }
        Ok(out)
    }

    /// The channel of a session, loading it from the store after a restart.
    fn channel(&self, session: &SessionId) -> Result<Arc<Channel>, OpError> {
        if let Some(c) = lock(&self.channels).get(session) {
            return Ok(c.clone());
        }
        let rec = self.runtime.store().session(session)?;
        let channel = match rec.owner {
            SessionOwner::Channel { channel } => channel,
            SessionOwner::Agent { run, node, .. } => {
                return Err(OpError::conflict(format!(
                    "session {session} is agent `{node}` of run {run}; send the message to that node instead"
                )));
            }
        };
        let c = Arc::new(Channel::new(session.clone(), channel));
        lock(&self.channels).insert(session.clone(), c.clone());
        Ok(c)
    }

    pub(crate) async fn session_message(
        self: &Arc<Self>,
        sub: &SubmissionId,
        session: &SessionId,
        text: String,
    ) -> OpResult {
        // An agent's session takes the message through its run's node (a message received
        // by the running agent, `docs/events.md`); a channel's answers it.
        if !lock(&self.channels).contains_key(session)
            && let SessionOwner::Agent { run, node, .. } =
                self.runtime.store().session(session)?.owner
        {
            let message = trellis_protocol::Message::user(text);
            let command = trellis_protocol::Command::SendMessage { node, message };
            return self.deliver(sub, &run, command).await;
        }
        let channel = self.channel(session)?;
        let _turn = channel.busy.lock().await;
        let cancel = self.shutdown.child_token();
        *lock(&channel.turn) = cancel.clone();
        let answer = super::discussion::answer(self, sub, &channel.id, &text, cancel).await?;
        Ok(json!({ "session": session, "channel": channel.channel, "answer": answer }))
    }

    pub(crate) fn cancel_session(&self, session: &SessionId) -> OpResult {
        match lock(&self.channels).get(session) {
            Some(c) => {
                c.cancel();
                Ok(json!({ "session": session, "cancelled": true }))
            }
            None => Err(OpError::conflict(format!(
                "session {session} has no turn in progress in this service"
            ))),
        }
    }
}
