//! A run that continues with another graph (`runContinued`): the first graph's one node
//! decides, its continuation names the next graph, and the same run goes on with it. Live,
//! replayed, paused in either graph and resumed, the run is the same.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use trellis_graph::{
    Continuation, Graph, GraphBuilder, Next, NodeContext, NodeError, NodeOutput, Reducer,
    RunOutcome, Scheduling,
};
use trellis_protocol::{Answer, Command, EventKind, Interrupt, NodeState, RunStatus};

use super::common::{key, mem};

/// `decide` writes which chain to run (`{"steps": n}`) as its result; with `ask`, it first
/// asks a question and takes `n` from the answer.
fn decide(ask: bool) -> impl Fn(NodeContext) -> BoxFuture<'static, Result<NodeOutput, NodeError>> {
    move |ctx: NodeContext| {
        Box::pin(async move {
            if ask && ctx.resume.is_none() {
                return Ok(NodeOutput::interrupt(Interrupt::question(
                    "how many steps?",
                )));
            }
            let n: u64 = ctx
                .resume
                .as_ref()
                .and_then(|r| r.answer.0.as_str().and_then(|t| t.parse().ok()))
                .unwrap_or(2);
            Ok(NodeOutput::success().result(json!({ "steps": n })))
        })
    }
}

/// Appends the node's id to `log`; `gate` (when it names this node) asks first.
fn step(
    gate: Option<&'static str>,
) -> impl Fn(NodeContext) -> BoxFuture<'static, Result<NodeOutput, NodeError>> + Clone {
    move |ctx: NodeContext| {
        Box::pin(async move {
            if gate == Some(ctx.node.as_str()) && ctx.resume.is_none() {
                return Ok(NodeOutput::interrupt(Interrupt::question("go on?")));
            }
            Ok(NodeOutput::success().write("log", json!([ctx.node.to_string()])))
        })
    }
}

/// The chain `s1 → … → sn` continuing `prelude`.
fn chain(n: u64, prelude: &Graph, gate: Option<&'static str>, free: bool) -> Arc<Graph> {
    let mut b = GraphBuilder::new("chain")
        .params(json!({ "steps": n }))
        .channel("log", Reducer::Append)
        .channel("task", Reducer::Replace)
        .entry("s1");
    if free {
        b = b.scheduling(Scheduling::Free);
    }
    for i in 1..=n {
        b = b.node(format!("s{i}"), step(gate));
        if i > 1 {
            b = b.edge(format!("s{}", i - 1), format!("s{i}"));
        }
    }
    Arc::new(b.build().unwrap().after(prelude).unwrap())
}

/// Names the chain the `decide` node asked for.
struct Then {
    gate: Option<&'static str>,
    free: bool,
    /// `None`: the continuation hands back a graph that does not continue this one.
    wrong: bool,
    calls: Arc<AtomicUsize>,
}

impl Continuation for Then {
    fn next(&self, at: RunOutcome) -> BoxFuture<'static, Result<Option<Next>, String>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let n = at
            .node("decide")
            .and_then(|d| d.result.get("steps"))
            .and_then(Value::as_u64);
        let (gate, free, wrong) = (self.gate, self.free, self.wrong);
        Box::pin(async move {
            let Some(n) = n else {
                return Ok(None);
            };
            let prelude = planning(false, gate, free, Arc::default());
            let graph = if wrong {
                let other = GraphBuilder::new("other")
                    .node("x", step(None))
                    .entry("x")
                    .build()
                    .map_err(|e| e.to_string())?;
                chain(n, &other, gate, free)
            } else {
                chain(n, &prelude, gate, free)
            };
            Ok(Some((graph, json!({ "task": format!("{n} steps") }))))
        })
    }
}

/// The first graph: one `decide` node and a continuation to the chain it names.
fn planning(ask: bool, gate: Option<&'static str>, free: bool, calls: Arc<AtomicUsize>) -> Graph {
    GraphBuilder::new("planning")
        .params(json!({ "planning": true }))
        .node("decide", decide(ask))
        .entry("decide")
        .then(Arc::new(Then {
            gate,
            free,
            wrong: false,
            calls,
        }))
        .build()
        .unwrap()
}

fn states(o: &RunOutcome) -> Vec<(String, Option<NodeState>)> {
    o.nodes
        .iter()
        .map(|n| (n.id.to_string(), n.state))
        .collect()
}

#[tokio::test]
async fn the_run_continues_with_the_graph_its_first_node_decided() {
    let (engine, journal) = mem();
    let calls = Arc::new(AtomicUsize::new(0));
    let g0 = Arc::new(planning(false, None, false, calls.clone()));
    let out = engine.run(g0.clone(), Value::Null).await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        states(&out),
        vec![
            ("decide".into(), Some(NodeState::Completed)),
            ("s1".into(), Some(NodeState::Completed)),
            ("s2".into(), Some(NodeState::Completed)),
        ]
    );
    assert_eq!(out.state.to_json()["log"], json!(["s1", "s2"]));
    assert_eq!(out.state.to_json()["task"], json!("2 steps"));

    let events = trellis_graph::Journal::load(&*journal, &out.run).unwrap();
    let continued: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::RunContinued { graph, params, .. } => Some((graph.clone(), params.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(continued, vec![("chain".to_owned(), json!({ "steps": 2 }))]);
    // No ending is recorded between the two graphs.
    let endings = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::RunStatusChanged { .. }))
        .count();
    assert_eq!(
        endings, 1,
        "one runStatusChanged: the run's success at the end"
    );

    // Replayed with the graph it continued with, the run is the same.
    let g1 = chain(2, &g0, None, false);
    let replayed = engine.inspect(g1, &out.run).unwrap();
    assert_eq!(key(&replayed), key(&out));
    // A graph that does not continue the first one cannot replay it.
    let alone = Arc::new(
        GraphBuilder::new("chain")
            .node("s1", step(None))
            .entry("s1")
            .build()
            .unwrap(),
    );
    let err = engine.inspect(alone, &out.run).err().unwrap().to_string();
    assert!(err.contains("fingerprint"), "{err}");
}

#[tokio::test]
async fn a_run_paused_in_its_first_graph_continues_when_resumed() {
    let (engine, _) = mem();
    let calls = Arc::new(AtomicUsize::new(0));
    let g0 = Arc::new(planning(true, None, false, calls.clone()));
    let out = engine.run(g0.clone(), Value::Null).await.unwrap();
    assert_eq!(out.status, RunStatus::WaitingInput);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "no continuation while waiting"
    );
    let done = engine
        .resume(
            g0,
            &out.run,
            vec![Command::Answer {
                node: "decide".into(),
                answer: Answer::text("3"),
            }],
        )
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    assert_eq!(done.state.to_json()["log"], json!(["s1", "s2", "s3"]));
}

#[tokio::test]
async fn a_run_paused_in_the_continued_graph_resumes_with_it() {
    let (engine, _) = mem();
    let calls = Arc::new(AtomicUsize::new(0));
    let g0 = Arc::new(planning(false, Some("s2"), true, calls.clone()));
    let out = engine.run(g0.clone(), Value::Null).await.unwrap();
    assert_eq!(out.status, RunStatus::WaitingInput);
    assert_eq!(out.waiting[0].0.as_str(), "s2");
    let g1 = chain(2, &g0, Some("s2"), true);
    let done = engine
        .resume(
            g1,
            &out.run,
            vec![Command::Answer {
                node: "s2".into(),
                answer: Answer::text("yes"),
            }],
        )
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    assert_eq!(done.state.to_json()["log"], json!(["s1", "s2"]));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the continuation ran once");
}

#[tokio::test]
async fn a_continuation_that_names_no_graph_lets_the_run_succeed() {
    let (engine, _) = mem();
    let g0 = Arc::new(
        GraphBuilder::new("planning")
            .node("decide", |_ctx: NodeContext| async {
                Ok(NodeOutput::success().result(json!({ "nothing": true })))
            })
            .entry("decide")
            .then(Arc::new(Then {
                gate: None,
                free: false,
                wrong: false,
                calls: Arc::default(),
            }))
            .build()
            .unwrap(),
    );
    let out = engine.run(g0, Value::Null).await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(out.nodes.len(), 1);
}

#[tokio::test]
async fn a_graph_that_does_not_continue_the_run_fails_it_with_the_reason() {
    let (engine, _) = mem();
    let g0 = Arc::new(
        GraphBuilder::new("planning")
            .node("decide", decide(false))
            .entry("decide")
            .then(Arc::new(Then {
                gate: None,
                free: false,
                wrong: true,
                calls: Arc::default(),
            }))
            .build()
            .unwrap(),
    );
    let out = engine.run(g0, Value::Null).await.unwrap();
    assert_eq!(out.status, RunStatus::Failed);
    let error = out.error.unwrap_or_default();
    assert!(
        error.contains("continues graph `other`, not this run's graph `planning`"),
        "{error}"
    );
}

#[test]
fn a_continuing_graph_refuses_node_ids_of_the_one_it_continues() {
    let first = GraphBuilder::new("first")
        .node("a", step(None))
        .entry("a")
        .build()
        .unwrap();
    let second = GraphBuilder::new("second")
        .node("a", step(None))
        .entry("a")
        .build()
        .unwrap();
    let err = second.after(&first).err().unwrap().to_string();
    assert!(
        err.contains("node(s) a are also nodes of graph `first`"),
        "{err}"
    );
}
