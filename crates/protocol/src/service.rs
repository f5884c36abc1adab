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

use crate::{Answer, EdgeSpec, InjectNode, NodeId, RunId, SessionId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// The schema of the text form: `run:<id>`, `session:<id>` or `workspace`.
impl JsonSchema for StreamId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StreamId".into()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        concat!(module_path!(), "::StreamId").into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A stream of events: `run:<run id>` (a run's graph log), \
                `session:<session id>` (a session's turns) or `workspace`.",
            "type": "string",
            "pattern": "^(?:(?:run|session):.+|workspace)$",
        })
    }
}

/// How a run's approvals and questions are answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budgets {
    /// Tokens (prompt + completion) for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// US dollars for the whole run (calls with a configured price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// A request to the runtime service. `submit(op)` returns a [`SubmissionId`](crate::SubmissionId) at once; the
/// op's outcome arrives on the workspace stream as [`WorkspaceEvent::OpCompleted`] or
/// [`WorkspaceEvent::OpFailed`], and everything it causes carries the submission id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// Record a front-end client's session (an editor's ACP session): inserted, or its title
    /// and settings updated (`createdMs` and `updatedMs` are set by the store). Result: the
    /// session as recorded.
    RecordClientSession {
        /// The session.
        session: crate::records::ClientSession,
    },
    /// Record a prompt turn of a recorded client session: the run it started (`turn` and
    /// `createdMs` are set by the store). Result: `{"turn": n}`, its number from 1.
    RecordClientTurn {
        /// The turn.
        turn: crate::records::ClientTurn,
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
            Op::RecordClientSession { .. } => "recordClientSession",
            Op::RecordClientTurn { .. } => "recordClientTurn",
        }
    }
}

/// An answer to one waiting node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeAnswer {
    /// The node.
    pub node: NodeId,
    /// The answer.
    pub answer: Answer,
}

/// A file of a change set and which of its hunks (all when absent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileHunks {
    /// The path, relative to the repository.
    pub file: String,
    /// Hunk indexes; absent: the whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hunks: Option<Vec<usize>>,
}

/// A message for one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMessage {
    /// The node.
    pub node: NodeId,
    /// The text.
    pub text: String,
}

/// What to do with a run's change set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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

mod events;
mod frame;
mod names;
pub use frame::EventFrame;
pub use names::TOPICS;

pub use events::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventKind, Interrupt, NodeState, SubmissionId};

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
                kind: Some(OpErrorKind::Conflict),
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

    #[test]
    fn topics_follow_the_seeds_and_are_listed() {
        let node = NodeId::new("plan");
        let t = |kind| ServiceEventBody::Run(kind).topic();
        assert_eq!(
            t(EventKind::NodeTransition {
                node: node.clone(),
                attempt: 1,
                from: Some(NodeState::Running),
                to: NodeState::Pruned,
                reason: None
            }),
            "graph:node_pruned"
        );
        assert_eq!(
            t(EventKind::NodeTransition {
                node: node.clone(),
                attempt: 2,
                from: None,
                to: NodeState::Ready,
                reason: None
            }),
            "graph:node_branched"
        );
        assert_eq!(
            t(EventKind::NodeTransition {
                node: node.clone(),
                attempt: 2,
                from: Some(NodeState::Ready),
                to: NodeState::Running,
                reason: None
            }),
            "graph:node_status_changed"
        );
        let review = Interrupt::review("ok?");
        assert_eq!(
            t(EventKind::InterruptRaised {
                node,
                attempt: 1,
                interrupt: review,
                scratch: serde_json::Value::Null
            }),
            "graph:review_requested"
        );
        assert_eq!(
            ServiceEventBody::Session(SessionEvent::MessageDelta {
                turn: 1,
                text: String::new()
            })
            .topic(),
            "turn:message_delta"
        );
        assert_eq!(
            ServiceEventBody::Workspace(WorkspaceEvent::ArtifactChanged {
                artifact: 1,
                run: RunId::new(),
                status: ArtifactStatus::AwaitingApproval
            })
            .topic(),
            "workflow:approval_needed"
        );
        let mut sorted = TOPICS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), TOPICS.len(), "a topic is listed twice");
    }

    #[test]
    fn turn_progress_reads_as_one_line() {
        let p = |prompt_done, generated| {
            SessionEvent::TurnProgress {
                turn: 1,
                prompt_tokens: 4100,
                prompt_done,
                generated,
            }
            .turn_progress_text()
        };
        assert_eq!(
            p(1536, 0).as_deref(),
            Some("reading the prompt: 1536/4100 tokens (37%)")
        );
        assert_eq!(p(4100, 48).as_deref(), Some("writing: 48 tokens"));
        assert_eq!(
            p(4100, 0).as_deref(),
            Some("read the prompt (4100 tokens); writing")
        );
        assert_eq!(
            SessionEvent::Note { text: "x".into() }.turn_progress_text(),
            None
        );
    }

    #[test]
    fn progress_reads_as_one_line() {
        let p = |progress, total, message: Option<&str>| {
            SessionEvent::ToolProgress {
                turn: 1,
                call_id: "c".into(),
                progress,
                total,
                message: message.map(str::to_owned),
            }
            .progress_text()
        };
        assert_eq!(p(3.0, Some(5.0), None).as_deref(), Some("3/5 (60%)"));
        assert_eq!(
            p(0.25, Some(1.0), Some(" copying ")).as_deref(),
            Some("0.25/1 (25%) · copying")
        );
        assert_eq!(p(12.0, None, Some("")).as_deref(), Some("12"));
        assert_eq!(
            SessionEvent::Note { text: "x".into() }.progress_text(),
            None
        );
    }
}
