//! Dependencies between spawned children (`NodeOutput::spawn_after`), revisions requested by
//! handlers (`NodeOutput::revise`) and dependents that run again: per-ticket pipelines
//! (work → review → merge, a ticket after another ticket's merge), in both scheduling modes.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use trellis_graph::{
    Engine, FailurePolicy, Graph, GraphBuilder, Journal, MemoryJournal, NodeContext, NodeError,
    NodeHandler, NodeOutput, Reducer, RunOutcome, Scheduling,
};
use trellis_protocol::{Command, Event, EventKind, NodeId, NodeState, RunStatus, TerminalKind};

use super::common::{assert_replays, assert_succeeded, key, mem};

pub const MODES: [Scheduling; 2] = [Scheduling::Steps, Scheduling::Free];

/// One ticket of the orchestrator: `key` (work), `key.review` after it, `key.merge` after the
/// review; `after` names a ticket whose merge its work waits for.
#[derive(Clone, Default)]
pub struct Ticket {
    pub key: &'static str,
    pub after: Option<&'static str>,
    /// The work fails (every attempt).
    pub fail: bool,
    /// The work fails on its first attempt only.
    pub fail_once: bool,
    /// The review sends the work back once (its first attempt).
    pub revise: bool,
    /// The review asks to revise this instead of its work.
    pub revise_other: Option<&'static str>,
    /// How long the work sleeps.
    pub ms: u64,
}

pub fn ticket(key: &'static str) -> Ticket {
    Ticket {
        key,
        ms: 2,
        ..Ticket::default()
    }
}

async fn pause(ctx: &NodeContext) -> bool {
    let ms = ctx.input["ms"].as_u64().unwrap_or(1);
    tokio::select! {
        () = ctx.cancel.cancelled() => false,
        () = tokio::time::sleep(Duration::from_millis(ms)) => true,
    }
}

fn done(ctx: &NodeContext) -> NodeOutput {
    NodeOutput::success().write("done", json!({ ctx.node.to_string(): ctx.attempt }))
}

async fn work(ctx: NodeContext) -> Result<NodeOutput, NodeError> {
    pause(&ctx).await;
    if ctx.input["fail"] == json!(true)
        || (ctx.input["fail_once"] == json!(true) && ctx.attempt == 1)
    {
        return Ok(NodeOutput::failure("tests fail"));
    }
    // What the review asked for, through the state.
    let feedback = ctx
        .state
        .get_in("feedback", ctx.node.as_str())
        .cloned()
        .unwrap_or(Value::Null);
    Ok(done(&ctx).write(
        "seen",
        json!({ format!("{}#{}", ctx.node, ctx.attempt): feedback }),
    ))
}

async fn review(ctx: NodeContext) -> Result<NodeOutput, NodeError> {
    pause(&ctx).await;
    let work = ctx.input["work"].as_str().unwrap_or_default().to_owned();
    if let Some(other) = ctx.input["revise_other"].as_str() {
        return Ok(NodeOutput::failure("wrong target").revise(other));
    }
    if ctx.input["revise"] == json!(true) && ctx.attempt == 1 {
        let work_id = format!("tickets/{work}");
        return Ok(NodeOutput::failure("changes requested")
            .write("feedback", json!({ work_id: "handle the empty list" }))
            .revise(work));
    }
    Ok(done(&ctx))
}

async fn merge(ctx: NodeContext) -> Result<NodeOutput, NodeError> {
    pause(&ctx).await;
    Ok(done(&ctx))
}

/// Activations whose handler ran: (node, attempt).
pub type Ran = Arc<Mutex<Vec<(String, u32)>>>;

/// `handler`, recording each activation it runs in `ran`.
fn recorded<F, Fut>(ran: &Ran, handler: F) -> impl NodeHandler
where
    F: Fn(NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<NodeOutput, NodeError>> + Send + 'static,
{
    let ran = ran.clone();
    move |ctx: NodeContext| {
        ran.lock()
            .unwrap()
            .push((ctx.node.to_string(), ctx.attempt));
        handler(ctx)
    }
}

/// `start` → `tickets` (the orchestrator) and `side` (slower, so in lock-step the
/// orchestrator's output is recorded before its step ends); `collect` gathers the tickets and,
/// with `terminal`, goes on to DONE.
pub fn tickets(scheduling: Scheduling, list: Vec<Ticket>, terminal: bool) -> Arc<Graph> {
    tickets_recorded(scheduling, list, terminal, &Ran::default())
}

/// [`tickets`], recording the activations of the tickets' nodes in `ran`.
pub fn tickets_recorded(
    scheduling: Scheduling,
    list: Vec<Ticket>,
    terminal: bool,
    ran: &Ran,
) -> Arc<Graph> {
    let orchestrator = move |_c: NodeContext| {
        let list = list.clone();
        async move {
            let mut out = NodeOutput::success();
            for t in &list {
                let k = t.key;
                out = out
                    .spawn_after(
                        k,
                        "work",
                        json!({ "ms": t.ms, "fail": t.fail, "fail_once": t.fail_once }),
                        t.after.map(|a| format!("{a}.merge")),
                    )
                    .spawn_after(
                        format!("{k}.review"),
                        "review",
                        json!({ "ms": 1, "work": k, "revise": t.revise, "revise_other": t.revise_other }),
                        [k],
                    )
                    .spawn_after(
                        format!("{k}.merge"),
                        "merge",
                        json!({ "ms": 1 }),
                        [format!("{k}.review")],
                    );
            }
            Ok::<_, NodeError>(out)
        }
    };
    let mut b = GraphBuilder::new("tickets")
        .scheduling(scheduling)
        .channel("done", Reducer::Merge)
        .channel("seen", Reducer::Merge)
        .channel("feedback", Reducer::Merge)
        .node("start", |_c: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .node("tickets", orchestrator)
        .node("side", |c: NodeContext| async move {
            tokio::time::sleep(Duration::from_millis(15)).await;
            Ok::<_, NodeError>(done(&c))
        })
        .template("work", recorded(ran, work))
        .template("review", recorded(ran, review))
        .template("merge", recorded(ran, merge))
        .collector("collect", "tickets", FailurePolicy::AnyFails, None)
        .edge("start", "tickets")
        .edge("start", "side")
        .entry("start");
    if terminal {
        b = b
            .terminal("DONE", TerminalKind::Success, None)
            .edge("collect", "DONE");
    }
    Arc::new(b.build().unwrap())
}

/// The transitions of `node`: (attempt, from, to, reason, seq).
pub fn transitions(
    events: &[Event],
    node: &str,
) -> Vec<(u32, Option<NodeState>, NodeState, Option<String>, u64)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeTransition {
                node: n,
                attempt,
                from,
                to,
                reason,
            } if n == node => Some((*attempt, *from, *to, reason.clone(), e.seq)),
            _ => None,
        })
        .collect()
}

/// Seq of the transition of `node#attempt` to `to`.
pub fn seq(events: &[Event], node: &str, attempt: u32, to: NodeState) -> u64 {
    transitions(events, node)
        .into_iter()
        .find(|t| t.0 == attempt && t.2 == to)
        .unwrap_or_else(|| panic!("{node}#{attempt} never went {to}"))
        .4
}

/// The latest (attempt, state) of every node whose id starts with `prefix`.
pub fn states(out: &RunOutcome, prefix: &str) -> Vec<(String, u32, Option<NodeState>)> {
    out.nodes
        .iter()
        .filter(|n| n.id.as_str().starts_with(prefix))
        .map(|n| (n.id.to_string(), n.attempt, n.state))
        .collect()
}

/// The expected [`states`] of the given tickets' nodes: (node under `tickets/`, attempt, state).
pub fn expect(rows: &[(&str, u32, NodeState)]) -> Vec<(String, u32, Option<NodeState>)> {
    rows.iter()
        .map(|(n, a, s)| (format!("tickets/{n}"), *a, Some(*s)))
        .collect()
}

/// The expected [`states`] of ticket pipelines: per ticket, the states of its work, review
/// and merge, all at the given attempt, in file order.
pub fn expect_pipelines(
    tickets: &[(&str, u32, [NodeState; 3])],
) -> Vec<(String, u32, Option<NodeState>)> {
    tickets
        .iter()
        .flat_map(|&(t, attempt, [work, review, merge])| {
            [
                (t.to_owned(), work),
                (format!("{t}.review"), review),
                (format!("{t}.merge"), merge),
            ]
            .map(|(n, state)| (format!("tickets/{n}"), attempt, Some(state)))
        })
        .collect()
}

pub fn collector_runs(events: &[Event]) -> usize {
    transitions(events, "collect")
        .iter()
        .filter(|t| t.2 == NodeState::Running)
        .count()
}

/// The reason the latest activation of `node` was skipped.
pub fn skip_reason(events: &[Event], node: &str) -> String {
    transitions(events, &format!("tickets/{node}"))
        .into_iter()
        .rev()
        .find(|t| t.2 == NodeState::Skipped)
        .and_then(|t| t.3)
        .unwrap_or_else(|| panic!("{node} was not skipped"))
}

pub fn three_tickets() -> Vec<Ticket> {
    vec![
        Ticket {
            ms: 10,
            ..ticket("T1")
        },
        Ticket {
            after: Some("T1"),
            ..ticket("T2")
        },
        ticket("T3"),
    ]
}

pub async fn run(engine: &Engine, g: &Arc<Graph>) -> RunOutcome {
    let out = tokio::time::timeout(Duration::from_secs(20), engine.run(g.clone(), json!({})))
        .await
        .expect("the run ends")
        .unwrap();
    assert_eq!(
        key(&engine.inspect(g.clone(), &out.run).unwrap()),
        key(&out),
        "the log replays to the live run"
    );
    out
}

#[tokio::test]
async fn three_ticket_pipelines_run_in_dependency_order() {
    for mode in MODES {
        let (engine, journal) = mem();
        let g = tickets(mode, three_tickets(), true);
        let out = run(&engine, &g).await;
        assert_succeeded(&out, mode);
        use NodeState::Completed as C;
        assert_eq!(
            states(&out, "tickets/"),
            expect_pipelines(&[
                ("T1", 1, [C, C, C]),
                ("T2", 1, [C, C, C]),
                ("T3", 1, [C, C, C])
            ]),
            "{mode:?}"
        );
        let ev = journal.load(&out.run).unwrap();
        let ran = |n: &str| seq(&ev, &format!("tickets/{n}"), 1, NodeState::Running);
        let completed = |n: &str| seq(&ev, &format!("tickets/{n}"), 1, NodeState::Completed);
        for (before, after) in [
            ("T1", "T1.review"),
            ("T1.review", "T1.merge"),
            ("T1.merge", "T2"),
            ("T2", "T2.review"),
            ("T2.review", "T2.merge"),
            ("T3", "T3.review"),
            ("T3.review", "T3.merge"),
        ] {
            assert!(
                completed(before) < ran(after),
                "{mode:?}: {before} → {after}"
            );
        }
        // The independent ticket starts with the first one, not after it.
        assert!(ran("T3") < completed("T1"), "{mode:?}");
        // Held children have no activation until they are released.
        assert!(
            transitions(&ev, "tickets/T2")[0].4 > completed("T1.merge"),
            "{mode:?}: T2 was held"
        );
        let added: Vec<(String, Vec<NodeId>)> = ev
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::NodeAdded { node, after, .. } => Some((node.to_string(), after.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(added[0], ("tickets/T1".into(), vec![]));
        assert_eq!(
            added[3],
            ("tickets/T2".into(), vec![NodeId::new("tickets/T1.merge")])
        );
        assert_eq!(collector_runs(&ev), 1, "{mode:?}");
        let last_child = ["T1.merge", "T2.merge", "T3.merge"].map(completed);
        assert!(seq(&ev, "collect", 1, NodeState::Running) > *last_child.iter().max().unwrap());
        let agg = &out.node("collect").unwrap().result["aggregate"];
        assert_eq!(agg["total"], json!(9));
        assert_eq!(agg["failures"], json!(0));
    }
}

#[tokio::test]
async fn a_failed_dependency_skips_its_dependents_and_the_collector_still_fires() {
    for mode in MODES {
        let (engine, journal) = mem();
        let mut list = three_tickets();
        list[0].fail = true;
        let g = tickets(mode, list, true);
        let out = run(&engine, &g).await;
        // The collector goes on to DONE, which ends the run (T1's failure has no route).
        assert_succeeded(&out, mode);
        use NodeState::{Completed as C, Failed as F, Skipped as S};
        assert_eq!(
            states(&out, "tickets/"),
            expect_pipelines(&[
                ("T1", 1, [F, S, S]),
                ("T2", 1, [S, S, S]),
                ("T3", 1, [C, C, C])
            ]),
            "{mode:?}"
        );
        let ev = journal.load(&out.run).unwrap();
        assert_eq!(
            skip_reason(&ev, "T1.review"),
            "dependency tickets/T1 failed"
        );
        assert_eq!(
            skip_reason(&ev, "T1.merge"),
            "dependency tickets/T1.review was skipped"
        );
        assert_eq!(
            skip_reason(&ev, "T2"),
            "dependency tickets/T1.merge was skipped"
        );
        assert_eq!(collector_runs(&ev), 1);
        let collect = out.node("collect").unwrap();
        assert_eq!(collect.state, Some(NodeState::Failed), "any_fails");
        assert_eq!(
            collect.result["aggregate"],
            json!({"policy": "any_fails", "failed": true, "total": 9, "failures": 1, "pruned": 0})
        );
        let skipped = collect.result["children"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["state"] == json!("SKIPPED"))
            .count();
        assert_eq!(skipped, 5);
    }
}

/// Waits until `node` of the run has completed.
async fn until_completed(journal: &MemoryJournal, run: &trellis_protocol::RunId, node: &str) {
    for _ in 0..1000 {
        let events = journal.load(run).unwrap_or_default();
        if !transitions(&events, node).is_empty()
            && transitions(&events, node)
                .iter()
                .any(|t| t.2 == NodeState::Completed)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{node} did not complete");
}

#[tokio::test]
async fn pruning_a_running_ticket_skips_its_held_dependents() {
    for mode in MODES {
        let (engine, journal) = mem();
        let mut list = three_tickets();
        list[0].ms = 5_000;
        let g = tickets(mode, list, false);
        let handle = engine.start(g.clone(), json!({})).unwrap();
        let run = handle.id().clone();
        until_completed(&journal, &run, "tickets/T3").await;
        handle
            .send(Command::Prune {
                node: "tickets/T1".into(),
                reason: Some("not needed".into()),
            })
            .await
            .unwrap();
        let out = tokio::time::timeout(Duration::from_secs(3), handle.wait())
            .await
            .expect("the pruned ticket stops at once")
            .unwrap();
        assert_succeeded(&out, mode);
        use NodeState::{Completed as C, Pruned as P, Skipped as S};
        assert_eq!(
            states(&out, "tickets/"),
            expect_pipelines(&[
                ("T1", 1, [P, S, S]),
                ("T2", 1, [S, S, S]),
                ("T3", 1, [C, C, C])
            ]),
            "{mode:?}"
        );
        let ev = journal.load(&run).unwrap();
        assert_eq!(
            skip_reason(&ev, "T1.review"),
            "dependency tickets/T1 was pruned"
        );
        assert_eq!(
            skip_reason(&ev, "T2"),
            "dependency tickets/T1.merge was skipped"
        );
        assert_eq!(collector_runs(&ev), 1);
        assert_eq!(
            out.node("collect").unwrap().result["aggregate"],
            json!({"policy": "any_fails", "failed": false, "total": 8, "failures": 0, "pruned": 1})
        );
        assert_replays(&engine, g, &run, &out);
    }
}

#[tokio::test]
async fn a_held_child_can_be_pruned_and_its_dependents_are_skipped() {
    for mode in MODES {
        let (engine, journal) = mem();
        let mut list = three_tickets();
        list[0].ms = 300;
        let g = tickets(mode, list, false);
        let handle = engine.start(g.clone(), json!({})).unwrap();
        let run = handle.id().clone();
        until_completed(&journal, &run, "tickets/T3").await;
        let refused = handle
            .send(Command::Revise {
                node: "tickets/T2".into(),
                message: trellis_protocol::Message::user("now"),
            })
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            "node tickets/T2 waits for its dependencies; it runs once they complete"
        );
        handle
            .send(Command::Prune {
                node: "tickets/T2".into(),
                reason: None,
            })
            .await
            .unwrap();
        let out = handle.wait().await.unwrap();
        assert_succeeded(&out, mode);
        assert_eq!(
            out.node("tickets/T2").unwrap().state,
            Some(NodeState::Pruned)
        );
        assert_eq!(
            out.node("tickets/T1.merge").unwrap().state,
            Some(NodeState::Completed)
        );
        let ev = journal.load(&run).unwrap();
        assert_eq!(
            skip_reason(&ev, "T2.review"),
            "dependency tickets/T2 was pruned"
        );
        assert_eq!(collector_runs(&ev), 1);
    }
}

/// An orchestrator whose spawns are given by `spawns`: (key, after).
fn spawner(spawns: Vec<(&'static str, Vec<&'static str>)>) -> Arc<Graph> {
    let orchestrator = move |_c: NodeContext| {
        let spawns = spawns.clone();
        async move {
            let mut out = NodeOutput::success();
            for (k, after) in spawns {
                out = out.spawn_after(k, "merge", json!({}), after);
            }
            Ok::<_, NodeError>(out)
        }
    };
    Arc::new(
        GraphBuilder::new("bad_spawns")
            .channel("done", Reducer::Merge)
            .node("tickets", orchestrator)
            .template("merge", merge)
            .entry("tickets")
            .build()
            .unwrap(),
    )
}

#[tokio::test]
async fn unknown_and_forward_dependencies_fail_the_spawner() {
    let (engine, _) = mem();
    for (spawns, message) in [
        (
            vec![("b", vec!["a"]), ("a", vec![])],
            "spawn `b` waits for `a`, which is listed after it; list dependencies first (valid for `b`: none)",
        ),
        (
            vec![("a", vec![]), ("b", vec!["a", "zz"])],
            "spawn `b` waits for `zz`, which is neither spawned before it nor a child of tickets (valid for `b`: a)",
        ),
        (vec![("a", vec!["a"])], "spawn `a` cannot wait for itself"),
        (
            vec![("a", vec![]), ("b", vec!["a"]), ("b", vec![])],
            "spawn `b` is listed twice with different dependencies",
        ),
    ] {
        let g = spawner(spawns);
        let out = engine.run(g, json!({})).await.unwrap();
        let t = out.node("tickets").unwrap();
        assert_eq!(t.state, Some(NodeState::Failed));
        assert_eq!(t.error.as_deref(), Some(message));
        assert_eq!(out.nodes.len(), 1, "no child was added");
        assert_eq!(out.status, RunStatus::Failed);
    }
}

#[tokio::test]
async fn a_dependency_on_a_completed_sibling_is_released_at_once_and_duplicates_once() {
    let (engine, journal) = mem();
    let g = spawner(vec![
        ("a", vec![]),
        ("b", vec!["a"]),
        ("b", vec!["a"]),
        ("c", vec!["a", "b"]),
    ]);
    let out = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    let ev = journal.load(&out.run).unwrap();
    assert_eq!(transitions(&ev, "tickets/b").len(), 3, "one activation");
    assert!(
        seq(&ev, "tickets/b", 1, NodeState::Completed)
            < seq(&ev, "tickets/c", 1, NodeState::Running)
    );
    assert_replays(&engine, g, &out.run, &out);
}

#[tokio::test]
async fn a_log_without_the_new_fields_still_replays() {
    // A run that spawns without dependencies writes none of the new fields…
    let (engine, journal) = mem();
    let g = super::common::demo("crashtest", json!({"sleep_us": 0}));
    let out = engine.run(g.clone(), json!({})).await.unwrap();
    let old: Vec<Event> = journal
        .load(&out.run)
        .unwrap()
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            for f in ["after", "spawnAfter", "revise"] {
                assert!(v.get(f).is_none(), "{f} written in {v}");
            }
            // …and an event from before they existed (no field at all) still loads.
            v.as_object_mut().unwrap().remove("after");
            serde_json::from_value(v).unwrap()
        })
        .collect();
    let engine = Engine::new(Arc::new(MemoryJournal::with_log(old)));
    assert_replays(&engine, g, &out.run, &out);
}

#[tokio::test]
async fn a_child_waiting_for_a_sibling_that_never_runs_is_skipped_when_nothing_else_can_run() {
    for mode in MODES {
        // `fan` waits until `fan/x` exists (injected, never activated), then spawns `b` after it.
        let fan = |_c: NodeContext| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, NodeError>(NodeOutput::success().spawn_after("b", "merge", json!({}), ["x"]))
        };
        let g = Arc::new(
            GraphBuilder::new("never")
                .scheduling(mode)
                .channel("done", Reducer::Merge)
                .node("fan", fan)
                .template("merge", merge)
                .collector("collect", "fan", FailurePolicy::AnyFails, None)
                .entry("fan")
                .build()
                .unwrap(),
        );
        let (engine, journal) = mem();
        let handle = engine.start(g.clone(), json!({})).unwrap();
        handle
            .send(Command::Inject {
                nodes: vec![trellis_protocol::InjectNode {
                    id: "fan/x".into(),
                    template: "merge".into(),
                    input: json!({}),
                    parent: Some("fan".into()),
                    activate: false,
                }],
                edges: vec![],
            })
            .await
            .unwrap();
        let out = tokio::time::timeout(Duration::from_secs(5), handle.wait())
            .await
            .expect("the run ends")
            .unwrap();
        assert_succeeded(&out, mode);
        assert_eq!(out.node("fan/x").unwrap().state, None);
        assert_eq!(out.node("fan/b").unwrap().state, Some(NodeState::Skipped));
        let ev = journal.load(&out.run).unwrap();
        let reason = transitions(&ev, "fan/b")
            .into_iter()
            .find_map(|t| t.3)
            .unwrap();
        assert_eq!(reason, "dependency fan/x never completed");
        assert_eq!(collector_runs(&ev), 1, "{mode:?}");
        assert_replays(&engine, g, &out.run, &out);
    }
}

#[tokio::test]
async fn a_fan_out_whose_dependencies_would_form_a_cycle_with_kept_children_fails() {
    // fan#1: a, then b after a. fan#2 (revised): a after b — but b COMPLETED after a and
    // stays as it is, so a → b → a.
    let fan = |c: NodeContext| async move {
        Ok::<_, NodeError>(if c.attempt == 1 {
            NodeOutput::success()
                .spawn("a", "flaky", json!({}))
                .spawn_after("b", "flaky", json!({}), ["a"])
        } else {
            NodeOutput::success().spawn_after("a", "flaky", json!({}), ["b"])
        })
    };
    // `a` fails when revised, so fan#2 re-adds it.
    let flaky = |c: NodeContext| async move {
        Ok::<_, NodeError>(if c.node == "fan/a" && c.attempt == 2 {
            NodeOutput::failure("broken")
        } else {
            NodeOutput::success()
        })
    };
    let g = Arc::new(
        GraphBuilder::new("cycle")
            .node("fan", fan)
            .template("flaky", flaky)
            .entry("fan")
            .build()
            .unwrap(),
    );
    let (engine, _) = mem();
    let first = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(first.status, RunStatus::Succeeded);
    let revise = |node: &str| {
        vec![Command::Revise {
            node: node.into(),
            message: trellis_protocol::Message::user("again"),
        }]
    };
    for node in ["fan/a", "fan"] {
        engine
            .resume(g.clone(), &first.run, revise(node))
            .unwrap()
            .wait()
            .await
            .unwrap();
    }
    let out = engine.inspect(g, &first.run).unwrap();
    let fan = out.node("fan").unwrap();
    assert_eq!((fan.attempt, fan.state), (2, Some(NodeState::Failed)));
    assert_eq!(
        fan.error.as_deref(),
        Some("spawn dependencies would form a cycle: a → b → a")
    );
}
