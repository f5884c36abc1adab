//! The session events of a turn's usage and of tool calls, and what a finished call keeps
//! until it goes back to the model.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_llm::{ToolCall, Usage};
use trellis_protocol::{SessionEvent, ToolStatus, TurnUsage};
use trellis_tools::ToolResult;

/// A turn's token usage as the events report it.
pub(super) fn turn_usage(u: &Usage) -> TurnUsage {
    TurnUsage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
    }
}

/// How a tool call ended, from the registry's result: a cancellation, a denial (by the
/// policy or the user: the tools' `denied: …` error), another error, or a success.
pub(super) fn status_of(result: &ToolResult) -> ToolStatus {
    if result.cancelled {
        ToolStatus::Cancelled
    } else if !result.is_error {
        ToolStatus::Ok
    } else if result.content.starts_with("denied:") {
        ToolStatus::Denied
    } else {
        ToolStatus::Error
    }
}

/// A call that ran beside others, waiting for its turn to go back to the model.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Finished {
    pub(super) content: String,
    pub(super) status: ToolStatus,
    pub(super) duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) data: Option<Value>,
}

/// The `ToolStarted` event of `call`.
pub(super) fn tool_started(turn: u32, call: &ToolCall) -> SessionEvent {
    SessionEvent::ToolStarted {
        turn,
        call_id: call.id.clone(),
        name: call.name.clone(),
        input: match call.arguments_json() {
            Ok(v) => v,
            Err(_) => Value::String(call.arguments.clone()),
        },
    }
}

/// The `ToolCompleted` event of `call` after `duration_ms`.
pub(super) fn completed(
    turn: u32,
    call: &ToolCall,
    output: String,
    status: ToolStatus,
    duration_ms: u64,
) -> SessionEvent {
    SessionEvent::ToolCompleted {
        turn,
        call_id: call.id.clone(),
        name: call.name.clone(),
        output,
        status,
        duration_ms,
    }
}

/// The `ToolCompleted` event of `call`.
pub(super) fn tool_completed(
    turn: u32,
    call: &ToolCall,
    output: String,
    status: ToolStatus,
    clock: Instant,
) -> SessionEvent {
    completed(
        turn,
        call,
        output,
        status,
        u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX),
    )
}
