//! Topic names of events (docs/events.md, "Topics": `workflow:created`, `turn:message_delta`,
//! `graph:node_status_changed`…): one name per event, fixed by its stream and payload, so a
//! client can dispatch on a single string.

use super::{ArtifactStatus, ServiceEvent, ServiceEventBody, SessionEvent, WorkspaceEvent};
use crate::{EventKind, InterruptKind, NodeState, RunStatus};

impl ServiceEvent {
    /// The event's topic name (see the module docs and `docs/events.md`).
    pub fn topic(&self) -> &'static str {
        self.event.topic()
    }
}

impl ServiceEventBody {
    /// The payload's topic name.
    pub fn topic(&self) -> &'static str {
        match self {
            ServiceEventBody::Run(e) => run_topic(e),
            ServiceEventBody::Session(e) => session_topic(e),
            ServiceEventBody::Workspace(e) => workspace_topic(e),
        }
    }
}

/// The graph events (a node added, its status changed, pruned, branched, a review requested,
/// a message for its agent received) and the rest of the engine log under `graph:`; a run's
/// end under `workflow:`.
fn run_topic(e: &EventKind) -> &'static str {
    match e {
        EventKind::RunStarted { .. } => "graph:run_started",
        EventKind::RunResumed { .. } => "graph:run_resumed",
        EventKind::RunContinued { .. } => "graph:run_continued",
        EventKind::NodeAdded { .. } => "graph:node_added",
        EventKind::EdgeAdded { .. } => "graph:edge_added",
        EventKind::NodeTransition {
            to: NodeState::Pruned,
            ..
        } => "graph:node_pruned",
        // A new activation of a node that ran before: a retry, a loop or a revision.
        EventKind::NodeTransition {
            from: None,
            attempt,
            ..
        } if *attempt > 1 => "graph:node_branched",
        EventKind::NodeTransition { .. } => "graph:node_status_changed",
        EventKind::NodeOutput { .. } => "graph:node_output",
        EventKind::InterruptRaised { interrupt, .. } => match interrupt.kind {
            InterruptKind::Question => "graph:input_requested",
            InterruptKind::Approval | InterruptKind::Review => "graph:review_requested",
        },
        EventKind::InputReceived { .. } => "graph:input_received",
        EventKind::Routed { .. } => "graph:routed",
        EventKind::StepStarted { .. } => "graph:step_started",
        EventKind::StepCompleted { .. } => "graph:step_completed",
        EventKind::CommandReceived { .. } => "graph:command_received",
        EventKind::CommandRefused { .. } => "graph:command_refused",
        EventKind::MessageQueued { .. } => "graph:agent_message_received",
        EventKind::RunStatusChanged { status, .. } => match status {
            RunStatus::Running => "workflow:running",
            RunStatus::WaitingInput => "workflow:waiting_input",
            RunStatus::Succeeded => "workflow:completed",
            RunStatus::Failed => "workflow:error",
            RunStatus::Cancelled => "workflow:cancelled",
        },
    }
}

/// A session's `session:` and `turn:` events.
fn session_topic(e: &SessionEvent) -> &'static str {
    match e {
        SessionEvent::SessionStarted { .. } => "session:started",
        SessionEvent::PromptSet { .. } => "session:prompt_set",
        SessionEvent::UserMessage { .. } => "session:user_message",
        SessionEvent::MessagesReceived { .. } => "session:agent_message_received",
        SessionEvent::TurnStarted { .. } => "turn:started",
        SessionEvent::MessageDelta { .. } => "turn:message_delta",
        SessionEvent::ThoughtDelta { .. } => "turn:thought_delta",
        SessionEvent::TurnProgress { .. } => "turn:progress",
        SessionEvent::TurnCompleted { .. } => "turn:completed",
        SessionEvent::TurnFailed { .. } => "turn:error",
        SessionEvent::ToolStarted { .. } => "turn:tool_started",
        SessionEvent::ToolProgress { .. } => "turn:tool_progress",
        SessionEvent::ToolCompleted { .. } => "turn:tool_completed",
        SessionEvent::ContextCompacted { .. } => "session:context_compacted",
        SessionEvent::Note { .. } => "session:note",
        SessionEvent::SessionCompleted { .. } => "session:completed",
        SessionEvent::SessionError { .. } => "session:error",
    }
}

/// The workspace stream: `workflow:` events of runs and artifacts, and the service's own.
fn workspace_topic(e: &WorkspaceEvent) -> &'static str {
    match e {
        WorkspaceEvent::OpCompleted { .. } => "op:completed",
        WorkspaceEvent::OpFailed { .. } => "op:failed",
        WorkspaceEvent::RunCreated { .. } => "workflow:created",
        WorkspaceEvent::StageChanged { .. } => "workflow:stage_changed",
        WorkspaceEvent::RunStopped { .. } => "workflow:stopped",
        WorkspaceEvent::SessionCreated { .. } => "session:created",
        WorkspaceEvent::ReviewChanged { .. } => "review:changed",
        WorkspaceEvent::ArtifactChanged {
            status: ArtifactStatus::AwaitingApproval,
            ..
        } => "workflow:approval_needed",
        WorkspaceEvent::ArtifactChanged { .. } => "workflow:artifact_changed",
    }
}

/// Every topic name, for documentation and schema checks.
pub const TOPICS: &[&str] = &[
    "graph:run_started",
    "graph:run_resumed",
    "graph:run_continued",
    "graph:node_added",
    "graph:edge_added",
    "graph:node_pruned",
    "graph:node_branched",
    "graph:node_status_changed",
    "graph:node_output",
    "graph:input_requested",
    "graph:review_requested",
    "graph:input_received",
    "graph:routed",
    "graph:step_started",
    "graph:step_completed",
    "graph:command_received",
    "graph:command_refused",
    "graph:agent_message_received",
    "workflow:running",
    "workflow:waiting_input",
    "workflow:completed",
    "workflow:error",
    "workflow:cancelled",
    "session:started",
    "session:prompt_set",
    "session:user_message",
    "session:agent_message_received",
    "turn:started",
    "turn:message_delta",
    "turn:thought_delta",
    "turn:progress",
    "turn:completed",
    "turn:error",
    "turn:tool_started",
    "turn:tool_progress",
    "turn:tool_completed",
    "session:context_compacted",
    "session:note",
    "session:completed",
    "session:error",
    "op:completed",
    "op:failed",
    "workflow:created",
    "workflow:stage_changed",
    "workflow:stopped",
    "session:created",
    "review:changed",
    "workflow:approval_needed",
    "workflow:artifact_changed",
];
