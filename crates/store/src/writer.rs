//! The writer thread: the only code that writes to the database from this process.
//!
//! It blocks for one message, drains whatever else is already queued, applies all of it in
//! one `BEGIN IMMEDIATE` transaction — draining once more right before `COMMIT`, to take in
//! what arrived while it worked — and only then answers every message. That is group commit:
//! while one transaction's fsync runs, the next group queues up, so one fsync covers many
//! steps of many runs.
//!
//! Each message runs inside its own savepoint: a failing batch (say, a duplicate seq) is
//! rolled back alone and answered with its error, while the rest of the group commits. Later
//! batches of that run in the same group are refused too, so a run's log never gets a hole.
//! Service stream batches need no such list: each of their events must follow its stream's
//! last stored seq, so a batch behind a failed one fails that check.
//! If `BEGIN` or `COMMIT` fails, every message of the group gets the error.
//!
//! Only appends (of runs and of service streams), records and enqueued commands need to survive power loss. Claims, releases and
//! command takes do not: after a power loss every process that held a claim is dead (so its
//! claims are stale and taken over whether or not they were written), and a take that is lost
//! re-delivers the command — which the engine had not durably acted on, or its later append
//! would have synced the take too (the WAL is sequential). So under [`Synchronous::Full`] a
//! group made only of those commits with `synchronous = NORMAL`, without an fsync, and the
//! pre-commit drain stops at the first message that needs one (it starts the next group).
//! A run then costs one fsync per committed batch, not three.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};

use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::oneshot;
use trellis_graph::JournalError;
use trellis_protocol::{Command, RunId};

use crate::error::{Error, Result};
use crate::ops;
use crate::streams;
use crate::{Msg, Record, Synchronous};
use crate::{artifacts, client_sessions, dag_checkpoints, review, toolgraph, usage};
use trellis_protocol::records::Owner;

/// The most messages one transaction takes, so a flood cannot delay acks unboundedly.
const MAX_GROUP: usize = 4096;

impl Msg {
    /// Whether the message's effect must survive power loss (see the module docs).
    fn needs_sync(&self) -> bool {
        matches!(
            self,
            Msg::Append(..) | Msg::Stream(..) | Msg::Enqueue(..) | Msg::Record(..)
        )
    }
}

/// Counters shared with [`crate::Backend::stats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) synced_commits: AtomicU64,
    pub(crate) failed_commits: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) events: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) largest_group: AtomicU64,
    pub(crate) stream_batches: AtomicU64,
    pub(crate) stream_events: AtomicU64,
}

impl Counters {
    /// The counters now, as the store reports them.
    pub(crate) fn stats(&self) -> crate::StoreStats {
        crate::StoreStats {
            commits: self.commits.load(Ordering::Relaxed),
            synced_commits: self.synced_commits.load(Ordering::Relaxed),
            failed_commits: self.failed_commits.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            events: self.events.load(Ordering::Relaxed),
            bytes_written: self.bytes.load(Ordering::Relaxed),
            largest_group: self.largest_group.load(Ordering::Relaxed),
            stream_batches: self.stream_batches.load(Ordering::Relaxed),
            stream_events: self.stream_events.load(Ordering::Relaxed),
        }
    }
}

/// A message's answer, held until the group's fate is known.
enum Ack {
    Commit(
        oneshot::Sender<Result<(), JournalError>>,
        Result<(), JournalError>,
    ),
    Claim(Sender<Result<(), JournalError>>, Result<(), JournalError>),
    Unit(Sender<Result<()>>, Result<()>),
    Id(Sender<Result<i64>>, Result<i64>),
    Commands(Sender<Result<Vec<Command>>>, Result<Vec<Command>>),
}

impl Ack {
    /// Sends the answer, replaced by `failure` when the transaction did not commit.
    fn send(self, failure: Option<&dyn Fn() -> Error>) {
        // A dropped receiver means the caller stopped waiting; nothing to do.
        match self {
            Ack::Commit(tx, r) => drop(tx.send(override_ok(r, failure.map(|f| f().into())))),
            Ack::Claim(tx, r) => drop(tx.send(override_ok(r, failure.map(|f| f().into())))),
            Ack::Unit(tx, r) => drop(tx.send(override_ok(r, failure.map(|f| f())))),
            Ack::Id(tx, r) => drop(tx.send(override_ok(r, failure.map(|f| f())))),
            Ack::Commands(tx, r) => drop(tx.send(override_ok(r, failure.map(|f| f())))),
        }
    }
}

fn override_ok<T, E>(r: Result<T, E>, failure: Option<E>) -> Result<T, E> {
    match (r, failure) {
        (Ok(_), Some(e)) => Err(e),
        (r, _) => r,
    }
}

/// What the successful batches of a group add to the counters.
#[derive(Default)]
struct Tally {
    batches: u64,
    events: u64,
    bytes: u64,
    stream_batches: u64,
    stream_events: u64,
}

pub(crate) struct Writer {
    pub(crate) conn: Connection,
    pub(crate) rx: Receiver<Msg>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) path: PathBuf,
    pub(crate) me: Owner,
    /// The configured level.
    pub(crate) synchronous: Synchronous,
    /// The level currently set on the connection.
    pub(crate) current: Synchronous,
}

impl Writer {
    /// Serves messages until every sender is dropped, then returns (after committing all).
    pub(crate) fn run(mut self) {
        let mut stash: Option<Msg> = None;
        loop {
            let first = match stash.take() {
                Some(m) => m,
                None => match self.rx.recv() {
                    Ok(m) => m,
                    Err(_) => return,
                },
            };
            if let Msg::Vacuum(reply) = first {
                drop(reply.send(self.vacuum()));
                continue;
            }
            self.group(first, &mut stash);
        }
    }

    fn vacuum(&mut self) -> Result<()> {
        self.conn
            .execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(|source| Error::Sqlite {
                path: self.path.clone(),
                source,
            })
    }

    /// Applies `first` and everything queued behind it in one transaction.
    fn group(&mut self, first: Msg, stash: &mut Option<Msg>) {
        let mut msgs = vec![first];
        drain(&self.rx, &mut msgs, stash, MAX_GROUP, |_| true);
        let path = self.path.clone();
        let strict = self.synchronous == Synchronous::Full;
        let synced = strict && msgs.iter().any(Msg::needs_sync);
        let accept = |m: &Msg| !strict || synced || !m.needs_sync();
        let level = if synced {
            Synchronous::Full
        } else {
            Synchronous::Normal
        };
        let level = if strict { level } else { self.synchronous };
        if self.current != level {
            // `synchronous` cannot change inside a transaction, hence the choice up front.
            if let Err(e) = self.conn.pragma_update(None, "synchronous", level.pragma()) {
                self.counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                let fail = tx_failed(&path, &e);
                for m in msgs {
                    apply_failed(m).send(Some(&fail));
                }
                return;
            }
            self.current = level;
        }
        let mut tx = match self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
        {
            Ok(tx) => tx,
            Err(e) => {
                self.counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                let fail = tx_failed(&path, &e);
                for m in msgs {
                    apply_failed(m).send(Some(&fail));
                }
                return;
            }
        };

        let mut acks = Vec::with_capacity(msgs.len());
        let mut failed_runs = HashSet::new();
        let mut tally = Tally::default();
        loop {
            for m in msgs.drain(..) {
                acks.push(apply(
                    &mut tx,
                    m,
                    &self.me,
                    &path,
                    &mut failed_runs,
                    &mut tally,
                ));
            }
            if stash.is_some() || acks.len() >= MAX_GROUP {
                break;
            }
            drain(&self.rx, &mut msgs, stash, MAX_GROUP - acks.len(), accept);
            if msgs.is_empty() {
                break;
            }
        }

        match tx.commit() {
            Ok(()) => {
                let c = &self.counters;
                c.commits.fetch_add(1, Ordering::Relaxed);
                if synced {
                    c.synced_commits.fetch_add(1, Ordering::Relaxed);
                }
                c.batches.fetch_add(tally.batches, Ordering::Relaxed);
                c.events.fetch_add(tally.events, Ordering::Relaxed);
                c.bytes.fetch_add(tally.bytes, Ordering::Relaxed);
                c.stream_batches
                    .fetch_add(tally.stream_batches, Ordering::Relaxed);
                c.stream_events
                    .fetch_add(tally.stream_events, Ordering::Relaxed);
                c.largest_group
                    .fetch_max(acks.len() as u64, Ordering::Relaxed);
                for ack in acks {
                    ack.send(None);
                }
            }
            Err(e) => {
                // The transaction is rolled back when `commit` fails and `tx` is dropped.
                self.counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                let fail = tx_failed(&path, &e);
                for ack in acks {
                    ack.send(Some(&fail));
                }
            }
        }
    }
}

/// Moves queued messages into `msgs` (at most `room`), stopping before a `Vacuum` or a
/// message `accept` refuses, which is parked in `stash` to start the next group.
fn drain(
    rx: &Receiver<Msg>,
    msgs: &mut Vec<Msg>,
    stash: &mut Option<Msg>,
    room: usize,
    accept: impl Fn(&Msg) -> bool,
) {
    while stash.is_none() && msgs.len() < room {
        match rx.try_recv() {
            Ok(m) if matches!(m, Msg::Vacuum(_)) || !accept(&m) => *stash = Some(m),
            Ok(m) => msgs.push(m),
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
        }
    }
}

/// The ack of a message that never ran (its transaction could not start).
fn apply_failed(m: Msg) -> Ack {
    match m {
        Msg::Append(_, _, tx) | Msg::Stream(_, tx) => Ack::Commit(tx, Ok(())),
        Msg::Claim(_, tx) => Ack::Claim(tx, Ok(())),
        Msg::Release { reply, .. } | Msg::Flush(reply) | Msg::Vacuum(reply) => {
            Ack::Unit(reply, Ok(()))
        }
        Msg::Enqueue(_, _, tx) | Msg::Record(_, tx) => Ack::Id(tx, Ok(0)),
        Msg::Take(_, tx) => Ack::Commands(tx, Ok(Vec::new())),
    }
}

/// Runs one message inside its own savepoint.
fn apply(
    tx: &mut Transaction<'_>,
    m: Msg,
    me: &Owner,
    path: &Path,
    failed_runs: &mut HashSet<RunId>,
    tally: &mut Tally,
) -> Ack {
    let sqlite = |source| Error::Sqlite {
        path: path.to_owned(),
        source,
    };
    match m {
        Msg::Append(batch, blob, ack) => {
            if failed_runs.contains(&batch.run) {
                let e = JournalError::Backend(format!(
                    "an earlier batch of run {} failed in the same transaction",
                    batch.run
                ));
                return Ack::Commit(ack, Err(e));
            }
            match in_savepoint(tx, path, |sp| ops::append(sp, &batch, &blob, me, path))
                .map_err(|e| e.into())
            {
                Ok(()) => {
                    tally.batches += 1;
                    tally.events += batch.events.len() as u64;
                    tally.bytes += blob.len() as u64;
                    Ack::Commit(ack, Ok(()))
                }
                Err(e) => {
                    failed_runs.insert(batch.run);
                    Ack::Commit(ack, Err(e))
                }
            }
        }
        Msg::Stream(batch, ack) => {
            match in_savepoint(tx, path, |sp| streams::append(sp, &batch, path)) {
                Ok(()) => {
                    tally.stream_batches += 1;
                    tally.stream_events += batch.len() as u64;
                    Ack::Commit(ack, Ok(()))
                }
                Err(e) => Ack::Commit(ack, Err(e.into())),
            }
        }
        Msg::Claim(run, reply) => {
            let r = in_savepoint(tx, path, |sp| ops::claim(sp, &run, me).map_err(sqlite));
            Ack::Claim(reply, r.unwrap_or_else(|e| Err(e.into())))
        }
        Msg::Release { run, force, reply } => {
            let owner = (!force).then_some(me);
            let r = in_savepoint(tx, path, |sp| ops::release(sp, &run, owner).map_err(sqlite));
            Ack::Unit(reply, r)
        }
        Msg::Enqueue(run, body, reply) => {
            let r = in_savepoint(tx, path, |sp| ops::enqueue(sp, &run, &body).map_err(sqlite));
            Ack::Id(reply, r)
        }
        Msg::Take(run, reply) => {
            let r = in_savepoint(tx, path, |sp| ops::take_commands(sp, &run).map_err(sqlite));
            Ack::Commands(reply, r)
        }
        Msg::Record(record, reply) => {
            let r = in_savepoint(tx, path, |sp| write_record(sp, &record).map_err(sqlite));
            Ack::Id(reply, r)
        }
        Msg::Flush(reply) | Msg::Vacuum(reply) => Ack::Unit(reply, Ok(())),
    }
}

/// Writes `record` with its domain's SQL; returns the new row id for tool calls, model calls,
/// artifacts, review comments and speculations (the last one's for tool executions), the
/// artifact's id for a status change (0 when it does not exist), the turn's number for a
/// client turn, 0 otherwise.
fn write_record(conn: &Connection, record: &Record) -> rusqlite::Result<i64> {
    match record {
        Record::ToolCall(r) => usage::write_tool_call(conn, r),
        Record::ModelCall(r) => usage::write_model_call(conn, r),
        Record::ChangeSet(r) => review::write_change_set(conn, r),
        Record::ChangeOp(r) => review::write_change_op(conn, r),
        Record::ReviewComment(r) => review::insert_comment(conn, r),
        Record::Artifact(r) => artifacts::insert(conn, r),
        Record::ArtifactStatus(r) => artifacts::set_status(conn, r),
        Record::ClientSession(r) => client_sessions::upsert(conn, r),
        Record::ClientTurn(r) => client_sessions::insert_turn(conn, r),
        Record::ToolNodes(r) => toolgraph::upsert_nodes(conn, r),
        Record::ToolEmbeddings(r) => toolgraph::set_embeddings(conn, r),
        Record::ToolExecutions(r) => toolgraph::record_executions(conn, r),
        Record::Speculation(r) => toolgraph::insert_speculation(conn, r),
        Record::DagCheckpoint(r) => dag_checkpoints::write(conn, r),
    }
}

/// Runs `f` in a savepoint: released on success, rolled back (when dropped) on error.
fn in_savepoint<T>(
    tx: &mut Transaction<'_>,
    path: &Path,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    let sqlite = |source| Error::Sqlite {
        path: path.to_owned(),
        source,
    };
    let sp = tx.savepoint().map_err(sqlite)?;
    let out = f(&sp)?;
    sp.commit().map_err(sqlite)?;
    Ok(out)
}

/// A factory for the error every message of a failed transaction receives.
fn tx_failed(path: &Path, e: &rusqlite::Error) -> impl Fn() -> Error {
    let path = path.to_owned();
    let detail = e.to_string();
    let retryable = matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    );
    move || Error::Transaction {
        path: path.clone(),
        detail: detail.clone(),
        retryable,
    }
}
