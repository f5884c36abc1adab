//! The tools answered by the file's language server: `definition`, `references`, `hover`,
//! `signature` and `diagnostics`, through [`trellis_core::code_intel::CodeIntel`].

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};

use crate::{
    CodeServer, DiagnosticsArgs, DiagnosticsResult, HoverResult, Places, PositionArgs,
    SignatureResult,
};

#[tool_router(router = lsp_router, vis = "pub(crate)")]
impl CodeServer {
    #[tool(
        description = "Where the symbol at a position (path, 1-based line and column) or named `symbol` is defined, from the file's language server (rust-analyzer, pyright, typescript-language-server).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn definition(
        &self,
        Parameters(a): Parameters<PositionArgs>,
    ) -> Result<Json<Places>, String> {
        self.intel
            .definition(&a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "Every reference to the symbol at a position (path, 1-based line and column) or named `symbol`, its declaration included, from the file's language server.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn references(
        &self,
        Parameters(a): Parameters<PositionArgs>,
    ) -> Result<Json<Places>, String> {
        self.intel
            .references(&a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "The type, signature and documentation of the symbol at a position (path, 1-based line and column) or named `symbol`, from the file's language server.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn hover(
        &self,
        Parameters(a): Parameters<PositionArgs>,
    ) -> Result<Json<HoverResult>, String> {
        self.intel
            .hover(&a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "The signature of the function called around a position (path, 1-based line and column inside a call's parentheses, or on the called name) — its parameters, documentation, and which parameter the position is at — or of the function named `symbol` (taken at one of its calls), from the file's language server.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn signature(
        &self,
        Parameters(a): Parameters<PositionArgs>,
    ) -> Result<Json<SignatureResult>, String> {
        self.intel
            .signature(&a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }

    #[tool(
        description = "The language server's diagnostics for a file (type errors, unresolved names, warnings): each with its 1-based range, severity, code, source and message. Reads the file as it is on disk; waits up to `wait_secs` for the server to check it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn diagnostics(
        &self,
        Parameters(a): Parameters<DiagnosticsArgs>,
    ) -> Result<Json<DiagnosticsResult>, String> {
        self.intel
            .diagnostics(&a)
            .await
            .map(Json)
            .map_err(|e| e.to_string())
    }
}
