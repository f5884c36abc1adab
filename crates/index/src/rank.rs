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
    threshold: Vec<f64>,
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
            let go_left = f64::from(x[self.split_feature[i]]) <= self.threshold[i];
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

    /// Every index in range (`features`: how many features the model has), so that
    /// [`Tree::eval`] cannot go out of bounds.
    fn check(&self, features: usize) -> bool {
        let n = self.split_feature.len();
        let leaves = self.leaf_value.len() as i32;
        let child_ok = |c: i32| (c >= 0 && (c as usize) < n) || (c < 0 && !c < leaves);
        self.threshold.len() == n
            && self.left_child.len() == n
            && self.right_child.len() == n
            && !self.leaf_value.is_empty()
            && self.split_feature.iter().all(|f| *f < features)
            && self.left_child.iter().all(|c| child_ok(*c))
            && self.right_child.iter().all(|c| child_ok(*c))
    }
}

/// A model file as `scripts/retrieval_train.py` writes it: trees over its own list of
/// feature names.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    /// Model format version (1).
    format: u32,
    trained_on: String,
    /// The feature names the model was trained with; its trees' `split_feature` index them.
    features: Vec<String>,
    monotone: Vec<i8>,
    trees: Vec<Tree>,
}

/// A learned ranker: a sum of regression trees over [`NAMES`].
#[derive(Clone, Debug)]
pub struct Ranker {
    /// How it was trained (data, command, date), for `docs/retrieval.md` and `--version` output.
    pub trained_on: String,
    /// Per feature of [`NAMES`]: 1 when the model was constrained never to score lower as the
    /// feature grows (evidence of relevance: ranks, scores, name matches), -1 never higher, 0
    /// free (or not read by the model).
    pub monotone: Vec<i8>,
    trees: Vec<Tree>,
}

impl Ranker {
    /// Parses and validates a model: format 1, every feature one of this build's (by name, so
    /// a model trained on fewer features — an older one, or an ablation — still loads and
    /// reads the ones it knows), every tree well formed.
    pub fn from_json(text: &str) -> Result<Self> {
        let m: ModelFile = serde_json::from_str(text)
            .map_err(|e| Error::Config(format!("learned ranker model: {e}")))?;
        if m.format != 1 {
            return Err(Error::Config(format!(
                "learned ranker model: format {} (this build reads format 1)",
                m.format
            )));
        }
        let mut index: Vec<usize> = Vec::with_capacity(m.features.len());
        for name in &m.features {
            match NAMES.iter().position(|n| n == name) {
                Some(i) if !index.contains(&i) => index.push(i),
                _ => {
                    return Err(Error::Config(format!(
                        "learned ranker model: feature `{name}` is unknown to this build (or \
                         repeated); retrain it with scripts/retrieval_train.py"
                    )));
                }
            }
        }
        if m.monotone.len() != index.len() || m.monotone.iter().any(|d| !(-1..=1).contains(d)) {
            return Err(Error::Config(format!(
                "learned ranker model: `monotone` needs {} entries of -1, 0 or 1",
                index.len()
            )));
        }
        let mut trees = m.trees;
        for (i, t) in trees.iter_mut().enumerate() {
            if !t.check(index.len()) {
                return Err(Error::Config(format!(
                    "learned ranker model: tree {i} is malformed"
                )));
            }
            // The model's feature positions become this build's.
            for f in &mut t.split_feature {
                *f = index[*f];
            }
        }
        let mut monotone = vec![0i8; COUNT];
        for (i, d) in index.iter().zip(&m.monotone) {
            monotone[*i] = *d;
        }
        Ok(Ranker {
            trained_on: m.trained_on,
            monotone,
            trees,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A model over [`NAMES`] with the given trees (JSON arrays) and no constraints.
    fn model(trees: &str) -> String {
        format!(
            r#"{{"format":1,"trained_on":"test","features":{},"monotone":{},"trees":{trees}}}"#,
            serde_json::to_string(NAMES).unwrap_or_default(),
            serde_json::to_string(&[0i8; COUNT]).unwrap_or_default(),
        )
    }

    #[test]
    fn trees_follow_their_splits_and_sum() {
        // Tree 1: feature 2 <= 0.5 ? (feature 5 <= 0.1 ? 1 : 2) : 3. Tree 2: a constant 0.25.
        let r = Ranker::from_json(&model(
            r#"[{"split_feature":[2,5],"threshold":[0.5,0.1],"left_child":[1,-1],
                 "right_child":[-3,-2],"leaf_value":[1.0,2.0,3.0]},
                {"split_feature":[],"threshold":[],"left_child":[],"right_child":[],
                 "leaf_value":[0.25]}]"#,
        ))
        .unwrap();
        let mut x = [0.0f32; COUNT];
        assert_eq!(r.score(&x), 1.25);
        x[5] = 0.2;
        assert_eq!(r.score(&x), 2.25);
        x[2] = 0.5; // `<=` goes left at the threshold itself
        assert_eq!(r.score(&x), 2.25);
        x[2] = 0.51;
        assert_eq!(r.score(&x), 3.25);
    }

    #[test]
    fn models_for_other_features_or_with_bad_trees_are_refused() {
        let other = model("[]").replacen(NAMES[0], "something_else", 1);
        let e = Ranker::from_json(&other).unwrap_err().to_string();
        assert!(e.contains("retrain"), "{e}");
        let dangling = model(
            r#"[{"split_feature":[0],"threshold":[0.5],"left_child":[-1],
                 "right_child":[-3],"leaf_value":[1.0,2.0]}]"#,
        );
        let e = Ranker::from_json(&dangling).unwrap_err().to_string();
        assert!(e.contains("tree 0 is malformed"), "{e}");
    }

    #[test]
    fn a_model_over_some_of_the_features_reads_them_by_name() {
        // Two features, in another order than NAMES: the tree splits on its feature 0,
        // which is NAMES[3].
        let json = format!(
            r#"{{"format":1,"trained_on":"test","features":["{}","{}"],"monotone":[1,0],
                "trees":[{{"split_feature":[0],"threshold":[0.5],"left_child":[-1],
                "right_child":[-2],"leaf_value":[1.0,2.0]}}]}}"#,
            NAMES[3], NAMES[1]
        );
        let r = Ranker::from_json(&json).unwrap();
        let mut x = [0.0f32; COUNT];
        x[0] = 1.0;
        assert_eq!(r.score(&x), 1.0);
        x[3] = 1.0;
        assert_eq!(r.score(&x), 2.0);
        assert_eq!(r.monotone[3], 1);
        assert_eq!(r.monotone.iter().filter(|d| **d != 0).count(), 1);
        // A split on a feature the model does not list is malformed.
        let e =
            Ranker::from_json(&json.replace(r#""split_feature":[0]"#, r#""split_feature":[2]"#))
                .unwrap_err()
                .to_string();
        assert!(e.contains("malformed"), "{e}");
    }

    /// Deterministic pseudo-random feature vectors in the ranges the features take.
    fn vectors(n: usize) -> Vec<[f32; COUNT]> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32
        };
        (0..n)
            .map(|_| {
                let mut x = [0.0f32; COUNT];
                for v in &mut x {
                    *v = next();
                }
                x
            })
            .collect()
    }

    #[test]
    fn the_shipped_model_loads_and_scores_deterministically() {
        let shipped = Ranker::shipped().unwrap();
        assert!(shipped.trees() > 0, "the shipped model has no trees");
        let again = Ranker::from_json(SHIPPED).unwrap();
        let xs = vectors(200);
        let a: Vec<f32> = xs.iter().map(|x| shipped.score(x)).collect();
        let b: Vec<f32> = xs.iter().map(|x| again.score(x)).collect();
        assert_eq!(a, b);
        // It is not a constant: the features move the score.
        assert!(a.iter().any(|s| (s - a[0]).abs() > 1e-3));
    }

    #[test]
    fn the_shipped_model_honours_its_monotone_constraints() {
        let r = Ranker::shipped().unwrap();
        let constrained: Vec<usize> = (0..COUNT).filter(|i| r.monotone[*i] != 0).collect();
        assert!(!constrained.is_empty());
        for x in vectors(300) {
            for &f in &constrained {
                let base = r.score(&x);
                for step in [0.05f32, 0.3, 1.0] {
                    let mut y = x;
                    y[f] += step;
                    let s = r.score(&y);
                    let dir = f32::from(r.monotone[f]);
                    assert!(
                        (s - base) * dir >= -1e-5,
                        "raising {} by {step} moved the score {base} -> {s}",
                        NAMES[f]
                    );
                }
            }
        }
    }
}
