//! The runtime service's queue pair: [`Op`]s go in (`submit`), [`ServiceEvent`]s come out
//! (subscriptions). Every front-end — the CLI, `trellis serve`, `trellis acp`, `trellis mcp` —
//! drives runs and sessions only through these types.
//!
//! Events live on *streams* ([`StreamId`]): a run's graph log, one stream per agent or channel
//! session (its turns: messages, thoughts, tool calls), and the workspace stream (runs and
//! sessions created, the outcome of every submission). Each stream numbers its events from 1;
//! a subscriber that remembers the last `seq` it saw resumes without a gap or a duplicate.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Answer, EdgeSpec, EventKind, InjectNode, NodeId, RunId, RunStatus};

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// A fresh, time-ordered id.
            pub fn new() -> Self {
                Self(Arc::from(format!(
                    concat!($prefix, "{}"),
                    uuid::Uuid::now_v7().simple()
                )))
            }

            /// Wraps an existing id.
            pub fn from_string(id: impl Into<String>) -> Self {
                Self(Arc::from(id.into()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

text_id!(
    /// Identifies one submitted [`Op`]; every event the op causes carries it.
    SubmissionId,
    "sub-"
);

text_id!(
    /// Identifies a session: the conversation of one agent node of a run, or a channel
    /// discussion. Agent sessions are named after their node ([`SessionId::for_node`]), so a
    /// process that resumes the run finds the same session.
    SessionId,
    "ses-"
);

impl SessionId {
    /// The session of agent node `node` of run `run`: `<run>:<node>`.
    pub fn for_node(run: &RunId, node: &NodeId) -> Self {
        Self::from_string(format!("{run}:{node}"))
    }
}

/// A stream of events. Text form: `run:<id>`, `session:<id>`, `workspace`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamId {
    /// A run's graph event log (the engine's `seq`).
    Run(RunId),
    /// A session's turns.
    Session(SessionId),
    /// The workspace: runs and sessions created and finished, op outcomes, review changes.
    Workspace,
}

impl StreamId {
    /// The text form (also the key of stored stream events).
    pub fn key(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamId::Run(r) => write!(f, "run:{r}"),
            StreamId::Session(s) => write!(f, "session:{s}"),
            StreamId::Workspace => f.write_str("workspace"),
        }
    }
}

/// A stream id that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadStreamId(pub String);

impl fmt::Display for BadStreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a stream: expected `run:<id>`, `session:<id>` or `workspace`",
            self.0
        )
    }
}

impl std::error::Error for BadStreamId {}

impl FromStr for StreamId {
    type Err = BadStreamId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "workspace" {
            return Ok(StreamId::Workspace);
        }
        match s.split_once(':') {
            Some(("run", id)) if !id.is_empty() => Ok(StreamId::Run(RunId::from_string(id))),
            Some(("session", id)) if !id.is_empty() => {
                Ok(StreamId::Session(SessionId::from_string(id)))
            }
            _ => Err(BadStreamId(s.to_owned())),
        }
    }
}

impl Serialize for StreamId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StreamId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How a run's approvals and questions are answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputMode {
    /// Approvals and questions become graph interrupts: the run pauses until answered.
    #[default]
    Interrupts,
    /// Every `ask` is approved; questions are answered "decide yourself".
    Approve,
    /// Every `ask` is denied; questions are answered "decide yourself".
    Deny,
}

/// Token and cost limits for a new run (override the configured `[budget]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Budgets {
    /// Tokens (prompt + completion) for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// US dollars for the whole run (calls with a configured price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// A request to the runtime service. `submit(op)` returns a [`SubmissionId`] at once; the
/// op's outcome arrives on the workspace stream as [`WorkspaceEvent::OpCompleted`] or
/// [`WorkspaceEvent::OpFailed`], and everything it causes carries the submission id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Op {
    /// Orchestrate, plan and start a workflow run. Result: `{"run": id, "workflow": name,
    /// "plan": …}`.
    StartRun {
        /// What the user asks for.
        request: String,
        /// The repository (must be the service's workspace or inside it; default: it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repo: Option<String>,
        /// Use this workflow instead of asking the orchestrator.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workflow: Option<String>,
        /// Optional stages to run.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        include: Vec<String>,
        /// Optional stages to skip.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skip: Vec<String>,
        /// How approvals and questions are answered.
        #[serde(default)]
        input: InputMode,
        /// Limits for this run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budgets: Option<Budgets>,
        /// Plan only: orchestrate and assemble, start nothing.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        plan_only: bool,
    },
    /// Continue a stored run in this process (after a crash, Ctrl-C, or another process
    /// stopped), applying `answers` first.
    ResumeRun {
        /// The run (id or unique prefix).
        run: String,
        /// Answers to waiting nodes.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        answers: Vec<NodeAnswer>,
        /// Messages for nodes, delivered before anything runs.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        messages: Vec<NodeMessage>,
        /// How later approvals and questions are answered.
        #[serde(default)]
        input: InputMode,
    },
    /// Answer an interrupt (approval, question, budget grant).
    Answer {
        /// The run.
        run: String,
        /// The WAITING_INPUT node.
        node: NodeId,
        /// The answer.
        answer: Answer,
    },
    /// Approve what a run waits on: every pending approval or review interrupt of `node`
    /// (all waiting nodes when absent), or an artifact.
    Approve {
        /// The run.
        run: String,
        /// The node (all waiting approvals when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<NodeId>,
        /// An artifact id, to approve it instead of an interrupt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<i64>,
        /// A comment.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comment: Option<String>,
    },
    /// Request changes: on a waiting review/approval (the node gets the feedback), on an
    /// artifact, or on a finished run's change set (the chosen stage runs again with the
    /// feedback in its context, bounded by its `max_attempts`).
    RequestChanges {
        /// The run.
        run: String,
        /// The stage (node) to revise; default: the waiting node, else the last stage that
        /// changed files.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<NodeId>,
        /// An artifact id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        artifact: Option<i64>,
        /// What to change.
        feedback: String,
    },
    /// Send a message to a node: appended to a RUNNING agent's context before its next model
    /// call, buffered for READY / WAITING_INPUT, refused for COMPLETED.
    SendMessage {
        /// The run.
        run: String,
        /// The node.
        node: NodeId,
        /// The text.
        text: String,
    },
    /// Prune a READY or RUNNING node (cancel it, roll back its edits) and what it spawned;
    /// with `subtree`, also the nodes it routes to that have not run.
    Prune {
        /// The run.
        run: String,
        /// The node.
        node: NodeId,
        /// Also prune its not-yet-run descendants.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        subtree: bool,
        /// Why, for the audit trail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Add nodes (instances of the graph's templates) and edges to a live run.
    Inject {
        /// The run.
        run: String,
        /// New nodes.
        #[serde(default)]
        nodes: Vec<InjectNode>,
        /// New edges.
        #[serde(default)]
        edges: Vec<EdgeSpec>,
    },
    /// Cancel a run (live here, in another process through the store, or paused).
    Cancel {
        /// The run.
        run: String,
        /// Why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A review operation on a run's change set.
    Review {
        /// The run.
        run: String,
        /// What to do.
        action: ReviewAction,
    },
    /// Start a channel session: a discussion about the codebase with read-only tools.
    /// Result: `{"session": id}`.
    StartChannel {
        /// The channel's name (sessions of one channel share it).
        channel: String,
        /// A first message, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Send a user message to a session (a channel session answers it).
    SessionMessage {
        /// The session.
        session: SessionId,
        /// The text.
        text: String,
    },
    /// Stop a session's current turn.
    CancelSession {
        /// The session.
        session: SessionId,
    },
}

impl Op {
    /// The wire name of the op.
    pub fn name(&self) -> &'static str {
        match self {
            Op::StartRun { .. } => "startRun",
            Op::ResumeRun { .. } => "resumeRun",
            Op::Answer { .. } => "answer",
            Op::Approve { .. } => "approve",
            Op::RequestChanges { .. } => "requestChanges",
            Op::SendMessage { .. } => "sendMessage",
            Op::Prune { .. } => "prune",
            Op::Inject { .. } => "inject",
            Op::Cancel { .. } => "cancel",
            Op::Review { .. } => "review",
            Op::StartChannel { .. } => "startChannel",
            Op::SessionMessage { .. } => "sessionMessage",
            Op::CancelSession { .. } => "cancelSession",
        }
    }
}

/// An answer to one waiting node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAnswer {
    /// The node.
    pub node: NodeId,
    /// The answer.
    pub answer: Answer,
}

/// A file of a change set and which of its hunks (all when absent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileHunks {
    /// The path, relative to the repository.
    pub file: String,
    /// Hunk indexes; absent: the whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hunks: Option<Vec<usize>>,
}

/// A message for one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMessage {
    /// The node.
    pub node: NodeId,
    /// The text.
    pub text: String,
}

/// What to do with a run's change set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "action",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ReviewAction {
    /// The change set: files, hunks, review state. Result: the change set.
    Show,
    /// Choose hunks of one file (by index) to accept; the others are rejected.
    Select {
        /// The file (path relative to the repository).
        file: String,
        /// Hunk indexes to accept; absent: the whole file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hunks: Option<Vec<usize>>,
        /// Accept (true) or reject (false) what is named.
        accept: bool,
    },
    /// Apply the accepted hunks to the working tree: those of `accept` when given (files
    /// not listed are rejected), else those chosen with `select`, else everything.
    Apply {
        /// The files (and hunks) to accept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        accept: Option<Vec<FileHunks>>,
    },
    /// Reject the whole change set.
    Reject {
        /// Why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comment: Option<String>,
    },
    /// Reverse the last apply (or re-apply an undone one).
    Undo,
}

/// One event delivered to a subscriber.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// The payload of a [`ServiceEvent`]; which variant depends on the stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// Token usage of a turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// A session's events (seed 003: `session:*`, `turn:*`). A turn is one model invocation;
/// text and thinking stream as deltas (coalesced when stored), tool calls as started and
/// completed. Replaying an agent session's events of one attempt rebuilds its conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// (seed 004 AGENT_MESSAGE_RECEIVED).
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
            SessionEvent::TurnCompleted { .. } => "turnCompleted",
            SessionEvent::TurnFailed { .. } => "turnFailed",
            SessionEvent::ToolStarted { .. } => "toolStarted",
            SessionEvent::ToolCompleted { .. } => "toolCompleted",
            SessionEvent::Note { .. } => "note",
            SessionEvent::SessionCompleted { .. } => "sessionCompleted",
            SessionEvent::SessionError { .. } => "sessionError",
        }
    }

    /// Whether this is a streamed delta (coalesced with its neighbours when stored).
    pub fn is_delta(&self) -> bool {
        matches!(
            self,
            SessionEvent::MessageDelta { .. } | SessionEvent::ThoughtDelta { .. }
        )
    }
}

/// Workspace events: what happened to runs, sessions, change sets and submissions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// The status of an artifact (seed 003: scope cards, research cards, plans; seed 004:
/// discovery.md, plan.md, spec.md, tickets.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_round_trip_as_text() {
        for s in ["run:abc", "session:abc:node/x", "workspace"] {
            let id: StreamId = s.parse().unwrap();
            assert_eq!(id.to_string(), s);
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(serde_json::from_str::<StreamId>(&json).unwrap(), id);
        }
        assert!("run:".parse::<StreamId>().is_err());
        assert!("nope".parse::<StreamId>().is_err());
    }

    #[test]
    fn events_of_each_stream_round_trip() {
        let bodies = [
            ServiceEventBody::Run(EventKind::StepStarted { step: 1 }),
            ServiceEventBody::Session(SessionEvent::MessageDelta {
                turn: 2,
                text: "hi".into(),
            }),
            ServiceEventBody::Workspace(WorkspaceEvent::OpFailed {
                op: "prune".into(),
                error: "no".into(),
            }),
        ];
        for body in bodies {
            let ev = ServiceEvent {
                stream: StreamId::Workspace,
                seq: 1,
                ts: 2,
                submission: Some(SubmissionId::from_string("sub-1")),
                event: body,
            };
            let s = serde_json::to_string(&ev).unwrap();
            assert_eq!(serde_json::from_str::<ServiceEvent>(&s).unwrap(), ev, "{s}");
        }
    }

    #[test]
    fn ops_use_camel_case_tags() {
        let op = Op::Prune {
            run: "r".into(),
            node: NodeId::new("code"),
            subtree: true,
            reason: None,
        };
        assert_eq!(
            serde_json::to_string(&op).unwrap(),
            r#"{"op":"prune","run":"r","node":"code","subtree":true}"#
        );
    }
}
