//! The Trellis durable store: one SQLite file per workspace, `<workspace>/.trellis/trellis.db`.
//!
//! [`Store`] implements the engine's [`Journal`] seam and offers the read API the CLI uses
//! (`runs list`, `runs show`, `runs events`, `runs cancel` …). For the runtime service it
//! also keeps the session and workspace streams ([`Store::append_stream`],
//! [`Store::stream_events`]), the sessions and turns materialised from them
//! ([`Store::sessions`], [`Store::turns`]) and runs' artifacts ([`Store::put_artifact`]).
//!
//! # Schema
//!
//! | table | one row per | holds |
//! | ----- | ----------- | ----- |
//! | `schema_migrations` | applied migration | `version, name, applied_at` |
//! | `runs` | run | id, graph, status, step, last seq, terminal, error, fork parent, created/updated time; integer key `rk` |
//! | `events` | appended batch | rowid `(rk << 32) \| first_seq`, `last_seq`, `data` blob |
//! | `run_owners` | claimed run | `pid`, `host`, process start time, claim time, heartbeat |
//! | `commands` | queued command | run id, JSON body of a [`trellis_protocol::Command`], `taken_at` |
//! | `tool_calls` | tool call | run and node id, tool, JSON arguments, decision, error flag, summary, duration |
//! | `change_sets` | run with a worktree | repository, branch, base commit, worktree, review state and outcome |
//! | `change_ops` | apply / undo / redo | run id, seq, kind, state, journal directory, file count |
//! | `model_calls` | model call | run id, stage, agent, profile, model, prompt/completion/cached tokens, whether reported, cost, outcome, time |
//! | `stream_events` | session or workspace stream event | stream key (`session:<id>`, `workspace`), seq, ts, submission id, JSON body; key `(stream, seq)` |
//! | `sessions` | agent or channel session | owner (`agent`: run, node, role; `channel`: channel), status (`running`, `completed`, `error`), error, created/updated time, last seq |
//! | `turns` | model call of a session | session, turn, attempt, status (`running`, `completed`, `failed`), started/finished time, prompt/completion tokens, assistant message JSON, error |
//! | `turn_messages` | message of a turn | session, turn, role (`assistant`: the deltas appended; `user`: messages before the call), text |
//! | `turn_thoughts` | turn that thought | session, turn, the thinking deltas appended |
//! | `turn_tools` | tool call of a turn | session, turn, call id, tool, JSON input, output, status (`running` or the `ToolStatus` name), start time, duration |
//! | `artifacts` | artifact version | run, node, kind, version (1, 2, … per run and kind), content, status, feedback, created/updated time |
//! | `review_comments` | reviewer's comment on a change set | run, node, author, comment JSON (path, line, hunk, severity, body), created time |
//! | `tool_nodes` | tool of the tool knowledge graph | name, MCP server, description, cached embedding and its embedder key, calls, successes, updated time |
//! | `tool_dependency` | learned dependency between two tools | from, to, observed count, success count, confidence |
//! | `tool_executions` | execution the tool graph learned from | context, tools (JSON), success, created time |
//! | `speculations` | speculative execution's outcome | context, tools (JSON), confidence, outcome (`used`, `wasted`, `failed`), created time |
//!
//! An event blob holds a batch's events as compact JSON — the run id not repeated, seqs
//! implied by the row's range, timestamps as deltas — compressed with LZ4 against a static
//! dictionary of the JSON every event repeats. Keying event rows by an integer rowid keeps
//! blobs of up to ~4 KB on their leaf page. Measured after `VACUUM`, including the `runs` row
//! and index entries: a 9-step, 48-event run appended one batch per step takes ~3.3 KB; the
//! engine's `feature` demo run (64 events) takes ~2.2 KB. Migrations are versioned and
//! transactional; a file written by a newer trellis is refused rather than misread.
//!
//! # Durability
//!
//! * A batch's events and its run summary are written in the **same transaction**: after a
//!   crash the `runs` row never claims events that are not there, and a batch is either
//!   entirely present or entirely absent.
//! * All writes of a process go through **one writer thread** that practises **group
//!   commit**: it takes every batch queued while the previous transaction was committing and
//!   commits them together, so one fsync makes many steps of many runs durable. A batch's
//!   [`trellis_graph::Commit`] resolves only after its transaction committed. Per-run order
//!   is the order of [`Journal::append`] calls. A batch that fails (say, a duplicate seq) is
//!   rolled back alone, through a savepoint, and fails the run's later batches in the same
//!   transaction; a transaction that fails to begin or commit fails every batch in it.
//! * [`Synchronous::Full`] (default) fsyncs the write-ahead log at every commit that holds a
//!   batch or an enqueued command: those survive power loss and OS crashes.
//!   [`Synchronous::Normal`] skips that fsync (the WAL is synced only at checkpoints): a
//!   committed batch survives the process crashing, but the last commits before a power loss
//!   or kernel crash may be lost — never corrupting the file, and never leaving a partial
//!   batch. With the engine's replay-based resume, losing the tail only means re-running those
//!   steps.
//! * Claims, releases and command takes never need an fsync (after a power loss every
//!   claiming process is dead; a lost take re-delivers a command that was not yet acted on
//!   durably), so a transaction holding only those commits without one, and a run costs one
//!   fsync per batch: [`StoreStats::synced_commits`] counts them.
//! * A batch of service stream events ([`Store::append_stream`]) is written like a run's
//!   batch: in the writer's group commit, fsynced under [`Synchronous::Full`], rolled back
//!   alone through its savepoint when it fails. Each event must follow its stream's last one
//!   (a duplicate or a gap fails the batch), and the session tables are updated from the
//!   session events in the same savepoint, so they never disagree with the log.
//! * Readers use separate connections; WAL mode lets them read while the writer commits.

mod artifacts;
mod claim;
mod client_sessions;
mod codec;
mod dag_checkpoints;
mod error;
mod ops;
mod read;
mod records;
mod review_comments;
mod schema;
mod sessions;
mod streams;
mod toolgraph;
mod usage;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use serde::Serialize;
use tokio::sync::oneshot;
use trellis_graph::{Batch, Commit, Journal, JournalError};
use trellis_protocol::{Command, Event, EventKind, RunId};

pub use artifacts::NewArtifact;
pub use claim::hostname;
pub use error::{Error, Result};
pub use review_comments::{NewReviewComment, ReviewCommentRecord};
pub use schema::LATEST_VERSION as SCHEMA_VERSION;
pub use toolgraph::{
    CachedEmbedding, CallOutcome, EdgeObservation, NewSpeculation, NewToolExecution,
    SpeculationOutcome, SpeculationRecord, ToolEdgeRecord, ToolGraphSnapshot, ToolNodeRecord,
    ToolNodeUpsert,
};
// The records the store reads and writes are wire types: the service answers with them.
pub use trellis_protocol::records::{
    ChangeOpRecord, ChangeSetRecord, Checkpoint, ClientSession, ClientTurn, ModelCallRecord, Owner,
    RunFilter, RunRecord, RunUsage, SessionFilter, SessionRecord, SessionStatus, ToolCallRecord,
    TurnRecord, TurnStatus, TurnToolRecord, UsageTotals,
};

use read::Reader;
use writer::{Counters, Writer};

/// The store's directory inside a workspace.
pub const STORE_DIR: &str = ".trellis";
/// The database file's name inside [`STORE_DIR`].
pub const DB_FILE: &str = "trellis.db";

/// Prepared statements each connection keeps (rusqlite's default of 16 is fewer than the
/// writer's append paths use).
const STATEMENT_CACHE: usize = 64;

/// How hard each commit works to survive a crash (SQLite `PRAGMA synchronous`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Synchronous {
    /// Fsync the WAL at every commit: committed batches survive power loss.
    #[default]
    Full,
    /// Fsync only at checkpoints: committed batches survive a process crash; the last ones
    /// may be lost on power loss or an OS crash (the file stays consistent).
    Normal,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// How to open a [`Store`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Crash safety of commits.
    pub synchronous: Synchronous,
    /// How long to wait for another process's lock before failing.
    pub busy_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// Counters of the writer thread since the store was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStats {
    /// Transactions committed.
    pub commits: u64,
    /// Of those, the ones committed with `synchronous = FULL` (one WAL fsync each): those
    /// holding appended batches or enqueued commands under [`Synchronous::Full`]. Claims,
    /// releases and command takes alone commit without an fsync.
    pub synced_commits: u64,
    /// Transactions that failed to begin or commit.
    pub failed_commits: u64,
    /// Batches committed.
    pub batches: u64,
    /// Events committed.
    pub events: u64,
    /// Event blob bytes committed.
    pub bytes_written: u64,
    /// The most messages one transaction carried.
    pub largest_group: u64,
    /// Service stream batches committed ([`Store::append_stream`]).
    pub stream_batches: u64,
    /// Service stream events committed.
    pub stream_events: u64,
}

/// The durable store of one workspace. See the crate docs for the schema and guarantees.
///
/// Dropping it commits everything already sent and stops its writer thread.
pub struct Store {
    path: PathBuf,
    tx: Option<Sender<Msg>>,
    writer: Option<JoinHandle<()>>,
    reader: Reader,
    counters: Arc<Counters>,
    me: Owner,
}

/// A request to the writer thread: sent by the [`Store`] methods of every module, served by
/// the `writer` module.
pub(crate) enum Msg {
    /// Append a batch with its encoded events (encoded on the caller's thread, so the one
    /// writer thread spends its time in SQLite only); answered through the engine's
    /// [`trellis_graph::Commit`].
    Append(Batch, Vec<u8>, oneshot::Sender<Result<(), JournalError>>),
    /// Append a batch of service stream events (encoded on the caller's thread); answered
    /// like [`Msg::Append`].
    Stream(
        Vec<crate::streams::Encoded>,
        oneshot::Sender<Result<(), JournalError>>,
    ),
    /// Claim a run for this process.
    Claim(RunId, Sender<Result<(), JournalError>>),
    /// Drop this process's claim (or, with `force`, anyone's).
    Release {
        run: RunId,
        force: bool,
        reply: Sender<Result<()>>,
    },
    /// Queue a command (JSON body) for a run; answers the command's id.
    Enqueue(RunId, String, Sender<Result<i64>>),
    /// Take the run's pending commands.
    Take(RunId, Sender<Result<Vec<Command>>>),
    /// Answer once everything sent before is committed.
    Flush(Sender<Result<()>>),
    /// Rebuild the file compactly and truncate the WAL (runs outside any group).
    Vacuum(Sender<Result<()>>),
    /// Write a tool-call or change record; answers the new row id (0 for upserts).
    Record(Record, Sender<Result<i64>>),
}

/// A record for the writer thread ([`Msg::Record`]); `records::write` writes it.
pub(crate) enum Record {
    ToolCall(ToolCallRecord),
    ChangeSet(ChangeSetRecord),
    ChangeOp(ChangeOpRecord),
    ModelCall(ModelCallRecord),
    Artifact(crate::artifacts::NewArtifact),
    ArtifactStatus(crate::artifacts::StatusChange),
    ClientSession(ClientSession),
    ClientTurn(ClientTurn),
    ReviewComment(crate::review_comments::NewReviewComment),
    ToolNodes(Vec<crate::toolgraph::ToolNodeUpsert>),
    ToolEmbeddings(Vec<crate::toolgraph::CachedEmbedding>),
    ToolExecutions(Vec<crate::toolgraph::NewToolExecution>),
    Speculation(crate::toolgraph::NewSpeculation),
    DagCheckpoint(crate::dag_checkpoints::DagCheckpointWrite),
}

/// The graphs of a stored run ([`Store::graphs`]).
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

impl Store {
    /// Opens (creating if needed) the store of `workspace`: `<workspace>/.trellis/trellis.db`.
    pub fn open_workspace(workspace: impl AsRef<Path>, options: StoreOptions) -> Result<Self> {
        let dir = workspace.as_ref().join(STORE_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| Error::CreateDir {
            path: dir.clone(),
            source,
        })?;
        Self::open(dir.join(DB_FILE), options)
    }

    /// Opens the database file at `path` only if it exists, creating nothing otherwise: for
    /// commands that only read, or act on runs that must already be there. A missing file
    /// is [`Error::NotFound`].
    pub fn open_existing(path: impl AsRef<Path>, options: StoreOptions) -> Result<Self> {
        let path = path.as_ref();
        match std::fs::metadata(path) {
            Ok(_) => Self::open(path, options),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(Error::NoStore(path.to_owned()))
            }
            Err(source) => Err(Error::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Opens (creating if needed) the database file at `path` and migrates it.
    pub fn open(path: impl AsRef<Path>, options: StoreOptions) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let mut conn = open_writer(&path, options)?;
        schema::migrate(&mut conn, &path)?;

        let me = claim::current_owner();
        let counters = Arc::new(Counters::default());
        let (tx, rx) = mpsc::channel();
        let writer = Writer {
            conn,
            rx,
            counters: counters.clone(),
            path: path.clone(),
            me: me.clone(),
            synchronous: options.synchronous,
            current: options.synchronous,
        };
        let handle = std::thread::Builder::new()
            .name("trellis-store-writer".into())
            .spawn(move || writer.run())
            .map_err(|source| Error::Thread {
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            reader: Reader::new(path.clone(), options.busy_timeout, me.host.clone()),
            path,
            tx: Some(tx),
            writer: Some(handle),
            counters,
            me,
        })
    }

    /// The database file.
    pub fn db_path(&self) -> &Path {
        &self.path
    }

    /// This process, as recorded in the claims it takes.
    pub fn owner(&self) -> &Owner {
        &self.me
    }

    /// The writer's counters.
    pub fn stats(&self) -> StoreStats {
        let c = &self.counters;
        StoreStats {
            commits: c.commits.load(Ordering::Relaxed),
            synced_commits: c.synced_commits.load(Ordering::Relaxed),
            failed_commits: c.failed_commits.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            events: c.events.load(Ordering::Relaxed),
            bytes_written: c.bytes.load(Ordering::Relaxed),
            largest_group: c.largest_group.load(Ordering::Relaxed),
            stream_batches: c.stream_batches.load(Ordering::Relaxed),
            stream_events: c.stream_events.load(Ordering::Relaxed),
        }
    }

    /// Bytes the store occupies: the database file plus its write-ahead log.
    pub fn size_on_disk(&self) -> Result<u64> {
        let mut total = 0;
        for p in [self.path.clone(), sibling(&self.path, "-wal")] {
            match std::fs::metadata(&p) {
                Ok(m) => total += m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(Error::Io { path: p, source }),
            }
        }
        Ok(total)
    }

    /// Waits until everything sent before is committed.
    pub fn flush(&self) -> Result<()> {
        self.request(Msg::Flush)?
    }

    /// Rewrites the file without free pages and empties the write-ahead log (after
    /// committing everything sent before).
    pub fn vacuum(&self) -> Result<()> {
        self.request(Msg::Vacuum)?
    }

    /// Queues `command` for `run`, to be taken by the process executing it (through
    /// [`Journal::take_commands`]). Returns the command's inbox id.
    pub fn enqueue_command(&self, run: &RunId, command: &Command) -> Result<i64> {
        let body = serde_json::to_string(command).map_err(|source| Error::Encode {
            what: "command",
            source,
        })?;
        self.request(|reply| Msg::Enqueue(run.clone(), body, reply))?
    }

    /// Removes the claim on `run` whoever holds it (for an owner on another host that is
    /// known to be gone).
    pub fn break_claim(&self, run: &RunId) -> Result<()> {
        self.request(|reply| Msg::Release {
            run: run.clone(),
            force: true,
            reply,
        })?
    }

    /// Runs newest first.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        self.reader.list(filter)
    }

    /// The run whose id is `id_or_prefix` or, failing that, the only run whose id starts
    /// with it.
    pub fn get_run(&self, id_or_prefix: &str) -> Result<RunRecord> {
        self.reader.resolve(id_or_prefix)
    }

    /// The run's events with `from_seq <= seq <= to_seq` (`None`: to the end), in seq order.
    pub fn events(&self, run: &RunId, from_seq: u64, to_seq: Option<u64>) -> Result<Vec<Event>> {
        self.reader
            .events(run, from_seq, to_seq.unwrap_or(u64::MAX))?
            .ok_or_else(|| Error::RunNotFound(run.to_string()))
    }

    /// The graph name and parameters a run was started with (its `runStarted` event), from
    /// which its graph is rebuilt.
    pub fn started(&self, run: &RunId) -> Result<(String, serde_json::Value)> {
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
    pub fn graphs(&self, run: &RunId) -> Result<RunGraphs> {
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
    pub fn checkpoints(&self, run: &RunId) -> Result<Vec<Checkpoint>> {
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

    /// Records a tool call; returns its row id once committed.
    pub fn record_tool_call(&self, record: ToolCallRecord) -> Result<i64> {
        self.request(|reply| Msg::Record(Record::ToolCall(record), reply))?
    }

    /// Queues a tool-call record without waiting for its commit (for callers on an async
    /// executor; [`Store::flush`] waits for it). A failure is not reported.
    pub fn record_tool_call_nowait(&self, record: ToolCallRecord) {
        if let Some(tx) = &self.tx {
            let (reply, _) = mpsc::channel();
            drop(tx.send(Msg::Record(Record::ToolCall(record), reply)));
        }
    }

    /// The run's tool calls, in order.
    pub fn tool_calls(&self, run: &RunId) -> Result<Vec<ToolCallRecord>> {
        self.reader.tool_calls(run)
    }

    /// Records a model call's usage; returns its row id once committed.
    pub fn record_model_call(&self, record: ModelCallRecord) -> Result<i64> {
        self.request(|reply| Msg::Record(Record::ModelCall(record), reply))?
    }

    /// Queues a model call's usage without waiting for its commit (for callers on an async
    /// executor; [`Store::flush`] waits for it). A failure is not reported.
    pub fn record_model_call_nowait(&self, record: ModelCallRecord) {
        drop(self.post(|reply| Msg::Record(Record::ModelCall(record), reply)));
    }

    /// The run's model calls, in order.
    pub fn model_calls(&self, run: &RunId) -> Result<Vec<ModelCallRecord>> {
        self.reader.model_calls(run)
    }

    /// The run's model usage: in total, per stage and per agent.
    pub fn run_usage(&self, run: &RunId) -> Result<RunUsage> {
        self.reader.run_usage(run)
    }

    /// Inserts or updates a change set (keyed by run id).
    pub fn put_change_set(&self, record: ChangeSetRecord) -> Result<()> {
        self.request(|reply| Msg::Record(Record::ChangeSet(record), reply))?
            .map(drop)
    }

    /// The change set of the run `id_or_prefix` (an id or a unique prefix).
    pub fn change_set(&self, id_or_prefix: &str) -> Result<ChangeSetRecord> {
        self.reader.change_set(id_or_prefix)
    }

    /// Every change set, newest first.
    pub fn change_sets(&self) -> Result<Vec<ChangeSetRecord>> {
        self.reader.change_sets()
    }

    /// Inserts or updates a change operation (keyed by run id and seq).
    pub fn put_change_op(&self, record: ChangeOpRecord) -> Result<()> {
        self.request(|reply| Msg::Record(Record::ChangeOp(record), reply))?
            .map(drop)
    }

    /// The run's change operations, in order.
    pub fn change_ops(&self, run: &RunId) -> Result<Vec<ChangeOpRecord>> {
        self.reader.change_ops(run)
    }

    /// Sends a request built around a reply channel without waiting for the answer.
    fn post<T>(&self, make: impl FnOnce(Sender<T>) -> Msg) -> Result<()> {
        let (reply, _ignored) = mpsc::channel();
        self.tx
            .as_ref()
            .ok_or_else(|| Error::Closed(self.path.clone()))?
            .send(make(reply))
            .map_err(|_| Error::Closed(self.path.clone()))
    }

    /// Sends a request built around a reply channel and waits for the answer.
    fn request<T>(&self, make: impl FnOnce(Sender<T>) -> Msg) -> Result<T> {
        let (reply, answer) = mpsc::channel();
        let closed = || Error::Closed(self.path.clone());
        self.tx
            .as_ref()
            .ok_or_else(closed)?
            .send(make(reply))
            .map_err(|_| closed())?;
        answer.recv().map_err(|_| closed())
    }
}

impl Journal for Store {
    fn append(&self, batch: Batch) -> Commit {
        let (ack, commit) = Commit::pending();
        match &self.tx {
            // If the writer is gone the message (and its ack) is dropped: the commit
            // resolves to `JournalError::Closed`.
            Some(tx) => match codec::encode(&batch.events) {
                Ok(blob) => drop(tx.send(Msg::Append(batch, blob, ack))),
                Err(e) => drop(ack.send(Err(JournalError::Backend(format!(
                    "cannot encode the events of run {}: {e}",
                    batch.run
                ))))),
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

impl Drop for Store {
    fn drop(&mut self) {
        // Closing the channel lets the writer commit what is queued and return.
        drop(self.tx.take());
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Opens the writer's connection: WAL, the requested `synchronous`, the busy timeout.
fn open_writer(path: &Path, options: StoreOptions) -> Result<Connection> {
    let open = |source| Error::Open {
        path: path.to_owned(),
        source,
    };
    let conn = Connection::open(path).map_err(open)?;
    conn.busy_timeout(options.busy_timeout).map_err(open)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(open)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::NoWal {
            path: path.to_owned(),
            mode,
        });
    }
    conn.pragma_update(None, "synchronous", options.synchronous.pragma())
        .map_err(open)?;
    Ok(conn)
}

/// `path` with `suffix` appended to its file name (`trellis.db-wal`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}
