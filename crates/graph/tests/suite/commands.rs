use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use trellis_graph::{FailurePolicy, GraphBuilder, NodeContext, NodeError, NodeOutput, Reducer};
use trellis_protocol::{
    Command, EdgeSpec, InjectNode, Message, NodeState, RunStatus, TerminalKind,
};

use super::common::{counting, mem};

/// A node that reports the messages it saw: buffered ones at start, and mailbox ones that
/// arrive while it waits up to 2 s for one.
fn listener(
    ctx: NodeContext,
) -> futures::future::BoxFuture<'static, Result<NodeOutput, NodeError>> {
    Box::pin(async move {
        let mut ctx = ctx;
        let mut seen: Vec<String> = ctx
            .messages
            .iter()
            .map(|m| format!("buffered:{}", m.text))
            .collect();
        if ctx.node.as_str() == "b" {
            match tokio::time::timeout(Duration::from_secs(2), ctx.mailbox.recv()).await {
                Ok(Some(m)) => seen.push(format!("live:{}", m.text)),
                _ => seen.push("no live message".into()),
            }
        }
        Ok(NodeOutput::success().write("seen", json!(seen)))
    })
}

#[tokio::test]
async fn messages_are_buffered_delivered_or_refused_by_state() {
    let g = GraphBuilder::new("msg")
        .channel("seen", Reducer::Append)
        .node("a", |_c: NodeContext| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .node("b", listener)
        .edge("a", "b")
        .entry("a")
        .build()
        .unwrap();
    let (engine, _) = mem();
    let handle = engine.start(g.into(), json!({})).unwrap();
    // b has not started: buffered.
    handle
        .send(Command::SendMessage {
            node: "b".into(),
            message: Message::user("early"),
        })
        .await
        .unwrap();
    // a is running and then completes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = handle
        .send(Command::SendMessage {
            node: "a".into(),
            message: Message::user("late"),
        })
        .await;
    assert_eq!(
        refused.unwrap_err(),
        "node a is COMPLETED; messages to finished nodes are discarded"
    );
    let unknown = handle
        .send(Command::SendMessage {
            node: "bb".into(),
            message: Message::user("?"),
        })
        .await;
    assert_eq!(
        unknown.unwrap_err(),
        "no node named `bb`; did you mean `b`?"
    );
    // b is running now, waiting on its mailbox.
    handle
        .send(Command::SendMessage {
            node: "b".into(),
            message: Message::user("now"),
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(
        out.state.get("seen"),
        Some(&json!(["buffered:early", "live:now"]))
    );
}

fn slow_fanout(n: usize, count: Arc<AtomicUsize>) -> trellis_graph::Graph {
    let orchestrator = move |_c: NodeContext| async move {
        let mut out = NodeOutput::success();
        for i in 0..n {
            out = out.spawn(format!("w{i}"), "worker", json!(i));
        }
        Ok::<_, NodeError>(out)
    };
    GraphBuilder::new("slow_fanout")
        .channel("log", Reducer::Append)
        .concurrency(n)
        .node("orchestrator", orchestrator)
        .template("worker", counting(count, 300))
        .collector("collector", "orchestrator", FailurePolicy::AnyFails, None)
        .terminal("DONE", TerminalKind::Success, None)
        .edge("collector", "DONE")
        .entry("orchestrator")
        .build()
        .unwrap()
}

#[tokio::test]
async fn pruning_a_running_child_cancels_it_and_the_collector_ignores_it() {
    let count = Arc::new(AtomicUsize::new(0));
    let (engine, _) = mem();
    let handle = engine
        .start(slow_fanout(3, count.clone()).into(), json!({}))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle
        .send(Command::Prune {
            node: "orchestrator/w1".into(),
            reason: Some("not needed".into()),
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(
        out.node("orchestrator/w1").unwrap().state,
        Some(NodeState::Pruned)
    );
    let agg = &out.node("collector").unwrap().result["aggregate"];
    assert_eq!(agg["total"], json!(2));
    assert_eq!(agg["pruned"], json!(1));
    // The pruned child produced no output.
    assert_eq!(
        out.state.get("log"),
        Some(&json!(["orchestrator/w0", "orchestrator/w2"]))
    );
}

#[tokio::test]
async fn pruning_a_spawner_cascades_to_children_and_collector() {
    let count = Arc::new(AtomicUsize::new(0));
    let (engine, _) = mem();
    let handle = engine
        .start(slow_fanout(3, count).into(), json!({}))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The orchestrator itself COMPLETED: finished nodes cannot be pruned.
    let refused = handle
        .send(Command::Prune {
            node: "orchestrator".into(),
            reason: None,
        })
        .await;
    assert_eq!(
        refused.unwrap_err(),
        "cannot prune orchestrator: it is COMPLETED, and finished nodes are final"
    );
    // Pruning the collector before it fires; the run then ends without reaching DONE.
    handle
        .send(Command::Prune {
            node: "collector".into(),
            reason: None,
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(
        out.node("collector").unwrap().state,
        Some(NodeState::Pruned)
    );
    assert_eq!(out.node("DONE").unwrap().state, None);
}

#[tokio::test]
async fn pruning_a_subtree_root_prunes_its_descendants() {
    // `parent` spawns two slow children; pruning a child-spawning node's subtree while the
    // children run cancels both and the collector.
    let count = Arc::new(AtomicUsize::new(0));
    let c2 = count.clone();
    let g = GraphBuilder::new("tree")
        .channel("log", Reducer::Append)
        .node("root", |_c: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::success().spawn("mid", "mid", json!(null)))
        })
        .template("mid", |_c: NodeContext| async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .template("leaf", counting(c2, 400))
        .entry("root")
        .build()
        .unwrap();
    let (engine, _) = mem();
    let handle = engine.start(g.into(), json!({})).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    handle
        .send(Command::Inject {
            nodes: vec![InjectNode {
                id: "root/mid/leaf".into(),
                template: "leaf".into(),
                input: json!(null),
                parent: Some("root/mid".into()),
                activate: true,
            }],
            edges: vec![],
        })
        .await
        .unwrap();
    handle
        .send(Command::Prune {
            node: "root/mid".into(),
            reason: None,
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.node("root/mid").unwrap().state, Some(NodeState::Pruned));
    assert_eq!(
        out.node("root/mid/leaf").unwrap().state,
        Some(NodeState::Pruned)
    );
    assert_eq!(
        count.load(Ordering::SeqCst),
        0,
        "the injected leaf never ran"
    );
}

#[tokio::test]
async fn inject_adds_nodes_and_edges_from_templates() {
    let count = Arc::new(AtomicUsize::new(0));
    let g = GraphBuilder::new("inj")
        .channel("log", Reducer::Append)
        .node("a", counting(count.clone(), 150))
        .template("extra", counting(count.clone(), 0))
        .entry("a")
        .build()
        .unwrap();
    let (engine, _) = mem();
    let handle = engine.start(g.into(), json!({})).unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let bad = handle
        .send(Command::Inject {
            nodes: vec![InjectNode {
                id: "x".into(),
                template: "nope".into(),
                input: json!(null),
                parent: None,
                activate: false,
            }],
            edges: vec![],
        })
        .await;
    assert_eq!(
        bad.unwrap_err(),
        "unknown template `nope` (templates: extra)"
    );
    handle
        .send(Command::Inject {
            nodes: vec![InjectNode {
                id: "x".into(),
                template: "extra".into(),
                input: json!(null),
                parent: None,
                activate: false,
            }],
            edges: vec![EdgeSpec {
                from: "a".into(),
                to: "x".into(),
            }],
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.state.get("log"), Some(&json!(["a", "x"])));
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn cancel_stops_running_handlers() {
    let count = Arc::new(AtomicUsize::new(0));
    let (engine, _) = mem();
    let handle = engine
        .start(slow_fanout(4, count).into(), json!({}))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    handle
        .send(Command::Cancel {
            reason: Some("user pressed ctrl-c".into()),
        })
        .await
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Cancelled);
    assert_eq!(out.error.as_deref(), Some("user pressed ctrl-c"));
    assert!(
        out.nodes
            .iter()
            .filter(|n| n.id.as_str().starts_with("orchestrator/"))
            .all(|n| n.state == Some(NodeState::Pruned))
    );
    assert!(
        out.state.get("log").is_none(),
        "no cancelled worker wrote anything"
    );
}
