//! The tools answered by the file's language server (`trellis-lsp`): `definition`,
//! `references`, `hover`, `signature` and `diagnostics`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trellis_index::locate::{site_at, utf16_len};

use crate::{CodeServer, check_text, relative};

/// Longest wait for a language server's diagnostics a call may ask for, in seconds.
const MAX_WAIT_SECS: u32 = 120;
/// How many references of a symbol are tried for a call to take its signature from.
const CALLS_TRIED: usize = 20;

/// `definition`, `references`, `hover` and `signature` arguments: a position, or a symbol's
/// name.
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

/// `signature` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SignatureResult {
    /// The position asked about (`path:line:column`): inside a call's arguments.
    pub at: String,
    /// The callee's signatures and which parameter the position is at.
    #[serde(flatten)]
    pub help: trellis_lsp::Signatures,
}

/// `diagnostics` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DiagnosticsArgs {
    /// A file, relative to the workspace.
    pub path: String,
    /// How long to wait for the language server to check the file, in seconds (default
    /// 20, at most 120).
    #[serde(default = "default_wait")]
    pub wait_secs: u32,
}

fn default_wait() -> u32 {
    20
}

/// `diagnostics` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DiagnosticsResult {
    /// The file.
    pub path: String,
    /// Errors, warnings, information and hints, by position (1-based lines and columns).
    pub diagnostics: Vec<trellis_lsp::Diagnostic>,
    /// How many are errors.
    pub errors: u32,
    /// How many are warnings.
    pub warnings: u32,
    /// Whether the server checked the file as it is now within the wait (false: what it
    /// said before, or nothing).
    pub complete: bool,
}

#[tool_router(router = lsp_router, vis = "pub(crate)")]
impl CodeServer {
    /// The position a call names: `path` + `line` (+ `column`), or `symbol` resolved through
    /// the index to where it is declared.
    async fn resolve(&self, a: PositionArgs) -> Result<(String, u32, u32), String> {
        if !a.symbol.trim().is_empty() {
            check_text("symbol", &a.symbol)?;
            let name = a.symbol.trim().to_owned();
            return self
                .with_index(move |index| {
                    let site = index
                        .locate_symbol(&name)
                        .map_err(|e| e.to_string())?
                        .ok_or_else(|| format!("no symbol named {name:?} in the index"))?;
                    Ok((site.path, site.line, site.column))
                })
                .await;
        }
        let path = relative(&a.path)?;
        let site = site_at(&self.root, &path, a.line, a.column)?;
        Ok((site.path, site.line, site.column))
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

    #[tool(
        description = "The signature of the function called around a position (path, 1-based line and column inside a call's parentheses, or on the called name) — its parameters, documentation, and which parameter the position is at — or of the function named `symbol` (taken at one of its calls), from the file's language server.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn signature(
        &self,
        Parameters(a): Parameters<PositionArgs>,
    ) -> Result<Json<SignatureResult>, String> {
        let by_symbol = !a.symbol.trim().is_empty();
        let symbol = a.symbol.trim().to_owned();
        let (lsp, at, (path, line, column)) = self.lsp_at(a).await?;
        let calls = if by_symbol {
            // The declaration has no signature help: its calls do.
            let refs = lsp
                .references(&path, line, column)
                .await
                .map_err(|e| e.to_string())?;
            refs.into_iter()
                .filter(|p| !(p.path == path && p.line == line))
                .map(|p| (p.path, p.line, p.column))
                .take(CALLS_TRIED)
                .collect()
        } else {
            vec![(path, line, column)]
        };
        for (path, line, column) in calls {
            let Ok(text) = std::fs::read_to_string(self.root.join(&path)) else {
                continue;
            };
            let l = text.lines().nth(line as usize - 1).unwrap_or_default();
            let column = into_call(l, column).unwrap_or(column);
            let help = lsp
                .signature(&path, line, column)
                .await
                .map_err(|e| e.to_string())?;
            if let Some(help) = help {
                let at = format!("{path}:{line}:{column}");
                return Ok(Json(SignatureResult { at, help }));
            }
        }
        Err(if by_symbol {
            format!(
                "no call of {symbol:?} found to take its signature from; `hover` on it gives its declaration"
            )
        } else {
            format!(
                "{at} is not in a call's arguments: give a position between a call's parentheses, or on the called name"
            )
        })
    }

    #[tool(
        description = "The language server's diagnostics for a file (type errors, unresolved names, warnings): each with its 1-based range, severity, code, source and message. Reads the file as it is on disk; waits up to `wait_secs` for the server to check it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn diagnostics(
        &self,
        Parameters(a): Parameters<DiagnosticsArgs>,
    ) -> Result<Json<DiagnosticsResult>, String> {
        let path = relative(&a.path)?;
        if a.wait_secs > MAX_WAIT_SECS {
            return Err(format!(
                "wait_secs {} is out of range: 0 to {MAX_WAIT_SECS}",
                a.wait_secs
            ));
        }
        if !self.root.join(&path).is_file() {
            return Err(format!("{path}: no such file in the workspace"));
        }
        let lsp = self.lsp.for_path(&path).await.map_err(|e| e.to_string())?;
        let found = lsp
            .diagnostics(&path, Duration::from_secs(a.wait_secs.into()))
            .await
            .map_err(|e| e.to_string())?;
        let count = |severity: &str| {
            let n = found
                .diagnostics
                .iter()
                .filter(|d| d.severity == severity)
                .count();
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        Ok(Json(DiagnosticsResult {
            errors: count("error"),
            warnings: count("warning"),
            path,
            complete: found.complete,
            diagnostics: found.diagnostics,
        }))
    }
}

/// When 1-based UTF-16 `column` is on a name that is called (`post(b, 1)` at `post`), the
/// column just inside its parenthesis, where servers answer signature help.
fn into_call(line: &str, column: u32) -> Option<u32> {
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let start = byte_of(line, column)?;
    let rest = &line[start..];
    let name = rest.find(|c| !ident(c)).unwrap_or(rest.len());
    if name == 0 {
        return None;
    }
    let after = rest[name..].trim_start();
    after.strip_prefix('(')?;
    let paren = line.len() - after.len();
    Some(utf16_len(&line[..=paren]) + 1)
}

/// Byte offset in `line` of 1-based UTF-16 `column`.
fn byte_of(line: &str, column: u32) -> Option<usize> {
    let mut units = 0;
    for (i, c) in line.char_indices() {
        if units + 1 == column {
            return Some(i);
        }
        units += u32::try_from(c.len_utf16()).unwrap_or(2);
    }
    (units + 1 == column).then_some(line.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_called_name_moves_into_its_parentheses() {
        let line = "    postings.iter().fold(0, |b, p| post (b, *p))";
        let at = line.find("post (").unwrap() as u32 + 1;
        assert_eq!(into_call(line, at), Some(at + 6));
        // Mid-name, too; not on a name that is not called, nor past the end.
        assert_eq!(into_call(line, at + 2), Some(at + 6));
        assert_eq!(into_call(line, 5), None);
        assert_eq!(into_call(line, 500), None);
        // Columns count UTF-16 units: `é` is one, `𝕏` two.
        assert_eq!(into_call("é𝕏 f(1)", 5), Some(7));
    }

    #[test]
    fn columns_to_bytes() {
        assert_eq!(byte_of("ab", 1), Some(0));
        assert_eq!(byte_of("ab", 3), Some(2));
        assert_eq!(byte_of("𝕏a", 3), Some(4));
        assert_eq!(byte_of("ab", 4), None);
    }
}
