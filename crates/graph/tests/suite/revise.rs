//! `revise`: a finished node runs again with feedback, and routing continues after it —
//! reopening a run that had ended.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use trellis_graph::{
    Engine, Graph, GraphBuilder, Journal, NodeContext, NodeError, NodeOutput, Reducer, RunOutcome,
};
use trellis_protocol::{
    Command, EventKind, Message, NodeId, NodeState, RunId, RunStatus, SubmissionId, TerminalKind,
};

use super::common::{assert_replays_exactly, mem, revise_to_end};

/// Appends `<node>#<attempt>` to `log`, and the messages it was given to `seen`.
async fn record(c: NodeContext) -> Result<NodeOutput, NodeError> {
    let seen: Vec<String> = c
        .messages
        .iter()
        .map(|m| format!("{}#{}:{}", c.node, c.attempt, m.text))
        .collect();
    Ok(NodeOutput::success()
        .write("log", json!([format!("{}#{}", c.node, c.attempt)]))
        .write("seen", json!(seen)))
}

fn chain() -> Arc<Graph> {
    GraphBuilder::new("revise_chain")
        .channel("log", Reducer::Append)
        .channel("seen", Reducer::Append)
        .node("a", record)
        .node("b", record)
        .node("c", record)
        .terminal("DONE", TerminalKind::Success, None)
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", "DONE")
        .entry("a")
        .build()
        .unwrap()
        .into()
}

fn revise(node: &str, text: &str) -> Command {
    Command::Revise {
        node: node.into(),
        message: Message::user(text),
    }
}

fn attempts(out: &RunOutcome) -> Vec<(String, u32, Option<NodeState>)> {
    out.nodes
        .iter()
        .map(|n| (n.id.to_string(), n.attempt, n.state))
        .collect()
}

/// The reasons of the run's refused commands, in order.
fn refusals(journal: &dyn Journal, run: &RunId) -> Vec<String> {
    journal
        .load(run)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::CommandRefused { reason, .. } => Some(reason),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn revising_a_finished_chain_reruns_the_node_and_what_follows() {
    let (engine, journal) = mem();
    let g = chain();
    let first = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(first.status, RunStatus::Succeeded);
    assert_eq!(first.terminal.as_ref().map(NodeId::as_str), Some("DONE"));

    let revised = engine
        .resume_by(
            g.clone(),
            &first.run,
            vec![revise("b", "handle the empty list")],
            Some(SubmissionId::from_string("sub-rev")),
        )
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(revised.status, RunStatus::Succeeded);
    assert_eq!(revised.terminal.as_ref().map(NodeId::as_str), Some("DONE"));
    assert_eq!(revised.error, None);
    assert_eq!(
        attempts(&revised),
        vec![
            ("a".into(), 1, Some(NodeState::Completed)),
            ("b".into(), 2, Some(NodeState::Completed)),
            ("c".into(), 2, Some(NodeState::Completed)),
            ("DONE".into(), 2, Some(NodeState::Completed)),
        ]
    );
    assert_eq!(
        revised.state.get("log"),
        Some(&json!(["a#1", "b#1", "c#1", "b#2", "c#2"]))
    );
    assert_eq!(
        revised.state.get("seen"),
        Some(&json!(["b#2:handle the empty list"])),
        "only the revision sees the message"
    );

    // The log records the reopening, then the new ending.
    let log = journal.load(&first.run).unwrap();
    let statuses: Vec<RunStatus> = log
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::RunStatusChanged { status, .. } => Some(status),
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Succeeded,
            RunStatus::Running,
            RunStatus::Succeeded
        ]
    );
    let reopened = log
        .iter()
        .find(|e| {
            matches!(
                e.kind,
                EventKind::RunStatusChanged {
                    status: RunStatus::Running,
                    ..
                }
            )
        })
        .unwrap();
    assert_eq!(reopened.cause.as_ref().unwrap().as_str(), "sub-rev");

    // Replay of the stored log is the live outcome.
    assert_replays_exactly(&engine, g, &first.run, &revised);
}

#[tokio::test]
async fn revising_a_run_that_reached_abort_reopens_it() {
    // b fails on its first attempt and the run ends at ABORT.
    let g: Arc<Graph> = GraphBuilder::new("revise_abort")
        .channel("log", Reducer::Append)
        .channel("seen", Reducer::Append)
        .node("a", record)
        .node("b", |c: NodeContext| async move {
            if c.attempt == 1 {
                return Ok(NodeOutput::failure("tests fail"));
            }
            record(c).await
        })
        .node("c", record)
        .terminal("DONE", TerminalKind::Success, None)
        .terminal("ABORT", TerminalKind::Failure, None)
        .edge("a", "b")
        .outcome_edge("b", "c", "ABORT")
        .edge("c", "DONE")
        .entry("a")
        .build()
        .unwrap()
        .into();
    let (engine, _) = mem();
    let failed = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.terminal.as_ref().map(NodeId::as_str), Some("ABORT"));
    assert_eq!(
        failed.error.as_deref(),
        Some("reached failure terminal ABORT")
    );

    let revised = revise_to_end(&engine, g.clone(), &failed.run, "b", "fix the test").await;
    assert_eq!(revised.status, RunStatus::Succeeded);
    assert_eq!(revised.terminal.as_ref().map(NodeId::as_str), Some("DONE"));
    assert_eq!(revised.error, None, "the old failure is cleared");
    assert_eq!(revised.node("b").unwrap().attempt, 2);
    assert_eq!(
        revised.node("ABORT").unwrap().state,
        Some(NodeState::Completed)
    );
    assert_eq!(
        revised.state.get("seen"),
        Some(&json!(["b#2:fix the test"]))
    );
    assert_replays_exactly(&engine, g, &failed.run, &revised);
}

#[tokio::test]
async fn revising_a_node_that_failed_without_a_route_clears_the_failure() {
    let g: Arc<Graph> = GraphBuilder::new("revise_unrouted")
        .node("a", |c: NodeContext| async move {
            Ok::<_, NodeError>(if c.messages.is_empty() {
                NodeOutput::failure("no idea")
            } else {
                NodeOutput::success()
            })
        })
        .entry("a")
        .build()
        .unwrap()
        .into();
    let (engine, _) = mem();
    let failed = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(
        failed.error.as_deref(),
        Some("node a failed and has no failure route")
    );
    let revised = revise_to_end(&engine, g, &failed.run, "a", "here is how").await;
    assert_eq!(revised.status, RunStatus::Succeeded);
    assert_eq!(revised.error, None);
}

#[tokio::test]
async fn revisions_are_refused_for_active_unreached_and_skipped_nodes() {
    let g: Arc<Graph> = GraphBuilder::new("revise_live")
        .channel("log", Reducer::Append)
        .channel("seen", Reducer::Append)
        .node("a", record)
        .node("b", |c: NodeContext| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            record(c).await
        })
        .node_with("s", record, |o| o.skipped())
        .node("c", record)
        .edge("a", "s")
        .edge("s", "b")
        .edge("b", "c")
        .entry("a")
        .build()
        .unwrap()
        .into();
    let (engine, _) = mem();
    let handle = engine.start(g, json!({})).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = |r: Result<(), String>| r.unwrap_err();
    assert_eq!(
        refused(handle.send(revise("b", "x")).await),
        "node b is RUNNING, not finished; use sendMessage to reach an active node"
    );
    assert_eq!(
        refused(handle.send(revise("c", "x")).await),
        "node c has not run yet; only COMPLETED or FAILED nodes can be revised (send it a message instead)"
    );
    assert_eq!(
        refused(handle.send(revise("s", "x")).await),
        "node s is SKIPPED; only COMPLETED or FAILED nodes can be revised"
    );
    assert_eq!(
        refused(handle.send(revise("nope", "x")).await),
        "no node named `nope`"
    );
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(out.node("b").unwrap().attempt, 1);
    assert_eq!(out.state.get("seen"), Some(&json!([])));
}

#[tokio::test]
async fn revisions_beyond_max_attempts_are_refused_and_the_run_stays_final() {
    let g: Arc<Graph> = GraphBuilder::new("revise_limit")
        .channel("log", Reducer::Append)
        .channel("seen", Reducer::Append)
        .node("a", record)
        .node_with("b", record, |o| o.max_attempts(2, "ABORT"))
        .terminal("ABORT", TerminalKind::Failure, None)
        .edge("a", "b")
        .entry("a")
        .build()
        .unwrap()
        .into();
    let (engine, journal) = mem();
    let first = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(first.status, RunStatus::Succeeded);
    // Attempt 2 is within the limit.
    let second = revise_to_end(&engine, g.clone(), &first.run, "b", "again").await;
    assert_eq!(second.status, RunStatus::Succeeded);
    assert_eq!(second.node("b").unwrap().attempt, 2);
    // So is a second revision (max_attempts counts revisions, not activations).
    let second = revise_to_end(&engine, g.clone(), &first.run, "b", "and again").await;
    assert_eq!(second.node("b").unwrap().attempt, 3);
    // A third is not: the command is refused and the run stays where it was.
    let third = revise_to_end(&engine, g.clone(), &first.run, "b", "once more").await;
    assert_eq!(third.status, RunStatus::Succeeded);
    assert_eq!(third.node("b").unwrap().attempt, 3);
    assert_eq!(third.state.to_json(), second.state.to_json());
    assert_eq!(
        refusals(journal.as_ref(), &first.run),
        ["node b was revised 2 time(s), its max_attempts (2); no more revisions"]
    );
    assert_replays_exactly(&engine, g, &first.run, &third);
}

#[tokio::test]
async fn finished_runs_resume_only_to_be_revised() {
    let (engine, _) = mem();
    let g = chain();
    let done = engine.run(g.clone(), json!({})).await.unwrap();
    let err = engine
        .resume(
            g.clone(),
            &done.run,
            vec![Command::SendMessage {
                node: "b".into(),
                message: Message::user("hi"),
            }],
        )
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("already succeeded; fork it to run again, or revise one of its nodes"),
        "{err}"
    );

    // A cancelled run cannot be revised.
    let slow: Arc<Graph> = GraphBuilder::new("slow")
        .node("a", |_c: NodeContext| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .entry("a")
        .build()
        .unwrap()
        .into();
    let handle = engine.start(slow.clone(), json!({})).unwrap();
    handle.send(Command::Cancel { reason: None }).await.unwrap();
    let cancelled = handle.wait().await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let err = engine
        .resume(slow, &cancelled.run, vec![revise("a", "x")])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("already cancelled; fork it to run again"),
        "{err}"
    );
}

#[tokio::test]
async fn messages_to_failed_nodes_point_to_revise() {
    // a fails and its failure route runs the slow b, so the run is live while a is FAILED.
    let g: Arc<Graph> = GraphBuilder::new("msg_failed")
        .channel("log", Reducer::Append)
        .channel("seen", Reducer::Append)
        .node("a", |_c: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::failure("broken"))
        })
        .node("b", |c: NodeContext| async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            record(c).await
        })
        .node("c", record)
        .outcome_edge("a", "c", "b")
        .entry("a")
        .build()
        .unwrap()
        .into();
    let engine = Engine::new(Arc::new(trellis_graph::MemoryJournal::new()));
    let handle = engine.start(g, json!({})).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = handle
        .send(Command::SendMessage {
            node: "a".into(),
            message: Message::user("try this"),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        "node a is FAILED; send a revise command to run it again with the message"
    );
    // A live revision of a non-final run: a runs again (and fails again) with the message.
    handle.send(revise("a", "try this")).await.unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.node("a").unwrap().attempt, 2);
    assert_eq!(out.node("a").unwrap().state, Some(NodeState::Failed));
}
