use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use trellis_graph::{Engine, Graph, MemoryJournal, NodeContext, NodeError, NodeOutput, RunOutcome};
use trellis_protocol::{NodeState, RunStatus};

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
