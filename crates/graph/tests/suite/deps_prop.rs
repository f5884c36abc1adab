//! Spawn dependencies and handler-issued revisions are recorded exactly: a run replays, resumes
//! from every batch boundary and forks from every checkpoint to the same end, in both
//! scheduling modes; and random dependency DAGs with random failures and revisions never hang,
//! end as their structure says, and fire the collector once.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;
use trellis_graph::{
    FailurePolicy, Graph, GraphBuilder, Journal, NodeContext, NodeError, NodeOutput, Reducer,
    Scheduling,
};
use trellis_protocol::{Event, EventKind, NodeState, RunStatus, TerminalKind};

use super::common::{
    assert_replays, assert_succeeded, checkpoints, crash_points, engine_with_log, fork_to_end, key,
    log_until, mem, recorded_outputs, resume_to_end, runtime,
};
use super::deps::{MODES, Ran, Ticket, three_tickets, tickets_recorded, transitions};

/// Three tickets where T1's review sends the work back once and T3 is slower.
fn revised_tickets() -> Vec<Ticket> {
    let mut list = three_tickets();
    list[0].revise = true;
    list[2].ms = 25;
    list
}

#[tokio::test]
async fn resume_from_every_batch_boundary_and_fork_from_every_checkpoint_match() {
    for mode in MODES {
        let (engine, journal) = mem();
        let g = tickets_recorded(mode, revised_tickets(), false, &Ran::default());
        let full = engine.run(g.clone(), json!({})).await.unwrap();
        assert_succeeded(&full, mode);
        assert_eq!(full.node("tickets/T1").unwrap().attempt, 2);
        let replayed = engine.inspect(g.clone(), &full.run).unwrap();
        assert_eq!(key(&replayed), key(&full));
        assert_eq!(replayed.last_seq, full.last_seq);
        let events = journal.load(&full.run).unwrap();
        let ends = crash_points(&journal, &full);
        assert!(ends.len() >= 6, "{mode:?}: {ends:?}");
        if mode == Scheduling::Steps {
            // A crash may fall after the orchestrator's output (with its dependencies) and
            // before its step completed: the resumed run applies them from the log.
            assert!(ends.iter().any(|&end| {
                let prefix: Vec<&Event> = events.iter().filter(|e| e.seq <= end).collect();
                let open = prefix.iter().rev().find_map(|e| match e.kind {
                    EventKind::StepStarted { .. } => Some(true),
                    EventKind::StepCompleted { .. } => Some(false),
                    _ => None,
                });
                open == Some(true)
                    && prefix.iter().any(|e| {
                        matches!(&e.kind, EventKind::NodeOutput { spawn_after, .. } if !spawn_after.is_empty())
                    })
                    && !prefix
                        .iter()
                        .any(|e| matches!(&e.kind, EventKind::NodeAdded { .. }))
            }));
        }
        let resumes = ends.iter().map(|&end| {
            let prefix = log_until(&events, end);
            let recorded = recorded_outputs(&prefix);
            let run = full.run.clone();
            async move {
                let ran = Ran::default();
                let g = tickets_recorded(mode, revised_tickets(), false, &ran);
                let engine = engine_with_log(prefix);
                let out = resume_to_end(&engine, g.clone(), &run, vec![]).await;
                assert_replays(&engine, g, &run, &out);
                let again = ran.lock().unwrap().clone();
                (end, out, recorded, again)
            }
        });
        for (end, out, recorded, again) in futures::future::join_all(resumes).await {
            assert_eq!(key(&out), key(&full), "{mode:?}: resumed at seq {end}");
            for r in &again {
                assert!(
                    !recorded.contains(r),
                    "{mode:?}: {r:?} was recorded before seq {end} but ran again"
                );
            }
        }
        for seq in checkpoints(&events) {
            let g = tickets_recorded(mode, revised_tickets(), false, &Ran::default());
            let out = fork_to_end(&engine, g.clone(), &full.run, seq).await;
            assert_eq!(key(&out), key(&full), "{mode:?}: forked at seq {seq}");
            assert_replays(&engine, g, &out.run, &out);
        }
    }
}

/// One child of a random DAG.
#[derive(Clone, Debug)]
struct Child {
    /// Earlier children it waits for.
    after: Vec<usize>,
    /// Fails on every attempt (after its revision request, if any).
    fail: bool,
    /// On its first attempt, fails and asks to revise this dependency.
    revise: Option<usize>,
    ms: u64,
}

fn dag() -> impl Strategy<Value = Vec<Child>> {
    (2..8usize).prop_flat_map(|n| {
        (0..n)
            .map(|i| {
                (
                    proptest::collection::vec(any::<bool>(), i),
                    prop_oneof![4 => Just(false), 1 => Just(true)],
                    any::<Option<proptest::sample::Index>>(),
                    0..3u64,
                )
                    .prop_map(|(picks, fail, revise, ms)| {
                        let after: Vec<usize> = (0..picks.len()).filter(|&d| picks[d]).collect();
                        let revise = revise
                            .filter(|_| !after.is_empty())
                            .map(|r| after[r.index(after.len())]);
                        Child {
                            after,
                            fail,
                            revise,
                            ms,
                        }
                    })
            })
            .collect::<Vec<_>>()
    })
}

fn dag_graph(children: &[Child], scheduling: Scheduling) -> Arc<Graph> {
    let spec = children.to_vec();
    let orchestrator = move |_c: NodeContext| {
        let spec = spec.clone();
        async move {
            let mut out = NodeOutput::success();
            for (i, c) in spec.iter().enumerate() {
                let input = json!({
                    "fail": c.fail,
                    "revise": c.revise.map(|r| format!("c{r}")),
                    "ms": c.ms,
                });
                out = out.spawn_after(
                    format!("c{i}"),
                    "child",
                    input,
                    c.after.iter().map(|d| format!("c{d}")),
                );
            }
            Ok::<_, NodeError>(out)
        }
    };
    let child = |ctx: NodeContext| async move {
        tokio::time::sleep(Duration::from_millis(ctx.input["ms"].as_u64().unwrap_or(0))).await;
        if let Some(dep) = ctx.input["revise"].as_str()
            && ctx.attempt == 1
        {
            return Ok(NodeOutput::failure("changes requested").revise(dep));
        }
        if ctx.input["fail"] == json!(true) {
            return Ok(NodeOutput::failure("broken"));
        }
        Ok::<_, NodeError>(
            NodeOutput::success().write("done", json!({ ctx.node.to_string(): ctx.attempt })),
        )
    };
    Arc::new(
        GraphBuilder::new("dag")
            .scheduling(scheduling)
            .concurrency(3)
            .channel("done", Reducer::Merge)
            .node("fan", orchestrator)
            .template("child", child)
            .collector("collect", "fan", FailurePolicy::AnyFails, None)
            .terminal("DONE", TerminalKind::Success, None)
            .edge("collect", "DONE")
            .entry("fan")
            .build()
            .unwrap(),
    )
}

/// What the structure says each child ends as: COMPLETED when it does not fail and all its
/// dependencies complete, FAILED when it fails and they do, SKIPPED otherwise.
fn oracle(children: &[Child]) -> Vec<NodeState> {
    let mut out: Vec<NodeState> = Vec::new();
    for c in children {
        let ready = c.after.iter().all(|&d| out[d] == NodeState::Completed);
        out.push(match (ready, c.fail) {
            (false, _) => NodeState::Skipped,
            (true, false) => NodeState::Completed,
            (true, true) => NodeState::Failed,
        });
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn random_dependency_dags_never_hang_and_collect_once(children in dag()) {
        runtime().block_on(async {
            let expected = oracle(&children);
            for mode in MODES {
                let (engine, journal) = mem();
                let g = dag_graph(&children, mode);
                let out = tokio::time::timeout(Duration::from_secs(20), engine.run(g.clone(), json!({})))
                    .await
                    .expect("the run ends")
                    .unwrap();
                prop_assert_eq!(out.status, RunStatus::Succeeded, "{:?}: {:?}", mode, out.error);
                let states: Vec<NodeState> = (0..children.len())
                    .map(|i| out.node(&format!("fan/c{i}")).and_then(|n| n.state).unwrap_or(NodeState::Ready))
                    .collect();
                prop_assert_eq!(&states, &expected, "{:?}", mode);
                let events = journal.load(&out.run).unwrap();
                let collected = transitions(&events, "collect")
                    .iter()
                    .filter(|t| t.2 == NodeState::Running)
                    .count();
                prop_assert_eq!(collected, 1, "{:?}", mode);
                let agg = &out.node("collect").unwrap().result["aggregate"];
                let failures = expected.iter().filter(|s| **s == NodeState::Failed).count();
                prop_assert_eq!(&agg["total"], &json!(children.len()));
                prop_assert_eq!(&agg["failures"], &json!(failures));
                // Every revision request ran the dependency again before the requester.
                for (i, c) in children.iter().enumerate() {
                    if let Some(d) = c.revise && expected[i] != NodeState::Skipped {
                        let (dep, me) = (format!("fan/c{d}"), format!("fan/c{i}"));
                        prop_assert!(out.node(&dep).unwrap().attempt >= 2, "{:?}: {}", mode, dep);
                        prop_assert!(out.node(&me).unwrap().attempt >= 2, "{:?}: {}", mode, me);
                    }
                }
                prop_assert_eq!(key(&engine.inspect(g, &out.run).unwrap()), key(&out));
            }
            Ok(())
        })?;
    }
}
