//! Finds a run's graph again: a demonstration graph from the name and parameters in its
//! `runStarted` event, a workflow run's through the runtime's planning module.

use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::Value;
use trellis_graph::Graph;
use trellis_protocol::RunId;
use trellis_store::Store;

/// Builds graph `name` with `params`.
pub fn build(name: &str, params: &Value) -> anyhow::Result<Arc<Graph>> {
    if trellis_graph::demo::NAMES.contains(&name) {
        return Ok(Arc::new(trellis_graph::demo::build(name, params)?));
    }
    let hint = trellis_graph::nearest(name, trellis_graph::demo::NAMES.into_iter())
        .map(|n| format!(" (did you mean `{n}`?)"))
        .unwrap_or_default();
    bail!(
        "unknown graph `{name}`{hint}; this build knows: {}",
        trellis_graph::demo::NAMES.join(", ")
    )
}

/// Whether a stored run is one of the demonstration graphs (else it is a workflow run).
pub fn is_demo_run(store: &Store, run: &RunId) -> anyhow::Result<bool> {
    let (graph, _) = store.started(run)?;
    Ok(trellis_graph::demo::NAMES.contains(&graph.as_str()))
}

/// Where a stored run stands, replayed from the store (a workflow run through the runtime's
/// planning module, which also reads a run that continued while it was read).
pub fn outcome_of(store: &Arc<Store>, run: &RunId) -> anyhow::Result<trellis_graph::RunOutcome> {
    if is_demo_run(store, run)? {
        return Ok(trellis_graph::Engine::new(store.clone()).inspect(graph_of(store, run)?, run)?);
    }
    trellis_core::planning::stored_outcome(store, run).with_context(|| {
        format!("rebuilding the graph of run {run} (was it recorded by another trellis version?)")
    })
}

/// The graph a stored run is replayed with: a demonstration graph from its name and
/// parameters, a workflow run's from its plan (for inspection only: `trellis runs resume`
/// runs workflow runs through the runtime service).
pub fn graph_of(store: &Store, run: &RunId) -> anyhow::Result<Arc<Graph>> {
    let (graph, params) = store.started(run)?;
    let built = if trellis_graph::demo::NAMES.contains(&graph.as_str()) {
        build(&graph, &params)
    } else {
        trellis_core::planning::stored_graph(store, run)
            .map(Arc::new)
            .map_err(anyhow::Error::from)
    };
    built.with_context(|| {
        format!("rebuilding the graph of run {run} (was it recorded by another trellis version?)")
    })
}
