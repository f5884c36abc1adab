//! The Model Context Protocol in Trellis.
//!
//! **Client** ([`McpHub`]): the servers configured under `[mcp.servers.NAME]` (a child
//! process on stdio, or a Streamable HTTP endpoint) or added at run time, each supervised on
//! its own task — started, listed, re-listed on `tools/list_changed`, restarted when it
//! exits — so one broken or slow server never blocks a run or the other servers. Their tools
//! become Trellis tools named `<server>__<tool>` ([`exposed_name`]) that go through the
//! workspace policy, the registry's recording and the agents' budgets like built-in tools; a
//! server's `roles` and a workflow stage's `mcp_tools` ([`allow_entry`]) decide which agents
//! get them. A server's progress notifications for a call reach the agent's session as
//! `toolProgress` events. Built on `rmcp`, in its automatic lifecycle (2026-07-28 discovery with the
//! 2025-11-25 handshake as fallback).

pub mod config;
mod connect;
pub mod error;
pub mod hub;
mod progress;
mod server;
mod status;
mod tool;

pub use config::{McpConfig, ServerConfig};
pub use error::{Error, Result};
pub use hub::{McpHub, ServerState, ServerStatus, ToolInfo};
pub use tool::{allow_entry, exposed_name};
