//! The ACP client layer: plain Rust, no GUI. It starts `trellis acp` (or takes given stdio),
//! speaks ACP v1 as a client through `agent-client-protocol`'s client side, and turns what
//! the agent says into [`Event`]s for the window; the window drives it through a [`Handle`].
//!
//! One task owns the connection (spawned on a tokio runtime the caller gives); every request
//! runs in a task of its own, so a long `session/prompt` never holds up a cancel or a
//! permission answer. A dying agent or a line that is not JSON becomes an event, never a
//! panic.

mod client;
mod event;
pub mod question;
pub mod review;
mod transport;

pub use client::{Command, Handle, connect};
pub use event::{
    AgentInfo, ConfigChoice, ConfigOption, DiffView, Event, PermissionAsk, PermissionChoice,
    PlanEntry, SessionOpened, SessionSummary, ToolCallView, Update,
};
pub use transport::{AgentCommand, Transport};

/// The ACP session id type (the SDK's).
pub use agent_client_protocol::v1::schema::SessionId;
/// Tool call and plan states, as the protocol names them.
pub use agent_client_protocol::v1::schema::{PlanEntryStatus, ToolCallStatus, ToolKind};

/// The `_meta` key of a permission answer carrying the feedback typed with it.
pub use trellis_protocol::acp::FEEDBACK_META;

/// The `_meta` key under which `trellis acp` lists its extension methods in `initialize`.
pub const EXTENSIONS_META: &str = "trellis.dev/extensions";
