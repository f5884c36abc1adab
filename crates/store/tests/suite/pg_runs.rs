//! The run journal where PostgreSQL differs from SQLite: a group's transaction cut off, writes
//! in the order they were sent across the write lane, `rk` not spent by updates, NUL in
//! text, and the inbox with ids drawn before commit. (Group commit itself is tested on both
//! backends: `group_commit`, `atomicity`, `journal`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use trellis_graph::{Journal, JournalError};
use trellis_protocol::{Command, EventKind, RunId, RunStatus};
use trellis_store::pg::PgStore;
use trellis_store::prelude::*;
use trellis_store::{Error, StoreStats};

use super::fixtures::{batch, block_on, ev, summary};
use super::journal::append_concurrently;
use super::pg_support::{cluster, connect};
use super::run_support::hold_lane;

fn stats(store: &PgStore) -> StoreStats {
    store.journal_stats()
}

/// `journal::concurrent_appends_share_commits` on a cluster that flushes its WAL at every
/// commit (the suite's cluster does not): by hand, with `--run-ignored only --no-capture`.
#[test]
#[ignore = "a benchmark: starts a cluster of its own"]
fn concurrent_appends_share_commits_on_a_durable_cluster() {
    let cluster = trellis_test_pg::Cluster::start(trellis_test_pg::Durability::Durable);
    let db = cluster.database();
    let store = connect(&db);
    for _ in 0..3 {
        append_concurrently(&store, true);
        append_concurrently(&store, false);
    }
}

#[test]
fn a_transaction_cut_off_fails_every_batch_and_the_store_goes_on() {
    let cluster = cluster();
    let db = cluster.database();
    let store = Arc::new(connect(&db));
    let locker = Arc::new(connect(&db));
    // Another session holds `runs`: the group's transaction waits for it, then is cut off.
    let locked = Arc::new(AtomicBool::new(false));
    let holder = {
        let (locker, flag) = (locker.clone(), locked.clone());
        std::thread::spawn(move || {
            locker.write(async move |c| {
                let tx = c.transaction().await?;
                tx.batch_execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
                    .await?;
                flag.store(true, Ordering::SeqCst);
                tx.batch_execute("SELECT pg_sleep(30)").await?;
                Ok(())
            })
        })
    };
    while !locked.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    // All five in one group, queued behind a held lane.
    let release = hold_lane(&store);
    let run = RunId::new();
    let commits: Vec<_> = (0..5u64)
        .map(|i| store.append(batch(&run, i + 1, 1)))
        .collect();
    release();
    std::thread::sleep(Duration::from_millis(300));
    assert!(cluster.terminate_connections(db.name()) >= 2);
    assert!(holder.join().unwrap().is_err());
    for c in commits {
        let err = block_on(c).unwrap_err().to_string();
        assert!(err.contains("nothing of it was written"), "{err}");
        assert!(
            err.contains("[store] url"),
            "errors name the setting: {err}"
        );
    }
    let s = stats(&store);
    assert_eq!((s.failed_commits, s.batches), (1, 0), "{s:?}");

    // The store reconnects: the run was never written, and can be now.
    let gone = until(|| match store.load(&run) {
        Err(JournalError::RunNotFound(_)) => Some(()),
        _ => None,
    });
    assert!(gone.is_some(), "nothing of the run was written");
    let mut first = 1;
    until(|| {
        let ok = block_on(store.append(batch(&run, first, 1))).is_ok();
        first += u64::from(ok);
        ok.then_some(())
    })
    .unwrap();
    assert_eq!(store.load(&run).unwrap().len(), 1);
}

/// Calls `f` until it answers `Some` (a connection cut off fails the next call on it).
fn until<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    (0..50).find_map(|_| {
        let out = f();
        if out.is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
        out
    })
}

#[test]
fn a_batch_sent_after_another_write_is_committed_after_it() {
    let cluster = cluster();
    let db = cluster.database();
    let store = Arc::new(connect(&db));
    let (x, y) = (RunId::new(), RunId::new());
    let release = hold_lane(&store);
    let first = store.append(batch(&x, 1, 1));
    // A claim queued after the open group closes it: `y`'s batch goes into the next one.
    store.claim_new(&y).unwrap();
    let second = store.append(batch(&y, 1, 1));
    let third = store.append(batch(&x, 2, 1));
    release();
    for c in [first, second, third] {
        block_on(c).unwrap();
    }
    let s = stats(&store);
    assert_eq!((s.commits, s.batches, s.largest_group), (3, 3, 2), "{s:?}");
    let rec = store.get_run(y.as_str()).unwrap();
    assert_eq!(rec.owner.as_ref(), Some(store.owner()));
}

#[test]
fn updating_a_run_spends_no_key() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    for _ in 0..3 {
        let run = RunId::new();
        for b in 0..4 {
            block_on(store.append(batch(&run, b * 2 + 1, 2))).unwrap();
        }
    }
    let keys: Vec<i64> = store
        .read(async |c| {
            let rows = c.query("SELECT rk FROM runs ORDER BY rk", &[]).await?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
        .unwrap();
    assert_eq!(keys, [1, 2, 3]);
}

#[test]
fn nul_in_text_is_kept_in_events_and_replaced_in_the_summary() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    let run = RunId::new();
    let failed = EventKind::RunStatusChanged {
        status: RunStatus::Failed,
        terminal: None,
        error: Some("bad\0byte".into()),
    };
    let mut s = summary(RunStatus::Failed, 1, 1);
    s.error = Some("bad\0byte".into());
    s.graph = "g\0".into();
    let events = vec![ev(&run, 1, failed)];
    block_on(store.append(trellis_graph::Batch {
        run: run.clone(),
        events: Arc::new(events.clone()),
        summary: s,
    }))
    .unwrap();
    assert_eq!(store.load(&run).unwrap(), events);
    let rec = store.get_run(run.as_str()).unwrap();
    assert_eq!(rec.summary.error.as_deref(), Some("bad\u{FFFD}byte"));
    assert_eq!(rec.summary.graph, "g\u{FFFD}");

    // No run has an id with NUL: reads answer as for an unknown run.
    let ghost = RunId::from_string(format!("{}\0", &run.as_str()[..8]));
    assert!(matches!(
        store.get_run(ghost.as_str()),
        Err(Error::RunNotFound(_))
    ));
    assert!(matches!(
        store.load(&ghost),
        Err(JournalError::RunNotFound(_))
    ));
    assert!(store.take_commands(&ghost).unwrap().is_empty());
    // Writing under such an id is refused by the server.
    let err = block_on(store.append(batch(&ghost, 1, 1))).unwrap_err();
    assert!(err.to_string().contains("0x00"), "{err}");
    let err = store
        .enqueue_command(&ghost, &Command::Cancel { reason: None })
        .unwrap_err();
    assert!(err.to_string().contains("0x00"), "{err}");
}

/// A command whose id was drawn first but committed last is delivered by a later take: ids
/// are drawn at insert, and a take marks rows taken rather than remembering an id.
#[test]
fn a_command_committed_after_a_later_one_was_taken_is_not_lost() {
    let cluster = cluster();
    let db = cluster.database();
    let (slow, cli, engine) = (Arc::new(connect(&db)), connect(&db), connect(&db));
    let run = RunId::new();
    let (inserted, commit) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let early = {
        let (slow, run) = (slow.clone(), run.to_string());
        let (inserted, commit) = (inserted.clone(), commit.clone());
        let body = serde_json::to_string(&Command::Cancel {
            reason: Some("early".into()),
        })
        .unwrap();
        std::thread::spawn(move || {
            slow.write(async move |c| {
                let tx = c.transaction().await?;
                let row = tx
                    .query_one(
                        "INSERT INTO commands (run_id, created_at, body) VALUES ($1, 0, $2)
                         RETURNING id",
                        &[&run, &body],
                    )
                    .await?;
                inserted.store(true, Ordering::SeqCst);
                while !commit.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                tx.commit().await?;
                Ok(row.get::<_, i64>(0))
            })
            .unwrap()
        })
    };
    while !inserted.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let late = Command::Cancel {
        reason: Some("late".into()),
    };
    let late_id = cli.enqueue_command(&run, &late).unwrap();
    assert_eq!(engine.take_commands(&run).unwrap(), vec![late]);
    commit.store(true, Ordering::SeqCst);
    let early_id = early.join().unwrap();
    assert!(early_id < late_id);
    assert_eq!(
        engine.take_commands(&run).unwrap(),
        vec![Command::Cancel {
            reason: Some("early".into())
        }]
    );
    assert!(engine.take_commands(&run).unwrap().is_empty());
}
