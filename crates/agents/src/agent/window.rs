//! Keeping the loop's requests within their limits ([`crate::context`]): compaction before
//! every model call, over-long tool outputs stored behind handles, and the
//! `read_tool_output` tool that reads them back.

use serde_json::Value;
use trellis_llm::{ChatRequest, ToolCall, ToolChoice, ToolSpec};
use trellis_protocol::{SessionEvent, ToolStatus};

use super::events::turn_usage;
use super::{AgentRun, Saved};
use crate::context::outputs::{self, READ_TOOL_OUTPUT};
use crate::context::{Compactor, Limits};
use crate::error::Result;
use crate::roles::{AnswerFormat, EditFormat};

impl AgentRun {
    /// The limits of this activation on its model.
    pub(super) fn limits(&self) -> Limits {
        self.context.limits(self.provider.info().context_window)
    }

    /// Bytes one `read_tool_output` call returns at most (half the output limit, so what it
    /// returns is never stored again).
    fn read_max(&self) -> usize {
        (self.limits().tool_output_max_bytes / 2).max(256)
    }

    /// Whether this activation's store holds an output (then it may read outputs back).
    pub(super) fn outputs_stored(&self) -> bool {
        self.context.outputs.as_ref().is_some_and(|s| !s.is_empty())
    }

    /// The tools offered to the model: the role's (MCP tools within the schema budget, with
    /// `search_tools` when some are left out), `execute_dag`, and `read_tool_output` once an
    /// output is stored.
    pub(super) fn offered_tools(&self, st: &Saved) -> Vec<ToolSpec> {
        let offer = self.within_budget(self.tool_specs(), st);
        if offer.left_out > 0 {
            tracing::debug!(
                left_out = offer.left_out,
                "MCP tools left out of the schema budget"
            );
        }
        let mut specs = offer.specs;
        specs.retain(|s| self.role.offers(&s.name));
        if self.offers_execute_dag(&specs) && !specs.iter().any(|s| s.name == super::EXECUTE_DAG) {
            specs.push(super::execute_dag_spec(self.env.config.dag.max_steps));
            specs.push(super::replan_dag_spec());
        }
        if self.outputs_stored() && !specs.iter().any(|s| s.name == READ_TOOL_OUTPUT) {
            specs.push(outputs::read_spec(self.read_max()));
        }
        specs
    }

    /// The format the final answer is held to: the report itself where the provider can
    /// hold it to the schema (no second call to get it). A conversation answers in prose,
    /// and so do an `answer: prose` role and a `blocks` role, whose answers carry its edits.
    pub(super) fn final_format(&self) -> Option<trellis_llm::ResponseFormat> {
        (!self.free_text
            && self.role.edit_format != EditFormat::Blocks
            && self.role.answer != AnswerFormat::Prose)
            .then(trellis_llm::structured::response_format::<crate::output::StageReport>)
    }

    /// Whether the model must answer with a tool call: a `tool_first` role calls a tool
    /// before it may report (a small model otherwise answers its first turn with a report
    /// claiming the work is done, or resting on the retrieved context alone); after its first
    /// call it is free to report.
    ///
    /// A `force_edit` role answers the question about an unbacked report of success with
    /// an edit ([`crate::roles::EDIT_TOOLS`]).
    pub(super) fn tool_choice(&self, st: &Saved) -> ToolChoice {
        let asked = st
            .messages
            .last()
            .is_some_and(super::stuck::is_unbacked_question);
        if self.role.force_edit && asked {
            ToolChoice::OneOf(
                crate::roles::EDIT_TOOLS
                    .iter()
                    .map(|t| (*t).to_owned())
                    .collect(),
            )
        } else if self.role.tool_first && st.tool_calls == 0 {
            ToolChoice::Required
        } else {
            ToolChoice::Auto
        }
    }

    /// Opens the next model call of `st`: `request` fitted to the window (less `extra`
    /// tokens, see [`Self::fit_request`]), the turn counted and announced
    /// ([`SessionEvent::TurnStarted`]). Returns the request and its turn number.
    pub(super) async fn open_turn(
        &self,
        st: &mut Saved,
        request: ChatRequest,
        extra: u64,
    ) -> Result<(ChatRequest, u32)> {
        let turn = st.next_turn;
        let request = ChatRequest {
            frequency_penalty: request.frequency_penalty.or(self.role.frequency_penalty),
            ..request
        };
        let request = self.fit_request(st, request, turn, extra).await?;
        st.next_turn = turn + 1;
        self.emit(
            st,
            SessionEvent::TurnStarted {
                turn,
                attempt: self.attempt,
                model: Some(self.provider.info().model.clone()).filter(|m| !m.is_empty()),
            },
        );
        Ok((request, turn))
    }

    /// `request` for model call `turn`, compacted when its prompt exceeds the threshold or
    /// the limit (lowered by `extra` tokens); a compaction becomes the conversation and is
    /// recorded ([`SessionEvent::ContextCompacted`]). Fails only when cancelled.
    pub(super) async fn fit_request(
        &self,
        st: &mut Saved,
        request: ChatRequest,
        turn: u32,
        extra: u64,
    ) -> Result<ChatRequest> {
        let mut limits = self.limits();
        if extra > 0 {
            limits.limit = limits.limit.saturating_sub(extra).max(1);
            limits.threshold = limits.threshold.min(limits.limit);
        }
        let compactor = Compactor {
            counter: self.provider.as_ref(),
            summarizer: self.context.summarizer.as_deref(),
            limits,
            keep_last: self.context.keep_last,
            cancel: &self.cancel,
        };
        let Some(c) = compactor.compact(&request).await? else {
            return Ok(request);
        };
        st.messages = c.request.messages.clone();
        st.usage.add(&c.usage);
        let messages = c
            .request
            .messages
            .iter()
            .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
            .collect();
        self.emit(
            st,
            SessionEvent::ContextCompacted {
                turn,
                method: c.method,
                before_tokens: c.before,
                after_tokens: c.after,
                limit: c.limit,
                summarized: c.summarized,
                cuts: c.cuts,
                tools_dropped: c.tools_dropped,
                fallback: c.fallback,
                usage: turn_usage(&c.usage),
                messages,
            },
        );
        Ok(c.request)
    }

    /// What goes back to the model for `content`, the output of `call` (asked for by model
    /// call `turn`): the output, or — above the limit — its head and tail and the handle it
    /// is stored under.
    pub(super) fn shrink_output(
        &self,
        st: &mut Saved,
        turn: u32,
        call: &ToolCall,
        content: String,
    ) -> String {
        let max = self.limits().tool_output_max_bytes;
        if content.len() <= max || call.name == READ_TOOL_OUTPUT {
            return content;
        }
        let Some(store) = &self.context.outputs else {
            return content;
        };
        let handle = outputs::handle_for(turn, &call.id);
        match store.put(&handle, &content) {
            Ok(()) => {
                tracing::info!(
                    tool = %call.name,
                    bytes = content.len(),
                    handle = %handle,
                    "tool output stored behind a handle"
                );
                outputs::excerpt(&content, &handle, max / 2)
            }
            Err(e) => {
                self.note(
                    st,
                    format!(
                        "could not store the {}-byte output of `{}` ({e}); the model gets it whole",
                        content.len(),
                        call.name
                    ),
                );
                content
            }
        }
    }

    /// Whether a call of `name` is this loop's `read_tool_output`.
    pub(super) fn reads_output(&self, name: &str) -> bool {
        name == READ_TOOL_OUTPUT && self.outputs_stored()
    }

    /// Answers a `read_tool_output` call.
    pub(super) fn read_output(&self, args: &Value) -> (String, ToolStatus) {
        let Some(store) = self.context.outputs.as_deref() else {
            return ("error: no output is stored".into(), ToolStatus::Error);
        };
        match outputs::read(store, args, self.read_max()) {
            Ok(text) => (text, ToolStatus::Ok),
            Err(e) => (format!("error: {e}"), ToolStatus::Error),
        }
    }
}
