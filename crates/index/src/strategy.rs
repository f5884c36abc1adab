//! Retrieval strategies as data: the `retrieval_strategy_config` block of a workflow YAML
//! (docs/retrieval.md, "Strategies as data"), accepted in both spellings — the workflow-file
//! form (`ast_parsing: {enabled, index_level}`, `rag_strategy: {chunk_strategy, sources}`) and
//! the orchestrator form (`ast_parsing: true`, `index_level`, `rag_chunk_strategy`,
//! `context_sources`, top-level `token_budget`).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::chunk::Category;

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

/// One context source (`{source, strategy, priority}` or `{name, indexing, priority, …}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSource {
    /// Source name: `codebase_semantic_search`, `document_semantic_search`,
    /// `specification_search`, `decision_log_search`, `doc_retrieval`, `lsp_tools`,
    /// `web_search`, `cve_database`.
    #[serde(alias = "name")]
    pub source: String,
    /// How (`function_level`, `sections`, `related_decisions`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Workflow-file form of `strategy` (`function_level`, `section_level`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexing: Option<String>,
    /// `HIGH`, `MEDIUM`, `LOW`, optionally conditional (`HIGH_if_security_stage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// When it runs (`on_demand`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_timing: Option<String>,
    /// Only in these stages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trigger_stages: Vec<String>,
}

/// A source's priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Priority {
    /// Low.
    Low,
    /// Medium (the default).
    Medium,
    /// High.
    High,
}

impl Priority {
    /// The weight a source's results get in the fused ranking.
    pub fn weight(self) -> f32 {
        match self {
            Priority::High => 1.0,
            Priority::Medium => 0.7,
            Priority::Low => 0.4,
        }
    }
}

impl ContextSource {
    /// The priority level, and whether it is conditional (`HIGH_if_…`).
    pub fn priority(&self) -> (Priority, bool) {
        let p = self
            .priority
            .as_deref()
            .unwrap_or("MEDIUM")
            .to_ascii_uppercase();
        let level = if p.starts_with("HIGH") {
            Priority::High
        } else if p.starts_with("LOW") {
            Priority::Low
        } else {
            Priority::Medium
        };
        (level, p.contains("_IF_"))
    }

    /// Whether the source runs only on demand (`execution_timing: on_demand`): when a
    /// failure asks for more context (adaptive retrieval), not upfront.
    pub fn on_demand(&self) -> bool {
        self.execution_timing
            .as_deref()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("on_demand"))
    }

    /// Whether the source applies in `stage` (conditional and staged sources only in their
    /// stages; a conditional source without stages applies when the stage name mentions
    /// the condition, e.g. `HIGH_if_security_stage` in `security_review`).
    pub fn applies_in(&self, stage: Option<&str>) -> bool {
        if !self.trigger_stages.is_empty() {
            return stage.is_some_and(|s| self.trigger_stages.iter().any(|t| t == s));
        }
        let (_, conditional) = self.priority();
        if !conditional {
            return true;
        }
        let cond = self.priority.as_deref().unwrap_or("").to_ascii_lowercase();
        let cond = cond.split("_if_").nth(1).unwrap_or("");
        let word = cond.split('_').next().unwrap_or("");
        !word.is_empty()
            && word != "triggered"
            && stage.is_some_and(|s| s.to_ascii_lowercase().contains(word))
    }
}

/// `retrieval_hints`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalHints {
    /// What to favour (`existing_patterns`, `dependencies`, `type_signatures`,
    /// `existing_decisions`, `rationale`, `options`, …).
    #[serde(default)]
    pub focus_on: Vec<String>,
    /// What to avoid (`test_code`, `deprecated_patterns`, `implementation_details`).
    #[serde(default)]
    pub avoid: Vec<String>,
    /// Token budget per stage name or id.
    #[serde(default)]
    pub token_budget: BTreeMap<StageKey, u64>,
}

/// A stage name or numeric id used as a budget key (`code_gen`, `1`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct StageKey(pub String);

impl<'de> Deserialize<'de> for StageKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = StageKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a stage name or number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StageKey, E> {
                Ok(StageKey(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<StageKey, E> {
                Ok(StageKey(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<StageKey, E> {
                Ok(StageKey(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The default budget when the strategy names none for a stage.
pub const DEFAULT_TOKEN_BUDGET: u64 = 8000;

/// The language-server tools `lsp_integration.tools` may name.
pub const LSP_TOOL_NAMES: [&str; 3] = ["find_definition", "get_references", "get_signature"];

impl RetrievalStrategyConfig {
    /// Checks a workflow's `retrieval_strategy_config` block (the workflow loader's checker):
    /// it must parse, and `lsp_integration.tools` may name only [`LSP_TOOL_NAMES`].
    pub fn check(value: &serde_json::Value) -> Result<(), String> {
        let config: RetrievalStrategyConfig =
            serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        if let Toggle::Block(b) = &config.lsp_integration {
            for tool in &b.tools {
                if !LSP_TOOL_NAMES.contains(&tool.as_str()) {
                    return Err(format!(
                        "lsp_integration.tools: unknown tool `{tool}`; the language-server tools are {}",
                        LSP_TOOL_NAMES.join(", ")
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
            context_sources: vec![ContextSource {
                source: "codebase_semantic_search".into(),
                strategy: Some("function_level".into()),
                priority: Some("HIGH".into()),
                ..ContextSource::default()
            }],
            ..RetrievalStrategyConfig::default()
        }
    }

    /// A document strategy (sections; no AST work).
    pub fn docs() -> Self {
        let src = |name: &str, p: &str| ContextSource {
            source: name.into(),
            priority: Some(p.into()),
            ..ContextSource::default()
        };
        RetrievalStrategyConfig {
            enabled: true,
            strategy_name: Some("docs".into()),
            ast_parsing: AstParsing::Flag(false),
            index_level: Some(IndexLevel::Section),
            rag_chunk_strategy: Some("semantic_sections".into()),
            context_sources: vec![
                src("document_semantic_search", "HIGH"),
                src("decision_log_search", "HIGH"),
                src("specification_search", "HIGH"),
            ],
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

/// What the index can answer for a source: the categories it searches, or `None` for sources
/// outside the index (LSP, web, CVE database).
pub fn source_categories(source: &ContextSource, ast: bool) -> Option<Vec<Category>> {
    let docs = vec![Category::Doc, Category::Spec, Category::Decision];
    Some(match source.source.as_str() {
        "codebase_semantic_search" => {
            let level = source
                .strategy
                .as_deref()
                .or(source.indexing.as_deref())
                .unwrap_or("");
            if ast && !level.starts_with("document") && !level.starts_with("section") {
                vec![Category::Code, Category::Other]
            } else {
                docs
            }
        }
        "document_semantic_search" => docs,
        "specification_search" => vec![Category::Spec],
        "decision_log_search" => vec![Category::Decision],
        "doc_retrieval" => vec![Category::Doc, Category::Spec],
        _ => return None,
    })
}
