//! Trellis agent tools: what agents act through, and how their changes reach the user.
//!
//! * **The seam** — [`Tool`] / [`TypedTool`] (name, description, JSON Schemas derived from
//!   Rust types, async cancellable call), the [`Registry`] with per-role allow lists, and
//!   [`Registry::call`], which turns every failure into an error *result* for the model and
//!   records every call through a [`ToolCallSink`] (a store's, [`StoreSink`]).
//! * **Tool DAGs** ([`dag`]) — plans of tool calls whose dependencies come from the tools'
//!   JSON Schemas and references, run in layers with independent calls in parallel.
//! * **Built-in tools** ([`builtin`]) — files, search, edits, patches, shell, git, notes
//!   and questions.
//! * **Safety** — [`Workspace`] resolves every path inside the workspace and gates secret
//!   files; [`policy`] classifies shell commands and decides allow / ask / deny from
//!   [`ToolsConfig`]; `ask` goes to the user through an [`Interaction`].
//! * **Worktrees** ([`worktree`]) — a run works in its own git worktree on its own branch,
//!   created from the user's HEAD plus uncommitted and untracked changes without touching
//!   the user's working tree, index or config; each agent node can get its own worktree
//!   and branch from the run's ([`worktree::nodes`]), merged back, reverted when pruned.
//! * **Review** ([`review`]) — the run's net change as files and hunks; approval per file
//!   or hunk; a journaled, crash-safe apply onto the user's working tree with a 3-way
//!   check; exact undo and redo.
//!
//! See `docs/tools.md` for every tool's schema and the policy configuration.

pub mod advice;
pub mod builtin;
pub mod config;
pub mod context;
pub mod dag;
pub mod error;
pub mod fsutil;
pub mod git;
pub mod hooks;
pub mod interaction;
pub mod policy;
pub mod record;
pub mod registry;
pub mod review;
mod spec;
pub mod speculate;
pub mod tool;
pub mod workspace;
pub mod worktree;

pub use advice::{AdviceMode, SpeculationOutcome, Suggested, ToolAdvisor};
pub use config::{
    Action, BudgetConfig, CommandRule, DagConfig, GatewayConfig, GraphConfig, PolicyConfig,
    SecretsConfig, ShellConfig, SpeculationConfig, ToolsConfig,
};
pub use context::{Decision, Note, ProgressFn, ToolContext, ToolEnv, ToolProgress};
pub use error::{Error, Result};
pub use hooks::{HookConfig, HookEvent, HookScope, Hooks};
pub use interaction::{
    Answer, ApprovalDecision, ApprovalRequest, Interaction, NonInteractive, Question,
    ScriptedInteraction,
};
pub use record::{MemorySink, StoreSink, ToolCallSink};
pub use registry::{Registry, ToolResult, ToolSource};
pub use tool::{Tool, ToolOutput, ToolSpec, TypedTool};
pub use workspace::Workspace;
