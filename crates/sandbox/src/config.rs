//! The `[sandbox]` configuration section: which backend, which preset (per workflow and per
//! role), the pids limit and the paths beyond the worktree that commands may read or write.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which sandbox runs commands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// bubblewrap where it runs, else Landlock + seccomp in-process; refuse if neither.
    #[default]
    Auto,
    /// bubblewrap only (refuse if it cannot run).
    Bwrap,
    /// Landlock + seccomp only (refuse if the kernel lacks them).
    Landlock,
    /// No sandbox: commands run with the user's full privileges. A warning is printed on
    /// every run and recorded with every command.
    Off,
}

impl Mode {
    /// The name used in configuration and records.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Bwrap => "bwrap",
            Mode::Landlock => "landlock",
            Mode::Off => "off",
        }
    }
}

/// What a sandboxed command may do (defined with the hooks' data in trellis-protocol, which
/// a workflow file's hooks name).
pub use trellis_protocol::Preset;

/// Paths under the home directory that commands may read by default: toolchains and their
/// package caches, and git's own configuration. Credentials files (`~/.cargo/credentials*`,
/// `~/.npmrc`, `~/.ssh`, `~/.aws`, …) are not among them.
pub const DEFAULT_HOME_READ: &[&str] = &[
    ".cargo/bin",
    ".cargo/registry",
    ".cargo/git",
    ".cargo/config.toml",
    ".cargo/config",
    ".rustup",
    ".gitconfig",
    ".config/git",
    ".local/bin",
    ".local/lib",
    ".nvm",
    ".pyenv",
    ".rbenv",
    "go/pkg/mod",
];

/// The `[sandbox]` section.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// Which sandbox runs commands (`auto`, `bwrap`, `landlock`, `off`).
    pub mode: Mode,
    /// The preset of commands whose workflow and role name none.
    pub preset: Preset,
    /// Presets per role (`tester = "workspace-write-network"`); a role's preset wins over
    /// its workflow's.
    pub roles: BTreeMap<String, Preset>,
    /// Presets per workflow.
    pub workflows: BTreeMap<String, Preset>,
    /// The most processes (and threads) a command may have at once.
    pub pids_max: u32,
    /// Paths under the home directory commands may read (relative to `$HOME`, or absolute);
    /// everything else in the home directory is hidden. Default [`DEFAULT_HOME_READ`].
    pub home_read: Vec<String>,
    /// Extra absolute paths commands may write besides the worktree (a shared build
    /// directory, a package cache).
    pub writable: Vec<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Auto,
            preset: Preset::WorkspaceWrite,
            roles: BTreeMap::new(),
            workflows: BTreeMap::new(),
            pids_max: 1024,
            home_read: DEFAULT_HOME_READ.iter().map(|s| (*s).to_owned()).collect(),
            writable: Vec::new(),
        }
    }
}

impl SandboxConfig {
    /// The preset of a command run by `role` in `workflow` (either may be unknown).
    /// A role scoped to a stage (`coder@implement`) matches its role's entry.
    pub fn preset_for(&self, workflow: Option<&str>, role: Option<&str>) -> Preset {
        let role = role.map(|r| r.split('@').next().unwrap_or(r));
        role.and_then(|r| self.roles.get(r))
            .or_else(|| workflow.and_then(|w| self.workflows.get(w)))
            .copied()
            .unwrap_or(self.preset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roles_preset_wins_over_its_workflows_then_the_default() {
        let mut c = SandboxConfig::default();
        assert_eq!(c.preset_for(None, None), Preset::WorkspaceWrite);
        c.workflows.insert("discuss".into(), Preset::ReadOnly);
        c.roles
            .insert("tester".into(), Preset::WorkspaceWriteNetwork);
        assert_eq!(
            c.preset_for(Some("discuss"), Some("coder")),
            Preset::ReadOnly
        );
        assert_eq!(
            c.preset_for(Some("discuss"), Some("tester@run_tests")),
            Preset::WorkspaceWriteNetwork
        );
        assert_eq!(c.preset_for(Some("other"), None), Preset::WorkspaceWrite);
        assert!("workspace-write-net".parse::<Preset>().is_err());
    }

    #[test]
    fn the_off_mode_and_unknown_keys_come_from_toml() {
        let c: SandboxConfig = serde_json::from_value(serde_json::json!({
            "mode": "off", "roles": {"tester": "workspace-write-network"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.mode, Mode::Off);
        assert!(
            serde_json::from_value::<SandboxConfig>(serde_json::json!({"mdoe": "off"})).is_err()
        );
    }
}
