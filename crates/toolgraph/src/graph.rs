//! [`ToolGraph`]: the learned dependencies between tools, in memory (a petgraph `DiGraph`)
//! and in the store (`tool_nodes`, `tool_dependency`).
//!
//! # Learning
//!
//! [`ToolGraph::record_execution`] observes, once per execution, an edge `a → b` for every
//! pair of consecutive calls and every data dependency the executor saw (self-pairs are
//! skipped). Each observation bumps the edge's `observed_count`, and its `success_count`
//! when both calls succeeded. The edge's confidence is [`edge_confidence`]:
//!
//! ```text
//! confidence(n, s) = (s + 1) / (n + 2)  ×  n / (n + 1)
//!                    └ reliability ┘       └ support ┘
//! ```
//!
//! *Reliability* is the Laplace-smoothed success rate of the pair; *support* grows with the
//! evidence, so one lucky observation is not a pattern. A pair always seen succeeding has
//! `n / (n + 2)`: 0.33 after one execution, 0.83 after 10, 0.857 after 12 (past the lowest
//! speculation threshold, 0.85), 0.92 after 23. Failures pull it down: 20 observations with 10
//! successes give 0.50.
//!
//! How likely `b` is to come next after `a` also depends on what else follows `a`:
//! [`ToolGraph::predict_next`] weighs the confidence by the share of `a`'s observations
//! that went to `b`.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};
use trellis_store::{
    CallOutcome, EdgeObservation, NewToolExecution, ToolEdgeRecord, ToolGraphStore, ToolNodeRecord,
};

use crate::error::{Error, Result};

/// The confidence of an edge observed `observed` times, `successes` of them with both calls
/// succeeding (see the module docs). 0 for an edge never observed.
pub fn edge_confidence(observed: i64, successes: i64) -> f64 {
    if observed <= 0 {
        return 0.0;
    }
    let n = observed as f64;
    let s = successes.clamp(0, observed) as f64;
    (s + 1.0) / (n + 2.0) * n / (n + 1.0)
}

/// One call of an [`Execution`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutedCall {
    /// The tool.
    pub tool: String,
    /// Whether it succeeded.
    pub ok: bool,
}

impl ExecutedCall {
    /// A call of `tool` that succeeded (`ok`) or failed.
    pub fn new(tool: impl Into<String>, ok: bool) -> Self {
        Self {
            tool: tool.into(),
            ok,
        }
    }
}

/// A finished execution to learn from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    /// What it was for (an intent, a task title).
    pub context: String,
    /// The calls, in execution order.
    pub calls: Vec<ExecutedCall>,
    /// Data dependencies observed between calls, by index into `calls`: `(i, j)` means the
    /// output of call `i` fed call `j`.
    pub data_edges: Vec<(usize, usize)>,
}

/// A tool node's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) calls: i64,
    pub(crate) successes: i64,
}

/// A learned edge's counts and confidence.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EdgeStats {
    /// Executions in which the pair was observed.
    pub observed_count: i64,
    /// Of those, the ones in which both calls succeeded.
    pub success_count: i64,
    /// [`edge_confidence`] of the counts.
    pub confidence: f64,
}

/// The tool knowledge graph. Metrics are computed on demand; PageRank is cached until the
/// graph changes.
#[derive(Clone, Debug, Default)]
pub struct ToolGraph {
    pub(crate) graph: DiGraph<Node, EdgeStats>,
    pub(crate) index: HashMap<String, NodeIndex>,
    pub(crate) ranks: OnceLock<Vec<f64>>,
}

impl ToolGraph {
    /// An empty graph (nothing learned).
    pub fn new() -> Self {
        Self::default()
    }

    /// The graph as the store holds it.
    pub fn load(store: &dyn ToolGraphStore) -> Result<Self> {
        let snapshot = store.tool_graph()?;
        Ok(Self::from_records(&snapshot.nodes, &snapshot.edges))
    }

    /// A graph of the given nodes and edges (edges may name tools missing from `nodes`).
    pub fn from_records(nodes: &[ToolNodeRecord], edges: &[ToolEdgeRecord]) -> Self {
        let mut g = Self::default();
        g.graph.reserve_nodes(nodes.len());
        g.graph.reserve_edges(edges.len());
        g.index.reserve(nodes.len());
        for n in nodes {
            let ix = g.node(&n.tool);
            g.graph[ix].calls = n.calls;
            g.graph[ix].successes = n.successes;
        }
        for e in edges {
            let (a, b) = (g.node(&e.from), g.node(&e.to));
            g.graph.add_edge(
                a,
                b,
                EdgeStats {
                    observed_count: e.observed_count,
                    success_count: e.success_count,
                    confidence: e.confidence,
                },
            );
        }
        g
    }

    /// The node of `tool`, added if missing.
    fn node(&mut self, tool: &str) -> NodeIndex {
        if let Some(ix) = self.index.get(tool) {
            return *ix;
        }
        let ix = self.graph.add_node(Node {
            name: tool.to_owned(),
            ..Node::default()
        });
        self.index.insert(tool.to_owned(), ix);
        ix
    }

    /// Learns from a finished execution: stores it with its observed edges (one
    /// transaction), then applies the same counts to the in-memory graph.
    pub fn record_execution(
        &mut self,
        store: &dyn ToolGraphStore,
        execution: &Execution,
    ) -> Result<()> {
        let record = Self::observe(execution)?;
        store.record_tool_execution(record.clone())?;
        self.apply(&record);
        Ok(())
    }

    /// The store record of an execution: its calls and its observed edges, each pair once.
    pub fn observe(execution: &Execution) -> Result<NewToolExecution> {
        let calls = &execution.calls;
        for &(from, to) in &execution.data_edges {
            if from >= calls.len() || to >= calls.len() || from == to {
                return Err(Error::BadDataEdge {
                    from,
                    to,
                    calls: calls.len(),
                });
            }
        }
        let pairs = (1..calls.len())
            .map(|i| (i - 1, i))
            .chain(execution.data_edges.iter().copied());
        let mut seen = HashSet::new();
        let mut edges = Vec::new();
        for (i, j) in pairs {
            let (a, b) = (&calls[i], &calls[j]);
            if a.tool == b.tool || !seen.insert((a.tool.as_str(), b.tool.as_str())) {
                continue;
            }
            edges.push(EdgeObservation {
                from: a.tool.clone(),
                to: b.tool.clone(),
                ok: a.ok && b.ok,
            });
        }
        Ok(NewToolExecution {
            context: execution.context.clone(),
            calls: calls
                .iter()
                .map(|c| CallOutcome {
                    tool: c.tool.clone(),
                    ok: c.ok,
                })
                .collect(),
            edges,
            confidence: edge_confidence,
        })
    }

    /// Applies a recorded execution's counts to the in-memory graph.
    pub fn apply(&mut self, record: &NewToolExecution) {
        for c in &record.calls {
            let ix = self.node(&c.tool);
            let n = &mut self.graph[ix];
            n.calls += 1;
            n.successes += i64::from(c.ok);
        }
        for o in &record.edges {
            let (a, b) = (self.node(&o.from), self.node(&o.to));
            let e = match self.graph.find_edge(a, b) {
                Some(e) => e,
                None => self.graph.add_edge(a, b, EdgeStats::default()),
            };
            let s = &mut self.graph[e];
            s.observed_count += 1;
            s.success_count += i64::from(o.ok);
            s.confidence = (record.confidence)(s.observed_count, s.success_count);
        }
        self.clear_cache();
    }

    /// Forgets the cached PageRank (for benchmarks: the graph forgets it by itself whenever
    /// it learns).
    pub fn clear_cache(&mut self) {
        self.ranks = OnceLock::new();
    }

    /// Number of tools.
    pub fn node_count(&self) -> usize {
        self.graph.node_count()
    }

    /// Number of learned edges.
    pub fn edge_count(&self) -> usize {
        self.graph.edge_count()
    }

    /// Whether the graph knows `tool`.
    pub fn contains(&self, tool: &str) -> bool {
        self.index.contains_key(tool)
    }

    /// The learned edge `from → to`, if any.
    pub fn edge(&self, from: &str, to: &str) -> Option<EdgeStats> {
        let (a, b) = (self.index.get(from)?, self.index.get(to)?);
        self.graph.find_edge(*a, *b).map(|e| self.graph[e])
    }

    /// Every learned edge as `(from, to, stats)`, in insertion order.
    pub fn edges(&self) -> impl Iterator<Item = (&str, &str, EdgeStats)> + '_ {
        self.graph.edge_references().map(|e| {
            (
                self.graph[e.source()].name.as_str(),
                self.graph[e.target()].name.as_str(),
                *e.weight(),
            )
        })
    }

    /// Every tool's name, in insertion order.
    pub fn tools(&self) -> impl Iterator<Item = &str> + '_ {
        self.graph.node_weights().map(|n| n.name.as_str())
    }

    /// The shortest dependency chain from `from` to `to` (both included), preferring the
    /// strongest edges among chains of the same length; `None` when `to` cannot be reached.
    pub fn path(&self, from: &str, to: &str) -> Option<Vec<String>> {
        self.path_where(from, to, |_| true)
    }

    /// [`ToolGraph::path`] over the edges `keep` accepts.
    pub(crate) fn path_where(
        &self,
        from: &str,
        to: &str,
        keep: impl Fn(&EdgeStats) -> bool,
    ) -> Option<Vec<String>> {
        let (a, b) = (*self.index.get(from)?, *self.index.get(to)?);
        // Each hop costs 1 plus a tie-break below 1 / node_count, so fewer hops always win
        // and, among chains of equal length, the one with the strongest edges does.
        let tie = 1.0 / (self.graph.node_count() as f64 + 1.0);
        let (_, nodes) = petgraph::algo::astar(
            &self.graph,
            a,
            |n| n == b,
            |e| {
                if keep(e.weight()) {
                    1.0 + tie * (1.0 - e.weight().confidence.clamp(0.0, 1.0))
                } else {
                    f64::INFINITY
                }
            },
            |_| 0.0,
        )?;
        // An unreachable goal through refused edges shows up as an infinite cost path.
        let ok = nodes.windows(2).all(|w| {
            self.graph
                .find_edge(w[0], w[1])
                .is_some_and(|e| keep(&self.graph[e]))
        });
        ok.then(|| nodes.iter().map(|n| self.graph[*n].name.clone()).collect())
    }

    /// Tools likely to be called next after `completed` (in call order), most likely first,
    /// with a confidence in `[0, 1]`.
    ///
    /// A candidate `b` (not yet completed) following a completed `a` scores
    /// `confidence(a → b) × share(a → b) × 0.8^k`, where `share` is `b`'s part of all
    /// observations leaving `a` and `k` counts how many calls ago `a` ran (0 for the last).
    /// A candidate reached from several completed tools keeps its best score.
    pub fn predict_next(&self, completed: &[String]) -> Vec<(String, f64)> {
        const DECAY: f64 = 0.8;
        let done: HashSet<&str> = completed.iter().map(String::as_str).collect();
        let mut best: HashMap<NodeIndex, f64> = HashMap::new();
        for (k, tool) in completed.iter().rev().enumerate() {
            let Some(&a) = self.index.get(tool.as_str()) else {
                continue;
            };
            let total: i64 = self.graph.edges(a).map(|e| e.weight().observed_count).sum();
            if total <= 0 {
                continue;
            }
            let decay = DECAY.powi(i32::try_from(k).unwrap_or(i32::MAX));
            for e in self.graph.edges(a) {
                let b = e.target();
                if done.contains(self.graph[b].name.as_str()) {
                    continue;
                }
                let w = e.weight();
                let score = w.confidence * (w.observed_count as f64 / total as f64) * decay;
                let slot = best.entry(b).or_insert(0.0);
                if score > *slot {
                    *slot = score;
                }
            }
        }
        let mut out: Vec<(String, f64)> = best
            .into_iter()
            .map(|(n, s)| (self.graph[n].name.clone(), s))
            .collect();
        out.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
        out
    }

    /// The node index of `tool`.
    pub(crate) fn ix(&self, tool: &str) -> Option<NodeIndex> {
        self.index.get(tool).copied()
    }

    /// A tool's call counts `(calls, successes)`.
    pub fn calls(&self, tool: &str) -> Option<(i64, i64)> {
        self.ix(tool).map(|ix| {
            let n = &self.graph[ix];
            (n.calls, n.successes)
        })
    }
}
