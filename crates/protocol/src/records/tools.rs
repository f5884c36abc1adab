//! The tool knowledge graph a workspace learned from its agents' tool calls, as the service
//! answers it (`trellis tools graph`, `GET /api/tools/graph`; docs/tools.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tool knowledge graph with the state of speculation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolGraphView {
    /// The tools, by name.
    pub nodes: Vec<ToolNode>,
    /// The learned dependencies, by `(from, to)`.
    pub edges: Vec<ToolEdge>,
    /// The speculation threshold and the outcomes it adapts to.
    pub speculation: SpeculationReport,
}

/// A tool of the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolNode {
    /// The tool.
    pub tool: String,
    /// Its PageRank (weighted by confidence).
    pub pagerank: f64,
    /// Its community: the index in [`ToolGraphView::communities`].
    pub community: usize,
    /// Calls recorded.
    pub calls: i64,
    /// Of those, successful.
    pub successes: i64,
}

/// A learned dependency: `to` followed `from`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolEdge {
    /// The earlier tool.
    pub from: String,
    /// The later tool.
    pub to: String,
    /// Executions that observed it.
    pub observed_count: i64,
    /// Its confidence.
    pub confidence: f64,
}

/// The state of the adaptive speculation threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpeculationReport {
    /// Share of the remembered speculations whose results were used.
    pub acceptance: f64,
    /// Share wasted (not used, or failed).
    pub waste: f64,
    /// The current speculation threshold.
    pub threshold: f64,
    /// Outcomes remembered.
    pub samples: usize,
}

impl ToolGraphView {
    /// The communities in order, each its tools by name (the nodes grouped by
    /// [`ToolNode::community`]).
    pub fn communities(&self) -> Vec<Vec<&str>> {
        let mut groups: std::collections::BTreeMap<usize, Vec<&str>> = Default::default();
        for n in &self.nodes {
            groups.entry(n.community).or_default().push(n.tool.as_str());
        }
        groups
            .into_values()
            .map(|mut members| {
                members.sort_unstable();
                members
            })
            .collect()
    }
}
