//! Where a server stands and what it offers, as `trellis mcp list` and the tools' error
//! messages report it (re-exported from [`crate::hub`]).

use serde::Serialize;

/// Where a server stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// `enabled = false`: never started.
    Disabled,
    /// Not started yet (the hub starts servers on first use).
    Idle,
    /// Starting, or restarting after a failure.
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// Failed to start, or exited, and will not be restarted (see `last_error`).
    Failed,
    /// Stopped by the hub's shutdown.
    Stopped,
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Disabled => "disabled",
            Self::Idle => "idle",
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        })
    }
}

/// A tool as listed by its server.
#[derive(Clone, Debug, Serialize)]
pub struct ToolInfo {
    /// The name agents call it by (`git__git_status`).
    pub name: String,
    /// The server's name for it.
    pub remote: String,
    /// Its description.
    pub description: String,
    /// The server says it only reads.
    pub read_only: bool,
    /// Offered to agents (`enabled_tools` / `disabled_tools`).
    pub offered: bool,
    /// The server's annotations (`readOnlyHint`, `destructiveHint`, …), as it sent them
    /// (for the gateway; not in `trellis mcp list --json`).
    #[serde(skip)]
    pub annotations: Option<serde_json::Value>,
}

/// A server's status, for `trellis mcp list` and the tools' error messages.
#[derive(Clone, Debug, Serialize)]
pub struct ServerStatus {
    /// Its name under `mcp.servers`.
    pub name: String,
    /// How it is reached.
    pub transport: String,
    /// Where it stands.
    pub state: ServerState,
    /// Its tools (as last listed).
    pub tools: Vec<ToolInfo>,
    /// The last failure, with the end of its stderr.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Restarts so far.
    pub restarts: u32,
    /// The server's name and version, as it reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<String>,
    /// The protocol version in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}
