//! Exports of a [`ToolGraph`]: Graphviz DOT and JSON, each node with its PageRank and
//! community, each edge with its observed count and confidence.

use std::fmt::Write as _;

use serde::Serialize;

use crate::error::Result;
use crate::graph::ToolGraph;

/// A node of the JSON export.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportNode {
    /// The tool.
    pub tool: String,
    /// Its PageRank.
    pub pagerank: f64,
    /// Its community's number.
    pub community: usize,
    /// Calls recorded.
    pub calls: i64,
    /// Of those, successful.
    pub successes: i64,
}

/// An edge of the JSON export.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportEdge {
    /// The earlier tool.
    pub from: String,
    /// The later tool.
    pub to: String,
    /// Executions that observed it.
    pub observed_count: i64,
    /// Its confidence.
    pub confidence: f64,
}

/// The JSON export.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Export {
    /// The tools, by name.
    pub nodes: Vec<ExportNode>,
    /// The learned edges, by `(from, to)`.
    pub edges: Vec<ExportEdge>,
}

impl ToolGraph {
    /// The graph with its metrics, nodes and edges sorted by name.
    pub fn export(&self) -> Result<Export> {
        let ranks = self.pagerank()?;
        let community = self.community_of()?;
        let mut nodes: Vec<ExportNode> = self
            .graph
            .node_weights()
            .map(|n| ExportNode {
                tool: n.name.clone(),
                pagerank: ranks.get(&n.name).copied().unwrap_or(0.0),
                community: community.get(&n.name).copied().unwrap_or(0),
                calls: n.calls,
                successes: n.successes,
            })
            .collect();
        nodes.sort_by(|a, b| a.tool.cmp(&b.tool));
        let mut edges: Vec<ExportEdge> = self
            .edges()
            .map(|(from, to, s)| ExportEdge {
                from: from.to_owned(),
                to: to.to_owned(),
                observed_count: s.observed_count,
                confidence: s.confidence,
            })
            .collect();
        edges.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
        Ok(Export { nodes, edges })
    }

    /// The graph as JSON: `{"nodes": [{tool, pagerank, community, calls, successes}],
    /// "edges": [{from, to, observedCount, confidence}]}`.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        // Serialising plain structs of strings and numbers cannot fail; NaN becomes null.
        Ok(serde_json::to_value(self.export()?).unwrap_or(serde_json::Value::Null))
    }

    /// The graph of `store`'s workspace with the state of speculation, as `trellis tools
    /// graph --format json` and `GET /api/tools/graph` show it: [`ToolGraph::to_json`] plus
    /// `"speculation": {threshold, acceptance, waste, samples}`.
    pub fn workspace_json(store: &dyn trellis_store::ToolGraphStore) -> Result<serde_json::Value> {
        let mut json = Self::load(store)?.to_json()?;
        let speculation = crate::Thresholds::load(store)?.report();
        if let Some(map) = json.as_object_mut() {
            map.insert(
                "speculation".into(),
                serde_json::to_value(speculation).unwrap_or(serde_json::Value::Null),
            );
        }
        Ok(json)
    }

    /// The graph in Graphviz DOT: nodes labelled with PageRank and community, edges with
    /// observed count and confidence (pen width growing with confidence).
    pub fn to_dot(&self) -> Result<String> {
        let export = self.export()?;
        let mut out = String::from("digraph tools {\n  rankdir=LR;\n  node [shape=box];\n");
        for n in &export.nodes {
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "  {} [label=\"{}\\npagerank {:.4}\\ncommunity {}\", group={}];",
                quote(&n.tool),
                escape(&n.tool),
                n.pagerank,
                n.community,
                n.community
            );
        }
        for e in &export.edges {
            let _ = writeln!(
                out,
                "  {} -> {} [label=\"{} × {:.2}\", penwidth={:.2}];",
                quote(&e.from),
                quote(&e.to),
                e.observed_count,
                e.confidence,
                0.5 + 2.5 * e.confidence.clamp(0.0, 1.0)
            );
        }
        out.push_str("}\n");
        Ok(out)
    }
}

/// `s` as a DOT quoted id.
fn quote(s: &str) -> String {
    format!("\"{}\"", escape(s))
}

/// `s` escaped for the inside of a DOT string.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
