//! A session's events: agent activations, turns (model calls) and tool calls.

use trellis_protocol::{
    NodeId, RunId, SessionEvent, SessionId, SessionOwner, ToolStatus, TurnUsage,
};

use super::{Key, Mapper, event, gen_ai_span, node_span_in};
use crate::semconv::{self, op, tool_type, trellis};
use crate::span::{Span, SpanId, SpanKind, Status, TraceId};

/// Whose a session is, and which of its agent spans is current.
#[derive(Debug)]
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
}

/// The key of the agent span of activation `attempt` of session `id` in `trace`.
fn agent_key(trace: TraceId, id: &SessionId, attempt: u32) -> Key {
    let mut digits = itoa::Buffer::new();
    let attempt = digits.format(attempt);
    (trace, SpanId::of(trace, &["agent", id.as_str(), attempt]))
}

/// The key of turn `turn` of session `id` in `trace`.
fn turn_key(trace: TraceId, id: &SessionId, turn: u32) -> Key {
    let mut digits = itoa::Buffer::new();
    let turn = digits.format(turn);
    (trace, SpanId::of(trace, &["turn", id.as_str(), turn]))
}

/// The key of tool call `call_id` of session `id` in `trace`.
fn tool_key(trace: TraceId, id: &SessionId, call_id: &str) -> Key {
    (trace, SpanId::of(trace, &["tool", id.as_str(), call_id]))
}

/// The agent span `key` of session `id` (as `meta` tells; guessed from the id if unknown),
/// opened at `at`.
fn open_agent(meta: Option<&SessionMeta>, id: &SessionId, key: Key, at: i64) -> Span {
    let guessed;
    let meta = match meta {
        Some(meta) => meta,
        None => {
            guessed = SessionMeta::guess(id);
            &guessed
        }
    };
    let parent = meta
        .node
        .as_ref()
        .map(|(_, node)| node_span_in(meta.trace, node, meta.attempt));
    let role = match (&meta.role, &meta.node) {
        (Some(role), _) => role.as_str(),
        (None, Some(_)) => "agent",
        (None, None) => "channel",
    };
    let mut span = gen_ai_span(
        (key.0, key.1, parent),
        op::INVOKE_AGENT,
        Some(role),
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
    /// The trace and current attempt of session `id`, known from here on (guessed from its
    /// id when its `sessionStarted` was not seen).
    fn session(&mut self, id: &SessionId) -> (TraceId, u32) {
        if let Some(meta) = self.sessions.get(id) {
            return (meta.trace, meta.attempt);
        }
        let meta = SessionMeta::guess(id);
        let known = (meta.trace, meta.attempt);
        self.set_meta(id, meta);
        known
    }

    /// What is known of session `id`, to change.
    fn meta_mut(&mut self, id: &SessionId) -> Option<&mut SessionMeta> {
        self.session(id);
        self.sessions.get_mut(id)
    }

    /// Records whose session `id` is (an agent's is forgotten with its run).
    fn set_meta(&mut self, id: &SessionId, meta: SessionMeta) {
        if meta.node.is_some() {
            let run = self.run_meta.entry(meta.trace).or_default();
            if !run.sessions.contains(id) {
                run.sessions.push(id.clone());
            }
        }
        self.sessions.insert(id.clone(), meta);
    }

    /// The session's current agent span, opened at `at` if it is not open.
    fn agent_span(&mut self, id: &SessionId, at: i64) -> &mut Span {
        let (trace, attempt) = self.session(id);
        let key = agent_key(trace, id, attempt);
        let meta = self.sessions.get(id);
        self.agents
            .entry(key)
            .or_insert_with(|| open_agent(meta, id, key, at))
    }

    /// Ends the session's current agent span, failed with `error` when given.
    fn end_agent(&mut self, id: &SessionId, at: i64, error: Option<&str>) {
        let (trace, attempt) = self.session(id);
        if let Some(mut span) = self.agents.remove(&agent_key(trace, id, attempt)) {
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
                self.set_meta(id, meta);
            }
            SessionEvent::PromptSet { attempt, messages } => {
                if let Some(meta) = self.meta_mut(id) {
                    meta.attempt = *attempt;
                }
                let span = self.agent_span(id, at);
                if capture {
                    span.attributes
                        .set(semconv::GEN_AI_INPUT_MESSAGES, json_text(messages));
                }
            }
            SessionEvent::UserMessage { .. } => {
                if let Some(meta) = self.meta_mut(id)
                    && meta.node.is_none()
                {
                    meta.attempt += 1;
                }
                self.agent_span(id, at);
            }
            SessionEvent::TurnStarted {
                turn,
                attempt,
                model,
            } => {
                if *attempt > 0
                    && let Some(meta) = self.meta_mut(id)
                {
                    meta.attempt = *attempt;
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
                self.tools.insert((span.trace, span.id), span);
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
        let (trace, _) = self.session(id);
        let Some(mut span) = self.turns.remove(&turn_key(trace, id, turn)) else {
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
        let (trace, _) = self.session(id);
        let mut span = match self.tools.remove(&tool_key(trace, id, done.call_id)) {
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
        let (trace, _) = self.session(id);
        let key = turn_key(trace, id, turn);
        let mut span = gen_ai_span(
            (trace, key.1, Some(parent)),
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
        self.turns.insert(key, span);
    }

    /// Names the turn's model from the call recorded for it (`chat gpt-4o`).
    fn claim_call(&mut self, id: &SessionId, span: &mut Span, at: i64) {
        let Some((run, node)) = self.sessions.get(id).and_then(|m| m.node.as_ref()) else {
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
        let (trace, _) = self.session(id);
        let (_, tool_id) = tool_key(trace, id, call_id);
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
