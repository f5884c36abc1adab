//! The run journal: the `runs`, `events`, `run_owners` and `commands` tables, behind
//! [`RunStore`] (runs, their event logs, forks' checkpoints, the command inbox, claims) and
//! the engine's [`Journal`] seam.
//!
//! Reads use the reader pool (below); writes go through the writer thread, whose SQL for
//! this domain is in `ops` (appends, claims, releases, the command inbox) and `claim`
//! (who owns a run).

use rusqlite::{OptionalExtension, Row, params};
use trellis_graph::{Batch, Commit, Journal, JournalError};
use trellis_protocol::records::{Checkpoint, Owner, RunFilter, RunRecord, RunSummary};
use trellis_protocol::{Command, Event, EventKind, ForkRef, NodeId, RunId, RunStatus};

use crate::codec;
use crate::error::{Error, Result};
use crate::ops::{event_key, to_i64};
use crate::read::Reader;
use crate::{Msg, SqliteStore};

/// How many candidates an ambiguous-prefix error lists.
const MAX_CANDIDATES: usize = 10;

/// The columns of a run's record ([`RunRow`]), for every backend's SQL.
pub(crate) const RUN_COLUMNS: &str = "r.id, r.graph, r.status, r.step, r.last_seq, r.terminal, \
     r.error, r.fork_run, r.fork_seq, r.created_ts, r.updated_ts, o.pid, o.host, o.start_time, \
     o.claimed_at, o.heartbeat";

/// Where [`RUN_COLUMNS`] come from: a run and its claim.
pub(crate) const RUN_FROM: &str = "runs r LEFT JOIN run_owners o ON o.run_id = r.id";

/// The graphs of a stored run ([`RunStore::graphs`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RunGraphs {
    /// The graph its `runStarted` names.
    pub graph: String,
    /// That graph's fingerprint.
    pub fingerprint: String,
    /// Its parameters.
    pub params: serde_json::Value,
    /// The latest graph it continued with, if any.
    pub continued: Option<ContinuedGraph>,
}

impl RunGraphs {
    /// The name and parameters of the graph the run runs with now.
    pub fn current(&self) -> (&str, &serde_json::Value) {
        match &self.continued {
            Some(c) => (&c.graph, &c.params),
            None => (&self.graph, &self.params),
        }
    }
}

/// A graph a run continued with (its `runContinued` event).
#[derive(Clone, Debug, PartialEq)]
pub struct ContinuedGraph {
    /// The event's seq.
    pub seq: u64,
    /// The graph's name.
    pub graph: String,
    /// Its fingerprint.
    pub fingerprint: String,
    /// Its parameters.
    pub params: serde_json::Value,
}

/// Runs and their event logs: listing and resolving runs, reading a run's events, the graphs
/// it runs with and the points it can be forked from, queueing commands for the process
/// that executes it, breaking a stale claim. The engine's own writes (batches, claims,
/// taking commands) go through [`Journal`], which every backend implements beside this trait.
///
/// [`RunStore::started`], [`RunStore::graphs`] and [`RunStore::checkpoints`] are provided:
/// they read the run's record and events through the required methods, so every backend
/// shares them.
pub trait RunStore: Send + Sync {
    /// Queues `command` for `run`, to be taken by the process executing it (through
    /// [`Journal::take_commands`]). Returns the command's inbox id.
    fn enqueue_command(&self, run: &RunId, command: &Command) -> Result<i64>;

    /// Removes the claim on `run` whoever holds it (for an owner on another host that is
    /// known to be gone).
    fn break_claim(&self, run: &RunId) -> Result<()>;

    /// Whether `run` has queued commands nobody has taken yet.
    fn has_commands(&self, run: &RunId) -> Result<bool>;

    /// Runs newest first.
    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>>;

    /// The run whose id is `id_or_prefix` or, failing that, the only run whose id starts
    /// with it.
    fn get_run(&self, id_or_prefix: &str) -> Result<RunRecord>;

    /// [`RunStore::get_run`]'s id alone, where a backend can answer it without the record.
    fn run_id(&self, id_or_prefix: &str) -> Result<RunId> {
        self.get_run(id_or_prefix).map(|r| r.id)
    }

    /// The run's events with `from_seq <= seq <= to_seq` (`None`: to the end), in seq order.
    fn events(&self, run: &RunId, from_seq: u64, to_seq: Option<u64>) -> Result<Vec<Event>>;

    /// The graph name and parameters a run was started with (its `runStarted` event), from
    /// which its graph is rebuilt.
    fn started(&self, run: &RunId) -> Result<(String, serde_json::Value)> {
        match self
            .events(run, 1, Some(1))?
            .into_iter()
            .next()
            .map(|e| e.kind)
        {
            Some(trellis_protocol::EventKind::RunStarted { graph, params, .. }) => {
                Ok((graph, params))
            }
            _ => Err(Error::Damaged(format!(
                "run {run} has no runStarted event; the store may be damaged"
            ))),
        }
    }

    /// The graph a run runs with now, from which it is rebuilt: the one its `runStarted`
    /// names or, when it continued with another (`runContinued`), the latest of those.
    ///
    /// Cheap for a listing: the run's summary names the graph it runs with now, so a run
    /// that never continued costs its first event, and one that did is read from the start
    /// only up to the continuation into that graph (a run continues early: planning is its
    /// first node).
    fn graphs(&self, run: &RunId) -> Result<RunGraphs> {
        const CHUNK: u64 = 64;
        // The summary first: every continuation it reflects is in the events read after it.
        let now = self.get_run(run.as_str())?.summary.graph;
        let mut events = self.events(run, 1, Some(CHUNK))?;
        let Some(trellis_protocol::EventKind::RunStarted {
            graph,
            fingerprint,
            params,
            ..
        }) = events.first().map(|e| &e.kind)
        else {
            return Err(Error::Damaged(format!(
                "run {run} has no runStarted event; the store may be damaged"
            )));
        };
        let mut out = RunGraphs {
            graph: graph.clone(),
            fingerprint: fingerprint.clone(),
            params: params.clone(),
            continued: None,
        };
        let mut from = 1;
        loop {
            for e in &events {
                if let trellis_protocol::EventKind::RunContinued {
                    graph,
                    fingerprint,
                    params,
                    ..
                } = &e.kind
                {
                    out.continued = Some(ContinuedGraph {
                        seq: e.seq,
                        graph: graph.clone(),
                        fingerprint: fingerprint.clone(),
                        params: params.clone(),
                    });
                }
            }
            let current = out.continued.as_ref().map_or(&out.graph, |c| &c.graph);
            // Read up to the graph the summary names (a run that never continued: its first
            // chunk), or to the end of the log.
            if *current == now || (events.len() as u64) < CHUNK {
                return Ok(out);
            }
            from += CHUNK;
            events = self.events(run, from, Some(from + CHUNK - 1))?;
            if events.is_empty() {
                return Ok(out);
            }
        }
    }

    /// The points the run can be forked from: its `runStarted` and `stepCompleted` events.
    fn checkpoints(&self, run: &RunId) -> Result<Vec<Checkpoint>> {
        Ok(self
            .events(run, 0, None)?
            .into_iter()
            .filter(|e| e.kind.is_checkpoint())
            .map(|e| Checkpoint {
                seq: e.seq,
                ts: e.ts,
                step: match e.kind {
                    EventKind::StepCompleted { step, .. } => step,
                    _ => 0,
                },
            })
            .collect())
    }
}

impl RunStore for SqliteStore {
    fn has_commands(&self, run: &RunId) -> Result<bool> {
        self.reader.has_pending_commands(run)
    }

    fn enqueue_command(&self, run: &RunId, command: &Command) -> Result<i64> {
        let body = crate::ops::command_body(command)?;
        self.request(|reply| Msg::Enqueue(run.clone(), body, reply))?
    }

    fn break_claim(&self, run: &RunId) -> Result<()> {
        self.request(|reply| Msg::Release {
            run: run.clone(),
            force: true,
            reply,
        })?
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        self.reader.list(filter)
    }

    fn get_run(&self, id_or_prefix: &str) -> Result<RunRecord> {
        self.reader.resolve(id_or_prefix)
    }

    fn run_id(&self, id_or_prefix: &str) -> Result<RunId> {
        self.reader.resolve_id(id_or_prefix)
    }

    fn events(&self, run: &RunId, from_seq: u64, to_seq: Option<u64>) -> Result<Vec<Event>> {
        self.reader
            .events(run, from_seq, to_seq.unwrap_or(u64::MAX))?
            .ok_or_else(|| Error::RunNotFound(run.to_string()))
    }
}

impl Journal for SqliteStore {
    fn append(&self, batch: Batch) -> Commit {
        let (ack, commit) = Commit::pending();
        match &self.tx {
            // If the writer is gone the message (and its ack) is dropped: the commit
            // resolves to `JournalError::Closed`.
            Some(tx) => match codec::encode_batch(&batch) {
                Ok(blob) => drop(tx.send(Msg::Append(batch, blob, ack))),
                Err(e) => drop(ack.send(Err(e))),
            },
            None => drop(ack.send(Err(JournalError::Closed))),
        }
        commit
    }

    fn load(&self, run: &RunId) -> Result<Vec<Event>, JournalError> {
        self.reader
            .events(run, 0, u64::MAX)?
            .ok_or_else(|| JournalError::RunNotFound(run.to_string()))
    }

    fn claim(&self, run: &RunId) -> Result<(), JournalError> {
        self.request(|reply| Msg::Claim(run.clone(), reply))
            .map_err(JournalError::from)?
    }

    fn claim_new(&self, run: &RunId) -> Result<(), JournalError> {
        // Nobody else can own an id minted a moment ago: queue the claim ahead of the run's
        // first batch without waiting for it (a blocking round trip to the writer would stall
        // the runtime thread behind other runs' fsyncs).
        self.post(|reply| Msg::Claim(run.clone(), reply))
            .map_err(JournalError::from)
    }

    fn release(&self, run: &RunId) {
        // Queued behind the run's last batch, not waited for. Nothing useful to do on
        // failure: a stale claim is taken over once this process exits.
        let _ = self.post(|reply| Msg::Release {
            run: run.clone(),
            force: false,
            reply,
        });
    }

    fn take_commands(&self, run: &RunId) -> Result<Vec<Command>, JournalError> {
        // The engine polls often: check cheaply on a read connection before taking the
        // write lock.
        if !self.reader.has_pending_commands(run)? {
            return Ok(Vec::new());
        }
        Ok(self.request(|reply| Msg::Take(run.clone(), reply))??)
    }

    fn has_inbox(&self) -> bool {
        true
    }
}

impl Reader {
    /// The run's record, by exact id.
    pub(crate) fn run(&self, id: &str) -> Result<Option<RunRecord>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM {RUN_FROM} WHERE r.id = ?1"
            ))
            .and_then(|mut st| st.query_row([id], |r| self.record(r)).optional())
            .map_err(self.sqlite())
        })
    }

    /// Resolves an id or a unique prefix of one.
    pub(crate) fn resolve(&self, id_or_prefix: &str) -> Result<RunRecord> {
        resolve(
            id_or_prefix,
            |id| self.run(id),
            |lo, hi, n| self.ids(lo, hi, n),
        )
    }

    /// Resolves an id or a unique prefix of one to the id alone (no record is read).
    pub(crate) fn resolve_id(&self, id_or_prefix: &str) -> Result<RunId> {
        let exact = |id: &str| {
            self.with(|c| {
                c.prepare_cached("SELECT id FROM runs WHERE id = ?1")
                    .and_then(|mut st| st.query_row([id], |r| r.get::<_, String>(0)).optional())
                    .map_err(self.sqlite())
            })
            .map(|id| id.map(RunId::from_string))
        };
        resolve(id_or_prefix, exact, |lo, hi, n| self.ids(lo, hi, n))
    }

    /// At most `limit` run ids in `[lo, hi)`, in order.
    fn ids(&self, lo: &str, hi: &str, limit: i64) -> Result<Vec<String>> {
        self.with(|c| {
            c.prepare_cached("SELECT id FROM runs WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3")
                .and_then(|mut st| {
                    st.query_map(params![lo, hi, limit], |r| r.get(0))?
                        .collect()
                })
                .map_err(self.sqlite())
        })
    }

    /// Runs newest first.
    pub(crate) fn list(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let limit = filter
            .limit
            .map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        let status = filter.status.map(|s| s.as_str());
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM {RUN_FROM} WHERE (?1 IS NULL OR r.status = ?1)
                 ORDER BY r.created_ts DESC, r.id DESC LIMIT ?2"
            ))
            .and_then(|mut st| {
                st.query_map(params![status, limit], |r| self.record(r))?
                    .collect()
            })
            .map_err(self.sqlite())
        })
    }

    /// The run's events with `from <= seq <= to`, in seq order; `None` when the run is unknown.
    pub(crate) fn events(&self, run: &RunId, from: u64, to: u64) -> Result<Option<Vec<Event>>> {
        let rows: Option<Vec<(u64, u64, Vec<u8>)>> = self.with(|c| {
            let rk: Option<i64> = c
                .prepare_cached("SELECT rk FROM runs WHERE id = ?1")
                .and_then(|mut st| st.query_row([run.as_str()], |r| r.get(0)).optional())
                .map_err(self.sqlite())?;
            let Some(rk) = rk else { return Ok(None) };
            // Keys run from `rk << 32 | 0`; a batch starting before `from` may reach into it.
            let lo = event_key(rk, 0).unwrap_or(i64::MAX);
            let hi = event_key(rk, to.min(u64::from(u32::MAX))).unwrap_or(i64::MIN);
            c.prepare_cached(
                "SELECT key & 4294967295, last_seq, data FROM events
                 WHERE key BETWEEN ?1 AND ?2 AND last_seq >= ?3 ORDER BY key",
            )
            .and_then(|mut st| {
                st.query_map(params![lo, hi, to_i64(from)], |r| {
                    Ok((
                        r.get::<_, i64>(0)? as u64,
                        r.get::<_, i64>(1)? as u64,
                        r.get(2)?,
                    ))
                })?
                .collect()
            })
            .map(Some)
            .map_err(self.sqlite())
        })?;
        let Some(rows) = rows else { return Ok(None) };
        codec::decode_rows(run, rows, from, to, |first_seq, detail| Error::Corrupt {
            path: self.path().to_owned(),
            run: run.to_string(),
            first_seq,
            detail,
        })
        .map(Some)
    }

    /// Whether the run has commands nobody has taken yet.
    pub(crate) fn has_pending_commands(&self, run: &RunId) -> Result<bool> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM commands WHERE run_id = ?1 AND taken_at IS NULL)",
            )
            .and_then(|mut st| st.query_row([run.as_str()], |r| r.get(0)))
            .map_err(self.sqlite())
        })
    }

    fn record(&self, r: &Row<'_>) -> rusqlite::Result<RunRecord> {
        RunRow::read(r)?.into_record(self.host()).map_err(|detail| {
            rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, detail.into())
        })
    }
}

/// A result row of either backend's driver, read by column index.
pub(crate) trait Columns {
    /// The driver's error.
    type Error;
    /// A text column.
    fn text(&self, i: usize) -> Result<String, Self::Error>;
    /// A text column that may be NULL.
    fn text_opt(&self, i: usize) -> Result<Option<String>, Self::Error>;
    /// An integer column.
    fn int(&self, i: usize) -> Result<i64, Self::Error>;
    /// An integer column that may be NULL.
    fn int_opt(&self, i: usize) -> Result<Option<i64>, Self::Error>;
}

impl Columns for Row<'_> {
    type Error = rusqlite::Error;

    fn text(&self, i: usize) -> rusqlite::Result<String> {
        self.get(i)
    }

    fn text_opt(&self, i: usize) -> rusqlite::Result<Option<String>> {
        self.get(i)
    }

    fn int(&self, i: usize) -> rusqlite::Result<i64> {
        self.get(i)
    }

    fn int_opt(&self, i: usize) -> rusqlite::Result<Option<i64>> {
        self.get(i)
    }
}

/// A `runs` row joined with its claim, the columns of [`RUN_COLUMNS`] as every backend reads
/// them ([`RunRow::read`]); [`RunRow::into_record`] makes the record.
pub(crate) struct RunRow {
    id: String,
    graph: String,
    status: String,
    step: i64,
    last_seq: i64,
    terminal: Option<String>,
    error: Option<String>,
    fork_run: Option<String>,
    fork_seq: Option<i64>,
    created_ts: i64,
    updated_ts: i64,
    pid: Option<i64>,
    host: Option<String>,
    start_time: Option<i64>,
    claimed_at: Option<i64>,
    heartbeat: Option<i64>,
}

impl RunRow {
    /// Reads the columns of [`RUN_COLUMNS`], in order.
    pub(crate) fn read<C: Columns>(r: &C) -> Result<RunRow, C::Error> {
        Ok(RunRow {
            id: r.text(0)?,
            graph: r.text(1)?,
            status: r.text(2)?,
            step: r.int(3)?,
            last_seq: r.int(4)?,
            terminal: r.text_opt(5)?,
            error: r.text_opt(6)?,
            fork_run: r.text_opt(7)?,
            fork_seq: r.int_opt(8)?,
            created_ts: r.int(9)?,
            updated_ts: r.int(10)?,
            pid: r.int_opt(11)?,
            host: r.text_opt(12)?,
            start_time: r.int_opt(13)?,
            claimed_at: r.int_opt(14)?,
            heartbeat: r.int_opt(15)?,
        })
    }

    /// The run's record; whether its owner is alive is judged from `local_host` (see
    /// `claim::is_alive`). Fails with what is wrong when the status is not one this binary
    /// knows.
    pub(crate) fn into_record(self, local_host: &str) -> Result<RunRecord, String> {
        let status = RunStatus::parse(&self.status)
            .ok_or_else(|| format!("run {}: unknown run status '{}'", self.id, self.status))?;
        let fork = match (self.fork_run, self.fork_seq) {
            (Some(run), Some(seq)) => Some(ForkRef {
                run: RunId::from_string(run),
                seq: seq as u64,
            }),
            _ => None,
        };
        let owner = match (self.pid, self.host) {
            (Some(pid), Some(host)) => Some(Owner {
                pid: u32::try_from(pid).unwrap_or(0),
                host,
                start_time: self.start_time.map(|t| t as u64),
            }),
            _ => None,
        };
        let owner_alive = owner
            .as_ref()
            .is_some_and(|o| crate::claim::is_alive(o, local_host));
        Ok(RunRecord {
            id: RunId::from_string(self.id),
            summary: RunSummary {
                graph: self.graph,
                status,
                step: self.step as u64,
                last_seq: self.last_seq as u64,
                terminal: self.terminal.map(NodeId::new),
                error: self.error,
                fork,
                created_ts: self.created_ts,
                updated_ts: self.updated_ts,
            },
            owner,
            claimed_at: self.claimed_at,
            heartbeat: self.heartbeat,
            owner_alive,
        })
    }
}

/// Resolves an id or a unique prefix of one, for every backend: `exact(id)` reads a run (its
/// record, or only its id) by its id, `range(lo, hi, limit)` answers at most `limit` ids in
/// `[lo, hi)`, in order (ids compare bytewise).
pub(crate) fn resolve<T>(
    id_or_prefix: &str,
    exact: impl Fn(&str) -> Result<Option<T>>,
    range: impl FnOnce(&str, &str, i64) -> Result<Vec<String>>,
) -> Result<T> {
    if id_or_prefix.is_empty() {
        return Err(Error::RunNotFound(String::new()));
    }
    if let Some(rec) = exact(id_or_prefix)? {
        return Ok(rec);
    }
    // Ids compare bytewise, so the prefix's matches are the range [prefix, prefix+U+10FFFF).
    let upper = format!("{id_or_prefix}\u{10FFFF}");
    let ids = range(id_or_prefix, &upper, MAX_CANDIDATES as i64 + 1)?;
    match ids.as_slice() {
        [] => Err(Error::RunNotFound(id_or_prefix.to_owned())),
        [one] => exact(one)?.ok_or_else(|| Error::RunNotFound(id_or_prefix.to_owned())),
        _ => {
            let mut candidates = ids;
            if candidates.len() > MAX_CANDIDATES {
                candidates.truncate(MAX_CANDIDATES);
                candidates.push("…".to_owned());
            }
            Err(Error::AmbiguousRun {
                prefix: id_or_prefix.to_owned(),
                candidates,
            })
        }
    }
}
