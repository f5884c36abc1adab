mod common;
mod docs;
mod embed_cache;
#[cfg(feature = "embed")]
mod embedding;
mod extract;
mod incremental;
mod rank;
mod long_query;
mod rerank;
mod retrieve;
mod strategy;
