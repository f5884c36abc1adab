//! The `lsp_tools` retrieval source: definitions, uses and signatures of the symbols a
//! retrieval's queries name, from the language servers.

use std::collections::HashSet;
use std::path::Path;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use trellis_agents::retrieval::{PackedItem, Source, SourceError, SourceRequest};
use trellis_index::Site;

use super::{CodeIntel, LSP_SOURCE, Place};

/// Symbols a retrieval looks up per query, and places it returns per symbol.
const SYMBOLS_PER_QUERY: usize = 3;
const PLACES_PER_SYMBOL: usize = 8;
/// Lines shown around a use.
const CONTEXT_LINES: u32 = 3;

/// The `lsp_tools` retrieval source.
pub struct LspSource {
    intel: CodeIntel,
}

impl LspSource {
    /// A source over `intel`.
    pub fn new(intel: CodeIntel) -> Self {
        Self { intel }
    }

    /// Definition and uses of each known symbol named in `query`, as code regions.
    async fn one(&self, query: &str, cancel: &CancellationToken) -> Vec<PackedItem> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let names = trellis_agents::retrieval::identifiers(query, 16);
        let located = match self.intel.locate(names, SYMBOLS_PER_QUERY).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!("lsp_tools: the index: {e}");
                return out;
            }
        };
        for (name, site) in located {
            if cancel.is_cancelled() {
                break;
            }
            // Started on a task of its own: a server still indexing when this source's
            // time is up goes on starting for the next retrieval.
            let start = tokio::spawn({
                let (pool, path) = (self.intel.lsp.clone(), site.path.clone());
                async move { pool.for_path(&path).await }
            });
            let Ok(Ok(lsp)) = start.await else {
                continue;
            };
            match lsp.hover(&site.path, site.line, site.column).await {
                Ok(Some(h)) if !h.trim().is_empty() => out.push(signature_item(&name, &site, h)),
                Ok(_) => {}
                Err(e) => tracing::debug!("lsp_tools: signature of {name}: {e}"),
            }
            let refs = match lsp.references(&site.path, site.line, site.column).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!("lsp_tools: references of {name}: {e}");
                    continue;
                }
            };
            for place in refs.into_iter().take(PLACES_PER_SYMBOL) {
                if !seen.insert((place.path.clone(), place.line)) {
                    continue;
                }
                let declared = place.path == site.path && place.line == site.line;
                if let Some(item) = self.region(&place, &name, declared) {
                    out.push(item);
                }
            }
        }
        out
    }

    /// The lines around `place` (files outside the repository are skipped).
    fn region(&self, place: &Place, symbol: &str, declared: bool) -> Option<PackedItem> {
        if Path::new(&place.path).is_absolute() {
            return None;
        }
        let text = std::fs::read_to_string(self.intel.repo.join(&place.path)).ok()?;
        let lines: Vec<&str> = text.lines().collect();
        let start = place.line.saturating_sub(CONTEXT_LINES).max(1);
        let end = (place.end_line.max(place.line) + CONTEXT_LINES).min(lines.len() as u32);
        if start > end {
            return None;
        }
        let body = lines[(start - 1) as usize..end as usize].join("\n");
        Some(PackedItem {
            source: LSP_SOURCE.to_owned(),
            path: place.path.clone(),
            start_line: start,
            end_line: end,
            symbol: Some(symbol.to_owned()),
            section: None,
            kind: if declared { "definition" } else { "reference" }.to_owned(),
            text: body,
            tokens: 0,
            score: 0.0,
            note: Some(if declared {
                format!("where `{symbol}` is declared (language server)")
            } else {
                format!("uses `{symbol}` at line {} (language server)", place.line)
            }),
        })
    }
}

/// A symbol's type, signature and documentation from the language server: not lines of the
/// file (line 0, as for web pages), with the declaration's place in the note.
fn signature_item(name: &str, site: &Site, hover: String) -> PackedItem {
    PackedItem {
        source: LSP_SOURCE.to_owned(),
        path: site.path.clone(),
        start_line: 0,
        end_line: 0,
        symbol: Some(name.to_owned()),
        section: None,
        kind: "signature".to_owned(),
        text: hover,
        tokens: 0,
        score: 0.0,
        note: Some(format!(
            "type, signature and documentation of `{name}` declared at line {} (language server)",
            site.line
        )),
    }
}

impl Source for LspSource {
    fn name(&self) -> &str {
        LSP_SOURCE
    }

    fn code_only(&self) -> bool {
        true
    }

    fn search(
        &self,
        request: SourceRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Vec<Vec<PackedItem>>, SourceError>> {
        let me = Self {
            intel: self.intel.clone(),
        };
        Box::pin(async move {
            let mut lists = Vec::with_capacity(request.queries.len());
            for q in &request.queries {
                let mut items = me.one(q, &cancel).await;
                items.truncate(request.limit.max(1));
                lists.push(items);
            }
            Ok(lists)
        })
    }
}
