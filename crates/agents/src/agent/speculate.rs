//! Speculative execution (`docs/tools.md`) in the agent loop: while the model is called,
//! the calls the tool knowledge graph predicts with a confidence at or above its threshold
//! run before the model asks, when they are safe (`trellis_tools::speculate`, shared with the
//! MCP gateway: read-only, allowed to the agent, not on the dangerous list, every required
//! argument filled from the activation's earlier calls and their structured results, never
//! asking the user, within `tools.speculation.max_ms`). The result waits, keyed by tool and
//! arguments; when the model asks for exactly that call it is answered at once (used); what
//! the model never asks for is wasted. Both go back to the advisor, which adapts its
//! threshold.

use serde_json::Value;
use trellis_protocol::ToolStatus;
use trellis_tools::speculate::{self, Ahead, Done};

use super::{AgentRun, Saved};

impl AgentRun {
    /// Notes a completed call (later speculative calls' arguments are filled from its
    /// arguments and its structured result).
    pub(super) fn remember(&self, st: &mut Saved, tool: &str, args: Value, data: Option<Value>) {
        st.history.push(Done {
            tool: tool.to_owned(),
            args,
            data,
        });
    }

    /// Who speculates for this agent, if the runtime has an advisor.
    fn ahead<'a>(&'a self, advisor: &'a dyn trellis_tools::ToolAdvisor) -> Ahead<'a> {
        Ahead {
            registry: &self.tools,
            role: self.allow_list(),
            advisor,
            config: &self.env.config.speculation,
        }
    }

    /// Whether `tool` may run ahead of the model for this agent (`Ahead::safe`).
    pub(super) fn safe_to_speculate(&self, tool: &str) -> bool {
        self.env
            .advisor
            .as_deref()
            .is_some_and(|a| self.ahead(a).safe(tool))
    }

    /// Runs the safe predictions of the tool knowledge graph (during a model call).
    pub(super) async fn speculate(&self, st: &mut Saved) {
        let Some(advisor) = self.env.advisor.clone() else {
            return;
        };
        let mut ready = std::mem::take(&mut st.speculated);
        let notes = self
            .ahead(advisor.as_ref())
            .speculate(&self.env, &st.history, &mut ready, self.cancel.clone())
            .await;
        st.speculated = ready;
        for note in notes {
            self.note(st, note);
        }
    }

    /// The speculative result of exactly this call, if one waits (it is used up): its
    /// text, status and structured result.
    pub(super) fn take_speculated(
        &self,
        st: &mut Saved,
        tool: &str,
        args: &Value,
    ) -> Option<(String, ToolStatus, Option<Value>)> {
        let advisor = self.env.advisor.as_deref();
        speculate::take(advisor, &mut st.speculated, tool, args)
            .map(|s| (s.content, ToolStatus::Ok, s.data))
    }

    /// Reports what became of the speculative results left at the end (see
    /// `speculate::waste`: the model's own calls decide about the ones foresight showed).
    pub(super) fn waste_speculations(&self, st: &mut Saved) {
        let later = st.history.get(st.foresight..).unwrap_or_default();
        speculate::waste(self.env.advisor.as_deref(), &mut st.speculated, later);
    }
}
