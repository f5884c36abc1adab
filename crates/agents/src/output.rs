//! The typed output contract every stage agent returns (`{failure, output,
//! files_changed}`), parsed from the model's answer with the normaliser.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a stage agent reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageReport {
    /// Whether the stage failed (routing takes the failure path).
    pub failure: bool,
    /// The result: a summary of the change, the analysis, the test report…
    pub output: String,
    /// Files changed by the agent. The runtime replaces what the model claims with what git
    /// sees in the worktree.
    #[serde(default)]
    pub files_changed: Vec<String>,
    /// Problems found (failing tests, security findings, lint errors), one per entry.
    #[serde(default)]
    pub findings: Vec<String>,
}
