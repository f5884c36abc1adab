use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use trellis_graph::{
    Engine, Graph, MemoryJournal, NodeContext, NodeError, NodeOutput, RunOutcome, Scheduling,
};
use trellis_protocol::{Command, Event, EventKind, Message, NodeState, RunId, RunStatus};

/// What two runs must agree on: state, counters, every node's latest activation and state,
/// and the run's status.
pub type Key = (
    Value,
    std::collections::BTreeMap<String, i64>,
    Vec<(String, u32, Option<NodeState>)>,
    RunStatus,
);

pub fn key(o: &RunOutcome) -> Key {
    (
        o.state.to_json(),
        o.counters.clone(),
        o.nodes
            .iter()
            .map(|n| (n.id.to_string(), n.attempt, n.state))
            .collect(),
        o.status,
    )
}

pub fn mem() -> (Engine, Arc<MemoryJournal>) {
    let j = Arc::new(MemoryJournal::new());
    (Engine::new(j.clone()), j)
}

pub fn demo(name: &str, params: Value) -> Arc<Graph> {
    Arc::new(trellis_graph::demo::build(name, &params).unwrap())
}

pub fn feature() -> Arc<Graph> {
    demo("feature", json!({}))
}

/// A handler that counts its invocations and succeeds after `sleep_ms`.
pub fn counting(
    count: Arc<AtomicUsize>,
    sleep_ms: u64,
) -> impl Fn(NodeContext) -> futures::future::BoxFuture<'static, Result<NodeOutput, NodeError>>
+ Send
+ Sync
+ 'static {
    move |ctx: NodeContext| {
        let count = count.clone();
        Box::pin(async move {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(sleep_ms)).await;
            Ok(NodeOutput::success().write("log", json!([ctx.node.to_string()])))
        })
    }
}

/// A multi-threaded runtime of two workers, for property tests that drive async runs.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `g` with no input on a fresh in-memory engine.
pub async fn run_once(g: Graph) -> RunOutcome {
    let (engine, _) = mem();
    engine.run(g.into(), json!({})).await.unwrap()
}

/// Asserts that the run succeeded in scheduling `mode`, showing its error otherwise.
#[track_caller]
pub fn assert_succeeded(out: &RunOutcome, mode: Scheduling) {
    assert_eq!(
        out.status,
        RunStatus::Succeeded,
        "{mode:?}: {:?}",
        out.error
    );
}

/// Asserts that replaying the stored log of `run` gives the run `live` ended as.
#[track_caller]
pub fn assert_replays(engine: &Engine, g: Arc<Graph>, run: &RunId, live: &RunOutcome) {
    assert_eq!(key(&engine.inspect(g, run).unwrap()), key(live));
}

/// Asserts that replaying the stored log of `run` gives exactly `live`, field for field.
#[track_caller]
pub fn assert_replays_exactly(engine: &Engine, g: Arc<Graph>, run: &RunId, live: &RunOutcome) {
    let replayed = engine.inspect(g, run).unwrap();
    assert_eq!(
        serde_json::to_value(&replayed).unwrap(),
        serde_json::to_value(live).unwrap()
    );
}

/// Resumes `run` with `commands` and waits for it to end.
pub async fn resume_to_end(
    engine: &Engine,
    g: Arc<Graph>,
    run: &RunId,
    commands: Vec<Command>,
) -> RunOutcome {
    engine
        .resume(g, run, commands)
        .unwrap()
        .wait()
        .await
        .unwrap()
}

/// Resumes `run` with a revision of `node` (a user message saying `text`) and waits for it
/// to end.
pub async fn revise_to_end(
    engine: &Engine,
    g: Arc<Graph>,
    run: &RunId,
    node: &str,
    text: &str,
) -> RunOutcome {
    let revise = Command::Revise {
        node: node.into(),
        message: Message::user(text),
    };
    resume_to_end(engine, g, run, vec![revise]).await
}

/// Forks `run` at checkpoint `seq` and waits for the fork to end.
pub async fn fork_to_end(engine: &Engine, g: Arc<Graph>, run: &RunId, seq: u64) -> RunOutcome {
    engine
        .fork(g, run, seq, vec![])
        .unwrap()
        .wait()
        .await
        .unwrap()
}

/// The batch boundaries of `full`'s log before its last event: where a crash can leave it.
pub fn crash_points(journal: &MemoryJournal, full: &RunOutcome) -> Vec<u64> {
    journal
        .batch_ends(&full.run)
        .into_iter()
        .filter(|&e| e < full.last_seq)
        .collect()
}

/// The log as a crash at seq `end` leaves it.
pub fn log_until(events: &[Event], end: u64) -> Vec<Event> {
    events.iter().filter(|e| e.seq <= end).cloned().collect()
}

/// The activations whose output `events` record: (node, attempt).
pub fn recorded_outputs(events: &[Event]) -> Vec<(String, u32)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeOutput { node, attempt, .. } => Some((node.to_string(), *attempt)),
            _ => None,
        })
        .collect()
}

/// An engine over a journal that holds only `log` (a run as a crash left it).
pub fn engine_with_log(log: Vec<Event>) -> Engine {
    Engine::new(Arc::new(MemoryJournal::with_log(log)))
}

/// The seqs of the checkpoints in `events` (where a run can be forked).
pub fn checkpoints(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.kind.is_checkpoint())
        .map(|e| e.seq)
        .collect()
}
