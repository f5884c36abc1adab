//! [`ToolCatalog`]: the tools an agent could be offered, searched by what the user asked,
//! and the selection of those that fit a token budget (docs/tools.md, "Tool-schema budget").
//!
//! # Fusion
//!
//! A query scores each tool from three signals, each scaled to `[0, 1]`:
//!
//! * **lexical**: BM25 over the tool's name (split at `_`, `-` and `camelCase`; counted
//!   twice, a name says more than a sentence), server, description, and its input schema's
//!   property names and descriptions; divided by the best tool's BM25 for the query;
//! * **semantic** (with an embedder): the cosine between the query's and the tool's
//!   embeddings, clipped at 0;
//! * **prior**: the tool's PageRank in the learned [`ToolGraph`], divided by the highest.
//!
//! `score = 0.55 × lexical + 0.35 × semantic + 0.10 × prior` with an embedder, `0.90 ×
//! lexical + 0.10 × prior` without. Only tools with evidence for the query are returned:
//! some lexical match, or a cosine of at least 0.30. The prior only orders tools that match
//! about equally; it never brings in a tool by itself.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use trellis_index::Embedder;
use trellis_store::{CachedEmbedding, ToolGraphStore, ToolNodeUpsert};
use xxhash_rust::xxh3::xxh3_64;

use crate::error::Result;
use crate::graph::ToolGraph;
use crate::lexical::{Bm25, terms};

const W_LEXICAL: f64 = 0.55;
const W_SEMANTIC: f64 = 0.35;
const W_PRIOR: f64 = 0.10;
/// The lexical weight without an embedder (the semantic weight moves to it).
const W_LEXICAL_ALONE: f64 = 0.90;
/// The least cosine that counts as evidence on its own.
const MIN_COSINE: f64 = 0.30;

/// A tool as the catalog knows it (the agent layer converts its tool specs into these).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolEntry {
    /// The name the model calls it by.
    pub name: String,
    /// The MCP server it comes from, if any.
    pub server: Option<String>,
    /// Its description.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: serde_json::Value,
}

/// A search result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hit {
    pub(crate) name: String,
    pub(crate) score: f64,
}

/// The tools that fit a budget.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Selection {
    /// The tools to offer: pinned ones first, then by score.
    pub chosen: Vec<String>,
    /// Tokens the chosen tools take.
    pub used_tokens: usize,
    /// Tokens every tool of the catalog would take.
    pub total_tokens_all_tools: usize,
    /// Tools of the catalog not chosen.
    pub left_out: usize,
}

/// Embeddings of the catalog's tools, by entry.
struct Semantic {
    embedder: Arc<dyn Embedder>,
    vectors: Vec<Vec<f32>>,
}

/// A searchable list of tools.
pub struct ToolCatalog {
    entries: Vec<ToolEntry>,
    by_name: HashMap<String, usize>,
    bm25: Bm25,
    semantic: Option<Semantic>,
    prior: Vec<f64>,
}

impl std::fmt::Debug for ToolCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCatalog")
            .field("tools", &self.entries.len())
            .field("embedder", &self.semantic.as_ref().map(|s| s.embedder.id()))
            .finish_non_exhaustive()
    }
}

impl ToolCatalog {
    /// A catalog of `entries` (a later entry with a name seen before is dropped), searched
    /// lexically until [`ToolCatalog::with_embedder`] adds embeddings.
    pub fn new(entries: Vec<ToolEntry>) -> Self {
        let mut seen = HashSet::new();
        let entries: Vec<ToolEntry> = entries
            .into_iter()
            .filter(|e| seen.insert(e.name.clone()))
            .collect();
        let docs: Vec<Vec<String>> = entries.iter().map(document).collect();
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Self {
            prior: vec![0.0; entries.len()],
            bm25: Bm25::new(&docs),
            entries,
            by_name,
            semantic: None,
        }
    }

    /// Adds semantic search: every tool's text is embedded, reusing the vectors cached in
    /// `store` under the same embedder id and text, and caching the new ones there.
    pub fn with_embedder(
        mut self,
        embedder: Arc<dyn Embedder>,
        store: Option<&dyn ToolGraphStore>,
    ) -> Result<Self> {
        let id = embedder.id();
        let texts: Vec<String> = self.entries.iter().map(embedding_text).collect();
        let keys: Vec<String> = texts
            .iter()
            .map(|t| format!("{id}#{:016x}", xxh3_64(t.as_bytes())))
            .collect();
        let mut cached: HashMap<String, CachedEmbedding> = match store {
            Some(s) => s
                .tool_embeddings()?
                .into_iter()
                .map(|c| (c.tool.clone(), c))
                .collect(),
            None => HashMap::new(),
        };
        let mut vectors: Vec<Option<Vec<f32>>> = self
            .entries
            .iter()
            .zip(&keys)
            .map(|(e, k)| {
                cached
                    .remove(&e.name)
                    .filter(|c| &c.embedder == k && c.vector.len() == embedder.dim())
                    .map(|c| c.vector)
            })
            .collect();
        let missing: Vec<usize> = (0..vectors.len())
            .filter(|i| vectors[*i].is_none())
            .collect();
        if !missing.is_empty() {
            let inputs: Vec<&str> = missing.iter().map(|i| texts[*i].as_str()).collect();
            let fresh = embedder.embed(&inputs)?;
            let mut save = Vec::with_capacity(fresh.len());
            for (i, v) in missing.iter().zip(fresh) {
                save.push(CachedEmbedding {
                    tool: self.entries[*i].name.clone(),
                    embedder: keys[*i].clone(),
                    vector: v.clone(),
                });
                vectors[*i] = Some(v);
            }
            if let Some(store) = store {
                store.set_tool_embeddings(save)?;
            }
        }
        self.semantic = Some(Semantic {
            embedder,
            vectors: vectors.into_iter().map(Option::unwrap_or_default).collect(),
        });
        Ok(self)
    }

    /// The catalog callers rank tools with: `entries`, fused with `embedder`'s vectors when
    /// there is one (cached in `store` when given; on an embedding error, logged, lexical
    /// only), and `ranks` (tool → PageRank) as the prior when not empty.
    pub fn hybrid(
        entries: Vec<ToolEntry>,
        embedder: Option<Arc<dyn Embedder>>,
        store: Option<&dyn ToolGraphStore>,
        ranks: &std::collections::BTreeMap<String, f64>,
    ) -> Self {
        let mut catalog = match embedder {
            Some(e) => Self::new(entries.clone())
                .with_embedder(e, store)
                .unwrap_or_else(|err| {
                    tracing::warn!(error = %err, "tool embeddings unavailable; lexical ranking");
                    Self::new(entries)
                }),
            None => Self::new(entries),
        };
        if !ranks.is_empty() {
            catalog.set_prior_ranks(ranks);
        }
        catalog
    }

    /// Uses `graph`'s PageRank as the search prior (call again after the graph learned).
    pub fn set_graph_prior(&mut self, graph: &ToolGraph) -> Result<()> {
        self.set_prior_ranks(&graph.pagerank()?);
        Ok(())
    }

    /// Uses `ranks` (tool → PageRank, as [`ToolGraph::pagerank`] gives them) as the search
    /// prior; tools without a rank get none.
    pub fn set_prior_ranks(&mut self, ranks: &std::collections::BTreeMap<String, f64>) {
        let max = ranks.values().copied().fold(0.0, f64::max);
        self.prior = self
            .entries
            .iter()
            .map(|e| match ranks.get(&e.name) {
                Some(r) if max > 0.0 => r / max,
                _ => 0.0,
            })
            .collect();
    }

    /// Stores every tool's server and description (for the graph's nodes and exports).
    pub fn sync_to_store(&self, store: &dyn ToolGraphStore) -> Result<()> {
        store.upsert_tool_nodes(
            self.entries
                .iter()
                .map(|e| ToolNodeUpsert {
                    tool: e.name.clone(),
                    server: e.server.clone(),
                    description: e.description.clone(),
                })
                .collect(),
        )?;
        Ok(())
    }

    /// The tools, in the order given.
    pub fn entries(&self) -> &[ToolEntry] {
        &self.entries
    }

    /// The PageRank prior of entry `i` (0 without a graph).
    pub(crate) fn prior_of(&self, i: usize) -> f64 {
        self.prior.get(i).copied().unwrap_or(0.0)
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.by_name.get(name).map(|i| &self.entries[*i])
    }

    /// The `k` tools that best match `query`, best first, with their fused score in
    /// `[0, 1]` (see the module docs).
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<(String, f64)>> {
        Ok(self
            .hits(query, k)?
            .into_iter()
            .map(|h| (h.name, h.score))
            .collect())
    }

    pub(crate) fn hits(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let q = terms(query);
        let lexical = self.bm25.score(&q);
        let best = lexical.iter().copied().fold(0.0, f64::max);
        let cosines = match &self.semantic {
            Some(s) if !query.trim().is_empty() => {
                let qv = s.embedder.embed(&[query])?;
                let qv = qv.first().cloned().unwrap_or_default();
                Some(s.vectors.iter().map(|v| cosine(&qv, v)).collect::<Vec<_>>())
            }
            _ => None,
        };
        let mut hits: Vec<Hit> = (0..self.entries.len())
            .filter_map(|i| {
                let lex = if best > 0.0 { lexical[i] / best } else { 0.0 };
                let sem = cosines.as_ref().map(|c| c[i].max(0.0));
                let evidence = lexical[i] > 0.0 || sem.is_some_and(|s| s >= MIN_COSINE);
                if !evidence {
                    return None;
                }
                let score = match sem {
                    Some(s) => W_LEXICAL * lex + W_SEMANTIC * s + W_PRIOR * self.prior[i],
                    None => W_LEXICAL_ALONE * lex + W_PRIOR * self.prior[i],
                };
                Some(Hit {
                    name: self.entries[i].name.clone(),
                    score,
                })
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.name.cmp(&b.name))
        });
        hits.truncate(k);
        Ok(hits)
    }

    /// The share of `query`'s terms found in some catalog tool that `tools` contain between
    /// them (1 when no term is found anywhere).
    pub(crate) fn term_coverage(&self, query: &str, tools: &[String]) -> f64 {
        let mut q = terms(query);
        q.sort();
        q.dedup();
        let docs: Vec<usize> = tools
            .iter()
            .filter_map(|t| self.by_name.get(t).copied())
            .collect();
        let known: Vec<&String> = q.iter().filter(|t| self.bm25.known(t)).collect();
        if known.is_empty() {
            return 1.0;
        }
        let covered = known
            .iter()
            .filter(|t| docs.iter().any(|d| self.bm25.contains(t, *d)))
            .count();
        covered as f64 / known.len() as f64
    }

    /// The tools to offer for `query` within `budget_tokens`: first the `always` tools that
    /// exist (in that order; `search_tools`, say), then the matching tools by score, each
    /// taken when it still fits (a tool too large is skipped and smaller ones after it may
    /// still fit). The budget is never exceeded, not even by a pinned tool.
    pub fn select_within_budget(
        &self,
        query: &str,
        budget_tokens: usize,
        count_tokens: &dyn Fn(&ToolEntry) -> usize,
        always: &[&str],
    ) -> Result<Selection> {
        let costs: Vec<usize> = self.entries.iter().map(count_tokens).collect();
        let total = costs.iter().sum();
        let ranked = self.hits(query, self.entries.len())?;
        let order = always
            .iter()
            .filter_map(|n| self.by_name.get(*n).copied())
            .chain(
                ranked
                    .iter()
                    .filter_map(|h| self.by_name.get(&h.name).copied()),
            );
        let mut taken = HashSet::new();
        let mut chosen = Vec::new();
        let mut used = 0usize;
        for i in order {
            if taken.contains(&i) {
                continue;
            }
            match used.checked_add(costs[i]) {
                Some(next) if next <= budget_tokens => {
                    used = next;
                    taken.insert(i);
                    chosen.push(self.entries[i].name.clone());
                }
                _ => {}
            }
        }
        Ok(Selection {
            left_out: self.entries.len() - chosen.len(),
            chosen,
            used_tokens: used,
            total_tokens_all_tools: total,
        })
    }
}

/// The BM25 document of a tool: name twice, server, description, schema properties.
fn document(e: &ToolEntry) -> Vec<String> {
    let mut doc = terms(&e.name);
    doc.extend(terms(&e.name));
    if let Some(s) = &e.server {
        doc.extend(terms(s));
    }
    doc.extend(terms(&e.description));
    let mut schema = String::new();
    schema_text(&e.input_schema, &mut schema, 0);
    doc.extend(terms(&schema));
    doc
}

/// What is embedded for a tool: its name, description and property names.
fn embedding_text(e: &ToolEntry) -> String {
    let mut schema = String::new();
    schema_text(&e.input_schema, &mut schema, 0);
    format!("{}: {}\n{}", e.name, e.description, schema.trim())
}

/// Appends the property names and descriptions of a JSON Schema (nested ones too, a few
/// levels deep).
fn schema_text(schema: &serde_json::Value, out: &mut String, depth: usize) {
    if depth > 4 {
        return;
    }
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(props) = obj.get("properties").and_then(|p| p.as_object()) {
        for (name, prop) in props {
            out.push_str(name);
            out.push(' ');
            if let Some(d) = prop.get("description").and_then(|d| d.as_str()) {
                out.push_str(d);
                out.push(' ');
            }
            schema_text(prop, out, depth + 1);
        }
    }
    if let Some(items) = obj.get("items") {
        schema_text(items, out, depth + 1);
    }
}

/// Cosine similarity (the embedder returns unit vectors, but a cached one might not be).
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}
