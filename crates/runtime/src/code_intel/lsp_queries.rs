//! What the file's language server says: `definition`, `references`, `hover`, `signature`
//! and `diagnostics` at a position ([`PositionArgs`], resolved by [`CodeIntel::position`]).

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trellis_index::locate::utf16_len;
use trellis_lsp::LspClient;

use super::{CodeIntel, Diagnostic, Error, Place, Signatures, relative};

/// Longest wait for a language server's diagnostics a call may ask for, in seconds.
const MAX_WAIT_SECS: u32 = 120;
/// How many references of a symbol are tried for a call to take its signature from.
const CALLS_TRIED: usize = 20;

/// `definition`, `references`, `hover` and `signature` arguments: a position, or a symbol's
/// name.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
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
    pub places: Vec<Place>,
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
    pub help: Signatures,
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
    pub diagnostics: Vec<Diagnostic>,
    /// How many are errors.
    pub errors: u32,
    /// How many are warnings.
    pub warnings: u32,
    /// Whether the server checked the file as it is now within the wait (false: what it
    /// said before, or nothing).
    pub complete: bool,
}

impl CodeIntel {
    /// The language server of the position a call names, the position as
    /// `path:line:column`, and the position.
    async fn lsp_at(
        &self,
        a: &PositionArgs,
    ) -> Result<(Arc<LspClient>, String, (String, u32, u32)), Error> {
        let site = self.position(a).await?;
        let (path, line, column) = (site.path, site.line, site.column);
        let lsp = self
            .lsp
            .for_path(&path)
            .await
            .map_err(|e| Error::Failed(e.to_string()))?;
        Ok((lsp, format!("{path}:{line}:{column}"), (path, line, column)))
    }

    /// Where the symbol at a position is defined.
    pub async fn definition(&self, a: &PositionArgs) -> Result<Places, Error> {
        let (lsp, at, (path, line, column)) = self.lsp_at(a).await?;
        match lsp.definition(&path, line, column).await {
            Ok(places) => Ok(Places { at, places }),
            Err(source) => Err(Error::Lsp { at, source }),
        }
    }

    /// Every reference to the symbol at a position, its declaration included.
    pub async fn references(&self, a: &PositionArgs) -> Result<Places, Error> {
        let (lsp, at, (path, line, column)) = self.lsp_at(a).await?;
        match lsp.references(&path, line, column).await {
            Ok(places) => Ok(Places { at, places }),
            Err(source) => Err(Error::Lsp { at, source }),
        }
    }

    /// The type, signature and documentation of the symbol at a position (empty when the
    /// server has none).
    pub async fn hover(&self, a: &PositionArgs) -> Result<HoverResult, Error> {
        let (lsp, at, (path, line, column)) = self.lsp_at(a).await?;
        match lsp.hover(&path, line, column).await {
            Ok(text) => Ok(HoverResult {
                at,
                text: text.unwrap_or_default(),
            }),
            Err(source) => Err(Error::Lsp { at, source }),
        }
    }

    /// The signature of the function called around a position (inside a call's
    /// parentheses, or on the called name), or of the function named `symbol` (taken at
    /// one of its calls).
    pub async fn signature(&self, a: &PositionArgs) -> Result<SignatureResult, Error> {
        let by_symbol = !a.symbol.trim().is_empty();
        let symbol = a.symbol.trim().to_owned();
        let (lsp, at, (path, line, column)) = self.lsp_at(a).await?;
        let calls = if by_symbol {
            // The declaration has no signature help: its calls do.
            let refs = match lsp.references(&path, line, column).await {
                Ok(refs) => refs,
                Err(source) => return Err(Error::Lsp { at, source }),
            };
            refs.into_iter()
                .filter(|p| !(p.path == path && p.line == line))
                .map(|p| (p.path, p.line, p.column))
                .take(CALLS_TRIED)
                .collect()
        } else {
            vec![(path, line, column)]
        };
        for (path, line, column) in calls {
            let Ok(text) = std::fs::read_to_string(self.repo.join(&path)) else {
                continue;
            };
            let l = line
                .checked_sub(1)
                .and_then(|n| text.lines().nth(n as usize))
                .unwrap_or_default();
            let column = into_call(l, column).unwrap_or(column);
            let at = format!("{path}:{line}:{column}");
            match lsp.signature(&path, line, column).await {
                Ok(Some(help)) => return Ok(SignatureResult { at, help }),
                Ok(None) => {}
                Err(source) => return Err(Error::Lsp { at, source }),
            }
        }
        Err(Error::Failed(if by_symbol {
            format!(
                "no call of {symbol:?} found to take its signature from; `hover` on it gives its declaration"
            )
        } else {
            format!(
                "{at} is not in a call's arguments: give a position between a call's parentheses, or on the called name"
            )
        }))
    }

    /// The language server's diagnostics for a file, waiting up to `wait_secs` for it to
    /// check the file as it is on disk.
    pub async fn diagnostics(&self, a: &DiagnosticsArgs) -> Result<DiagnosticsResult, Error> {
        let path = relative(&a.path)?;
        if a.wait_secs > MAX_WAIT_SECS {
            return Err(Error::Failed(format!(
                "wait_secs {} is out of range: 0 to {MAX_WAIT_SECS}",
                a.wait_secs
            )));
        }
        if !self.repo.join(&path).is_file() {
            return Err(Error::Failed(format!(
                "{path}: no such file in the workspace"
            )));
        }
        let lsp = self
            .lsp
            .for_path(&path)
            .await
            .map_err(|e| Error::Failed(e.to_string()))?;
        let found = lsp
            .diagnostics(&path, Duration::from_secs(a.wait_secs.into()))
            .await
            .map_err(|e| Error::Failed(e.to_string()))?;
        let count = |severity: &str| {
            let n = found
                .diagnostics
                .iter()
                .filter(|d| d.severity == severity)
                .count();
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        Ok(DiagnosticsResult {
            errors: count("error"),
            warnings: count("warning"),
            path,
            complete: found.complete,
            diagnostics: found.diagnostics,
        })
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
