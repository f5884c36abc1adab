//! The persistence seam: where a run's events go before they are published.
//!
//! The engine hands the journal one [`Batch`] at a time — the events produced since the
//! previous flush plus a [`RunSummary`] — and publishes those events to subscribers only after
//! the returned [`Commit`] resolves. A journal must make each batch durable atomically
//! (all events of the batch or none), in submission order per run.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use trellis_protocol::{Command, Event, RunId};

/// Errors raised by a journal implementation.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The run is not in the journal.
    #[error("run {0} not found")]
    RunNotFound(String),
    /// Another live process owns the run.
    #[error("run {run} is owned by live process {owner}; stop it or wait for it to finish")]
    Busy {
        /// The run.
        run: String,
        /// Who holds it (`pid@host`).
        owner: String,
    },
    /// The backend failed.
    #[error("journal backend error: {0}")]
    Backend(String),
    /// The journal was shut down before the batch was committed.
    #[error("journal closed before the batch was committed")]
    Closed,
    /// The batch's run was claimed with a lease that another worker has taken since (it
    /// expired): the batch wrote nothing, and the run must stop here.
    #[error(
        "run {run}: the lease of worker {worker} was taken by another worker; \
         the batch was not written and the run must stop here"
    )]
    LeaseLost {
        /// The run.
        run: String,
        /// The worker whose lease was taken.
        worker: String,
    },
}

/// How long the engine waits for commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Pipelined (default): the engine keeps executing while earlier batches commit; events are
    /// published only once committed and a run reports its end only after its last commit. A
    /// crash can lose the steps after the last commit; they run again on resume.
    #[default]
    Async,
    /// The engine waits for each step's commit before starting the next step, so a successor's
    /// handler never starts before its predecessor's completion is durable.
    Sync,
}

pub use trellis_protocol::records::RunSummary;

/// One atomic append.
#[derive(Clone, Debug)]
pub struct Batch {
    /// The run.
    pub run: RunId,
    /// Events in seq order, contiguous with the previous batch of this run.
    pub events: Arc<Vec<Event>>,
    /// The run's summary after these events.
    pub summary: RunSummary,
}

/// Resolves when a batch is durable (or failed to be).
#[must_use = "a commit must be awaited (or dropped knowingly) to learn whether the batch is durable"]
pub struct Commit(CommitInner);

enum CommitInner {
    Done(Option<Result<(), JournalError>>),
    Pending(oneshot::Receiver<Result<(), JournalError>>),
}

impl Commit {
    /// An already-durable commit (in-memory journals).
    pub fn done(result: Result<(), JournalError>) -> Self {
        Self(CommitInner::Done(Some(result)))
    }

    /// A commit completed later through the returned sender.
    pub fn pending() -> (oneshot::Sender<Result<(), JournalError>>, Self) {
        let (tx, rx) = oneshot::channel();
        (tx, Self(CommitInner::Pending(rx)))
    }
}

impl Future for Commit {
    type Output = Result<(), JournalError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            CommitInner::Done(r) => Poll::Ready(r.take().unwrap_or(Err(JournalError::Closed))),
            CommitInner::Pending(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(JournalError::Closed))),
        }
    }
}

/// Where runs are recorded. Implemented by `trellis-store` (SQLite) and by the in-memory
/// journals below.
pub trait Journal: Send + Sync + 'static {
    /// Appends a batch atomically. Batches of one run arrive in seq order.
    fn append(&self, batch: Batch) -> Commit;

    /// Every event of `run` in seq order (only the run's own events: a forked run's log starts
    /// with a `runStarted` naming its parent, which the engine loads separately).
    fn load(&self, run: &RunId) -> Result<Vec<Event>, JournalError>;

    /// Marks `run` as owned by this process while it executes. Fails with
    /// [`JournalError::Busy`] when another live process owns it.
    fn claim(&self, _run: &RunId) -> Result<(), JournalError> {
        Ok(())
    }

    /// Claims a run id created a moment ago by this process (no other process can hold it), so
    /// a backend may record the claim without waiting for it. Defaults to [`Journal::claim`].
    fn claim_new(&self, run: &RunId) -> Result<(), JournalError> {
        self.claim(run)
    }

    /// Releases the claim taken by [`Journal::claim`].
    fn release(&self, _run: &RunId) {}

    /// Removes and returns commands queued for `run` by other processes (the command inbox).
    fn take_commands(&self, _run: &RunId) -> Result<Vec<Command>, JournalError> {
        Ok(Vec::new())
    }

    /// Whether [`Journal::take_commands`] can ever return something (the engine polls it
    /// only then).
    fn has_inbox(&self) -> bool {
        false
    }

    /// A signal that fires when another process queued commands for `run`, so that the
    /// engine takes them at once rather than at its next poll of the inbox; `None` (the
    /// default): the inbox is only polled.
    fn inbox_signal(&self, _run: &RunId) -> Option<Arc<tokio::sync::Notify>> {
        None
    }
}

/// Keeps every event in memory (the analogue of LangGraph's `InMemorySaver`): runs can be
/// resumed and forked within the process.
#[derive(Default)]
pub struct MemoryJournal {
    /// Each run's batches, shared with the engine (no event is copied on append).
    runs: Mutex<HashMap<RunId, Vec<Arc<Vec<Event>>>>>,
    batch_ends: Mutex<HashMap<RunId, Vec<u64>>>,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    /// The seq of the last event of every batch appended for `run`: the points where a crash
    /// can leave the log.
    pub fn batch_ends(&self, run: &RunId) -> Vec<u64> {
        self.batch_ends
            .lock()
            .map(|b| b.get(run).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// A journal holding `events` as the log of their run (tests use it to simulate a crash).
    pub fn with_log(events: Vec<Event>) -> Self {
        let j = Self::new();
        if let (Some(first), Ok(mut runs)) = (events.first(), j.runs.lock()) {
            runs.insert(first.run.clone(), vec![Arc::new(events)]);
        }
        j
    }
}

impl Journal for MemoryJournal {
    fn append(&self, batch: Batch) -> Commit {
        match self.runs.lock() {
            Ok(mut runs) => {
                if let (Some(last), Ok(mut ends)) = (batch.events.last(), self.batch_ends.lock()) {
                    ends.entry(batch.run.clone()).or_default().push(last.seq);
                }
                runs.entry(batch.run).or_default().push(batch.events);
                Commit::done(Ok(()))
            }
            Err(_) => Commit::done(Err(JournalError::Backend("memory journal poisoned".into()))),
        }
    }

    fn load(&self, run: &RunId) -> Result<Vec<Event>, JournalError> {
        let runs = self
            .runs
            .lock()
            .map_err(|_| JournalError::Backend("memory journal poisoned".into()))?;
        runs.get(run)
            .map(|batches| batches.iter().flat_map(|b| b.iter().cloned()).collect())
            .ok_or_else(|| JournalError::RunNotFound(run.to_string()))
    }
}

/// Records nothing (no checkpointer): runs cannot be resumed.
#[derive(Default)]
pub struct NullJournal;

impl Journal for NullJournal {
    fn append(&self, _batch: Batch) -> Commit {
        Commit::done(Ok(()))
    }

    fn load(&self, run: &RunId) -> Result<Vec<Event>, JournalError> {
        Err(JournalError::RunNotFound(run.to_string()))
    }
}
