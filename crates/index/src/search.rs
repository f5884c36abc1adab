//! Hybrid search: BM25 and vector rankings fused with weighted reciprocal rank fusion. A long
//! query (a bug report) adds rankings of its own ([`plan`]): the BM25 ranking of its focused
//! sub-query, the chunks of the files its paths and stack frames name, and the candidates
//! whose symbol name it names.

pub mod plan;

use std::collections::HashMap;

use serde::Serialize;

use crate::chunk::{Category, Chunk, ChunkId};
use crate::error::Result;
use crate::filter::SearchFilter;
use crate::index::Index;
use crate::vectors::VectorIndex;
pub use plan::QueryPlan;

/// The widest ranking a filtered search takes before giving up on filling its limit.
pub const MAX_FILTERED_CANDIDATES: usize = 12_800;

/// Which rankings to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// BM25 and vectors (vectors only when an embedder and embeddings exist).
    #[default]
    Hybrid,
    /// BM25 only.
    Bm25,
    /// Vectors only.
    Vector,
}

/// A search.
#[derive(Clone, Debug, Default)]
pub struct SearchRequest {
    /// The query text.
    pub query: String,
    /// Restrict to these categories (all when empty).
    pub categories: Vec<Category>,
    /// How many results.
    pub limit: usize,
    /// Which rankings.
    pub mode: SearchMode,
}

/// One result.
#[derive(Clone, Debug, Serialize)]
pub struct SearchHit {
    /// The chunk.
    pub chunk: Chunk,
    /// The fused score.
    pub score: f32,
    /// 1-based rank in the BM25 list, if present there.
    pub bm25_rank: Option<usize>,
    /// The BM25 score, if present in the BM25 list.
    pub bm25_score: Option<f32>,
    /// 1-based rank in the vector list, if present there.
    pub vector_rank: Option<usize>,
    /// Cosine similarity to the query, if known.
    pub cosine: Option<f32>,
}

/// Weighted reciprocal rank fusion: `score(d) = Σ wᵢ / (k + rankᵢ(d))` with 1-based ranks.
/// Returns ids by decreasing fused score (ties keep first-seen order).
pub fn rrf(lists: &[(&[ChunkId], f32)], k: f32) -> Vec<(ChunkId, f32)> {
    let mut scores: HashMap<ChunkId, (f32, usize)> = HashMap::new();
    let mut order = 0;
    for (ids, weight) in lists {
        for (rank, id) in ids.iter().enumerate() {
            let e = scores.entry(*id).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            e.0 += weight / (k + rank as f32 + 1.0);
        }
    }
    let mut out: Vec<(ChunkId, f32, usize)> =
        scores.into_iter().map(|(id, (s, o))| (id, s, o)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(id, s, _)| (id, s)).collect()
}

impl Index {
    /// Embeds a query with the attached embedder.
    pub fn embed_query(&self, query: &str) -> Result<Option<Vec<f32>>> {
        match self.embedder() {
            Some(e) => Ok(e.embed(&[query])?.into_iter().next()),
            None => Ok(None),
        }
    }

    /// Runs a search and returns hits with their chunks. A long query is embedded as
    /// `search.query.embed` says (the whole text by default).
    pub fn search(&self, req: &SearchRequest) -> Result<Vec<SearchHit>> {
        let plan = self.plan(&req.query)?;
        let qv = if req.mode == SearchMode::Bm25 {
            None
        } else {
            self.embed_query(plan.embedding_text(self.config().search.query.embed))?
        };
        let vi = match (req.mode, &qv) {
            (SearchMode::Bm25, _) | (_, None) => None,
            _ => self.vector_index()?,
        };
        self.search_planned(req, &plan, qv.as_deref(), vi.as_deref(), None)
    }

    /// Like [`Index::search`] with a precomputed query embedding.
    pub fn search_with_vector(
        &self,
        req: &SearchRequest,
        query_vector: Option<&[f32]>,
    ) -> Result<Vec<SearchHit>> {
        let vi = match (req.mode, query_vector) {
            (SearchMode::Bm25, _) | (_, None) => None,
            _ => self.vector_index()?,
        };
        self.search_in(req, query_vector, vi.as_deref())
    }

    /// Like [`Index::search_with_vector`] against an explicit vector matrix (benchmarks,
    /// experiments with other embeddings).
    pub fn search_in(
        &self,
        req: &SearchRequest,
        query_vector: Option<&[f32]>,
        vector_index: Option<&VectorIndex>,
    ) -> Result<Vec<SearchHit>> {
        self.search_filtered(req, query_vector, vector_index, None)
    }

    /// Like [`Index::search_in`], returning only chunks `filter` accepts. Both rankings are
    /// filtered before fusion, as if the index held only accepted files; when too few
    /// candidates pass, the rankings are widened (up to [`MAX_FILTERED_CANDIDATES`]).
    pub fn search_filtered(
        &self,
        req: &SearchRequest,
        query_vector: Option<&[f32]>,
        vector_index: Option<&VectorIndex>,
        filter: Option<&SearchFilter>,
    ) -> Result<Vec<SearchHit>> {
        let plan = self.plan(&req.query)?;
        self.search_planned(req, &plan, query_vector, vector_index, filter)
    }

    /// Like [`Index::search_filtered`] for a query already prepared with [`Index::plan`]
    /// (`query_vector` is the embedding of [`QueryPlan::embedding_text`]).
    pub fn search_planned(
        &self,
        req: &SearchRequest,
        plan: &QueryPlan,
        query_vector: Option<&[f32]>,
        vector_index: Option<&VectorIndex>,
        filter: Option<&SearchFilter>,
    ) -> Result<Vec<SearchHit>> {
        let filter = filter.filter(|f| !f.accepts_all());
        let cfg = &self.config().search;
        let long = plan.is_long();
        let mut n = cfg.candidates.max(req.limit);
        loop {
            let mut rankings = Rankings::default();
            if req.mode != SearchMode::Vector {
                rankings.bm25 = self.bm25.search(&plan.text, &req.categories, n)?;
                if long {
                    rankings.focused =
                        ids(self
                            .bm25
                            .search(&plan.analysis.focused, &req.categories, n)?);
                    rankings.paths = plan.path_chunks.clone();
                }
            }
            rankings.vectors = match (req.mode, query_vector, vector_index) {
                (SearchMode::Bm25, _, _) | (_, None, _) | (_, _, None) => Vec::new(),
                (_, Some(q), Some(vi)) => vi.search(q, &req.categories, n),
            };
            let exhausted = rankings.bm25.len() < n && rankings.vectors.len() < n;
            let mut loaded: HashMap<ChunkId, Chunk> = HashMap::new();
            if filter.is_some() || long {
                let mut all = rankings.all_ids();
                all.sort_unstable();
                all.dedup();
                loaded = self
                    .chunks(&all)?
                    .into_iter()
                    .filter(|c| {
                        (req.categories.is_empty() || req.categories.contains(&c.category))
                            && filter.is_none_or(|f| f.accepts(c))
                    })
                    .map(|c| (c.id, c))
                    .collect();
                rankings.retain(|id| loaded.contains_key(id));
                if filter.is_some()
                    && loaded.len() < req.limit
                    && !exhausted
                    && n < MAX_FILTERED_CANDIDATES
                {
                    n = (n * 4).min(MAX_FILTERED_CANDIDATES);
                    continue;
                }
            }
            if long {
                let order: Vec<ChunkId> = rankings
                    .focused
                    .iter()
                    .chain(rankings.bm25.iter().map(|x| &x.0))
                    .chain(rankings.vectors.iter().map(|x| &x.0))
                    .copied()
                    .collect();
                rankings.names = plan::name_matches(&plan.analysis, &order, &loaded);
            }
            return self.fuse(req, &rankings, loaded);
        }
    }

    /// Fuses the rankings and attaches the chunks (from `loaded`, else the database).
    fn fuse(
        &self,
        req: &SearchRequest,
        r: &Rankings,
        mut loaded: HashMap<ChunkId, Chunk>,
    ) -> Result<Vec<SearchHit>> {
        let cfg = &self.config().search;
        let bm25_ids = ids(r.bm25.clone());
        let vec_ids = ids(r.vectors.clone());
        let q = &cfg.query;
        let fused = rrf(
            &[
                (&bm25_ids, cfg.bm25_weight),
                (&vec_ids, cfg.vector_weight),
                (&r.focused, q.focused_weight),
                (&r.paths, q.path_weight),
                (&r.names, q.name_weight),
            ],
            cfg.rrf_k,
        );
        let top: Vec<(ChunkId, f32)> = fused.into_iter().take(req.limit).collect();
        let missing: Vec<ChunkId> = top
            .iter()
            .map(|x| x.0)
            .filter(|id| !loaded.contains_key(id))
            .collect();
        loaded.extend(self.chunks(&missing)?.into_iter().map(|c| (c.id, c)));
        let cos: HashMap<ChunkId, f32> = r.vectors.iter().copied().collect();
        let mut out = Vec::with_capacity(top.len());
        for (id, score) in top {
            if let Some(chunk) = loaded.remove(&id) {
                out.push(SearchHit {
                    chunk,
                    score,
                    bm25_rank: bm25_ids.iter().position(|x| *x == id).map(|p| p + 1),
                    bm25_score: r.bm25.iter().find(|x| x.0 == id).map(|x| x.1),
                    vector_rank: vec_ids.iter().position(|x| *x == id).map(|p| p + 1),
                    cosine: cos.get(&id).copied(),
                });
            }
        }
        Ok(out)
    }
}

/// The rankings fused for one search: the whole text's BM25 and vector rankings, and for a
/// long query the focused sub-query's BM25 ranking, the named files' chunks and the
/// candidates whose names the query names.
#[derive(Default)]
struct Rankings {
    bm25: Vec<(ChunkId, f32)>,
    vectors: Vec<(ChunkId, f32)>,
    focused: Vec<ChunkId>,
    paths: Vec<ChunkId>,
    names: Vec<ChunkId>,
}

impl Rankings {
    fn all_ids(&self) -> Vec<ChunkId> {
        self.bm25
            .iter()
            .chain(&self.vectors)
            .map(|x| x.0)
            .chain(self.focused.iter().chain(&self.paths).copied())
            .collect()
    }

    fn retain(&mut self, keep: impl Fn(&ChunkId) -> bool) {
        self.bm25.retain(|x| keep(&x.0));
        self.vectors.retain(|x| keep(&x.0));
        self.focused.retain(&keep);
        self.paths.retain(&keep);
    }
}

fn ids(scored: Vec<(ChunkId, f32)>) -> Vec<ChunkId> {
    scored.into_iter().map(|x| x.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_rewards_agreement_and_respects_weights() {
        let a = [ChunkId(1), ChunkId(2), ChunkId(3)];
        let b = [ChunkId(3), ChunkId(4)];
        let fused = rrf(&[(&a, 1.0), (&b, 1.0)], 60.0);
        // 3 is in both lists, so it wins despite rank 3 in `a`.
        assert_eq!(fused[0].0, ChunkId(3));
        assert!((fused[0].1 - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-6);
        assert_eq!(fused[1].0, ChunkId(1));
        // With the second list weighted to zero, the first list's order is kept.
        let only_a = rrf(&[(&a, 1.0), (&b, 0.0)], 60.0);
        let ids: Vec<i64> = only_a.iter().take(3).map(|x| x.0.0).collect();
        assert_eq!(ids, [1, 2, 3]);
    }
}
