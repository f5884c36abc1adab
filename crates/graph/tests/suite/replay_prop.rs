//! Property: for random graphs, runs are deterministic whatever the completion order, replay
//! equals the live run, resuming from any crash point reaches the same end, and revising a
//! finished node of the finished run is deterministic and replays exactly too.
//!
//! Free-running (the second property): the end may depend on timing, but replaying the log
//! gives exactly the live run whatever order handlers finished in, a resumed run replays
//! exactly and never re-runs an activation whose output was recorded before the crash, and a
//! revision replays exactly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};
use trellis_graph::{
    FailurePolicy, Graph, GraphBuilder, Journal, MemoryJournal, NodeContext, NodeError, NodeOutput,
    Reducer, RunOutcome, Scheduling,
};
use trellis_protocol::{Command, Message, NodeId, NodeState, RunId, TerminalKind};

use super::common::{
    engine_with_log, key, log_until, mem, recorded_outputs, resume_to_end, runtime,
};

#[derive(Clone, Debug)]
enum Route {
    End,
    Always(Vec<usize>),
    Outcome { ok: usize, fail: usize },
    ByCounter { even: usize, odd: usize },
}

#[derive(Clone, Debug)]
struct NodeSpec {
    channel: usize,
    fail_first: u32,
    spawn: usize,
    policy: u8,
    route: Route,
}

const CHANNELS: [&str; 4] = ["list", "obj", "sum", "last"];

fn node_spec(i: usize, n: usize) -> impl Strategy<Value = NodeSpec> {
    let later = (i + 1)..=n; // n means DONE
    let route = prop_oneof![
        Just(Route::End),
        proptest::collection::vec(later.clone(), 1..3).prop_map(Route::Always),
        (later.clone(), 0..=i).prop_map(|(ok, fail)| Route::Outcome { ok, fail }),
        (later.clone(), later).prop_map(|(even, odd)| Route::ByCounter { even, odd }),
    ];
    (
        0..4usize,
        0..3u32,
        prop_oneof![3 => Just(0usize), 1 => 1..4usize],
        0..4u8,
        route,
    )
        .prop_map(|(channel, fail_first, spawn, policy, route)| NodeSpec {
            channel,
            fail_first,
            spawn,
            policy,
            route,
        })
}

fn graph_spec() -> impl Strategy<Value = Vec<NodeSpec>> {
    (2..7usize).prop_flat_map(|n| (0..n).map(|i| node_spec(i, n)).collect::<Vec<_>>())
}

fn value_for(node: &NodeId, attempt: u32, channel: &str) -> Value {
    match channel {
        "list" => json!([format!("{node}#{attempt}")]),
        "obj" => json!({ node.to_string(): attempt }),
        "sum" => json!(node.as_str().len() as u64 * 10 + u64::from(attempt)),
        _ => json!(format!("{node}#{attempt}")),
    }
}

fn jitter(node: &NodeId, attempt: u32, salt: u64) -> Duration {
    let h = node
        .as_str()
        .bytes()
        .fold(salt.wrapping_add(u64::from(attempt)), |h, b| {
            h.wrapping_mul(131).wrapping_add(u64::from(b))
        });
    Duration::from_micros(h % 1500)
}

fn build(spec: &[NodeSpec], salt: u64) -> Graph {
    build_with(spec, salt, Scheduling::Steps, &Arc::default())
}

/// Activations whose handler ran: (node, attempt).
type Ran = Arc<Mutex<Vec<(String, u32)>>>;

fn build_with(spec: &[NodeSpec], salt: u64, scheduling: Scheduling, ran: &Ran) -> Graph {
    let n = spec.len();
    let name = |i: usize| {
        if i >= n {
            "DONE".to_string()
        } else {
            format!("s{i}")
        }
    };
    let mut b = GraphBuilder::new("prop")
        .max_steps(200)
        .concurrency(3)
        .scheduling(scheduling);
    b = b
        .channel("list", Reducer::Append)
        .channel("obj", Reducer::Merge)
        .channel("sum", Reducer::Sum)
        .channel("last", Reducer::Replace);
    for (i, s) in spec.iter().enumerate() {
        let s2 = s.clone();
        let ran = ran.clone();
        let handler = move |ctx: NodeContext| {
            let s = s2.clone();
            ran.lock()
                .unwrap()
                .push((ctx.node.to_string(), ctx.attempt));
            async move {
                tokio::time::sleep(jitter(&ctx.node, ctx.attempt, salt)).await;
                let ch = CHANNELS[s.channel];
                let mut out = if ctx.attempt <= s.fail_first && !matches!(s.route, Route::End) {
                    NodeOutput::failure("scripted")
                } else {
                    NodeOutput::success()
                };
                out = out
                    .write(ch, value_for(&ctx.node, ctx.attempt, ch))
                    .count("steps", 1);
                for k in 0..s.spawn {
                    out = out.spawn(format!("c{k}"), "child", json!(k));
                }
                Ok::<_, NodeError>(out)
            }
        };
        let id = name(i);
        b = b.node_with(id.as_str(), handler, |o| o.max_attempts(3, "ABORT"));
        let from = if s.spawn > 0 {
            let col = format!("k{i}");
            let policy = [
                FailurePolicy::AnyFails,
                FailurePolicy::AllFail,
                FailurePolicy::MajorityFail,
                FailurePolicy::Quorum(1),
            ][usize::from(s.policy)];
            b = b.collector(col.as_str(), id.as_str(), policy, None);
            col
        } else {
            id
        };
        b = match &s.route {
            Route::End => b,
            Route::Always(t) => t
                .iter()
                .fold(b, |b, &t| b.edge(from.as_str(), name(t).as_str())),
            Route::Outcome { ok, fail } => {
                b.outcome_edge(from.as_str(), name(*ok).as_str(), name(*fail).as_str())
            }
            Route::ByCounter { even, odd } => {
                let (e, o) = (name(*even), name(*odd));
                let (e2, o2) = (e.clone(), o.clone());
                b.conditional_edge(
                    from.as_str(),
                    [e, o],
                    move |r: &trellis_graph::RouteContext<'_>| {
                        Ok(vec![NodeId::from(if r.counter("steps") % 2 == 0 {
                            e2.as_str()
                        } else {
                            o2.as_str()
                        })])
                    },
                )
            }
        };
    }
    let ran = ran.clone();
    let child = move |ctx: NodeContext| {
        ran.lock()
            .unwrap()
            .push((ctx.node.to_string(), ctx.attempt));
        child_run(ctx, salt)
    };
    b.template("child", child)
        .terminal("DONE", TerminalKind::Success, None)
        .terminal("ABORT", TerminalKind::Failure, None)
        .entry("s0")
        .build()
        .unwrap()
}

async fn child_run(ctx: NodeContext, salt: u64) -> Result<NodeOutput, NodeError> {
    {
        tokio::time::sleep(jitter(&ctx.node, ctx.attempt, salt ^ 7)).await;
        let k = ctx.input.as_u64().unwrap_or(0);
        let out = if k == 0 && ctx.attempt == 1 {
            NodeOutput::failure("first child fails once")
        } else {
            NodeOutput::success()
        };
        Ok::<_, NodeError>(
            out.write("list", value_for(&ctx.node, ctx.attempt, "list"))
                .count("children", 1),
        )
    }
}

/// A random graph, where in its log a crash falls (a fraction of its batch boundaries), and
/// which of its finished nodes to revise.
fn replay_case() -> impl Strategy<Value = (Vec<NodeSpec>, f64, proptest::sample::Index)> {
    (graph_spec(), 0.0f64..1.0, any::<proptest::sample::Index>())
}

/// The batch boundary `cut` of the way through the run's log.
fn crash_point(journal: &MemoryJournal, run: &RunId, cut: f64) -> u64 {
    let ends = journal.batch_ends(run);
    ends[((ends.len() as f64 - 1.0) * cut) as usize]
}

/// The nodes whose latest activation finished (COMPLETED or FAILED): those a revision may
/// name.
fn finished_nodes(out: &RunOutcome) -> Vec<NodeId> {
    out.nodes
        .iter()
        .filter(|n| matches!(n.state, Some(NodeState::Completed | NodeState::Failed)))
        .map(|n| n.id.clone())
        .collect()
}

/// A revision of `node` asking it to run again.
fn revision(node: NodeId) -> Vec<Command> {
    vec![Command::Revise {
        node,
        message: Message::user("again"),
    }]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_graphs_replay_deterministically((spec, cut, pick) in replay_case()) {
        runtime().block_on(async {
            let (engine, journal) = mem();
            let a = engine.run(Arc::new(build(&spec, 1)), json!({})).await.unwrap();
            // Different sleeps → different completion order → same result.
            let b = engine.run(Arc::new(build(&spec, 99)), json!({})).await.unwrap();
            prop_assert_eq!(key(&a), key(&b));
            // Replaying the log gives the live state.
            let g = Arc::new(build(&spec, 1));
            prop_assert_eq!(key(&engine.inspect(g.clone(), &a.run).unwrap()), key(&a));
            // Resuming from a crash point gives the same end.
            let end = crash_point(&journal, &a.run, cut);
            if end < a.last_seq {
                let prefix = log_until(&journal.load(&a.run).unwrap(), end);
                let crashed = engine_with_log(prefix);
                let r = resume_to_end(&crashed, g.clone(), &a.run, vec![]).await;
                prop_assert_eq!(key(&r).0, key(&a).0);
                prop_assert_eq!(key(&r).3, key(&a).3);
            }
            // Revising a finished node (whatever the timing) reaches the same end, and the
            // reopened log replays to it.
            let finished = finished_nodes(&a);
            if !finished.is_empty() {
                let node = finished[pick.index(finished.len())].clone();
                let ra = resume_to_end(&engine, g.clone(), &a.run, revision(node.clone())).await;
                let rb = resume_to_end(&engine, Arc::new(build(&spec, 99)), &b.run, revision(node)).await;
                prop_assert_eq!(key(&ra), key(&rb));
                prop_assert!(ra.status.is_final(), "{:?}", ra.status);
                prop_assert_eq!(key(&engine.inspect(g, &a.run).unwrap()), key(&ra));
            }
            Ok(())
        })?;
    }

    #[test]
    fn random_graphs_replay_exactly_free_running((spec, cut, pick) in replay_case()) {
        runtime().block_on(async {
            let (engine, journal) = mem();
            let free = |salt| Arc::new(build_with(&spec, salt, Scheduling::Free, &Arc::default()));
            // Whatever order the handlers finished in, the log replays to the live run.
            let mut runs = Vec::new();
            for salt in [1, 99] {
                let live = engine.run(free(salt), json!({})).await.unwrap();
                prop_assert!(live.status.is_final(), "{:?}", live.status);
                let replayed = engine.inspect(free(salt), &live.run).unwrap();
                prop_assert_eq!(key(&replayed), key(&live));
                prop_assert_eq!(replayed.last_seq, live.last_seq);
                runs.push(live);
            }
            let a = &runs[0];
            // A crash at a batch boundary: the resumed run replays exactly, ends, and runs
            // no activation again whose output was recorded before the crash.
            let end = crash_point(&journal, &a.run, cut);
            if end < a.last_seq {
                let prefix = log_until(&journal.load(&a.run).unwrap(), end);
                let recorded = recorded_outputs(&prefix);
                let crashed = engine_with_log(prefix);
                let ran: Ran = Arc::default();
                let g = Arc::new(build_with(&spec, 1, Scheduling::Free, &ran));
                let r = resume_to_end(&crashed, g.clone(), &a.run, vec![]).await;
                prop_assert!(r.status.is_final(), "{:?}", r.status);
                prop_assert_eq!(key(&crashed.inspect(g, &a.run).unwrap()), key(&r));
                for again in ran.lock().unwrap().iter() {
                    prop_assert!(!recorded.contains(again), "{:?} ran again after resume", again);
                }
            }
            // A revision of a finished node replays exactly too.
            let finished = finished_nodes(a);
            if !finished.is_empty() {
                let node = finished[pick.index(finished.len())].clone();
                let ra = resume_to_end(&engine, free(1), &a.run, revision(node)).await;
                prop_assert!(ra.status.is_final(), "{:?}", ra.status);
                prop_assert_eq!(key(&engine.inspect(free(1), &a.run).unwrap()), key(&ra));
            }
            Ok(())
        })?;
    }
}
