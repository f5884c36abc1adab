mod common;
mod docs;
mod embed_cache;
#[cfg(feature = "embed")]
mod embedding;
mod extract;
mod incremental;
mod long_query;
mod rank;
mod rerank;
mod retrieve;
