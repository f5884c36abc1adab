//! The end of an activation: the final answer parsed into a [`StageReport`], or one
//! structured call (a turn of its own) asking for it.

use serde_json::Value;
use trellis_llm::normalise::{NormaliseOptions, normalise};
use trellis_llm::{
    ChatRequest, Completion, Message, StructuredOptions, Usage, complete_structured,
};
use trellis_protocol::SessionEvent;

use super::{AgentOutcome, AgentReport, AgentRun, Saved, turn_usage};
use crate::error::{Error, Result};
use crate::output::StageReport;

impl AgentRun {
    /// Parses the final answer, or asks once for a structured report (one more turn).
    pub(super) async fn finish(
        &self,
        mut st: Saved,
        text: String,
        forced: bool,
    ) -> Result<AgentOutcome> {
        let mut notes = Vec::new();
        if self.free_text && !forced {
            // A conversation (channel sessions): the answer is the text itself.
            return Ok(AgentOutcome::Done(AgentReport {
                report: StageReport {
                    failure: false,
                    output: text,
                    ..StageReport::default()
                },
                turns: st.turns,
                tool_calls: st.tool_calls,
                usage: st.usage,
                notes,
            }));
        }
        if !forced {
            match normalise::<StageReport>(&text, NormaliseOptions::default()) {
                Ok(n) => {
                    notes.extend(n.repairs.iter().map(|r| format!("repaired: {r:?}")));
                    return Ok(AgentOutcome::Done(AgentReport {
                        report: n.value,
                        turns: st.turns,
                        tool_calls: st.tool_calls,
                        usage: st.usage,
                        notes,
                    }));
                }
                Err(e) => {
                    self.note(
                        &mut st,
                        format!("final answer is not a report ({e}); asking for one"),
                    );
                    notes.push(format!("final answer was not a report: {e}"));
                    st.messages.push(Message::assistant(text.clone()));
                }
            }
        }
        st.messages.push(Message::user(format!(
            "{}Report your result now as the JSON object described in OUTPUT FORMAT (no tool calls).",
            if forced {
                "You have used all your turns. "
            } else {
                ""
            }
        )));
        let request = ChatRequest::new(st.messages.clone());
        let turn = st.next_turn;
        st.next_turn = turn + 1;
        self.emit(
            &mut st,
            SessionEvent::TurnStarted {
                turn,
                attempt: self.attempt,
            },
        );
        let answer = complete_structured::<StageReport>(
            self.provider.as_ref(),
            request,
            StructuredOptions::default(),
            self.cancel.clone(),
        )
        .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                self.emit(
                    &mut st,
                    SessionEvent::TurnFailed {
                        turn,
                        error: e.to_string(),
                    },
                );
                return match e {
                    trellis_llm::Error::Budget(exceeded) => Ok(self.budget_interrupt(st, exceeded)),
                    trellis_llm::Error::Cancelled => Err(Error::Cancelled),
                    trellis_llm::Error::Structured(e) if !text.trim().is_empty() => {
                        // The model keeps answering in prose: keep its words as the output
                        // rather than losing the work, and say so.
                        notes.push(format!("no structured report ({e}); kept the prose answer"));
                        Ok(AgentOutcome::Done(AgentReport {
                            report: StageReport {
                                failure: false,
                                output: text,
                                ..StageReport::default()
                            },
                            turns: st.turns,
                            tool_calls: st.tool_calls,
                            usage: st.usage,
                            notes,
                        }))
                    }
                    e => Err(e.into()),
                };
            }
        };
        let mut usage = Usage::default();
        for c in &answer.completions {
            usage.add(&c.usage);
        }
        st.usage.add(&usage);
        let message = answer
            .completions
            .last()
            .map(Completion::to_message)
            .unwrap_or_else(|| Message::assistant(String::new()));
        self.emit(
            &mut st,
            SessionEvent::TurnCompleted {
                turn,
                message: serde_json::to_value(&message).unwrap_or(Value::Null),
                usage: turn_usage(&usage),
            },
        );
        notes.extend(answer.repairs.iter().map(|r| format!("repaired: {r:?}")));
        Ok(AgentOutcome::Done(AgentReport {
            report: answer.value,
            turns: st.turns + answer.completions.len() as u32,
            tool_calls: st.tool_calls,
            usage: st.usage,
            notes,
        }))
    }
}
