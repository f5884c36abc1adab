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

use std::path::Path;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool_handler};
use trellis_core::code_intel::{CodeIntel, IndexConfig, LspConfig};

pub use gateway::{GatewayServer, serve_gateway_http, serve_gateway_stdio};
pub use http::{Authorize, serve_http, serve_http_with};
pub use trellis_core::code_intel::{
    AstMapArgs, DiagnosticsArgs, DiagnosticsResult, Hit, HoverResult, Places, PositionArgs,
    RepoMapArgs, RepoMapResult, SearchArgs, SearchResult, SignatureResult, Symbol, SymbolAtArgs,
    Symbols, SymbolsArgs,
};

/// Errors of the server's setup (tool errors go to the client as `isError` results).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The index could not be opened.
    #[error(transparent)]
    Index(#[from] trellis_core::code_intel::Error),
    /// The MCP session failed.
    #[error("MCP: {0}")]
    Mcp(String),
}

/// The server: one workspace's code intelligence (its index and language servers) behind
/// the tools.
#[derive(Clone)]
pub struct CodeServer {
    intel: CodeIntel,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for CodeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeServer")
            .field("root", &self.intel.root())
            .finish_non_exhaustive()
    }
}

impl CodeServer {
    /// A server over the index of `root` (created if missing) with `config`, and the
    /// language servers of `lsp`; brings the index up to date in the background (progress
    /// on stderr).
    pub fn open(root: &Path, config: IndexConfig, lsp: &LspConfig) -> Result<Self, Error> {
        Ok(Self {
            intel: CodeIntel::open(root, config, lsp)?,
            tool_router: schema::standard_router(Self::index_router() + Self::lsp_router()),
        })
    }

    /// The programs of the language servers running now.
    pub async fn language_servers(&self) -> Vec<String> {
        self.intel.language_servers().await
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
