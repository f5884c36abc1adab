//! A session's events: agent activations, turns (model calls) and tool calls.

use trellis_protocol::{
    NodeId, RunId, SessionEvent, SessionId, SessionOwner, ToolStatus, TurnUsage,
};

use super::{Mapper, event, gen_ai_span, node_span_id};
use crate::semconv::{self, op, tool_type, trellis};
use crate::span::{Span, SpanId, SpanKind, Status, TraceId};

/// Whose a session is, and which of its agent spans is current.
#[derive(Debug, Clone)]
pub(super) struct SessionMeta {
    trace: TraceId,
    /// The run and node of an agent session.
    node: Option<(RunId, NodeId)>,
    role: Option<String>,
    /// The current activation (agent sessions) or user turn (channels).
    attempt: u32,
}

impl SessionMeta {
    /// What a session's id tells when its `sessionStarted` was not seen: an agent session
    /// is named `<run>:<node>`.
    fn guess(id: &SessionId) -> Self {
        match id.as_str().split_once(':') {
            Some((run, node)) => Self::agent(RunId::from_string(run), NodeId::new(node), None),
            None => Self::channel(id),
        }
    }

    fn agent(run: RunId, node: NodeId, role: Option<String>) -> Self {
        Self {
            trace: TraceId::of(run.as_str()),
            node: Some((run, node)),
            role,
            attempt: 0,
        }
    }

    fn channel(id: &SessionId) -> Self {
        Self {
            trace: TraceId::of(id.as_str()),
            node: None,
            role: None,
            attempt: 0,
        }
    }

    fn agent_span_id(&self, id: &SessionId) -> SpanId {
        let attempt = self.attempt.to_string();
        SpanId::of(self.trace, &["agent", id.as_str(), &attempt])
    }
}

/// `function`, `extension` (an MCP server's tool: `server__tool`) or `datastore` (retrieval).
fn tool_kind(name: &str) -> &'static str {
    if name.contains("__") {
        tool_type::EXTENSION
    } else if matches!(name, "rag_search" | "search" | "search_code" | "web_search") {
        tool_type::DATASTORE
    } else {
        tool_type::FUNCTION
    }
}

impl Mapper {
    fn meta(&mut self, id: &SessionId) -> &mut SessionMeta {
        self.sessions
            .entry(id.clone())
            .or_insert_with(|| SessionMeta::guess(id))
    }

    /// The session's current agent span, opened at `at` if it is not open.
    fn agent_span(&mut self, id: &SessionId, at: i64) -> &mut Span {
        let meta = self.meta(id).clone();
        let key = (id.clone(), meta.attempt);
        self.agents.entry(key).or_insert_with(|| {
            let parent = meta
                .node
                .as_ref()
                .map(|(run, node)| node_span_id(run, node, meta.attempt).1);
            let role = meta.role.clone().unwrap_or_else(|| "channel".to_owned());
            let mut span = gen_ai_span(
                (meta.trace, meta.agent_span_id(id), parent),
                op::INVOKE_AGENT,
                Some(&role),
                SpanKind::Internal,
                at,
            );
            span.attributes.set(semconv::GEN_AI_AGENT_NAME, role);
            span.attributes.set(semconv::GEN_AI_AGENT_ID, id.as_str());
            span.attributes
                .set(semconv::GEN_AI_CONVERSATION_ID, id.as_str());
            if let Some((run, node)) = &meta.node {
                span.attributes.set(trellis::RUN_ID, run.as_str());
                span.attributes.set(trellis::NODE_ID, node.as_str());
                span.attributes.set(trellis::NODE_ATTEMPT, meta.attempt);
            }
            span
        })
    }

    /// Ends the session's current agent span, failed with `error` when given.
    fn end_agent(&mut self, id: &SessionId, at: i64, error: Option<&str>) {
        let attempt = self.meta(id).attempt;
        if let Some(mut span) = self.agents.remove(&(id.clone(), attempt)) {
            if let Some(e) = error {
                span.status = Status::Error(e.to_owned());
                span.attributes.set(semconv::ERROR_TYPE, "agent_failed");
            }
            self.end(span, at);
        }
    }

    pub(super) fn session_event(&mut self, id: &SessionId, at: i64, e: &SessionEvent) {
        let capture = self.options.capture_content;
        match e {
            SessionEvent::SessionStarted { owner } => {
                let meta = match owner {
                    SessionOwner::Agent { run, node, role } => {
                        SessionMeta::agent(run.clone(), node.clone(), Some(role.clone()))
                    }
                    SessionOwner::Channel { .. } => SessionMeta::channel(id),
                };
                self.sessions.insert(id.clone(), meta);
            }
            SessionEvent::PromptSet { attempt, messages } => {
                self.meta(id).attempt = *attempt;
                let span = self.agent_span(id, at);
                if capture {
                    span.attributes
                        .set(semconv::GEN_AI_INPUT_MESSAGES, json_text(messages));
                }
            }
            SessionEvent::UserMessage { .. } => {
                let meta = self.meta(id);
                if meta.node.is_none() {
                    meta.attempt += 1;
                }
                self.agent_span(id, at);
            }
            SessionEvent::TurnStarted {
                turn,
                attempt,
                model,
            } => {
                if *attempt > 0 {
                    self.meta(id).attempt = *attempt;
                }
                self.start_turn(id, at, *turn, model.as_deref());
            }
            SessionEvent::TurnCompleted {
                turn,
                message,
                usage,
            } => {
                let output = capture.then(|| json_text(std::slice::from_ref(message)));
                self.end_turn(id, at, *turn, Ok((usage, output)));
            }
            SessionEvent::TurnFailed { turn, error } => self.end_turn(id, at, *turn, Err(error)),
            SessionEvent::ToolStarted {
                turn,
                call_id,
                name,
                input,
            } => {
                let mut span = self.tool_span(id, at, *turn, call_id, name);
                if capture {
                    span.attributes
                        .set(semconv::GEN_AI_TOOL_CALL_ARGUMENTS, input.to_string());
                }
                self.tools.insert((id.clone(), call_id.clone()), span);
            }
            SessionEvent::ToolCompleted { .. } => self.end_tool(id, at, e),
            SessionEvent::ContextCompacted {
                turn,
                method,
                before_tokens,
                after_tokens,
                ..
            } => {
                let mut ev = event(at, "session:context_compacted");
                ev.attributes.set(trellis::TURN, *turn);
                ev.attributes
                    .set("trellis.compaction.method", method.as_str());
                ev.attributes
                    .set("trellis.compaction.before_tokens", *before_tokens);
                ev.attributes
                    .set("trellis.compaction.after_tokens", *after_tokens);
                self.agent_span(id, at).events.push(ev);
            }
            SessionEvent::MessagesReceived { turn, .. } => {
                let mut ev = event(at, "session:agent_message_received");
                ev.attributes.set(trellis::TURN, *turn);
                self.agent_span(id, at).events.push(ev);
            }
            SessionEvent::SessionCompleted { .. } => self.end_agent(id, at, None),
            SessionEvent::SessionError { error } => self.end_agent(id, at, Some(error.as_str())),
            SessionEvent::MessageDelta { .. }
            | SessionEvent::ThoughtDelta { .. }
            | SessionEvent::TurnProgress { .. }
            | SessionEvent::ToolProgress { .. }
            | SessionEvent::Note { .. } => {}
        }
    }

    /// Ends turn `turn`: completed with its usage (and output messages, when captured), or
    /// failed with why.
    fn end_turn(
        &mut self,
        id: &SessionId,
        at: i64,
        turn: u32,
        outcome: Result<(&TurnUsage, Option<String>), &String>,
    ) {
        let Some(mut span) = self.turns.remove(&(id.clone(), turn)) else {
            return;
        };
        match outcome {
            Ok((usage, output)) => {
                span.attributes
                    .set(semconv::GEN_AI_USAGE_INPUT_TOKENS, usage.prompt_tokens);
                span.attributes
                    .set(semconv::GEN_AI_USAGE_OUTPUT_TOKENS, usage.completion_tokens);
                if let Some(output) = output {
                    span.attributes.set(semconv::GEN_AI_OUTPUT_MESSAGES, output);
                }
            }
            Err(error) => {
                span.status = Status::Error(error.clone());
                span.attributes
                    .set(semconv::ERROR_TYPE, "model_call_failed");
            }
        }
        self.claim_call(id, &mut span, at);
        self.end(span, at);
    }

    /// Ends a tool call (`turn`, call id, tool), opening it first if its start was not seen.
    /// Ends the span of the tool call `completed` (a `toolCompleted` event) names.
    fn end_tool(&mut self, id: &SessionId, at: i64, completed: &SessionEvent) {
        let Some(done) = completed.tool_completion() else {
            return;
        };
        let status = done.status;
        let mut span = match self.tools.remove(&(id.clone(), done.call_id.to_owned())) {
            Some(span) => span,
            None => self.tool_span(id, done.started_ms(at), done.turn, done.call_id, done.name),
        };
        span.attributes.set(trellis::TOOL_STATUS, status.as_str());
        if status != ToolStatus::Ok {
            span.status = Status::Error(format!("tool call {}", status.as_str()));
            span.attributes.set(semconv::ERROR_TYPE, status.as_str());
        }
        if self.options.capture_content {
            span.attributes
                .set(semconv::GEN_AI_TOOL_CALL_RESULT, done.output);
        }
        self.end(span, at);
    }

    /// Opens turn `turn`'s model call span, `chat {model}` when the event names the model
    /// (live; a stored call recorded for the turn names it too, [`Self::claim_call`]).
    fn start_turn(&mut self, id: &SessionId, at: i64, turn: u32, model: Option<&str>) {
        let parent = self.agent_span(id, at).id;
        let meta = self.meta(id).clone();
        let turn_text = turn.to_string();
        let turn_id = SpanId::of(meta.trace, &["turn", id.as_str(), &turn_text]);
        let mut span = gen_ai_span(
            (meta.trace, turn_id, Some(parent)),
            op::CHAT,
            model,
            SpanKind::Client,
            at,
        );
        if let Some(model) = model {
            span.attributes.set(semconv::GEN_AI_REQUEST_MODEL, model);
        }
        span.attributes
            .set(semconv::GEN_AI_CONVERSATION_ID, id.as_str());
        span.attributes.set(trellis::SESSION_ID, id.as_str());
        span.attributes.set(trellis::TURN, turn);
        self.turns.insert((id.clone(), turn), span);
    }

    /// Names the turn's model from the call recorded for it (`chat gpt-4o`).
    fn claim_call(&mut self, id: &SessionId, span: &mut Span, at: i64) {
        let Some((run, node)) = self.meta(id).node.clone() else {
            return;
        };
        if let Some(call) = self
            .calls
            .claim(run.as_str(), node.as_str(), span.start_ms, at)
        {
            span.name = format!("{} {}", op::CHAT, call.model);
            super::calls::describe(&mut span.attributes, &call);
        }
    }

    fn tool_span(&mut self, id: &SessionId, at: i64, turn: u32, call_id: &str, name: &str) -> Span {
        let parent = self.agent_span(id, at).id;
        let trace = self.meta(id).trace;
        let tool_id = SpanId::of(trace, &["tool", id.as_str(), call_id]);
        let mut span = gen_ai_span(
            (trace, tool_id, Some(parent)),
            op::EXECUTE_TOOL,
            Some(name),
            SpanKind::Internal,
            at,
        );
        span.attributes.set(semconv::GEN_AI_TOOL_NAME, name);
        span.attributes.set(semconv::GEN_AI_TOOL_CALL_ID, call_id);
        span.attributes
            .set(semconv::GEN_AI_TOOL_TYPE, tool_kind(name));
        span.attributes
            .set(semconv::GEN_AI_CONVERSATION_ID, id.as_str());
        span.attributes.set(trellis::TURN, turn);
        span
    }
}

/// Messages as the JSON text the GenAI conventions put in an attribute.
fn json_text(messages: &[serde_json::Value]) -> String {
    serde_json::Value::Array(messages.to_vec()).to_string()
}
