//! Retrieval strategies as data: the `retrieval_strategy_config` block of a workflow YAML
//! (docs/retrieval.md, "Strategies as data"), accepted in both spellings — the workflow-file
//! form (`ast_parsing: {enabled, index_level}`, `rag_strategy: {chunk_strategy, sources}`) and
//! the orchestrator form (`ast_parsing: true`, `index_level`, `rag_chunk_strategy`,
//! `context_sources`, top-level `token_budget`).
//!
//! The retrieval agent follows the whole block; the index reads only its
//! [`scope`](RetrievalStrategyConfig::scope) (sources, AST on or off, hints), whose types
//! ([`ContextSource`], [`RetrievalHints`], [`StageKey`]) are the index's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use trellis_index::strategy::{ContextSource, RetrievalHints, RetrievalScope, StageKey};
use trellis_tools::registry::LSP_TOOLS;

fn yes() -> bool {
    true
}

/// The `retrieval_strategy_config` block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalStrategyConfig {
    /// Whether retrieval runs at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A name for logs (`code_domain_ast_lsp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy_name: Option<String>,
    /// Free text (`TART (Task-Aware Retrieval with Instructions)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern_applied: Option<String>,
    /// Symbol (AST) indexing: `true`/`false` or `{enabled, model, index_level, …}`.
    #[serde(default)]
    pub ast_parsing: AstParsing,
    /// Orchestrator form: the parser (`tree_sitter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ast_model: Option<String>,
    /// Orchestrator form: `function` or `section`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_level: Option<IndexLevel>,
    /// LSP tools (not provided by the index; recorded for the agents).
    #[serde(default)]
    pub lsp_integration: Toggle,
    /// Orchestrator form: `semantic_functions` or `semantic_sections`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rag_chunk_strategy: Option<String>,
    /// Workflow-file form: chunk strategy and sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rag_strategy: Option<RagStrategy>,
    /// Orchestrator form: sources with priorities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_sources: Vec<ContextSource>,
    /// What to favour and avoid, and the token budget per stage.
    #[serde(default)]
    pub retrieval_hints: RetrievalHints,
    /// Orchestrator form: budget per stage id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub token_budget: BTreeMap<StageKey, u64>,
}

/// `ast_parsing`: a flag or a block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AstParsing {
    /// `ast_parsing: true`.
    Flag(bool),
    /// `ast_parsing: {enabled: true, model: tree_sitter, index_level: function}`.
    Block(AstParsingBlock),
}

impl Default for AstParsing {
    fn default() -> Self {
        AstParsing::Flag(true)
    }
}

/// The block form of `ast_parsing`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AstParsingBlock {
    /// Whether to use symbols.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The parser (`tree_sitter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `function` or `section`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_level: Option<IndexLevel>,
    /// Index before the first stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upfront_execution: Option<bool>,
    /// Why (free text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A flag or a block with `enabled` (used for `lsp_integration`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Toggle {
    /// `lsp_integration: true`.
    Flag(bool),
    /// `lsp_integration: {enabled: true, execution: on_demand, tools: [...]}`.
    Block(ToggleBlock),
}

impl Default for Toggle {
    fn default() -> Self {
        Toggle::Flag(false)
    }
}

impl Toggle {
    /// Whether it is on.
    pub fn enabled(&self) -> bool {
        match self {
            Toggle::Flag(b) => *b,
            Toggle::Block(b) => b.enabled,
        }
    }
}

/// The block form of a toggle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToggleBlock {
    /// Whether it is on.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// When it runs (`on_demand`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    /// Tool names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Why (free text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Granularity of code retrieval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexLevel {
    /// Functions, methods and types (symbols).
    Function,
    /// Heading-scoped document sections.
    Section,
    /// Whole files (file chunks).
    File,
}

/// `rag_strategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RagStrategy {
    /// `semantic_functions` or `semantic_sections`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_strategy: Option<String>,
    /// Sources in order.
    #[serde(default)]
    pub sources: Vec<ContextSource>,
}

impl RetrievalStrategyConfig {
    /// Checks a workflow's `retrieval_strategy_config` block (the workflow loader's checker):
    /// it must parse, and `lsp_integration.tools` may name only [`LSP_TOOLS`].
    pub fn check(value: &serde_json::Value) -> Result<(), String> {
        let config: RetrievalStrategyConfig =
            serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        if let Toggle::Block(b) = &config.lsp_integration {
            for tool in &b.tools {
                if !LSP_TOOLS.contains(&tool.as_str()) {
                    return Err(format!(
                        "lsp_integration.tools: unknown tool `{tool}`; the language-server tools are {}",
                        LSP_TOOLS.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }

    /// A code strategy (symbols, `function` level, code sources).
    pub fn code() -> Self {
        RetrievalStrategyConfig {
            enabled: true,
            strategy_name: Some("code".into()),
            ast_parsing: AstParsing::Flag(true),
            index_level: Some(IndexLevel::Function),
            rag_chunk_strategy: Some("semantic_functions".into()),
            context_sources: RetrievalScope::code().sources,
            ..RetrievalStrategyConfig::default()
        }
    }

    /// A document strategy (sections; no AST work).
    pub fn docs() -> Self {
        RetrievalStrategyConfig {
            enabled: true,
            strategy_name: Some("docs".into()),
            ast_parsing: AstParsing::Flag(false),
            index_level: Some(IndexLevel::Section),
            rag_chunk_strategy: Some("semantic_sections".into()),
            context_sources: RetrievalScope::docs().sources,
            ..RetrievalStrategyConfig::default()
        }
    }

    /// Whether symbols are used.
    pub fn ast_enabled(&self) -> bool {
        match &self.ast_parsing {
            AstParsing::Flag(b) => *b,
            AstParsing::Block(b) => b.enabled,
        }
    }

    /// The effective index level.
    pub fn index_level(&self) -> IndexLevel {
        let explicit = self.index_level.or(match &self.ast_parsing {
            AstParsing::Block(b) => b.index_level,
            AstParsing::Flag(_) => None,
        });
        match explicit {
            Some(l) => l,
            None if self.ast_enabled() => IndexLevel::Function,
            None => IndexLevel::Section,
        }
    }

    /// What the index reads of the strategy: its sources, whether symbols are used, its
    /// hints.
    pub fn scope(&self) -> RetrievalScope {
        RetrievalScope {
            ast: self.ast_enabled(),
            sources: self.sources(),
            hints: self.retrieval_hints.clone(),
        }
    }

    /// All sources, from both spellings, in declaration order.
    pub fn sources(&self) -> Vec<ContextSource> {
        let mut out = self.context_sources.clone();
        if let Some(r) = &self.rag_strategy {
            out.extend(r.sources.iter().cloned());
        }
        out
    }

    /// The token budget for `stage` (a stage name or id): an exact key, else a key that is a
    /// prefix of the stage name or vice versa (`code_gen` ↔ `code_generation`).
    pub fn budget_for(&self, stage: Option<&str>) -> Option<u64> {
        let maps = [&self.retrieval_hints.token_budget, &self.token_budget];
        let stage = stage?;
        for m in maps {
            if let Some(v) = m.get(&StageKey(stage.to_string())) {
                return Some(*v);
            }
        }
        for m in maps {
            for (k, v) in m {
                if !k.0.is_empty() && (stage.starts_with(&k.0) || k.0.starts_with(stage)) {
                    return Some(*v);
                }
            }
        }
        None
    }
}
