//! `trellis mcp`: the workspace's code intelligence as a Model Context Protocol server, for
//! any MCP client (Claude Desktop, Codex, Zed, Cursor, Trellis's own agents).
//!
//! Tools (all read-only, typed input and output schemas, structured content): over the
//! index ([`tools::index`]) `search` (hybrid retrieval packed to a token budget, with
//! attribution), `symbols` (find by name, kind, path), `symbol_at` (the symbol or section
//! enclosing `path:line`), `repo_map` (definitions ranked by PageRank, personalised by files
//! and identifiers), `ast_context_map` (functions, classes and imports of files) and
//! `doc_sections` (document retrieval); from the file's language server ([`tools::lsp`])
//! `definition`, `references`, `hover`, `signature` and `diagnostics`. The index is brought
//! up to date in the background when the server starts; calls made meanwhile wait for it.
//! The language servers of the languages present in the workspace start in the background
//! too (`[lsp] warm_for_mcp`, on by default), so the first call that needs one does not wait
//! for its whole start.
//!
//! [`gateway`] serves `trellis mcp --gateway`: the workspace's configured MCP servers behind
//! the tool-schema budget, `search_tools`, `execute_dag`, learning and speculation.

pub mod gateway;
mod http;
mod schema;
pub mod tools;

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool_handler};
use trellis_index::{Index, IndexConfig, UpdateOptions};

pub use gateway::{GatewayServer, serve_gateway_http, serve_gateway_stdio};
pub use http::{Authorize, serve_http, serve_http_with};
pub use tools::index::{
    AstMapArgs, Hit, RepoMapArgs, RepoMapResult, SearchArgs, SearchResult, Symbol, SymbolAtArgs,
    Symbols, SymbolsArgs,
};
pub use tools::lsp::{
    DiagnosticsArgs, DiagnosticsResult, HoverResult, Places, PositionArgs, SignatureResult,
};

/// Largest token budget a call may ask for.
pub(crate) const MAX_BUDGET: u32 = 32_000;
/// Most symbols a call may ask for.
pub(crate) const MAX_LIMIT: u32 = 200;
/// Longest query or name, in bytes.
pub(crate) const MAX_QUERY: usize = 4_000;

/// Errors of the server's setup (tool errors go to the client as `isError` results).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The index could not be opened.
    #[error(transparent)]
    Index(#[from] trellis_index::Error),
    /// The MCP session failed.
    #[error("MCP: {0}")]
    Mcp(String),
}

/// The server: one workspace's index behind the tools.
#[derive(Clone)]
pub struct CodeServer {
    root: PathBuf,
    index: Arc<Mutex<Index>>,
    /// Set once the start-up update finished (calls wait for it).
    indexed: tokio::sync::watch::Receiver<bool>,
    /// Language servers, started on first use.
    lsp: Arc<trellis_lsp::LspPool>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for CodeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeServer")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl CodeServer {
    /// A server over the index of `root` (created if missing) with `config`, and the
    /// language servers of `lsp`; brings the index up to date in the background (progress
    /// on stderr).
    pub fn open(
        root: &Path,
        config: IndexConfig,
        lsp: &trellis_lsp::LspConfig,
    ) -> Result<Self, Error> {
        let config_for_scan = config.clone();
        let index = Index::open(root, config)?;
        let (done, indexed) = tokio::sync::watch::channel(false);
        let server = Self {
            root: root.to_path_buf(),
            index: Arc::new(Mutex::new(index)),
            indexed,
            lsp: Arc::new(trellis_lsp::LspPool::new(root, lsp)),
            tool_router: schema::standard_router(Self::index_router() + Self::lsp_router()),
        };
        let index = server.index.clone();
        let refresh = move || {
            // Whatever happens, calls stop waiting.
            let _done = Finished(done);
            let Ok(mut index) = index.lock() else { return };
            let progress = |p: trellis_index::Progress| tracing::debug!(?p, "indexing");
            match index.update(&UpdateOptions {
                embed: false,
                progress: Some(&progress),
                ..UpdateOptions::default()
            }) {
                Ok(s) => eprintln!(
                    "trellis mcp: index up to date ({} files, {} re-indexed, {} symbols)",
                    s.files, s.files_indexed, s.symbols
                ),
                Err(e) => eprintln!("trellis mcp: indexing failed: {e}"),
            }
            let _ = index.close_writer();
            // Hybrid search when the index has embeddings (made by `trellis index`).
            if index.has_embeddings().unwrap_or(false) {
                match trellis_index::embed::from_config(&index.config().embedding.clone(), false) {
                    Ok(Some(e)) => index.set_embedder(e),
                    Ok(None) => {}
                    Err(e) => {
                        eprintln!("trellis mcp: embeddings unavailable ({e}); text search only")
                    }
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                drop(rt.spawn_blocking(refresh));
                if lsp.warm_for_mcp {
                    server.warm_language_servers(&rt, &config_for_scan, lsp.warm_open_files);
                }
            }
            Err(_) => refresh(),
        }
        Ok(server)
    }

    /// Starts the language servers of the languages present in the workspace in the
    /// background (`[lsp] warm_for_mcp`; with `open`, `warm_open_files`, they also get the
    /// files to analyse), so the first `references` does not wait for a whole server start.
    fn warm_language_servers(&self, rt: &tokio::runtime::Handle, config: &IndexConfig, open: bool) {
        let root = self.root.clone();
        let lsp = self.lsp.clone();
        let excludes = trellis_index::scan::Excludes::new(config);
        rt.spawn(async move {
            let excludes = match excludes {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!("not starting language servers ahead of use: {e}");
                    return;
                }
            };
            let walk =
                tokio::task::spawn_blocking(move || trellis_index::scan::scan(&root, &excludes));
            match walk.await {
                Ok(Ok(files)) => lsp.warm(files.iter().map(|f| f.path.as_str()), open),
                Ok(Err(e)) => tracing::warn!("not starting language servers ahead of use: {e}"),
                Err(e) => tracing::warn!("not starting language servers ahead of use: {e}"),
            }
        });
    }

    /// The programs of the language servers running now.
    pub async fn language_servers(&self) -> Vec<String> {
        self.lsp.running().await
    }

    /// Runs `f` on the index off the async workers.
    async fn with_index<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Index) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let mut indexed = self.indexed.clone();
        let _ = indexed.wait_for(|done| *done).await;
        let index = self.index.clone();
        tokio::task::spawn_blocking(move || {
            let index = index
                .lock()
                .map_err(|_| "the index is unavailable (a previous call failed)".to_owned())?;
            f(&index)
        })
        .await
        .map_err(|e| format!("internal error: {e}"))?
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("trellis", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Code intelligence over one workspace's index: search code and documents, find \
                 symbols and what encloses a line, and a ranked map of the repository; and, \
                 from the file's language server, definitions, references, hovers, call \
                 signatures and diagnostics. Paths are relative to the workspace root; lines \
                 and columns are 1-based.",
            )
    }
}

/// Serves `server` (a [`CodeServer`], a [`GatewayServer`]) on stdin/stdout until the client
/// closes the connection.
pub async fn serve_stdio<S: ServerHandler>(server: S) -> Result<(), Error> {
    use rmcp::ServiceExt as _;
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Mcp(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::Mcp(e.to_string()))?;
    Ok(())
}

/// Marks the start-up update finished when dropped.
struct Finished(tokio::sync::watch::Sender<bool>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

pub(crate) fn check_text(field: &str, text: &str) -> Result<(), String> {
    if text.len() > MAX_QUERY {
        return Err(format!(
            "{field} is {} bytes; at most {MAX_QUERY}",
            text.len()
        ));
    }
    Ok(())
}

pub(crate) fn check_budget(budget: u32) -> Result<u32, String> {
    if budget == 0 || budget > MAX_BUDGET {
        return Err(format!(
            "budget_tokens {budget} is out of range: 1 to {MAX_BUDGET}"
        ));
    }
    Ok(budget)
}

/// A workspace-relative path with `/` separators, or why it is refused.
pub(crate) fn relative(path: &str) -> Result<String, String> {
    let p = Path::new(path.trim());
    if p.as_os_str().is_empty() {
        return Err("empty path".into());
    }
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "{path}: outside the workspace (give a path relative to its root, without `..`)"
                ));
            }
        }
    }
    Ok(parts.join("/"))
}
