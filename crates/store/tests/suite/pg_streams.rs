//! PostgreSQL's own cases of the stream, session, client session and DAG checkpoint
//! domains: several processes (`PgStore`s) on one database, appends that do not wait, NUL
//! characters.

use std::pin::pin;
use std::sync::mpsc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use trellis_graph::Commit;
use trellis_protocol::{
    RunId, ServiceEventBody, SessionEvent, SessionId, StreamId, SubmissionId, WorkspaceEvent,
};
use trellis_store::pg::PgStore;
use trellis_store::prelude::*;
use trellis_store::{ClientSession, ClientTurn, Error};

use super::fixtures::{block_on, session_batch, sev};
use super::pg_support::{cluster, connect};
use super::streams::started;

/// A transaction of `store`'s (its own connection) holding what `sql` locks until
/// [`Held::release`].
struct Held {
    release: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    fn new(store: PgStore, sql: &'static str) -> Held {
        let (locked_tx, locked) = mpsc::channel();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            store
                .write(async move |c| {
                    let tx = c.transaction().await?;
                    tx.batch_execute(sql).await?;
                    locked_tx.send(()).unwrap();
                    let _ = released.await;
                    tx.commit().await?;
                    Ok(())
                })
                .unwrap();
        });
        locked.recv().unwrap();
        Held {
            release: Some(release),
            thread: Some(thread),
        }
    }

    fn release(mut self) {
        self.release.take().unwrap().send(()).unwrap();
        self.thread.take().unwrap().join().unwrap();
    }
}

/// Waits until `n` connections of the database wait for a lock.
fn wait_for_lock_waiters(store: &PgStore, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = store
            .read(async |c| {
                let row = c
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity
                         WHERE datname = current_database() AND wait_event_type = 'Lock'",
                        &[],
                    )
                    .await?;
                Ok(row.get(0))
            })
            .unwrap();
        if waiting >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{waiting} of {n} lock waiters");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn pending(commit: &mut std::pin::Pin<&mut Commit>) -> bool {
    commit
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending()
}

#[test]
fn two_stores_racing_for_the_same_seqs_do_not_both_succeed() {
    let cluster = cluster();
    let db = cluster.database();
    let (a, b) = (connect(&db), connect(&db));
    let id = SessionId::from_string("ses-race");
    // Both read seq 0 as the stream's last (reads pass the lock), then wait to insert.
    let lock = Held::new(
        connect(&db),
        "LOCK TABLE stream_events IN SHARE ROW EXCLUSIVE MODE",
    );
    let from_a = a.append_stream(session_batch(&id, 1, started("from a")));
    let from_b = b.append_stream(session_batch(&id, 1, started("from b")));
    wait_for_lock_waiters(&a, 2);
    lock.release();
    let outcomes = [block_on(from_a), block_on(from_b)];
    let won: Vec<usize> = (0..2).filter(|i| outcomes[*i].is_ok()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    let winner = ["from a", "from b"][won[0]];
    let err = outcomes[1 - won[0]].as_ref().unwrap_err().to_string();
    assert!(
        err.contains("stream session:ses-race got seq 1 after seq 3"),
        "{err}"
    );

    // Only the winner's events, and the session tables follow them.
    for store in [&a, &b] {
        let events = store
            .stream_events(&StreamId::Session(id.clone()), 0, None)
            .unwrap();
        assert_eq!(events, session_batch(&id, 1, started(winner)));
        assert_eq!(store.turns(&id).unwrap()[0].text, winner);
        assert_eq!(store.session(&id).unwrap().last_seq, 3);
    }
    // The loser numbers its events again after the winner's.
    let loser = [&a, &b][1 - won[0]];
    let again = vec![SessionEvent::MessageDelta {
        turn: 1,
        text: " and more".into(),
    }];
    block_on(loser.append_stream(session_batch(&id, 4, again))).unwrap();
    assert_eq!(a.turns(&id).unwrap()[0].text, format!("{winner} and more"));
}

#[test]
fn appending_does_not_wait_for_the_database() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    let lock = Held::new(
        connect(&db),
        "LOCK TABLE stream_events IN ACCESS EXCLUSIVE MODE",
    );
    let ws = |seq| {
        sev(
            &StreamId::Workspace,
            seq,
            ServiceEventBody::Workspace(WorkspaceEvent::OpFailed {
                op: "prune".into(),
                error: format!("#{seq}"),
                kind: None,
            }),
        )
    };
    let started = Instant::now();
    let mut first = pin!(store.append_stream(vec![ws(1)]));
    let mut second = pin!(store.append_stream(vec![ws(2)]));
    assert!(started.elapsed() < Duration::from_secs(1));
    wait_for_lock_waiters(&store, 1);
    assert!(pending(&mut first) && pending(&mut second));
    lock.release();
    block_on(first).unwrap();
    block_on(second).unwrap();
    assert_eq!(store.stream_last_seq(&StreamId::Workspace).unwrap(), 2);
}

#[test]
fn nul_characters_are_replaced_in_the_session_tables_only() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    super::sessions::nul_characters(&store, |s| s.replace('\0', "\u{FFFD}"));
}

#[test]
fn ids_holding_nul_characters_are_refused() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    let id = SessionId::from_string("ses\0nul");
    let err = block_on(store.append_stream(session_batch(&id, 1, started("x"))))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot append to stream session:ses\\0nul: the stream's id holds a NUL"),
        "{err}"
    );
    let mut event = sev(
        &StreamId::Workspace,
        1,
        ServiceEventBody::Session(SessionEvent::Note { text: "x".into() }),
    );
    event.event = ServiceEventBody::Workspace(WorkspaceEvent::OpFailed {
        op: "prune".into(),
        error: "x".into(),
        kind: None,
    });
    event.submission = Some(SubmissionId::from_string("sub\0"));
    let err = block_on(store.append_stream(vec![event]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the event's submission id holds a NUL"),
        "{err}"
    );
    assert_eq!(store.stream_last_seq(&StreamId::Workspace).unwrap(), 0);
    assert!(matches!(
        store.session(&id).unwrap_err(),
        Error::NotFound { .. }
    ));
}

#[test]
fn client_turns_added_by_two_stores_at_once_are_numbered_apart() {
    let cluster = cluster();
    let db = cluster.database();
    let stores = [connect(&db), connect(&db)];
    stores[0]
        .put_client_session(ClientSession {
            id: "ses".into(),
            client: "acp".into(),
            cwd: "/w".into(),
            title: None,
            config: "{}".into(),
            created_ms: 0,
            updated_ms: 0,
        })
        .unwrap();
    let numbers: Vec<u32> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(i, store)| {
                s.spawn(move || {
                    (0..10)
                        .map(|n| {
                            store
                                .add_client_turn(ClientTurn {
                                    session: "ses".into(),
                                    turn: 0,
                                    run: RunId::from_string(format!("run-{i}-{n}")),
                                    request: "go".into(),
                                    workflow: None,
                                    plan: "{}".into(),
                                    created_ms: 0,
                                })
                                .unwrap()
                        })
                        .collect::<Vec<u32>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=20).collect::<Vec<u32>>());
    let turns = stores[1].client_turns("ses").unwrap();
    assert_eq!(turns.len(), 20);
    assert!(turns.iter().zip(1..).all(|(t, n)| t.turn == n));
}
