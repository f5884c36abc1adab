//! The `[mcp]` configuration section: the MCP servers whose tools agents may use.
//!
//! ```toml
//! [mcp.servers.git]
//! command = "uvx"
//! args = ["mcp-server-git", "--repository", "."]
//! roles = ["code_agent"]          # these agents get its tools in every stage
//!
//! [mcp.servers.tracker]
//! url = "https://mcp.example.com/mcp"
//! bearer_token_env = "TRACKER_TOKEN"   # the token is read from this variable
//! disabled_tools = ["delete_issue"]
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use trellis_tools::config::Action;

use crate::error::{Error, Result};

/// The `[mcp]` section.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// The servers, by name (the name prefixes their tools: `git__git_status`).
    pub servers: BTreeMap<String, ServerConfig>,
    /// How long a run waits at its start for servers that are still starting (seconds,
    /// default 10; 0 never waits). A server that is not ready by then joins the run when it
    /// is: its tools are offered from the agents' next model call on.
    pub startup_wait_secs: f64,
}

/// One server: a child process speaking MCP on stdio (`command`), or a Streamable HTTP
/// endpoint (`url`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The program to start (stdio transport).
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it. The child does not inherit Trellis's environment:
    /// it gets `PATH`, `HOME`, the locale and temporary-directory variables, these, and
    /// those named in `env_vars`.
    pub env: BTreeMap<String, String>,
    /// Variables passed through from Trellis's environment (secrets stay out of config files).
    pub env_vars: Vec<String>,
    /// Working directory (relative to the workspace; default: the workspace).
    pub cwd: Option<PathBuf>,
    /// The endpoint (Streamable HTTP transport).
    pub url: Option<String>,
    /// Headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// Headers whose value is read from an environment variable (header → variable).
    pub header_env: BTreeMap<String, String>,
    /// The variable holding a bearer token (`Authorization: Bearer …`).
    pub bearer_token_env: Option<String>,
    /// Start it (default true); a disabled server is listed, never started.
    pub enabled: bool,
    /// Time allowed to start and list tools, in seconds.
    pub startup_timeout_secs: f64,
    /// Time allowed for one tool call, in seconds.
    pub tool_timeout_secs: f64,
    /// Restarts after the server failed or exited, before it is left failed.
    pub max_restarts: u32,
    /// Only these tools are offered (server-side names; default: all).
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are never offered.
    pub disabled_tools: Vec<String>,
    /// Agent roles that get this server's tools in every stage (`"*"`: every role). A
    /// workflow stage's `mcp_tools` grants more, to that stage's agents.
    pub roles: Vec<String>,
    /// Overrides the policy for every tool of this server. Without it, a tool's
    /// annotations choose the policy class: read-only → `tools.policy.read_only`,
    /// destructive (the default) → `destructive`, open-world → `network`, else
    /// `writes_workspace`.
    pub approval: Option<Action>,
    /// Run this stdio server inside the OS sandbox with this preset (`read-only`,
    /// `workspace-write`, `workspace-write-network`; the workspace is the repository); by
    /// default servers run unsandboxed, as configured by the user (docs/security.md).
    pub sandbox: Option<trellis_sandbox::Preset>,
    /// `[sandbox] mode`, copied here by whoever loads the configuration
    /// ([`McpConfig::set_sandbox_mode`]).
    #[serde(skip)]
    pub sandbox_mode: trellis_sandbox::Mode,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            servers: BTreeMap::new(),
            startup_wait_secs: 10.0,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            env_vars: Vec::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            header_env: BTreeMap::new(),
            bearer_token_env: None,
            enabled: true,
            startup_timeout_secs: 30.0,
            tool_timeout_secs: 120.0,
            max_restarts: 3,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            roles: Vec::new(),
            approval: None,
            sandbox: None,
            sandbox_mode: trellis_sandbox::Mode::Auto,
        }
    }
}

impl McpConfig {
    /// Sets `[sandbox] mode` (the top-level section) on every server.
    pub fn set_sandbox_mode(&mut self, mode: trellis_sandbox::Mode) {
        for s in self.servers.values_mut() {
            s.sandbox_mode = mode;
        }
    }

    /// Checks every server; the error names `mcp.servers.NAME.field` and the fix.
    pub fn validate(&self) -> Result<()> {
        for (name, s) in &self.servers {
            s.validate(name)?;
        }
        if !(self.startup_wait_secs.is_finite() && self.startup_wait_secs >= 0.0) {
            return Err(Error::Config(format!(
                "mcp.startup_wait_secs: {} is not a number of seconds >= 0",
                self.startup_wait_secs
            )));
        }
        Ok(())
    }

    /// How long a run waits for starting servers.
    pub fn startup_wait(&self) -> Duration {
        secs(self.startup_wait_secs)
    }
}

impl ServerConfig {
    /// Checks the server's settings (`name` is its key under `mcp.servers`).
    pub fn validate(&self, name: &str) -> Result<()> {
        let at = |field: &str| format!("mcp.servers.{name}.{field}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            || name.contains("__")
        {
            return Err(Error::Config(format!(
                "mcp.servers.{name:?}: a server name may use letters, digits, `-` and `_` \
                 (no `__`: it separates server and tool in tool names)"
            )));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(Error::Config(format!(
                    "{} and {}: give one — a command (stdio) or a url (Streamable HTTP)",
                    at("command"),
                    at("url")
                )));
            }
            (None, None) => {
                return Err(Error::Config(format!(
                    "mcp.servers.{name}: give `command` (a program speaking MCP on stdio) or \
                     `url` (a Streamable HTTP endpoint)"
                )));
            }
            (Some(c), None) if c.trim().is_empty() => {
                return Err(Error::Config(format!("{}: empty", at("command"))));
            }
            (None, Some(u)) if !(u.starts_with("http://") || u.starts_with("https://")) => {
                return Err(Error::Config(format!(
                    "{}: {u:?} is not an http:// or https:// URL",
                    at("url")
                )));
            }
            _ => {}
        }
        for (field, v) in [
            ("startup_timeout_secs", self.startup_timeout_secs),
            ("tool_timeout_secs", self.tool_timeout_secs),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::Config(format!(
                    "{}: {v} is not a positive number of seconds",
                    at(field)
                )));
            }
        }
        if self.url.is_none()
            && (!self.headers.is_empty()
                || !self.header_env.is_empty()
                || self.bearer_token_env.is_some())
        {
            return Err(Error::Config(format!(
                "{}: headers and tokens are for `url` servers; a command gets `env`/`env_vars`",
                at("headers")
            )));
        }
        if self.command.is_none()
            && (!self.args.is_empty() || !self.env.is_empty() || !self.env_vars.is_empty())
        {
            return Err(Error::Config(format!(
                "{}: args and environment are for `command` servers",
                at("args")
            )));
        }
        Ok(())
    }

    /// Time allowed to start.
    pub fn startup_timeout(&self) -> Duration {
        secs(self.startup_timeout_secs)
    }

    /// Time allowed per tool call.
    pub fn tool_timeout(&self) -> Duration {
        secs(self.tool_timeout_secs)
    }

    /// Whether the server-side tool `tool` is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == tool))
            && !self.disabled_tools.iter().any(|t| t == tool)
    }

    /// How the server is reached, for listings (`stdio: uvx mcp-server-git`, `http: URL`).
    pub fn transport(&self) -> String {
        match (&self.command, &self.url) {
            (Some(c), _) => {
                let mut s = format!("stdio: {c}");
                for a in &self.args {
                    s.push(' ');
                    s.push_str(a);
                }
                s
            }
            (None, Some(u)) => format!("http: {u}"),
            (None, None) => "none".to_owned(),
        }
    }
}

fn secs(v: f64) -> Duration {
    Duration::try_from_secs_f64(v).unwrap_or(Duration::ZERO)
}
