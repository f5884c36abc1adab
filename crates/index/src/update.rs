//! What an index update takes and reports: which files it covers, its options, progress
//! reports and statistics ([`Index::update`](crate::Index::update)).

use std::sync::atomic::AtomicBool;

use serde::Serialize;

/// Updates of at least this many changed files make everything searchable first (the text
/// pass) and extract symbols behind it; smaller ones parse directly (see
/// [`UpdateOptions::text_first`]).
pub const TEXT_FIRST_MIN_FILES: usize = 1000;

/// Which files an update covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every indexable file: code parsed into symbols, documents into sections.
    #[default]
    All,
    /// Documents only (Markdown, reStructuredText, text); code files are neither parsed nor
    /// touched — what document workflows (`ast_parsing: false`) need.
    Documents,
}

/// A progress report during an update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The walk found this many candidate files.
    Scanned {
        /// Files found.
        files: usize,
        /// Files whose size or modification time changed (to be read and hashed).
        stale: usize,
    },
    /// The text pass (large updates): files indexed as text so far, without their symbols.
    TextIndexed {
        /// Done.
        done: usize,
        /// Of.
        total: usize,
    },
    /// The text pass is committed: every file is searchable (code as text windows until its
    /// symbols land); symbols are extracted next.
    Searchable {
        /// Files still to parse into symbols.
        unparsed: usize,
        /// Milliseconds since the update started.
        elapsed_ms: u64,
    },
    /// Files processed so far (parsed into symbols and sections).
    Parsed {
        /// Done.
        done: usize,
        /// Of.
        total: usize,
    },
    /// Chunks embedded so far.
    Embedded {
        /// Done.
        done: u64,
        /// Of.
        total: u64,
    },
}

/// Options of [`Index::update`](crate::Index::update).
#[derive(Default)]
pub struct UpdateOptions<'a> {
    /// Which files.
    pub scope: Scope,
    /// Also compute missing embeddings (needs an embedder).
    pub embed: bool,
    /// Called with progress reports.
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
    /// Set to stop at the next batch boundary (the index stays consistent).
    pub cancel: Option<&'a AtomicBool>,
    /// Files per committed batch (default 4000; the text pass uses 3× larger batches).
    pub batch_files: Option<usize>,
    /// Whether to index changed files as text first, committed and searchable before any
    /// tree-sitter work, and then extract symbols behind it. Default: when at least
    /// [`TEXT_FIRST_MIN_FILES`] files changed.
    pub text_first: Option<bool>,
}

/// What an update did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UpdateStats {
    /// Files found by the walk.
    pub files_seen: usize,
    /// Files read, hashed and (if their content changed) re-parsed.
    pub files_read: usize,
    /// Files whose content changed and were re-parsed and re-indexed (once, also when the text
    /// pass and the symbol pass both wrote them).
    pub files_indexed: usize,
    /// Files removed from the index.
    pub files_removed: usize,
    /// Chunks written.
    pub chunks_written: usize,
    /// Embeddings computed.
    pub embedded: u64,
    /// Wall time of the walk, ms.
    pub scan_ms: u64,
    /// Wall time of reading, parsing and indexing, ms.
    pub index_ms: u64,
    /// Wall time from the start of the update until every file was searchable (the text
    /// pass committed), ms; 0 when the update had no text pass.
    pub searchable_ms: u64,
    /// Of `index_ms`: the text pass (read + hash + text windows + commit), ms.
    pub text_pass_ms: u64,
    /// Wall time of embedding, ms.
    pub embed_ms: u64,
    /// Of `index_ms`: reading, hashing and parsing (in parallel), ms.
    pub parse_ms: u64,
    /// Of `index_ms`: adding to and committing the full-text index, ms.
    pub fulltext_ms: u64,
    /// Of `index_ms`: writing the metadata database, ms.
    pub meta_ms: u64,
    /// Totals after the update.
    pub files: u64,
    /// Symbol chunks after the update.
    pub symbols: u64,
    /// Document sections after the update.
    pub sections: u64,
    /// All chunks after the update.
    pub chunks: u64,
    /// Chunks with an embedding after the update.
    pub chunks_embedded: u64,
}
