//! Test helpers: temporary workspaces and a deterministic embedder.

use std::path::Path;

use trellis_index::vectors::normalize;
use trellis_index::{Embedder, Index, IndexConfig, UpdateOptions, UpdateStats};

pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

pub fn open(root: &Path) -> Index {
    Index::open(root, IndexConfig::default()).unwrap()
}

pub fn update(index: &mut Index) -> UpdateStats {
    index.update(&UpdateOptions::default()).unwrap()
}

/// Bag-of-words hashing embedder: texts sharing most words get cosine close to 1. A test
/// double for the dedup and rerank logic only; the real model is tested in `embedding.rs`.
pub struct HashEmbedder;

impl Embedder for HashEmbedder {
    fn id(&self) -> String {
        "test:hash:64".into()
    }
    fn dim(&self) -> usize {
        64
    }
    fn embed(&self, texts: &[&str]) -> trellis_index::Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 64];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = w
                        .bytes()
                        .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32));
                    v[(h % 64) as usize] += 1.0;
                }
                normalize(&mut v);
                v
            })
            .collect())
    }
}
