//! The `pipelines` demo: independent ticket pipelines, some of them slow — the shape on which
//! free-running scheduling differs from lock-step (issue 18; `docs/benchmarks.md`).
//!
//! `start` fans out to `pipelines` chains `p<i>_1 → … → p<i>_<stages>`. Every node sleeps
//! `fast_us`, or `slow_us` when it is slow, and appends its id to `log`; the last node of
//! each pipeline records when it finished (`finished`: `{"p<i>": µs since the Unix epoch}`),
//! so a benchmark can tell when each pipeline completed. `layout` picks the slow nodes:
//!
//! - `slow_pipeline` (default): every node of pipeline 0;
//! - `staggered`: node `i + 1` of pipeline `i` for the first `stages` pipelines (each step
//!   of a lock-step run has one slow node, each in a different pipeline).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::pause;
use crate::{Error, Graph, GraphBuilder, NodeContext, NodeError, NodeOutput, Reducer, Result};

/// Which nodes of the `pipelines` demo are slow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Every node of pipeline 0.
    SlowPipeline,
    /// Node `i + 1` of pipeline `i`, for `i < stages`.
    Staggered,
}

impl Layout {
    pub(super) fn parse(name: Option<&str>) -> Result<Self> {
        match name {
            None | Some("slow_pipeline") => Ok(Self::SlowPipeline),
            Some("staggered") => Ok(Self::Staggered),
            Some(other) => Err(Error::InvalidGraph {
                graph: "pipelines".into(),
                problems: format!("param `layout`: `{other}` (use slow_pipeline or staggered)"),
            }),
        }
    }

    fn is_slow(self, pipeline: usize, stage: usize) -> bool {
        match self {
            Self::SlowPipeline => pipeline == 0,
            Self::Staggered => pipeline + 1 == stage,
        }
    }
}

/// The node id of stage `stage` (from 1) of pipeline `pipeline`.
pub fn node_id(pipeline: usize, stage: usize) -> String {
    format!("p{pipeline}_{stage}")
}

pub(super) fn build(
    pipelines: usize,
    stages: usize,
    fast_us: u64,
    slow_us: u64,
    layout: Layout,
) -> Result<Graph> {
    let (pipelines, stages) = (pipelines.max(1), stages.max(1));
    let mut b = GraphBuilder::new("pipelines")
        .channel("log", Reducer::Append)
        .channel("finished", Reducer::Merge)
        .concurrency(pipelines.max(crate::DEFAULT_CONCURRENCY))
        .node("start", |_ctx: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .entry("start");
    for p in 0..pipelines {
        for s in 1..=stages {
            let sleep_us = if layout.is_slow(p, s) {
                slow_us
            } else {
                fast_us
            };
            let last = s == stages;
            let handler = move |ctx: NodeContext| async move {
                pause(sleep_us).await;
                let mut out = NodeOutput::success().write("log", json!([ctx.node.as_str()]));
                if last {
                    let us = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_micros() as u64);
                    out = out.write("finished", json!({ format!("p{p}"): us }));
                }
                Ok::<_, NodeError>(out)
            };
            b = b.node(node_id(p, s).as_str(), handler);
            let from = if s == 1 {
                "start".into()
            } else {
                node_id(p, s - 1)
            };
            b = b.edge(from.as_str(), node_id(p, s).as_str());
        }
    }
    b.build()
}

/// When one run of the `pipelines` demo ended, and when each of its pipelines did.
#[derive(Clone, Debug)]
pub struct Timing {
    /// From the start of the run to its outcome.
    pub total: std::time::Duration,
    /// For each pipeline (by index), from the start of the run to the end of its last node.
    pub pipelines: Vec<std::time::Duration>,
}

/// Runs `graph` (a `pipelines` demo) once on `engine` and times it; fails unless the run
/// succeeded with every node's entry in `log`.
pub async fn time_run(engine: &crate::Engine, graph: std::sync::Arc<Graph>) -> Result<Timing> {
    let epoch_us = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64)
    };
    let nodes = graph.node_ids().count();
    let (t0, started_us) = (std::time::Instant::now(), epoch_us());
    let out = engine.run(graph, json!({})).await?;
    let total = t0.elapsed();
    let logged = out
        .state
        .get("log")
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len);
    let bad = |problems: String| Error::InvalidGraph {
        graph: "pipelines".into(),
        problems,
    };
    if out.status != trellis_protocol::RunStatus::Succeeded || logged + 1 != nodes {
        return Err(bad(format!(
            "run {} ended {} with {logged} of {} nodes logged",
            out.run,
            out.status,
            nodes - 1
        )));
    }
    let finished = out
        .state
        .get("finished")
        .and_then(serde_json::Value::as_object)
        .ok_or_else(|| bad("no `finished` channel".into()))?;
    let mut pipelines = vec![std::time::Duration::ZERO; finished.len()];
    for (key, us) in finished {
        let i: usize = key
            .trim_start_matches('p')
            .parse()
            .map_err(|_| bad(format!("odd pipeline key `{key}`")))?;
        let at = us.as_u64().unwrap_or(0).saturating_sub(started_us);
        if let Some(slot) = pipelines.get_mut(i) {
            *slot = std::time::Duration::from_micros(at);
        }
    }
    Ok(Timing { total, pipelines })
}
