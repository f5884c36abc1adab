//! One transaction covers everything queued; per-run order holds across threads.

use std::sync::Arc;

use rusqlite::Connection;
use trellis_graph::Journal;
use trellis_protocol::RunId;
use trellis_store::prelude::*;

use super::fixtures::{batch, block_on, store};
use super::run_support::{Backdoor, Hold};

/// Takes the database's write lock from outside the store, so its writer queues up.
pub fn hold_write_lock(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

held!(batches_queued_behind_a_commit_share_one_transaction);
fn batches_queued_behind_a_commit_share_one_transaction<S: Backdoor + ?Sized>(
    store: &S,
    hold: Hold<'_>,
) {
    let runs: Vec<RunId> = (0..4).map(|_| RunId::new()).collect();
    let release = hold();
    // Appends return while the writer is held (were one to wait, this would never end).
    let mut commits = Vec::new();
    for i in 0..200u64 {
        let run = &runs[(i % 4) as usize];
        commits.push(store.append(batch(run, i / 4 * 3 + 1, 3)));
    }
    // Everything is queued before the writer can begin its transaction.
    release();
    for c in commits {
        block_on(c).unwrap();
    }
    let stats = store.journal_counters();
    assert_eq!(stats.batches, 200);
    assert_eq!(stats.events, 600);
    assert_eq!((stats.commits, stats.synced_commits), (1, 1), "{stats:?}");
    assert_eq!(stats.largest_group, 200);
    for run in &runs {
        let seqs: Vec<u64> = store.load(run).unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=150).collect::<Vec<_>>());
    }
}

#[test]
fn back_to_back_appends_group_without_help() {
    let (_dir, store) = store();
    let run = RunId::new();
    let commits: Vec<_> = (0..200u64)
        .map(|i| store.append(batch(&run, i * 2 + 1, 2)))
        .collect();
    for c in commits {
        block_on(c).unwrap();
    }
    let stats = store.stats();
    eprintln!("200 back-to-back batches: {stats:?}");
    assert_eq!(stats.batches, 200);
    assert!(stats.commits >= 1 && stats.commits <= stats.batches);
    assert_eq!(store.load(&run).unwrap().len(), 400);
}

#[test]
fn many_threads_many_runs_keep_per_run_order() {
    let (_dir, store) = store();
    let store = Arc::new(store);
    const THREADS: usize = 6;
    const RUNS_PER_THREAD: usize = 4;
    const BATCHES: u64 = 40;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let runs: Vec<RunId> = (0..RUNS_PER_THREAD).map(|_| RunId::new()).collect();
                let mut commits = Vec::new();
                for b in 0..BATCHES {
                    for run in &runs {
                        let n = 1 + (b + t as u64) % 3;
                        let first = commits_len(&commits, run) + 1;
                        commits.push((run.clone(), n, store.append(batch(run, first, n))));
                    }
                    if b % 10 == 0 {
                        std::thread::yield_now();
                    }
                }
                let mut sizes = std::collections::HashMap::new();
                for (run, n, c) in commits {
                    block_on(c).unwrap();
                    *sizes.entry(run).or_insert(0u64) += n;
                }
                sizes
            })
        })
        .collect();
    let mut total_events = 0;
    for h in handles {
        for (run, n) in h.join().unwrap() {
            let seqs: Vec<u64> = store.load(&run).unwrap().iter().map(|e| e.seq).collect();
            assert_eq!(seqs, (1..=n).collect::<Vec<_>>(), "run {run}");
            total_events += n;
        }
    }
    let stats = store.stats();
    eprintln!("{THREADS} threads × {RUNS_PER_THREAD} runs × {BATCHES} batches: {stats:?}");
    assert_eq!(stats.batches, (THREADS * RUNS_PER_THREAD) as u64 * BATCHES);
    assert_eq!(stats.events, total_events);
    assert!(stats.commits <= stats.batches);
}

/// Events already sent for `run` (its next batch starts after them).
fn commits_len(commits: &[(RunId, u64, trellis_graph::Commit)], run: &RunId) -> u64 {
    commits
        .iter()
        .filter(|(r, _, _)| r == run)
        .map(|(_, n, _)| n)
        .sum()
}

#[test]
fn dropping_the_store_commits_what_was_sent() {
    let (dir, store) = store();
    let run = RunId::new();
    let commits: Vec<_> = (0..50u64)
        .map(|i| store.append(batch(&run, i + 1, 1)))
        .collect();
    let path = store.db_path().to_owned();
    drop(store);
    for c in commits {
        block_on(c).unwrap();
    }
    let reopened = trellis_store::SqliteStore::open(&path, Default::default()).unwrap();
    assert_eq!(reopened.load(&run).unwrap().len(), 50);
    drop(dir);
}

#[test]
fn claims_and_releases_commit_without_an_fsync() {
    let (_dir, store) = store();
    let run = RunId::new();
    store.claim(&run).unwrap();
    block_on(store.append(batch(&run, 1, 4))).unwrap();
    store.release(&run);
    wait_released(&store, &run, 3);
    let stats = store.stats();
    assert_eq!((stats.commits, stats.synced_commits), (3, 1), "{stats:?}");

    // A claim waiting for the lock with appends queued behind it: the appends never ride in
    // the claim's unsynced transaction.
    let store = Arc::new(store);
    let lock = hold_write_lock(store.db_path());
    let other = RunId::new();
    let claimer = {
        let (store, other) = (store.clone(), other.clone());
        std::thread::spawn(move || store.claim(&other))
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    let commits: Vec<_> = (0..10u64)
        .map(|i| store.append(batch(&other, i + 1, 1)))
        .collect();
    lock.execute_batch("ROLLBACK").unwrap();
    claimer.join().unwrap().unwrap();
    for c in commits {
        block_on(c).unwrap();
    }
    let after = store.stats();
    assert_eq!(after.batches, 11);
    assert_eq!(after.synced_commits, 2, "{after:?}");
    assert!(after.commits - stats.commits <= 2, "{after:?}");
}

#[test]
fn synchronous_normal_never_asks_for_an_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let opts = trellis_store::StoreOptions {
        synchronous: trellis_store::Synchronous::Normal,
        ..Default::default()
    };
    let store = trellis_store::SqliteStore::open_workspace(dir.path(), opts).unwrap();
    let run = RunId::new();
    store.claim(&run).unwrap();
    block_on(store.append(batch(&run, 1, 2))).unwrap();
    store.release(&run);
    wait_released(&store, &run, 3);
    let stats = store.stats();
    assert_eq!(
        (stats.commits, stats.synced_commits, stats.batches),
        (3, 0, 1),
        "{stats:?}"
    );
    assert_eq!(store.load(&run).unwrap().len(), 2);
}

/// Waits until the queued release of `run` is committed and the writer has counted `commits`
/// transactions (not with `flush`, which may commit on its own and change the count).
fn wait_released(store: &trellis_store::SqliteStore, run: &RunId, commits: u64) {
    let t = std::time::Instant::now();
    while (store.get_run(run.as_str()).unwrap().owner.is_some() || store.stats().commits < commits)
        && t.elapsed() < std::time::Duration::from_secs(5)
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
