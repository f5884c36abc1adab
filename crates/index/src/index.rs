//! The workspace index: one per workspace under `<root>/.trellis/index/`, updated
//! incrementally by content hash, in committed batches so that an interrupted run resumes.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use crate::bm25::Bm25;
use crate::build::{self, Pass};
use crate::chunk::{Chunk, ChunkKind, text_hash};
use crate::config::IndexConfig;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::lang::Lang;
use crate::meta::{Counts, FileState, Meta};
use crate::rerank::{RemoteReranker, RerankReport, Reranked};
use crate::scan::{self, Excludes, ScannedFile};
use crate::update::{Progress, Scope, TEXT_FIRST_MIN_FILES, UpdateOptions, UpdateStats};
use crate::vectors::{VectorFile, VectorIndex};

/// A lookup of symbols (or document sections) by name, for [`Index::find_symbols`].
#[derive(Clone, Debug, Default)]
pub struct SymbolQuery {
    /// The name or qualified name.
    pub name: String,
    /// Only exact matches of `name` (else: names containing it, ignoring ASCII case).
    pub exact: bool,
    /// Only these kinds (all when empty).
    pub kinds: Vec<ChunkKind>,
    /// Only under this path prefix.
    pub path_prefix: Option<String>,
    /// At most this many.
    pub limit: usize,
}

/// Updates of at most this many files use a small full-text writer (see `Bm25::prepare`).
const SMALL_UPDATE_FILES: usize = 16;

/// Batches of the text pass are this many times [`UpdateOptions::batch_files`]: on the
/// benchmark corpus 3× (12,000 files) took ~8% less CPU to searchable than 1× and peaked at
/// 0.92 instead of 0.63 GB resident (docs/benchmarks.md).
const TEXT_BATCH_FACTOR: usize = 3;

/// A workspace index.
pub struct Index {
    root: PathBuf,
    dir: PathBuf,
    config: IndexConfig,
    excludes: Excludes,
    pub(crate) meta: Meta,
    pub(crate) bm25: Bm25,
    pub(crate) embedder: Option<Box<dyn Embedder>>,
    vectors: RwLock<Option<Arc<VectorIndex>>>,
    /// The metadata's `data_version` when this handle was opened ([`Index::is_stale`]).
    opened_version: i64,
    /// The rerank endpoint client (built on first use from `config.rerank`), or why not.
    reranker: OnceLock<std::result::Result<Option<RemoteReranker>, String>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("root", &self.root)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The index directory of a workspace.
pub fn index_dir(root: &Path) -> PathBuf {
    root.join(".trellis").join("index")
}

impl Index {
    /// Opens (creating if needed) the index of the workspace at `root`. No embedder is
    /// attached; see [`Index::set_embedder`].
    pub fn open(root: &Path, config: IndexConfig) -> Result<Self> {
        let canonical = root.canonicalize().map_err(|e| Error::io(root, e))?;
        let dir = index_dir(&canonical);
        Self::open_at(&canonical, &dir, config)
    }

    /// Opens an index of `root` stored in `dir` instead of `<root>/.trellis/index` (for
    /// read-only trees and benchmarks).
    pub fn open_at(root: &Path, dir: &Path, config: IndexConfig) -> Result<Self> {
        let root = root.canonicalize().map_err(|e| Error::io(root, e))?;
        let dir = dir.to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let (meta, migrated) = Meta::open(&dir.join("meta.db"))?;
        let fulltext = dir.join("tantivy");
        if migrated && fulltext.exists() {
            // The metadata forgot every file, so their documents must go too.
            std::fs::remove_dir_all(&fulltext).map_err(|e| Error::io(&fulltext, e))?;
        }
        let bm25 = match Bm25::open(&fulltext) {
            Ok(b) => b,
            // Nothing is recorded as indexed (a fresh or just-migrated database, e.g. after a
            // crash between the migration and the removal above): the full-text directory is
            // disposable, whatever state or format it is in.
            Err(_) if meta.counts()?.files == 0 => {
                std::fs::remove_dir_all(&fulltext).map_err(|e| Error::io(&fulltext, e))?;
                Bm25::open(&fulltext)?
            }
            Err(e) => return Err(e),
        };
        let excludes = Excludes::new(&config)?;
        let opened_version = meta.data_version()?;
        Ok(Index {
            root,
            dir,
            config,
            excludes,
            meta,
            bm25,
            embedder: None,
            vectors: RwLock::new(None),
            opened_version,
            reranker: OnceLock::new(),
        })
    }

    /// Whether another handle or process has written the index since this handle was opened
    /// (its full-text reader and vector cache would not show those writes; its own writes
    /// it shows). Kept handles are checked before reuse; an unreadable version counts as
    /// stale.
    pub fn is_stale(&self) -> bool {
        self.meta
            .data_version()
            .map_or(true, |v| v != self.opened_version)
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The exclusion rules the index scans with.
    pub(crate) fn excludes(&self) -> &Excludes {
        &self.excludes
    }

    /// The configuration.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Attaches an embedder (vectors from a different model are discarded at the next update).
    pub fn set_embedder(&mut self, embedder: Box<dyn Embedder>) {
        self.embedder = Some(embedder);
        self.invalidate_vectors();
    }

    /// Chooses the reranker of retrievals (`index.search.rerank`), e.g. to compare rankers on
    /// one open index.
    pub fn set_rerank(&mut self, rerank: crate::config::Rerank) {
        self.config.search.rerank = rerank;
    }

    /// Detaches the embedder (searches are BM25-only until one is attached again).
    pub fn take_embedder(&mut self) -> Option<Box<dyn Embedder>> {
        self.embedder.take()
    }

    /// The attached embedder.
    pub fn embedder(&self) -> Option<&dyn Embedder> {
        self.embedder.as_deref()
    }

    /// Whether embeddings have been computed for this index (by any model).
    pub fn has_embeddings(&self) -> Result<bool> {
        Ok(self.meta.get("embedding_model")?.is_some())
    }

    /// Summary counts.
    pub fn counts(&self) -> Result<Counts> {
        self.meta.counts()
    }

    /// Brings the index up to date with the workspace.
    pub fn update(&mut self, opts: &UpdateOptions<'_>) -> Result<UpdateStats> {
        let t0 = Instant::now();
        let scanned = scan::scan(&self.root, &self.excludes)?;
        let scanned: Vec<ScannedFile> = scanned
            .into_iter()
            .filter(|f| in_scope(opts.scope, &f.path))
            .collect();
        let mut states = self.meta.file_states()?;
        // Files of an interrupted batch: their full-text documents may not match the
        // recorded hash, so forget the hash and index them again.
        for p in self.meta.pending()? {
            if let Some(s) = states.get_mut(&p) {
                s.hash = 0;
                s.mtime_ns = -1;
            }
        }
        let seen: HashSet<&str> = scanned.iter().map(|f| f.path.as_str()).collect();
        let removed: Vec<String> = states
            .keys()
            .filter(|p| in_scope(opts.scope, p) && !seen.contains(p.as_str()))
            .cloned()
            .collect();
        let stale: Vec<ScannedFile> = scanned
            .iter()
            .filter(|f| {
                states
                    .get(&f.path)
                    .is_none_or(|s| s.size != f.size || s.mtime_ns != f.mtime_ns)
            })
            .cloned()
            .collect();
        let mut stats = UpdateStats {
            files_seen: scanned.len(),
            scan_ms: t0.elapsed().as_millis() as u64,
            ..UpdateStats::default()
        };
        if let Some(p) = opts.progress {
            p(Progress::Scanned {
                files: scanned.len(),
                stale: stale.len(),
            });
        }
        let t1 = Instant::now();
        // Files indexed as text by an earlier, interrupted update still need their symbols.
        let unparsed = self.meta.unparsed()?;
        let text_first = opts
            .text_first
            .unwrap_or(stale.len() >= TEXT_FIRST_MIN_FILES);
        if text_first {
            self.process(&stale, removed, &states, Pass::Text, opts, &mut stats)?;
            stats.text_pass_ms = t1.elapsed().as_millis() as u64;
            stats.searchable_ms = t0.elapsed().as_millis() as u64;
            let unparsed = self.meta.unparsed()?;
            if let Some(p) = opts.progress {
                p(Progress::Searchable {
                    unparsed: unparsed.len(),
                    elapsed_ms: stats.searchable_ms,
                });
            }
            // Every unparsed file is parsed whatever its recorded hash (no state given).
            let todo: Vec<ScannedFile> = scanned
                .iter()
                .filter(|f| unparsed.contains(&f.path))
                .cloned()
                .collect();
            self.process(
                &todo,
                Vec::new(),
                &HashMap::new(),
                Pass::Full,
                opts,
                &mut stats,
            )?;
            // A file indexed by both passes of this update counts once.
            let text_indexed: HashSet<&str> = stale.iter().map(|f| f.path.as_str()).collect();
            let twice = todo
                .iter()
                .filter(|f| text_indexed.contains(f.path.as_str()))
                .count();
            stats.files_indexed = stats.files_indexed.saturating_sub(twice);
        } else {
            let mut todo = stale;
            let mut states = states;
            let queued: HashSet<String> = todo.iter().map(|f| f.path.clone()).collect();
            for f in &scanned {
                if unparsed.contains(&f.path) && !queued.contains(&f.path) {
                    todo.push(f.clone());
                }
            }
            states.retain(|p, _| !unparsed.contains(p));
            self.process(&todo, removed, &states, Pass::Full, opts, &mut stats)?;
        }
        stats.index_ms = t1.elapsed().as_millis() as u64;
        if opts.embed {
            let t2 = Instant::now();
            stats.embedded = self.embed_pending(opts)?;
            stats.embed_ms = t2.elapsed().as_millis() as u64;
        }
        self.fill_totals(&mut stats)?;
        Ok(stats)
    }

    /// Re-indexes just these paths (relative to the root or absolute), without a walk: the
    /// fast path for editors and watchers. Deleted or now-excluded paths are removed.
    pub fn update_paths(&mut self, paths: &[&str], embed: bool) -> Result<UpdateStats> {
        let t1 = Instant::now();
        let mut stale = Vec::new();
        let mut removed = Vec::new();
        let mut states = HashMap::new();
        for p in paths {
            let rel = self.relative(p);
            if let Some(st) = self.meta.file_state(&rel)? {
                states.insert(rel.clone(), st);
            }
            match scan::stat(&self.root, &rel, &self.excludes) {
                Some(f) => stale.push(f),
                None => removed.push(rel),
            }
        }
        let mut stats = UpdateStats {
            files_seen: stale.len(),
            ..UpdateStats::default()
        };
        let opts = UpdateOptions {
            embed,
            ..UpdateOptions::default()
        };
        self.process(&stale, removed, &states, Pass::Full, &opts, &mut stats)?;
        stats.index_ms = t1.elapsed().as_millis() as u64;
        if embed {
            stats.embedded = self.embed_pending(&opts)?;
        }
        Ok(stats)
    }

    fn relative(&self, p: &str) -> String {
        let path = Path::new(p);
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        rel.to_string_lossy().replace('\\', "/")
    }

    fn fill_totals(&self, stats: &mut UpdateStats) -> Result<()> {
        let c = self.meta.counts()?;
        stats.files = c.files;
        stats.symbols = c.symbols;
        stats.sections = c.sections;
        stats.chunks = c.chunks;
        stats.chunks_embedded = c.embedded;
        Ok(())
    }

    fn process(
        &mut self,
        stale: &[ScannedFile],
        removed: Vec<String>,
        states: &HashMap<String, FileState>,
        pass: Pass,
        opts: &UpdateOptions<'_>,
        stats: &mut UpdateStats,
    ) -> Result<()> {
        let batch = opts.batch_files.unwrap_or(4000).max(1);
        // Text batches are cheap to prepare and hold only text: larger ones mean fewer
        // commits and full-text segments, so fewer term dictionaries to build and merge.
        let batch = match pass {
            Pass::Text => batch.saturating_mul(TEXT_BATCH_FACTOR),
            Pass::Full => batch,
        };
        self.bm25
            .prepare(stale.len() + removed.len() <= SMALL_UPDATE_FILES)?;
        let root = self.root.clone();
        let sink = build::Sink {
            bm25: &mut self.bm25,
            meta: &mut self.meta,
        };
        let written = build::run(
            &root, stale, removed, states, batch, pass, opts, sink, stats,
        )?;
        if written {
            self.invalidate_vectors();
        }
        Ok(())
    }

    /// Computes embeddings for chunks that lack one; returns how many were computed.
    pub fn embed_pending(&mut self, opts: &UpdateOptions<'_>) -> Result<u64> {
        let Some(embedder) = self.embedder.as_deref() else {
            return Ok(0);
        };
        let model_id = embedder.id();
        let dim = embedder.dim();
        if dim == 0 {
            return Err(Error::Embedding(format!("{model_id}: unknown dimension")));
        }
        let file = VectorFile::new(&self.dir.join("vectors.f32"), dim);
        if self.meta.get("embedding_model")?.as_deref() != Some(model_id.as_str()) {
            self.meta.clear_vectors()?;
            file.reset()?;
            self.meta.set("embedding_model", &model_id)?;
            self.meta.set("embedding_dim", &dim.to_string())?;
        }
        let total = self.meta.unembedded_count()?;
        let mut done = 0u64;
        let batch = (self.config.embedding.batch_size.max(1) * 8).min(512);
        loop {
            if opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                self.invalidate_vectors();
                return Err(Error::Cancelled);
            }
            let chunks = self.meta.unembedded(batch)?;
            if chunks.is_empty() {
                break;
            }
            let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vecs = embedder.embed(&refs)?;
            let first = file.append(&vecs)?;
            let rows: Vec<(i64, u64)> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| (text_hash(t), first + i as u64))
                .collect();
            self.meta.add_vectors(&rows)?;
            done += chunks.len() as u64;
            if let Some(p) = opts.progress {
                p(Progress::Embedded { done, total });
            }
        }
        self.invalidate_vectors();
        Ok(done)
    }

    fn invalidate_vectors(&self) {
        if let Ok(mut g) = self.vectors.write() {
            *g = None;
        }
    }

    /// The vector matrix of live chunks (loaded on first use, cached until the next update).
    pub fn vector_index(&self) -> Result<Option<Arc<VectorIndex>>> {
        if let Ok(g) = self.vectors.read()
            && let Some(v) = g.as_ref()
        {
            return Ok(Some(v.clone()));
        }
        let Some(dim) = self
            .meta
            .get("embedding_dim")?
            .and_then(|d| d.parse::<usize>().ok())
        else {
            return Ok(None);
        };
        if let (Some(e), Some(model)) = (self.embedder(), self.meta.get("embedding_model")?)
            && e.id() != model
        {
            return Ok(None);
        }
        let file = VectorFile::new(&self.dir.join("vectors.f32"), dim);
        let rows = file.read_all()?;
        let live = self.meta.live_vectors()?;
        let vi = Arc::new(VectorIndex::build(dim, &rows, &live));
        if let Ok(mut g) = self.vectors.write() {
            *g = Some(vi.clone());
        }
        Ok(Some(vi))
    }

    /// Reorders `documents` (the best candidates of a retrieval, best first) with the
    /// configured endpoint: `None` when reranking is off; otherwise a report and, when the
    /// call succeeded, the scores. A failure (configuration, network,
    /// timeout, body) is logged as a warning and reported; the caller keeps its order.
    pub fn rerank_documents(&self, query: &str, documents: &[&str]) -> Option<Reranked> {
        let client = self.reranker.get_or_init(|| {
            RemoteReranker::from_config(&self.config().rerank).map_err(|e| e.to_string())
        });
        let client = match client {
            Ok(None) => return None,
            Ok(Some(c)) => c,
            Err(e) => {
                tracing::warn!("rerank endpoint not usable, local ranking kept: {e}");
                return Some(Reranked {
                    report: RerankReport {
                        endpoint: self.config().rerank.base_url.clone().unwrap_or_default(),
                        error: Some(format!("{e}; local ranking kept")),
                        ..RerankReport::default()
                    },
                    scores: None,
                });
            }
        };
        let n = documents.len().min(client.max_documents());
        let t = std::time::Instant::now();
        let result = client.rerank(query, &documents[..n]);
        let mut report = RerankReport {
            endpoint: client.endpoint(),
            documents: n,
            elapsed_ms: t.elapsed().as_millis() as u64,
            error: None,
        };
        match result {
            Ok(scored) => Some(Reranked {
                report,
                scores: Some(scored),
            }),
            Err(e) => {
                tracing::warn!("{e}; local ranking kept");
                report.error = Some(format!("{e}; local ranking kept"));
                Some(Reranked {
                    report,
                    scores: None,
                })
            }
        }
    }

    /// Loads chunks by id.
    pub fn chunks(&self, ids: &[crate::chunk::ChunkId]) -> Result<Vec<Chunk>> {
        self.meta.chunks(ids)
    }

    /// Chunks of one file in line order.
    pub fn chunks_of(&self, path: &str) -> Result<Vec<Chunk>> {
        self.meta.chunks_of(path)
    }

    /// Symbols and sections by name ([`SymbolQuery`]): exact matches first.
    pub fn find_symbols(&self, q: &SymbolQuery) -> Result<Vec<Chunk>> {
        let kinds: Vec<&str> = q.kinds.iter().map(|k| k.as_str()).collect();
        self.meta.find_chunks(
            &q.name,
            q.exact,
            &kinds,
            q.path_prefix.as_deref(),
            q.limit.max(1),
        )
    }

    /// The innermost symbol or section of `path` that contains line `line` (1-based), then
    /// the symbols (or sections) enclosing it, innermost first.
    pub fn symbols_at(&self, path: &str, line: u32) -> Result<Vec<Chunk>> {
        let chunks = self.meta.chunks_of(path)?;
        let Some(inner) = chunks
            .iter()
            .filter(|c| c.decl.start_line <= line && line <= c.decl.end_line)
            .min_by_key(|c| {
                (
                    c.decl.kind == ChunkKind::File,
                    c.decl.end_line - c.decl.start_line,
                )
            })
        else {
            return Ok(Vec::new());
        };
        let mut out = vec![inner.clone()];
        // Enclosing symbols by their qualified names (a class's chunk may end where its
        // first method begins, so line ranges alone do not nest).
        while let Some(parent) = out
            .last()
            .filter(|c| !c.decl.parent.is_empty())
            .and_then(|c| {
                chunks
                    .iter()
                    .find(|p| p.decl.qualified_name == c.decl.parent)
            })
        {
            if out.iter().any(|c| c.id == parent.id) {
                break;
            }
            out.push(parent.clone());
        }
        Ok(out)
    }

    /// Up to `n` chunk ids, spread evenly over the index (benchmarks, sampling).
    pub fn sample_chunk_ids(&self, n: usize) -> Result<Vec<crate::chunk::ChunkId>> {
        self.meta.sample_ids(n)
    }

    /// A code file with symbols (benchmarks): the first indexed Rust file.
    pub fn chunks_of_kind_sample(&self) -> Result<Option<String>> {
        self.meta.first_path_with_lang("rust")
    }

    /// Releases the full-text writer (its lock and memory); call when done updating.
    pub fn close_writer(&mut self) -> Result<()> {
        self.bm25.close_writer()
    }
}

fn in_scope(scope: Scope, path: &str) -> bool {
    match scope {
        Scope::All => true,
        Scope::Documents => {
            let l = Lang::detect(path);
            l.is_document() || path.to_ascii_lowercase().ends_with(".txt")
        }
    }
}
