//! Model usage: one record per model call, and totals per run, stage and agent.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::RunId;

/// One model call's usage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelCallRecord {
    /// Row id (0 before insertion).
    pub id: i64,
    /// The run, if the call belonged to one.
    pub run_id: Option<RunId>,
    /// The stage (graph node), if known.
    pub stage: Option<String>,
    /// The agent (role), if known.
    pub agent: Option<String>,
    /// The model profile's name.
    pub profile: String,
    /// The model identifier.
    pub model: String,
    /// Prompt (input) tokens.
    pub prompt_tokens: u64,
    /// Generated tokens, thinking included.
    pub completion_tokens: u64,
    /// Prompt tokens served from a provider-side cache.
    pub cached_tokens: u64,
    /// Whether the provider reported the counts (else they were counted or estimated
    /// locally).
    pub reported: bool,
    /// Cost in US dollars, when the profile has a price.
    pub cost_usd: Option<f64>,
    /// How the call ended: `ok`, `failed` or `cancelled`.
    pub outcome: String,
    /// When the call ended (ms since epoch).
    pub at: i64,
}

/// Model usage summed over a set of calls.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageTotals {
    /// Calls.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from a provider-side cache.
    pub cached_tokens: u64,
    /// Calls whose counts were estimated rather than reported by the provider.
    pub estimated_calls: u64,
    /// Calls that failed or were cancelled.
    pub unfinished_calls: u64,
    /// Cost in US dollars of the calls with a price (`None` when none had one).
    pub cost_usd: Option<f64>,
}

impl UsageTotals {
    /// Prompt plus generated tokens.
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// A run's model usage: in total, per stage and per agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunUsage {
    /// The run.
    pub run: UsageTotals,
    /// Per stage, by name (calls without a stage are not listed).
    pub stages: Vec<(String, UsageTotals)>,
    /// Per agent, by name (calls without an agent are not listed).
    pub agents: Vec<(String, UsageTotals)>,
}
