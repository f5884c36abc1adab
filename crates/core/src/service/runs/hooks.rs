//! The user's run-level hooks (`needs_input`, `stage_failed`, `run_end`; docs/conventions.md)
//! — the configuration's and the run's workflow's ([`RunContext::hooks`]) — for a run
//! executing in this service: started from its committed batches and its end, in
//! tasks of their own — a run never waits for them.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};
use trellis_protocol::{Event, EventKind, NodeState, RunStatus};
use trellis_runtime::RunContext;
use trellis_tools::{HookEvent, HookScope};

/// Starts `event`'s hooks for the run of `ctx`, at `node`, with `payload`.
fn spawn(ctx: &Arc<RunContext>, event: HookEvent, node: Option<String>, payload: Value) {
    let hooks = ctx.hooks();
    if !hooks.any(event) {
        return;
    }
    let runner = hooks.clone();
    let ctx = ctx.clone();
    hooks.spawn(async move {
        let cwd = ctx.space.read_root();
        let workflow = ctx.workflow();
        let scope = HookScope {
            run: Some(&ctx.run),
            node: node.as_deref(),
            workflow: workflow.as_deref(),
            tool: None,
            cwd: &cwd,
        };
        runner.run(event, scope, payload, false).await;
    });
}

/// The hooks of one committed batch: a node that asks the user, a stage (one of `stages`)
/// that failed.
pub(super) fn on_batch(ctx: &Arc<RunContext>, stages: &HashSet<String>, batch: &[Event]) {
    let hooks = ctx.hooks();
    if !hooks.any(HookEvent::NeedsInput) && !hooks.any(HookEvent::StageFailed) {
        // Every batch of every run passes here: nothing to look for without such hooks.
        return;
    }
    // A failed node's output (its error, or its result's `reason`) comes before its
    // transition in the same batch.
    let mut errors: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    for e in batch {
        match &e.kind {
            EventKind::NodeOutput {
                node,
                failure: true,
                result,
                error,
                ..
            } => {
                let why = error.clone().or_else(|| {
                    result
                        .get("reason")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
                if let Some(why) = why {
                    errors.insert(node.as_str(), why);
                }
            }
            EventKind::InterruptRaised {
                node, interrupt, ..
            } => spawn(
                ctx,
                HookEvent::NeedsInput,
                Some(node.to_string()),
                json!({ "node": node, "interrupt": interrupt }),
            ),
            EventKind::NodeTransition {
                node,
                attempt,
                to: NodeState::Failed,
                reason,
                ..
            } if stages.contains(node.as_str()) => spawn(
                ctx,
                HookEvent::StageFailed,
                Some(node.to_string()),
                json!({
                    "stage": node,
                    "attempt": attempt,
                    "error": errors.get(node.as_str()).cloned().or_else(|| reason.clone()),
                }),
            ),
            _ => {}
        }
    }
}

/// The `run_end` hooks of a run that ended with `status` (not one stopped to be resumed).
pub(super) fn on_end(ctx: &Arc<RunContext>, status: RunStatus, error: Option<&str>) {
    if status.is_final() {
        spawn(
            ctx,
            HookEvent::RunEnd,
            None,
            json!({ "status": status, "error": error }),
        );
    }
}
