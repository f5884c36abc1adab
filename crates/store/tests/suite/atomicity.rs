//! A failing batch leaves nothing behind; a failed transaction fails every batch in it.

use std::time::Duration;

use trellis_graph::{Journal, JournalError};
use trellis_protocol::{RunId, RunStatus};
use trellis_store::prelude::*;
use trellis_store::{SqliteStore, StoreOptions};

use super::fixtures::{batch, block_on};
use super::group_commit::hold_write_lock;
use super::run_support::{Backdoor, Hold};

held!(duplicate_seq_rolls_back_summary_and_events_alone);
fn duplicate_seq_rolls_back_summary_and_events_alone<S: Backdoor + ?Sized>(
    store: &S,
    hold: Hold<'_>,
) {
    let a = RunId::new();
    let b = RunId::new();
    block_on(store.append(batch(&a, 1, 3))).unwrap();
    let before = store.get_run(a.as_str()).unwrap();

    // Queue, in one group: a bad batch of `a`, a good batch of `b`, the next batch of `a`.
    let release = hold();
    let mut dup = batch(&a, 1, 5);
    dup.summary.status = RunStatus::Succeeded;
    dup.summary.step = 99;
    let bad = store.append(dup);
    let good = store.append(batch(&b, 1, 2));
    let after_bad = store.append(batch(&a, 6, 1));
    release();

    // The key's uniqueness refused it (SQLite: "UNIQUE constraint failed", PostgreSQL:
    // "duplicate key value violates unique constraint").
    let err = block_on(bad).unwrap_err();
    assert!(
        matches!(&err, JournalError::Backend(m) if m.contains("UNIQUE") || m.contains("duplicate key")),
        "{err}"
    );
    block_on(good).unwrap();
    let err = block_on(after_bad).unwrap_err();
    assert!(err.to_string().contains("earlier batch"), "{err}");

    // The summary upsert of the bad batch was rolled back with its events.
    assert_eq!(store.get_run(a.as_str()).unwrap(), before);
    assert_eq!(store.load(&a).unwrap().len(), 3);
    assert_eq!(store.load(&b).unwrap().len(), 2);
    let stats = store.journal_counters();
    assert_eq!((stats.commits, stats.batches), (2, 2), "{stats:?}");
}

#[test]
fn a_transaction_that_cannot_start_fails_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        busy_timeout: Duration::from_millis(50),
        ..Default::default()
    };
    let store = SqliteStore::open_workspace(dir.path(), opts).unwrap();
    let run = RunId::new();
    let lock = hold_write_lock(store.db_path());
    let commits: Vec<_> = (0..5u64)
        .map(|i| store.append(batch(&run, i + 1, 1)))
        .collect();
    let errors: Vec<String> = commits
        .into_iter()
        .map(|c| block_on(c).unwrap_err().to_string())
        .collect();
    lock.execute_batch("ROLLBACK").unwrap();
    for e in &errors {
        assert!(e.contains("nothing of it was written"), "{e}");
        assert!(e.contains("trellis.db"), "errors name the file: {e}");
    }
    assert!(store.stats().failed_commits >= 1);
    assert_eq!(store.stats().batches, 0);
    assert!(store.load(&run).is_err(), "no row was written");

    // The store keeps working once the lock is gone.
    block_on(store.append(batch(&run, 1, 1))).unwrap();
    assert_eq!(store.load(&run).unwrap().len(), 1);
}
