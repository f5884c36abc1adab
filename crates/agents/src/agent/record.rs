//! Continuing an activation from its recorded session events ([`Resume::Recorded`]) after
//! the process stopped, and choosing how a node that runs again resumes
//! ([`Resume::choose`]).
//!
//! The conversation is rebuilt from the events of the attempt: the `PromptSet` messages,
//! every `TurnCompleted`'s assistant message, every `ToolCompleted`'s output as the tool
//! result, every `MessagesReceived` as the user message it was; a `ContextCompacted`
//! replaces the conversation so far with its messages. Then:
//!
//! - a tool call of the last completed turn that started and never completed gets
//!   [`INTERRUPTED_TOOL`] as its result (and the loop closes its record with a
//!   `ToolCompleted` of status `Interrupted`); the calls that never started run now;
//! - a turn that started and never completed is asked again (its deltas are discarded);
//! - when the last completed turn had no tool calls (the final answer, or the structured
//!   report), the loop parses it without calling the model again.

use std::collections::HashSet;

use serde_json::Value;
use trellis_llm::{Message, ToolCall, Usage};
use trellis_protocol::{Answer, SessionEvent};

use super::{Resume, Saved, inbox};
use crate::error::{Error, Result};

/// The result given to the model for a tool call that was running when the process stopped.
pub const INTERRUPTED_TOOL: &str = "interrupted: the process stopped while this call was running; its effects may be partial — check the files before repeating it";

/// What the loop does after the rebuilt conversation.
#[derive(Debug, PartialEq)]
pub(super) enum Next {
    /// Call the model.
    Model,
    /// Run these tool calls of turn `turn` (they never started), then call the model.
    Tools { turn: u32, calls: Vec<ToolCall> },
    /// Parse this final answer.
    Finish { text: String },
}

/// A conversation rebuilt from the record.
#[derive(Debug)]
pub(super) struct Replayed {
    /// Messages and counters.
    pub state: Saved,
    /// Calls closed as interrupted (turn, call id, tool); their results are in the messages.
    pub interrupted: Vec<(u32, String, String)>,
    /// What comes next.
    pub next: Next,
}

/// Where the record of `attempt` starts: its last `PromptSet`.
fn prompt_of(events: &[SessionEvent], attempt: u32) -> Option<usize> {
    events
        .iter()
        .rposition(|e| matches!(e, SessionEvent::PromptSet { attempt: a, .. } if *a == attempt))
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, v: &Value) -> Result<T> {
    serde_json::from_value(v.clone())
        .map_err(|e| Error::Resume(format!("recorded {what} is not a message: {e}")))
}

/// Rebuilds the conversation of `attempt` from `events`; `None` when they hold no
/// `PromptSet` of the attempt (nothing to continue).
pub(super) fn replay(
    events: &[SessionEvent],
    attempt: u32,
    first_turn: u32,
) -> Result<Option<Replayed>> {
    let Some(start) = prompt_of(events, attempt) else {
        return Ok(None);
    };
    let mut st = Saved::default();
    let mut last_turn = 0;
    // The tool calls of the last completed turn that asked for some, and their progress.
    let mut calls: Option<(u32, Vec<ToolCall>)> = None;
    let mut started: HashSet<String> = HashSet::new();
    let mut done: HashSet<String> = HashSet::new();
    // The last completed turn without tool calls, while nothing followed it.
    let mut answer: Option<Message> = None;
    for event in &events[start..] {
        if !event.is_delta() {
            st.recorded += 1;
        }
        match event {
            SessionEvent::PromptSet { messages, .. } => {
                st.messages = messages
                    .iter()
                    .map(|m| decode("prompt message", m))
                    .collect::<Result<_>>()?;
            }
            SessionEvent::MessagesReceived { texts, .. } => {
                // After a final answer, messages send the agent back to work with its answer
                // in the conversation.
                if let Some(m) = answer.take() {
                    st.messages.push(m);
                }
                st.messages.push(Message::user(inbox::received_text(texts)));
            }
            SessionEvent::TurnStarted { turn, .. } | SessionEvent::TurnFailed { turn, .. } => {
                last_turn = last_turn.max(*turn);
            }
            SessionEvent::TurnCompleted {
                turn,
                message,
                usage,
            } => {
                last_turn = last_turn.max(*turn);
                let m: Message = decode("assistant message", message)?;
                st.turns += 1;
                st.usage.add(&Usage {
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                    cached_prompt_tokens: 0,
                });
                if m.tool_calls.is_empty() {
                    answer = Some(m);
                } else {
                    answer = None;
                    calls = Some((*turn, m.tool_calls.clone()));
                    started.clear();
                    done.clear();
                    st.messages.push(m);
                }
            }
            // A compaction replaced the conversation (and its summary call was paid for).
            SessionEvent::ContextCompacted {
                messages, usage, ..
            } => {
                st.messages = messages
                    .iter()
                    .map(|m| decode("compacted message", m))
                    .collect::<Result<_>>()?;
                st.usage.add(&Usage {
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                    cached_prompt_tokens: 0,
                });
            }
            SessionEvent::ToolStarted { call_id, .. } => {
                started.insert(call_id.clone());
            }
            // A call's first completion is its result (one closed again is ignored).
            SessionEvent::ToolCompleted {
                call_id, output, ..
            } if done.insert(call_id.clone()) => {
                st.messages
                    .push(Message::tool_result(call_id.clone(), output.clone()));
                st.tool_calls += 1;
            }
            _ => {}
        }
    }
    st.next_turn = first_turn.max(last_turn + 1).max(1);
    let mut interrupted = Vec::new();
    let next = match (answer, calls) {
        (Some(m), _) => Next::Finish { text: m.content },
        (None, Some((turn, calls))) => {
            let mut rest = Vec::new();
            for call in calls {
                if done.contains(&call.id) {
                    continue;
                }
                if started.contains(&call.id) {
                    st.messages
                        .push(Message::tool_result(call.id.clone(), INTERRUPTED_TOOL));
                    st.tool_calls += 1;
                    interrupted.push((turn, call.id, call.name));
                } else {
                    rest.push(call);
                }
            }
            if rest.is_empty() {
                Next::Model
            } else {
                Next::Tools { turn, calls: rest }
            }
        }
        (None, None) => Next::Model,
    };
    Ok(Some(Replayed {
        state: st,
        interrupted,
        next,
    }))
}

impl Resume {
    /// How activation `attempt` of a node resumes when it runs again: `interrupt` is the
    /// engine's saved scratch and answer (`NodeContext::resume`), `recorded` the node
    /// session's recorded events (at least those of this attempt, every event the sink
    /// received; deltas may be coalesced).
    ///
    /// - No recorded `PromptSet` of the attempt: [`Resume::Interrupt`] with the scratch, or
    ///   [`Resume::Fresh`].
    /// - An interrupt, and nothing recorded after it: [`Resume::Interrupt`] (the answer goes
    ///   to the waiting call).
    /// - Otherwise — the activation went on after the interrupt, or there was none — the
    ///   process stopped while it ran: [`Resume::Recorded`] with the attempt's events.
    pub fn choose(
        attempt: u32,
        interrupt: Option<(Value, Answer)>,
        recorded: Vec<SessionEvent>,
    ) -> Resume {
        let Some(start) = prompt_of(&recorded, attempt) else {
            return match interrupt {
                Some((scratch, answer)) => Resume::Interrupt { scratch, answer },
                None => Resume::Fresh,
            };
        };
        let count = recorded[start..].iter().filter(|e| !e.is_delta()).count() as u64;
        match interrupt {
            Some((scratch, answer)) => {
                let at_interrupt = scratch.get("recorded").and_then(Value::as_u64).unwrap_or(0);
                if at_interrupt == 0 || count <= at_interrupt {
                    Resume::Interrupt { scratch, answer }
                } else {
                    Resume::Recorded(recorded.into_iter().skip(start).collect())
                }
            }
            None => Resume::Recorded(recorded.into_iter().skip(start).collect()),
        }
    }
}
