//! Building an activation: the parts every caller chooses, and defaults for the rest.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use trellis_llm::{Message, ModelProvider};
use trellis_tools::{Registry, ToolEnv};

use super::AgentRun;
use crate::roles::RoleSpec;

impl AgentRun {
    /// A fresh activation of `role` at graph node `node` on `provider`, with `tools` in
    /// `env`, from `messages` (the system prompt and context): the role's `max_turns`, its
    /// own allow list, no gate, ledger, session sink or inbox, turn 1 of attempt 1, a typed
    /// report, the default context policy, no test probe. Set the other fields with struct update syntax
    /// (`AgentRun { events: Some(sink), ..AgentRun::new(…) }`).
    pub fn new(
        node: impl Into<String>,
        role: RoleSpec,
        provider: Arc<dyn ModelProvider>,
        tools: Arc<Registry>,
        env: ToolEnv,
        messages: Vec<Message>,
    ) -> Self {
        Self {
            node: node.into(),
            max_turns: role.max_turns,
            role,
            provider,
            tools,
            tool_scope: None,
            env,
            gate: None,
            ledger: None,
            messages,
            events: None,
            inbox: None,
            first_turn: 1,
            attempt: 1,
            free_text: false,
            context: Default::default(),
            cancel: CancellationToken::new(),
            probe: None,
        }
    }
}
