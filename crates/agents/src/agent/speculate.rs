//! Speculative execution (seed 002 Pattern 3) in the agent loop: between model calls, the
//! calls the tool knowledge graph predicts with a confidence at or above its threshold run
//! before the model asks, when they are safe (`trellis_tools::speculate`, shared with the
//! MCP gateway: read-only, allowed to the agent, not on the dangerous list, every required
//! argument carried from the activation's earlier calls, never asking the user, within
//! `tools.speculation.max_ms`). The result waits, keyed by tool and arguments; when the model
//! asks for exactly that call it is answered at once (used); what the model never asks for
//! is wasted. Both go back to the advisor, which adapts its threshold.

use serde_json::Value;
use trellis_protocol::ToolStatus;
use trellis_tools::speculate::{self, Ahead};

use super::{AgentRun, Saved};

impl AgentRun {
    /// Notes a completed call (the arguments later speculative calls are filled from).
    pub(super) fn remember(&self, st: &mut Saved, tool: &str, args: Value) {
        st.history.push((tool.to_owned(), args));
    }

    /// Runs the safe predictions of the tool knowledge graph ahead of the next model call.
    pub(super) async fn speculate(&self, st: &mut Saved) {
        let Some(advisor) = self.env.advisor.clone() else {
            return;
        };
        let ahead = Ahead {
            registry: &self.tools,
            role: self.allow_list(),
            advisor: advisor.as_ref(),
            config: &self.env.config.speculation,
        };
        let mut ready = std::mem::take(&mut st.speculated);
        let notes = ahead
            .speculate(&self.env, &st.history, &mut ready, self.cancel.clone())
            .await;
        st.speculated = ready;
        for note in notes {
            self.note(st, note);
        }
    }

    /// The speculative result of exactly this call, if one waits (it is used up).
    pub(super) fn take_speculated(
        &self,
        st: &mut Saved,
        tool: &str,
        args: &Value,
    ) -> Option<(String, ToolStatus)> {
        let advisor = self.env.advisor.as_deref();
        speculate::take(advisor, &mut st.speculated, tool, args)
            .map(|s| (s.content, ToolStatus::Ok))
    }

    /// Reports the speculative results nobody asked for as wasted.
    pub(super) fn waste_speculations(&self, st: &mut Saved) {
        speculate::waste(self.env.advisor.as_deref(), &mut st.speculated);
    }
}
