mod common;
mod docs;
#[cfg(feature = "embed")]
mod embedding;
mod extract;
mod incremental;
mod retrieve;
mod strategy;
