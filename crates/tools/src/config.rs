//! Configuration of the tools: the `tools` section of the layered configuration.
//!
//! Every field has a default, so an empty section (or none) gives the safe defaults
//! documented in `docs/tools.md`. Unknown fields are refused so a typo is an error, not a
//! silently ignored rule.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the policy does with an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Run it without asking.
    Allow,
    /// Ask the user (an approval interrupt); run only if approved.
    Ask,
    /// Refuse it.
    Deny,
}

/// The `tools` configuration section.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// Shell command policy.
    pub policy: PolicyConfig,
    /// The `shell` tool's limits and environment.
    pub shell: ShellConfig,
    /// Which files count as secrets.
    pub secrets: SecretsConfig,
    /// Limits of the file tools.
    pub files: FilesConfig,
    /// Per-role allow lists of tool names, replacing the built-in defaults for the roles
    /// named here (see [`crate::Registry::default_roles`]).
    pub roles: BTreeMap<String, Vec<String>>,
    /// Tool DAGs: parallel tool calls and the `execute_dag` tool.
    pub dag: DagConfig,
    /// The tool knowledge graph (learned tool dependencies).
    pub graph: GraphConfig,
    /// The context budget of MCP tools' schemas.
    pub budget: BudgetConfig,
    /// Speculative execution of the calls the tool knowledge graph predicts.
    pub speculation: SpeculationConfig,
    /// `trellis mcp --gateway`: the configured MCP servers' tools for an MCP client.
    pub gateway: GatewayConfig,
    /// The OS sandbox of commands: the top-level `[sandbox]` section (trellis-sandbox),
    /// copied here by whoever loads the configuration, so every tool environment has it.
    #[serde(skip)]
    pub sandbox: trellis_sandbox::SandboxConfig,
}

/// The `tools.gateway` section: what `trellis mcp --gateway` offers an MCP client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Tokens the listed tools' schemas may take (the meta tools included); default
    /// `tools.budget.share` of [`GatewayConfig::DEFAULT_WINDOW`] (6,400 with the default
    /// share). `tools.budget.enabled = false` lists every tool.
    pub budget_tokens: Option<usize>,
}

impl GatewayConfig {
    /// The context window the default budget is a share of (the client's model is unknown).
    pub const DEFAULT_WINDOW: u32 = 128_000;

    /// The schema budget in tokens, `None` when the budget is off (`tools.budget.enabled =
    /// false`, or no `budget_tokens` and a share of 0, as for agents).
    pub fn budget(&self, budget: &BudgetConfig) -> Option<usize> {
        if !budget.enabled {
            return None;
        }
        match self.budget_tokens {
            Some(tokens) => Some(tokens),
            None if budget.share > 0.0 => {
                Some((f64::from(Self::DEFAULT_WINDOW) * budget.share) as usize)
            }
            None => None,
        }
    }
}

/// The `tools.speculation` section (speculative execution, docs/tools.md).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpeculationConfig {
    /// Run predicted read-only calls before the model asks for them.
    pub enabled: bool,
    /// Speculative calls per model turn, at most.
    pub max_per_turn: usize,
    /// A speculative call (or a speculated workflow, as a whole) taking longer than this
    /// is abandoned (milliseconds).
    pub max_ms: u64,
    /// Before an agent's first model call, ask the tool knowledge graph for the task's
    /// workflow: at or above the speculation threshold its safe steps run and their results
    /// are part of the prompt; between 0.70 and the threshold the workflow is shown to the
    /// model as a suggestion.
    pub from_task: bool,
    /// The cost limit of one speculative result: the prompt tokens it may add (longer
    /// results are cut to this, with a note that the call can be made for all of it).
    pub max_result_tokens: usize,
    /// Speculated workflows that would add more than this many prompt tokens in all are cut
    /// to their first steps that fit.
    pub max_total_tokens: usize,
}

impl Default for SpeculationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_per_turn: 2,
            max_ms: 5000,
            from_task: true,
            max_result_tokens: 2000,
            max_total_tokens: 6000,
        }
    }
}

/// The `tools.budget` section: how many MCP tool schemas a model call may carry (docs/tools.md,
/// "Tool-schema budget"). An agent's own tools (built-in, stage and language-server tools its role
/// lists) are always offered; the MCP servers' tools it may use compete for the rest.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// Choose MCP tools by relevance within the budget (off: offer every allowed tool).
    pub enabled: bool,
    /// The share of the model's context window that tool schemas may take, the agent's own
    /// tools included (models whose window is not known get every tool).
    pub share: f64,
    /// How many tools one `search_tools` call returns at most.
    pub search_results: usize,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            share: 0.05,
            search_results: 8,
        }
    }
}

/// The `tools.graph` section: the workspace's tool knowledge graph.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GraphConfig {
    /// Learn from every agent activation's tool calls (order, co-occurrence, success).
    pub learn: bool,
}

impl Default for GraphConfig {
    fn default() -> Self {
        Self { learn: true }
    }
}

/// The `tools.dag` section: how agents run several tool calls.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DagConfig {
    /// Run the independent read-only calls a model asks for in one turn at the same time.
    pub parallel: bool,
    /// Offer agents the `execute_dag` tool: a plan of tool calls run as one DAG.
    pub execute_dag: bool,
    /// The most steps one `execute_dag` plan may have.
    pub max_steps: usize,
}

impl Default for DagConfig {
    fn default() -> Self {
        Self {
            parallel: true,
            execute_dag: true,
            max_steps: 20,
        }
    }
}

/// Allow / ask / deny per command class, plus per-command rules.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Commands that only read (`ls`, `cat`, `git status`, `grep` …).
    pub read_only: Action,
    /// Commands that change files inside the workspace (`cargo build`, `mkdir`, `sed -i` …).
    pub writes_workspace: Action,
    /// Commands that talk to the network (`curl`, `git push`, `cargo install` …).
    pub network: Action,
    /// Commands that destroy data or reach outside the workspace (`rm -rf`, `git reset
    /// --hard`, `sudo`, writes to absolute paths outside the workspace …).
    pub destructive: Action,
    /// Commands the classifier does not know (local scripts, unknown programs, `eval` …).
    pub unknown: Action,
    /// Reading a secret file (`.env`, keys …) with `read_file`, or naming one in a command.
    pub secret_access: Action,
    /// Per-command rules, checked before the classes: the first rule whose `command`
    /// words are a prefix of a simple command's words decides that simple command.
    pub rules: Vec<CommandRule>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            read_only: Action::Allow,
            writes_workspace: Action::Allow,
            network: Action::Ask,
            destructive: Action::Ask,
            unknown: Action::Ask,
            secret_access: Action::Ask,
            rules: Vec::new(),
        }
    }
}

/// One per-command rule, e.g. `{ command = "cargo test", action = "allow" }` or
/// `{ command = "git push", action = "deny" }`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRule {
    /// Leading words of the command (the program name matches by its base name).
    pub command: String,
    /// What to do with matching commands.
    pub action: Action,
}

/// The `shell` tool's settings.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShellConfig {
    /// Default timeout of a command, in seconds (the model may ask for less or up to
    /// `max_timeout_secs`).
    pub timeout_secs: u64,
    /// The longest timeout a call may request, in seconds.
    pub max_timeout_secs: u64,
    /// Bytes of stdout and of stderr kept (the head and the tail; the middle is elided).
    pub max_output_bytes: usize,
    /// Extra environment variables passed through to commands (besides the built-in
    /// allow list). Names that look like secrets are dropped even if listed here.
    pub env_allow: Vec<String>,
    /// The shell used to run commands (`-c <command>`).
    pub shell: String,
}

impl Default for ShellConfig {
    fn default() -> Self {
        Self {
            timeout_secs: 120,
            max_timeout_secs: 1800,
            max_output_bytes: 32 * 1024,
            env_allow: Vec::new(),
            shell: "bash".into(),
        }
    }
}

/// Which files are secrets.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecretsConfig {
    /// Use the built-in patterns ([`crate::workspace::DEFAULT_SECRET_GLOBS`]).
    pub use_defaults: bool,
    /// Extra glob patterns (matched at any depth unless the pattern starts with `/`).
    pub globs: Vec<String>,
    /// Patterns that are never secrets even if another pattern matches
    /// (default: `.env.example`, `.env.sample`, `.env.template`).
    pub exempt: Vec<String>,
}

impl Default for SecretsConfig {
    fn default() -> Self {
        Self {
            use_defaults: true,
            globs: Vec::new(),
            exempt: vec![
                ".env.example".into(),
                ".env.sample".into(),
                ".env.template".into(),
            ],
        }
    }
}

/// Limits of the file tools.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilesConfig {
    /// The most bytes `read_file` returns in one call.
    pub max_read_bytes: usize,
    /// The most results `glob_search` and `grep` return.
    pub max_results: usize,
}

impl Default for FilesConfig {
    fn default() -> Self {
        Self {
            max_read_bytes: 256 * 1024,
            max_results: 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_budget_is_a_share_of_128k_unless_given_or_off() {
        let mut budget = BudgetConfig::default();
        let mut gateway = GatewayConfig::default();
        assert_eq!(gateway.budget(&budget), Some(6400));
        gateway.budget_tokens = Some(800);
        assert_eq!(gateway.budget(&budget), Some(800));
        budget.enabled = false;
        assert_eq!(gateway.budget(&budget), None);
        budget.enabled = true;
        budget.share = 0.0;
        gateway.budget_tokens = None;
        assert_eq!(gateway.budget(&budget), None);
    }
}
