//! A live owner keeps its run; a dead owner's claim is taken over.

use std::process::{Child, Command};

use rusqlite::{Connection, params};
use trellis_graph::{Journal, JournalError};
use trellis_protocol::RunId;
use trellis_store::prelude::*;
use trellis_store::{SqliteStore, hostname};

use super::fixtures::{batch, block_on, store};

/// Writes a claim as if process `pid` on this host had taken it.
fn claim_as(store: &SqliteStore, run: &RunId, pid: u32) {
    Connection::open(store.db_path())
        .unwrap()
        .execute(
            "INSERT OR REPLACE INTO run_owners (run_id, pid, host, start_time, claimed_at, heartbeat)
             VALUES (?1, ?2, ?3, NULL, 0, 0)",
            params![run.as_str(), pid, hostname()],
        )
        .unwrap();
}

struct Sleeper(Child);

impl Sleeper {
    fn spawn() -> Self {
        Self(Command::new("sleep").arg("30").spawn().unwrap())
    }

    fn kill(mut self) -> u32 {
        let pid = self.0.id();
        self.0.kill().unwrap();
        self.0.wait().unwrap();
        pid
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn live_owner_refuses_and_dead_owner_is_taken_over() {
    let (_dir, store) = store();
    // Claims work before the run's first batch exists.
    let run = RunId::new();
    let child = Sleeper::spawn();
    let pid = child.0.id();
    claim_as(&store, &run, pid);
    match store.claim(&run) {
        Err(JournalError::Busy { run: r, owner }) => {
            assert_eq!(r, run.to_string());
            assert_eq!(owner, format!("{pid}@{}", hostname()));
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    let dead = child.kill();
    assert_eq!(dead, pid);
    store.claim(&run).unwrap();

    block_on(store.append(batch(&run, 1, 1))).unwrap();
    let rec = store.get_run(run.as_str()).unwrap();
    assert_eq!(rec.owner.as_ref(), Some(store.owner()));
    assert!(rec.owner_alive);
    assert!(rec.heartbeat.unwrap() >= rec.claimed_at.unwrap());

    // Re-claiming our own run is fine; releasing clears it.
    store.claim(&run).unwrap();
    store.release(&run);
    store.flush().unwrap(); // release is queued, not waited for
    let rec = store.get_run(run.as_str()).unwrap();
    assert!(rec.owner.is_none() && !rec.owner_alive);
}

#[test]
fn release_leaves_other_owners_alone_but_break_claim_does_not() {
    let (_dir, store) = store();
    let run = RunId::new();
    let child = Sleeper::spawn();
    claim_as(&store, &run, child.0.id());
    block_on(store.append(batch(&run, 1, 1))).unwrap();
    store.release(&run);
    store.flush().unwrap();
    let rec = store.get_run(run.as_str()).unwrap();
    assert_eq!(rec.owner.map(|o| o.pid), Some(child.0.id()));
    assert!(rec.owner_alive);
    store.break_claim(&run).unwrap();
    assert!(store.get_run(run.as_str()).unwrap().owner.is_none());
    store.claim(&run).unwrap();
}
