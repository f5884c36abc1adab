//! trellis-sandbox wraps a command in an OS sandbox.
//!
//! Every command an agent runs (the `shell` tool, the project's test command, the harness's
//! test commands, MCP stdio servers that opt in) runs inside it: a read-only system, the
//! run's worktree and a private tmp writable, the home directory hidden but for listed
//! toolchain paths, Trellis's own configuration (the `serve` token) hidden, no network
//! unless the policy grants it, a pids limit, a new session, death with its parent, and a
//! seccomp filter (no ptrace, no other process's memory, no io_uring, no mounts or new
//! namespaces, no sockets but Unix ones without the network).
//!
//! bubblewrap where it runs ([`bwrap`]); Landlock + seccomp applied in the child where it
//! cannot ([`landlock`], nested containers); if neither can be set up [`Sandbox::new`]
//! refuses with an error naming the cause and `[sandbox] mode` — commands never silently
//! run unsandboxed. `mode = "off"` exists, and callers warn and record it.

pub mod bwrap;
pub mod config;
mod error;
mod hook;
pub mod landlock;
mod pids;
pub mod policy;
pub mod seccomp;
mod spawn;

use std::path::PathBuf;

pub use bwrap::find_on_path;
pub use config::{DEFAULT_HOME_READ, Mode, Preset, SandboxConfig};
pub use error::{Error, Result};
pub use policy::SandboxPolicy;
pub use spawn::{Backend, CommandSpec, Guard, Sandbox, Wrapped};

/// The configuration section this crate owns.
pub const SECTION: &str = "sandbox";

/// The warning printed (and recorded) when commands run unsandboxed.
pub const OFF_WARNING: &str = "[sandbox] mode = \"off\": commands run WITHOUT a sandbox, with \
     your full privileges (home directory, network, other processes); docs/security.md";

/// The user's home directory (`$HOME`), hidden from commands but for listed paths.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .filter(|h| h.components().count() > 1)
}

/// Trellis's configuration directory (`$XDG_CONFIG_HOME/trellis`, else
/// `$HOME/.config/trellis`), where `trellis serve` keeps its token: always hidden.
pub fn trellis_config_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home_dir().map(|h| h.join(".config")))
        .map(|b| b.join("trellis"))
}
