//! Learned reranking of hybrid search candidates (docs/retrieval.md, "Learned ranking").
//!
//! A gradient-boosted tree ensemble (LightGBM lambdarank, trained offline by
//! `scripts/retrieval_train.py` on localisation queries mined from public repositories'
//! history) scores each candidate from [`features`]. The model is a small JSON file compiled
//! into the binary and evaluated here on the CPU: a few hundred comparisons per candidate.

pub mod features;

use std::sync::OnceLock;

use serde::Deserialize;

use crate::config::Rerank;
use crate::error::{Error, Result};
use crate::search::SearchHit;
pub use features::{COUNT, NAMES, RankInput};

/// The shipped model (written by `scripts/retrieval_train.py`).
const SHIPPED: &str = include_str!("rank/model.json");

/// One regression tree in LightGBM's array layout: internal node `i` sends a candidate left
/// when `feature[split_feature[i]] <= threshold[i]`; a child `c < 0` is leaf `!c`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tree {
    split_feature: Vec<usize>,
    threshold: Vec<f32>,
    left_child: Vec<i32>,
    right_child: Vec<i32>,
    leaf_value: Vec<f32>,
}

impl Tree {
    fn eval(&self, x: &[f32; COUNT]) -> f32 {
        if self.split_feature.is_empty() {
            return self.leaf_value.first().copied().unwrap_or(0.0);
        }
        let mut node = 0i32;
        // Bounded by the node count: a malformed tree cannot loop.
        for _ in 0..=self.split_feature.len() {
            let i = node as usize;
            let go_left = x[self.split_feature[i]] <= self.threshold[i];
            node = if go_left {
                self.left_child[i]
            } else {
                self.right_child[i]
            };
            if node < 0 {
                return self.leaf_value[(!node) as usize];
            }
        }
        0.0
    }

    /// Every index in range, so that [`Tree::eval`] cannot go out of bounds.
    fn check(&self) -> bool {
        let n = self.split_feature.len();
        let leaves = self.leaf_value.len() as i32;
        let child_ok = |c: i32| (c >= 0 && (c as usize) < n) || (c < 0 && !c < leaves);
        self.threshold.len() == n
            && self.left_child.len() == n
            && self.right_child.len() == n
            && !self.leaf_value.is_empty()
            && self.split_feature.iter().all(|f| *f < COUNT)
            && self.left_child.iter().all(|c| child_ok(*c))
            && self.right_child.iter().all(|c| child_ok(*c))
    }
}

/// A learned ranker: a sum of regression trees over [`NAMES`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ranker {
    /// Model format version (1).
    format: u32,
    /// How it was trained (data, command, date), for `docs/retrieval.md` and `--version` output.
    pub trained_on: String,
    /// The feature names the model was trained with, in order.
    features: Vec<String>,
    trees: Vec<Tree>,
}

impl Ranker {
    /// Parses and validates a model: format 1, the features of this build in the same order,
    /// every tree well formed.
    pub fn from_json(text: &str) -> Result<Self> {
        let r: Ranker = serde_json::from_str(text)
            .map_err(|e| Error::Config(format!("learned ranker model: {e}")))?;
        if r.format != 1 {
            return Err(Error::Config(format!(
                "learned ranker model: format {} (this build reads format 1)",
                r.format
            )));
        }
        if r.features != NAMES {
            return Err(Error::Config(
                "learned ranker model: its features differ from this build's; retrain it with \
                 scripts/retrieval_train.py"
                    .into(),
            ));
        }
        if let Some(i) = r.trees.iter().position(|t| !t.check()) {
            return Err(Error::Config(format!(
                "learned ranker model: tree {i} is malformed"
            )));
        }
        Ok(r)
    }

    /// The model compiled into this binary (parsed once).
    pub fn shipped() -> Result<&'static Ranker> {
        static MODEL: OnceLock<std::result::Result<Ranker, String>> = OnceLock::new();
        MODEL
            .get_or_init(|| Ranker::from_json(SHIPPED).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Config(e.clone()))
    }

    /// The number of trees.
    pub fn trees(&self) -> usize {
        self.trees.len()
    }

    /// The raw model score of one feature vector (higher is more relevant).
    pub fn score(&self, x: &[f32; COUNT]) -> f32 {
        self.trees.iter().map(|t| t.eval(x)).sum()
    }

    /// Relevance in `0..1` (the logistic of the raw score) of every candidate of one query,
    /// `inputs` in fused-rank order.
    pub fn rerank(&self, query: &str, inputs: &[RankInput<'_>]) -> Vec<f32> {
        features::features(query, inputs)
            .iter()
            .map(|x| 1.0 / (1.0 + (-self.score(x)).exp()))
            .collect()
    }
}

/// The relevance in `0..1` of each hit of one source's hybrid search (`hits` in fused order,
/// `cosines` beside them), by the configured reranker.
pub fn relevance(
    rerank: Rerank,
    query: &str,
    hits: &[SearchHit],
    cosines: &[Option<f32>],
) -> Result<Vec<f32>> {
    match rerank {
        Rerank::Learned => {
            let inputs: Vec<RankInput<'_>> = hits
                .iter()
                .zip(cosines)
                .map(|(hit, cosine)| RankInput {
                    hit,
                    cosine: *cosine,
                })
                .collect();
            Ok(Ranker::shipped()?.rerank(query, &inputs))
        }
        Rerank::Blend => {
            let max = hits.first().map_or(1.0, |h| h.score).max(f32::EPSILON);
            Ok(hits
                .iter()
                .zip(cosines)
                .map(|(h, cosine)| {
                    let base = h.score / max;
                    match cosine {
                        Some(c) => 0.5 * base + 0.5 * c.max(0.0),
                        None => base,
                    }
                })
                .collect())
        }
    }
}
