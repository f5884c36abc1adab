//! The Trellis durable store: one SQLite file per workspace, `<workspace>/.trellis/trellis.db`,
//! by default.
//!
//! [`Store`] (`dyn` [`Backend`]) is what the rest of Trellis holds, as `Arc<Store>`: the
//! engine's [`Journal`](trellis_graph::Journal) seam, one trait per domain for the features
//! that persist through it, and the lifecycle ([`Backend::flush`], [`Backend::vacuum`],
//! [`Backend::stats`], [`Backend::size_on_disk`], [`Backend::owner`],
//! [`Backend::location`]). `Store::open` opens the SQLite backend, [`SqliteStore`]. A
//! feature depends on the narrow trait it uses (the tool knowledge graph takes a `&dyn
//! ToolGraphStore`, the review ops a `&dyn ReviewStore`), not on `Store`; the SQL of every
//! domain stays in this crate, in the domain's module, so all of them share one migration
//! sequence and one writer thread whose group commit spans domains. A second backend
//! implements the same traits. `use trellis_store::prelude::*` brings every trait into
//! scope.
//!
//! # Domains
//!
//! | domain | trait | tables | module |
//! | ------ | ----- | ------ | ------ |
//! | run journal: runs, event logs, forks' checkpoints, command inbox, claims | [`RunStore`] (and [`Journal`](trellis_graph::Journal)) | `runs`, `events`, `run_owners`, `commands` | `runs` (reads), `ops` (writes), `claim` |
//! | tool and model calls, a run's usage | [`UsageStore`] | `tool_calls`, `model_calls` | `usage` |
//! | change sets, their apply/undo/redo operations, reviewers' comments | [`ReviewStore`] | `change_sets`, `change_ops`, `review_comments` | `review` |
//! | runs' versioned artifacts | [`ArtifactStore`] | `artifacts` | `artifacts` |
//! | session and workspace streams (a run's stream is its event log) | [`StreamStore`] | `stream_events` | `streams` |
//! | agent and channel sessions, materialised from their streams | [`SessionStore`] | `sessions`, `turns`, `turn_messages`, `turn_thoughts`, `turn_tools` | `sessions`, `session_rows` (what each session event writes, and the records read back: every backend's) |
//! | front-end clients' sessions | [`ClientSessionStore`] | `client_sessions`, `client_turns` | `client_sessions` |
//! | runs' leases for workers (PostgreSQL) | [`LeaseStore`] | `run_leases` | `lease` |
//! | tool DAG executions' checkpoints | [`DagCheckpointStore`] | `dag_checkpoints` | `dag_checkpoints` |
//! | the tool knowledge graph | [`ToolGraphStore`] | `tool_nodes`, `tool_dependency`, `tool_executions`, `speculations` | `toolgraph` |
//!
//! Shared by every domain: `schema` (the migrations), `writer` (the writer thread, which
//! hands each record to its domain's SQL), `read` (the pool of read connections), `codec`
//! (event blobs), `error`.
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
//! | `client_sessions` | front-end client's session | id, client (`acp`), working directory, title, config JSON, created/updated time |
//! | `client_turns` | prompt turn of a client session | session, turn, run, request, workflow, plan JSON, created time |
//! | `dag_checkpoints` | paused tool DAG execution | execution id, state JSON, updated time |
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
//!   is the order of [`Journal::append`](trellis_graph::Journal::append) calls. A batch that
//!   fails (say, a duplicate seq) is rolled back alone, through a savepoint, and fails the
//!   run's later batches in the same transaction; a transaction that fails to begin or
//!   commit fails every batch in it.
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
//! * A batch of service stream events ([`StreamStore::append_stream`]) is written like a run's
//!   batch: in the writer's group commit, fsynced under [`Synchronous::Full`], rolled back
//!   alone through its savepoint when it fails. Each event must follow its stream's last one
//!   (a duplicate or a gap fails the batch), and the session tables are updated from the
//!   session events in the same savepoint, so they never disagree with the log.
//! * Readers use separate connections; WAL mode lets them read while the writer commits.

mod artifacts;
mod backend;
mod claim;
mod client_sessions;
mod codec;
mod config;
mod dag_checkpoints;
mod error;
mod lease;
mod notice;
mod ops;
#[cfg(feature = "postgres")]
pub mod pg;
mod read;
mod review;
mod runs;
mod schema;
mod session_rows;
mod sessions;
mod streams;
mod toolgraph;
mod usage;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use serde::Serialize;
use tokio::sync::oneshot;
use trellis_graph::{Batch, JournalError};
use trellis_protocol::{Command, RunId};

pub use artifacts::{ArtifactStore, NewArtifact};
pub use backend::{Backend, Store};
pub use claim::hostname;
pub use client_sessions::ClientSessionStore;
pub use config::StoreConfig;
pub use dag_checkpoints::DagCheckpointStore;
pub use error::{Error, Result};
pub use lease::{Lease, LeaseStore};
pub use notice::Notice;
pub use review::{NewReviewComment, ReviewCommentRecord, ReviewStore};
pub use runs::{ContinuedGraph, RunGraphs, RunStore};
pub use schema::LATEST_VERSION as SCHEMA_VERSION;
pub use sessions::SessionStore;
pub use streams::StreamStore;
pub use toolgraph::{
    CachedEmbedding, CallOutcome, EdgeObservation, NewSpeculation, NewToolExecution,
    SpeculationOutcome, SpeculationRecord, ToolEdgeRecord, ToolGraphSnapshot, ToolGraphStore,
    ToolNodeRecord, ToolNodeUpsert,
};
pub use usage::UsageStore;
// The records the store reads and writes are wire types: the service answers with them.
pub use trellis_protocol::records::{
    ChangeOpRecord, ChangeSetRecord, Checkpoint, ClientSession, ClientTurn, ModelCallRecord, Owner,
    RunFilter, RunRecord, RunUsage, SessionFilter, SessionRecord, SessionStatus, ToolCallRecord,
    TurnRecord, TurnStatus, TurnToolRecord, UsageTotals,
};

use read::Reader;
use writer::{Counters, Writer};

/// Every domain trait of the store, to bring their methods into scope:
/// `use trellis_store::prelude::*;`.
pub mod prelude {
    pub use crate::{
        ArtifactStore, Backend, ClientSessionStore, DagCheckpointStore, LeaseStore, ReviewStore,
        RunStore, SessionStore, StreamStore, ToolGraphStore, UsageStore,
    };
}

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
    /// Service stream batches committed ([`StreamStore::append_stream`]).
    pub stream_batches: u64,
    /// Service stream events committed.
    pub stream_events: u64,
}

/// The SQLite backend: one database file per workspace. See the crate docs for the schema
/// and guarantees.
///
/// Dropping it commits everything already sent and stops its writer thread.
pub struct SqliteStore {
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

/// A record for the writer thread ([`Msg::Record`]); the writer hands it to its domain's
/// SQL.
pub(crate) enum Record {
    ToolCall(ToolCallRecord),
    ChangeSet(ChangeSetRecord),
    ChangeOp(ChangeOpRecord),
    ModelCall(ModelCallRecord),
    Artifact(crate::artifacts::NewArtifact),
    ArtifactStatus(crate::artifacts::StatusChange),
    ClientSession(ClientSession),
    ClientTurn(ClientTurn),
    ReviewComment(crate::review::NewReviewComment),
    ToolNodes(Vec<crate::toolgraph::ToolNodeUpsert>),
    ToolEmbeddings(Vec<crate::toolgraph::CachedEmbedding>),
    ToolExecutions(Vec<crate::toolgraph::NewToolExecution>),
    Speculation(crate::toolgraph::NewSpeculation),
    DagCheckpoint(crate::dag_checkpoints::DagCheckpointWrite),
}

impl SqliteStore {
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

impl Backend for SqliteStore {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    /// This process, as recorded in the claims it takes.
    fn owner(&self) -> &Owner {
        &self.me
    }

    /// The writer's counters.
    fn stats(&self) -> StoreStats {
        self.counters.stats()
    }

    /// Bytes the store occupies: the database file plus its write-ahead log.
    fn size_on_disk(&self) -> Result<u64> {
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
    fn flush(&self) -> Result<()> {
        self.request(Msg::Flush)?
    }

    /// Rewrites the file without free pages and empties the write-ahead log (after
    /// committing everything sent before).
    fn vacuum(&self) -> Result<()> {
        self.request(Msg::Vacuum)?
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Closing the channel lets the writer commit what is queued and return.
        drop(self.tx.take());
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Keeps a cached statement's plan when new values are bound (SQLite's query planner
/// stability guarantee). Without it SQLite marks a statement whose plan may depend on a
/// bound value (a `LIMIT ?`, a `LIKE ?`) as expired at every bind and parses and plans it
/// again at the next step: 2.3 % of `trellis serve`'s CPU on the G1 benchmark went to
/// re-preparing the stream reads. Trellis runs no `ANALYZE`, so there are no statistics a
/// bound value could make use of.
pub(crate) fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(|_| ())
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
    stable_plans(&conn).map_err(open)?;
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
