//! A worker (`trellis worker`, team scale): claims the runnable runs of a shared PostgreSQL
//! store with a lease, executes them in this service, keeps its leases with a heartbeat, and
//! hands each run back when it stops here.
//!
//! - **Claim.** While it runs fewer than [`WorkerOptions::runs`], the worker claims the
//!   oldest runnable run whose lease is free or expired ([`LeaseStore::claim_lease`]). The
//!   commands queued for the run (an answer, a message, a cancellation sent to any server)
//!   are taken from its inbox and the run resumes here from its last recorded turn
//!   ([`Service::resume_here`]): completed nodes never run again, and an agent that was cut
//!   off mid-turn continues from its recorded turns. A run with nothing to do (it ended, or
//!   waits for an answer that has not come) is parked: marked not runnable. A claim that
//!   took over another worker's expired lease is reported ([`WorkerEvent::TookOver`]), and
//!   after claiming the worker reports how many runs still wait for a worker
//!   ([`WorkerEvent::Queue`]: none when its last claim found nothing, else the store's count).
//! - **Heartbeat.** Every third of the lease the worker renews every lease it holds. A lease
//!   another worker has taken (this one was cut off for longer than the lease) stops the run
//!   here at once; fencing already refuses its writes
//!   ([`trellis_graph::JournalError::LeaseLost`]), so nothing is written twice.
//! - **Hand back.** When a run stops executing here, a run that still runs (stopped by a
//!   drain or a lost lease) stays runnable for the next worker; one that ended or waits for
//!   input is parked — and marked runnable again when commands arrived meanwhile (a server
//!   queues a command before it marks the run runnable, so no command is missed). The lease
//!   is released.
//! - **Drain.** When `stop` is cancelled the worker claims nothing more and waits for its
//!   runs up to [`WorkerOptions::drain`]; the runs still executing then are stopped where
//!   they are (resumable) and handed back to the other workers at once.
//!
//! A worker killed with SIGKILL renews nothing: its leases expire and other workers claim
//! its runs (their `run_owners` claim by a dead or unreachable process is broken first).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use trellis_protocol::{Command, InputMode, RunId, RunStatus, SubmissionId};
use trellis_store::Lease;

use super::{OpError, Service, blocking, lock};

/// A worker's settings.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The worker's name, recorded as the owner of its leases (unique among the workers).
    pub name: String,
    /// At most this many runs execute here at once.
    pub runs: usize,
    /// How long a lease lasts unless renewed: how long a dead worker's runs wait before
    /// another worker takes them.
    pub lease: Duration,
    /// How often the worker looks for runnable runs.
    pub poll: Duration,
    /// How long a graceful stop waits for the runs executing here.
    pub drain: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            name: format!("{}-{}", trellis_store::hostname(), std::process::id()),
            runs: 4,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(250),
            drain: Duration::from_secs(600),
        }
    }
}

/// What a worker did, as it happens (for its terminal or log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerEvent {
    /// The worker claimed `run` and resumed it here (`token` is its lease's fence).
    Resumed {
        /// The run.
        run: RunId,
        /// The lease's token.
        token: i64,
        /// Commands from the run's inbox applied first.
        commands: usize,
    },
    /// The claim of `run` took over the expired lease of worker `from` (which died or was
    /// cut off for longer than the lease); reported before the run is resumed or parked.
    TookOver {
        /// The run.
        run: RunId,
        /// The worker whose lease it was.
        from: String,
    },
    /// How many runs wait for a worker (runnable, their lease free or expired), as this
    /// worker saw them after its claims: a sample for the metrics, not a line to show.
    Queue {
        /// The runs.
        runnable: u64,
    },
    /// A claimed run had nothing to do (it ended, or waits for input): parked.
    Parked {
        /// The run.
        run: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// A run stopped executing here and was handed back.
    HandedBack {
        /// The run.
        run: RunId,
        /// Its stored status (`running`: another worker continues it).
        status: RunStatus,
    },
    /// Another worker took the lease of `run` (this one was cut off): the run stopped here.
    LeaseLost {
        /// The run.
        run: RunId,
    },
    /// Something failed; the worker goes on.
    Error {
        /// The run concerned, if any.
        run: Option<RunId>,
        /// What failed.
        message: String,
    },
    /// A graceful stop began: no more claims; `runs` still execute here.
    Draining {
        /// The runs executing here.
        runs: usize,
    },
    /// The drain's time ran out: the runs still executing were stopped and handed back.
    DrainTimedOut {
        /// How many.
        runs: usize,
    },
}

impl std::fmt::Display for WorkerEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Resumed {
                run,
                token,
                commands,
            } => write!(
                f,
                "run {run}: claimed (lease token {token}), resumed with {commands} queued command(s)"
            ),
            Self::TookOver { run, from } => {
                write!(f, "run {run}: took over the expired lease of worker {from}")
            }
            Self::Queue { runnable } => write!(f, "{runnable} run(s) wait for a worker"),
            Self::Parked { run, status } => {
                write!(f, "run {run}: {status}, nothing to do: parked")
            }
            Self::HandedBack { run, status } => write!(f, "run {run}: stopped here ({status})"),
            Self::LeaseLost { run } => write!(
                f,
                "run {run}: another worker took its lease (this worker was cut off); stopped here"
            ),
            Self::Error {
                run: Some(run),
                message,
            } => write!(f, "run {run}: {message}"),
            Self::Error { run: None, message } => f.write_str(message),
            Self::Draining { runs } => write!(
                f,
                "stopping: no new runs; waiting for {runs} run(s) executing here"
            ),
            Self::DrainTimedOut { runs } => write!(
                f,
                "drain time is up: {runs} run(s) stopped where they are, for other workers to continue"
            ),
        }
    }
}

type Report<'a> = &'a (dyn Fn(WorkerEvent) + Send + Sync);

/// Waits for the store's next notification: whether it may mean a runnable run (never
/// returns without notifications).
async fn runnable(wake: &mut Option<tokio::sync::broadcast::Receiver<Arc<str>>>) -> bool {
    use tokio::sync::broadcast::error::RecvError;
    match wake {
        Some(rx) => match rx.recv().await {
            Ok(n) => matches!(
                trellis_store::Notice::parse(&n),
                Some(trellis_store::Notice::Runnable | trellis_store::Notice::Missed)
            ),
            Err(RecvError::Lagged(_)) => true,
            Err(RecvError::Closed) => {
                *wake = None;
                false
            }
        },
        None => std::future::pending().await,
    }
}

impl Service {
    /// Works as a worker until `stop` is cancelled and the drain is over — at the latest
    /// [`WorkerOptions::drain`] later, or as soon as `now` is cancelled (see the module's
    /// documentation). Fails at once when the store keeps no leases (SQLite: one machine
    /// needs no workers); later failures are reported and the worker goes on.
    pub async fn work(
        self: &Arc<Self>,
        options: WorkerOptions,
        stop: CancellationToken,
        now: CancellationToken,
        report: Report<'_>,
    ) -> Result<(), OpError> {
        if !self.runtime.store().keeps_leases() {
            return Err(trellis_store::Error::LeasesNeedPostgres.into());
        }
        // Woken at once when a run is marked runnable anywhere (else at the next poll).
        let mut wake = self.runtime.store().watch();
        let mut held: HashMap<RunId, Lease> = HashMap::new();
        let renew_every = options.lease / 3;
        let mut renew_at = Instant::now() + renew_every;
        let mut draining: Option<Instant> = None;
        loop {
            self.hand_back_stopped(&mut held, report).await;
            if Instant::now() >= renew_at {
                self.renew(&mut held, options.lease, report).await;
                renew_at = Instant::now() + renew_every;
            }
            if stop.is_cancelled() {
                let since = *draining.get_or_insert_with(|| {
                    report(WorkerEvent::Draining { runs: held.len() });
                    Instant::now()
                });
                if held.is_empty() {
                    break;
                }
                if since.elapsed() >= options.drain || now.is_cancelled() {
                    report(WorkerEvent::DrainTimedOut { runs: held.len() });
                    let stopping: Vec<_> = {
                        let runs = lock(&self.runs);
                        held.keys()
                            .filter_map(|run| runs.get(run))
                            .map(|r| {
                                r.stop();
                                r.done.clone()
                            })
                            .collect()
                    };
                    for mut done in stopping {
                        let _ = done.wait_for(|d| *d).await;
                    }
                    self.hand_back_stopped(&mut held, report).await;
                    break;
                }
            } else {
                let emptied = self.claim_more(&mut held, &options, report).await;
                self.sample_queue(emptied, report).await;
            }
            // Never past the next heartbeat, however long the poll.
            let wait = options
                .poll
                .min(renew_at.saturating_duration_since(Instant::now()));
            let sleep = tokio::time::sleep(wait);
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    () = &mut sleep => break,
                    () = stop.cancelled(), if draining.is_none() => break,
                    () = now.cancelled(), if draining.is_some() => break,
                    n = runnable(&mut wake) => {
                        if n && draining.is_none() && held.len() < options.runs {
                            break;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Claims runnable runs while fewer than `options.runs` execute here; whether the last
    /// claim found nothing to claim.
    async fn claim_more(
        self: &Arc<Self>,
        held: &mut HashMap<RunId, Lease>,
        options: &WorkerOptions,
        report: Report<'_>,
    ) -> bool {
        while held.len() < options.runs {
            let store = self.runtime.store().clone();
            let (name, ttl) = (options.name.clone(), options.lease);
            let lease = match blocking(move || Ok(store.claim_lease(&name, ttl)?)).await {
                Ok(Some(lease)) => lease,
                Ok(None) => return true,
                Err(e) => {
                    report(WorkerEvent::Error {
                        run: None,
                        message: format!("claiming a run: {}", e.message),
                    });
                    return false;
                }
            };
            let run = lease.run.clone();
            if let Some(from) = &lease.taken_over_from
                && *from != options.name
            {
                report(WorkerEvent::TookOver {
                    run: run.clone(),
                    from: from.clone(),
                });
            }
            match self.take_up(&lease).await {
                Ok(Some(commands)) => {
                    report(WorkerEvent::Resumed {
                        run: run.clone(),
                        token: lease.token,
                        commands,
                    });
                    held.insert(run, lease);
                }
                Ok(None) => {}
                Err(e) => report(WorkerEvent::Error {
                    run: Some(run),
                    message: e.message,
                }),
            }
        }
        false
    }

    /// Reports the queue depth after a round of claims: none left when the last claim found
    /// nothing (`emptied`), else the store's count (this worker is full, or a claim failed).
    /// A failed count is not reported: the next round samples again.
    async fn sample_queue(&self, emptied: bool, report: Report<'_>) {
        let runnable = if emptied {
            0
        } else {
            let store = self.runtime.store().clone();
            match blocking(move || Ok(store.claimable_count()?)).await {
                Ok(n) => n,
                Err(_) => return,
            }
        };
        report(WorkerEvent::Queue { runnable });
    }

    /// Resumes a claimed run here with the commands of its inbox (how many, answered), or
    /// parks it and releases its lease when it has nothing to do (`None`). A run that
    /// cannot resume is parked with its commands queued again, and the error answered.
    async fn take_up(self: &Arc<Self>, lease: &Lease) -> Result<Option<usize>, OpError> {
        let store = self.runtime.store().clone();
        let run = lease.run.clone();
        let (rec, commands) = blocking(move || {
            let rec = store.get_run(run.as_str())?;
            let commands = store
                .take_commands(&run)
                .map_err(|e| OpError::internal(format!("run {run}: reading its inbox: {e}")))?;
            Ok((rec, commands))
        })
        .await?;
        let status = rec.summary.status;
        let revise = commands.iter().any(|c| matches!(c, Command::Revise { .. }));
        let idle = (status.is_final() && !revise)
            || (status == RunStatus::WaitingInput && commands.is_empty());
        if idle {
            self.park(lease, Vec::new()).await?;
            return Ok(None);
        }
        let n = commands.len();
        let resumed = async {
            if rec.owner.is_some() {
                // The lease is the authority among workers: the previous holder's claim
                // (a dead process, or one on another host whose lease expired) goes.
                let (store, run) = (self.runtime.store().clone(), lease.run.clone());
                blocking(move || Ok(store.break_claim(&run)?)).await?;
            }
            let sub = SubmissionId::new();
            self.resume_here(&sub, &lease.run, commands.clone(), InputMode::Interrupts)
                .await
        }
        .await;
        match resumed {
            Ok(()) => Ok(Some(n)),
            Err(e) => {
                self.park(lease, commands).await?;
                Err(OpError::of(
                    e.kind,
                    format!("could not resume (parked): {}", e.message),
                ))
            }
        }
    }

    /// Marks the leased run not runnable (queuing `requeue` again first), runnable again if
    /// commands are waiting, and releases the lease.
    async fn park(&self, lease: &Lease, requeue: Vec<Command>) -> Result<(), OpError> {
        let store = self.runtime.store().clone();
        let lease = lease.clone();
        blocking(move || {
            for c in &requeue {
                store.enqueue_command(&lease.run, c)?;
            }
            store.set_runnable(&lease.run, false)?;
            // A server queues its command, then marks the run runnable: a command that came
            // after the claim took the inbox is seen here, or its server's mark comes later.
            if requeue.is_empty() && store.has_commands(&lease.run)? {
                store.set_runnable(&lease.run, true)?;
            }
            store.release_lease(&lease)?;
            Ok(())
        })
        .await
    }

    /// Hands back every held run that no longer executes here.
    async fn hand_back_stopped(&self, held: &mut HashMap<RunId, Lease>, report: Report<'_>) {
        let stopped: Vec<RunId> = held
            .keys()
            .filter(|run| !self.is_live(run))
            .cloned()
            .collect();
        for run in stopped {
            let Some(lease) = held.remove(&run) else {
                continue;
            };
            let store = self.runtime.store().clone();
            let id = run.clone();
            let status = match blocking(move || Ok(store.get_run(id.as_str())?)).await {
                Ok(rec) => rec.summary.status,
                Err(e) => {
                    report(WorkerEvent::Error {
                        run: Some(run),
                        message: format!("reading it after it stopped: {}", e.message),
                    });
                    // Its lease expires; another worker looks at it then.
                    continue;
                }
            };
            let result = if status == RunStatus::Running {
                // Stopped mid-way (a drain, a lost lease): it stays runnable.
                let store = self.runtime.store().clone();
                let lease = lease.clone();
                blocking(move || Ok(store.release_lease(&lease).map(|_| ())?)).await
            } else {
                self.park(&lease, Vec::new()).await
            };
            match result {
                Ok(()) => report(WorkerEvent::HandedBack { run, status }),
                Err(e) => report(WorkerEvent::Error {
                    run: Some(run),
                    message: format!("handing it back: {}", e.message),
                }),
            }
        }
    }

    /// Renews every held lease; a run whose lease another worker took stops here.
    async fn renew(&self, held: &mut HashMap<RunId, Lease>, ttl: Duration, report: Report<'_>) {
        let leases: Vec<Lease> = held.values().cloned().collect();
        for lease in leases {
            let store = self.runtime.store().clone();
            let l = lease.clone();
            match blocking(move || Ok(store.renew_lease(&l, ttl)?)).await {
                Ok(true) => {}
                Ok(false) => {
                    if let Some(r) = lock(&self.runs).get(&lease.run) {
                        r.stop_quietly();
                    }
                    held.remove(&lease.run);
                    report(WorkerEvent::LeaseLost { run: lease.run });
                }
                // Not fatal: the next heartbeat tries again; if the lease expires meanwhile
                // and another worker takes it, fencing stops this run's writes.
                Err(e) => report(WorkerEvent::Error {
                    run: Some(lease.run),
                    message: format!("renewing its lease: {}", e.message),
                }),
            }
        }
    }
}
