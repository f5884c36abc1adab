//! The features the learned ranker reads, computed from what a hybrid search already has for
//! each candidate: its fused rank and score, its BM25 rank and score, its vector rank and
//! cosine, how the query's words and identifiers match its path, name and qualified name, its
//! kind and category, and aggregates over the candidates of the same file.
//!
//! The same function computes them for training (`examples/retrieval_eval --dump-features`)
//! and at query time, so the model sees at query time exactly what it was trained on.

use std::collections::{HashMap, HashSet};

use crate::chunk::{Category, ChunkKind};
use crate::search::SearchHit;
use crate::tokenize::{for_each_token, query_terms};

/// Feature names, in the order of [`features`]' vectors; the shipped model lists the same
/// names and is refused if they differ.
pub const NAMES: &[&str] = &[
    "fused_score_norm",
    "fused_inv_rank",
    "bm25_inv_rank",
    "bm25_score_norm",
    "vector_inv_rank",
    "cosine",
    "cosine_gap",
    "name_in_query",
    "name_terms_matched",
    "qualified_parts_matched",
    "path_terms_matched",
    "file_stem_in_query",
    "file_name_in_query",
    "query_idents_in_text",
    "kind_file",
    "kind_function",
    "kind_type",
    "kind_other",
    "category_code",
    "file_candidates",
    "file_best_fused",
    "file_best_cosine",
    "file_inv_rank",
    "file_query_terms_matched",
    "lines_log",
    "path_depth",
    "query_terms_log",
];

/// The number of features.
pub const COUNT: usize = NAMES.len();

/// One candidate as the ranker sees it.
#[derive(Clone, Copy, Debug)]
pub struct RankInput<'a> {
    /// The hybrid search hit (fused score, BM25 and vector ranks, the chunk).
    pub hit: &'a SearchHit,
    /// The cosine between the query and the chunk embeddings, when both exist.
    pub cosine: Option<f32>,
}

/// Lower-cased tokens of `text` (words and their identifier parts).
fn tokens(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for_each_token(text, |t, _, _, _| {
        out.insert(t.to_string());
    });
    out
}

/// Words of the query that look like identifiers: `snake_case`, `camelCase`, `Type::path`,
/// `a.b` (kept whole, lower-cased), at least 4 characters.
fn identifiers(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | ':' | '.'))) {
        let w = word.trim_matches(|c: char| matches!(c, '.' | ':'));
        if w.len() < 4 {
            continue;
        }
        let inner_upper = w.chars().skip(1).any(|c| c.is_uppercase());
        let has_lower = w.chars().any(|c| c.is_lowercase());
        let ident = w.contains('_') || w.contains("::") || (inner_upper && has_lower);
        if ident {
            let lw = w.to_lowercase();
            if !out.contains(&lw) {
                out.push(lw);
            }
        }
    }
    out
}

fn frac(matched: usize, of: usize) -> f32 {
    if of == 0 {
        0.0
    } else {
        matched as f32 / of as f32
    }
}

fn inv_rank(rank: Option<usize>) -> f32 {
    rank.map_or(0.0, |r| 1.0 / r as f32)
}

/// Features of every candidate of one query, `inputs` in fused-rank order (best first).
pub fn features(query: &str, inputs: &[RankInput<'_>]) -> Vec<[f32; COUNT]> {
    let terms: HashSet<String> = query_terms(query).into_iter().collect();
    let query_tokens = tokens(query);
    let query_lower = query.to_lowercase();
    let idents = identifiers(query);
    let max_fused = inputs
        .iter()
        .map(|i| i.hit.score)
        .fold(f32::EPSILON, f32::max);
    let max_bm25 = inputs
        .iter()
        .filter_map(|i| i.hit.bm25_score)
        .fold(f32::EPSILON, f32::max);
    let max_cos = inputs
        .iter()
        .filter_map(|i| i.cosine)
        .fold(f32::NEG_INFINITY, f32::max);
    // Per file: candidate count, best fused score, best cosine, and the file's rank by its
    // best fused score (files in first-appearance order, since inputs are in fused order).
    let mut files: HashMap<&str, (usize, f32, f32, usize)> = HashMap::new();
    for i in inputs {
        let next = files.len() + 1;
        let e = files
            .entry(i.hit.chunk.path.as_str())
            .or_insert((0, 0.0, -1.0, next));
        e.0 += 1;
        e.1 = e.1.max(i.hit.score / max_fused);
        e.2 = e.2.max(i.cosine.unwrap_or(-1.0));
    }
    let mut path_terms: HashMap<&str, usize> = HashMap::new();
    for i in inputs {
        let path = i.hit.chunk.path.as_str();
        path_terms
            .entry(path)
            .or_insert_with(|| tokens(path).intersection(&terms).count());
    }
    let n_terms = terms.len().max(1) as f32;
    inputs
        .iter()
        .enumerate()
        .map(|(pos, i)| {
            let c = &i.hit.chunk;
            let file = files
                .get(c.path.as_str())
                .copied()
                .unwrap_or((1, 0.0, -1.0, 1));
            let file_name = c.path.rsplit('/').next().unwrap_or(&c.path).to_lowercase();
            let stem = file_name.split('.').next().unwrap_or("").to_string();
            let name = c.decl.name.to_lowercase();
            let name_tokens = tokens(&c.decl.name);
            let qualified_parts: Vec<String> = c
                .decl
                .qualified_name
                .split([':', '.', '>', '/', '#'])
                .map(|s| s.trim().to_lowercase())
                .filter(|s| s.len() >= 3)
                .collect();
            let text_lower = if idents.is_empty() {
                String::new()
            } else {
                c.text.to_lowercase()
            };
            let cosine = i.cosine.unwrap_or(0.0);
            let path_matched = path_terms.get(c.path.as_str()).copied().unwrap_or(0);
            let kind_function = matches!(c.decl.kind, ChunkKind::Function | ChunkKind::Method);
            let kind_type = matches!(
                c.decl.kind,
                ChunkKind::Class | ChunkKind::Interface | ChunkKind::Type | ChunkKind::Enum
            );
            [
                i.hit.score / max_fused,
                1.0 / (pos + 1) as f32,
                inv_rank(i.hit.bm25_rank),
                i.hit.bm25_score.map_or(0.0, |s| s / max_bm25),
                inv_rank(i.hit.vector_rank),
                cosine,
                i.cosine.map_or(1.0, |c| max_cos - c),
                f32::from(u8::from(name.len() >= 3 && query_tokens.contains(&name))),
                frac(name_tokens.intersection(&terms).count(), name_tokens.len()),
                frac(
                    qualified_parts
                        .iter()
                        .filter(|p| query_tokens.contains(*p))
                        .count(),
                    qualified_parts.len(),
                ),
                path_matched as f32 / n_terms,
                f32::from(u8::from(stem.len() >= 3 && query_tokens.contains(&stem))),
                f32::from(u8::from(
                    file_name.contains('.') && query_lower.contains(&file_name),
                )),
                (idents.iter().filter(|x| text_lower.contains(*x)).count() as f32).ln_1p(),
                f32::from(u8::from(c.decl.kind == ChunkKind::File)),
                f32::from(u8::from(kind_function)),
                f32::from(u8::from(kind_type)),
                f32::from(u8::from(
                    !kind_function && !kind_type && c.decl.kind != ChunkKind::File,
                )),
                f32::from(u8::from(c.category == Category::Code)),
                (file.0 as f32).ln_1p(),
                file.1,
                file.2,
                1.0 / file.3 as f32,
                (path_matched as f32).ln_1p(),
                ((c.decl.end_line.saturating_sub(c.decl.start_line) + 1) as f32).ln(),
                c.path.matches('/').count() as f32,
                n_terms.ln_1p(),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_the_words_shaped_like_code() {
        let ids = identifiers("Fix parse_config panic in HttpClient::send when `a.b` is Empty");
        assert_eq!(ids, ["parse_config", "httpclient::send"]);
    }
}
