//! Graph metrics of a [`ToolGraph`]: weighted PageRank and Louvain communities, both by
//! `graphrs`.
//!
//! petgraph's `page_rank` ignores edge weights and costs O(iterations × V² × E) (it scans
//! every node's out-edges for every pair of nodes), so a frequent, reliable dependency would
//! count no more than one seen once and 1,000 tools would take seconds. graphrs's `pagerank`
//! is the weighted power iteration over predecessor lists (O(iterations × E)), the same
//! computation as graphology's `pagerank(graph, { weighted: true })`; it is used on a copy of
//! the graph built per computation, indexed by petgraph node index.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use graphrs::algorithms::centrality::pagerank::pagerank;
use graphrs::algorithms::community::louvain::louvain_communities;
use graphrs::{Edge, Graph, GraphSpecs, Node};
use petgraph::visit::EdgeRef;

use crate::error::{Error, Result};
use crate::graph::ToolGraph;

/// PageRank's damping factor (the usual 0.85).
const DAMPING: f64 = 0.85;
/// Power iterations allowed before giving up.
const MAX_ITER: u32 = 200;
/// Convergence tolerance per node (graphrs's default).
const TOLERANCE: f64 = 1.0e-6;
/// Louvain's random seed: communities must not change from one call to the next.
const LOUVAIN_SEED: u64 = 20;

fn algorithm(algorithm: &'static str) -> impl Fn(graphrs::Error) -> Error {
    move |e| Error::Algorithm {
        algorithm,
        detail: e.message,
    }
}

impl ToolGraph {
    /// PageRank by node index (cached until the graph changes). Edges weigh their
    /// confidence.
    pub(crate) fn ranks(&self) -> Result<&[f64]> {
        if let Some(r) = self.ranks.get() {
            return Ok(r);
        }
        let n = self.graph.node_count();
        let nodes: Vec<Arc<Node<usize, ()>>> = (0..n).map(Node::from_name).collect();
        let edges: Vec<Arc<Edge<usize, ()>>> = self
            .graph
            .edge_references()
            .map(|e| {
                Edge::with_weight(
                    e.source().index(),
                    e.target().index(),
                    e.weight().confidence.max(0.0),
                )
            })
            .collect();
        let g = Graph::new_from_nodes_and_edges(nodes, edges, GraphSpecs::directed())
            .map_err(algorithm("PageRank"))?;
        let by_node = pagerank(&g, true, Some(DAMPING), Some(MAX_ITER), Some(TOLERANCE))
            .map_err(algorithm("PageRank"))?;
        let mut ranks = vec![0.0; n];
        for (ix, r) in by_node {
            if let Some(slot) = ranks.get_mut(ix) {
                *slot = r;
            }
        }
        Ok(self.ranks.get_or_init(|| ranks))
    }

    /// Every tool's PageRank (summing to 1): a tool that reliable, frequent dependencies
    /// lead to ranks high.
    pub fn pagerank(&self) -> Result<BTreeMap<String, f64>> {
        let ranks = self.ranks()?;
        Ok(self
            .graph
            .node_indices()
            .map(|ix| (self.graph[ix].name.clone(), ranks[ix.index()]))
            .collect())
    }

    /// Communities of tools used together: Louvain (fixed seed, so the partition is stable)
    /// on the undirected projection, an edge weighing the sum of its two directions'
    /// confidences. Each community's tools sorted; communities ordered by their first tool.
    /// A tool without edges is a community of its own.
    pub fn communities(&self) -> Result<Vec<Vec<String>>> {
        let n = self.graph.node_count();
        let mut merged: HashMap<(usize, usize), f64> = HashMap::new();
        for e in self.graph.edge_references() {
            let (a, b) = (e.source().index(), e.target().index());
            if a == b {
                continue;
            }
            *merged.entry((a.min(b), a.max(b))).or_insert(0.0) += e.weight().confidence.max(0.0);
        }
        let mut pairs: Vec<((usize, usize), f64)> = merged.into_iter().collect();
        pairs.sort_by_key(|x| x.0);
        if pairs.is_empty() {
            let mut alone: Vec<Vec<String>> = self
                .graph
                .node_weights()
                .map(|n| vec![n.name.clone()])
                .collect();
            alone.sort();
            return Ok(alone);
        }
        let nodes: Vec<Arc<Node<usize, ()>>> = (0..n).map(Node::from_name).collect();
        let edges = pairs
            .into_iter()
            .map(|((a, b), w)| Edge::with_weight(a, b, w))
            .collect();
        let g = Graph::new_from_nodes_and_edges(nodes, edges, GraphSpecs::undirected())
            .map_err(algorithm("Louvain"))?;
        let found = louvain_communities(&g, true, None, None, Some(LOUVAIN_SEED))
            .map_err(algorithm("Louvain"))?;
        let mut out: Vec<Vec<String>> = found
            .into_iter()
            .map(|c| {
                let mut names: Vec<String> = c
                    .into_iter()
                    .filter_map(|i| {
                        self.graph
                            .node_weight(petgraph::graph::NodeIndex::new(i))
                            .map(|n| n.name.clone())
                    })
                    .collect();
                names.sort();
                names
            })
            .filter(|c| !c.is_empty())
            .collect();
        out.sort();
        Ok(out)
    }

    /// Each tool's community number (its index in [`ToolGraph::communities`]).
    pub fn community_of(&self) -> Result<BTreeMap<String, usize>> {
        Ok(self
            .communities()?
            .into_iter()
            .enumerate()
            .flat_map(|(i, c)| c.into_iter().map(move |t| (t, i)))
            .collect())
    }
}
