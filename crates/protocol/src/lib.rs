//! Wire types shared by every Trellis front-end and backend crate.
//!
//! This crate holds data only: identifiers, the node state machine's states, the typed
//! event log entries, the commands a client can send to a live run, and the records and
//! views the runtime service answers queries with ([`records`]). It has no
//! behaviour beyond (de)serialisation and a few pure helpers, so every front-end (CLI,
//! server, ACP, MCP) can depend on it without pulling in the engine. Every wire type derives
//! `schemars::JsonSchema`; [`schema`] turns them into the JSON Schemas the server publishes.

pub mod acp;
pub mod canonical;
mod command;
mod event;
pub mod hooks;
mod ids;
mod notification;
pub mod records;
pub mod schema;
mod service;
mod state;
mod time;

pub use command::{Answer, Command, EdgeSpec, InjectNode, Interrupt, InterruptKind, Message};
pub use event::{Event, EventKind, ForkRef, RunStatus, TerminalKind};
pub use hooks::{HookConfig, HookEvent, Preset, UnknownPreset};
pub use ids::{ActivationId, NodeId, RunId, SessionId, SubmissionId};
pub use notification::{Notification, NotificationKind};
pub use service::{
    Artifact, ArtifactStatus, BadStreamId, Budgets, CompactionMethod, EventFrame, FileHunks,
    InputMode, NodeAnswer, NodeMessage, Op, OpErrorKind, ReviewAction, ServiceEvent,
    ServiceEventBody, SessionEvent, SessionOwner, StreamId, TOPICS, ToolCompletion, ToolStatus,
    TurnUsage, WorkspaceEvent,
};
pub use state::{InvalidTransition, NodeState};
pub use time::{format_utc_ms, now_ms};
