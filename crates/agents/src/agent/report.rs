//! The end of an activation: the final answer parsed into a [`StageReport`], or one
//! structured call (a turn of its own) asking for it.

use serde_json::Value;
use trellis_llm::normalise::{NormaliseOptions, Repair};
use trellis_llm::structured::response_format;
use trellis_llm::{
    ChatRequest, Completion, Message, ModelProvider, StructuredOptions, Usage, complete_structured,
};
use trellis_protocol::SessionEvent;

use super::events::turn_usage;
use super::{AgentOutcome, AgentReport, AgentRun, Saved};
use crate::compress::{FieldRepair, FieldRepairMethod, normalise_compressing};
use crate::error::{Error, Result};
use crate::output::StageReport;

impl AgentRun {
    /// The model that compresses over-long report fields: the summary model, else the
    /// agent's own.
    fn compressor(&self) -> &dyn ModelProvider {
        self.context
            .summarizer
            .as_deref()
            .unwrap_or(self.provider.as_ref())
    }

    /// Records the field repairs of the report: a note each, in the session and the report.
    fn note_fields(&self, st: &mut Saved, notes: &mut Vec<String>, fields: &[FieldRepair]) {
        for f in fields {
            st.usage.add(&f.usage);
            let line = format!(
                "field {} {} from {} to {} characters (limit {}){}",
                f.field,
                match f.method {
                    FieldRepairMethod::Summarised => "summarised",
                    FieldRepairMethod::Truncated => "truncated",
                },
                f.from_chars,
                f.to_chars,
                f.max_chars,
                f.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            );
            self.note(st, line.clone());
            notes.push(line);
        }
    }

    /// Parses the final answer, or asks once for a structured report (one more turn).
    /// `forced` ends the activation without a final answer, saying why to the model (`You
    /// have used all your turns. `).
    pub(super) async fn finish(
        &self,
        mut st: Saved,
        text: String,
        forced: Option<&str>,
    ) -> Result<AgentOutcome> {
        let why = forced.unwrap_or_default();
        let forced = forced.is_some();
        self.waste_speculations(&mut st);
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
            // Over-long fields with a declared limit are summarised before they are cut.
            let compressed = normalise_compressing::<StageReport>(
                &text,
                NormaliseOptions::default(),
                Some(self.compressor()),
                &self.cancel,
            )
            .await;
            match compressed {
                Ok((n, fields)) => {
                    notes.extend(n.repairs.iter().map(|r| format!("repaired: {r:?}")));
                    self.note_fields(&mut st, &mut notes, &fields);
                    return Ok(AgentOutcome::Done(AgentReport {
                        report: n.value,
                        turns: st.turns,
                        tool_calls: st.tool_calls,
                        usage: st.usage,
                        notes,
                    }));
                }
                Err(Error::Output(e)) => {
                    self.note(
                        &mut st,
                        format!("final answer is not a report ({e}); asking for one"),
                    );
                    notes.push(format!("final answer was not a report: {e}"));
                    st.messages.push(Message::assistant(text.clone()));
                }
                Err(e) => return Err(e),
            }
        }
        st.messages.push(Message::user(format!(
            "{why}Report your result now as the JSON object described in OUTPUT FORMAT (no tool calls)."
        )));
        let turn = st.next_turn;
        let request = ChatRequest {
            response_format: Some(response_format::<StageReport>()),
            ..ChatRequest::new(st.messages.clone())
        };
        // Room for a re-ask: the rejected answer and the request to fix it.
        let extra = self.limits().reserve + 256;
        let request = self.fit_request(&mut st, request, turn, extra).await?;
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
        let mut report = answer.value;
        // The structured call's normaliser cut an over-long field: summarise it instead.
        if answer
            .repairs
            .iter()
            .any(|r| matches!(r, Repair::Truncated { .. }))
            && let Some(last) = answer.completions.last()
            && let Ok((n, fields)) = normalise_compressing::<StageReport>(
                &last.text,
                NormaliseOptions {
                    max_repairs: usize::MAX,
                },
                Some(self.compressor()),
                &self.cancel,
            )
            .await
        {
            report = n.value;
            self.note_fields(&mut st, &mut notes, &fields);
        }
        Ok(AgentOutcome::Done(AgentReport {
            report,
            turns: st.turns + answer.completions.len() as u32,
            tool_calls: st.tool_calls,
            usage: st.usage,
            notes,
        }))
    }
}
