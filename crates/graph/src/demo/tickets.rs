//! The `tickets` demo: free-running ticket pipelines with dependencies between tickets — the
//! graph the CLI's free-running SIGKILL test kills and resumes.
//!
//! The orchestrator `tickets` spawns `n` tickets (`t0`, `t1`, …), each a pipeline
//! `t<k>` (work) → `t<k>.review` → `t<k>.merge` ([`NodeOutput::spawn_after`]); the work of
//! ticket `k` waits for the merges of the tickets [`dependencies`] names. The review of ticket
//! [`revised`] sends its work back once ([`NodeOutput::revise`], feedback in `feedback`), so
//! that work runs twice and its review fails once. The collector `collect` gathers the tickets
//! at the end. The graph is free-running ([`Scheduling::Free`]) unless `scheduling` says
//! otherwise.
//!
//! Every handler sleeps a time derived from `sleep_us` that differs per ticket and stage
//! ([`sleep_for`]), so completion order genuinely interleaves; appends `node#attempt pid` to
//! the file `log` (when given) once it has slept, like `crashtest`; and, when it completes,
//! appends its node id to the `Append` channel `order` — so the final state records the order
//! in which the nodes completed (in a free-running run, a timing-dependent order that the log
//! fixes). Results are timing-independent (`{ticket, stage, attempt}`), so two runs agree on
//! every node's result whatever the order.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{log_line, pause};
use crate::{
    FailurePolicy, Graph, GraphBuilder, NodeContext, NodeError, NodeHandler, NodeOutput, Reducer,
    Result, Scheduling,
};

/// The id of the orchestrator node (ticket nodes are `tickets/t<k>`, `tickets/t<k>.review`,
/// `tickets/t<k>.merge`).
pub const ORCHESTRATOR: &str = "tickets";

/// The id of the collector that ends the run.
pub const COLLECTOR: &str = "collect";

/// The tickets whose merges the work of ticket `k` waits for: `k - 2` when `k ≥ 2` and `k` is
/// not a multiple of 3, and `k - 3` when `k ≥ 4` is a multiple of 4. With 6 tickets: `t2`
/// after `t0`, `t4` after `t2` and `t1`, `t5` after `t3`; `t0`, `t1`, `t3` start at once.
pub fn dependencies(k: usize) -> Vec<usize> {
    let mut deps = Vec::new();
    if k >= 2 && !k.is_multiple_of(3) {
        deps.push(k - 2);
    }
    if k >= 4 && k.is_multiple_of(4) {
        deps.push(k - 3);
    }
    deps
}

/// The ticket (of `n`) whose review sends the work back once: `t1` (`t0` when there is only
/// one ticket).
pub fn revised(n: usize) -> usize {
    1.min(n.saturating_sub(1))
}

/// How long a handler of ticket `k` sleeps at `stage` (0 work, 1 review, 2 merge): `sleep_us`
/// times ½, 1, 1½, 2 or 2½, varying with both.
pub fn sleep_for(sleep_us: u64, k: usize, stage: usize) -> u64 {
    sleep_us * (1 + ((3 * k + 2 * stage) % 5) as u64) / 2
}

/// The spawn key of ticket `k`'s node at `stage`.
fn key(k: usize, stage: usize) -> String {
    match stage {
        0 => format!("t{k}"),
        1 => format!("t{k}.review"),
        _ => format!("t{k}.merge"),
    }
}

const STAGES: [&str; 3] = ["work", "review", "merge"];

/// A successful completion of `ctx`'s node: its id appended to `order`, `result` recorded.
fn completed(ctx: &NodeContext, result: Value) -> NodeOutput {
    NodeOutput::success()
        .write("order", json!([ctx.node.as_str()]))
        .result(result)
}

/// The handler of one stage (a template): sleeps the input's `us`, logs, then completes —
/// except a review asked to revise (`"revise": true`), which on its first attempt sends the
/// work back with feedback and fails.
fn stage_handler(stage: usize, log: Option<String>) -> impl NodeHandler {
    move |ctx: NodeContext| {
        let log = log.clone();
        async move {
            pause(ctx.input["us"].as_u64().unwrap_or(0)).await;
            log_line(&log, &ctx)?;
            let ticket = ctx.input["ticket"].as_u64().unwrap_or(0);
            let mut result =
                json!({ "ticket": ticket, "stage": STAGES[stage], "attempt": ctx.attempt });
            if stage == 1 && ctx.input["revise"] == json!(true) && ctx.attempt == 1 {
                let work = format!("t{ticket}");
                let work_id = format!("{ORCHESTRATOR}/{work}");
                return Ok(NodeOutput::failure("changes requested")
                    .write("feedback", json!({ work_id: "handle the empty list" }))
                    .revise(work));
            }
            if stage == 0 {
                result["feedback"] = ctx
                    .state
                    .get_in("feedback", ctx.node.as_str())
                    .cloned()
                    .unwrap_or(Value::Null);
            }
            Ok(completed(&ctx, result))
        }
    }
}

pub(super) fn build(n: usize, sleep_us: u64, log: Option<String>) -> Result<Graph> {
    let n = n.max(1);
    let (l1, l2) = (log.clone(), log.clone());
    let orchestrator = move |ctx: NodeContext| {
        let log = l1.clone();
        async move {
            pause(sleep_us / 2).await;
            log_line(&log, &ctx)?;
            let mut out = completed(&ctx, json!({ "tickets": n }));
            for k in 0..n {
                let input = |stage: usize| {
                    json!({ "ticket": k, "us": sleep_for(sleep_us, k, stage),
                            "revise": stage == 1 && k == revised(n) })
                };
                let after: Vec<String> = dependencies(k).into_iter().map(|d| key(d, 2)).collect();
                out = out
                    .spawn_after(key(k, 0), STAGES[0], input(0), after)
                    .spawn_after(key(k, 1), STAGES[1], input(1), [key(k, 0)])
                    .spawn_after(key(k, 2), STAGES[2], input(2), [key(k, 1)]);
            }
            Ok::<_, NodeError>(out)
        }
    };
    let collector: Arc<dyn NodeHandler> = Arc::new(move |ctx: NodeContext| {
        let log = l2.clone();
        async move {
            pause(sleep_us / 2).await;
            log_line(&log, &ctx)?;
            let Some((children, agg)) = &ctx.children else {
                return Err(NodeError::new("collector got no children"));
            };
            let result = json!({ "children": children.len(), "failures": agg.failures });
            Ok(completed(&ctx, result))
        }
    });
    GraphBuilder::new("tickets")
        .scheduling(Scheduling::Free)
        .channel("order", Reducer::Append)
        .channel("feedback", Reducer::Merge)
        .concurrency((3 * n).max(crate::DEFAULT_CONCURRENCY))
        .node(ORCHESTRATOR, orchestrator)
        .template(STAGES[0], stage_handler(0, log.clone()))
        .template(STAGES[1], stage_handler(1, log.clone()))
        .template(STAGES[2], stage_handler(2, log))
        .collector(
            COLLECTOR,
            ORCHESTRATOR,
            FailurePolicy::AnyFails,
            Some(collector),
        )
        .entry(ORCHESTRATOR)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, MemoryJournal};
    use trellis_protocol::{NodeState, RunStatus};

    #[test]
    fn dependencies_mix_independent_tickets_one_after_another_and_after_two() {
        let deps: Vec<Vec<usize>> = (0..6).map(dependencies).collect();
        assert_eq!(deps, [vec![], vec![], vec![0], vec![], vec![2, 1], vec![3]]);
        assert_eq!((revised(1), revised(6)), (0, 1));
        let sleeps: Vec<u64> = (0..3).map(|k| sleep_for(1000, k, 0)).collect();
        assert_eq!(
            sleeps,
            [500, 2000, 1000],
            "the work takes a different time per ticket"
        );
    }

    #[tokio::test]
    async fn every_node_completes_once_in_an_order_that_respects_the_dependencies() {
        let graph = Arc::new(super::super::build("tickets", &json!({"sleep_us": 300})).unwrap());
        assert_eq!(graph.scheduling(), Scheduling::Free);
        let engine = Engine::new(Arc::new(MemoryJournal::new()));
        let out = engine.run(graph.clone(), json!({})).await.unwrap();
        assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
        let order: Vec<String> =
            serde_json::from_value(out.state.to_json()["order"].clone()).unwrap();
        let pos = |id: &str| order.iter().rposition(|n| n == id).unwrap();
        // 1 orchestrator + 6 × 3 ticket nodes + the revised work's second completion + collect.
        assert_eq!(order.len(), 21, "{order:?}");
        assert_eq!((order[0].as_str(), pos(COLLECTOR)), (ORCHESTRATOR, 20));
        assert_eq!(order.iter().filter(|n| *n == "tickets/t1").count(), 2);
        for k in 0..6 {
            let id = |stage| format!("{ORCHESTRATOR}/{}", key(k, stage));
            assert!(
                pos(&id(0)) < pos(&id(1)) && pos(&id(1)) < pos(&id(2)),
                "{order:?}"
            );
            for d in dependencies(k) {
                assert!(
                    pos(&format!("tickets/t{d}.merge")) < pos(&id(0)),
                    "{order:?}"
                );
            }
        }
        for n in out
            .nodes
            .iter()
            .filter(|n| n.id.as_str().starts_with("tickets/"))
        {
            let revised = n.id == "tickets/t1" || n.id == "tickets/t1.review";
            assert_eq!(n.state, Some(NodeState::Completed), "{}", n.id);
            assert_eq!(n.attempt, if revised { 2 } else { 1 }, "{}", n.id);
        }
        let feedback = out.node("tickets/t1").map(|n| n.result["feedback"].clone());
        assert_eq!(feedback, Some(json!("handle the empty list")));
        // The log replays to the live run's state.
        let replayed = engine.inspect(graph, &out.run).unwrap();
        assert_eq!(replayed.state.to_json(), out.state.to_json());
    }
}
