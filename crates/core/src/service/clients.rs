//! Sessions of front-end clients (an editor's ACP sessions), recorded through ops so every
//! front-end of one process shares them: a client session, and its prompt turns, each naming
//! the run it started.

use serde_json::json;
use trellis_protocol::records::{ClientSession, ClientTurn};

use super::{OpError, OpResult, Service, blocking};

impl Service {
    /// `recordClientSession`: inserts the session or updates its title and settings.
    pub(crate) async fn record_client_session(&self, session: ClientSession) -> OpResult {
        if session.id.trim().is_empty() || session.client.trim().is_empty() {
            return Err(OpError::new(
                "a client session needs a non-empty `id` and `client`",
            ));
        }
        let store = self.runtime.store().clone();
        let stored = blocking(move || Ok(store.put_client_session(session)?)).await?;
        serde_json::to_value(stored)
            .map_err(|e| OpError::internal(format!("encoding a client session: {e}")))
    }

    /// `recordClientTurn`: appends a prompt turn to a recorded client session.
    pub(crate) async fn record_client_turn(&self, turn: ClientTurn) -> OpResult {
        let store = self.runtime.store().clone();
        let n = blocking(move || {
            if store.client_session(&turn.session)?.is_none() {
                return Err(OpError::not_found(format!(
                    "no client session `{}`: record it with `recordClientSession` first",
                    turn.session
                )));
            }
            Ok(store.add_client_turn(turn)?)
        })
        .await?;
        Ok(json!({ "turn": n }))
    }
}
