//! The end of an activation: the final answer parsed into a [`StageReport`], or one
//! structured call (a turn of its own) asking for it.

use serde_json::Value;
use trellis_llm::normalise::{NormaliseOptions, Repair};
use trellis_llm::structured::{StructuredAnswer, response_format};
use trellis_llm::{
    ChatRequest, Completion, Message, ModelProvider, StructuredOptions, Usage, complete_structured,
};
use trellis_protocol::SessionEvent;

use super::events::turn_usage;
use super::{AgentOutcome, AgentReport, AgentRun, Saved};
use crate::compress::{FieldRepair, FieldRepairMethod, normalise_compressing};
use crate::error::{Error, Result};
use crate::output::StageReport;
use crate::roles::{AnswerFormat, FAILED_MARK};

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
        let prose = self.role.answer == AnswerFormat::Prose;
        if (self.free_text || prose) && !forced {
            // A conversation (channel sessions) or a prose role: the answer is the text.
            return Ok(self.answered(st, text, prose));
        }
        if prose {
            return self.ask_prose(st, why).await;
        }
        if !forced && let Some(report) = self.read_report(&mut st, &text, &mut notes).await? {
            return Ok(AgentOutcome::Done(AgentReport {
                report,
                turns: st.turns,
                tool_calls: st.tool_calls,
                usage: st.usage,
                notes,
            }));
        }
        self.ask_report(st, why, text, notes).await
    }

    /// The final answer read as a report, over-long fields with a declared limit summarised
    /// before they are cut. An answer that is not a report is noted and stays in the
    /// conversation for the request that follows (`None`).
    async fn read_report(
        &self,
        st: &mut Saved,
        text: &str,
        notes: &mut Vec<String>,
    ) -> Result<Option<StageReport>> {
        let compressed = normalise_compressing::<StageReport>(
            text,
            NormaliseOptions::default(),
            Some(self.compressor()),
            &self.cancel,
        )
        .await;
        match compressed {
            Ok((n, fields)) => {
                notes.extend(n.repairs.iter().map(|r| format!("repaired: {r:?}")));
                self.note_fields(st, notes, &fields);
                Ok(Some(n.value))
            }
            Err(Error::Output(e)) => {
                self.note(
                    st,
                    format!("final answer is not a report ({e}); asking for one"),
                );
                notes.push(format!("final answer was not a report: {e}"));
                st.messages.push(Message::assistant(text.to_owned()));
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// One more turn, a structured call, for the report (`why` says first why it is asked);
    /// `text` is the final answer, if any, kept as the output when no report comes.
    async fn ask_report(
        &self,
        mut st: Saved,
        why: &str,
        text: String,
        mut notes: Vec<String>,
    ) -> Result<AgentOutcome> {
        st.messages.push(Message::user(format!(
            "{why}Report your result now as the JSON object described in OUTPUT FORMAT (no tool calls)."
        )));
        let request = ChatRequest {
            response_format: Some(response_format::<StageReport>()),
            ..ChatRequest::new(st.messages.clone())
        };
        // Room for a re-ask: the rejected answer and the request to fix it.
        let extra = self.limits().reserve + 256;
        let (request, turn) = self.open_turn(&mut st, request, extra).await?;
        let answer = complete_structured::<StageReport>(
            self.provider.as_ref(),
            request,
            StructuredOptions::default(),
            self.cancel.clone(),
        )
        .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => return self.report_not_given(st, turn, e, text, notes),
        };
        self.report_turn_completed(&mut st, turn, &answer);
        notes.extend(answer.repairs.iter().map(|r| format!("repaired: {r:?}")));
        let summarised = self
            .summarise_cut_fields(&mut st, &answer, &mut notes)
            .await;
        Ok(AgentOutcome::Done(AgentReport {
            report: summarised.unwrap_or(answer.value),
            turns: st.turns + answer.completions.len() as u32,
            tool_calls: st.tool_calls,
            usage: st.usage,
            notes,
        }))
    }

    /// The structured call for the report failed: recorded, then the prose answer kept as
    /// the output when the model answered in prose, else as any failed call
    /// ([`Self::turn_failed`]).
    fn report_not_given(
        &self,
        mut st: Saved,
        turn: u32,
        e: trellis_llm::Error,
        text: String,
        mut notes: Vec<String>,
    ) -> Result<AgentOutcome> {
        let trellis_llm::Error::Structured(reason) = &e else {
            return self.turn_failed(st, turn, e);
        };
        if text.trim().is_empty() {
            return self.turn_failed(st, turn, e);
        }
        // The model keeps answering in prose: keep its words as the output rather than
        // losing the work, and say so.
        notes.push(format!(
            "no structured report ({reason}); kept the prose answer"
        ));
        self.emit(
            &mut st,
            SessionEvent::TurnFailed {
                turn,
                error: e.to_string(),
            },
        );
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

    /// Records the report's turn: its usage (every completion of the structured call) and
    /// its last message.
    fn report_turn_completed(
        &self,
        st: &mut Saved,
        turn: u32,
        answer: &StructuredAnswer<StageReport>,
    ) {
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
            st,
            SessionEvent::TurnCompleted {
                turn,
                message: serde_json::to_value(&message).unwrap_or(Value::Null),
                usage: turn_usage(&usage),
            },
        );
    }

    /// The report with its over-long fields summarised, when the structured call's
    /// normaliser cut one instead; `None` when nothing was cut or summarising failed.
    async fn summarise_cut_fields(
        &self,
        st: &mut Saved,
        answer: &StructuredAnswer<StageReport>,
        notes: &mut Vec<String>,
    ) -> Option<StageReport> {
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
            self.note_fields(st, notes, &fields);
            return Some(n.value);
        }
        None
    }

    /// The report of an answer in words: its text is the output. A prose role's answer
    /// that is empty or starts with [`FAILED_MARK`] is a failure (a conversation's never is);
    /// a prose role's answer that is the JSON stage report is read as one.
    fn answered(&self, mut st: Saved, text: String, prose: bool) -> AgentOutcome {
        // A model (or endpoint) that answers with the JSON report anyway is taken at its
        // word: its fields, not the JSON as prose.
        if prose
            && text.trim_start().starts_with('{')
            && let Ok(report) = serde_json::from_str::<StageReport>(text.trim())
        {
            return done(st, report);
        }
        let failure =
            prose && (text.trim().is_empty() || text.trim_start().starts_with(FAILED_MARK));
        let text = match prose.then(|| cut_repetition(&text)).flatten() {
            Some(at) => {
                let (kept, cut) = (text[..at].chars().count(), text[at..].chars().count());
                self.note(
                    &mut st,
                    format!(
                        "the answer repeated itself from character {kept} on ({cut} characters \
                         cut)"
                    ),
                );
                text[..at].trim_end().to_owned()
            }
            None => text,
        };
        done(
            st,
            StageReport {
                failure,
                output: text,
                ..StageReport::default()
            },
        )
    }

    /// A prose role out of turns (or stuck): one more turn, without tools, for its answer.
    async fn ask_prose(&self, mut st: Saved, why: &str) -> Result<AgentOutcome> {
        st.messages.push(Message::user(format!(
            "{why}Answer the request now, in plain prose (no tool calls)."
        )));
        let request = ChatRequest::new(st.messages.clone());
        let extra = self.limits().reserve + 256;
        let (request, turn) = self.open_turn(&mut st, request, extra).await?;
        let completion = match self.turn(request, turn, true).await {
            Ok(c) => c,
            Err(e) => return self.turn_failed(st, turn, e),
        };
        st.turns += 1;
        st.usage.add(&completion.usage);
        self.emit(
            &mut st,
            SessionEvent::TurnCompleted {
                turn,
                message: serde_json::to_value(completion.to_message()).unwrap_or(Value::Null),
                usage: turn_usage(&completion.usage),
            },
        );
        Ok(self.answered(st, completion.text, true))
    }

    /// A model call that failed: recorded, then a budget's interrupt, a cancellation, or
    /// the error.
    pub(super) fn turn_failed(
        &self,
        mut st: Saved,
        turn: u32,
        e: trellis_llm::Error,
    ) -> Result<AgentOutcome> {
        self.emit(
            &mut st,
            SessionEvent::TurnFailed {
                turn,
                error: e.to_string(),
            },
        );
        match e {
            trellis_llm::Error::Budget(exceeded) => Ok(self.budget_interrupt(st, exceeded)),
            trellis_llm::Error::Cancelled => Err(Error::Cancelled),
            e => Err(e.into()),
        }
    }
}

/// The activation's end with `report`, its counts and usage taken from `st`.
fn done(st: Saved, report: StageReport) -> AgentOutcome {
    AgentOutcome::Done(AgentReport {
        report,
        turns: st.turns,
        tool_calls: st.tool_calls,
        usage: st.usage,
        notes: Vec::new(),
    })
}

/// Where a prose answer starts repeating itself: the byte offset of the first sentence (of
/// at least [`REPEAT_MIN`] characters) that the answer already said, word for word. A small
/// model decoding greedily can cycle through the same few sentences until its token limit;
/// prose never needs a sentence twice. Sentences end at `.`, `!` or `?` before whitespace, or
/// at a line end; lines of fenced code are not compared.
fn cut_repetition(text: &str) -> Option<usize> {
    let mut seen = std::collections::HashSet::new();
    let mut start = 0;
    let mut fenced = false;
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        if c == '`' && text[i..].starts_with("```") && (i == 0 || bytes[i - 1] == b'\n') {
            fenced = !fenced;
        }
        let next = bytes.get(i + 1).copied();
        let ends = c == '\n'
            || (!fenced
                && matches!(c, '.' | '!' | '?')
                && next.is_none_or(|b| b.is_ascii_whitespace()));
        if !ends {
            continue;
        }
        let end = i + c.len_utf8();
        let piece = &text[start..end];
        let sentence = piece.trim();
        if !fenced && sentence.len() >= REPEAT_MIN && !seen.insert(sentence) {
            return Some(start + (piece.len() - piece.trim_start().len()));
        }
        start = end;
    }
    None
}

/// The shortest sentence [`cut_repetition`] compares.
const REPEAT_MIN: usize = 30;

#[cfg(test)]
mod tests {
    use super::cut_repetition;

    #[test]
    fn a_cycle_of_sentences_is_cut_where_it_starts_again() {
        let once = "Stock lives in memory (ADR 0001). A restart loses all of it. \
                    The tests in `test_inventory.py` check the invariant. ";
        let text = format!("{once}{once}{once}The tests in");
        let at = cut_repetition(&text);
        assert_eq!(at.map(|at| text[..at].trim_end()), Some(once.trim_end()));
        // Short sentences ("Yes.") and different ones are kept.
        assert_eq!(
            cut_repetition("Yes. Yes. It keeps stock in two dictionaries."),
            None
        );
        assert_eq!(cut_repetition(once), None);
    }

    #[test]
    fn repeated_lines_of_fenced_code_are_not_repetition() {
        let text = "Two calls:\n```python\ninventory.reserve(\"apple\", 1)  # the first one\n\
                    inventory.reserve(\"apple\", 1)  # the first one\n```\nBoth reserve stock.";
        assert_eq!(cut_repetition(text), None);
    }
}
