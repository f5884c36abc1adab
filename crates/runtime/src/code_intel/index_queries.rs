//! Queries over the workspace's index: `search`, `doc_sections`, `symbols`, `symbol_at`,
//! `repo_map` and `ast_context_map`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trellis_index::{ChunkKind, RepoMapRequest, RetrievalRequest, RetrievalScope, SymbolQuery};

use super::{CodeIntel, Error, MAX_LIMIT, check_budget, check_text, relative};

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

impl CodeIntel {
    /// The workspace's code best matching `query` (hybrid full-text and symbol search),
    /// packed to the budget.
    pub async fn search(&self, a: SearchArgs) -> Result<SearchResult, Error> {
        self.retrieve(a, RetrievalScope::code()).await
    }

    /// The workspace's document sections best matching `query`, packed to the budget.
    pub async fn doc_sections(&self, a: SearchArgs) -> Result<SearchResult, Error> {
        self.retrieve(a, RetrievalScope::docs()).await
    }

    async fn retrieve(&self, a: SearchArgs, scope: RetrievalScope) -> Result<SearchResult, Error> {
        check_text("query", &a.query)?;
        let budget = check_budget(a.budget_tokens)?;
        self.with_index(move |index| {
            let pack = index
                .retrieve(&RetrievalRequest {
                    query: a.query.clone(),
                    scope: &scope,
                    stage: None,
                    budget_tokens: Some(budget as usize),
                    candidates: None,
                })
                .map_err(|e| e.to_string())?;
            Ok(SearchResult {
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
            })
        })
        .await
    }

    /// Symbols or document sections by name, optionally by kind and path prefix; exact
    /// matches first.
    pub async fn symbols(&self, a: SymbolsArgs) -> Result<Symbols, Error> {
        check_text("name", &a.name)?;
        if a.name.trim().is_empty() {
            return Err(Error::Failed(
                "name is empty: give a symbol name or part of one".into(),
            ));
        }
        let kinds = match a.kind.trim() {
            "" => Vec::new(),
            k => vec![ChunkKind::parse(k).ok_or_else(|| {
                Error::Failed(format!(
                    "unknown kind {k:?}: use function, method, class, enum, interface, type, module, constant, file or section"
                ))
            })?],
        };
        let path_prefix = match a.path.trim() {
            "" => None,
            p => Some(relative(p)?),
        };
        if a.limit > MAX_LIMIT {
            return Err(Error::Failed(format!(
                "limit {} is over {MAX_LIMIT}",
                a.limit
            )));
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
            Ok(Symbols {
                symbols: found.into_iter().map(symbol).collect(),
            })
        })
        .await
    }

    /// The symbols (or document sections) that enclose a line of a file, innermost first.
    pub async fn symbol_at(&self, a: SymbolAtArgs) -> Result<Symbols, Error> {
        let path = relative(&a.path)?;
        if a.line == 0 {
            return Err(Error::Failed("line is 1-based: 0 is not a line".into()));
        }
        let root = self.repo.clone();
        self.with_index(move |index| {
            let around = index.symbols_at(&path, a.line).map_err(|e| e.to_string())?;
            if around.is_empty() && !root.join(&path).is_file() {
                return Err(Error::Failed(format!(
                    "{path}: no such file in the workspace"
                )));
            }
            Ok(Symbols {
                symbols: around.into_iter().map(symbol).collect(),
            })
        })
        .await
    }

    /// A map of the repository: files with their most important definitions, ranked by
    /// PageRank over references, personalised towards files and identifiers.
    pub async fn repo_map(&self, a: RepoMapArgs) -> Result<RepoMapResult, Error> {
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
            Ok(RepoMapResult {
                text: map.text,
                tokens: u32::try_from(map.tokens).unwrap_or(u32::MAX),
            })
        })
        .await
    }

    /// The AST context map of files (every indexed file when `paths` is empty), as
    /// pretty-printed JSON.
    pub async fn ast_context_map(&self, a: AstMapArgs) -> Result<String, Error> {
        let paths = a
            .paths
            .iter()
            .map(|f| relative(f))
            .collect::<Result<Vec<_>, _>>()?;
        self.with_index(move |index| {
            let map = index.ast_context_map(&paths).map_err(|e| e.to_string())?;
            Ok(serde_json::to_string_pretty(&map).map_err(|e| e.to_string())?)
        })
        .await
    }
}

fn symbol(c: trellis_index::Chunk) -> Symbol {
    Symbol {
        name: c.decl.name,
        qualified_name: c.decl.qualified_name,
        kind: c.decl.kind.as_str().to_owned(),
        path: c.path,
        start_line: c.decl.start_line,
        end_line: c.decl.end_line,
        signature: c.decl.signature,
        doc: c.decl.doc,
    }
}
