//! Leases of runs for workers (`trellis worker`, team scale): [`LeaseStore`].
//!
//! A worker claims a **runnable** run with a lease — its name, a token and an expiry — keeps
//! it by renewing it (the heartbeat), and releases it when it stops. A worker killed with
//! SIGKILL stops renewing: once the lease expired, another worker claims the run with a
//! higher token and resumes it from its last recorded turn. Every batch the run journal
//! appends for a run claimed here is **fenced**: its transaction locks the run's lease
//! (`FOR SHARE`) and writes nothing when the token is no longer the one this store claimed
//! with, answering [`trellis_graph::JournalError::LeaseLost`]. A lease that expired but was
//! not taken is still held: fencing guards against a second writer, not against slowness.
//! Fencing is per store: a worker process holds one store, so two workers sharing one store
//! would share its leases.
//!
//! Times are the database's clock (ms since the epoch), never a worker's.
//!
//! # What makes a run runnable
//!
//! An explicit flag of the run's lease row, [`LeaseStore::set_runnable`], not a guess from
//! `runs.status`: a run recorded as `running` may be executing in a live process that takes
//! no leases, and a `waitingInput` run becomes runnable only once its answer is there. Who
//! starts a run, answers its question or resumes it marks it runnable; the worker that
//! finishes it, or stops it waiting for input, marks it not runnable before releasing its
//! lease. A crashed worker's run stays runnable, so the next worker takes it once the lease
//! expired. Runnable runs are claimed oldest first (since they were last marked runnable).
//!
//! # Backends
//!
//! The PostgreSQL backend implements leases (`pg::lease`). The SQLite backend answers
//! [`crate::Error::LeasesNeedPostgres`]: on one machine the claims of `run_owners` already
//! hand a crashed process's runs over (a dead pid frees them), and leases exist for workers
//! on several machines sharing one database. Its schema has the `run_leases` table all the
//! same, so one schema version means the same tables in both backends.

use std::time::Duration;

use trellis_protocol::RunId;

use crate::Result;

/// A run's lease, as its claim answered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run: RunId,
    /// The worker that holds it.
    pub worker: String,
    /// Raised by every claim of the run (from 1): the fence of the holder's writes.
    pub token: i64,
    /// When it expires unless renewed: ms since the epoch, of the database's clock.
    pub expires_at: i64,
    /// The worker whose lease had expired when this claim took it over (a takeover: that
    /// worker died or was cut off); `None` when the lease was free.
    pub taken_over_from: Option<String>,
}

/// Leases of runs: claim, renew, release, and which runs may be claimed.
pub trait LeaseStore {
    /// Whether this backend keeps leases (PostgreSQL); the others answer every call with
    /// [`crate::Error::LeasesNeedPostgres`].
    fn keeps_leases(&self) -> bool {
        true
    }

    /// Marks `run` runnable (a worker may claim it) or not. Marking a run runnable that was
    /// not queues it behind the runs already runnable.
    fn set_runnable(&self, run: &RunId, runnable: bool) -> Result<()>;

    /// Claims, for `worker` and for `ttl`, the oldest runnable run whose lease is free or
    /// expired, raising its token; `None` when there is none. Two workers never claim the
    /// same run at once.
    fn claim_lease(&self, worker: &str, ttl: Duration) -> Result<Option<Lease>>;

    /// Claims `run` for `worker` and for `ttl`, runnable or not, if its lease is free or
    /// expired; `None` when another worker holds it.
    fn claim_run_lease(&self, run: &RunId, worker: &str, ttl: Duration) -> Result<Option<Lease>>;

    /// Extends `lease` to `ttl` from now while its token is still the run's — expired or
    /// not, as long as no other worker claimed it; `false` when another worker took it (the
    /// run must stop: its appends fail with [`trellis_graph::JournalError::LeaseLost`]).
    fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<bool>;

    /// Frees `lease` at once, if it is still ours (`false` otherwise). The run stays
    /// runnable or not as it was.
    fn release_lease(&self, lease: &Lease) -> Result<bool>;

    /// How many runs a worker could claim now: runnable, their lease free or expired (the
    /// workers' queue depth; a count over the runnable runs' index).
    fn claimable_count(&self) -> Result<u64>;

    /// Whether `run` is with the workers: runnable (queued for a claim) or held by a lease
    /// (executing, or its holder died and the lease has not been taken over yet). `false`
    /// once a worker finished it or parked it waiting for input — what a process that handed
    /// the run over waits for before it reads where the run stands.
    fn with_workers(&self, run: &RunId) -> Result<bool>;
}

impl LeaseStore for crate::SqliteStore {
    fn keeps_leases(&self) -> bool {
        false
    }

    fn set_runnable(&self, _run: &RunId, _runnable: bool) -> Result<()> {
        Err(crate::Error::LeasesNeedPostgres)
    }

    fn claim_lease(&self, _worker: &str, _ttl: Duration) -> Result<Option<Lease>> {
        Err(crate::Error::LeasesNeedPostgres)
    }

    fn claim_run_lease(
        &self,
        _run: &RunId,
        _worker: &str,
        _ttl: Duration,
    ) -> Result<Option<Lease>> {
        Err(crate::Error::LeasesNeedPostgres)
    }

    fn renew_lease(&self, _lease: &Lease, _ttl: Duration) -> Result<bool> {
        Err(crate::Error::LeasesNeedPostgres)
    }

    fn release_lease(&self, _lease: &Lease) -> Result<bool> {
        Err(crate::Error::LeasesNeedPostgres)
    }

    fn claimable_count(&self) -> Result<u64> {
        Err(crate::Error::LeasesNeedPostgres)
    }

    fn with_workers(&self, _run: &RunId) -> Result<bool> {
        Err(crate::Error::LeasesNeedPostgres)
    }
}
