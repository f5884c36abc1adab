//! The tool knowledge graph (docs/tools.md: the tool-schema budget, speculative execution and
//! the graph itself): which tools follow which, learned from executions, and what that
//! knowledge suggests.
//!
//! - [`ToolGraph`] holds the learned dependencies (a petgraph `DiGraph` kept in step with
//!   the store's `tool_nodes` and `tool_dependency` tables): [`ToolGraph::record_execution`]
//!   learns, [`ToolGraph::pagerank`] (weighted), [`ToolGraph::communities`] (Louvain),
//!   [`ToolGraph::path`] and [`ToolGraph::predict_next`] read, [`ToolGraph::view`] answers it
//!   as the wire type `trellis_protocol::records::ToolGraphView`.
//! - [`ToolCatalog`] searches tools for a query (BM25, optional embeddings, the PageRank
//!   prior) and picks the ones that fit a token budget ([`ToolCatalog::offer`], with
//!   [`ToolCatalog::search_tools`] for the ones left out).
//! - [`suggest_dag`] turns an intent into a DAG of tools with a confidence, an execution
//!   [`Mode`] and an [`Explanation`]; [`Thresholds`] adapts the speculation threshold to
//!   how often speculative results were used.
//!
//! This crate sits below the agent layer: it knows tools only by name, description and
//! input schema ([`ToolEntry`]).

mod catalog;
mod error;
mod export;
mod graph;
mod lexical;
mod metrics;
mod offer;
mod suggest;
mod thresholds;

pub use catalog::{Selection, ToolCatalog, ToolEntry};
pub use error::{Error, Result};
pub use graph::{EdgeStats, ExecutedCall, Execution, ToolGraph, edge_confidence};
pub use offer::{Found, Offer, SEARCH_TOOLS, SEARCH_TOOLS_DESCRIPTION, search_tools_schema};
pub use suggest::{
    Explanation, HITS, MAX_HOPS, STRONG_EDGE, Suggestion, suggest_dag, suggest_dag_with,
};
pub use thresholds::{
    CEILING, EXPLICIT_BELOW, FLOOR, MIN_SAMPLES, Mode, START, STEP, Thresholds, WINDOW,
};
pub use trellis_store::{NewSpeculation, SpeculationOutcome};
