//! The agent's public types: options, errors and the per-stage context pack with its code
//! maps.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use trellis_index::{AstContextMap, Progress};

/// Errors of the retrieval agent. Model and source failures are not errors (they degrade
/// the pack and are noted in it); index failures and cancellation are.
#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    /// The workspace index could not be opened or updated.
    #[error("workspace index: {0}")]
    Index(#[from] trellis_index::Error),
    /// The retrieval was cancelled.
    #[error("retrieval cancelled")]
    Cancelled,
    /// A background task panicked or was aborted.
    #[error("retrieval task failed: {0}")]
    Task(String),
    /// The workflow's `retrieval_strategy_config` does not parse.
    #[error("retrieval strategy of workflow `{workflow}`: {message}")]
    Strategy {
        /// The workflow.
        workflow: String,
        /// What is wrong.
        message: String,
    },
}

/// `Result` with [`RetrievalError`].
pub type Result<T, E = RetrievalError> = std::result::Result<T, E>;

/// A progress callback for [`RetrievalAgent::prepare`](crate::retrieval::RetrievalAgent::prepare).
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// Tuning of the retrieval agent.
#[derive(Clone, Debug)]
pub struct RetrievalOptions {
    /// Queries per stage, the task included (default 4).
    pub max_queries: usize,
    /// Time each source gets for all its queries (default 5 s: 3 s per source, and time
    /// to load embeddings on first use).
    pub source_timeout: Duration,
    /// Time query generation gets in one retrieval, all stages together; stages whose
    /// call has not finished by then use deterministic queries (default 45 s — the embedded
    /// model answers one stage in a few seconds on a loaded 2-core machine).
    pub query_timeout: Duration,
    /// Results per query and source before fusion (default 30).
    pub candidates: usize,
    /// The budget of a stage the strategy names no budget for (default 8000 tokens).
    pub default_budget: usize,
    /// A cap on every stage's budget (e.g. a share of the model's context window).
    pub max_budget: Option<usize>,
    /// Whether [`RetrievalAgent::prepare`](crate::retrieval::RetrievalAgent::prepare) computes missing embeddings when an embedder is
    /// attached (default true).
    pub embed: bool,
    /// Where the index lives (default `<repo>/.trellis/index`).
    pub index_dir: Option<PathBuf>,
    /// Re-ask the model once when its query list does not parse (default false: the
    /// deterministic queries are a cheaper fallback on the critical path).
    pub reask: bool,
    /// Tokens the query-generation call may generate (default 64: a few short queries).
    pub query_max_tokens: u32,
    /// Sampling temperature of query generation (default 0.3).
    pub temperature: Option<f32>,
    /// Regions named by a failure read from the worktree, at most (default 6).
    pub max_failure_regions: usize,
    /// Share of a code workflow's stage budget reserved for the code maps (the AST context
    /// map of the files in play and the repo map; default 0.2; 0 turns them off). Item
    /// budget the items leave unused goes to the maps too.
    pub map_share: f32,
    /// Share of the maps' budget the AST context map may take (default 0.5); the repo map
    /// gets the rest.
    pub ast_map_share: f32,
    /// Lines either side of a failure line when no symbol or section encloses it (default 12).
    pub region_context_lines: u32,
    /// Ask the model to judge the relevance of each stage's best packed results (a
    /// grammar-constrained `{"relevant": [numbers]}`) and reorder and filter them by it
    /// (default false: one more model call per stage).
    pub judge: bool,
    /// Results shown to the judge, at most (default 8).
    pub judge_candidates: usize,
    /// Tokens the judgement may generate (default 64).
    pub judge_max_tokens: u32,
    /// Time one judgement may take before the ranking is kept (default 30 s).
    pub judge_timeout: Duration,
}

impl Default for RetrievalOptions {
    fn default() -> Self {
        RetrievalOptions {
            max_queries: 4,
            source_timeout: Duration::from_secs(5),
            query_timeout: Duration::from_secs(45),
            candidates: 30,
            default_budget: trellis_index::strategy::DEFAULT_TOKEN_BUDGET as usize,
            max_budget: None,
            embed: true,
            index_dir: None,
            reask: false,
            query_max_tokens: 64,
            temperature: Some(0.3),
            max_failure_regions: 6,
            map_share: 0.2,
            ast_map_share: 0.5,
            region_context_lines: 12,
            judge: false,
            judge_candidates: 8,
            judge_max_tokens: 64,
            judge_timeout: Duration::from_secs(30),
        }
    }
}

/// Which mode produced a pack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetrievalMode {
    /// Before the stages run.
    #[default]
    Upfront,
    /// After a failure, for the retry.
    Adaptive,
}

pub use trellis_index::source::PackedItem;

/// How one source did for a stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceReport {
    /// The source.
    pub name: String,
    /// Its priority in the strategy (`HIGH`, `MEDIUM`, `LOW`).
    pub priority: String,
    /// Results for this stage's queries, before fusion.
    pub items: usize,
    /// Of those, items that made it into the pack.
    pub packed: usize,
    /// Time the source took (for all queries of the retrieval).
    pub elapsed_ms: u64,
    /// Whether it ran out of time.
    pub timed_out: bool,
    /// What went wrong, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the source was not searched (not configured, network denied), if it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// The context prepared for one stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StagePack {
    /// The stage's name.
    pub stage: String,
    /// Upfront or adaptive.
    pub mode: RetrievalMode,
    /// The enrichment round (adaptive; 0 upfront).
    pub round: i64,
    /// The queries searched, the task first.
    pub queries: Vec<String>,
    /// Whether the model wrote any of the queries (false: deterministic fallback).
    pub queries_from_model: bool,
    /// Packed items: failure regions first, then best first.
    pub items: Vec<PackedItem>,
    /// The stage's token budget.
    pub budget_tokens: usize,
    /// Tokens used by the items.
    pub used_tokens: usize,
    /// Sources the strategy names that nothing here serves (web search and CVE lookups
    /// need a plugged-in source; the runtime plugs in `lsp_tools`).
    pub external_sources: Vec<String>,
    /// Every source searched for this stage.
    pub sources: Vec<SourceReport>,
    /// What went differently than planned (fallback queries, timeouts, dropped items).
    pub notes: Vec<String>,
    /// Wall time of the retrieval, query generation included.
    pub elapsed_ms: u64,
    /// Code workflows: the AST context map of the items' files and the repo map (their
    /// tokens are part of `used_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maps: Option<StageMaps>,
}

/// The maps added to a code workflow's stage pack.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageMaps {
    /// The files in play (the code files of the pack's items, in pack order).
    pub files: Vec<String>,
    /// The AST context map of those files (the structured form, for the run state).
    pub ast_context_map: AstContextMap,
    /// Its prompt rendering, cut to its budget.
    pub ast_text: String,
    /// The repo map's outline of the other files.
    pub repo_map: String,
    /// Tokens of both renderings.
    pub tokens: usize,
    /// Entries of the AST context map left out for the budget.
    pub ast_left_out: usize,
    /// Document workflows: the map outlines the code files the pack's documents name
    /// (there is no repo map), not the files of code items.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub named_by_documents: bool,
}
