//! The tool-schema budget (docs/tools.md) and `search_tools`, as the agents and the
//! MCP gateway offer them: the tools always offered take what they take; the catalog's tools
//! compete for the rest — all of them when they fit, else the best for the query that fit
//! (and, when asked to fill, the rest of the room goes to the others by their PageRank
//! prior) — and `search_tools` finds the ones left out.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::{ToolCatalog, ToolEntry};
use crate::error::Result;

/// The tool that finds tools left out of the budget.
pub const SEARCH_TOOLS: &str = "search_tools";

/// The `search_tools` tool's description.
pub const SEARCH_TOOLS_DESCRIPTION: &str = "Find more tools (MCP servers' tools not offered yet, \
     to keep the prompt small) by what you want to do; the matches are offered from your next \
     step on.";

/// The `search_tools` tool's input schema.
pub fn search_tools_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What the tool should do, in a few words."}},
        "required": ["query"],
        "additionalProperties": false
    })
}

/// `search_tools` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchToolsInput {
    query: String,
}

/// What a `search_tools` call found.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// The answer for the caller: each match's name, description and argument schema.
    pub text: String,
    /// The matching tools, best first.
    pub tools: Vec<String>,
    /// The arguments were wrong (or the search failed).
    pub is_error: bool,
}

/// The catalog tools a budget lets through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Offer {
    /// The tools to offer.
    pub chosen: Vec<String>,
    /// How many were left out (then `search_tools` should be offered).
    pub left_out: usize,
}

impl ToolEntry {
    /// The entry of a tool called `name` (an MCP tool's `<server>__<tool>` names its server).
    pub fn of(name: &str, description: &str, input_schema: &Value) -> Self {
        Self {
            name: name.to_owned(),
            server: name.split_once("__").map(|(s, _)| s.to_owned()),
            description: description.to_owned(),
            input_schema: input_schema.clone(),
        }
    }
}

impl ToolCatalog {
    /// The catalog's tools to offer beside tools always offered that take `fixed` tokens,
    /// within `budget` tokens: every one when they all fit; else the best for `query` that
    /// fit in what `fixed` and `search_tools` (`search_cost`) leave, and, with `fill`, the
    /// others after them by PageRank prior (then name) while they fit. `cost` is a tool's
    /// schema cost in tokens.
    pub fn offer(
        &self,
        query: &str,
        budget: usize,
        fixed: usize,
        search_cost: usize,
        cost: &dyn Fn(&ToolEntry) -> usize,
        fill: bool,
    ) -> Result<Offer> {
        let total: usize = self.entries().iter().map(cost).sum();
        if fixed.saturating_add(total) <= budget {
            return Ok(Offer {
                chosen: self.entries().iter().map(|e| e.name.clone()).collect(),
                left_out: 0,
            });
        }
        let left = budget.saturating_sub(fixed.saturating_add(search_cost));
        let selection = self.select_within_budget(query, left, cost, &[])?;
        let mut chosen = selection.chosen;
        if fill {
            let mut used = selection.used_tokens;
            let taken: HashSet<String> = chosen.iter().cloned().collect();
            let mut rest: Vec<(usize, &ToolEntry)> = self
                .entries()
                .iter()
                .enumerate()
                .filter(|(_, e)| !taken.contains(&e.name))
                .collect();
            rest.sort_by(|(i, a), (j, b)| {
                self.prior_of(*j)
                    .total_cmp(&self.prior_of(*i))
                    .then_with(|| a.name.cmp(&b.name))
            });
            for (_, e) in rest {
                if let Some(next) = used.checked_add(cost(e))
                    && next <= left
                {
                    used = next;
                    chosen.push(e.name.clone());
                }
            }
        }
        Ok(Offer {
            left_out: self.entries().len() - chosen.len(),
            chosen,
        })
    }

    /// Answers a `search_tools` call with `args` (`{"query"}`): the `k` best matches, each
    /// with its description and argument schema (keys sorted).
    pub fn search_tools(&self, args: &Value, k: usize) -> Found {
        let error = |text: String| Found {
            text,
            tools: Vec::new(),
            is_error: true,
        };
        let query = match serde_json::from_value::<SearchToolsInput>(args.clone()) {
            Ok(i) if !i.query.trim().is_empty() => i.query,
            Ok(_) | Err(_) => {
                return error(format!(
                    "error: give `{SEARCH_TOOLS}` a non-empty {{\"query\"}}"
                ));
            }
        };
        let hits = match self.search(&query, k.max(1)) {
            Ok(h) => h,
            Err(e) => return error(format!("error: {e}")),
        };
        if hits.is_empty() {
            return Found {
                text: format!("no tool matches \"{query}\"; try other words"),
                tools: Vec::new(),
                is_error: false,
            };
        }
        let mut text = format!(
            "{} tools match \"{query}\"; they are offered from your next step on:\n",
            hits.len()
        );
        let mut tools = Vec::new();
        for (name, _) in &hits {
            let Some(e) = self.get(name) else { continue };
            let args = trellis_protocol::canonical::to_canonical_string(&e.input_schema)
                .unwrap_or_default();
            text.push_str(&format!(
                "\n## {}\n{}\narguments: {args}\n",
                e.name, e.description
            ));
            tools.push(e.name.clone());
        }
        Found {
            text,
            tools,
            is_error: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn catalog() -> ToolCatalog {
        let tool = |name: &str, description: &str| ToolEntry::of(name, description, &json!({}));
        ToolCatalog::new(vec![
            tool("srv__alpha", "reads the weather forecast"),
            tool("srv__beta", "adds two numbers"),
            tool("srv__gamma", "echoes a message"),
        ])
    }

    #[test]
    fn everything_fits_or_the_best_then_the_rest_by_name_within_the_budget() {
        let c = catalog();
        let cost = |_: &ToolEntry| 10;
        let all = c.offer("", 100, 5, 3, &cost, false).unwrap();
        assert_eq!(all.chosen.len(), 3);
        assert_eq!(all.left_out, 0);
        // 28 tokens: 5 fixed and 3 for search_tools leave room for two tools of 10.
        let some = c.offer("sum of numbers", 28, 5, 3, &cost, false).unwrap();
        assert_eq!(some.chosen, ["srv__beta"]);
        assert_eq!(some.left_out, 2);
        let filled = c.offer("sum of numbers", 28, 5, 3, &cost, true).unwrap();
        assert_eq!(filled.chosen, ["srv__beta", "srv__alpha"]);
        let none = c.offer("", 10, 5, 3, &cost, true).unwrap();
        assert!(none.chosen.is_empty());
    }

    #[test]
    fn search_tools_answers_with_schemas_or_says_what_is_wrong() {
        let c = catalog();
        let found = c.search_tools(&json!({"query": "add numbers"}), 8);
        assert!(!found.is_error);
        assert_eq!(found.tools, ["srv__beta"]);
        assert!(
            found
                .text
                .contains("## srv__beta\nadds two numbers\narguments: {}")
        );
        assert!(c.search_tools(&json!({"query": " "}), 8).is_error);
        assert!(c.search_tools(&json!({"q": "x"}), 8).is_error);
        assert!(
            c.search_tools(&json!({"query": "zebra"}), 8)
                .tools
                .is_empty()
        );
    }
}
