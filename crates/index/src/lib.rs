//! Workspace indexing and retrieval for Trellis.
//!
//! One index per workspace lives under `<repo>/.trellis/index/`: a SQLite metadata database
//! (files and content hashes, chunks with attribution, symbols, references), a tantivy
//! full-text index with a code-aware tokenizer, and a flat file of embeddings.
//!
//! - [`Index::update`] walks the workspace (`.gitignore`-aware, default and configured
//!   exclusions), re-parses only files whose content hash changed, in committed batches.
//! - Code is parsed with tree-sitter into symbols ([`symbols`]); documents are split into
//!   heading-scoped sections ([`docs`]); decision records and specifications are recognised.
//! - [`Index::search`] fuses BM25 and embedding rankings with reciprocal rank fusion.
//! - [`Index::retrieve`] drives retrieval from a [`RetrievalScope`] (what the index reads of a
//!   workflow's retrieval strategy: sources, AST on or off, hints):
//!   rerank (by default with the learned ranker of [`rank`]), deduplicate, ground against the
//!   workspace, pack into a token budget.
//! - [`Index::repo_map`] renders a PageRank-ranked outline; [`Index::ast_context_map`] exports
//!   functions, classes and imports as JSON.

pub mod analyze;
pub mod astmap;
mod bm25;
mod build;
pub mod chunk;
pub mod config;
pub mod docs;
pub mod embed;
mod error;
pub mod filter;
mod http;
mod index;
pub mod lang;
pub mod locate;
pub mod meta;
pub mod named;
pub mod query;
pub mod rank;
pub mod repomap;
pub mod rerank;
pub mod retrieve;
pub mod scan;
pub mod search;
pub mod source;
pub mod strategy;
pub mod symbols;
pub mod tokenize;
mod update;
pub mod vectors;

pub use astmap::{AstContextMap, Outlines};
pub use chunk::{Category, Chunk, ChunkId, ChunkKind, Declaration};
pub use config::{EmbeddingBackend, EmbeddingConfig, IndexConfig, Rerank, SearchConfig};
pub use embed::{CachedEmbedder, Embedder};
pub use error::{Error, Result};
pub use filter::{SearchFilter, TestFiles};
pub use index::{Index, SymbolQuery, index_dir};
pub use locate::Site;
pub use repomap::{RepoMap, RepoMapRequest};
pub use retrieve::{Attribution, ContextItem, ContextPack, RetrievalRequest};
pub use search::{SearchHit, SearchMode, SearchRequest};
pub use strategy::RetrievalScope;
pub use update::{Progress, Scope, TEXT_FIRST_MIN_FILES, UpdateOptions, UpdateStats};
