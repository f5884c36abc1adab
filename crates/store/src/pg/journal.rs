//! The engine's [`Journal`] on PostgreSQL: appends with group commit, loads, claims and the
//! command inbox.
//!
//! # Group commit
//!
//! [`Journal::append`] never waits: the batch's events are encoded on the caller's thread
//! (the SQLite backend's codec), and the batch joins the **open group**, whose job is queued
//! on the write lane. A group stays open while its job has not started and is still the
//! lane's last ([`Executor::last_write_ticket`]); otherwise (a claim, a take or another
//! domain's write was queued behind it, or it reached [`MAX_GROUP`]) the batch opens a new
//! group with a job of its own. So batches that arrive while a transaction commits go into
//! the next transaction together — one WAL flush for many steps of many runs — and writes
//! stay in the order they were sent: per run, the order of `append` calls.
//!
//! A group's job writes every batch in one transaction: the run's `runs` row (updated, or
//! inserted when missing, so an existing run spends no identity value on its `rk`), its
//! event row (key `(rk << 32) | first_seq`) and the claim's heartbeat, like
//! `crate::ops::append`. The statements of all batches are sent at once (pipelined), so a
//! group costs about two round trips whatever its size. When one fails, the transaction is
//! rolled back and written again with a savepoint per batch, as the SQLite writer does: the
//! failing batch is rolled back alone and answered with its error, the later batches of its
//! run in the group fail too (a run's log never gets a hole), the others commit. A savepoint
//! per batch in the common case would give every batch a subtransaction, which the server
//! pays for (more than 64 in one transaction overflow each backend's cache of them); the
//! retry has the same outcome. A [`Commit`] resolves once its transaction committed; a
//! transaction that cannot begin or commit fails every batch in it
//! ([`PgError::Transaction`]).
//!
//! # Fencing
//!
//! A batch of a run this store claimed with a lease ([`crate::LeaseStore`]) is written under
//! that lease: its transaction first locks the run's `run_leases` row `FOR SHARE` (a claim
//! of it waits until the transaction ends) and checks that the token and the worker are
//! still the ones claimed. When another worker took the lease, the batch writes nothing and
//! fails with [`JournalError::LeaseLost`], as do its run's later batches in the group; the
//! other batches commit. Groups without a leased run pay nothing for it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;
use tokio_postgres::Client;
use tokio_postgres::types::{ToSql, Type};
use trellis_graph::{Batch, Commit, Journal, JournalError};
use trellis_protocol::records::Owner;
use trellis_protocol::{Command, Event, RunId};

use super::error::PgError;
use super::exec::Executor;
use super::{PgStore, ops};
use crate::schema::now_ms;
use crate::writer::Counters;
use crate::{Synchronous, codec};

/// The most batches one transaction takes, so a flood cannot delay acks unboundedly (the
/// SQLite writer's bound).
const MAX_GROUP: usize = 4096;

/// Updates the run's row, or inserts it when there is none: the identity value of `rk` is
/// drawn only for a row actually inserted (the `ON CONFLICT` arm serves a run another process
/// inserted meanwhile).
const UPSERT_RUN: &str = "WITH updated AS (
        UPDATE runs SET graph = $2, status = $3, step = $4, last_seq = $5, terminal = $6,
            error = $7, fork_run = $8, fork_seq = $9, updated_ts = $11
        WHERE id = $1 RETURNING rk)
    INSERT INTO runs (id, graph, status, step, last_seq, terminal, error, fork_run, fork_seq,
                      created_ts, updated_ts)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 WHERE NOT EXISTS (SELECT 1 FROM updated)
    ON CONFLICT (id) DO UPDATE SET
        graph = excluded.graph, status = excluded.status, step = excluded.step,
        last_seq = excluded.last_seq, terminal = excluded.terminal, error = excluded.error,
        fork_run = excluded.fork_run, fork_seq = excluded.fork_seq,
        updated_ts = excluded.updated_ts";

/// The batch's event row, keyed by the run's `rk` (capped at 2^31 - 1, so the key fits). A
/// run without a row would make the key NULL, which the primary key refuses: never a batch
/// silently dropped.
const INSERT_EVENTS: &str = "INSERT INTO events (key, last_seq, data)
    VALUES (((SELECT rk FROM runs WHERE id = $1) << 32) | $2, $3, $4)";

/// The claim's heartbeat, when this process holds it.
const HEARTBEAT: &str =
    "UPDATE run_owners SET heartbeat = $2 WHERE run_id = $1 AND pid = $3 AND host = $4";

/// The leases this store claimed, by run: the token and the worker its batches are fenced
/// with.
type Leases = Arc<Mutex<HashMap<RunId, (i64, String)>>>;

/// The journal's state in a [`PgStore`]: who claims, how commits are counted, the open group,
/// the leases held.
pub(crate) struct JournalState {
    /// This process, as its claims name it.
    pub(crate) me: Owner,
    synchronous: Synchronous,
    counters: Arc<Counters>,
    open: Mutex<Option<Open>>,
    leases: Leases,
}

/// The group batches may still join: its job's ticket on the write lane, and its batches
/// (`None` once the job took them).
struct Open {
    ticket: u64,
    group: Arc<Group>,
}

type Group = Mutex<Option<Vec<Item>>>;

/// A batch waiting for its transaction.
struct Item {
    batch: Batch,
    blob: Vec<u8>,
    ack: oneshot::Sender<Result<(), JournalError>>,
}

/// Counts a successful transaction of the journal's writes in the store's counters.
#[derive(Clone)]
pub(crate) struct CommitCount {
    counters: Arc<Counters>,
    synced: bool,
}

impl CommitCount {
    /// Counts one committed transaction.
    pub(crate) fn commit(&self) {
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        if self.synced {
            self.counters.synced_commits.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts one committed transaction holding a service stream batch of `events` events.
    pub(crate) fn stream_batch(&self, events: usize) {
        self.commit();
        let c = &self.counters;
        c.stream_batches.fetch_add(1, Ordering::Relaxed);
        c.stream_events.fetch_add(events as u64, Ordering::Relaxed);
    }

    /// Counts a transaction that failed to begin or commit.
    pub(crate) fn failed(&self) {
        self.counters.failed_commits.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a group's job needs besides its batches.
struct Context {
    me: Owner,
    leases: Leases,
    url: Arc<str>,
    counters: Arc<Counters>,
    synced: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl JournalState {
    /// The state of a store whose writes commit with `synchronous`.
    pub(crate) fn new(synchronous: Synchronous) -> Self {
        Self {
            me: crate::claim::current_owner(),
            synchronous,
            counters: Arc::new(Counters::default()),
            open: Mutex::new(None),
            leases: Arc::default(),
        }
    }

    /// Fences the run's later batches with `lease` (claimed by this store).
    /// The leases this store holds among `runs`' (sorted, each once), as fences.
    pub(crate) fn fences_of<'a>(&self, runs: impl Iterator<Item = &'a str>) -> Vec<Fence> {
        let leases = lock(&self.leases);
        if leases.is_empty() {
            return Vec::new();
        }
        let mut fences: Vec<Fence> = runs
            .filter_map(|run| {
                let run = RunId::from_string(run.to_owned());
                let (token, worker) = leases.get(&run)?;
                Some((run.clone(), *token, worker.clone()))
            })
            .collect();
        fences.sort();
        fences.dedup();
        fences
    }

    pub(crate) fn hold(&self, lease: &crate::Lease) {
        let entry = (lease.token, lease.worker.clone());
        lock(&self.leases).insert(lease.run.clone(), entry);
    }

    /// Stops fencing the run's batches with `lease` (released), unless a later claim
    /// replaced it.
    pub(crate) fn forget(&self, lease: &crate::Lease) {
        let mut leases = lock(&self.leases);
        if leases
            .get(&lease.run)
            .is_some_and(|(t, _)| *t == lease.token)
        {
            leases.remove(&lease.run);
        }
    }

    /// Counts transactions that must survive a crash of the server (`durable`: appends,
    /// enqueues, claims, releases) as synced when commits wait for the WAL flush.
    pub(crate) fn commit_count(&self, durable: bool) -> CommitCount {
        CommitCount {
            counters: self.counters.clone(),
            synced: durable && self.synchronous == Synchronous::Full,
        }
    }

    /// Adds `item` to the open group, or opens a group with a job of its own.
    fn queue(&self, exec: &Executor, url: &Arc<str>, item: Item) {
        let mut open = lock(&self.open);
        if let Some(o) = open.as_ref()
            && o.ticket == exec.last_write_ticket()
            && let Some(items) = lock(&o.group).as_mut()
            && items.len() < MAX_GROUP
        {
            items.push(item);
            return;
        }
        let group: Arc<Group> = Arc::new(Mutex::new(Some(vec![item])));
        let ctx = Context {
            me: self.me.clone(),
            leases: self.leases.clone(),
            url: url.clone(),
            counters: self.counters.clone(),
            synced: self.synchronous == Synchronous::Full,
        };
        let job = group.clone();
        let queued = exec.post_write(async move |conn| {
            // Sealed: later batches open the next group.
            let items = lock(&job).take().unwrap_or_default();
            commit_group(conn, items, &ctx).await;
        });
        // A job that could not be queued was dropped; dropping its group too answers its
        // batch `JournalError::Closed`.
        *open = queued.ok().map(|ticket| Open { ticket, group });
    }
}

/// Writes `items` in one transaction and answers each.
async fn commit_group(conn: Result<&mut Client, crate::Error>, items: Vec<Item>, ctx: &Context) {
    let client = match conn {
        Ok(client) => client,
        Err(e) => {
            ctx.counters.failed_commits.fetch_add(1, Ordering::Relaxed);
            let e = JournalError::from(e);
            for item in items {
                let _ = item.ack.send(Err(clone_error(&e)));
            }
            return;
        }
    };
    let n = items.len() as u64;
    let mut acks = Vec::with_capacity(items.len());
    let mut failed_runs = HashSet::new();
    let mut todo = Vec::with_capacity(items.len());
    // Batches the layout cannot hold fail before any SQL, and fail their run's later ones.
    for item in items {
        match check(&item, &failed_runs, &ctx.url) {
            Ok(()) => todo.push(item),
            Err(e) => {
                failed_runs.insert(item.batch.run.clone());
                acks.push((item, Err(e)));
            }
        }
    }
    // Batches of runs claimed with a lease: the transaction begins by locking their leases,
    // and those whose lease was taken fail without writing.
    let fences = fences(&todo, ctx);
    let mut begun = false;
    let mut first = Ok(Written::Committed);
    if !fences.is_empty() {
        match begin_fenced(client, &fences).await {
            Ok(lost) => {
                begun = true;
                fail_lost(&mut todo, &lost, &mut acks, &mut failed_runs);
            }
            Err(e) => first = Err(e),
        }
    }
    if first.is_ok() && (begun || !todo.is_empty()) {
        first = write_all(client, &todo, &ctx.me, begun).await;
    }
    let outcome = match first {
        // A batch failed: write again, each batch in a savepoint.
        Ok(Written::BatchFailed) => {
            write_each(client, todo, ctx, &fences, &mut acks, &mut failed_runs).await
        }
        written => {
            acks.extend(todo.into_iter().map(|item| (item, Ok(()))));
            written.map(drop)
        }
    };
    match outcome {
        Ok(()) => {
            let c = &ctx.counters;
            c.commits.fetch_add(1, Ordering::Relaxed);
            if ctx.synced {
                c.synced_commits.fetch_add(1, Ordering::Relaxed);
            }
            c.largest_group.fetch_max(n, Ordering::Relaxed);
            for (item, result) in acks {
                if result.is_ok() {
                    c.batches.fetch_add(1, Ordering::Relaxed);
                    c.events
                        .fetch_add(item.batch.events.len() as u64, Ordering::Relaxed);
                    c.bytes.fetch_add(item.blob.len() as u64, Ordering::Relaxed);
                }
                let _ = item.ack.send(result);
            }
        }
        Err(e) => {
            ctx.counters.failed_commits.fetch_add(1, Ordering::Relaxed);
            let e = JournalError::from(crate::Error::from(PgError::transaction(&ctx.url, e)));
            for (item, result) in acks {
                let _ = item.ack.send(result.and(Err(clone_error(&e))));
            }
        }
    }
}

/// A journal error for each batch of a failed group (`JournalError` is not `Clone`).
fn clone_error(e: &JournalError) -> JournalError {
    match e {
        JournalError::RunNotFound(run) => JournalError::RunNotFound(run.clone()),
        JournalError::Busy { run, owner } => JournalError::Busy {
            run: run.clone(),
            owner: owner.clone(),
        },
        JournalError::Backend(detail) => JournalError::Backend(detail.clone()),
        JournalError::Closed => JournalError::Closed,
        JournalError::LeaseLost { run, worker } => JournalError::LeaseLost {
            run: run.clone(),
            worker: worker.clone(),
        },
    }
}

/// A lease a batch is written under: its run, token and worker.
pub(super) type Fence = (RunId, i64, String);

/// The leases of this store that fence `items`' runs.
fn fences(items: &[Item], ctx: &Context) -> Vec<Fence> {
    let leases = lock(&ctx.leases);
    if leases.is_empty() {
        return Vec::new();
    }
    let mut runs: Vec<&RunId> = items.iter().map(|i| &i.batch.run).collect();
    runs.sort();
    runs.dedup();
    runs.into_iter()
        .filter_map(|run| {
            let (token, worker) = leases.get(run)?;
            Some((run.clone(), *token, worker.clone()))
        })
        .collect()
}

/// Locks the leases of `fences` (`FOR SHARE`, in run order: a claim of them waits until the
/// transaction ends) and answers those whose token is no longer ours, with their worker.
pub(super) async fn lost_leases(
    client: &Client,
    fences: &[Fence],
) -> Result<HashMap<RunId, String>, tokio_postgres::Error> {
    let runs: Vec<&str> = fences.iter().map(|(run, _, _)| run.as_str()).collect();
    let rows = client
        .query_typed(
            "SELECT run_id, token, owner FROM run_leases WHERE run_id = ANY($1)
             ORDER BY run_id FOR SHARE",
            &[(&runs, Type::TEXT_ARRAY)],
        )
        .await?;
    let mut held = HashMap::new();
    for row in rows {
        let (run, token, owner): (String, i64, Option<String>) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        held.insert(run, (token, owner));
    }
    Ok(fences
        .iter()
        .filter(|(run, token, worker)| {
            held.get(run.as_str())
                .is_none_or(|(t, owner)| t != token || owner.as_deref() != Some(worker))
        })
        .map(|(run, _, worker)| (run.clone(), worker.clone()))
        .collect())
}

/// Begins the transaction and locks the leases of `fences`; answers the lost ones. A
/// transaction that began but could not lock is rolled back.
async fn begin_fenced(
    client: &Client,
    fences: &[Fence],
) -> Result<HashMap<RunId, String>, tokio_postgres::Error> {
    let (begun, lost) = futures::join!(client.batch_execute("BEGIN"), lost_leases(client, fences));
    match begun.and(lost) {
        Ok(lost) => Ok(lost),
        Err(e) => {
            if !e.is_closed() {
                let _ = client.batch_execute("ROLLBACK").await;
            }
            Err(e)
        }
    }
}

fn lease_lost(run: &RunId, worker: &str) -> JournalError {
    JournalError::LeaseLost {
        run: run.to_string(),
        worker: worker.to_owned(),
    }
}

/// Moves the batches of runs whose lease was lost from `todo` to `acks`, failed.
fn fail_lost(
    todo: &mut Vec<Item>,
    lost: &HashMap<RunId, String>,
    acks: &mut Vec<(Item, Result<(), JournalError>)>,
    failed_runs: &mut HashSet<RunId>,
) {
    if lost.is_empty() {
        return;
    }
    let (gone, kept): (Vec<Item>, Vec<Item>) = std::mem::take(todo)
        .into_iter()
        .partition(|item| lost.contains_key(&item.batch.run));
    *todo = kept;
    for item in gone {
        let worker = lost.get(&item.batch.run).map_or("", String::as_str);
        let e = lease_lost(&item.batch.run, worker);
        failed_runs.insert(item.batch.run.clone());
        acks.push((item, Err(e)));
    }
}

/// Whether `item` may be written: its run's earlier batch in the group did not fail, and its
/// first seq fits an event key.
fn check(item: &Item, failed_runs: &HashSet<RunId>, url: &str) -> Result<(), JournalError> {
    let run = &item.batch.run;
    if failed_runs.contains(run) {
        return Err(earlier_failed(run));
    }
    match item.batch.events.first() {
        Some(first) if u32::try_from(first.seq).is_err() => {
            Err(crate::Error::from(PgError::Limit {
                url: url.to_owned(),
                detail: crate::ops::seq_limit(run, first.seq),
            })
            .into())
        }
        _ => Ok(()),
    }
}

fn earlier_failed(run: &RunId) -> JournalError {
    JournalError::Backend(format!(
        "an earlier batch of run {run} failed in the same transaction"
    ))
}

/// How [`write_all`] ended, when its transaction did not fail.
enum Written {
    /// Every batch is written and committed.
    Committed,
    /// A batch failed: the transaction was rolled back.
    BatchFailed,
}

/// Writes every batch in one transaction (already `begun`, or its `BEGIN` pipelined with their
/// statements); answers
/// the error of a transaction that could not begin, roll back or commit. (The transaction is
/// not a `tokio_postgres::Transaction`, whose `BEGIN` is a round trip of its own: every way
/// out of this function ends it, and a job that panics loses its connection.)
async fn write_all(
    client: &mut Client,
    items: &[Item],
    me: &Owner,
    begun: bool,
) -> Result<Written, tokio_postgres::Error> {
    let client = &*client;
    let begin = async {
        if begun {
            Ok(())
        } else {
            client.batch_execute("BEGIN").await
        }
    };
    let (begun, results) = futures::join!(
        begin,
        futures::future::join_all(items.iter().map(|i| write(client, i, me))),
    );
    match begun.and(results.into_iter().collect::<Result<(), _>>()) {
        Ok(()) => client
            .batch_execute("COMMIT")
            .await
            .map(|()| Written::Committed),
        // The connection is gone: nothing to retry on it.
        Err(e) if e.is_closed() => Err(e),
        Err(_) => client
            .batch_execute("ROLLBACK")
            .await
            .map(|()| Written::BatchFailed),
    }
}

/// Writes the batches one at a time, each in a savepoint, in one transaction (fenced by
/// `fences` first): a failing batch is rolled back alone and fails its run's later batches. Pushes each batch's answer onto
/// `acks`; answers the error of a transaction that could not begin or commit.
async fn write_each(
    client: &mut Client,
    mut items: Vec<Item>,
    ctx: &Context,
    fences: &[Fence],
    acks: &mut Vec<(Item, Result<(), JournalError>)>,
    failed_runs: &mut HashSet<RunId>,
) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await;
    let tx = match tx {
        Ok(tx) => tx,
        Err(e) => {
            acks.extend(items.into_iter().map(|item| (item, Ok(()))));
            return Err(e);
        }
    };
    // The first transaction's locks are gone with its rollback: lock the leases again.
    if !fences.is_empty() {
        match lost_leases(tx.client(), fences).await {
            Ok(lost) => fail_lost(&mut items, &lost, acks, failed_runs),
            Err(e) => {
                acks.extend(items.into_iter().map(|item| (item, Ok(()))));
                return Err(e);
            }
        }
    }
    let mut broken = None;
    for item in items {
        if broken.is_some() {
            acks.push((item, Ok(())));
            continue;
        }
        if failed_runs.contains(&item.batch.run) {
            let e = earlier_failed(&item.batch.run);
            acks.push((item, Err(e)));
            continue;
        }
        let (savepoint, written, released) = futures::join!(
            tx.batch_execute("SAVEPOINT batch"),
            write(tx.client(), &item, &ctx.me),
            tx.batch_execute("RELEASE SAVEPOINT batch"),
        );
        let Err(e) = savepoint.and(written).and(released) else {
            acks.push((item, Ok(())));
            continue;
        };
        let undone = tx
            .batch_execute("ROLLBACK TO SAVEPOINT batch; RELEASE SAVEPOINT batch")
            .await;
        if let Err(undo) = undone {
            // The transaction cannot go on: every batch fails with this.
            broken = Some(undo);
            acks.push((item, Ok(())));
            continue;
        }
        failed_runs.insert(item.batch.run.clone());
        let e = crate::Error::from(PgError::query(&ctx.url, e));
        acks.push((item, Err(e.into())));
    }
    if let Some(e) = broken {
        return Err(e);
    }
    tx.commit().await
}

/// Sends the statements of one batch (pipelined: they go out at the first poll, behind what
/// was sent before) and answers the first failure.
async fn write(tx: &Client, item: &Item, me: &Owner) -> Result<(), tokio_postgres::Error> {
    let batch = &item.batch;
    let s = &batch.summary;
    let id = batch.run.as_str();
    let (step, last_seq) = (crate::ops::to_i64(s.step), crate::ops::to_i64(s.last_seq));
    let graph = super::runs::text(&s.graph);
    let terminal = s.terminal.as_ref().map(|t| super::runs::text(t.as_str()));
    let error = s.error.as_deref().map(super::runs::text);
    let fork_run = s.fork.as_ref().map(|f| super::runs::text(f.run.as_str()));
    let fork_seq = s.fork.as_ref().map(|f| crate::ops::to_i64(f.seq));
    let summary: [(&(dyn ToSql + Sync), Type); 11] = [
        (&id, Type::TEXT),
        (&graph, Type::TEXT),
        (&s.status.as_str(), Type::TEXT),
        (&step, Type::INT8),
        (&last_seq, Type::INT8),
        (&terminal, Type::TEXT),
        (&error, Type::TEXT),
        (&fork_run, Type::TEXT),
        (&fork_seq, Type::INT8),
        (&s.created_ts, Type::INT8),
        (&s.updated_ts, Type::INT8),
    ];
    let range = match (batch.events.first(), batch.events.last()) {
        (Some(first), Some(last)) => {
            Some((crate::ops::to_i64(first.seq), crate::ops::to_i64(last.seq)))
        }
        _ => None,
    };
    let (now, pid) = (now_ms(), i64::from(me.pid));
    let heartbeat: [(&(dyn ToSql + Sync), Type); 4] = [
        (&id, Type::TEXT),
        (&now, Type::INT8),
        (&pid, Type::INT8),
        (&me.host, Type::TEXT),
    ];
    let events = async {
        let Some((first, last)) = range else {
            return Ok(0);
        };
        let params: [(&(dyn ToSql + Sync), Type); 4] = [
            (&id, Type::TEXT),
            (&first, Type::INT8),
            (&last, Type::INT8),
            (&item.blob, Type::BYTEA),
        ];
        tx.execute_typed(INSERT_EVENTS, &params).await
    };
    // Delivered when the transaction commits (one per run and transaction).
    let key = crate::Notice::Appended {
        key: &format!("run:{id}"),
        seq: s.last_seq,
    }
    .text();
    let notice: [(&(dyn ToSql + Sync), Type); 1] = [(&key, Type::TEXT)];
    let (upserted, inserted, beat, notified) = futures::join!(
        tx.execute_typed(UPSERT_RUN, &summary),
        events,
        tx.execute_typed(HEARTBEAT, &heartbeat),
        tx.execute_typed(super::notify::NOTIFY_SQL, &notice),
    );
    upserted.and(inserted).and(beat).and(notified).map(drop)
}

impl Journal for PgStore {
    fn append(&self, batch: Batch) -> Commit {
        let (ack, commit) = Commit::pending();
        match codec::encode_batch(&batch) {
            Ok(blob) => self
                .journal
                .queue(&self.exec, &self.url, Item { batch, blob, ack }),
            Err(e) => drop(ack.send(Err(e))),
        }
        commit
    }

    fn load(&self, run: &RunId) -> Result<Vec<Event>, JournalError> {
        self.read_events(run, 0, u64::MAX)?
            .ok_or_else(|| JournalError::RunNotFound(run.to_string()))
    }

    fn claim(&self, run: &RunId) -> Result<(), JournalError> {
        let (run, me) = (run.clone(), self.journal.me.clone());
        let count = self.journal.commit_count(true);
        self.write(async move |c| {
            let claimed = ops::claim(c, &run, &me).await?;
            if claimed.is_ok() {
                count.commit();
            }
            Ok(claimed)
        })?
    }

    fn claim_new(&self, run: &RunId) -> Result<(), JournalError> {
        // Nobody else can own an id minted a moment ago: queue the claim ahead of the run's
        // first batch without waiting for it.
        let (run, me) = (run.clone(), self.journal.me.clone());
        let count = self.journal.commit_count(true);
        self.queue_write(async move |c| {
            if ops::claim(c, &run, &me).await?.is_ok() {
                count.commit();
            }
            Ok(())
        })?;
        Ok(())
    }

    fn release(&self, run: &RunId) {
        // Queued behind the run's last batch, not waited for. Nothing useful to do on
        // failure: a stale claim is taken over once this process exits.
        let (run, me) = (run.to_string(), self.journal.me.clone());
        let count = self.journal.commit_count(true);
        let _ = self.queue_write(async move |c| {
            ops::release(c, &run, Some(&me)).await?;
            count.commit();
            Ok(())
        });
    }

    fn take_commands(&self, run: &RunId) -> Result<Vec<Command>, JournalError> {
        // The engine polls often: check cheaply on the read lane before the write lane.
        if !self.has_pending_commands(run)? {
            return Ok(Vec::new());
        }
        let run = run.to_string();
        let count = self.journal.commit_count(false);
        let commands = self.write(async move |c| {
            let commands = ops::take_commands(c, &run).await?;
            count.commit();
            Ok(commands)
        })?;
        Ok(commands)
    }

    fn has_inbox(&self) -> bool {
        true
    }

    fn inbox_signal(&self, run: &RunId) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.exec.inbox_signal(run.as_str()))
    }
}

impl PgStore {
    /// The counters of the run journal's writes since the store connected, as
    /// [`crate::StoreStats`]: transactions committed (group commits of batches, claims,
    /// releases, enqueues, takes), synced ones, failed ones, batches, events, blob bytes and
    /// the largest group.
    pub fn journal_stats(&self) -> crate::StoreStats {
        self.journal.counters.stats()
    }

    /// This process, as recorded in the claims it takes.
    pub fn owner(&self) -> &Owner {
        &self.journal.me
    }
}
