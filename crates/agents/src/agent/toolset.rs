//! The tool-schema budget (seed 002 Pattern 2) and `search_tools`.
//!
//! An agent's own tools (registered ones: built-in, stage, language-server and task tools)
//! are always offered. The MCP servers' tools it may use (a registry [`ToolSource`]'s)
//! compete for what is left of `tools.budget.share` of the model's window: the ones most
//! relevant to the task (`trellis_toolgraph::ToolCatalog`, BM25 over names, descriptions
//! and schema fields) that fit. When some are left out, `search_tools` is offered; what it
//! finds is offered from then on in the activation.
//!
//! [`ToolSource`]: trellis_tools::ToolSource

use serde::Deserialize;
use serde_json::{Value, json};
use trellis_llm::{ChatRequest, ToolSpec};
use trellis_protocol::ToolStatus;
use trellis_toolgraph::{ToolCatalog, ToolEntry};

use super::{AgentRun, Saved};

/// The tool that finds MCP tools left out of the budget.
pub const SEARCH_TOOLS: &str = "search_tools";

/// `search_tools` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchToolsInput {
    query: String,
}

/// What the budget decided for one model call.
pub(super) struct Offer {
    /// The specs to send.
    pub specs: Vec<ToolSpec>,
    /// MCP tools the agent may use that were left out.
    pub left_out: usize,
}

/// A tool spec's cost in the prompt (the provider's estimate of a request carrying only it).
fn cost(spec: &ToolSpec) -> usize {
    let request = ChatRequest {
        tools: vec![spec.clone()],
        ..ChatRequest::new(Vec::new())
    };
    usize::try_from(trellis_llm::tokens::estimate_request(&request).tokens).unwrap_or(usize::MAX)
}

fn entry(spec: &ToolSpec) -> ToolEntry {
    ToolEntry {
        name: spec.name.clone(),
        server: spec.name.split_once("__").map(|(s, _)| s.to_owned()),
        description: spec.description.clone(),
        input_schema: spec.parameters.clone(),
    }
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
        let total: usize = sourced.iter().map(cost).sum();
        if fixed + total <= budget {
            let mut all = own;
            all.extend(sourced);
            return Offer {
                specs: all,
                left_out: 0,
            };
        }
        let search = super::search_tools_spec();
        let left = budget.saturating_sub(fixed + cost(&search));
        let catalog = ToolCatalog::new(sourced.iter().map(entry).collect());
        let count = |e: &ToolEntry| {
            sourced
                .iter()
                .find(|s| s.name == e.name)
                .map_or(usize::MAX, cost)
        };
        let chosen = match catalog.select_within_budget(
            &super::foresight::task_text(&st.messages),
            left,
            &count,
            &[],
        ) {
            Ok(sel) => sel.chosen,
            Err(e) => {
                tracing::warn!(error = %e, "tool selection failed; offering no MCP tool");
                Vec::new()
            }
        };
        let left_out = sourced.len() - chosen.len();
        let mut specs = own;
        specs.extend(sourced.into_iter().filter(|s| chosen.contains(&s.name)));
        specs.push(search);
        Offer { specs, left_out }
    }

    /// Answers a `search_tools` call: the best matches among the MCP tools the agent may use,
    /// each offered from the next call on.
    pub(super) fn search_tools(&self, st: &mut Saved, args: &Value) -> (String, ToolStatus) {
        let query = match serde_json::from_value::<SearchToolsInput>(args.clone()) {
            Ok(i) if !i.query.trim().is_empty() => i.query,
            Ok(_) | Err(_) => {
                return (
                    format!("error: give `{SEARCH_TOOLS}` a non-empty {{\"query\"}}"),
                    ToolStatus::Error,
                );
            }
        };
        let sourced: Vec<ToolSpec> = self
            .tool_specs()
            .into_iter()
            .filter(|s| self.tools.sourced(&s.name))
            .collect();
        let catalog = ToolCatalog::new(sourced.iter().map(entry).collect());
        let k = self.env.config.budget.search_results.max(1);
        let hits = match catalog.search(&query, k) {
            Ok(h) => h,
            Err(e) => return (format!("error: {e}"), ToolStatus::Error),
        };
        if hits.is_empty() {
            return (
                format!("no tool matches \"{query}\"; try other words"),
                ToolStatus::Ok,
            );
        }
        let mut text = format!(
            "{} tools match \"{query}\"; they are offered from your next step on:\n",
            hits.len()
        );
        for (name, _) in &hits {
            let Some(spec) = sourced.iter().find(|s| &s.name == name) else {
                continue;
            };
            let args = trellis_protocol::canonical::to_canonical_string(&spec.parameters)
                .unwrap_or_default();
            text.push_str(&format!(
                "\n## {}\n{}\narguments: {args}\n",
                spec.name, spec.description
            ));
            if !st.discovered.contains(&spec.name) {
                st.discovered.push(spec.name.clone());
            }
        }
        (text, ToolStatus::Ok)
    }
}

/// The `search_tools` spec.
pub fn search_tools_spec() -> ToolSpec {
    ToolSpec {
        name: SEARCH_TOOLS.into(),
        description: "Find more tools (MCP servers' tools not offered yet, to keep the prompt \
                      small) by what you want to do; the matches are offered from your next \
                      step on."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What the tool should do, in a few words."}},
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}
