//! A workflow's question during a turn: asked through `_trellis/question` when the client
//! takes it (ACP v1 has no questions), else answered "decide yourself".

use agent_client_protocol::UntypedMessage;
use agent_client_protocol::v1::schema as acp;
use trellis_protocol::acp::{QUESTION_METHOD, QuestionParams, QuestionResponse};
use trellis_protocol::{Answer, Interrupt, NodeId};

use super::Turn;

/// The answer to a question when the editor cannot ask it.
const NO_QUESTIONS: &str = "(no answer: the editor cannot ask questions; decide yourself and \
    state the assumption you made)";

impl Turn {
    /// Asks question `it` of `node` (the turn's `n`th ask): the client's answer, `None`
    /// when it dismissed it or the turn was cancelled meanwhile.
    pub(super) async fn question(
        &self,
        can_ask: bool,
        n: usize,
        node: &NodeId,
        it: &Interrupt,
    ) -> Option<Answer> {
        if !can_ask {
            self.message(format!("\n{node} asks: {}\n{NO_QUESTIONS}\n", it.prompt));
            return Some(Answer::text(NO_QUESTIONS));
        }
        let id = acp::ToolCallId::new(format!("{node}/question-{n}"));
        self.send(acp::SessionUpdate::ToolCall(
            acp::ToolCall::new(id.clone(), format!("{node} asks: {}", it.prompt))
                .kind(acp::ToolKind::Think)
                .status(acp::ToolCallStatus::Pending),
        ));
        let params = QuestionParams {
            session_id: self.session.0.to_string(),
            tool_call_id: id.0.to_string(),
            node: node.clone(),
            question: it.prompt.clone(),
        };
        let asked = match UntypedMessage::new(QUESTION_METHOD, params) {
            Ok(m) => {
                let sent = self.conn.send_request(m);
                tokio::select! {
                    r = sent.block_task() => r,
                    () = self.token.cancelled() => Ok(serde_json::json!({"outcome": "cancelled"})),
                }
            }
            Err(e) => Err(e),
        };
        let answer = match asked.map(serde_json::from_value::<QuestionResponse>) {
            Ok(Ok(QuestionResponse::Answered { answer })) => Some(answer),
            Ok(Ok(QuestionResponse::Cancelled)) => None,
            // A client that advertised the method and fails it: the run decides itself.
            Ok(Err(e)) => {
                tracing::warn!("{QUESTION_METHOD}: an answer of the wrong shape: {e}");
                Some(NO_QUESTIONS.to_owned())
            }
            Err(e) => {
                tracing::warn!("{QUESTION_METHOD} failed: {e}");
                Some(NO_QUESTIONS.to_owned())
            }
        };
        let (status, content) = match &answer {
            Some(a) => (acp::ToolCallStatus::Completed, Some(a.clone())),
            None => (acp::ToolCallStatus::Failed, None),
        };
        let mut fields = acp::ToolCallUpdateFields::new().status(status);
        if let Some(a) = content {
            fields = fields.content(vec![acp::ToolCallContent::from(a)]);
        }
        self.send(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(id, fields),
        ));
        answer.map(Answer::text)
    }
}
