//! DAG suggestions: which tools an intent needs, in dependency order, how sure the learned
//! graph is about them, what to do with them, and why.
//!
//! 1. The intent is searched in the catalog (lexical, semantic, PageRank prior); the best
//!    [`HITS`] tools are the relevant ones.
//! 2. For every ordered pair of relevant tools, the shortest chain of *strong* learned edges
//!    (confidence ≥ [`STRONG_EDGE`], at most [`MAX_HOPS`] hops) joins them; every tool on
//!    such a chain is in the DAG, intermediate tools the intent did not name included.
//!    Relevant tools no strong edge connects to another are left out.
//! 3. The DAG's edges are the strong learned edges among its tools (a cycle, say `a → b` and
//!    `b → a` both learned, loses the edges petgraph's greedy feedback arc set picks); the
//!    tools are ordered topologically.
//! 4. **Confidence** is the pattern's weakest step — over the DAG's tools that have a
//!    predecessor, the least of their strongest incoming edge's confidence
//!    ([`crate::edge_confidence`]; an extra, weaker edge into a tool that is also reached
//!    by a strong one does not lower it) — times the DAG's *coverage* of the intent: the
//!    share of the intent's words (among those any catalog tool contains) that its tools
//!    contain. A pattern executed successfully 12
//!    times and covering the intent reaches 0.857, 23 times 0.92; a well-learned pattern
//!    that leaves out a tool the intent names (its edge kept failing, say) falls by the
//!    share of words left unexplained. Without any strong edge the suggestion is the best
//!    tool alone, with half its own call reliability as confidence (at most 0.5, so an
//!    unseen combination always needs an explicit workflow).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use petgraph::algo::{greedy_feedback_arc_set, toposort};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::Serialize;

use crate::catalog::ToolCatalog;
use crate::error::Result;
use crate::graph::{ToolGraph, edge_confidence};
use crate::thresholds::{Mode, Thresholds};

/// Relevant tools taken from the search.
pub const HITS: usize = 6;
/// The least confidence of an edge a suggestion follows.
pub const STRONG_EDGE: f64 = 0.5;
/// The longest chain followed between two relevant tools.
pub const MAX_HOPS: usize = 3;

/// Why a DAG was suggested: the dependency paths and PageRank scores behind it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// Each DAG edge, `"a → b"`.
    pub direct_dependencies: Vec<String>,
    /// Each pair of tools joined only through others, `"a → b → c (2 hops)"`.
    pub transitive_dependencies: Vec<String>,
    /// The DAG's tools' PageRank.
    pub page_rank_scores: BTreeMap<String, f64>,
}

/// A suggested workflow DAG.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Suggestion {
    /// The tools, in a topological order.
    pub tools: Vec<String>,
    /// Dependencies `(i, j)`: `tools[i]` runs before (and may feed) `tools[j]`; always
    /// `i < j`.
    pub edges: Vec<(usize, usize)>,
    /// How sure the learned graph is of the DAG, in `[0, 1]` (see the module docs).
    pub confidence: f64,
    /// What to do with it under the thresholds used.
    pub mode: Mode,
    /// Why these tools, in this order.
    pub explanation: Explanation,
}

/// [`suggest_dag_with`] under fresh [`Thresholds`] (speculation from 0.92).
pub fn suggest_dag(
    intent: &str,
    catalog: &ToolCatalog,
    graph: &ToolGraph,
) -> Result<Option<Suggestion>> {
    suggest_dag_with(intent, catalog, graph, &Thresholds::default())
}

/// The DAG the learned graph suggests for `intent`, or `None` when no tool matches it.
pub fn suggest_dag_with(
    intent: &str,
    catalog: &ToolCatalog,
    graph: &ToolGraph,
    thresholds: &Thresholds,
) -> Result<Option<Suggestion>> {
    let hits = catalog.hits(intent, HITS)?;
    let Some(top) = hits.first() else {
        return Ok(None);
    };
    let strong = |e: &crate::graph::EdgeStats| e.confidence >= STRONG_EDGE;

    // Tools on strong chains between relevant tools, in first-seen order.
    let mut chosen: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for a in &hits {
        for b in &hits {
            if a.name == b.name {
                continue;
            }
            let Some(p) = graph.path_where(&a.name, &b.name, strong) else {
                continue;
            };
            if p.len() - 1 > MAX_HOPS {
                continue;
            }
            for t in p {
                if seen.insert(t.clone()) {
                    chosen.push(t);
                }
            }
        }
    }

    if chosen.is_empty() {
        let (calls, ok) = graph.calls(&top.name).unwrap_or((0, 0));
        let confidence = 0.5 * edge_confidence(calls, ok);
        let explanation = Explanation {
            page_rank_scores: scores(graph, std::slice::from_ref(&top.name))?,
            ..Explanation::default()
        };
        return Ok(Some(Suggestion {
            tools: vec![top.name.clone()],
            edges: Vec::new(),
            confidence,
            mode: thresholds.mode(confidence),
            explanation,
        }));
    }

    // The DAG over the chosen tools.
    let mut dag: DiGraph<usize, f64> = DiGraph::new();
    let locals: Vec<NodeIndex> = (0..chosen.len()).map(|i| dag.add_node(i)).collect();
    for (i, a) in chosen.iter().enumerate() {
        for (j, b) in chosen.iter().enumerate() {
            if let Some(e) = graph.edge(a, b).filter(|e| i != j && strong(e)) {
                dag.add_edge(locals[i], locals[j], e.confidence);
            }
        }
    }
    let cut: Vec<_> = greedy_feedback_arc_set(&dag).map(|e| e.id()).collect();
    // Removing by descending index keeps the remaining indices valid.
    let mut cut = cut;
    cut.sort_by_key(|e| std::cmp::Reverse(e.index()));
    for e in cut {
        dag.remove_edge(e);
    }
    let order = toposort(&dag, None).unwrap_or_else(|_| dag.node_indices().collect());
    let position: HashMap<NodeIndex, usize> =
        order.iter().enumerate().map(|(p, n)| (*n, p)).collect();
    let tools: Vec<String> = order.iter().map(|n| chosen[dag[*n]].clone()).collect();
    let mut edges: Vec<(usize, usize, f64)> = dag
        .edge_references()
        .filter_map(|e| {
            Some((
                *position.get(&e.source())?,
                *position.get(&e.target())?,
                *e.weight(),
            ))
        })
        .collect();
    edges.sort_by_key(|x| (x.0, x.1));
    // Each tool's best-established way in; the weakest of those is the pattern's.
    let mut best_in = vec![f64::NAN; tools.len()];
    for &(_, j, c) in &edges {
        if best_in[j].is_nan() || c > best_in[j] {
            best_in[j] = c;
        }
    }
    let weakest = best_in
        .iter()
        .filter(|c| !c.is_nan())
        .fold(1.0_f64, |a, b| a.min(*b));
    let confidence = weakest * catalog.term_coverage(intent, &tools);

    let direct = edges
        .iter()
        .map(|&(i, j, _)| format!("{} → {}", tools[i], tools[j]))
        .collect();
    let pairs: Vec<(usize, usize)> = edges.iter().map(|&(i, j, _)| (i, j)).collect();
    let explanation = Explanation {
        direct_dependencies: direct,
        transitive_dependencies: transitive(&tools, &pairs),
        page_rank_scores: scores(graph, &tools)?,
    };
    Ok(Some(Suggestion {
        tools,
        edges: pairs,
        confidence,
        mode: thresholds.mode(confidence),
        explanation,
    }))
}

/// `"a → b → c (2 hops)"` for every pair joined in the DAG only through other tools (its
/// shortest chain, found by breadth-first search).
fn transitive(tools: &[String], edges: &[(usize, usize)]) -> Vec<String> {
    let n = tools.len();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(i, j) in edges {
        next[i].push(j);
    }
    let mut out = Vec::new();
    for s in 0..n {
        let mut parent: Vec<Option<usize>> = vec![None; n];
        let mut hops = vec![usize::MAX; n];
        hops[s] = 0;
        let mut queue = VecDeque::from([s]);
        while let Some(u) = queue.pop_front() {
            for &v in &next[u] {
                if hops[v] == usize::MAX {
                    hops[v] = hops[u] + 1;
                    parent[v] = Some(u);
                    queue.push_back(v);
                }
            }
        }
        for (t, &h) in hops.iter().enumerate() {
            if h < 2 || h == usize::MAX {
                continue;
            }
            let mut chain = vec![t];
            let mut at = t;
            while let Some(p) = parent[at] {
                chain.push(p);
                at = p;
            }
            chain.reverse();
            let names: Vec<&str> = chain.iter().map(|i| tools[*i].as_str()).collect();
            out.push(format!("{} ({h} hops)", names.join(" → ")));
        }
    }
    out
}

/// PageRank of `tools` (0 for a tool the graph has never seen).
fn scores(graph: &ToolGraph, tools: &[String]) -> Result<BTreeMap<String, f64>> {
    let ranks = graph.ranks()?;
    Ok(tools
        .iter()
        .map(|t| {
            let r = graph
                .ix(t)
                .and_then(|ix| ranks.get(ix.index()).copied())
                .unwrap_or(0.0);
            (t.clone(), r)
        })
        .collect())
}
