//! `trellis mcp`: the workspace's code intelligence as a Model Context Protocol server, for
//! any MCP client (Claude Desktop, Codex, Zed, Cursor, Trellis's own agents).
//!
//! Tools (all read-only, typed input and output schemas, structured content):
//! `search` (hybrid retrieval packed to a token budget, with attribution), `symbols` (find by
//! name, kind, path), `symbol_at` (the symbol or section enclosing `path:line`), `repo_map`
//! (definitions ranked by PageRank, personalised by files and identifiers), `ast_context_map`
//! (functions, classes and imports of files) and `doc_sections` (document retrieval). The
//! index is brought up to date in the background when the server starts; calls made
//! meanwhile wait for it.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trellis_index::{
    ChunkKind, Index, IndexConfig, RepoMapRequest, RetrievalRequest, RetrievalStrategyConfig,
    SymbolQuery, UpdateOptions,
};

/// Largest token budget a call may ask for.
const MAX_BUDGET: u32 = 32_000;
/// Most symbols a call may ask for.
const MAX_LIMIT: u32 = 200;
/// Longest query or name, in bytes.
const MAX_QUERY: usize = 4_000;

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

/// `search` and `doc_sections` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// What to look for (words, identifiers, a question).
    pub query: String,
    /// Token budget of the packed result (default 4000, at most 32000).
    #[serde(default = "default_budget")]
    pub budget_tokens: u32,
}

fn default_budget() -> u32 {
    4000
}

/// `symbols` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SymbolsArgs {
    /// The name or qualified name (`Inventory::reserve`).
    pub name: String,
    /// Only exact matches (default: names containing it, ignoring case).
    #[serde(default)]
    pub exact: bool,
    /// Only this kind: function, method, class, enum, interface, type, module, constant,
    /// section (empty: all).
    #[serde(default)]
    pub kind: String,
    /// Only under this path prefix (relative to the workspace).
    #[serde(default)]
    pub path: String,
    /// At most this many (default 20, at most 200).
    #[serde(default = "default_limit")]
    pub limit: u32,
}

fn default_limit() -> u32 {
    20
}

/// `symbol_at` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SymbolAtArgs {
    /// A file, relative to the workspace.
    pub path: String,
    /// A line of it, 1-based.
    pub line: u32,
}

/// `repo_map` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RepoMapArgs {
    /// Files in play: the ranking is personalised towards them.
    #[serde(default)]
    pub files: Vec<String>,
    /// Identifiers the task mentions.
    #[serde(default)]
    pub mentions: Vec<String>,
    /// Token budget of the map (default 1024, at most 32000).
    #[serde(default = "default_map_budget")]
    pub budget_tokens: u32,
}

fn default_map_budget() -> u32 {
    1024
}

/// `ast_context_map` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AstMapArgs {
    /// Files, relative to the workspace (empty: every indexed file).
    #[serde(default)]
    pub paths: Vec<String>,
}

/// `definition`, `references` and `hover` arguments: a position, or a symbol's name.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PositionArgs {
    /// A file, relative to the workspace (with `line` and `column`).
    #[serde(default)]
    pub path: String,
    /// Line, 1-based.
    #[serde(default)]
    pub line: u32,
    /// Column, 1-based (default: the first non-blank character of the line).
    #[serde(default)]
    pub column: u32,
    /// Instead of a position: a symbol's name or qualified name, looked up in the index
    /// (its declaration is the position).
    #[serde(default)]
    pub symbol: String,
}

/// `definition` / `references` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Places {
    /// The position asked about (`path:line:column`).
    pub at: String,
    /// The places, by path and line.
    pub places: Vec<trellis_lsp::Place>,
}

/// `hover` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HoverResult {
    /// The position asked about (`path:line:column`).
    pub at: String,
    /// Type, signature and documentation, as the language server gives them (Markdown).
    pub text: String,
}

/// One retrieved piece of the workspace.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Hit {
    /// File, relative to the workspace.
    pub path: String,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, inclusive.
    pub end_line: u32,
    /// What it is (function, class, section, …).
    pub kind: String,
    /// The symbol or section it is.
    pub name: String,
    /// Relevance score.
    pub score: f32,
    /// The text.
    pub text: String,
}

/// `search` / `doc_sections` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResult {
    /// Best first, packed to the budget.
    pub hits: Vec<Hit>,
    /// Tokens used.
    pub used_tokens: u32,
    /// The budget.
    pub budget_tokens: u32,
}

/// A symbol or section.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Symbol {
    /// Its name.
    pub name: String,
    /// Its qualified name (or section path).
    pub qualified_name: String,
    /// function, method, class, …, section.
    pub kind: String,
    /// File, relative to the workspace.
    pub path: String,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, inclusive.
    pub end_line: u32,
    /// The declaration without its body.
    pub signature: String,
    /// Its doc comment.
    pub doc: String,
}

/// `symbols` / `symbol_at` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Symbols {
    /// The symbols (for `symbol_at`: innermost first).
    pub symbols: Vec<Symbol>,
}

/// `repo_map` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RepoMapResult {
    /// The map: files with their top definitions, most central first.
    pub text: String,
    /// Tokens used.
    pub tokens: u32,
}

#[tool_router(router = tool_router)]
impl CodeServer {
    /// A server over the index of `root` (created if missing) with `config`, and the
    /// language servers of `lsp`; brings the index up to date in the background (progress
    /// on stderr).
    pub fn open(
        root: &Path,
        config: IndexConfig,
        lsp: &trellis_lsp::LspConfig,
    ) -> Result<Self, Error> {
        let index = Index::open(root, config)?;
        let (done, indexed) = tokio::sync::watch::channel(false);
        let server = Self {
            root: root.to_path_buf(),
            index: Arc::new(Mutex::new(index)),
            indexed,
            lsp: Arc::new(trellis_lsp::LspPool::new(root, lsp)),
            tool_router: Self::tool_router() + Self::lsp_router(),
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
            Ok(rt) => drop(rt.spawn_blocking(refresh)),
            Err(_) => refresh(),
        }
        Ok(server)
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

    #[tool(
        description = "Search the workspace's code (hybrid full-text and symbol search) and return the best matching functions, classes and files, packed to a token budget, each with its path and line range.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search(
        &self,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, String> {
        self.retrieve(a, RetrievalStrategyConfig::code()).await
    }

    #[tool(
        description = "Search the workspace's documents (README, docs, decision records, specifications) by section, packed to a token budget, each with its path and line range.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn doc_sections(
        &self,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, String> {
        self.retrieve(a, RetrievalStrategyConfig::docs()).await
    }

    async fn retrieve(
        &self,
        a: SearchArgs,
        strategy: RetrievalStrategyConfig,
    ) -> Result<Json<SearchResult>, String> {
        check_text("query", &a.query)?;
        let budget = check_budget(a.budget_tokens)?;
        self.with_index(move |index| {
            let pack = index
                .retrieve(&RetrievalRequest {
                    query: a.query.clone(),
                    strategy: &strategy,
                    stage: None,
                    budget_tokens: Some(budget as usize),
                    candidates: None,
                })
                .map_err(|e| e.to_string())?;
            Ok(Json(SearchResult {
                hits: pack
                    .items
                    .into_iter()
                    .map(|i| Hit {
                        name: i
                            .attribution
                            .symbol
                            .or(i.attribution.section)
                            .unwrap_or_default(),
                        path: i.attribution.path,
                        start_line: i.attribution.start_line,
                        end_line: i.attribution.end_line,
                        kind: i.kind.as_str().to_owned(),
                        score: i.score,
                        text: i.text,
                    })
                    .collect(),
                used_tokens: u32::try_from(pack.used_tokens).unwrap_or(u32::MAX),
                budget_tokens: budget,
            }))
        })
        .await
    }

    #[tool(
        description = "Find symbols (functions, methods, classes, enums, interfaces, types, modules, constants) or document sections by name, optionally by kind and path prefix; exact matches first.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn symbols(
        &self,
        Parameters(a): Parameters<SymbolsArgs>,
    ) -> Result<Json<Symbols>, String> {
        check_text("name", &a.name)?;
        if a.name.trim().is_empty() {
            return Err("name is empty: give a symbol name or part of one".into());
        }
        let kinds = match a.kind.trim() {
            "" => Vec::new(),
            k => vec![ChunkKind::parse(k).ok_or_else(|| {
                format!(
                    "unknown kind {k:?}: use function, method, class, enum, interface, type, module, constant, file or section"
                )
            })?],
        };
        let path_prefix = match a.path.trim() {
            "" => None,
            p => Some(relative(p)?),
        };
        if a.limit > MAX_LIMIT {
            return Err(format!("limit {} is over {MAX_LIMIT}", a.limit));
        }
        let q = SymbolQuery {
            name: a.name.trim().to_owned(),
            exact: a.exact,
            kinds,
            path_prefix,
            limit: a.limit.max(1) as usize,
        };
        self.with_index(move |index| {
            let found = index.find_symbols(&q).map_err(|e| e.to_string())?;
            Ok(Json(Symbols {
                symbols: found.into_iter().map(symbol).collect(),
            }))
        })
        .await
    }

    #[tool(
        description = "The symbol (or document section) that encloses a line of a file, innermost first, with the ones around it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn symbol_at(
        &self,
        Parameters(a): Parameters<SymbolAtArgs>,
    ) -> Result<Json<Symbols>, String> {
        let path = relative(&a.path)?;
        if a.line == 0 {
            return Err("line is 1-based: 0 is not a line".into());
        }
        let root = self.root.clone();
        self.with_index(move |index| {
            let around = index.symbols_at(&path, a.line).map_err(|e| e.to_string())?;
            if around.is_empty() && !root.join(&path).is_file() {
                return Err(format!("{path}: no such file in the workspace"));
            }
            Ok(Json(Symbols {
                symbols: around.into_iter().map(symbol).collect(),
            }))
        })
        .await
    }

    #[tool(
        description = "A map of the repository: files with their most important definitions, ranked by PageRank over references, personalised towards the given files and identifiers, within a token budget.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn repo_map(
        &self,
        Parameters(a): Parameters<RepoMapArgs>,
    ) -> Result<Json<RepoMapResult>, String> {
        let budget = check_budget(a.budget_tokens)?;
        let files = a
            .files
            .iter()
            .map(|f| relative(f))
            .collect::<Result<Vec<_>, _>>()?;
        for m in &a.mentions {
            check_text("mentions", m)?;
        }
        self.with_index(move |index| {
            let map = index
                .repo_map(&RepoMapRequest {
                    files_in_play: files,
                    mentioned: a.mentions,
                    budget_tokens: budget as usize,
                })
                .map_err(|e| e.to_string())?;
            Ok(Json(RepoMapResult {
                text: map.text,
                tokens: u32::try_from(map.tokens).unwrap_or(u32::MAX),
            }))
        })
        .await
    }

    #[tool(
        description = "The AST context map of files: their functions (with parameters and return types), classes and imports, as JSON.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn ast_context_map(
        &self,
        Parameters(a): Parameters<AstMapArgs>,
    ) -> Result<String, String> {
        let paths = a
            .paths
            .iter()
            .map(|f| relative(f))
            .collect::<Result<Vec<_>, _>>()?;
        self.with_index(move |index| {
            let map = index.ast_context_map(&paths).map_err(|e| e.to_string())?;
            serde_json::to_string_pretty(&map).map_err(|e| e.to_string())
        })
        .await
    }
}

#[tool_router(router = lsp_router, vis = "pub(crate)")]
impl CodeServer {
    /// The position a call names: `path` + `line` (+ `column`), or `symbol` resolved through
    /// the index to where it is declared.
    async fn resolve(&self, a: PositionArgs) -> Result<(String, u32, u32), String> {
        if !a.symbol.trim().is_empty() {
            check_text("symbol", &a.symbol)?;
            let name = a.symbol.trim().to_owned();
            let root = self.root.clone();
            return self
                .with_index(move |index| {
                    let found = index
                        .find_symbols(&SymbolQuery {
                            name: name.clone(),
                            exact: true,
                            kinds: Vec::new(),
                            path_prefix: None,
                            limit: 1,
                        })
                        .map_err(|e| e.to_string())?;
                    let c = found
                        .into_iter()
                        .next()
                        .ok_or_else(|| format!("no symbol named {name:?} in the index"))?;
                    let text = std::fs::read_to_string(root.join(&c.path))
                        .map_err(|e| format!("{}: {e}", c.path))?;
                    let short = c.name.rsplit(['.', ':']).next().unwrap_or(&c.name);
                    // The declaration's line: the chunk may start with doc comments or
                    // attributes that mention the name too.
                    let found = text
                        .lines()
                        .enumerate()
                        .skip(c.start_line.saturating_sub(1) as usize)
                        .take((c.end_line + 1).saturating_sub(c.start_line) as usize)
                        .filter(|(_, l)| !is_comment_or_attribute(l))
                        .find_map(|(n, l)| word_at(l, short).map(|i| (n, l, i)));
                    let (line, column) = match found {
                        Some((n, l, i)) => (
                            u32::try_from(n + 1).unwrap_or(c.start_line),
                            utf16_len(&l[..i]) + 1,
                        ),
                        None => (c.start_line, 1),
                    };
                    Ok((c.path, line, column))
                })
                .await;
        }
        let path = relative(&a.path)?;
        if a.line == 0 {
            return Err("give `path` and a 1-based `line` (and `column`), or `symbol`".into());
        }
        let column = if a.column > 0 {
            a.column
        } else {
            let text = std::fs::read_to_string(self.root.join(&path))
                .map_err(|e| format!("{path}: {e}"))?;
            let line = text.lines().nth(a.line as usize - 1).unwrap_or_default();
            let blank = line.len() - line.trim_start().len();
            utf16_len(&line[..blank]) + 1
        };
        Ok((path, a.line, column))
    }

    /// The language server of the position a call names, the position as `path:line:column`,
    /// and the position.
    async fn lsp_at(
        &self,
        a: PositionArgs,
    ) -> Result<(Arc<trellis_lsp::LspClient>, String, (String, u32, u32)), String> {
        let (path, line, column) = self.resolve(a).await?;
        let lsp = self.lsp.for_path(&path).await.map_err(|e| e.to_string())?;
        Ok((lsp, format!("{path}:{line}:{column}"), (path, line, column)))
    }

    #[tool(
        description = "Where the symbol at a position (path, 1-based line and column) or named `symbol` is defined, from the file's language server (rust-analyzer, pyright, typescript-language-server).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn definition(
        &self,
        Parameters(a): Parameters<PositionArgs>,
    ) -> Result<Json<Places>, String> {
        let (lsp, at, (path, line, column)) = self.lsp_at(a).await?;
        let places = lsp
            .definition(&path, line, column)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Json(Places { at, places }))
    }

    #[tool(
        description = "Every reference to the symbol at a position (path, 1-based line and column) or named `symbol`, its declaration included, from the file's language server.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn references(
        &self,
        Parameters(a): Parameters<PositionArgs>,
    ) -> Result<Json<Places>, String> {
        let (lsp, at, (path, line, column)) = self.lsp_at(a).await?;
        let places = lsp
            .references(&path, line, column)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Json(Places { at, places }))
    }

    #[tool(
        description = "The type, signature and documentation of the symbol at a position (path, 1-based line and column) or named `symbol`, from the file's language server.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn hover(
        &self,
        Parameters(a): Parameters<PositionArgs>,
    ) -> Result<Json<HoverResult>, String> {
        let (lsp, at, (path, line, column)) = self.lsp_at(a).await?;
        let text = lsp
            .hover(&path, line, column)
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        Ok(Json(HoverResult { at, text }))
    }
}

/// Whether a line is a comment, a doc comment or an attribute/decorator.
fn is_comment_or_attribute(line: &str) -> bool {
    let t = line.trim_start();
    ["//", "/*", "*", "#", "@", "\"\"\"", "'''"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// Byte offset of `word` in `line` as a whole identifier.
fn word_at(line: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(word).map(|(i, _)| i).find(|&i| {
        !line[..i].chars().next_back().is_some_and(ident)
            && !line[i + word.len()..].chars().next().is_some_and(ident)
    })
}

/// Length of `s` in UTF-16 code units (how LSP counts columns).
fn utf16_len(s: &str) -> u32 {
    u32::try_from(s.encode_utf16().count()).unwrap_or(u32::MAX)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("trellis", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Code intelligence over one workspace's index: search code and documents, find \
                 symbols and what encloses a line, and a ranked map of the repository. Paths \
                 are relative to the workspace root.",
            )
    }
}

/// Serves `server` on stdin/stdout until the client closes the connection.
pub async fn serve_stdio(server: CodeServer) -> Result<(), Error> {
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

fn symbol(c: trellis_index::Chunk) -> Symbol {
    Symbol {
        name: c.name,
        qualified_name: c.qualified_name,
        kind: c.kind.as_str().to_owned(),
        path: c.path,
        start_line: c.start_line,
        end_line: c.end_line,
        signature: c.signature,
        doc: c.doc,
    }
}

fn check_text(field: &str, text: &str) -> Result<(), String> {
    if text.len() > MAX_QUERY {
        return Err(format!(
            "{field} is {} bytes; at most {MAX_QUERY}",
            text.len()
        ));
    }
    Ok(())
}

fn check_budget(budget: u32) -> Result<u32, String> {
    if budget == 0 || budget > MAX_BUDGET {
        return Err(format!(
            "budget_tokens {budget} is out of range: 1 to {MAX_BUDGET}"
        ));
    }
    Ok(budget)
}

/// A workspace-relative path with `/` separators, or why it is refused.
fn relative(path: &str) -> Result<String, String> {
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

/// Decides whether a bearer token is the right one (constant time, by the caller's token).
pub type Authorize = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Serves `server` over Streamable HTTP at `/mcp` on `listener` (a loopback address) until
/// `shutdown`: every request needs `Authorization: Bearer <token>` (`authorize`), a `Host`
/// naming this loopback port, and, when it has an `Origin`, this server's own origin
/// (DNS-rebinding and cross-site requests are refused).
pub async fn serve_http(
    server: CodeServer,
    listener: tokio::net::TcpListener,
    authorize: Authorize,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), Error> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let port = listener
        .local_addr()
        .map_err(|e| Error::Mcp(e.to_string()))?
        .port();
    let hosts = [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    let origins = [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
    ];
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .with_cancellation_token(shutdown.child_token());
    let service: StreamableHttpService<CodeServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let authorize = authorize.clone();
                    async move {
                        let given = req
                            .headers()
                            .get(axum::http::header::AUTHORIZATION)
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.strip_prefix("Bearer "))
                            .unwrap_or_default();
                        if given.is_empty() || !authorize(given) {
                            return axum::response::IntoResponse::into_response((
                                axum::http::StatusCode::UNAUTHORIZED,
                                [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
                                "a bearer token is needed: the one in trellis's serve-token file",
                            ));
                        }
                        next.run(req).await
                    }
                },
            ));
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(|e| Error::Mcp(e.to_string()))
}
