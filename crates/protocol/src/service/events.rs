//! What comes out of the service: [`ServiceEvent`]s and their payloads.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::StreamId;
use crate::{EventKind, NodeId, RunId, RunStatus, SessionId, SubmissionId};

/// One event delivered to a subscriber.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceEvent {
    /// The stream.
    pub stream: StreamId,
    /// Position in the stream, from 1.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub ts: i64,
    /// The submission that caused it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission: Option<SubmissionId>,
    /// What happened.
    pub event: ServiceEventBody,
}

impl From<&crate::Event> for ServiceEvent {
    /// A run's committed event as a service publishes it (on the run's stream; the event's
    /// cause is its submission).
    fn from(e: &crate::Event) -> Self {
        ServiceEvent {
            stream: StreamId::Run(e.run.clone()),
            seq: e.seq,
            ts: e.ts,
            submission: e.cause.clone(),
            event: ServiceEventBody::Run(e.kind.clone()),
        }
    }
}

/// The payload of a [`ServiceEvent`]; which variant depends on the stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ServiceEventBody {
    /// A run's graph event.
    Run(EventKind),
    /// A session event.
    Session(SessionEvent),
    /// A workspace event.
    Workspace(WorkspaceEvent),
}

/// Where a session belongs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SessionOwner {
    /// An agent node of a workflow run.
    Agent {
        /// The run.
        run: RunId,
        /// The node.
        node: NodeId,
        /// The agent's role.
        role: String,
    },
    /// A channel discussion.
    Channel {
        /// The channel's name.
        channel: String,
    },
}

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// It ran and succeeded.
    Ok,
    /// It ran and failed (the error went back to the model).
    Error,
    /// The policy or the user denied it.
    Denied,
    /// The process stopped (crash, kill) while it ran; reported to the model as interrupted.
    Interrupted,
    /// It was cancelled (prune, cancel).
    Cancelled,
}

impl ToolStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::Denied => "denied",
            ToolStatus::Interrupted => "interrupted",
            ToolStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "ok" => ToolStatus::Ok,
            "error" => ToolStatus::Error,
            "denied" => ToolStatus::Denied,
            "interrupted" => ToolStatus::Interrupted,
            "cancelled" => ToolStatus::Cancelled,
            _ => return None,
        })
    }
}

/// How a [`SessionEvent::ContextCompacted`] replaced the earlier messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompactionMethod {
    /// The summary model summarised them.
    Summary,
    /// A deterministic digest (one line per step) replaced them: the summary call failed or
    /// no summary model is configured.
    Digest,
    /// Nothing was summarised (too few messages): long messages were cut and old ones
    /// dropped.
    Truncation,
}

impl CompactionMethod {
    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            CompactionMethod::Summary => "summary",
            CompactionMethod::Digest => "digest",
            CompactionMethod::Truncation => "truncation",
        }
    }
}

/// Token usage of a turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// A session's events (topics `session:*`, `turn:*`). A turn is one model invocation;
/// text and thinking stream as deltas (coalesced when stored), tool calls as started and
/// completed. Replaying an agent session's events of one attempt rebuilds its conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SessionEvent {
    /// `session:started`.
    SessionStarted {
        /// Whose session.
        owner: SessionOwner,
    },
    /// An agent activation began with this prompt (system and context messages, in the
    /// model provider's message JSON). Turns after it belong to `attempt`.
    PromptSet {
        /// The node's activation number.
        attempt: u32,
        /// The messages.
        messages: Vec<Value>,
    },
    /// A user message in a channel session (starts a user turn).
    UserMessage {
        /// The text.
        text: String,
    },
    /// Messages sent to a running agent, appended to its context before model call `turn`
    /// (`session:agent_message_received`).
    MessagesReceived {
        /// The turn whose request first contains them.
        turn: u32,
        /// The texts, oldest first.
        texts: Vec<String>,
    },
    /// `turn:started`: a model call began.
    TurnStarted {
        /// Turn number within the session, from 1.
        turn: u32,
        /// The node's activation number (0 for channels).
        #[serde(default)]
        attempt: u32,
        /// The model called: the name the agent's model profile resolved to, as its usage
        /// record names it (absent in events recorded before it was added).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// `turn:message_delta`: answer text.
    MessageDelta {
        /// The turn.
        turn: u32,
        /// The text.
        text: String,
    },
    /// `turn:thought_delta`: thinking text.
    ThoughtDelta {
        /// The turn.
        turn: u32,
        /// The text.
        text: String,
    },
    /// `turn:progress`: how far a model call whose answer is not streamed yet has got —
    /// the prompt being read (`promptDone` of `promptTokens`, a reused cached prefix counting
    /// as read) and answer tokens generated but held back (a tool call is sent whole).
    /// Local models report it; stored coalesced like deltas (only the latest of a burst).
    TurnProgress {
        /// The turn.
        turn: u32,
        /// Prompt tokens of the call.
        prompt_tokens: u64,
        /// Prompt tokens read so far.
        prompt_done: u64,
        /// Answer tokens generated so far and not yet shown.
        #[serde(default)]
        generated: u64,
    },
    /// `turn:completed`: the model call finished; `message` is the assistant message added
    /// to the conversation (text and tool calls, provider message JSON).
    TurnCompleted {
        /// The turn.
        turn: u32,
        /// The assistant message.
        message: Value,
        /// Tokens.
        #[serde(default)]
        usage: TurnUsage,
    },
    /// The model call failed.
    TurnFailed {
        /// The turn.
        turn: u32,
        /// Why.
        error: String,
    },
    /// `turn:tool_started`.
    ToolStarted {
        /// The turn that asked for it.
        turn: u32,
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        input: Value,
    },
    /// `turn:tool_progress`: how far a running tool call has got (an MCP server's
    /// `notifications/progress`). Stored coalesced like deltas: of the reports that arrive
    /// within the recorder's delta window only the latest is kept.
    ToolProgress {
        /// The turn that asked for the call.
        turn: u32,
        /// The call id.
        call_id: String,
        /// Work done so far (increases with every report).
        progress: f64,
        /// Total work, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        /// What the tool is doing now.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// `turn:tool_completed`.
    ToolCompleted {
        /// The turn that asked for it.
        turn: u32,
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// What went back to the model.
        output: String,
        /// How it ended.
        status: ToolStatus,
        /// Wall time.
        duration_ms: u64,
    },
    /// The conversation was compacted before model call `turn` because its prompt exceeded
    /// the agent's summarisation threshold or input cap (`docs/context.md`): earlier
    /// messages were summarised (or listed deterministically when the summary call failed),
    /// and what still did not fit was cut. `messages` is the conversation from here on
    /// (an agent resumed from its record continues from it).
    ContextCompacted {
        /// The model call whose prompt was compacted.
        turn: u32,
        /// How the earlier messages were replaced.
        method: CompactionMethod,
        /// Prompt tokens before (as the agent's model counts them).
        before_tokens: u64,
        /// Prompt tokens after.
        after_tokens: u64,
        /// The limit the prompt had to fit (the input cap, or the context window minus the
        /// reply reserve).
        limit: u64,
        /// Messages replaced by the summary.
        summarized: u32,
        /// Messages cut or dropped afterwards to fit the limit.
        #[serde(default)]
        cuts: u32,
        /// Whether the tool descriptions were dropped to fit.
        #[serde(default)]
        tools_dropped: bool,
        /// Why the model's summary was not used, or did not suffice.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback: Option<String>,
        /// Tokens of the summary call(s) (booked to the agent's budget).
        #[serde(default)]
        usage: TurnUsage,
        /// The conversation after compaction (provider message JSON).
        messages: Vec<Value>,
    },
    /// A line worth showing (a repaired answer, a fitted prompt…).
    Note {
        /// The text.
        text: String,
    },
    /// `session:completed`: the agent reported (or the channel answered and is idle).
    SessionCompleted {
        /// The report or answer, for display.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        output: Value,
    },
    /// `session:error`.
    SessionError {
        /// Why.
        error: String,
    },
}

/// A [`SessionEvent::ToolCompleted`], borrowed ([`SessionEvent::tool_completion`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ToolCompletion<'a> {
    /// The turn that asked for the call.
    pub turn: u32,
    /// The call id.
    pub call_id: &'a str,
    /// The tool.
    pub name: &'a str,
    /// What went back to the model.
    pub output: &'a str,
    /// How it ended.
    pub status: ToolStatus,
    /// Wall time.
    pub duration_ms: u64,
}

impl ToolCompletion<'_> {
    /// When the call started, for a completion recorded at `at_ms`: `duration_ms` earlier
    /// (saturating).
    pub fn started_ms(&self, at_ms: i64) -> i64 {
        at_ms.saturating_sub(i64::try_from(self.duration_ms).unwrap_or(i64::MAX))
    }
}

impl SessionEvent {
    /// The wire name.
    pub fn name(&self) -> &'static str {
        match self {
            SessionEvent::SessionStarted { .. } => "sessionStarted",
            SessionEvent::PromptSet { .. } => "promptSet",
            SessionEvent::UserMessage { .. } => "userMessage",
            SessionEvent::MessagesReceived { .. } => "messagesReceived",
            SessionEvent::TurnStarted { .. } => "turnStarted",
            SessionEvent::MessageDelta { .. } => "messageDelta",
            SessionEvent::ThoughtDelta { .. } => "thoughtDelta",
            SessionEvent::TurnProgress { .. } => "turnProgress",
            SessionEvent::TurnCompleted { .. } => "turnCompleted",
            SessionEvent::TurnFailed { .. } => "turnFailed",
            SessionEvent::ToolStarted { .. } => "toolStarted",
            SessionEvent::ToolProgress { .. } => "toolProgress",
            SessionEvent::ToolCompleted { .. } => "toolCompleted",
            SessionEvent::ContextCompacted { .. } => "contextCompacted",
            SessionEvent::Note { .. } => "note",
            SessionEvent::SessionCompleted { .. } => "sessionCompleted",
            SessionEvent::SessionError { .. } => "sessionError",
        }
    }

    /// A `toolCompleted` event's fields, borrowed; `None` for other events. The one reading
    /// of the event that the store's rows and the telemetry spans share.
    pub fn tool_completion(&self) -> Option<ToolCompletion<'_>> {
        let SessionEvent::ToolCompleted {
            turn,
            call_id,
            name,
            output,
            status,
            duration_ms,
        } = self
        else {
            return None;
        };
        Some(ToolCompletion {
            turn: *turn,
            call_id,
            name,
            output,
            status: *status,
            duration_ms: *duration_ms,
        })
    }

    /// A `ToolProgress` report as one line for people (`3/5 (60%) · copying files`,
    /// `12 · scanning`); `None` for other events.
    pub fn progress_text(&self) -> Option<String> {
        let SessionEvent::ToolProgress {
            progress,
            total,
            message,
            ..
        } = self
        else {
            return None;
        };
        let num = |x: f64| {
            if x.fract() == 0.0 && x.abs() < 1e15 {
                format!("{x:.0}")
            } else {
                format!("{x:.2}")
            }
        };
        let mut text = match total {
            Some(t) if *t > 0.0 => format!(
                "{}/{} ({:.0}%)",
                num(*progress),
                num(*t),
                (progress / t * 100.0).clamp(0.0, 100.0).round()
            ),
            _ => num(*progress),
        };
        if let Some(m) = message.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            text.push_str(" · ");
            text.push_str(m);
        }
        Some(text)
    }

    /// A `TurnProgress` report as one line for people (`reading the prompt: 1536/4100
    /// tokens (37%)`, `writing: 48 tokens`); `None` for other events.
    pub fn turn_progress_text(&self) -> Option<String> {
        let SessionEvent::TurnProgress {
            prompt_tokens,
            prompt_done,
            generated,
            ..
        } = self
        else {
            return None;
        };
        Some(if *generated > 0 {
            format!("writing: {generated} tokens")
        } else if prompt_done >= prompt_tokens {
            format!("read the prompt ({prompt_tokens} tokens); writing")
        } else {
            let pct = (*prompt_done as f64 / (*prompt_tokens).max(1) as f64 * 100.0).round();
            format!("reading the prompt: {prompt_done}/{prompt_tokens} tokens ({pct:.0}%)")
        })
    }

    /// A `ContextCompacted` event as one line for people (`context compacted (summary):
    /// 2400 → 900 tokens (limit 1500); 12 messages summarised`); `None` for other events.
    pub fn compaction_text(&self) -> Option<String> {
        let SessionEvent::ContextCompacted {
            method,
            before_tokens,
            after_tokens,
            limit,
            summarized,
            cuts,
            tools_dropped,
            fallback,
            ..
        } = self
        else {
            return None;
        };
        let mut text = format!(
            "context compacted ({}): {before_tokens} → {after_tokens} tokens (limit {limit})",
            method.as_str()
        );
        if *summarized > 0 {
            text.push_str(&format!("; {summarized} messages summarised"));
        }
        if *cuts > 0 {
            text.push_str(&format!("; {cuts} cut or dropped"));
        }
        if *tools_dropped {
            text.push_str("; tool descriptions dropped");
        }
        if let Some(why) = fallback {
            text.push_str(&format!(" — {why}"));
        }
        Some(text)
    }

    /// Whether this is a streamed delta or a progress report: coalesced with its neighbours
    /// when stored, and not a step of the conversation (an agent resumed from its recorded
    /// events does not count them).
    pub fn is_delta(&self) -> bool {
        matches!(
            self,
            SessionEvent::MessageDelta { .. }
                | SessionEvent::ThoughtDelta { .. }
                | SessionEvent::ToolProgress { .. }
                | SessionEvent::TurnProgress { .. }
        )
    }
}

/// Workspace events: what happened to runs, sessions, change sets and submissions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum WorkspaceEvent {
    /// A submission finished; `result` is the op's answer.
    OpCompleted {
        /// The op's wire name.
        op: String,
        /// Its result.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        result: Value,
    },
    /// A submission failed.
    OpFailed {
        /// The op's wire name.
        op: String,
        /// Why, with what to do about it.
        error: String,
        /// The kind of failure (absent in events recorded before kinds existed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<OpErrorKind>,
    },
    /// `workflow:created`.
    RunCreated {
        /// The run.
        run: RunId,
        /// The workflow.
        workflow: String,
        /// The request.
        request: String,
    },
    /// `workflow:stage_changed`: a stage of a workflow run started running.
    StageChanged {
        /// The run.
        run: RunId,
        /// The stage (its node id).
        stage: NodeId,
        /// Its activation number (above 1 when it runs again).
        attempt: u32,
    },
    /// A run stopped executing in this service (finished, paused or failed).
    RunStopped {
        /// The run.
        run: RunId,
        /// Its status.
        status: RunStatus,
        /// Error text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A session was created.
    SessionCreated {
        /// The session.
        session: SessionId,
        /// Whose.
        owner: SessionOwner,
    },
    /// A change set's review state changed (selection, apply, reject, undo).
    ReviewChanged {
        /// The run.
        run: RunId,
        /// The new review state.
        state: String,
    },
    /// `workflow:approval_needed` for an artifact, or its status changed.
    ArtifactChanged {
        /// The artifact.
        artifact: i64,
        /// The run.
        run: RunId,
        /// Its status.
        status: ArtifactStatus,
    },
}

/// The status of an artifact (scope cards, research cards, plans; discovery.md, plan.md,
/// spec.md, tickets.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactStatus {
    /// Being written.
    Draft,
    /// Waiting for the user.
    AwaitingApproval,
    /// Approved.
    Approved,
    /// Sent back with feedback.
    ChangesRequested,
}

impl ArtifactStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactStatus::Draft => "draft",
            ArtifactStatus::AwaitingApproval => "awaiting_approval",
            ArtifactStatus::Approved => "approved",
            ArtifactStatus::ChangesRequested => "changes_requested",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "draft" => ArtifactStatus::Draft,
            "awaiting_approval" => ArtifactStatus::AwaitingApproval,
            "approved" => ArtifactStatus::Approved,
            "changes_requested" => ArtifactStatus::ChangesRequested,
            _ => return None,
        })
    }
}

/// A versioned artifact of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Its id.
    pub id: i64,
    /// The run.
    pub run: RunId,
    /// The node that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeId>,
    /// `scope_card`, `research_card`, `plan`, `discovery`, `spec`, `tickets`, …
    pub kind: String,
    /// 1, 2, … per (run, kind).
    pub version: u32,
    /// The content (markdown or JSON text).
    pub content: String,
    /// The content as markdown, for display (a JSON card rendered; absent when the content
    /// is already markdown or is not a known kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendered: Option<String>,
    /// Its status.
    pub status: ArtifactStatus,
    /// The user's feedback when changes were requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// Created, ms since the epoch.
    pub created_ms: i64,
    /// Last changed, ms since the epoch.
    pub updated_ms: i64,
}

/// What kind of failure an op had; front-ends map it to their own codes (HTTP statuses,
/// JSON-RPC errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpErrorKind {
    /// The op's arguments are wrong (a missing message, a hunk that does not exist…).
    Invalid,
    /// The run, node, session, change set or file it names does not exist.
    NotFound,
    /// The op is not valid in the current state (approve a node that is not waiting, prune a
    /// finished node, message a finished run).
    Conflict,
    /// A model endpoint failed.
    Upstream,
    /// The service is shutting down.
    Unavailable,
    /// A bug or an environment failure (disk, git, a panic).
    Internal,
}
