//! The tools over the workspace's index: `search`, `doc_sections`, `symbols`, `symbol_at`,
//! `repo_map` and `ast_context_map`, answered by [`trellis_core::code_intel::CodeIntel`].

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};

use crate::{
    AstMapArgs, CodeServer, RepoMapArgs, RepoMapResult, SearchArgs, SearchResult, SymbolAtArgs,
    Symbols, SymbolsArgs,
};

#[tool_router(router = index_router, vis = "pub(crate)")]
impl CodeServer {
    #[tool(
        description = "Search the workspace's code (hybrid full-text and symbol search) and return the best matching functions, classes and files, packed to a token budget, each with its path and line range.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search(
        &self,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, String> {
        self.intel
            .search(a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "Search the workspace's documents (README, docs, decision records, specifications) by section, packed to a token budget, each with its path and line range.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn doc_sections(
        &self,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, String> {
        self.intel
            .doc_sections(a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "Find symbols (functions, methods, classes, enums, interfaces, types, modules, constants) or document sections by name, optionally by kind and path prefix; exact matches first.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn symbols(
        &self,
        Parameters(a): Parameters<SymbolsArgs>,
    ) -> Result<Json<Symbols>, String> {
        self.intel
            .symbols(a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "The symbol (or document section) that encloses a line of a file, innermost first, with the ones around it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn symbol_at(
        &self,
        Parameters(a): Parameters<SymbolAtArgs>,
    ) -> Result<Json<Symbols>, String> {
        self.intel
            .symbol_at(a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "A map of the repository: files with their most important definitions, ranked by PageRank over references, personalised towards the given files and identifiers, within a token budget.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn repo_map(
        &self,
        Parameters(a): Parameters<RepoMapArgs>,
    ) -> Result<Json<RepoMapResult>, String> {
        self.intel
            .repo_map(a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "The AST context map of files: their functions (with parameters and return types), classes and imports, as JSON.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn ast_context_map(
        &self,
        Parameters(a): Parameters<AstMapArgs>,
    ) -> Result<String, String> {
        self.intel
            .ast_context_map(a)
            .await
            .map_err(|e| e.to_string())
    }
}
