//! The `[agents]` configuration section.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[agents]`: how agents run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentsConfig {
    /// The project's test command, run by the test role (e.g. `cargo test`,
    /// `python3 -m pytest -q`). Detected from the repository when absent.
    pub test_command: Option<String>,
    /// Seconds the test command may run (default 600).
    pub test_timeout_secs: Option<u64>,
    /// Caps every role's `max_turns`.
    pub max_turns: Option<u32>,
    /// Extra directories of role files (`.trellis/agents` is always read).
    #[serde(default)]
    pub roles_dirs: Vec<std::path::PathBuf>,
    /// The retrieval agent.
    #[serde(default)]
    pub retrieval: RetrievalAgentConfig,
    /// The retry limits in `task_tree` runs.
    #[serde(default)]
    pub task_tree: TaskTreeLimits,
}

/// `[agents.task_tree]`: the retry limits, as runs of each stage per task (the first
/// run included), and how often the assessor's gaps may add tasks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskTreeLimits {
    /// Implementor runs per task, across validation failures and QA `incomplete` (default 4:
    /// the first and 3 retries).
    pub implementor_runs: Option<u32>,
    /// Planner runs per task, across QA `plan_issue` (default 3).
    pub planner_runs: Option<u32>,
    /// Researcher runs per task, across QA `wrong_approach` (default 3).
    pub researcher_runs: Option<u32>,
    /// Expansions per run after which the assessor's gaps add no more tasks (default 12).
    pub max_expansions: Option<u32>,
    /// Keep handoffs (gap analysis, plan summary, result summary, QA feedback, completed-task
    /// summaries) to their field limits (default true; false sends them whole, the benchmark's
    /// baseline).
    pub compress_handoffs: Option<bool>,
}

/// `[agents.retrieval]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrievalAgentConfig {
    /// Queries generated per retrieval (default 4).
    pub max_queries: Option<usize>,
    /// Milliseconds each source may take before it is reported as timed out (default 5000).
    pub source_timeout_ms: Option<u64>,
    /// Milliseconds query generation may take in one retrieval, all stages together; stages
    /// still waiting then use deterministic queries (default 45000).
    pub query_timeout_ms: Option<u64>,
    /// Share of a code workflow's stage budget kept for the AST context map and the repo
    /// map (default 0.2; 0 turns them off).
    pub map_share: Option<f32>,
    /// Disable retrieval entirely (stages get no retrieved context).
    #[serde(default)]
    pub disabled: bool,
    /// Have the model judge the relevance of each stage's best results (a grammar-constrained
    /// answer) and reorder and filter them by it (default false).
    #[serde(default)]
    pub judge: bool,
    /// Results shown to the judge (default 8).
    pub judge_candidates: Option<usize>,
}

impl AgentsConfig {
    /// The test command's timeout.
    pub fn test_timeout(&self) -> Duration {
        Duration::from_secs(self.test_timeout_secs.unwrap_or(600))
    }
}
