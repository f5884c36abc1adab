//! The workspace's code intelligence: one API over the repository's index and language
//! servers, behind the agents' LSP tools, the retrieval agent's `lsp_tools` source and
//! `trellis mcp` (a workflow's `lsp_integration`, `docs/mcp.md`, `docs/retrieval.md`).
//!
//! - **Positions** ([`PositionArgs`], `CodeIntel::position`): a `symbol` looked up in the
//!   index (its declaration), or `path` + `line` (+ `column`) in a file.
//! - **Language servers** ([`CodeIntel::definition`], [`CodeIntel::references`],
//!   [`CodeIntel::hover`], [`CodeIntel::signature`], [`CodeIntel::diagnostics`]): answered
//!   by the file's language server (one [`LspPool`] per runtime or server, each started on
//!   first use, see `[lsp]`).
//! - **Index queries** ([`CodeIntel::search`], [`CodeIntel::doc_sections`],
//!   [`CodeIntel::symbols`], [`CodeIntel::symbol_at`], [`CodeIntel::repo_map`],
//!   [`CodeIntel::ast_context_map`]).
//! - **Agent tools** `find_definition`, `get_references`, `get_signature` (the names a
//!   workflow's `lsp_integration.tools` lists), granted to a workflow's agents when its
//!   `retrieval_strategy_config.lsp_integration` is enabled.
//! - **Retrieval source** `lsp_tools` (code workflows only): the identifiers of the
//!   retrieval's queries (a failure's named symbols first) that the index knows as symbols,
//!   their signatures (hover: type and documentation), definitions and the places that use
//!   them, as code regions.
//!
//! Answers describe the repository as checked out, not a run's uncommitted edits; paths are
//! the same relative paths in a run's worktree. [`CodeIntel::open`] serves one repository
//! on its own (`trellis mcp`): its index opened once and brought up to date in the
//! background, its language servers started ahead of use.

mod agent;
mod index_queries;
mod lsp_queries;
mod open;
mod source;

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use trellis_index::locate::site_at;
use trellis_index::{Index, Site};
use trellis_lsp::LspPool;

pub use agent::{LspArgs, LspOut, PlacesOut, SignatureOut};
pub use index_queries::{
    AstMapArgs, Hit, RepoMapArgs, RepoMapResult, SearchArgs, SearchResult, Symbol, SymbolAtArgs,
    Symbols, SymbolsArgs,
};
pub use lsp_queries::{
    DiagnosticsArgs, DiagnosticsResult, HoverResult, Places, PositionArgs, SignatureResult,
};
pub use source::LspSource;
pub use trellis_index::IndexConfig;
pub use trellis_lsp::{Diagnostic, LspConfig, Place, Signature, Signatures};

/// The agent tools' names, as a workflow's `lsp_integration.tools` lists them.
pub use trellis_tools::registry::LSP_TOOLS;

/// The retrieval source's name in `rag_strategy.sources`.
pub const LSP_SOURCE: &str = "lsp_tools";

/// Largest token budget a query may ask for.
pub const MAX_BUDGET: u32 = 32_000;
/// Most symbols a query may ask for.
pub const MAX_LIMIT: u32 = 200;
/// Longest query or name, in bytes.
pub const MAX_QUERY: usize = 4_000;

/// Why code intelligence could not answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The index could not be opened.
    #[error(transparent)]
    Open(#[from] trellis_index::Error),
    /// The index has no symbol of this name.
    #[error("no symbol named {0:?} in the index")]
    NoSymbol(String),
    /// The language server failed at a position (`at`, `path:line:column`).
    #[error("{source}")]
    Lsp {
        /// The position asked about.
        at: String,
        /// What the server said.
        source: trellis_lsp::Error,
    },
    /// Refused arguments, or the index or a language server failed.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for Error {
    fn from(e: String) -> Self {
        Self::Failed(e)
    }
}

/// How calls reach the index.
#[derive(Clone, Debug)]
enum IndexHandle {
    /// Opened for each call, with these settings (a runtime's agents).
    PerCall(Box<IndexConfig>),
    /// Opened once; calls wait until the start-up update is finished (`trellis mcp`).
    Shared {
        index: Arc<Mutex<Index>>,
        indexed: tokio::sync::watch::Receiver<bool>,
    },
}

/// The repository's index and language servers.
#[derive(Clone, Debug)]
pub struct CodeIntel {
    repo: PathBuf,
    index: IndexHandle,
    lsp: Arc<LspPool>,
}

impl CodeIntel {
    /// Code intelligence over `repo` with its index settings and language servers.
    pub fn new(repo: &Path, index: IndexConfig, lsp: Arc<LspPool>) -> Self {
        Self {
            repo: repo.to_path_buf(),
            index: IndexHandle::PerCall(Box::new(index)),
            lsp,
        }
    }

    /// The repository's root.
    pub fn root(&self) -> &Path {
        &self.repo
    }

    /// The programs of the language servers running now.
    pub async fn language_servers(&self) -> Vec<String> {
        self.lsp.running().await
    }

    /// Runs `f` on the index off the async workers.
    async fn with_index<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Index) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let run = match &self.index {
            IndexHandle::PerCall(config) => {
                let (repo, config) = (self.repo.clone(), IndexConfig::clone(config));
                tokio::task::spawn_blocking(move || {
                    let index = Index::open(&repo, config).map_err(|e| e.to_string())?;
                    f(&index)
                })
            }
            IndexHandle::Shared { index, indexed } => {
                let mut indexed = indexed.clone();
                let _ = indexed.wait_for(|done| *done).await;
                let index = index.clone();
                tokio::task::spawn_blocking(move || {
                    let index = index.lock().map_err(|_| {
                        "the index is unavailable (a previous call failed)".to_owned()
                    })?;
                    f(&index)
                })
            }
        };
        run.await
            .map_err(|e| Error::Failed(format!("internal error: {e}")))?
    }

    /// Where each of `names` is declared, for the first `max` the index knows (one index
    /// handle, off the async workers).
    async fn locate(&self, names: Vec<String>, max: usize) -> Result<Vec<(String, Site)>, Error> {
        self.with_index(move |index| {
            let mut found = Vec::new();
            for name in names {
                if found.len() == max {
                    break;
                }
                if let Some(site) = index.locate_symbol(&name).map_err(|e| e.to_string())? {
                    found.push((name, site));
                }
            }
            Ok(found)
        })
        .await
    }

    /// The position a call names: `symbol` resolved through the index to where it is
    /// declared, or `path` + `line` (+ `column`; default the line's first non-blank
    /// character).
    pub(crate) async fn position(&self, a: &PositionArgs) -> Result<Site, Error> {
        let symbol = a.symbol.trim();
        if symbol.is_empty() {
            let path = relative(&a.path)?;
            return Ok(site_at(&self.repo, &path, a.line, a.column)?);
        }
        check_text("symbol", &a.symbol)?;
        let found = self.locate(vec![symbol.to_owned()], 1).await?;
        found
            .into_iter()
            .next()
            .map(|(_, site)| site)
            .ok_or_else(|| Error::NoSymbol(symbol.to_owned()))
    }
}

/// Refuses a `field` longer than [`MAX_QUERY`].
fn check_text(field: &str, text: &str) -> Result<(), Error> {
    if text.len() > MAX_QUERY {
        return Err(Error::Failed(format!(
            "{field} is {} bytes; at most {MAX_QUERY}",
            text.len()
        )));
    }
    Ok(())
}

/// A token budget within 1 to [`MAX_BUDGET`].
fn check_budget(budget: u32) -> Result<u32, Error> {
    if budget == 0 || budget > MAX_BUDGET {
        return Err(Error::Failed(format!(
            "budget_tokens {budget} is out of range: 1 to {MAX_BUDGET}"
        )));
    }
    Ok(budget)
}

/// A workspace-relative path with `/` separators, or why it is refused.
fn relative(path: &str) -> Result<String, Error> {
    let p = Path::new(path.trim());
    if p.as_os_str().is_empty() {
        return Err(Error::Failed("empty path".into()));
    }
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Error::Failed(format!(
                    "{path}: outside the workspace (give a path relative to its root, without `..`)"
                )));
            }
        }
    }
    Ok(parts.join("/"))
}
