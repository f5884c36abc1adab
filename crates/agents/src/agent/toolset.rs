//! The tool-schema budget (`docs/tools.md`, "Tool-schema budget") and `search_tools`.
//!
//! An agent's own tools (registered ones: built-in, stage, language-server and task tools)
//! are always offered. The MCP servers' tools it may use (a registry [`ToolSource`]'s)
//! compete for what is left of `tools.budget.share` of the model's window: the ones most
//! relevant to the task (`trellis_toolgraph::ToolCatalog`: BM25 over names, descriptions
//! and schema fields, fused with embeddings when the runtime gives an embedder, with the
//! tool knowledge graph's PageRank as the prior) that fit. When some are left out, `search_tools` is offered; what it
//! finds is offered from then on in the activation.
//!
//! [`ToolSource`]: trellis_tools::ToolSource

use serde_json::Value;
use trellis_llm::ToolSpec;
use trellis_llm::tokens::estimate_tool as cost;
use trellis_protocol::ToolStatus;
use trellis_toolgraph::{ToolCatalog, ToolEntry};

use super::{AgentRun, Saved};

/// The tool that finds MCP tools left out of the budget.
pub const SEARCH_TOOLS: &str = trellis_toolgraph::SEARCH_TOOLS;

/// What the budget decided for one model call.
pub(super) struct Offer {
    /// The specs to send.
    pub specs: Vec<ToolSpec>,
    /// MCP tools the agent may use that were left out.
    pub left_out: usize,
}

fn entry(spec: &ToolSpec) -> ToolEntry {
    ToolEntry::of(&spec.name, &spec.description, &spec.parameters)
}

impl AgentRun {
    /// The budget in tokens for this activation's tool schemas, when one applies.
    fn schema_budget(&self) -> Option<usize> {
        let b = &self.env.config.budget;
        let window = self.provider.info().context_window?;
        (b.enabled && b.share > 0.0).then(|| (f64::from(window) * b.share) as usize)
    }

    /// `specs` (every tool the agent may use) within the schema budget.
    pub(super) fn within_budget(&self, specs: Vec<ToolSpec>, st: &Saved) -> Offer {
        let Some(budget) = self.schema_budget() else {
            return Offer { specs, left_out: 0 };
        };
        let (own, sourced): (Vec<ToolSpec>, Vec<ToolSpec>) = specs
            .into_iter()
            .partition(|s| !self.tools.sourced(&s.name) || st.discovered.contains(&s.name));
        if sourced.is_empty() {
            return Offer {
                specs: own,
                left_out: 0,
            };
        }
        let fixed: usize = own.iter().map(cost).sum();
        let search = super::search_tools_spec();
        // Hybrid: BM25 with the tools' and the task's embeddings (cached vectors), and what
        // the workspace's tool knowledge graph learned (PageRank) as the prior.
        let ranks = self
            .env
            .advisor
            .as_ref()
            .map(|a| a.importance())
            .unwrap_or_default();
        let catalog = ToolCatalog::hybrid(
            sourced.iter().map(entry).collect(),
            self.context.tool_embedder.clone(),
            None,
            &ranks,
        );
        let count = |e: &ToolEntry| {
            sourced
                .iter()
                .find(|s| s.name == e.name)
                .map_or(usize::MAX, cost)
        };
        let offer = catalog
            .offer(
                &super::foresight::task_text(&st.messages),
                budget,
                fixed,
                cost(&search),
                &count,
                false,
            )
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "tool selection failed; offering no MCP tool");
                trellis_toolgraph::Offer {
                    chosen: Vec::new(),
                    left_out: sourced.len(),
                }
            });
        let mut specs = own;
        specs.extend(
            sourced
                .into_iter()
                .filter(|s| offer.chosen.contains(&s.name)),
        );
        if offer.left_out > 0 {
            specs.push(search);
        }
        Offer {
            specs,
            left_out: offer.left_out,
        }
    }

    /// Answers a `search_tools` call: the best matches among the MCP tools the agent may use,
    /// each offered from the next call on.
    pub(super) fn search_tools(&self, st: &mut Saved, args: &Value) -> (String, ToolStatus) {
        let sourced: Vec<ToolEntry> = self
            .tool_specs()
            .iter()
            .filter(|s| self.tools.sourced(&s.name))
            .map(entry)
            .collect();
        let found =
            ToolCatalog::new(sourced).search_tools(args, self.env.config.budget.search_results);
        for name in found.tools {
            if !st.discovered.contains(&name) {
                st.discovered.push(name);
            }
        }
        let status = if found.is_error {
            ToolStatus::Error
        } else {
            ToolStatus::Ok
        };
        (found.text, status)
    }
}

/// The `search_tools` spec.
pub fn search_tools_spec() -> ToolSpec {
    ToolSpec {
        name: SEARCH_TOOLS.into(),
        description: trellis_toolgraph::SEARCH_TOOLS_DESCRIPTION.into(),
        parameters: trellis_toolgraph::search_tools_schema(),
    }
}
