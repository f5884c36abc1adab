//! What an activation carries from turn to turn: its conversation, counters and what it
//! waits for — saved in an interrupt's scratch, rebuilt from the record after a crash.

use serde::{Deserialize, Serialize};
use trellis_llm::{BudgetExceeded, Message, ToolCall, Usage};

use super::events::Finished;

/// The conversation and counters of an activation (saved in an interrupt's scratch).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(in crate::agent) struct Saved {
    pub(in crate::agent) messages: Vec<Message>,
    pub(in crate::agent) turns: u32,
    pub(in crate::agent) tool_calls: u32,
    pub(in crate::agent) usage: Usage,
    pub(in crate::agent) waiting: Waiting,
    /// The session turn number of the next model call.
    #[serde(default)]
    pub(in crate::agent) next_turn: u32,
    /// Events other than deltas emitted in this attempt since its `PromptSet` (inclusive):
    /// tells [`Resume::choose`](super::Resume::choose) whether the record went on after the interrupt.
    #[serde(default)]
    pub(in crate::agent) recorded: u64,
    /// MCP tools found with `search_tools`: offered whatever the schema budget says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(in crate::agent) discovered: Vec<String>,
    /// The completed calls of the activation, oldest first: what the tool knowledge graph
    /// predicts from, and what speculative calls' arguments come from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(in crate::agent) history: Vec<trellis_tools::speculate::Done>,
    /// Calls run ahead of the model, waiting to be asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(in crate::agent) speculated: Vec<trellis_tools::speculate::Speculated>,
    /// How many of `history`'s first calls were run ahead by foresight (their results are
    /// in the prompt); the rest are the model's.
    #[serde(default)]
    pub(in crate::agent) foresight: usize,
    /// The project's tests could not be run (`test_samples`): not tried again.
    #[serde(default)]
    pub(in crate::agent) untestable: bool,
    /// The next turn draws its answers again from the same conversation: no answer of the
    /// last drawing changed anything ([`AgentRun::redraw`](super::AgentRun)).
    #[serde(default)]
    pub(in crate::agent) redraw: bool,
    /// Turns of this activation drawn again so far.
    #[serde(default)]
    pub(in crate::agent) redraws: u32,
    /// The scripts that show the problem (`reproduce`): `None` until the first drawing asks
    /// for them, then the ones kept (failing on the files as they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(in crate::agent) repros: Option<Vec<String>>,
    /// The path notes given so far ([`super::notes::PathNotes`]), by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(in crate::agent) noted: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(in crate::agent) enum Waiting {
    /// The tool call at `next` of `calls` (asked for by turn `turn`) waits for the user.
    Tools {
        calls: Vec<ToolCall>,
        next: usize,
        #[serde(default)]
        turn: u32,
        /// Calls after `next` that already ran beside it, with their results (a list: JSON
        /// map keys are strings).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        done: Vec<(usize, Finished)>,
    },
    /// A model call was refused by the budget.
    Budget { exceeded: BudgetExceeded },
    /// Nothing (a fresh state).
    #[default]
    Nothing,
}
