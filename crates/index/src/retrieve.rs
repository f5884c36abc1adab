//! Context fusion (docs/retrieval.md, "Context fusion"): per-source hybrid retrieval driven by a
//! [`RetrievalScope`] (the part of a workflow's retrieval strategy the index reads),
//! reranking, exact and semantic deduplication, a grounding check against the workspace, and
//! packing into a token budget, with attribution on every item.
//!
//! Reranking: each source's hybrid candidates are scored by the learned ranker shipped with the
//! binary ([`crate::rank`]; `index.search.rerank = "blend"` restores the hand-weighted blend
//! of the fused rank and the embedding cosine), then weighted by the source's priority and the
//! scope's hints (see docs/retrieval.md).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use crate::analyze::join;
use crate::chunk::{Category, Chunk, ChunkId, ChunkKind, estimate_tokens};
use crate::error::Result;
use crate::filter::SearchFilter;
pub use crate::filter::is_test_path;
use crate::index::Index;
use crate::query::QueryAnalysis;
use crate::rank;
use crate::rerank::{RerankReport, Reranked};
use crate::search::{QueryPlan, SearchHit, SearchMode, SearchRequest};
use crate::strategy::{
    ContextSource, DEFAULT_TOKEN_BUDGET, Priority, RetrievalHints, RetrievalScope,
    source_categories,
};
use crate::vectors::{VectorIndex, dot};

/// A retrieval for one stage.
#[derive(Clone, Debug)]
pub struct RetrievalRequest<'a> {
    /// The task or question.
    pub query: String,
    /// What to search: the sources, AST on or off, the hints.
    pub scope: &'a RetrievalScope,
    /// The stage (name or id) the sources' conditions are checked against
    /// (`trigger_stages`, `HIGH_if_security_stage`); without one only unconditional sources
    /// are searched.
    pub stage: Option<String>,
    /// The token budget (default [`DEFAULT_TOKEN_BUDGET`]; the retrieval agent gives each
    /// stage its budget from the workflow's strategy).
    pub budget_tokens: Option<usize>,
    /// Ranked chunks per source before deduplication and packing (default: the
    /// configuration's `search.limit`, 50).
    pub candidates: Option<usize>,
}

/// Where a context item comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attribution {
    /// Path relative to the workspace root.
    pub path: String,
    /// First line (1-based).
    pub start_line: u32,
    /// Last line (1-based, inclusive).
    pub end_line: u32,
    /// Symbol id (qualified name) for code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Section path for documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
}

/// One packed piece of context.
#[derive(Clone, Debug, Serialize)]
pub struct ContextItem {
    /// The source that found it (`codebase_semantic_search`, …).
    pub source: String,
    /// The source's priority.
    pub priority: Priority,
    /// Where it is.
    pub attribution: Attribution,
    /// What it is.
    pub kind: ChunkKind,
    /// Which corpus.
    pub category: Category,
    /// The signature (code).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub signature: String,
    /// The text, verified against the workspace.
    pub text: String,
    /// Estimated tokens.
    pub tokens: usize,
    /// Final score.
    pub score: f32,
    /// Cosine between query and chunk embeddings, when both exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cosine: Option<f32>,
    /// The rerank endpoint's score, when it scored this item (`index.rerank`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank_score: Option<f32>,
}

/// Why candidates were left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Dropped {
    /// Same text as a kept item.
    pub duplicates: usize,
    /// Inside the line range of a kept item of the same file.
    pub overlapping: usize,
    /// Cosine above the threshold with a kept item.
    pub near_duplicates: usize,
    /// The text is no longer at that location on disk.
    pub ungrounded: usize,
    /// Matched an `avoid` hint.
    pub avoided: usize,
    /// Did not fit the remaining budget.
    pub over_budget: usize,
}

/// The result of a retrieval.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ContextPack {
    /// The budget applied.
    pub budget_tokens: usize,
    /// Tokens used.
    pub used_tokens: usize,
    /// Packed items, best first.
    pub items: Vec<ContextItem>,
    /// Sources named by the strategy that the index does not serve (LSP, web, CVE).
    pub external_sources: Vec<String>,
    /// What was dropped and why.
    pub dropped: Dropped,
    /// What the query names (identifiers, paths, stack frames, errors) and whether it was
    /// searched as a long query (see [`crate::query`]).
    pub query: QueryAnalysis,
    /// What the rerank endpoint did (`index.rerank`), when one is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RerankReport>,
}

struct Candidate {
    chunk: Chunk,
    source: String,
    priority: Priority,
    score: f32,
    cosine: Option<f32>,
    rerank_score: Option<f32>,
}

fn hint_factor(hints: &RetrievalHints, c: &Chunk) -> f32 {
    let mut f = 1.0;
    for h in &hints.focus_on {
        let boost = match h.as_str() {
            "type_signatures" => matches!(
                c.decl.kind,
                ChunkKind::Class | ChunkKind::Interface | ChunkKind::Type | ChunkKind::Enum
            ),
            "dependencies" => c.decl.kind == ChunkKind::File,
            "existing_decisions" => c.category == Category::Decision,
            "rationale" | "options" | "architectural_implications" => {
                let n = c.decl.qualified_name.to_ascii_lowercase();
                [
                    "rationale",
                    "option",
                    "alternative",
                    "consequence",
                    "decision",
                    "trade",
                ]
                .iter()
                .any(|w| n.contains(w))
            }
            _ => false,
        };
        if boost {
            f *= 1.2;
        }
    }
    f
}

/// What a rerank endpoint reads of a chunk: where it is, what it is, then its text.
fn rerank_document(c: &Chunk) -> String {
    let mut d =
        String::with_capacity(c.path.len() + c.decl.qualified_name.len() + c.text.len() + 2);
    d.push_str(&c.path);
    d.push('\n');
    if c.decl.kind != ChunkKind::File && !c.decl.qualified_name.is_empty() {
        d.push_str(&c.decl.qualified_name);
        d.push('\n');
    }
    d.push_str(&c.text);
    d
}

fn avoided(hints: &RetrievalHints, c: &Chunk) -> bool {
    hints.avoid.iter().any(|a| match a.as_str() {
        "test_code" => is_test_path(&c.path),
        "deprecated_patterns" => {
            let t = c.text.to_ascii_lowercase();
            t.contains("#[deprecated") || t.contains("@deprecated") || t.contains("deprecated(")
        }
        "implementation_details" => c.category == Category::Code,
        _ => false,
    })
}

/// The scope's sources, or the default code (with AST) or docs sources when it names none.
fn sources_or_defaults(scope: &RetrievalScope) -> Vec<ContextSource> {
    if !scope.sources.is_empty() {
        return scope.sources.clone();
    }
    if scope.ast {
        RetrievalScope::code().sources
    } else {
        RetrievalScope::docs().sources
    }
}

/// Candidates best first (ties by chunk id, so the order is stable).
fn best_first(candidates: HashMap<ChunkId, Candidate>) -> Vec<Candidate> {
    let mut ranked: Vec<Candidate> = candidates.into_values().collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.chunk.id.cmp(&b.chunk.id))
    });
    ranked
}

/// The packed item of a kept candidate, with its attribution.
fn context_item(c: Candidate, tokens: usize) -> ContextItem {
    let ch = c.chunk;
    let (symbol, section) = if ch.decl.kind == ChunkKind::Section {
        (None, Some(ch.decl.qualified_name.clone()))
    } else if ch.decl.kind.is_symbol() {
        (Some(ch.decl.qualified_name.clone()), None)
    } else {
        (None, None)
    };
    ContextItem {
        source: c.source,
        priority: c.priority,
        attribution: Attribution {
            path: ch.path.clone(),
            start_line: ch.decl.start_line,
            end_line: ch.decl.end_line,
            symbol,
            section,
        },
        kind: ch.decl.kind,
        category: ch.category,
        signature: ch.decl.signature,
        text: ch.text,
        tokens,
        score: c.score,
        cosine: c.cosine,
        rerank_score: c.rerank_score,
    }
}

/// The query's embedding and the vectors to compare it with (both absent without embeddings).
struct QueryVectors {
    query: Option<Vec<f32>>,
    index: Option<Arc<VectorIndex>>,
}

/// What the packing step has kept so far, to recognise duplicates and overlaps.
#[derive(Default)]
struct Kept<'v> {
    text_hashes: HashSet<i64>,
    ranges: Vec<(String, u32, u32)>,
    vectors: Vec<&'v [f32]>,
}

impl Kept<'_> {
    /// Whether a kept item of the same file covers the chunk's line range.
    fn covers(&self, chunk: &Chunk) -> bool {
        self.ranges.iter().any(|(p, s, e)| {
            *p == chunk.path && *s <= chunk.decl.start_line && chunk.decl.end_line <= *e
        })
    }
}

impl Index {
    /// Retrieves, reranks, deduplicates, grounds and packs context for a stage.
    pub fn retrieve(&self, req: &RetrievalRequest<'_>) -> Result<ContextPack> {
        let budget = req.budget_tokens.unwrap_or(DEFAULT_TOKEN_BUDGET as usize);
        let mut pack = ContextPack {
            budget_tokens: budget,
            ..ContextPack::default()
        };
        if budget == 0 {
            return Ok(pack);
        }
        let plan = self.plan(&req.query)?;
        pack.query = plan.analysis.clone();
        let vectors = self.query_vectors(&plan)?;
        let candidates = self.gather_candidates(req, &plan, &vectors, &mut pack)?;
        let mut ranked = best_first(candidates);
        let rerank_query = plan.embedding_text(self.config().search.query.embed);
        if let Some(report) = self.rerank_candidates(rerank_query, &mut ranked) {
            pack.rerank = Some(report);
        }
        self.pack_candidates(ranked, vectors.index.as_deref(), &mut pack);
        Ok(pack)
    }

    /// Embeds the query and, when it has an embedding, opens the vector index.
    fn query_vectors(&self, plan: &QueryPlan) -> Result<QueryVectors> {
        let query = self.embed_query(plan.embedding_text(self.config().search.query.embed))?;
        let index = if query.is_some() {
            self.vector_index()?
        } else {
            None
        };
        Ok(QueryVectors { query, index })
    }

    /// Searches every source that applies in the stage and keeps, per chunk, the
    /// best-scoring candidate (relevance × source priority × hints). Sources the index does
    /// not serve are listed in `pack.external_sources`; avoided chunks are counted.
    fn gather_candidates(
        &self,
        req: &RetrievalRequest<'_>,
        plan: &QueryPlan,
        vectors: &QueryVectors,
        pack: &mut ContextPack,
    ) -> Result<HashMap<ChunkId, Candidate>> {
        let scope = req.scope;
        let ast = scope.ast;
        let n = req.candidates.unwrap_or(self.config().search.limit).max(1);
        let filter = SearchFilter::new(&self.config().search)?;
        let mut candidates: HashMap<ChunkId, Candidate> = HashMap::new();
        for src in &sources_or_defaults(scope) {
            if !src.applies_in(req.stage.as_deref()) {
                continue;
            }
            let Some(categories) = source_categories(src, ast) else {
                pack.external_sources.push(src.source.clone());
                continue;
            };
            let (priority, _) = src.priority();
            let search = SearchRequest {
                query: req.query.clone(),
                categories,
                limit: n,
                mode: SearchMode::Hybrid,
            };
            for (h, cosine, relevance) in self.scored_hits(&search, plan, vectors, &filter)? {
                if !ast && h.chunk.decl.kind.is_symbol() {
                    continue;
                }
                if avoided(&scope.hints, &h.chunk) {
                    pack.dropped.avoided += 1;
                    continue;
                }
                let score = relevance * priority.weight() * hint_factor(&scope.hints, &h.chunk);
                let keep = candidates.get(&h.chunk.id).is_none_or(|c| c.score < score);
                if keep {
                    candidates.insert(
                        h.chunk.id,
                        Candidate {
                            chunk: h.chunk,
                            source: src.source.clone(),
                            priority,
                            score,
                            cosine,
                            rerank_score: None,
                        },
                    );
                }
            }
        }
        Ok(candidates)
    }

    /// One source's hybrid hits, each with its embedding cosine (when both vectors exist) and
    /// its relevance from the configured ranker.
    fn scored_hits(
        &self,
        search: &SearchRequest,
        plan: &QueryPlan,
        vectors: &QueryVectors,
        filter: &SearchFilter,
    ) -> Result<Vec<(SearchHit, Option<f32>, f32)>> {
        let (qv, vi) = (&vectors.query, &vectors.index);
        let hits = self.search_planned(search, plan, qv.as_deref(), vi.as_deref(), Some(filter))?;
        let cosines: Vec<Option<f32>> = hits
            .iter()
            .map(|h| match (qv, vi) {
                (Some(q), Some(v)) => v.get(h.chunk.id).map(|cv| dot(q, cv)),
                _ => None,
            })
            .collect();
        let relevance = rank::relevance(self.config().search.rerank, &plan.text, &hits, &cosines)?;
        Ok(hits
            .into_iter()
            .zip(cosines)
            .zip(relevance)
            .map(|((h, cosine), relevance)| (h, cosine, relevance))
            .collect())
    }

    /// Walks the ranked candidates and packs those that are neither duplicates,
    /// overlaps nor near-duplicates of a kept item, fit the remaining budget and are still
    /// grounded in the workspace; counts every other one in `pack.dropped`.
    fn pack_candidates(
        &self,
        ranked: Vec<Candidate>,
        vi: Option<&VectorIndex>,
        pack: &mut ContextPack,
    ) {
        let dedup_cos = self.config().search.dedup_cosine;
        let mut kept = Kept::default();
        let mut files: HashMap<String, Option<String>> = HashMap::new();
        let budget = pack.budget_tokens;
        let mut remaining = budget;
        for c in ranked {
            if remaining < 16 {
                pack.dropped.over_budget += 1;
                continue;
            }
            if !kept.text_hashes.insert(c.chunk.text_hash()) {
                pack.dropped.duplicates += 1;
                continue;
            }
            if kept.covers(&c.chunk) {
                pack.dropped.overlapping += 1;
                continue;
            }
            let vec = vi.and_then(|v| v.get(c.chunk.id));
            if let Some(v) = vec
                && kept.vectors.iter().any(|k| dot(k, v) > dedup_cos)
            {
                pack.dropped.near_duplicates += 1;
                continue;
            }
            let tokens = estimate_tokens(&c.chunk.text) + estimate_tokens(&c.chunk.path) + 4;
            if tokens > remaining {
                pack.dropped.over_budget += 1;
                continue;
            }
            if !self.grounded(&c.chunk, &mut files) {
                pack.dropped.ungrounded += 1;
                continue;
            }
            remaining -= tokens;
            kept.ranges.push((
                c.chunk.path.clone(),
                c.chunk.decl.start_line,
                c.chunk.decl.end_line,
            ));
            if let Some(v) = vec {
                kept.vectors.push(v);
            }
            pack.items.push(context_item(c, tokens));
        }
        pack.used_tokens = budget - remaining;
    }

    /// Step 3 with a rerank endpoint: the best candidates in the endpoint's order (those it
    /// did not score keep their local order after them), the rest unchanged. `None` when no
    /// endpoint is configured; on failure `ranked` is left as it was.
    fn rerank_candidates(&self, query: &str, ranked: &mut Vec<Candidate>) -> Option<RerankReport> {
        let n = ranked.len().min(self.config().rerank.max_documents.max(1));
        let docs: Vec<String> = ranked[..n]
            .iter()
            .map(|c| rerank_document(&c.chunk))
            .collect();
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        let Reranked { report, scores } = self.rerank_documents(query, &refs)?;
        let Some(scored) = scores else {
            return Some(report);
        };
        let rest = ranked.split_off(n);
        let mut top: Vec<Option<Candidate>> =
            std::mem::take(ranked).into_iter().map(Some).collect();
        for (i, score) in scored {
            if let Some(mut c) = top.get_mut(i).and_then(Option::take) {
                c.rerank_score = Some(score);
                ranked.push(c);
            }
        }
        ranked.extend(top.into_iter().flatten());
        ranked.extend(rest);
        Some(report)
    }

    /// Whether the chunk's text is still at its location in the workspace.
    pub fn is_grounded(&self, chunk: &Chunk) -> bool {
        self.grounded(chunk, &mut HashMap::new())
    }

    fn grounded(&self, chunk: &Chunk, files: &mut HashMap<String, Option<String>>) -> bool {
        let content = files
            .entry(chunk.path.clone())
            .or_insert_with(|| std::fs::read_to_string(self.root().join(&chunk.path)).ok());
        let Some(content) = content else {
            return false;
        };
        let lines: Vec<&str> = content.lines().collect();
        (chunk.decl.end_line as usize) <= lines.len()
            && join(&lines, chunk.decl.start_line, chunk.decl.end_line) == chunk.text
    }
}
