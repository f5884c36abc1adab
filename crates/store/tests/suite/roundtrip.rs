//! Events come back exactly as appended; the runs row mirrors the last summary.

use std::sync::Arc;

use serde_json::json;
use trellis_graph::{Batch, Journal, JournalError};
use trellis_protocol::{
    Answer, Command, EdgeSpec, Event, EventKind, ForkRef, InjectNode, Interrupt, Message, NodeId,
    NodeState, RunId, RunStatus, SubmissionId,
};
use trellis_store::prelude::*;

use super::fixtures::{T0, block_on, ev, realistic_run, summary};
use super::run_support::Backdoor;

/// One event of every kind, every optional field set.
fn every_kind(run: &RunId) -> Vec<Event> {
    let n = NodeId::new("review/security ✓");
    let kinds = vec![
        EventKind::RunStarted {
            graph: "feature".into(),
            fingerprint: "abc".into(),
            params: json!({"fail_first": 2}),
            input: json!({"task": "ünïcødé \"quoted\" \n newline"}),
            fork: Some(ForkRef {
                run: RunId::from_string("parent"),
                seq: 17,
            }),
        },
        EventKind::RunResumed {
            requeued: vec![n.clone(), NodeId::new("b")],
        },
        EventKind::NodeAdded {
            node: n.clone(),
            template: "worker".into(),
            parent: Some(NodeId::new("review")),
            input: json!([1, 2.5, null, {"k": -3}]),
            after: vec![NodeId::new("review/a")],
        },
        EventKind::EdgeAdded {
            edge: EdgeSpec {
                from: NodeId::new("a"),
                to: n.clone(),
            },
        },
        EventKind::NodeTransition {
            node: n.clone(),
            attempt: 3,
            from: Some(NodeState::Running),
            to: NodeState::Ready,
            reason: Some("requeued".into()),
        },
        EventKind::NodeOutput {
            node: n.clone(),
            attempt: 3,
            failure: true,
            result: json!({"score": 0.25}).into(),
            error: Some("boom".into()),
            writes: vec![
                ("x".into(), json!(1).into()),
                ("y".into(), json!("two").into()),
            ],
            counters: vec![("retries".into(), -1)],
            spawns: vec![("k".into(), "worker".into(), json!({"i": 9}))].into(),
            spawn_after: [("k".to_owned(), vec!["j".to_owned()])].into(),
            revise: vec![NodeId::new("review/a")],
        },
        EventKind::InterruptRaised {
            node: n.clone(),
            attempt: 1,
            interrupt: Interrupt::approval("ship it?"),
            scratch: json!({"draft": "v1"}),
        },
        EventKind::InputReceived {
            node: n.clone(),
            attempt: 1,
            answer: Answer::reject("no"),
        },
        EventKind::Routed {
            from: n.clone(),
            attempt: 1,
            to: vec![NodeId::new("DONE"), NodeId::new("ABORT")],
            reason: "router".into(),
        },
        EventKind::StepCompleted {
            step: 4,
            changed: vec!["x".into(), "y".into()],
        },
        EventKind::CommandReceived {
            id: 1,
            command: Command::Inject {
                nodes: vec![InjectNode {
                    id: NodeId::new("extra"),
                    template: "worker".into(),
                    input: json!(1),
                    parent: None,
                    activate: true,
                }],
                edges: vec![],
            },
        },
        EventKind::CommandRefused {
            id: 2,
            reason: "node is final".into(),
        },
        EventKind::MessageQueued {
            id: 3,
            node: n,
            attempt: 2,
            delivered: true,
        },
        EventKind::CommandReceived {
            id: 4,
            command: Command::SendMessage {
                node: NodeId::new("a"),
                message: Message::user("hi"),
            },
        },
        EventKind::RunStatusChanged {
            status: RunStatus::Failed,
            terminal: Some(NodeId::new("ABORT")),
            error: Some("it failed".into()),
        },
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            // Timestamps jump around (clock steps backwards too).
            let ts = T0 + [0, 5, -3_000, 1 << 40, 7][i % 5];
            Event {
                run: run.clone(),
                seq: i as u64 + 1,
                ts,
                cause: None,
                kind,
            }
        })
        .collect()
}

two!(every_field_of_every_kind_survives);
fn every_field_of_every_kind_survives<S: RunStore + Journal>(store: &S, other: &S) {
    let run = RunId::new();
    let events = every_kind(&run);
    // Split into three batches to cover multi-row loads.
    let mut first = 1;
    for chunk in events.chunks(6) {
        let last = first + chunk.len() as u64 - 1;
        let batch = Batch {
            run: run.clone(),
            events: Arc::new(chunk.to_vec()),
            summary: summary(RunStatus::Running, 0, last),
        };
        block_on(store.append(batch)).unwrap();
        first = last + 1;
    }
    assert_eq!(store.load(&run).unwrap(), events);
    assert_eq!(
        store.events(&run, 5, Some(8)).unwrap(),
        events[4..8].to_vec()
    );
    assert_eq!(store.events(&run, 14, None).unwrap(), events[13..].to_vec());

    // A second store on the same database (another process, say) reads the same.
    assert_eq!(other.load(&run).unwrap(), events);
    assert_eq!(
        other.events(&run, 5, Some(8)).unwrap(),
        events[4..8].to_vec()
    );
}

both!(runs_row_follows_the_last_summary);
fn runs_row_follows_the_last_summary<S: RunStore + Journal + ?Sized>(store: &S) {
    let run = RunId::new();
    let batches = realistic_run(&run);
    let all: Vec<Event> = batches
        .iter()
        .flat_map(|b| b.events.iter().cloned())
        .collect();
    let mut commits = Vec::new();
    for mut b in batches {
        if b.summary.status == RunStatus::Succeeded {
            b.summary.fork = Some(ForkRef {
                run: RunId::from_string("p"),
                seq: 3,
            });
            b.summary.error = Some("none really".into());
        }
        commits.push(store.append(b));
    }
    for c in commits {
        block_on(c).unwrap();
    }
    let rec = store.get_run(run.as_str()).unwrap();
    assert_eq!(rec.id, run);
    assert_eq!(rec.summary.graph, "feature");
    assert_eq!(rec.summary.status, RunStatus::Succeeded);
    assert_eq!(rec.summary.step, 9);
    assert_eq!(rec.summary.last_seq, all.len() as u64);
    assert_eq!(rec.summary.terminal, Some(NodeId::new("DONE")));
    assert_eq!(rec.summary.error.as_deref(), Some("none really"));
    assert_eq!(
        rec.summary.fork,
        Some(ForkRef {
            run: RunId::from_string("p"),
            seq: 3
        })
    );
    assert_eq!(rec.summary.created_ts, T0);
    assert!(rec.owner.is_none() && !rec.owner_alive);
    assert_eq!(store.load(&run).unwrap(), all);

    let cps = store.checkpoints(&run).unwrap();
    assert_eq!(cps.len(), 10, "runStarted + 9 stepCompleted");
    assert_eq!((cps[0].seq, cps[0].step), (1, 0));
    assert_eq!(
        cps.iter().map(|c| c.step).collect::<Vec<_>>(),
        (0..=9).collect::<Vec<_>>()
    );
    for cp in &cps {
        assert!(all[cp.seq as usize - 1].kind.is_checkpoint());
    }
}

both!(unknown_runs_are_not_found);
fn unknown_runs_are_not_found<S: RunStore + Journal + ?Sized>(store: &S) {
    let ghost = RunId::from_string("nope");
    assert!(matches!(
        store.load(&ghost),
        Err(JournalError::RunNotFound(_))
    ));
    assert!(matches!(
        store.events(&ghost, 0, None),
        Err(trellis_store::Error::RunNotFound(_))
    ));
    assert!(store.checkpoints(&ghost).is_err());
}

both!(summary_only_batches_update_the_row);
fn summary_only_batches_update_the_row<S: RunStore + Journal + ?Sized>(store: &S) {
    let run = RunId::new();
    let b = Batch {
        run: run.clone(),
        events: Arc::new(vec![ev(
            &run,
            1,
            EventKind::RunResumed { requeued: vec![] },
        )]),
        summary: summary(RunStatus::Running, 0, 1),
    };
    block_on(store.append(b)).unwrap();
    let empty = Batch {
        run: run.clone(),
        events: Arc::new(vec![]),
        summary: summary(RunStatus::Cancelled, 0, 1),
    };
    block_on(store.append(empty)).unwrap();
    assert_eq!(
        store.get_run(run.as_str()).unwrap().summary.status,
        RunStatus::Cancelled
    );
    assert_eq!(store.load(&run).unwrap().len(), 1);
}

two!(causes_survive_the_store);
fn causes_survive_the_store<S: RunStore + Journal>(store: &S, other: &S) {
    let run = RunId::new();
    let (a, b) = (
        SubmissionId::from_string("sub-a"),
        SubmissionId::from_string("sub-b"),
    );
    let mut events = every_kind(&run);
    for (i, e) in events.iter_mut().enumerate() {
        // Batches 1 and 2 mix causes; batch 3 (events 13..) has none.
        e.cause = match i {
            0..=3 => Some(a.clone()),
            4 | 6 => None,
            5 | 7..=11 => Some(b.clone()),
            _ => None,
        };
    }
    let mut first = 1;
    for chunk in events.chunks(6) {
        let last = first + chunk.len() as u64 - 1;
        let batch = Batch {
            run: run.clone(),
            events: Arc::new(chunk.to_vec()),
            summary: summary(RunStatus::Running, 0, last),
        };
        block_on(store.append(batch)).unwrap();
        first = last + 1;
    }
    assert_eq!(store.load(&run).unwrap(), events);
    assert_eq!(
        store.events(&run, 4, Some(8)).unwrap(),
        events[3..8].to_vec()
    );
    assert_eq!(other.load(&run).unwrap(), events);
}

two!(rows_written_before_causes_still_load);
/// A row written before events had causes (the blob of a three-part payload, stored raw)
/// still loads, with no causes.
fn rows_written_before_causes_still_load<S: Backdoor>(store: &S, reopened: &S) {
    let run = RunId::new();
    let events = vec![
        ev(&run, 1, EventKind::StepStarted { step: 1 }),
        ev(
            &run,
            2,
            EventKind::StepCompleted {
                step: 1,
                changed: vec![],
            },
        ),
    ];
    let mut caused = events.clone();
    caused[0].cause = Some(SubmissionId::from_string("sub-a"));
    block_on(store.append(Batch {
        run: run.clone(),
        events: Arc::new(caused),
        summary: summary(RunStatus::Running, 1, 2),
    }))
    .unwrap();
    let mut old = vec![0u8];
    old.extend_from_slice(
        format!(
            r#"[{},[37],[{{"type":"stepStarted","step":1}},{{"type":"stepCompleted","step":1}}]]"#,
            T0 + 37
        )
        .as_bytes(),
    );
    assert_eq!(store.set_event_blobs(&old), 1);
    assert_eq!(reopened.load(&run).unwrap(), events);
}
