//! What a budget is: prices, limits, the scopes they apply to, and the refusal of a call
//! that would exceed one ([`BudgetExceeded`], which [`crate::Error::Budget`] carries).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Prices in US dollars per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million prompt tokens.
    pub input_per_mtok: f64,
    /// Per million generated tokens.
    pub output_per_mtok: f64,
}

impl Price {
    /// Cost of `prompt` input and `completion` output tokens.
    pub fn cost(&self, prompt: u64, completion: u64) -> f64 {
        (prompt as f64 * self.input_per_mtok + completion as f64 * self.output_per_mtok) / 1e6
    }
}

/// A limit; `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// Maximum tokens (prompt + completion).
    pub tokens: Option<u64>,
    /// Maximum cost in US dollars (only calls with a configured price count).
    pub cost_usd: Option<f64>,
    /// Maximum model calls (each request counts once, whatever it costs).
    #[serde(default)]
    pub calls: Option<u64>,
}

/// What a budget applies to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "scope", content = "name", rename_all = "snake_case")]
pub enum Scope {
    /// The whole run.
    Run,
    /// One stage (graph node) of the run.
    Stage(String),
    /// One agent (role) of the run.
    Agent(String),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Run => f.write_str("run"),
            Scope::Stage(s) => write!(f, "stage `{s}`"),
            Scope::Agent(a) => write!(f, "agent `{a}`"),
        }
    }
}

/// The budgets of a run (the `[budgets]` configuration section resolves into this).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// The run as a whole.
    pub run: Limit,
    /// Per stage, by name.
    pub stages: BTreeMap<String, Limit>,
    /// Per agent, by name.
    pub agents: BTreeMap<String, Limit>,
}

/// Which unit ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetUnit {
    /// Tokens.
    Tokens,
    /// US dollars.
    CostUsd,
    /// Model calls.
    Calls,
}

/// A call refused because it would exceed a budget. Serializable so that it can travel in
/// an interrupt asking the user for more budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error(
    "{scope} {unit:?} budget would be exceeded: limit {limit}, used {used} (incl. calls in \
     flight), this call needs up to {requested}; grant more budget to continue"
)]
pub struct BudgetExceeded {
    /// The exhausted scope.
    pub scope: Scope,
    /// The exhausted unit.
    pub unit: BudgetUnit,
    /// The limit.
    pub limit: f64,
    /// Spent plus reserved by calls in flight.
    pub used: f64,
    /// The projection of the refused call.
    pub requested: f64,
}
