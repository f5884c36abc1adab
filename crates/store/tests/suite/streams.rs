//! Service streams: append and read back per stream, run streams wrap the run log, bad
//! batches fail alone (inside a group commit on SQLite), everything survives reopening.
//! PostgreSQL's own cases (several processes on one stream, NUL characters) are in
//! `pg_streams`.

use serde_json::json;
use trellis_graph::{Commit, Journal, JournalError};
use trellis_protocol::{
    EventKind, NodeId, RunId, ServiceEvent, ServiceEventBody, SessionEvent, SessionId,
    SessionOwner, StreamId, SubmissionId, WorkspaceEvent,
};
use trellis_store::prelude::*;
use trellis_store::{SessionFilter, SqliteStore, StoreOptions};

use super::fixtures::{batch, block_on, session_batch, sev, store};
use super::group_commit::hold_write_lock;
use super::run_support::{Backdoor, Hold};

fn note(text: &str) -> ServiceEventBody {
    ServiceEventBody::Session(SessionEvent::Note { text: text.into() })
}

fn op_failed(op: &str) -> ServiceEventBody {
    ServiceEventBody::Workspace(WorkspaceEvent::OpFailed {
        op: op.into(),
        error: "no such run".into(),
        kind: None,
    })
}

fn seqs(events: &[ServiceEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

fn mixed_batches_read_back_per_stream_after_a_seq_and_up_to_a_limit(
    store: &(impl StreamStore + ?Sized),
) {
    let a = StreamId::Session(SessionId::from_string("run-1:plan"));
    let b = StreamId::Session(SessionId::from_string("ses-b"));
    let ws = StreamId::Workspace;
    let mut sent: Vec<ServiceEvent> = Vec::new();
    // Three batches, each mixing streams.
    for round in 0..3u64 {
        let mut events = Vec::new();
        for i in 1..=4 {
            events.push(sev(&a, round * 4 + i, note(&format!("a{round}.{i}"))));
        }
        events.push(sev(&b, round + 1, note(&format!("b{round}"))));
        let mut w = sev(&ws, round + 1, op_failed("prune"));
        w.submission = Some(SubmissionId::from_string(format!("sub-{round}")));
        events.push(w);
        sent.extend(events.clone());
        block_on(store.append_stream(events)).unwrap();
    }
    let of = |s: &StreamId| -> Vec<ServiceEvent> {
        sent.iter().filter(|e| &e.stream == s).cloned().collect()
    };

    assert_eq!(store.stream_events(&a, 0, None).unwrap(), of(&a));
    assert_eq!(store.stream_events(&b, 0, None).unwrap(), of(&b));
    assert_eq!(store.stream_events(&ws, 0, None).unwrap(), of(&ws));
    assert_eq!(store.stream_events(&a, 5, None).unwrap(), of(&a)[5..]);
    assert_eq!(
        seqs(&store.stream_events(&a, 5, Some(3)).unwrap()),
        [6, 7, 8]
    );
    assert_eq!(
        seqs(&store.stream_events(&a, 10, Some(5)).unwrap()),
        [11, 12]
    );
    assert!(store.stream_events(&a, 12, None).unwrap().is_empty());
    assert!(store.stream_events(&a, 0, Some(0)).unwrap().is_empty());
    let ws_events = store.stream_events(&ws, 1, None).unwrap();
    assert_eq!(
        ws_events[0].submission,
        Some(SubmissionId::from_string("sub-1"))
    );
    assert_eq!(store.stream_last_seq(&a).unwrap(), 12);
    assert_eq!(store.stream_last_seq(&b).unwrap(), 3);
    assert_eq!(store.stream_last_seq(&ws).unwrap(), 3);
    let empty = StreamId::Session(SessionId::from_string("nobody"));
    assert_eq!(store.stream_last_seq(&empty).unwrap(), 0);
    assert!(store.stream_events(&empty, 0, None).unwrap().is_empty());
}
both!(mixed_batches_read_back_per_stream_after_a_seq_and_up_to_a_limit);

/// The writer counts stream batches and events apart from run batches, and refused batches
/// not at all.
fn stream_batches_are_counted_apart<S: StreamStore + Backdoor + ?Sized>(store: &S) {
    run_streams_and_mismatched_bodies_are_refused(store);
    assert_eq!(store.journal_counters().stream_batches, 0);
    mixed_batches_read_back_per_stream_after_a_seq_and_up_to_a_limit(store);
    let stats = store.journal_counters();
    assert_eq!((stats.stream_batches, stats.stream_events), (3, 18));
    assert_eq!(stats.batches, 0, "run batches are counted apart");
}
both!(stream_batches_are_counted_apart);

fn a_run_stream_is_its_event_log<S: StreamStore + Journal + ?Sized>(store: &S) {
    let run = RunId::new();
    block_on(store.append(batch(&run, 1, 3))).unwrap();
    block_on(store.append(batch(&run, 4, 4))).unwrap();
    let stream = StreamId::Run(run.clone());
    let all = store.stream_events(&stream, 0, None).unwrap();
    let log = store.load(&run).unwrap();
    assert_eq!(all.len(), 7);
    for (wrapped, event) in all.iter().zip(&log) {
        assert_eq!(wrapped.stream, stream);
        assert_eq!((wrapped.seq, wrapped.ts), (event.seq, event.ts));
        assert_eq!(wrapped.event, ServiceEventBody::Run(event.kind.clone()));
        assert_eq!(wrapped.submission, None);
    }
    assert_eq!(store.stream_events(&stream, 2, None).unwrap(), all[2..]);
    assert_eq!(
        seqs(&store.stream_events(&stream, 2, Some(3)).unwrap()),
        [3, 4, 5]
    );
    assert_eq!(store.stream_last_seq(&stream).unwrap(), 7);
    let unknown = StreamId::Run(RunId::new());
    assert_eq!(store.stream_last_seq(&unknown).unwrap(), 0);
    assert!(store.stream_events(&unknown, 0, None).unwrap().is_empty());
}
both!(a_run_stream_is_its_event_log);

fn run_streams_and_mismatched_bodies_are_refused(store: &(impl StreamStore + ?Sized)) {
    let run = StreamId::Run(RunId::new());
    let err = block_on(store.append_stream(vec![sev(
        &run,
        1,
        ServiceEventBody::Run(EventKind::StepStarted { step: 1 }),
    )]))
    .unwrap_err();
    assert!(err.to_string().contains("Journal::append"), "{err}");
    let err =
        block_on(store.append_stream(vec![sev(&StreamId::Workspace, 1, note("x"))])).unwrap_err();
    assert!(err.to_string().contains("workspace events"), "{err}");
    let session = StreamId::Session(SessionId::from_string("s"));
    let err = block_on(store.append_stream(vec![
        sev(&session, 1, note("fine")),
        sev(&session, 2, op_failed("x")),
    ]))
    .unwrap_err();
    assert!(err.to_string().contains("session events"), "{err}");
    // Nothing of a refused batch was written.
    assert_eq!(store.stream_last_seq(&session).unwrap(), 0);
}
both!(run_streams_and_mismatched_bodies_are_refused);

/// The batches of [`duplicate_and_gapped_batches_fail_alone`], queued at once.
struct Queued {
    good: Commit,
    dup: Commit,
    other: Commit,
    gap: Commit,
    next: Commit,
    inner: Commit,
}

fn delta(text: &str) -> SessionEvent {
    SessionEvent::MessageDelta {
        turn: 1,
        text: text.into(),
    }
}

/// Appends the first batch of session `s`.
fn start_session_s(store: &(impl StreamStore + ?Sized)) {
    let id = SessionId::from_string("s");
    let started = SessionEvent::SessionStarted {
        owner: SessionOwner::Channel {
            channel: "general".into(),
        },
    };
    let turn = SessionEvent::TurnStarted {
        turn: 1,
        attempt: 0,
        model: None,
    };
    block_on(store.append_stream(session_batch(&id, 1, vec![started, turn]))).unwrap();
}

/// Queues good and bad batches behind [`start_session_s`] without waiting.
fn queue_good_and_bad_batches(store: &(impl StreamStore + ?Sized)) -> Queued {
    let id = SessionId::from_string("s");
    Queued {
        good: store.append_stream(session_batch(&id, 3, vec![delta("Hello")])),
        // Seq 3 again, with a workspace event that alone would be fine: all of it rolls back.
        dup: store.append_stream({
            let mut events = vec![sev(&StreamId::Workspace, 1, op_failed("dup"))];
            events.extend(session_batch(&id, 3, vec![delta(" DUPLICATE")]));
            events
        }),
        other: store.append_stream(vec![sev(&StreamId::Workspace, 1, op_failed("ok"))]),
        gap: store.append_stream(session_batch(&id, 6, vec![delta(" GAP")])),
        next: store.append_stream(session_batch(&id, 4, vec![delta(", world")])),
        // Within one batch too: seqs must follow each other.
        inner: store.append_stream(vec![
            sev(&StreamId::Workspace, 2, op_failed("a")),
            sev(&StreamId::Workspace, 2, op_failed("b")),
        ]),
    }
}

/// Checks that each bad batch failed alone, its materialisation rolled back with its events.
fn check_good_and_bad_batches<S: StreamStore + SessionStore + ?Sized>(store: &S, q: Queued) {
    let id = SessionId::from_string("s");
    let s = StreamId::Session(id.clone());
    block_on(q.good).unwrap();
    let err = block_on(q.dup).unwrap_err();
    assert!(
        matches!(&err, JournalError::Backend(m) if m.contains("got seq 3 after seq 3")),
        "{err}"
    );
    block_on(q.other).unwrap();
    let err = block_on(q.gap).unwrap_err().to_string();
    assert!(err.contains("got seq 6 after seq 3"), "{err}");
    block_on(q.next).unwrap();
    let err = block_on(q.inner).unwrap_err().to_string();
    assert!(err.contains("got seq 2 after seq 2"), "{err}");

    assert_eq!(
        seqs(&store.stream_events(&s, 0, None).unwrap()),
        [1, 2, 3, 4]
    );
    let ws = store.stream_events(&StreamId::Workspace, 0, None).unwrap();
    assert_eq!(ws.len(), 1);
    assert_eq!(ws[0].event, op_failed("ok"));
    // The failed batches' materialisation was rolled back with their events.
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns[0].text, "Hello, world");
    assert_eq!(store.session(&id).unwrap().last_seq, 4);
}

/// Bad batches queued behind a busy writer fail alone: on SQLite inside one group commit, on
/// PostgreSQL each in its transaction.
fn duplicate_and_gapped_batches_fail_alone<S: StreamStore + SessionStore + Backdoor + ?Sized>(
    store: &S,
    hold: Hold<'_>,
) {
    start_session_s(store);
    let release = hold();
    let queued = queue_good_and_bad_batches(store);
    release();
    check_good_and_bad_batches(store, queued);
    assert_eq!(store.journal_counters().stream_batches, 4);
}
held!(duplicate_and_gapped_batches_fail_alone);

#[test]
fn duplicate_and_gapped_batches_fail_alone_inside_one_group_commit() {
    let (_dir, store) = store();
    start_session_s(&store);
    let lock = hold_write_lock(store.db_path());
    let queued = queue_good_and_bad_batches(&store);
    lock.execute_batch("ROLLBACK").unwrap();
    check_good_and_bad_batches(&store, queued);
    let stats = store.stats();
    assert_eq!(
        stats.commits, 2,
        "one commit before the lock, one group: {stats:?}"
    );
    assert_eq!(stats.stream_batches, 4, "{stats:?}");
}

/// A session's first events, seqs 1 to 3: its start, a turn, a delta.
pub fn started(text: &str) -> Vec<SessionEvent> {
    vec![
        SessionEvent::SessionStarted {
            owner: SessionOwner::Channel {
                channel: "general".into(),
            },
        },
        SessionEvent::TurnStarted {
            turn: 1,
            attempt: 0,
            model: None,
        },
        SessionEvent::MessageDelta {
            turn: 1,
            text: text.into(),
        },
    ]
}

/// Two processes on one store: each sees what the other appended, continues the stream after
/// it, and is refused a seq the other took.
fn a_second_store_sees_and_continues_what_the_first_wrote<S>(a: &S, b: &S)
where
    S: StreamStore + SessionStore + Backdoor + ?Sized,
{
    let id = SessionId::from_string("ses-shared");
    let stream = StreamId::Session(id.clone());
    block_on(a.append_stream(session_batch(&id, 1, started("hello")))).unwrap();
    assert_eq!(b.stream_last_seq(&stream).unwrap(), 3);
    assert_eq!(b.turns(&id).unwrap()[0].text, "hello");
    block_on(b.append_stream(session_batch(&id, 4, vec![delta(", world")]))).unwrap();
    // A's seq 4 comes too late: refused by the seq check, as within one process.
    let err = block_on(a.append_stream(session_batch(&id, 4, vec![delta(" late")])))
        .unwrap_err()
        .to_string();
    assert!(err.contains("got seq 4 after seq 4"), "{err}");
    assert_eq!(a.turns(&id).unwrap()[0].text, "hello, world");
    assert_eq!(a.stream_events(&stream, 0, None).unwrap().len(), 4);
    assert_eq!(a.session(&id).unwrap().last_seq, 4);
    assert_eq!(a.journal_counters().stream_batches, 1);
}
two!(a_second_store_sees_and_continues_what_the_first_wrote);

#[test]
fn reopening_the_store_keeps_streams_sessions_and_artifacts() {
    let dir = tempfile::tempdir().unwrap();
    let id = SessionId::from_string("run-1:code");
    let run = RunId::from_string("run-1");
    let owner = SessionOwner::Agent {
        run: run.clone(),
        node: NodeId::new("code"),
        role: "coder".into(),
    };
    let events = session_batch(
        &id,
        1,
        vec![
            SessionEvent::SessionStarted { owner },
            SessionEvent::TurnStarted {
                turn: 1,
                attempt: 1,
                model: None,
            },
            SessionEvent::MessageDelta {
                turn: 1,
                text: "done".into(),
            },
            SessionEvent::TurnCompleted {
                turn: 1,
                message: json!({"role": "assistant", "content": "done"}),
                usage: Default::default(),
            },
        ],
    );
    let (path, streamed, sessions, turns, artifacts) = {
        let store = SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap();
        block_on(store.append_stream(events)).unwrap();
        block_on(store.append_stream(vec![sev(&StreamId::Workspace, 1, op_failed("x"))])).unwrap();
        store
            .put_artifact(trellis_store::NewArtifact {
                run: run.clone(),
                node: Some(NodeId::new("code")),
                kind: "plan".into(),
                content: "# Plan".into(),
                status: trellis_protocol::ArtifactStatus::AwaitingApproval,
            })
            .unwrap();
        (
            store.db_path().to_owned(),
            store
                .stream_events(&StreamId::Session(id.clone()), 0, None)
                .unwrap(),
            store.sessions(&SessionFilter::default()).unwrap(),
            store.turns(&id).unwrap(),
            store.artifacts(&run).unwrap(),
        )
    };
    let store = SqliteStore::open(&path, StoreOptions::default()).unwrap();
    assert_eq!(streamed.len(), 4);
    assert_eq!(
        store
            .stream_events(&StreamId::Session(id.clone()), 0, None)
            .unwrap(),
        streamed
    );
    assert_eq!(store.stream_last_seq(&StreamId::Workspace).unwrap(), 1);
    assert_eq!(store.sessions(&SessionFilter::default()).unwrap(), sessions);
    assert_eq!(store.turns(&id).unwrap(), turns);
    assert_eq!(turns[0].text, "done");
    assert_eq!(store.artifacts(&run).unwrap(), artifacts);
    assert_eq!(artifacts.len(), 1);
    // Appending continues where the stream stopped.
    block_on(store.append_stream(session_batch(
        &id,
        5,
        vec![SessionEvent::SessionCompleted {
            output: json!("ok"),
        }],
    )))
    .unwrap();
    assert_eq!(store.session(&id).unwrap().last_seq, 5);
}
