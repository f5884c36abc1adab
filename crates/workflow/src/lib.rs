//! Workflows (docs/workflows.md): YAML specs with positioned validation, discovery (built-ins, the
//! repository's `.trellis/workflows`, configured directories), deterministic plan assembly
//! and compilation of a plan into a [`trellis_graph::Graph`].
//!
//! ```text
//! YAML ──load_str──▶ Workflow ──assemble(decisions, task)──▶ Plan ──compile(handlers)──▶ Graph
//! ```

pub mod artifacts;
mod catalog;
mod compile;
mod decode;
mod error;
mod kinds;
mod plan;
mod schema;
pub mod tasktree;
mod validate;
pub mod yaml;

pub use catalog::{BUILTINS, Catalog, Entry, Source, builtin_label, load_file, yaml_files};
pub use compile::fanout::{
    DEFAULT_WORK_ATTEMPTS, MERGE_SUFFIX, REVIEW_SUFFIX, merge_template, review_template,
    work_template,
};
pub use compile::{
    ADAPTIVE_RETRIEVAL, ORCHESTRATE, StageHandlers, UPFRONT_RETRIEVAL, collector_id, compile,
    enrichment_counter,
};
pub use error::{Error, Problem, Problems, Result};
pub use plan::{
    Decision, Decisions, Kind, MAX_ENRICHMENTS, Plan, Planned, Route, Skipped, StageContext,
    assemble,
};
pub use schema::{
    ARTIFACT_KINDS, AgentSpec, Aggregation, DETERMINISTIC_FUNCTIONS, Metadata, Routing,
    SelectionCriteria, Spanned, Stage, StageId, StageKind, Target, Workflow, WorkflowHook,
};
pub use validate::{ConfigCheck, RESERVED_NAMES, load_str};
