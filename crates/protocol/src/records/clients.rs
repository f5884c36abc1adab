//! Sessions of front-end clients (an editor's ACP sessions): a conversation whose every
//! prompt turn is a run, so a session survives the process that served it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::RunId;

/// One client session as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientSession {
    /// The client's session id.
    pub id: String,
    /// Which front-end owns it (`acp`).
    pub client: String,
    /// Its working directory (absolute).
    pub cwd: String,
    /// A title (the first prompt, shortened), once there is one.
    pub title: Option<String>,
    /// The session's settings (mode, config options) as JSON text; `{}` for none.
    pub config: String,
    /// When it was created (ms since the epoch); set by the store.
    #[serde(default)]
    pub created_ms: i64,
    /// Its last change (ms since the epoch); set by the store.
    #[serde(default)]
    pub updated_ms: i64,
}

/// One prompt turn of a client session: the run it started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientTurn {
    /// The session.
    pub session: String,
    /// Turn number within the session, from 1 (set by the store).
    #[serde(default)]
    pub turn: u32,
    /// The run the turn started.
    pub run: RunId,
    /// The prompt's text.
    pub request: String,
    /// The run's workflow.
    pub workflow: Option<String>,
    /// The run's planned stages, as the `startRun` result's `plan` (JSON text).
    pub plan: String,
    /// When it started (ms since the epoch); set by the store.
    #[serde(default)]
    pub created_ms: i64,
}
