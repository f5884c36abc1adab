//! The workspace's language servers for agents and the retrieval agent (a workflow's
//! `lsp_integration` and the `lsp_tools` retrieval source; `docs/mcp.md`, `docs/retrieval.md`).
//!
//! - **Agent tools** `find_definition`, `get_references`, `get_signature` (the names a
//!   workflow's `lsp_integration.tools` lists), granted to a workflow's agents when its
//!   `retrieval_strategy_config.lsp_integration` is enabled: a position (`path`, `line`,
//!   `column`) or a `symbol` looked up in the index.
//! - **Retrieval source** `lsp_tools` (code workflows only): the identifiers of the
//!   retrieval's queries (a failure's named symbols first) that the index knows as symbols,
//!   their signatures (hover: type and documentation), definitions and the places that use
//!   them, as code regions.
//!
//! Both ask the repository's language servers (one [`LspPool`] per runtime, started on first
//! use, see `[lsp]`), so answers describe the repository as checked out, not a run's
//! uncommitted edits; paths are the same relative paths in a run's worktree.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use trellis_agents::retrieval::{PackedItem, Source, SourceError, SourceRequest};
use trellis_index::locate::site_at;
use trellis_index::{Index, IndexConfig, Site};
use trellis_lsp::{LspPool, Place};
use trellis_tools::tool::typed;
use trellis_tools::{Error as ToolError, Tool, ToolContext, TypedTool};

/// The agent tools' names, as a workflow's `lsp_integration.tools` lists them.
pub const LSP_TOOLS: [&str; 3] = trellis_index::strategy::LSP_TOOL_NAMES;

/// The retrieval source's name in `rag_strategy.sources`.
pub const LSP_SOURCE: &str = "lsp_tools";

/// Symbols a retrieval looks up per query, and places it returns per symbol.
const SYMBOLS_PER_QUERY: usize = 3;
const PLACES_PER_SYMBOL: usize = 8;
/// Lines shown around a use.
const CONTEXT_LINES: u32 = 3;

/// The repository's index and language servers.
#[derive(Clone, Debug)]
pub struct CodeIntel {
    repo: PathBuf,
    index: IndexConfig,
    lsp: Arc<LspPool>,
}

impl CodeIntel {
    /// Code intelligence over `repo` with its index settings and language servers.
    pub fn new(repo: &Path, index: IndexConfig, lsp: Arc<LspPool>) -> Self {
        Self {
            repo: repo.to_path_buf(),
            index,
            lsp,
        }
    }

    /// The agent tools.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            typed(LspTool {
                intel: self.clone(),
                kind: Kind::Definition,
            }),
            typed(LspTool {
                intel: self.clone(),
                kind: Kind::References,
            }),
            typed(LspTool {
                intel: self.clone(),
                kind: Kind::Signature,
            }),
        ]
    }

    /// Where each of `names` is declared, for the first `max` the index knows (one index
    /// handle, off the async workers).
    async fn locate(&self, names: Vec<String>, max: usize) -> Result<Vec<(String, Site)>, String> {
        let (repo, config) = (self.repo.clone(), self.index.clone());
        tokio::task::spawn_blocking(move || {
            let index = Index::open(&repo, config).map_err(|e| e.to_string())?;
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
        .map_err(|e| format!("internal error: {e}"))?
    }

    /// The position a call names: `symbol`, or `path` + `line` (+ `column`; default the
    /// line's first non-blank character).
    async fn position(&self, a: &LspArgs) -> Result<Site, String> {
        let symbol = a.symbol.trim();
        if symbol.is_empty() {
            return site_at(&self.repo, &a.path, a.line, a.column);
        }
        let found = self.locate(vec![symbol.to_owned()], 1).await?;
        found
            .into_iter()
            .next()
            .map(|(_, site)| site)
            .ok_or_else(|| {
                format!(
                    "no symbol named `{symbol}` in the index; give its exact name (e.g. \
                 `reserve` or `Inventory.reserve`) or a path and line"
                )
            })
    }
}

/// A position: a symbol's name, or a place in a file.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspArgs {
    /// A symbol's exact name or qualified name (`reserve`, `Inventory.reserve`); or leave
    /// empty and give `path` and `line`.
    #[serde(default)]
    pub symbol: String,
    /// A file, relative to the workspace root.
    #[serde(default)]
    pub path: String,
    /// 1-based line in `path`.
    #[serde(default)]
    pub line: u32,
    /// 1-based column of the symbol on that line (default: the first non-blank character).
    #[serde(default)]
    pub column: u32,
}

/// Places found for a position.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct PlacesOut {
    /// The position asked about, `path:line:column`.
    pub at: String,
    /// The places, 1-based.
    pub places: Vec<Place>,
}

/// What the language server says about a symbol.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SignatureOut {
    /// The position asked about, `path:line:column`.
    pub at: String,
    /// Its type, signature and documentation (Markdown); empty when the server has none.
    pub signature: String,
}

/// Either tool output.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum LspOut {
    /// `find_definition`, `get_references`.
    Places(PlacesOut),
    /// `get_signature`.
    Signature(SignatureOut),
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Definition,
    References,
    Signature,
}

struct LspTool {
    intel: CodeIntel,
    kind: Kind,
}

impl TypedTool for LspTool {
    type Input = LspArgs;
    type Output = LspOut;

    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Definition => LSP_TOOLS[0],
            Kind::References => LSP_TOOLS[1],
            Kind::Signature => LSP_TOOLS[2],
        }
    }

    fn description(&self) -> &'static str {
        match self.kind {
            Kind::Definition => {
                "Where a symbol is defined, from the language server: give `symbol` (its exact \
                 name) or `path` + 1-based `line` (+ `column`) of a use."
            }
            Kind::References => {
                "Every place that uses a symbol (its declaration included), from the language \
                 server: give `symbol` (its exact name) or `path` + 1-based `line` (+ `column`)."
            }
            Kind::Signature => {
                "A symbol's type, signature and documentation, from the language server: give \
                 `symbol` (its exact name) or `path` + 1-based `line` (+ `column`)."
            }
        }
    }

    async fn run(&self, ctx: &ToolContext, input: LspArgs) -> trellis_tools::Result<LspOut> {
        if !input.path.trim().is_empty() {
            // Refuses paths outside the workspace the same way the file tools do.
            ctx.workspace().resolve(input.path.trim())?;
        }
        let site = self
            .intel
            .position(&input)
            .await
            .map_err(ToolError::Failed)?;
        let at = format!("{}:{}:{}", site.path, site.line, site.column);
        let lsp = self
            .intel
            .lsp
            .for_path(&site.path)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let failed = |e: trellis_lsp::Error| ToolError::Failed(format!("{at}: {e}"));
        Ok(match self.kind {
            Kind::Definition => LspOut::Places(PlacesOut {
                places: lsp
                    .definition(&site.path, site.line, site.column)
                    .await
                    .map_err(failed)?,
                at,
            }),
            Kind::References => LspOut::Places(PlacesOut {
                places: lsp
                    .references(&site.path, site.line, site.column)
                    .await
                    .map_err(failed)?,
                at,
            }),
            Kind::Signature => LspOut::Signature(SignatureOut {
                signature: lsp
                    .hover(&site.path, site.line, site.column)
                    .await
                    .map_err(failed)?
                    .unwrap_or_default(),
                at,
            }),
        })
    }

    fn render(&self, out: &LspOut) -> String {
        match out {
            LspOut::Places(p) if p.places.is_empty() => format!("{}: nothing found", p.at),
            LspOut::Places(p) => {
                let mut s = format!("{} ({} places):\n", p.at, p.places.len());
                for place in &p.places {
                    s.push_str(&format!("{}:{}:{}\n", place.path, place.line, place.column));
                }
                s
            }
            LspOut::Signature(h) if h.signature.is_empty() => {
                format!("{}: the language server has nothing to say here", h.at)
            }
            LspOut::Signature(h) => format!("{}:\n{}", h.at, h.signature),
        }
    }
}

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
