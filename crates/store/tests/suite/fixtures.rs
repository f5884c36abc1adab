//! Builders shared by the suite: stores in temp dirs, hand-made events and batches.

use std::future::Future;
use std::sync::Arc;

use serde_json::json;
use tempfile::TempDir;
use trellis_graph::{Batch, RunSummary};
use trellis_protocol::{Event, EventKind, NodeId, NodeState, RunId, RunStatus};
use trellis_store::SqliteStore;

/// A fresh workspace store; keep the `TempDir` alive as long as the store.
pub fn store() -> (TempDir, SqliteStore) {
    super::backends::sqlite()
}

/// Runs a future to completion on a throwaway current-thread runtime.
pub fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub const T0: i64 = 1_763_700_000_000;

pub fn ev(run: &RunId, seq: u64, kind: EventKind) -> Event {
    Event {
        run: run.clone(),
        seq,
        ts: T0 + seq as i64 * 37,
        cause: None,
        kind,
    }
}

pub fn transition(node: &str, from: Option<NodeState>, to: NodeState) -> EventKind {
    EventKind::NodeTransition {
        node: NodeId::new(node),
        attempt: 1,
        from,
        to,
        reason: None,
    }
}

pub fn summary(status: RunStatus, step: u64, last_seq: u64) -> RunSummary {
    RunSummary {
        graph: "feature".into(),
        status,
        step,
        last_seq,
        terminal: None,
        error: None,
        fork: None,
        created_ts: T0,
        updated_ts: T0 + last_seq as i64 * 37,
    }
}

/// A batch of `n` transition events of `run`, seqs `first..first+n`.
pub fn batch(run: &RunId, first: u64, n: u64) -> Batch {
    let events = (first..first + n)
        .map(|s| {
            ev(
                run,
                s,
                transition("plan", Some(NodeState::Ready), NodeState::Running),
            )
        })
        .collect();
    Batch {
        run: run.clone(),
        events: Arc::new(events),
        summary: summary(RunStatus::Running, first, first + n - 1),
    }
}

/// The batches of a realistic run shaped like the `feature` demo graph's default run: nine
/// node steps (test_generation fails twice and goes through adaptive_retrieval), five events
/// per step, one batch per step — 48 events in 11 batches.
pub fn realistic_run(run: &RunId) -> Vec<Batch> {
    let steps = [
        ("code_generation", false, "test_generation"),
        ("test_generation", true, "adaptive_retrieval"),
        ("adaptive_retrieval", false, "test_generation"),
        ("test_generation", true, "adaptive_retrieval"),
        ("adaptive_retrieval", false, "test_generation"),
        ("test_generation", false, "security_review"),
        ("security_review", false, "lint_and_format"),
        ("lint_and_format", false, "DONE"),
        ("DONE", false, ""),
    ];
    let mut seq = 0;
    let mut next = |kind: EventKind| {
        seq += 1;
        Event {
            run: run.clone(),
            seq,
            ts: T0 + seq as i64 * 13 + (seq as i64 % 3) * 101,
            cause: None,
            kind,
        }
    };
    let mut batches = Vec::new();
    let mut push = |events: Vec<Event>, status: RunStatus, step: u64| {
        let last = events.last().map_or(0, |e| e.seq);
        let mut s = summary(status, step, last);
        if status == RunStatus::Succeeded {
            s.terminal = Some(NodeId::new("DONE"));
        }
        batches.push(Batch {
            run: run.clone(),
            events: Arc::new(events),
            summary: s,
        });
    };
    push(
        vec![
            next(EventKind::RunStarted {
                graph: "feature".into(),
                fingerprint: "9f2c4e1a7b3d5f60".into(),
                params: json!({}),
                input: json!({"messages": [{"role": "user", "content": "Implement feature X with tests"}]}),
                fork: None,
            }),
            next(transition("code_generation", None, NodeState::Ready)),
        ],
        RunStatus::Running,
        0,
    );
    let mut attempts = std::collections::HashMap::<&str, u32>::new();
    for (i, (node, failure, to)) in steps.iter().enumerate() {
        let attempt = *attempts.entry(node).and_modify(|a| *a += 1).or_insert(1);
        let n = NodeId::new(*node);
        let end = if *failure {
            NodeState::Failed
        } else {
            NodeState::Completed
        };
        let events = vec![
            next(EventKind::NodeTransition {
                node: n.clone(),
                attempt,
                from: Some(NodeState::Ready),
                to: NodeState::Running,
                reason: None,
            }),
            next(EventKind::NodeOutput {
                node: n.clone(),
                attempt,
                failure: *failure,
                result: json!({"stage": node, "attempt": attempt, "passed": !failure, "files": ["src/feature_x.rs", "tests/feature_x.rs"]}).into(),
                error: failure.then(|| "simulated failure".to_owned()),
                writes: vec![
                    ("current_stage".into(), json!(node).into()),
                    (
                        "stage_results".into(),
                        json!({ *node: {"ok": !failure, "attempt": attempt} }).into(),
                    ),
                    (
                        "messages".into(),
                        json!([{"role": "assistant", "stage": node, "content": format!("{node} #{attempt}")}]).into(),
                    ),
                ],
                counters: vec![],
                spawns: vec![].into(),
                spawn_after: Default::default(),
                revise: vec![],
            }),
            next(EventKind::NodeTransition {
                node: n.clone(),
                attempt,
                from: Some(NodeState::Running),
                to: end,
                reason: None,
            }),
            next(EventKind::Routed {
                from: n,
                attempt,
                to: if to.is_empty() {
                    vec![]
                } else {
                    vec![NodeId::new(*to)]
                },
                reason: if *failure {
                    "failure".into()
                } else {
                    "success".into()
                },
            }),
            next(EventKind::StepCompleted {
                step: i as u64 + 1,
                changed: vec![
                    "current_stage".into(),
                    "stage_results".into(),
                    "messages".into(),
                ],
            }),
        ];
        push(events, RunStatus::Running, i as u64 + 1);
    }
    push(
        vec![next(EventKind::RunStatusChanged {
            status: RunStatus::Succeeded,
            terminal: Some(NodeId::new("DONE")),
            error: None,
        })],
        RunStatus::Succeeded,
        9,
    );
    batches
}

/// A service event of `stream`, stamped like [`ev`].
pub fn sev(
    stream: &trellis_protocol::StreamId,
    seq: u64,
    event: trellis_protocol::ServiceEventBody,
) -> trellis_protocol::ServiceEvent {
    trellis_protocol::ServiceEvent {
        stream: stream.clone(),
        seq,
        ts: T0 + seq as i64 * 37,
        submission: None,
        event,
    }
}

/// Session events of `session` numbered from `first`, as one batch.
pub fn session_batch(
    session: &trellis_protocol::SessionId,
    first: u64,
    events: Vec<trellis_protocol::SessionEvent>,
) -> Vec<trellis_protocol::ServiceEvent> {
    let stream = trellis_protocol::StreamId::Session(session.clone());
    events
        .into_iter()
        .zip(first..)
        .map(|(e, seq)| sev(&stream, seq, trellis_protocol::ServiceEventBody::Session(e)))
        .collect()
}
