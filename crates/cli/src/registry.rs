//! Finds a run's graph again from the name and parameters recorded in its `runStarted` event.

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
    // A workflow run: its plan is the graph's parameters. The handlers here only serve
    // inspection; `trellis runs resume` runs workflow runs through the runtime.
    if let Ok(plan) = serde_json::from_value::<trellis_workflow::Plan>(params.clone())
        && plan.workflow == name
    {
        return Ok(Arc::new(trellis_workflow::compile(
            &plan,
            &trellis_core::PlanOnly,
        )?));
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

/// The graph a stored run was started with.
pub fn graph_of(store: &Store, run: &RunId) -> anyhow::Result<Arc<Graph>> {
    let (graph, params) = store.started(run)?;
    build(&graph, &params).with_context(|| {
        format!("rebuilding the graph of run {run} (was it recorded by another trellis version?)")
    })
}
