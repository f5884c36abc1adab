//! The graph as the service answers it: each tool with its PageRank and community, each
//! learned dependency with its observed count and confidence, and the state of speculation
//! ([`ToolGraphView`], a wire type).

use trellis_protocol::records::{SpeculationReport, ToolEdge, ToolGraphView, ToolNode};

use crate::error::Result;
use crate::graph::ToolGraph;

impl ToolGraph {
    /// The graph with its metrics, nodes and edges sorted by name, and `speculation`.
    pub fn view(&self, speculation: SpeculationReport) -> Result<ToolGraphView> {
        let ranks = self.pagerank()?;
        let community = self.community_of()?;
        let mut nodes: Vec<ToolNode> = self
            .graph
            .node_weights()
            .map(|n| ToolNode {
                tool: n.name.clone(),
                pagerank: ranks.get(&n.name).copied().unwrap_or(0.0),
                community: community.get(&n.name).copied().unwrap_or(0),
                calls: n.calls,
                successes: n.successes,
            })
            .collect();
        nodes.sort_by(|a, b| a.tool.cmp(&b.tool));
        let mut edges: Vec<ToolEdge> = self
            .edges()
            .map(|(from, to, s)| ToolEdge {
                from: from.to_owned(),
                to: to.to_owned(),
                observed_count: s.observed_count,
                confidence: s.confidence,
            })
            .collect();
        edges.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
        Ok(ToolGraphView {
            nodes,
            edges,
            speculation,
        })
    }

    /// The graph of `store`'s workspace with the state of speculation, as `trellis tools
    /// graph` and `GET /api/tools/graph` show it.
    pub fn workspace_view(store: &dyn trellis_store::ToolGraphStore) -> Result<ToolGraphView> {
        let speculation = crate::Thresholds::load(store)?.report();
        Self::load(store)?.view(speculation)
    }
}
