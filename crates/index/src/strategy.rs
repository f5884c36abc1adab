//! The part of a retrieval strategy the index reads (docs/retrieval.md, "Context fusion"):
//! which sources to search ([`ContextSource`], the categories each stands for), whether code
//! is searched as symbols, and what to favour and avoid ([`RetrievalHints`]) — a
//! [`RetrievalScope`]. The whole `retrieval_strategy_config` block of a workflow (both
//! spellings, the LSP tools, budgets per stage) is the retrieval agent's
//! (`trellis_agents::retrieval::strategy`), which builds its sources and hints from these
//! types and hands the index the scope.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::chunk::Category;

/// What a retrieval searches and how it weighs what it finds: the part of a workflow's
/// retrieval strategy that [`Index::retrieve`](crate::Index::retrieve) reads.
#[derive(Clone, Debug, PartialEq)]
pub struct RetrievalScope {
    /// Whether code is searched as symbols (the strategy's `ast_parsing`): off, no symbol
    /// chunk is returned and `codebase_semantic_search` searches documents.
    pub ast: bool,
    /// The sources, in order (empty: those of [`RetrievalScope::code`] with `ast` on, else
    /// those of [`RetrievalScope::docs`]).
    pub sources: Vec<ContextSource>,
    /// What to favour and avoid.
    pub hints: RetrievalHints,
}

impl RetrievalScope {
    /// Code: symbols, `codebase_semantic_search` at function level, HIGH.
    pub fn code() -> Self {
        RetrievalScope {
            ast: true,
            sources: vec![ContextSource {
                source: "codebase_semantic_search".into(),
                strategy: Some("function_level".into()),
                priority: Some("HIGH".into()),
                ..ContextSource::default()
            }],
            hints: RetrievalHints::default(),
        }
    }

    /// Documents: no symbols; documents, decision logs and specifications, all HIGH.
    pub fn docs() -> Self {
        let src = |name: &str, p: &str| ContextSource {
            source: name.into(),
            priority: Some(p.into()),
            ..ContextSource::default()
        };
        RetrievalScope {
            ast: false,
            sources: vec![
                src("document_semantic_search", "HIGH"),
                src("decision_log_search", "HIGH"),
                src("specification_search", "HIGH"),
            ],
            hints: RetrievalHints::default(),
        }
    }
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

/// The default budget: of a retrieval that names none, and of a stage the strategy names
/// none for.
pub const DEFAULT_TOKEN_BUDGET: u64 = 8000;

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
