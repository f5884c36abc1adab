//! The agent tools `find_definition`, `get_references` and `get_signature`: the schema
//! agents are shown (`LspArgs`), answered by [`CodeIntel`]'s shared position resolution and
//! language-server queries.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trellis_tools::tool::typed;
use trellis_tools::{Error as ToolError, Tool, ToolContext, TypedTool};

use super::{CodeIntel, Error, LSP_TOOLS, Place, PositionArgs};

impl CodeIntel {
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
}

/// A position: a symbol's name, or a place in a file, in the schema the agent tools have
/// always shown models (field order and wording; `trellis mcp` publishes [`PositionArgs`]'s).
/// It carries no logic of its own: a call is resolved as the [`PositionArgs`] it converts to.
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

impl From<LspArgs> for PositionArgs {
    fn from(a: LspArgs) -> Self {
        Self {
            path: a.path,
            line: a.line,
            column: a.column,
            symbol: a.symbol,
        }
    }
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

    async fn run(&self, ctx: &ToolContext, mut input: LspArgs) -> trellis_tools::Result<LspOut> {
        if !input.path.trim().is_empty() {
            // Refuses paths outside the workspace (and absolute ones) the same way the file
            // tools do; the position names the file as the workspace resolved it.
            input.path = ctx.workspace().resolve(input.path.trim())?.rel;
        }
        let at = PositionArgs::from(input);
        Ok(match self.kind {
            Kind::Definition => {
                let p = self.intel.definition(&at).await.map_err(failed)?;
                LspOut::Places(PlacesOut {
                    at: p.at,
                    places: p.places,
                })
            }
            Kind::References => {
                let p = self.intel.references(&at).await.map_err(failed)?;
                LspOut::Places(PlacesOut {
                    at: p.at,
                    places: p.places,
                })
            }
            Kind::Signature => {
                let h = self.intel.hover(&at).await.map_err(failed)?;
                LspOut::Signature(SignatureOut {
                    at: h.at,
                    signature: h.text,
                })
            }
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

/// A failed call as agents read it: a missing symbol with how to name one, a language
/// server's failure with the position.
fn failed(e: Error) -> ToolError {
    ToolError::Failed(match e {
        Error::NoSymbol(symbol) => format!(
            "no symbol named `{symbol}` in the index; give its exact name (e.g. \
                 `reserve` or `Inventory.reserve`) or a path and line"
        ),
        Error::Lsp { at, source } => format!("{at}: {source}"),
        e => e.to_string(),
    })
}
