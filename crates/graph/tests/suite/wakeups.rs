//! Lost wake-ups: many runs at once on a multi-thread runtime, every handler sleeping a
//! short random time with the demo's precise timer (what the benchmark's concurrent runs
//! do). Every run must finish; a run whose driver is never woken would hang, so the test
//! gives up after a bound and reports how many runs were stuck. The delays come from a fixed
//! seed; which run gets which still depends on the scheduler.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use trellis_graph::{
    Engine, Graph, GraphBuilder, MemoryJournal, NodeContext, NodeError, NodeOutput, Reducer,
    Scheduling, demo::precise_sleep,
};
use trellis_protocol::RunStatus;

/// SplitMix64: the `n`th number of a fixed sequence.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `start` fanning out to 3 chains of 3 nodes; each node sleeps 0–40 µs (sometimes not at
/// all, so that some handlers finish on their first poll).
fn graph(scheduling: Scheduling, draws: Arc<AtomicU64>) -> Arc<Graph> {
    let mut b = GraphBuilder::new("wakeups")
        .channel("log", Reducer::Append)
        .scheduling(scheduling)
        .node("start", |_ctx: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .entry("start");
    for p in 0..3 {
        for s in 1..=3 {
            let draws = draws.clone();
            let handler = move |ctx: NodeContext| {
                let r = mix(draws.fetch_add(1, Ordering::Relaxed));
                async move {
                    if !r.is_multiple_of(8) {
                        precise_sleep(Duration::from_micros((r >> 8) % 41)).await;
                    }
                    Ok::<_, NodeError>(NodeOutput::success().write("log", json!([ctx.node])))
                }
            };
            let id = format!("p{p}_{s}");
            b = b.node(id.as_str(), handler);
            let from = if s == 1 {
                "start".to_owned()
            } else {
                format!("p{p}_{}", s - 1)
            };
            b = b.edge(from.as_str(), id.as_str());
        }
    }
    Arc::new(b.build().unwrap())
}

fn stress(scheduling: Scheduling) {
    const RUNS: usize = 3000;
    const WORKERS: usize = 64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::new(Arc::new(MemoryJournal::new()));
    let graph = graph(scheduling, Arc::new(AtomicU64::new(0)));
    let (next, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let finished = rt.block_on(async {
        let mut workers = Vec::new();
        for _ in 0..WORKERS {
            let (engine, graph, next, done) =
                (engine.clone(), graph.clone(), next.clone(), done.clone());
            workers.push(tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < RUNS {
                    let out = engine.run(graph.clone(), json!({})).await.unwrap();
                    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(workers)).await
    });
    let stuck = RUNS - done.load(Ordering::Relaxed);
    // A lost wake-up parks a run for good: its worker never takes another.
    assert!(
        finished.is_ok(),
        "{stuck} of {RUNS} runs never finished: a driver was not woken"
    );
    for r in finished.unwrap() {
        r.unwrap();
    }
    rt.shutdown_background();
}

#[test]
fn many_concurrent_lock_step_runs_with_random_sleeps_all_finish() {
    stress(Scheduling::Steps);
}

#[test]
fn many_concurrent_free_running_runs_with_random_sleeps_all_finish() {
    stress(Scheduling::Free);
}
