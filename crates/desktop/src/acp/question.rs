//! `_trellis/question`: a workflow's question, asked by the agent during a turn (the one
//! request `trellis acp` sends the client beyond ACP's own), answered with text from the
//! window. The client lists the method in `initialize` so the agent asks instead of letting
//! the run decide.

use serde_json::Value;
pub use trellis_protocol::acp::{QUESTION_METHOD, QuestionParams, QuestionResponse};

use super::event::PermissionAsk;

impl PermissionAsk {
    /// A question as the window shows it: answered with text, no options.
    pub(crate) fn question(id: u64, q: &QuestionParams) -> Self {
        Self {
            id,
            session: agent_client_protocol::v1::schema::SessionId::new(q.session_id.clone()),
            tool_call: q.tool_call_id.clone(),
            title: format!("{} asks: {}", q.node, q.question),
            kind: Some(agent_client_protocol::v1::schema::ToolKind::Think),
            options: Vec::new(),
            diffs: Vec::new(),
            question: true,
        }
    }
}

/// The answer to send: the text, or the question dismissed.
pub(crate) fn response(answer: Option<String>) -> Value {
    let r = match answer {
        Some(answer) => QuestionResponse::Answered { answer },
        None => QuestionResponse::Cancelled,
    };
    serde_json::to_value(r).unwrap_or(Value::Null)
}
