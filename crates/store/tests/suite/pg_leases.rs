//! Leases of runs for workers (`LeaseStore`) on PostgreSQL: two stores on one database are
//! two workers. One claims a run at a time; an expired lease is taken with a higher token,
//! after which the first worker's renewal answers false and its appends write nothing; a
//! release frees at once; concurrent claimers take each run once; a cut connection keeps the
//! lease until it expires.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use trellis_graph::{Journal, JournalError};
use trellis_protocol::RunId;
use trellis_store::LeaseStore;
use trellis_store::pg::PgStore;

use super::fixtures::{batch, block_on};
use super::pg_support::{cluster, connect, rows};
use super::run_support::hold_lane;

const SHORT: Duration = Duration::from_millis(300);
const LONG: Duration = Duration::from_secs(60);

fn events(store: &PgStore) -> i64 {
    let n = rows(store, "SELECT count(*)::text FROM events");
    n[0][0].parse().unwrap()
}

fn runnable(store: &PgStore, n: usize) -> Vec<RunId> {
    (0..n)
        .map(|_| {
            let run = RunId::new();
            store.set_runnable(&run, true).unwrap();
            // Queued at distinct ms of the server's clock.
            std::thread::sleep(Duration::from_millis(2));
            run
        })
        .collect()
}

#[test]
fn one_worker_claims_a_run_and_another_takes_it_once_expired() {
    let cluster = cluster();
    let db = cluster.database();
    let (a, b) = (connect(&db), connect(&db));
    let run = runnable(&a, 1).remove(0);

    let first = a.claim_lease("a", SHORT).unwrap().unwrap();
    assert_eq!(
        (&first.run, first.worker.as_str(), first.token),
        (&run, "a", 1)
    );
    assert_eq!(
        b.claim_lease("b", SHORT).unwrap(),
        None,
        "held: nothing to claim"
    );
    assert_eq!(b.claim_run_lease(&run, "b", SHORT).unwrap(), None);
    assert!(a.renew_lease(&first, SHORT).unwrap());
    block_on(a.append(batch(&run, 1, 2))).unwrap();
    assert_eq!(events(&a), 1);

    std::thread::sleep(SHORT + Duration::from_millis(100));
    let second = b.claim_lease("b", LONG).unwrap().unwrap();
    assert_eq!((&second.run, second.token), (&run, 2), "a higher token");
    assert!(second.expires_at > first.expires_at);

    // The first worker learns it lost the run, and writes nothing further.
    assert!(!a.renew_lease(&first, SHORT).unwrap());
    let err = block_on(a.append(batch(&run, 3, 2))).unwrap_err();
    assert!(
        matches!(&err, JournalError::LeaseLost { run: r, worker } if r == run.as_str() && worker == "a"),
        "{err}"
    );
    assert_eq!(events(&a), 1, "nothing of the fenced batch was written");
    assert!(!a.release_lease(&first).unwrap(), "not ours any more");

    // The new holder writes on.
    block_on(b.append(batch(&run, 3, 2))).unwrap();
    assert_eq!(events(&b), 2);
}

#[test]
fn the_queue_counts_claimable_runs_and_a_claim_names_the_expired_lease_it_took_over() {
    let cluster = cluster();
    let db = cluster.database();
    let (a, b) = (connect(&db), connect(&db));
    assert_eq!(a.claimable_count().unwrap(), 0, "an empty queue");
    let runs = runnable(&a, 3);
    let parked = RunId::new();
    a.set_runnable(&parked, true).unwrap();
    a.set_runnable(&parked, false).unwrap();
    assert_eq!(
        b.claimable_count().unwrap(),
        3,
        "runnable runs, not the parked one"
    );

    // A free lease is claimed, not taken over; a held one leaves the queue.
    let first = a.claim_lease("a", SHORT).unwrap().unwrap();
    assert_eq!(
        (&first.run, first.taken_over_from.as_deref()),
        (&runs[0], None)
    );
    let long = a.claim_lease("a", LONG).unwrap().unwrap();
    assert_eq!(long.taken_over_from, None);
    assert_eq!(b.claimable_count().unwrap(), 1);

    // Expired: claimable again, and the claim that takes it names whose lease it was.
    std::thread::sleep(SHORT + Duration::from_millis(100));
    assert_eq!(
        b.claimable_count().unwrap(),
        2,
        "an expired lease is claimable"
    );
    let taken = b.claim_lease("b", LONG).unwrap().unwrap();
    assert_eq!(
        (&taken.run, taken.token, taken.taken_over_from.as_deref()),
        (&runs[0], 2, Some("a"))
    );
    let free = b.claim_lease("b", LONG).unwrap().unwrap();
    assert_eq!(
        (&free.run, free.taken_over_from.as_deref()),
        (&runs[2], None)
    );
    assert_eq!(a.claimable_count().unwrap(), 0);

    // A claim of a named run says the same.
    let named = a.claim_run_lease(&parked, "a", SHORT).unwrap().unwrap();
    assert_eq!(named.taken_over_from, None);
    std::thread::sleep(SHORT + Duration::from_millis(100));
    let again = b.claim_run_lease(&parked, "b", LONG).unwrap().unwrap();
    assert_eq!(
        (again.token, again.taken_over_from.as_deref()),
        (named.token + 1, Some("a"))
    );
    // Released, then claimed: free, not a takeover.
    assert!(b.release_lease(&again).unwrap());
    let after = a.claim_run_lease(&parked, "a", LONG).unwrap().unwrap();
    assert_eq!(after.taken_over_from, None);
    let fresh = a
        .claim_run_lease(&RunId::new(), "a", LONG)
        .unwrap()
        .unwrap();
    assert_eq!((fresh.token, fresh.taken_over_from), (1, None));
}

#[test]
fn a_release_frees_the_run_at_once_and_not_runnable_runs_are_not_claimed() {
    let cluster = cluster();
    let db = cluster.database();
    let (a, b) = (connect(&db), connect(&db));
    let run = runnable(&a, 1).remove(0);
    assert!(b.with_workers(&run).unwrap(), "runnable: with the workers");
    let lease = a.claim_lease("a", LONG).unwrap().unwrap();
    assert_eq!(b.claim_lease("b", LONG).unwrap(), None);
    assert!(a.release_lease(&lease).unwrap());
    let taken = b.claim_lease("b", LONG).unwrap().unwrap();
    assert_eq!((&taken.run, taken.token), (&run, 2));
    b.set_runnable(&run, false).unwrap();
    assert!(a.with_workers(&run).unwrap(), "leased: with the workers");
    assert!(b.release_lease(&taken).unwrap());
    assert!(
        !a.with_workers(&run).unwrap(),
        "parked: the workers are done"
    );
    assert!(!a.with_workers(&RunId::new()).unwrap(), "never queued");

    assert_eq!(a.claim_lease("a", LONG).unwrap(), None);
    // A specific run is claimed runnable or not, and a run never seen gets a lease row.
    let named = a.claim_run_lease(&run, "a", LONG).unwrap().unwrap();
    assert_eq!(named.token, 3);
    let fresh = RunId::new();
    let new = b.claim_run_lease(&fresh, "b", LONG).unwrap().unwrap();
    assert_eq!((&new.run, new.token), (&fresh, 1));
    // Oldest runnable first.
    let later = runnable(&a, 3);
    a.set_runnable(&later[0], true).unwrap();
    let claimed: Vec<RunId> = (0..3)
        .map(|_| b.claim_lease("b", LONG).unwrap().unwrap().run)
        .collect();
    assert_eq!(claimed, later);
}

#[test]
fn concurrent_claimers_take_every_run_once() {
    let cluster = cluster();
    let db = cluster.database();
    let stores: Vec<Arc<PgStore>> = (0..3).map(|_| Arc::new(connect(&db))).collect();
    let runs: HashSet<RunId> = runnable(&stores[0], 60).into_iter().collect();
    let start = Arc::new(Barrier::new(12));
    let threads: Vec<_> = (0..12)
        .map(|i| {
            let (store, start) = (stores[i % 3].clone(), start.clone());
            std::thread::spawn(move || {
                let worker = format!("w{i}");
                start.wait();
                let mut mine = Vec::new();
                while let Some(lease) = store.claim_lease(&worker, LONG).unwrap() {
                    mine.push(lease.run);
                }
                mine
            })
        })
        .collect();
    let mut claimed = Vec::new();
    for t in threads {
        claimed.extend(t.join().unwrap());
    }
    assert_eq!(claimed.len(), runs.len(), "each run claimed once");
    assert_eq!(claimed.into_iter().collect::<HashSet<_>>(), runs);
}

#[test]
fn a_cut_connection_keeps_the_lease_until_it_expires() {
    let cluster = cluster();
    let db = cluster.database();
    let (a, b) = (connect(&db), connect(&db));
    let run = runnable(&a, 1).remove(0);
    let lease = a.claim_lease("a", Duration::from_secs(2)).unwrap().unwrap();
    assert!(cluster.terminate_connections(db.name()) >= 2);
    // The stores reconnect; the lease is a row, not a session.
    let mut again = None;
    for _ in 0..100 {
        match b.claim_lease("b", LONG) {
            Ok(claimed) => {
                again = Some(claimed);
                break;
            }
            Err(e) => {
                assert!(e.is_retryable(), "{e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    assert_eq!(again, Some(None), "still held by a");
    let renewed = (0..100).find_map(|_| match a.renew_lease(&lease, LONG) {
        Ok(renewed) => Some(renewed),
        Err(_) => {
            std::thread::sleep(Duration::from_millis(20));
            None
        }
    });
    assert_eq!(renewed, Some(true));
    block_on(a.append(batch(&run, 1, 1))).unwrap();
}

#[test]
fn a_group_fails_the_batches_of_a_lost_lease_and_commits_the_others() {
    let cluster = cluster();
    let db = cluster.database();
    let (a, b) = (Arc::new(connect(&db)), connect(&db));
    let run = runnable(&a, 1).remove(0);
    let first = a.claim_lease("a", SHORT).unwrap().unwrap();
    block_on(a.append(batch(&run, 1, 1))).unwrap();
    let (other, broken) = (RunId::new(), RunId::new());
    block_on(a.append(batch(&broken, 1, 1))).unwrap();
    std::thread::sleep(SHORT + Duration::from_millis(100));
    assert!(b.claim_lease("b", LONG).unwrap().is_some());
    assert_eq!(events(&a), 2);

    // One group: the lost run's batch, a batch that fails (its key exists: the savepoint
    // retry, which locks the leases again) and a good one.
    let release = hold_lane(&a);
    let lost = a.append(batch(&run, 2, 1));
    let failing = a.append(batch(&broken, 1, 1));
    let good = a.append(batch(&other, 1, 1));
    release();
    let err = block_on(lost).unwrap_err();
    assert!(matches!(err, JournalError::LeaseLost { .. }), "{err}");
    assert!(block_on(failing).is_err());
    block_on(good).unwrap();
    assert_eq!(events(&a), 3, "only the good batch was written");
    assert!(!a.renew_lease(&first, SHORT).unwrap());
}

/// An agent's session of a leased run is fenced like the run's journal: once another
/// worker took the lease, the first one's session events are refused whole and nothing of
/// them is written; streams of no leased run (the workspace stream) are not fenced.
#[test]
fn the_sessions_of_a_lost_run_are_fenced_too() {
    use trellis_protocol::{NodeId, ServiceEventBody, SessionEvent, SessionId, StreamId};
    use trellis_store::StreamStore;

    let cluster = cluster();
    let db = cluster.database();
    let (a, b) = (connect(&db), connect(&db));
    let run = runnable(&a, 1).remove(0);
    let session = SessionId::for_node(&run, &NodeId::new("analysis"));
    let note = |seq: u64, text: &str| {
        super::fixtures::session_batch(
            &session,
            seq,
            vec![SessionEvent::Note { text: text.into() }],
        )
    };
    let stream_rows = || {
        rows(&a, "SELECT count(*)::text FROM stream_events")[0][0]
            .parse::<i64>()
            .unwrap()
    };

    let first = a.claim_lease("a", SHORT).unwrap().unwrap();
    block_on(a.append_stream(note(1, "held"))).unwrap();
    assert_eq!(stream_rows(), 1);
    std::thread::sleep(SHORT + Duration::from_millis(100));
    let second = b.claim_lease("b", LONG).unwrap().unwrap();
    assert_eq!(second.token, first.token + 1);

    let err = block_on(a.append_stream(note(2, "too late"))).unwrap_err();
    assert!(
        matches!(&err, JournalError::LeaseLost { run: r, worker } if r == run.as_str() && worker == "a"),
        "{err}"
    );
    assert_eq!(
        stream_rows(),
        1,
        "nothing of the fenced session batch was written"
    );
    let workspace = super::fixtures::sev(
        &StreamId::Workspace,
        1,
        ServiceEventBody::Workspace(trellis_protocol::WorkspaceEvent::OpFailed {
            op: "prune".into(),
            error: "x".into(),
            kind: None,
        }),
    );
    block_on(a.append_stream(vec![workspace])).unwrap();
    // The new holder writes the session on.
    block_on(b.append_stream(note(2, "continued"))).unwrap();
    assert_eq!(stream_rows(), 3);
}
