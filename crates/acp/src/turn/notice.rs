//! `_trellis/notification`: a client that takes it (`_meta` of `initialize`) is told when a
//! run its turn follows needs input, fails or finishes (docs/acp.md).

use agent_client_protocol::UntypedMessage;
use trellis_notify::Detector;
use trellis_protocol::acp::{NOTIFICATION_METHOD, NotificationParams};
use trellis_protocol::{Notification, RunId};

use super::Turn;
use crate::AcpAgent;

impl Turn {
    /// `_trellis/notification` (only called for a client that takes it).
    pub(super) fn notify(&self, notification: Notification) {
        let params = NotificationParams {
            session_id: self.session.0.to_string(),
            notification,
        };
        let sent = UntypedMessage::new(NOTIFICATION_METHOD, params)
            .and_then(|m| self.conn.send_notification(m));
        if let Err(e) = sent {
            tracing::warn!("{NOTIFICATION_METHOD} not sent: {e}");
        }
    }
}

impl AcpAgent {
    /// The detector of `run`'s notifications, its workflow named from the run's record (the
    /// turn's planning read the events that name it)).
    pub(super) async fn notices(&self, turn: &Turn, run: &RunId) -> Detector {
        let mut detector = Detector::default();
        let (service, id) = (turn.service.clone(), run.to_string());
        if let Ok(Ok(view)) = tokio::task::spawn_blocking(move || service.run_view(&id)).await
            && let Some(workflow) = view.workflow
        {
            detector.name_run(run, &workflow);
        }
        detector
    }
}
