//! Free-running scheduling (`Scheduling::Free`): successors start as soon as their
//! predecessor finishes, the log records the order, and replay, resume, fork and commands stay
//! exact.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use trellis_graph::{
    Durability, Engine, EngineConfig, Graph, GraphBuilder, Journal, MemoryJournal, NodeContext,
    NodeError, NodeOutput, Reducer, Scheduling,
};
use trellis_protocol::{
    Answer, Command, EdgeSpec, Event, EventKind, InjectNode, Interrupt, Message, NodeState,
    RunStatus,
};

use super::common::{
    assert_replays, checkpoints, crash_points, demo, engine_with_log, fork_to_end, key, log_until,
    mem, recorded_outputs, resume_to_end, revise_to_end,
};

/// Seq of the first transition of `node` to `to`.
fn seq_of(events: &[Event], node: &str, to: NodeState) -> u64 {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::NodeTransition { node: n, to: t, .. } if n == node && *t == to => {
                Some(e.seq)
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("{node} never went {to}"))
}

fn pipelines(scheduling: &str, fast_us: u64, slow_us: u64) -> Arc<Graph> {
    demo(
        "pipelines",
        json!({"pipelines": 2, "stages": 2, "fast_us": fast_us, "slow_us": slow_us,
               "scheduling": scheduling}),
    )
}

#[test]
fn lock_step_is_the_default() {
    let g = GraphBuilder::new("g")
        .node("a", |_c: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .entry("a")
        .build()
        .unwrap();
    assert_eq!(g.scheduling(), Scheduling::Steps);
    assert_eq!(
        demo("chain", json!({"scheduling": "free"})).scheduling(),
        Scheduling::Free
    );
    let err = trellis_graph::demo::build("chain", &json!({"scheduling": "eager"})).unwrap_err();
    assert!(err.to_string().contains("param `scheduling`"), "{err}");
}

#[tokio::test]
async fn a_fast_nodes_successor_starts_while_a_slow_step_mate_runs() {
    let (engine, journal) = mem();
    // p0 is slow (150 ms a node), p1 fast (2 ms a node).
    let free = engine
        .run(pipelines("free", 2_000, 150_000), json!({}))
        .await
        .unwrap();
    assert_eq!(free.status, RunStatus::Succeeded);
    let ev = journal.load(&free.run).unwrap();
    let slow_done = seq_of(&ev, "p0_1", NodeState::Completed);
    assert!(seq_of(&ev, "p1_2", NodeState::Running) < slow_done);
    assert!(seq_of(&ev, "p1_2", NodeState::Completed) < slow_done);
    // Writes merge in completion order: the fast pipeline's entries come first.
    assert_eq!(
        free.state.get("log"),
        Some(&json!(["p1_1", "p1_2", "p0_1", "p0_2"]))
    );

    let steps = engine
        .run(pipelines("steps", 2_000, 150_000), json!({}))
        .await
        .unwrap();
    let ev = journal.load(&steps.run).unwrap();
    assert!(seq_of(&ev, "p1_2", NodeState::Running) > seq_of(&ev, "p0_1", NodeState::Completed));
    assert_eq!(
        steps.state.get("log"),
        Some(&json!(["p0_1", "p1_1", "p0_2", "p1_2"])),
        "lock-step merges in declaration order"
    );
}

#[tokio::test]
async fn the_free_log_replays_exactly_and_closes_every_batch() {
    for durability in [Durability::Async, Durability::Sync] {
        let journal = Arc::new(MemoryJournal::new());
        let engine = Engine::with_config(
            journal.clone(),
            EngineConfig {
                durability,
                ..EngineConfig::default()
            },
        );
        replays_and_closes_every_batch(&engine, &journal).await;
    }
}

async fn replays_and_closes_every_batch(engine: &Engine, journal: &MemoryJournal) {
    let g = demo(
        "pipelines",
        json!({"fast_us": 1_000, "slow_us": 20_000, "layout": "staggered", "scheduling": "free"}),
    );
    let live = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(live.status, RunStatus::Succeeded);
    let replayed = engine.inspect(g, &live.run).unwrap();
    assert_eq!(key(&replayed), key(&live));
    assert_eq!(replayed.last_seq, live.last_seq);
    assert_eq!(replayed.steps, live.steps);
    // Each committed batch ends with no step open: a crash never leaves half a batch.
    let events = journal.load(&live.run).unwrap();
    for end in journal.batch_ends(&live.run) {
        let (mut open, mut closed) = (0, 0);
        for e in events.iter().filter(|e| e.seq <= end) {
            match e.kind {
                EventKind::StepStarted { .. } => open += 1,
                EventKind::StepCompleted { .. } => closed += 1,
                _ => {}
            }
        }
        assert_eq!(open, closed, "batch ending at seq {end} leaves a step open");
    }
    assert!(
        live.steps > 4,
        "completions at different times are separate batches: {} steps",
        live.steps
    );
}

/// Two pipelines after a common start: `fast` (3 ms a node) and `slow` (80 ms a node), each
/// node appending its id to `log` and counting its executions, so the completion order is the
/// same however the run is interrupted.
fn two_speeds(runs: Arc<Mutex<Vec<(String, u32)>>>) -> Arc<Graph> {
    let mut b = GraphBuilder::new("two_speeds")
        .scheduling(Scheduling::Free)
        .channel("log", Reducer::Append)
        .node("start", |_c: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .entry("start");
    for (pipe, ms) in [("fast", 3), ("slow", 80)] {
        for s in 1..=3 {
            let runs = runs.clone();
            let handler = move |ctx: NodeContext| {
                let runs = runs.clone();
                async move {
                    runs.lock()
                        .unwrap()
                        .push((ctx.node.to_string(), ctx.attempt));
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok::<_, NodeError>(
                        NodeOutput::success().write("log", json!([ctx.node.as_str()])),
                    )
                }
            };
            let id = format!("{pipe}{s}");
            let from = if s == 1 {
                "start".to_string()
            } else {
                format!("{pipe}{}", s - 1)
            };
            b = b
                .node(id.as_str(), handler)
                .edge(from.as_str(), id.as_str());
        }
    }
    Arc::new(b.build().unwrap())
}

#[tokio::test]
async fn resume_from_every_batch_boundary_and_fork_from_every_checkpoint_match() {
    let (engine, journal) = mem();
    let full = engine
        .run(two_speeds(Arc::default()), json!({}))
        .await
        .unwrap();
    assert_eq!(full.status, RunStatus::Succeeded);
    assert_eq!(
        full.state.get("log"),
        Some(&json!([
            "fast1", "fast2", "fast3", "slow1", "slow2", "slow3"
        ]))
    );
    let events = journal.load(&full.run).unwrap();
    let ends = crash_points(&journal, &full);
    assert!(ends.len() >= 6, "a batch per wait: {ends:?}");
    let resumes = ends.iter().map(|&end| {
        let prefix = log_until(&events, end);
        let finished = recorded_outputs(&prefix);
        let run = full.run.clone();
        async move {
            let runs = Arc::new(Mutex::new(Vec::new()));
            let engine = engine_with_log(prefix);
            let g = two_speeds(runs.clone());
            let out = resume_to_end(&engine, g.clone(), &run, vec![]).await;
            assert_replays(&engine, g, &run, &out);
            let reran: Vec<(String, u32)> = runs.lock().unwrap().clone();
            (end, out, finished, reran)
        }
    });
    for (end, out, finished, reran) in futures::future::join_all(resumes).await {
        assert_eq!(key(&out), key(&full), "resumed at seq {end}");
        for f in &finished {
            assert!(
                !reran.contains(f),
                "{f:?} finished before seq {end} but ran again"
            );
        }
    }
    let forks = checkpoints(&events).into_iter().map(|seq| {
        let engine = engine.clone();
        let run = full.run.clone();
        async move {
            let g = two_speeds(Arc::default());
            let out = fork_to_end(&engine, g.clone(), &run, seq).await;
            assert_replays(&engine, g, &out.run, &out);
            (seq, out)
        }
    });
    for (seq, out) in futures::future::join_all(forks).await {
        assert_eq!(key(&out), key(&full), "forked at seq {seq}");
    }
}

/// Pipeline `a` (one node listening to its mailbox for up to 2 s, then a successor) beside
/// pipeline `b` (three quick nodes).
fn with_listener() -> Arc<Graph> {
    let quick = |ctx: NodeContext| async move {
        tokio::time::sleep(Duration::from_millis(2)).await;
        Ok::<_, NodeError>(NodeOutput::success().write("log", json!([ctx.node.as_str()])))
    };
    let listener = |mut ctx: NodeContext| async move {
        let heard = tokio::select! {
            m = ctx.mailbox.recv() => m.map_or("closed".into(), |m| m.text),
            () = tokio::time::sleep(Duration::from_secs(2)) => "nothing".into(),
        };
        Ok::<_, NodeError>(NodeOutput::success().write("log", json!([format!("a1 heard {heard}")])))
    };
    let g = GraphBuilder::new("listener")
        .scheduling(Scheduling::Free)
        .channel("log", Reducer::Append)
        .node("start", quick)
        .node("a1", listener)
        .node("a2", quick)
        .node("b1", quick)
        .node("b2", quick)
        .node("b3", quick)
        .edge("start", "a1")
        .edge("start", "b1")
        .edge("a1", "a2")
        .edge("b1", "b2")
        .edge("b2", "b3")
        .entry("start")
        .build()
        .unwrap();
    Arc::new(g)
}

/// Waits until `node` of the run has completed (the other pipeline ran on its own).
async fn until_completed(journal: &MemoryJournal, run: &trellis_protocol::RunId, node: &str) {
    for _ in 0..400 {
        let events = journal.load(run).unwrap_or_default();
        if events.iter().any(|e| {
            matches!(&e.kind, EventKind::NodeTransition { node: n, to: NodeState::Completed, .. } if n == node)
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{node} did not complete");
}

#[tokio::test]
async fn messages_reach_a_running_node_while_its_neighbours_finish() {
    let (engine, journal) = mem();
    let handle = engine.start(with_listener(), json!({})).unwrap();
    let run = handle.id().clone();
    until_completed(&journal, &run, "b3").await;
    handle
        .send(Command::SendMessage {
            node: "a1".into(),
            message: Message::user("hello"),
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(
        out.state.get("log"),
        Some(&json!(["start", "b1", "b2", "b3", "a1 heard hello", "a2"]))
    );
    assert_replays(&engine, with_listener(), &run, &out);
}

#[tokio::test]
async fn pruning_a_running_node_lets_the_other_pipelines_finish() {
    let (engine, journal) = mem();
    let handle = engine.start(with_listener(), json!({})).unwrap();
    let run = handle.id().clone();
    until_completed(&journal, &run, "b3").await;
    let t = Instant::now();
    handle
        .send(Command::Prune {
            node: "a1".into(),
            reason: Some("not needed".into()),
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "the listener was stopped"
    );
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(out.node("a1").unwrap().state, Some(NodeState::Pruned));
    assert_eq!(out.node("a2").unwrap().state, None, "never reached");
    assert_eq!(out.node("b3").unwrap().state, Some(NodeState::Completed));
    assert_eq!(
        out.state.get("log"),
        Some(&json!(["start", "b1", "b2", "b3"]))
    );
    assert_replays(&engine, with_listener(), &run, &out);
}

#[tokio::test]
async fn cancelling_prunes_what_runs_and_keeps_what_finished() {
    let (engine, journal) = mem();
    let handle = engine.start(with_listener(), json!({})).unwrap();
    let run = handle.id().clone();
    until_completed(&journal, &run, "b2").await;
    handle
        .send(Command::Cancel {
            reason: Some("stop".into()),
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Cancelled);
    assert_eq!(out.node("a1").unwrap().state, Some(NodeState::Pruned));
    assert_eq!(out.node("b2").unwrap().state, Some(NodeState::Completed));
    assert_replays(&engine, with_listener(), &run, &out);
}

#[tokio::test]
async fn injected_nodes_start_at_once_beside_a_running_node() {
    let log = |ctx: NodeContext| async move {
        let ms = if ctx.node.as_str() == "a" { 300 } else { 2 };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<_, NodeError>(NodeOutput::success().write("log", json!([ctx.node.as_str()])))
    };
    let g = Arc::new(
        GraphBuilder::new("inject")
            .scheduling(Scheduling::Free)
            .channel("log", Reducer::Append)
            .node("a", log)
            .template("extra", log)
            .entry("a")
            .build()
            .unwrap(),
    );
    let (engine, journal) = mem();
    let handle = engine.start(g.clone(), json!({})).unwrap();
    let run = handle.id().clone();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let node = |id: &str, activate| InjectNode {
        id: id.into(),
        template: "extra".into(),
        input: json!(null),
        parent: None,
        activate,
    };
    handle
        .send(Command::Inject {
            nodes: vec![node("x", true), node("y", false)],
            edges: vec![EdgeSpec {
                from: "x".into(),
                to: "y".into(),
            }],
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(out.state.get("log"), Some(&json!(["x", "y", "a"])));
    let ev = journal.load(&run).unwrap();
    assert!(seq_of(&ev, "y", NodeState::Completed) < seq_of(&ev, "a", NodeState::Completed));
    assert_replays(&engine, g, &run, &out);
}

#[tokio::test]
async fn an_interrupt_waits_while_the_other_pipeline_runs_to_its_end() {
    let asks = |ctx: NodeContext| async move {
        match ctx.resume {
            None => Ok::<_, NodeError>(NodeOutput::interrupt(Interrupt::approval("ship a1?"))),
            Some(_) => Ok(NodeOutput::success().write("log", json!(["a1 approved"]))),
        }
    };
    let quick = |ctx: NodeContext| async move {
        tokio::time::sleep(Duration::from_millis(2)).await;
        Ok::<_, NodeError>(NodeOutput::success().write("log", json!([ctx.node.as_str()])))
    };
    let g = Arc::new(
        GraphBuilder::new("gate")
            .scheduling(Scheduling::Free)
            .channel("log", Reducer::Append)
            .node("start", quick)
            .node("a1", asks)
            .node("a2", quick)
            .node("b1", quick)
            .node("b2", quick)
            .edge("start", "a1")
            .edge("start", "b1")
            .edge("a1", "a2")
            .edge("b1", "b2")
            .entry("start")
            .build()
            .unwrap(),
    );
    let (engine, _) = mem();
    let paused = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(paused.status, RunStatus::WaitingInput);
    assert_eq!(paused.node("b2").unwrap().state, Some(NodeState::Completed));
    assert_eq!(paused.waiting.len(), 1);
    let done = engine
        .resume(
            g.clone(),
            &paused.run,
            vec![Command::Answer {
                node: "a1".into(),
                answer: Answer::approve(),
            }],
        )
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(
        done.state.get("log"),
        Some(&json!(["start", "b1", "b2", "a1 approved", "a2"]))
    );
    assert_replays(&engine, g, &done.run, &done);
}

#[tokio::test]
async fn fan_out_collectors_and_retries_behave_as_in_lock_step() {
    let (engine, _) = mem();
    // Graphs whose writes never race reach the same end in both modes.
    for (name, params, input) in [
        (
            "feature",
            json!({"sleep_us": 500}),
            trellis_graph::demo::feature_input(),
        ),
        (
            "fanout",
            json!({"n": 10, "policy": "any_fails", "sleep_us": 300}),
            json!({}),
        ),
        ("crashtest", json!({"sleep_us": 500}), json!({})),
        // Its `order` channel races (not compared here); attempts and states do not.
        ("tickets", json!({"sleep_us": 500}), json!({})),
    ] {
        let mut outs = Vec::new();
        for scheduling in ["steps", "free"] {
            let mut p = params.clone();
            p["scheduling"] = json!(scheduling);
            let g = demo(name, p);
            let out = engine.run(g.clone(), input.clone()).await.unwrap();
            assert_replays(&engine, g, &out.run, &out);
            outs.push(out);
        }
        let (steps, free) = (&outs[0], &outs[1]);
        assert_eq!(free.status, steps.status, "{name}");
        assert_eq!(free.terminal, steps.terminal, "{name}");
        assert_eq!(free.counters, steps.counters, "{name}");
        assert_eq!(
            key(free).2,
            key(steps).2,
            "{name}: node attempts and states"
        );
    }
}

#[tokio::test]
async fn a_collector_fires_once_its_slowest_child_is_final() {
    let orchestrator = |_c: NodeContext| async {
        let mut out = NodeOutput::success();
        for (k, ms) in [("slow", 120u64), ("quick", 2), ("mid", 30)] {
            out = out.spawn(k, "worker", json!(ms));
        }
        Ok::<_, NodeError>(out)
    };
    let worker = |ctx: NodeContext| async move {
        tokio::time::sleep(Duration::from_millis(ctx.input.as_u64().unwrap())).await;
        Ok::<_, NodeError>(NodeOutput::success().write("log", json!([ctx.node.as_str()])))
    };
    let collector: Arc<dyn trellis_graph::NodeHandler> = Arc::new(|ctx: NodeContext| async move {
        let (children, _) = ctx.children.unwrap();
        let keys: Vec<String> = children.iter().map(|c| c.key.clone()).collect();
        Ok::<_, NodeError>(
            NodeOutput::success().write("log", json!([format!("collected {}", keys.join(","))])),
        )
    });
    let g = Arc::new(
        GraphBuilder::new("collect")
            .scheduling(Scheduling::Free)
            .channel("log", Reducer::Append)
            .node("orchestrator", orchestrator)
            .template("worker", worker)
            .collector(
                "collector",
                "orchestrator",
                trellis_graph::FailurePolicy::AnyFails,
                Some(collector),
            )
            .entry("orchestrator")
            .build()
            .unwrap(),
    );
    let (engine, _) = mem();
    let out = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(
        out.state.get("log"),
        Some(&json!([
            "orchestrator/quick",
            "orchestrator/mid",
            "orchestrator/slow",
            "collected slow,quick,mid"
        ])),
        "children merge as they finish; the collector sees them in spawn order"
    );
    assert_replays(&engine, g, &out.run, &out);
}

#[tokio::test]
async fn revising_a_finished_node_reruns_only_its_pipeline() {
    let (engine, _) = mem();
    let g = pipelines("free", 1_000, 5_000);
    let first = engine.run(g.clone(), json!({})).await.unwrap();
    let revised = revise_to_end(&engine, g.clone(), &first.run, "p1_1", "again").await;
    assert_eq!(revised.status, RunStatus::Succeeded);
    let attempts: Vec<(String, u32)> = revised
        .nodes
        .iter()
        .map(|n| (n.id.to_string(), n.attempt))
        .collect();
    assert_eq!(
        attempts,
        [
            ("start", 1),
            ("p0_1", 1),
            ("p0_2", 1),
            ("p1_1", 2),
            ("p1_2", 2)
        ]
        .map(|(n, a)| (n.to_string(), a))
    );
    assert_replays(&engine, g, &revised.run, &revised);
}

#[tokio::test]
async fn the_loop_guard_counts_routing_hops_not_batches() {
    // 10 pipelines of 3 nodes at distinct speeds: many batches, but 4 hops deep.
    let (engine, journal) = mem();
    let wide = {
        let mut b = GraphBuilder::new("wide")
            .scheduling(Scheduling::Free)
            .max_steps(4)
            .concurrency(16)
            .channel("n", Reducer::Sum)
            .node("start", |_c: NodeContext| async {
                Ok::<_, NodeError>(NodeOutput::success())
            })
            .entry("start");
        for p in 0..10u64 {
            for s in 1..=3 {
                let handler = move |_c: NodeContext| async move {
                    tokio::time::sleep(Duration::from_millis(1 + 2 * p)).await;
                    Ok::<_, NodeError>(NodeOutput::success().write("n", json!(1)))
                };
                let id = format!("p{p}_{s}");
                let from = if s == 1 {
                    "start".into()
                } else {
                    format!("p{p}_{}", s - 1)
                };
                b = b
                    .node(id.as_str(), handler)
                    .edge(from.as_str(), id.as_str());
            }
        }
        Arc::new(b.build().unwrap())
    };
    let out = engine.run(wide, json!({})).await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    assert_eq!(out.state.get("n"), Some(&json!(30)));
    assert!(out.steps > 4, "{} batches", out.steps);

    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let looping = GraphBuilder::new("loop")
        .scheduling(Scheduling::Free)
        .max_steps(5)
        .node("a", move |_c: NodeContext| {
            c.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, NodeError>(NodeOutput::success()) }
        })
        .edge("a", "a")
        .entry("a")
        .build()
        .unwrap();
    let out = engine.run(Arc::new(looping), json!({})).await.unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    assert!(
        out.error.as_deref().unwrap_or("").contains("5"),
        "{:?}",
        out.error
    );
    assert_eq!(count.load(Ordering::SeqCst), 5);
    let events = journal.load(&out.run).unwrap();
    let opened = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::StepStarted { .. }))
        .count();
    let closed = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::StepCompleted { .. }))
        .count();
    assert_eq!(opened, closed, "the limit is checked before a batch opens");
}

/// The benchmark's layouts (docs/benchmarks.md, "Free-running scheduling") run to the end in
/// both modes and time every pipeline. How much faster free-running is, is the benchmark's to
/// measure (`cargo run --release -p trellis-graph --example pipelines`), not a test's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_benchmark_layouts_run_in_both_modes() {
    use trellis_graph::demo::pipelines::time_run;
    let engine = Engine::new(Arc::new(trellis_graph::NullJournal));
    for layout in ["slow_pipeline", "staggered"] {
        for scheduling in ["steps", "free"] {
            let t = time_run(
                &engine,
                demo(
                    "pipelines",
                    json!({"fast_us": 200, "slow_us": 2_000, "layout": layout, "scheduling": scheduling}),
                ),
            )
            .await
            .unwrap();
            assert_eq!(t.pipelines.len(), 10, "{layout} {scheduling}");
            assert!(
                t.pipelines.iter().all(|p| *p <= t.total),
                "{layout} {scheduling}"
            );
        }
    }
}
