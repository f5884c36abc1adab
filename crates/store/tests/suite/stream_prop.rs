//! Property: whatever the batch sizes, a stream read from any `after_seq` — whole or in
//! pages — is the suffix of what was appended to it, and the materialised turn texts are
//! the deltas appended since each turn (re)started.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;
use trellis_protocol::{
    ServiceEvent, ServiceEventBody, SessionEvent, SessionId, StreamId, ToolStatus, TurnUsage,
    WorkspaceEvent,
};
use trellis_store::prelude::*;

use super::fixtures::{T0, block_on};

const STREAMS: usize = 4;

fn stream(i: usize) -> StreamId {
    if i + 1 == STREAMS {
        StreamId::Workspace
    } else {
        StreamId::Session(SessionId::from_string(format!("run-p:node-{i}")))
    }
}

fn text() -> impl Strategy<Value = String> {
    "[a-z é\n\"]{0,12}"
}

fn session_event() -> impl Strategy<Value = SessionEvent> {
    let turn = 1u32..4;
    prop_oneof![
        4 => (turn.clone(), text()).prop_map(|(turn, text)| SessionEvent::MessageDelta { turn, text }),
        2 => (turn.clone(), text()).prop_map(|(turn, text)| SessionEvent::ThoughtDelta { turn, text }),
        1 => (turn.clone(), 0u32..3).prop_map(|(turn, attempt)| SessionEvent::TurnStarted { turn, attempt, model: None }),
        1 => (turn.clone(), "[ab]").prop_map(|(turn, call_id)| SessionEvent::ToolStarted {
            turn,
            call_id,
            name: "grep".into(),
            input: json!({"pattern": "x"}),
        }),
        1 => (turn.clone(), "[ab]", text()).prop_map(|(turn, call_id, output)| {
            SessionEvent::ToolCompleted {
                turn,
                call_id,
                name: "grep".into(),
                output,
                status: ToolStatus::Error,
                duration_ms: 3,
            }
        }),
        1 => (turn.clone(), 0u64..500).prop_map(|(turn, n)| SessionEvent::TurnCompleted {
            turn,
            message: json!({"role": "assistant", "n": n}),
            usage: TurnUsage { prompt_tokens: n, completion_tokens: 1 },
        }),
        1 => text().prop_map(|text| SessionEvent::UserMessage { text }),
        1 => text().prop_map(|text| SessionEvent::Note { text }),
    ]
}

/// A stream index and, for session streams, the event.
fn event() -> impl Strategy<Value = (usize, SessionEvent)> {
    (0..STREAMS, session_event())
}

/// One case: the events (a stream index and, for session streams, the event), the batch
/// sizes, where each stream is read from, the page size.
type Case = (Vec<(usize, SessionEvent)>, Vec<usize>, Vec<u64>, usize);

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(event(), 1..60),
        proptest::collection::vec(1usize..8, 1..60),
        proptest::collection::vec(0u64..40, STREAMS),
        1usize..6,
    )
}

/// The property, on a fresh store.
fn check<S: StreamStore + SessionStore + ?Sized>(
    store: &S,
    (events, sizes, afters, page): Case,
) -> Result<(), TestCaseError> {
    let mut next = [1u64; STREAMS];
    let sent: Vec<ServiceEvent> = events
        .into_iter()
        .enumerate()
        .map(|(i, (s, e))| {
            let seq = next[s];
            next[s] += 1;
            let event = if s + 1 == STREAMS {
                ServiceEventBody::Workspace(WorkspaceEvent::OpFailed {
                    op: "prune".into(),
                    error: format!("#{i}"),
                    kind: None,
                })
            } else {
                ServiceEventBody::Session(e)
            };
            ServiceEvent {
                stream: stream(s),
                seq,
                ts: T0 + i as i64,
                submission: None,
                event,
            }
        })
        .collect();

    // Random batch sizes, all queued before any is awaited (so they group-commit).
    let mut commits = Vec::new();
    let mut rest = sent.as_slice();
    for size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (head, tail) = rest.split_at((*size).min(rest.len()));
        commits.push(store.append_stream(head.to_vec()));
        rest = tail;
    }
    for c in commits {
        block_on(c).unwrap();
    }

    for (s, after) in afters.iter().enumerate() {
        let id = stream(s);
        let appended: Vec<&ServiceEvent> = sent.iter().filter(|e| e.stream == id).collect();
        let after = *after % (appended.len() as u64 + 2);
        let suffix: Vec<ServiceEvent> = appended
            .iter()
            .filter(|e| e.seq > after)
            .map(|e| (*e).clone())
            .collect();
        prop_assert_eq!(&store.stream_events(&id, after, None).unwrap(), &suffix);
        let mut paged = Vec::new();
        let mut cursor = after;
        loop {
            let got = store.stream_events(&id, cursor, Some(page)).unwrap();
            prop_assert!(got.len() <= page);
            match got.last() {
                Some(last) => cursor = last.seq,
                None => break,
            }
            paged.extend(got);
        }
        prop_assert_eq!(&paged, &suffix);
        prop_assert_eq!(store.stream_last_seq(&id).unwrap(), appended.len() as u64);

        // The materialised texts follow the deltas since each turn (re)started.
        if let StreamId::Session(session) = &id {
            let mut model: BTreeMap<u32, (String, String)> = BTreeMap::new();
            for e in &appended {
                match &e.event {
                    ServiceEventBody::Session(SessionEvent::TurnStarted { turn, .. }) => {
                        model.insert(*turn, Default::default());
                    }
                    ServiceEventBody::Session(SessionEvent::MessageDelta { turn, text }) => {
                        model.entry(*turn).or_default().0.push_str(text);
                    }
                    ServiceEventBody::Session(SessionEvent::ThoughtDelta { turn, text }) => {
                        model.entry(*turn).or_default().1.push_str(text);
                    }
                    _ => {}
                }
            }
            for t in store.turns(session).unwrap() {
                let (text, thoughts) = model.remove(&t.turn).unwrap_or_default();
                prop_assert_eq!(&t.text, &text, "turn {}", t.turn);
                prop_assert_eq!(&t.thoughts, &thoughts, "turn {}", t.turn);
            }
            prop_assert!(model.is_empty(), "turns missing: {:?}", model);
        }
    }
    Ok(())
}

mod reads_from_any_seq_are_suffixes_of_the_appends {
    use proptest::prelude::*;
    use trellis_store::{SqliteStore, StoreOptions, Synchronous};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        #[test]
        fn sqlite(case in super::case()) {
            let dir = tempfile::tempdir().unwrap();
            let opts = StoreOptions { synchronous: Synchronous::Normal, ..Default::default() };
            let store = SqliteStore::open_workspace(dir.path(), opts).unwrap();
            super::check(&store, case)?;
        }
    }

    /// One database for every case, emptied before each (a fresh one per case would cost
    /// ~0.5 s on the test cluster), with `proptest!`'s case count and regression file.
    #[cfg(feature = "postgres")]
    #[test]
    fn postgres() {
        use proptest::test_runner::{FileFailurePersistence, TestRunner};
        use trellis_store::pg::{PgOptions, PgStore};

        let cluster = trellis_test_pg::Cluster::shared();
        let db = cluster.database();
        let opts = PgOptions {
            synchronous: Synchronous::Normal,
            ..Default::default()
        };
        let store = PgStore::connect(&db.url(), opts).unwrap();
        let mut runner = TestRunner::new(ProptestConfig {
            cases: 32,
            source_file: Some(file!()),
            failure_persistence: Some(Box::new(FileFailurePersistence::default())),
            ..ProptestConfig::default()
        });
        let outcome = runner.run(&super::case(), |case| {
            store
                .write(async |c| {
                    c.batch_execute(
                        "TRUNCATE stream_events, sessions, turns, turn_messages,
                                  turn_thoughts, turn_tools",
                    )
                    .await?;
                    Ok(())
                })
                .unwrap();
            super::check(&store, case)
        });
        if let Err(e) = outcome {
            panic!("{e}\n{runner}");
        }
    }
}
