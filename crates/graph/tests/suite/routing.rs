use serde_json::json;
use trellis_graph::{Error, GraphBuilder, NodeContext, NodeError, NodeOutput, Reducer};
use trellis_protocol::{NodeId, NodeState, RunStatus, TerminalKind};

use super::common::{demo, feature, mem, run_once};

#[tokio::test]
async fn feature_loop_enriches_twice_then_succeeds() {
    let (engine, _) = mem();
    let out = engine
        .run(feature(), trellis_graph::demo::feature_input())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(out.terminal, Some(NodeId::new("DONE")));
    assert_eq!(
        out.steps, 9,
        "code, test(F), enrich, test(F), enrich, test, security, lint, DONE"
    );
    assert_eq!(out.node("test_generation").unwrap().attempt, 3);
    assert_eq!(out.node("adaptive_retrieval").unwrap().attempt, 2);
    assert_eq!(out.counters["enrichment_attempts:test_generation"], 2);
    assert_eq!(
        out.state.get("messages").unwrap().as_array().unwrap().len(),
        10
    );
    assert_eq!(out.state.get("outcome"), Some(&json!("DONE")));
    assert_eq!(
        out.node("ABORT").unwrap().state,
        None,
        "ABORT never reached"
    );
    // The third attempt saw the context added by the second enrichment.
    assert_eq!(
        out.state
            .get_in("stage_results", "test_generation")
            .unwrap()["used_context"],
        json!(true)
    );
}

#[tokio::test]
async fn max_attempts_bounds_the_failure_routes_back_into_the_graph() {
    let (engine, _) = mem();
    let out = engine
        .run(demo("feature", json!({"fail_first": 10})), json!({}))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(out.terminal, Some(NodeId::new("ABORT")));
    // Failures 1 and 2 enrich, failure 3 retries at once (enrichment spent): the failure route
    // was taken max_attempts (3) times, so failure 4 goes to ABORT without it.
    assert_eq!(out.node("test_generation").unwrap().attempt, 4);
    assert_eq!(out.node("adaptive_retrieval").unwrap().attempt, 2);
    assert_eq!(out.node("security_review").unwrap().state, None);
    assert_eq!(out.state.get("outcome"), Some(&json!("ABORT")));
    assert_eq!(
        out.error.as_deref(),
        Some(
            "reached failure terminal ABORT (test_generation: max_attempts (3) reached: \
             failed again after its failure route was taken 3 time(s))"
        )
    );
}

/// Fails its first and third activations.
fn fail_first_and_third(ctx: NodeContext) -> futures::future::Ready<Result<NodeOutput, NodeError>> {
    futures::future::ready(if ctx.attempt == 1 || ctx.attempt == 3 {
        Err(NodeError::new("boom"))
    } else {
        Ok(NodeOutput::success().write("seen", json!([ctx.node.to_string()])))
    })
}

#[tokio::test]
async fn a_failure_route_to_a_terminal_is_taken_whatever_max_attempts_says() {
    let g = GraphBuilder::new("t")
        .channel("seen", Reducer::Append)
        .node_with("a", fail, |o| o.max_attempts(1, "ABORT"))
        .terminal("DONE", TerminalKind::Success, None)
        .terminal("ABORT", TerminalKind::Failure, None)
        .node("b", ok)
        .outcome_edge("a", "b", "DONE")
        .entry("a")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    assert_eq!(out.terminal, Some(NodeId::new("DONE")));
    assert_eq!(out.node("ABORT").unwrap().state, None);
}

#[tokio::test]
async fn max_attempts_counts_failure_routes_not_activations() {
    // `a` retries itself on failure (max_attempts 2) and runs again when `b` fails: its third
    // activation fails, but only its second failure route is taken then, so the run goes on.
    let b_fails_once = |ctx: NodeContext| {
        futures::future::ready(if ctx.attempt == 1 {
            Err(NodeError::new("boom"))
        } else {
            Ok(NodeOutput::success())
        })
    };
    let g = GraphBuilder::new("t")
        .channel("seen", Reducer::Append)
        .node("start", ok)
        .node_with("a", fail_first_and_third, |o| o.max_attempts(2, "ABORT"))
        .node_with("b", b_fails_once, |o| o.max_attempts(1, "ABORT"))
        .terminal("DONE", TerminalKind::Success, None)
        .terminal("ABORT", TerminalKind::Failure, None)
        .edge("start", "a")
        .outcome_edge("a", "b", "a")
        .outcome_edge("b", "DONE", "start")
        .entry("start")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    assert_eq!(out.node("a").unwrap().attempt, 4);
    assert_eq!(out.node("b").unwrap().attempt, 2);
    assert_eq!(
        out.state.get("seen"),
        Some(&json!(["start", "a", "start", "a"]))
    );
}

#[tokio::test]
async fn a_resumed_run_counts_the_failure_routes_of_its_log() {
    // Stopped after `a`'s first failure was routed back to it: resumed, its count comes from
    // the log, so the next failure goes to ABORT instead of a third activation.
    let g = std::sync::Arc::new(
        GraphBuilder::new("t")
            .node_with("a", fail, |o| o.max_attempts(1, "ABORT"))
            .terminal("ABORT", TerminalKind::Failure, None)
            .outcome_edge("a", "ABORT", "a")
            .entry("a")
            .build()
            .unwrap(),
    );
    let (engine, journal) = mem();
    let full = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(full.node("a").unwrap().attempt, 2);
    let mut events = trellis_graph::Journal::load(journal.as_ref(), &full.run).unwrap();
    let retry = events
        .iter()
        .position(|e| {
            matches!(
                e.kind,
                trellis_protocol::EventKind::NodeTransition {
                    attempt: 2,
                    to: NodeState::Ready,
                    ..
                }
            )
        })
        .unwrap();
    events.truncate(retry + 1);
    let engine = trellis_graph::Engine::new(std::sync::Arc::new(
        trellis_graph::MemoryJournal::with_log(events),
    ));
    let resumed = engine
        .resume(g, &full.run, Vec::new())
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(resumed.terminal, Some(NodeId::new("ABORT")));
    assert_eq!(resumed.node("a").unwrap().attempt, 2);
    assert_eq!(resumed.error, full.error);
}

fn ok(ctx: NodeContext) -> futures::future::Ready<Result<NodeOutput, NodeError>> {
    futures::future::ready(Ok(
        NodeOutput::success().write("seen", json!([ctx.node.to_string()]))
    ))
}

fn fail(_ctx: NodeContext) -> futures::future::Ready<Result<NodeOutput, NodeError>> {
    futures::future::ready(Err(NodeError::new("boom")))
}

#[tokio::test]
async fn outcome_edges_follow_success_and_failure() {
    let g = GraphBuilder::new("t")
        .channel("seen", Reducer::Append)
        .node("a", fail)
        .node("on_ok", ok)
        .node("on_fail", ok)
        .outcome_edge("a", "on_ok", "on_fail")
        .entry("a")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(
        out.status,
        RunStatus::Succeeded,
        "branch ended without failure"
    );
    assert_eq!(out.node("a").unwrap().error.as_deref(), Some("boom"));
    assert_eq!(out.state.get("seen"), Some(&json!(["on_fail"])));
}

#[tokio::test]
async fn failure_without_route_fails_the_run() {
    let g = GraphBuilder::new("t")
        .node("a", fail)
        .entry("a")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(out.status, RunStatus::Failed);
    assert_eq!(
        out.error.as_deref(),
        Some("node a failed and has no failure route")
    );
}

#[tokio::test]
async fn router_returning_undeclared_target_fails_the_run_with_reason() {
    let g = GraphBuilder::new("t")
        .node("a", ok)
        .node("b", ok)
        .conditional_edge("a", ["b"], |_r: &trellis_graph::RouteContext<'_>| {
            Ok(vec![NodeId::new("zzz")])
        })
        .channel("seen", Reducer::Append)
        .entry("a")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(out.status, RunStatus::Failed);
    assert!(out.error.unwrap().contains("router returned `zzz`"));
}

#[tokio::test]
async fn step_limit_guards_loops() {
    let g = GraphBuilder::new("loop")
        .channel("seen", Reducer::Append)
        .node("a", ok)
        .edge("a", "a")
        .max_steps(5)
        .entry("a")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(out.status, RunStatus::Failed);
    assert!(out.error.as_deref().unwrap().contains("step limit of 5"));
    assert_eq!(
        out.node("a").unwrap().attempt,
        6,
        "the 6th activation is pruned, never run"
    );
    assert_eq!(out.node("a").unwrap().state, Some(NodeState::Pruned));
}

#[tokio::test]
async fn skipped_stage_routes_on_as_success() {
    let g = GraphBuilder::new("t")
        .channel("seen", Reducer::Append)
        .node("a", ok)
        .node_with("b", ok, |o| o.skipped())
        .node("c", ok)
        .outcome_edge("b", "c", "a")
        .edge("a", "b")
        .terminal("DONE", TerminalKind::Success, None)
        .edge("c", "DONE")
        .entry("a")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(out.node("b").unwrap().state, Some(NodeState::Skipped));
    assert_eq!(out.state.get("seen"), Some(&json!(["a", "c"])));
}

#[test]
fn invalid_graphs_report_every_problem_with_suggestions() {
    let err = GraphBuilder::new("bad")
        .node("code_generation", ok)
        .edge("code_generation", "code_generaton_x")
        .edge("nowhere", "code_generation")
        .terminal("DONE", TerminalKind::Success, None)
        .edge("DONE", "code_generation")
        .entry("code_generatio")
        .build()
        .unwrap_err();
    let Error::InvalidGraph { problems, .. } = err else {
        panic!("{err}")
    };
    assert!(
        problems.contains(
            "entry node `code_generatio` is not declared (did you mean `code_generation`?)"
        ),
        "{problems}"
    );
    assert!(problems.contains("target is not declared"), "{problems}");
    assert!(
        problems.contains("edge from undeclared node `nowhere`"),
        "{problems}"
    );
    assert!(
        problems.contains("terminal node `DONE` must not have outgoing edges"),
        "{problems}"
    );
}

#[tokio::test]
async fn writes_merge_in_declaration_order_not_completion_order() {
    // `slow` is declared first but finishes last; its write must still come first.
    let slow = |_ctx: NodeContext| async {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        Ok::<_, NodeError>(
            NodeOutput::success()
                .write("seen", json!(["slow"]))
                .write("last", json!("slow")),
        )
    };
    let fast = |_ctx: NodeContext| async {
        Ok::<_, NodeError>(
            NodeOutput::success()
                .write("seen", json!(["fast"]))
                .write("last", json!("fast")),
        )
    };
    let g = GraphBuilder::new("order")
        .channel("seen", Reducer::Append)
        .channel("last", Reducer::Replace)
        .node("start", ok)
        .node("slow", slow)
        .node("fast", fast)
        .edge("start", "slow")
        .edge("start", "fast")
        .entry("start")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(
        out.state.get("seen"),
        Some(&json!(["start", "slow", "fast"]))
    );
    assert_eq!(out.state.get("last"), Some(&json!("fast")));
}

#[tokio::test]
async fn bad_writes_fail_the_node_with_a_precise_message() {
    let bad = |_ctx: NodeContext| async {
        Ok::<_, NodeError>(NodeOutput::success().write("seem", json!([1])))
    };
    let g = GraphBuilder::new("t")
        .channel("seen", Reducer::Append)
        .node("a", bad)
        .entry("a")
        .build()
        .unwrap();
    let out = run_once(g).await;
    let a = out.node("a").unwrap();
    assert_eq!(a.state, Some(NodeState::Failed));
    assert_eq!(
        a.error.as_deref(),
        Some("wrote undeclared channel `seem` (declared: seen); did you mean `seen`?")
    );
}

#[tokio::test]
async fn unknown_input_channel_is_rejected() {
    let (engine, _) = mem();
    let err = engine
        .start(feature(), json!({"mesages": []}))
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "invalid run input: unknown channel `mesages` (did you mean `messages`?)"
    );
}

#[tokio::test]
async fn handler_panic_fails_only_that_node() {
    let boom = |_ctx: NodeContext| async {
        if true {
            panic!("kaboom");
        }
        Ok::<_, NodeError>(NodeOutput::success())
    };
    let g = GraphBuilder::new("t")
        .node("a", boom)
        .entry("a")
        .build()
        .unwrap();
    let out = run_once(g).await;
    assert_eq!(
        out.node("a").unwrap().error.as_deref(),
        Some("handler panicked: kaboom")
    );
    assert_eq!(out.status, RunStatus::Failed);
}

#[tokio::test]
async fn ready_nodes_run_concurrently_up_to_the_limit() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    for limit in [1usize, 3, 8] {
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (n2, p2) = (now.clone(), peak.clone());
        let worker = move |_ctx: NodeContext| {
            let (now, peak) = (n2.clone(), p2.clone());
            async move {
                let cur = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(cur, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, NodeError>(NodeOutput::success())
            }
        };
        let spawner = |_ctx: NodeContext| async {
            let mut out = NodeOutput::success();
            for i in 0..8 {
                out = out.spawn(format!("w{i}"), "w", json!(i));
            }
            Ok::<_, NodeError>(out)
        };
        let g = GraphBuilder::new("limit")
            .concurrency(limit)
            .node("s", spawner)
            .template("w", worker)
            .entry("s")
            .build()
            .unwrap();
        let (engine, _) = mem();
        let started = std::time::Instant::now();
        let out = engine.run(g.into(), json!({})).await.unwrap();
        assert_eq!(out.status, RunStatus::Succeeded);
        assert_eq!(
            peak.load(Ordering::SeqCst),
            limit,
            "peak concurrency with limit {limit}"
        );
        // 8 children of 20 ms each in ceil(8 / limit) waves.
        assert!(
            started.elapsed() >= std::time::Duration::from_millis(20 * 8u64.div_ceil(limit as u64))
        );
    }
}
