//! A live owner keeps its run; a dead owner's claim is taken over.

use std::process::{Child, Command};

use trellis_graph::JournalError;
use trellis_protocol::RunId;
use trellis_store::hostname;

use super::fixtures::{batch, block_on};
use super::run_support::Backdoor;

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

both!(live_owner_refuses_and_dead_owner_is_taken_over);
fn live_owner_refuses_and_dead_owner_is_taken_over<S: Backdoor + ?Sized>(store: &S) {
    // Claims work before the run's first batch exists.
    let run = RunId::new();
    let child = Sleeper::spawn();
    let pid = child.0.id();
    store.claim_as(&run, pid);
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
    assert_eq!(rec.owner, Some(store.me()));
    assert!(rec.owner_alive);
    assert!(rec.heartbeat.unwrap() >= rec.claimed_at.unwrap());

    // Re-claiming our own run is fine; releasing clears it.
    store.claim(&run).unwrap();
    store.release(&run);
    store.flush_writes(); // release is queued, not waited for
    let rec = store.get_run(run.as_str()).unwrap();
    assert!(rec.owner.is_none() && !rec.owner_alive);
}

both!(release_leaves_other_owners_alone_but_break_claim_does_not);
fn release_leaves_other_owners_alone_but_break_claim_does_not<S: Backdoor + ?Sized>(store: &S) {
    let run = RunId::new();
    let child = Sleeper::spawn();
    store.claim_as(&run, child.0.id());
    block_on(store.append(batch(&run, 1, 1))).unwrap();
    store.release(&run);
    store.flush_writes();
    let rec = store.get_run(run.as_str()).unwrap();
    assert_eq!(rec.owner.map(|o| o.pid), Some(child.0.id()));
    assert!(rec.owner_alive);
    store.break_claim(&run).unwrap();
    assert!(store.get_run(run.as_str()).unwrap().owner.is_none());
    store.claim(&run).unwrap();
}

both!(a_new_run_is_claimed_without_waiting);
fn a_new_run_is_claimed_without_waiting<S: Backdoor + ?Sized>(store: &S) {
    let run = RunId::new();
    store.claim_new(&run).unwrap();
    // The claim is queued ahead of the run's first batch.
    block_on(store.append(batch(&run, 1, 2))).unwrap();
    let rec = store.get_run(run.as_str()).unwrap();
    assert_eq!(rec.owner, Some(store.me()));
    assert!(rec.owner_alive);
    assert!(rec.heartbeat.unwrap() >= rec.claimed_at.unwrap());
    store.release(&run);
    store.flush_writes();
    assert!(store.get_run(run.as_str()).unwrap().owner.is_none());
}

/// Leases of runs need PostgreSQL: a SQLite store says so rather than pretending.
#[test]
fn sqlite_leases_say_they_need_postgres() {
    use trellis_store::LeaseStore;
    let (_dir, store) = super::backends::sqlite();
    let run = trellis_protocol::RunId::new();
    let ttl = std::time::Duration::from_secs(1);
    let err = store.claim_lease("w", ttl).unwrap_err();
    assert!(
        matches!(err, trellis_store::Error::LeasesNeedPostgres),
        "{err}"
    );
    assert!(err.to_string().contains("PostgreSQL"), "{err}");
    assert!(store.set_runnable(&run, true).is_err());
    assert!(store.claim_run_lease(&run, "w", ttl).is_err());
    assert!(store.with_workers(&run).is_err());
    assert!(matches!(
        store.claimable_count(),
        Err(trellis_store::Error::LeasesNeedPostgres)
    ));
}
