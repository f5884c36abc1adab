//! Every event names the submission that caused it: the run's starter (or resumer) for what
//! the driver does on its own, the sender for what a command does.

use std::time::Duration;

use serde_json::json;
use trellis_graph::{GraphBuilder, Journal, NodeContext, NodeError, NodeOutput, Reducer};
use trellis_protocol::{
    Answer, Command, Event, EventKind, Interrupt, Message, NodeState, RunId, RunStatus,
    SubmissionId,
};

use super::common::{demo, mem};

fn sub(s: &str) -> Option<SubmissionId> {
    Some(SubmissionId::from_string(s))
}

fn cause_of(e: &Event) -> Option<&str> {
    e.cause.as_ref().map(SubmissionId::as_str)
}

/// `a` (slow) → `b` and `c`; `b` reports the messages it was given.
fn fork_graph() -> trellis_graph::Graph {
    GraphBuilder::new("causes")
        .channel("seen", Reducer::Append)
        .node("a", |_c: NodeContext| async {
            tokio::time::sleep(Duration::from_millis(150)).await;
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .node("b", |c: NodeContext| async move {
            let seen: Vec<String> = c.messages.iter().map(|m| m.text.clone()).collect();
            Ok::<_, NodeError>(NodeOutput::success().write("seen", json!(seen)))
        })
        .node("c", |_c: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .edge("a", "b")
        .edge("a", "c")
        .entry("a")
        .build()
        .unwrap()
}

#[tokio::test]
async fn command_events_carry_the_senders_cause_and_the_rest_the_starters() {
    let (engine, journal) = mem();
    let handle = engine
        .start_as_by(RunId::new(), fork_graph().into(), json!({}), sub("sub-A"))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    handle
        .send_by(
            Command::SendMessage {
                node: "b".into(),
                message: Message::user("hello"),
            },
            sub("sub-B"),
        )
        .await
        .unwrap();
    handle
        .send_by(
            Command::Prune {
                node: "c".into(),
                reason: None,
            },
            sub("sub-C"),
        )
        .await
        .unwrap();
    // Refused, sent without a cause.
    let refused = handle
        .send(Command::Answer {
            node: "a".into(),
            answer: Answer::approve(),
        })
        .await;
    assert!(refused.is_err());
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(out.state.get("seen"), Some(&json!(["hello"])));

    let log = journal.load(&out.run).unwrap();
    let mut by_command = 0;
    for e in &log {
        let expected =
            match &e.kind {
                EventKind::CommandReceived { id: 1, .. }
                | EventKind::MessageQueued { id: 1, .. } => Some("sub-B"),
                EventKind::CommandReceived { id: 2, .. } => Some("sub-C"),
                EventKind::NodeTransition { node, .. } if node.as_str() == "c" => Some("sub-C"),
                EventKind::CommandReceived { id: 3, .. }
                | EventKind::CommandRefused { id: 3, .. } => None,
                EventKind::CommandReceived { .. }
                | EventKind::CommandRefused { .. }
                | EventKind::MessageQueued { .. } => panic!("unexpected command event {e:?}"),
                _ => Some("sub-A"),
            };
        if expected != Some("sub-A") {
            by_command += 1;
        }
        assert_eq!(cause_of(e), expected, "{e:?}");
    }
    // commandReceived ×3, messageQueued, refusal, and c's READY + PRUNED.
    assert_eq!(by_command, 7, "{log:#?}");
    assert!(
        log.iter()
            .any(|e| matches!(&e.kind, EventKind::NodeTransition { node, to: NodeState::Pruned, .. } if node.as_str() == "c")),
        "c was pruned by the command"
    );
    // Replay ignores causes: the log without them rebuilds the same run.
    let stripped: Vec<Event> = log
        .iter()
        .cloned()
        .map(|mut e| {
            e.cause = None;
            e
        })
        .collect();
    let bare = trellis_graph::Engine::new(std::sync::Arc::new(
        trellis_graph::MemoryJournal::with_log(stripped),
    ));
    let a = engine.inspect(fork_graph().into(), &out.run).unwrap();
    let b = bare.inspect(fork_graph().into(), &out.run).unwrap();
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        serde_json::to_value(&b).unwrap()
    );
}

#[tokio::test]
async fn a_resumed_run_carries_the_resume_cause() {
    let g = GraphBuilder::new("gate")
        .node("ask", |c: NodeContext| async move {
            Ok::<_, NodeError>(match c.resume {
                None => NodeOutput::interrupt(Interrupt::approval("ok?")),
                Some(_) => NodeOutput::success(),
            })
        })
        .node("after", |_c: NodeContext| async {
            Ok::<_, NodeError>(NodeOutput::success())
        })
        .edge("ask", "after")
        .entry("ask")
        .build()
        .unwrap();
    let g = std::sync::Arc::new(g);
    let (engine, journal) = mem();
    let paused = engine
        .start_as_by(RunId::new(), g.clone(), json!({}), sub("sub-start"))
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::WaitingInput);
    let done = engine
        .resume_by(
            g,
            &paused.run,
            vec![Command::Answer {
                node: "ask".into(),
                answer: Answer::approve(),
            }],
            sub("sub-resume"),
        )
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    let log = journal.load(&done.run).unwrap();
    for e in &log {
        let expected = if e.seq <= paused.last_seq {
            "sub-start"
        } else {
            "sub-resume"
        };
        assert_eq!(cause_of(e), Some(expected), "{e:?}");
    }
    let resumed = log
        .iter()
        .find(|e| matches!(e.kind, EventKind::RunResumed { .. }))
        .unwrap();
    assert_eq!(resumed.seq, paused.last_seq + 1);
    assert!(
        log.iter()
            .any(|e| matches!(e.kind, EventKind::InputReceived { .. })
                && cause_of(e) == Some("sub-resume"))
    );
}

#[tokio::test]
async fn forks_carry_their_cause_and_plain_starts_none() {
    let (engine, journal) = mem();
    let g = demo("chain", json!({"n": 3}));
    let parent = engine.run(g.clone(), json!({})).await.unwrap();
    let parent_log = journal.load(&parent.run).unwrap();
    assert!(parent_log.iter().all(|e| e.cause.is_none()));
    let forked = engine
        .fork_by(g, &parent.run, 1, vec![], sub("sub-fork"))
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(forked.status, RunStatus::Succeeded);
    let log = journal.load(&forked.run).unwrap();
    assert!(log.len() > 5);
    assert!(log.iter().all(|e| cause_of(e) == Some("sub-fork")));
}
