//! Hooks as data: the user's own commands around agent actions, declared as `[[hooks]]`
//! entries of the configuration or in a workflow file's `hooks:` list (docs/conventions.md).
//! `trellis-tools` runs them; the workflow crate reads them from workflow files; both share
//! this one definition.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before a tool call; a non-zero exit denies it.
    BeforeTool,
    /// After a tool call.
    AfterTool,
    /// A run waits for the user (an approval, a question, a gate).
    NeedsInput,
    /// A run ended (succeeded, failed or cancelled).
    RunEnd,
    /// A stage (workflow node) failed.
    StageFailed,
}

impl HookEvent {
    /// Every event, in the order the documentation lists them.
    pub const ALL: [HookEvent; 5] = [
        HookEvent::BeforeTool,
        HookEvent::AfterTool,
        HookEvent::NeedsInput,
        HookEvent::RunEnd,
        HookEvent::StageFailed,
    ];

    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::BeforeTool => "before_tool",
            HookEvent::AfterTool => "after_tool",
            HookEvent::NeedsInput => "needs_input",
            HookEvent::RunEnd => "run_end",
            HookEvent::StageFailed => "stage_failed",
        }
    }

    /// The event named `name` (its configuration name), if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

/// What a sandboxed command may do (`[sandbox]` presets; a hook's `preset`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Read the system and the worktree; write only a private tmp; no network.
    ReadOnly,
    /// Also write the run's worktree (and its git metadata, hooks and config excepted).
    #[default]
    WorkspaceWrite,
    /// Workspace-write with the network.
    WorkspaceWriteNetwork,
}

impl Preset {
    /// Every preset, most restricted first.
    pub const ALL: [Preset; 3] = [
        Preset::ReadOnly,
        Preset::WorkspaceWrite,
        Preset::WorkspaceWriteNetwork,
    ];

    /// The name used in configuration and records.
    pub fn as_str(self) -> &'static str {
        match self {
            Preset::ReadOnly => "read-only",
            Preset::WorkspaceWrite => "workspace-write",
            Preset::WorkspaceWriteNetwork => "workspace-write-network",
        }
    }

    /// Whether the worktree is writable.
    pub fn writes(self) -> bool {
        self != Preset::ReadOnly
    }

    /// Whether the network is reachable.
    pub fn network(self) -> bool {
        self == Preset::WorkspaceWriteNetwork
    }
}

/// A sandbox preset name that is none of [`Preset::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPreset(pub String);

impl fmt::Display for UnknownPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown sandbox preset `{}` (expected read-only, workspace-write or \
             workspace-write-network)",
            self.0
        )
    }
}

impl std::error::Error for UnknownPreset {}

impl std::str::FromStr for Preset {
    type Err = UnknownPreset;

    fn from_str(s: &str) -> Result<Self, UnknownPreset> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPreset(s.to_owned()))
    }
}

fn default_timeout() -> u64 {
    HookConfig::DEFAULT_TIMEOUT_SECS
}

/// One hook: a `[[hooks]]` entry of the configuration, or an item of a workflow file's
/// `hooks:` list (which takes every key but `workflows`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// When it runs.
    pub event: HookEvent,
    /// The command line (`shell -c`), run in the run's worktree (the repository before the
    /// run has one).
    pub command: String,
    /// A name for records and messages (default: the command).
    #[serde(default)]
    pub name: Option<String>,
    /// `before_tool` / `after_tool`: only calls of these tools (`prefix*` allowed); all when
    /// empty.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Only runs of these workflows; all when empty.
    #[serde(default)]
    pub workflows: Vec<String>,
    /// Seconds before the hook and its children are killed.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// The sandbox preset it runs under (default `workspace-write`; a hook that posts to a
    /// chat needs `workspace-write-network`).
    #[serde(default)]
    pub preset: Option<Preset>,
}

impl HookConfig {
    /// The keys of an entry, in the documentation's order.
    pub const KEYS: [&'static str; 7] = [
        "event",
        "command",
        "name",
        "tools",
        "workflows",
        "timeout_secs",
        "preset",
    ];

    /// The default `timeout_secs`.
    pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

    /// Its name in records and messages.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.command)
    }

    /// Whether it runs for `event` on a call of `tool` (tool events) in a run of `workflow`.
    pub fn applies(&self, event: HookEvent, tool: Option<&str>, workflow: Option<&str>) -> bool {
        let listed = |list: &[String], name: Option<&str>| {
            list.is_empty()
                || name.is_some_and(|n| {
                    list.iter().any(|l| match l.strip_suffix('*') {
                        Some(prefix) => n.starts_with(prefix),
                        None => l == n,
                    })
                })
        };
        self.event == event && listed(&self.tools, tool) && listed(&self.workflows, workflow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde() {
        for e in HookEvent::ALL {
            let json = serde_json::to_value(e).unwrap();
            assert_eq!(json, e.as_str());
            assert_eq!(HookEvent::parse(e.as_str()), Some(e));
        }
        for p in Preset::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
            assert_eq!(p.as_str().parse::<Preset>(), Ok(p));
        }
        assert!("workspace-write-net".parse::<Preset>().is_err());
    }
}
