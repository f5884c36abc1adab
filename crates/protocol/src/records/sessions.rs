//! Agent and channel sessions and their turns: each turn a model call with the user
//! messages before it, its text, thoughts and tool calls.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{RunId, SessionId, SessionOwner, ToolStatus, TurnUsage};

/// Where a session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Started and neither completed nor failed (also a session whose process died).
    Running,
    /// `sessionCompleted`.
    Completed,
    /// `sessionError`.
    Error,
}

impl SessionStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Running => "running",
            SessionStatus::Completed => "completed",
            SessionStatus::Error => "error",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => SessionStatus::Running,
            "completed" => SessionStatus::Completed,
            "error" => SessionStatus::Error,
            _ => return None,
        })
    }
}

/// Where a turn stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// Its model call has not started: only user messages are recorded for it so far.
    Pending,
    /// The model call started and has not ended (or its process died).
    Running,
    /// The model call finished.
    Completed,
    /// The model call failed.
    Failed,
}

impl TurnStatus {
    /// The stored name (`pending` is never stored: such turns have no `turns` row).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Pending => "pending",
            TurnStatus::Running => "running",
            TurnStatus::Completed => "completed",
            TurnStatus::Failed => "failed",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => TurnStatus::Pending,
            "running" => TurnStatus::Running,
            "completed" => TurnStatus::Completed,
            "failed" => TurnStatus::Failed,
            _ => return None,
        })
    }
}

/// Which sessions a session listing returns (every field narrows; default: all).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionFilter {
    /// Only the agent sessions of this run.
    pub run: Option<RunId>,
    /// Only the sessions of this channel.
    pub channel: Option<String>,
    /// At most this many (newest first).
    pub limit: Option<usize>,
}

/// One session as recorded in the `sessions` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    /// The session.
    pub id: SessionId,
    /// Whose session it is.
    pub owner: SessionOwner,
    /// Where it stands.
    pub status: SessionStatus,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it started (ms since the epoch).
    pub created_ms: i64,
    /// Its last event's time (ms since the epoch).
    pub updated_ms: i64,
    /// Its stream's last seq.
    pub last_seq: u64,
}

/// One turn of a session: a model call, with the user messages that precede it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnRecord {
    /// Turn number within the session, from 1.
    pub turn: u32,
    /// The node's activation number (0 for channels and pending turns).
    pub attempt: u32,
    /// Where it stands.
    pub status: TurnStatus,
    /// When the model call started (ms since the epoch); `None` while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
    /// When it completed or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// Tokens (zero until completed).
    pub usage: TurnUsage,
    /// The assistant's text (the message deltas, concatenated).
    pub text: String,
    /// The user messages that precede the model call, oldest first.
    pub user_texts: Vec<String>,
    /// The thinking text (the thought deltas, concatenated).
    pub thoughts: String,
    /// The tool calls the turn asked for, in the order they started.
    pub tools: Vec<TurnToolRecord>,
    /// The assistant message (provider message JSON), once completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Value>,
    /// Why the model call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl TurnRecord {
    /// A turn whose model call has not started.
    pub fn pending(turn: u32) -> Self {
        Self {
            turn,
            attempt: 0,
            status: TurnStatus::Pending,
            started_ms: None,
            finished_ms: None,
            usage: TurnUsage::default(),
            text: String::new(),
            user_texts: Vec::new(),
            thoughts: String::new(),
            tools: Vec::new(),
            message: None,
            error: None,
        }
    }
}

/// One tool call of a turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnToolRecord {
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// Its arguments (`null` when only its completion was recorded).
    pub input: Value,
    /// What went back to the model, once completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// How it ended; `None` (`"running"` in JSON) while it runs — or when its process died
    /// before it completed, which the service reports as interrupted.
    #[serde(with = "running_or")]
    #[schemars(with = "String")]
    pub status: Option<ToolStatus>,
    /// When it started (ms since the epoch).
    pub started_ms: i64,
    /// Wall time, once completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// A tool call's status in JSON: the [`ToolStatus`] name, or `"running"`.
mod running_or {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::ToolStatus;

    pub(super) fn serialize<S: Serializer>(
        v: &Option<ToolStatus>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(status) => status.serialize(s),
            None => s.serialize_str("running"),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<ToolStatus>, D::Error> {
        let name = String::deserialize(d)?;
        if name == "running" {
            return Ok(None);
        }
        ToolStatus::parse(&name)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown tool status '{name}'")))
    }
}
