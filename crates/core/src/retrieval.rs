//! The retrieval nodes of a workflow run.
//!
//! Adaptive retrieval (after a failure) hands the failed stage's report — its output, the
//! findings, the test run's failing lines — to the stage that retries, as
//! `enriched_context[retry_stage]`.

use std::sync::{Arc, Weak};

use serde_json::{Value, json};
use trellis_graph::{NodeContext, NodeError, NodeHandler, NodeOutput};
use trellis_workflow::Plan;

use crate::handlers::{RunContext, clip};

/// The failure report of a `stage_results` entry as prompt text.
pub(crate) fn failure_text(failed_stage: &str, failure: &Value) -> String {
    let out = failure.get("output").cloned().unwrap_or(Value::Null);
    let mut s = format!("`{failed_stage}` failed");
    if let Some(a) = failure.get("attempt").and_then(Value::as_u64) {
        s.push_str(&format!(" (attempt {a})"));
    }
    s.push_str(":\n");
    if let Some(t) = out
        .get("output")
        .or_else(|| out.get("reason"))
        .and_then(Value::as_str)
    {
        s.push_str(&clip(t, 4000));
        s.push('\n');
    }
    if let Some(Value::Array(f)) = out.get("findings") {
        for item in f.iter().filter_map(Value::as_str).take(30) {
            s.push_str(&format!("- {item}\n"));
        }
    }
    s
}

/// The adaptive-retrieval node.
pub(crate) fn adaptive(me: Weak<RunContext>, _plan: &Plan) -> Arc<dyn NodeHandler> {
    Arc::new(move |ctx: NodeContext| {
        let me = me.upgrade();
        async move {
            let Some(_me) = me else {
                return Err(NodeError::new("the run's context is gone"));
            };
            let failed = ctx.input["failed_stage"].as_str().unwrap_or_default();
            let retry = ctx.input["retry_stage"].as_str().unwrap_or_default();
            let round = ctx.input["round"].as_i64().unwrap_or(1);
            let text = format!(
                "Round {round} of enrichment.\n{}",
                failure_text(failed, &ctx.input["failure"])
            );
            Ok(NodeOutput::success()
                .write("enriched_context", json!({ retry: text }))
                .result(json!({ "retry_stage": retry, "failed_stage": failed, "round": round })))
        }
    })
}

/// The upfront-retrieval node (none yet).
pub(crate) fn upfront(_me: Weak<RunContext>, _plan: &Plan) -> Option<Arc<dyn NodeHandler>> {
    None
}
