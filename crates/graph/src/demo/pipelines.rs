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
