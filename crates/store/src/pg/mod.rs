//! The PostgreSQL backend (feature `postgres`): `[store] url = "postgres://…"`.
//!
//! Team scale — many workers and servers over one database — where the SQLite file serves
//! one machine. This module is its foundation: [`PgStore::connect`] parses the URL, connects,
//! and brings the database to [`crate::SCHEMA_VERSION`] through migrations that mirror the
//! SQLite ones (the same versions and names; `schema` says how each type translates). The
//! run journal — [`crate::RunStore`] and the engine's [`trellis_graph::Journal`] — is
//! implemented: reads in `runs`, appends with group commit in `journal`, claims and the
//! command inbox in `ops`, workers' leases of runs ([`crate::LeaseStore`]) in `lease`, which
//! fence the journal's writes. So are the service's streams ([`crate::StreamStore`], `streams`:
//! a batch per transaction, its statements sent together by `pipeline`) and the sessions
//! materialised from them ([`crate::SessionStore`], `sessions`), client sessions and DAG
//! checkpoints, usage, review, artifacts and the tool knowledge graph: [`PgStore`] is a
//! [`crate::Backend`] (`backend`), opened by `Store::open_configured` for `[store] url`.
//!
//! The client is tokio-postgres (see docs/architecture.md), driven by a thread of its own
//! (`exec`): [`PgStore::read`] and [`PgStore::write`] run an async closure with a connection
//! and block until it answers, so the store stays a set of plain functions callable from
//! threads and from async code.
//!
//! Errors are [`PgError`]s inside [`crate::Error::Postgres`]; every one names the setting,
//! `[store] url`, with the password redacted ([`redact`]).

mod artifacts;
mod backend;
mod client_sessions;
mod dag_checkpoints;
mod error;
mod exec;
mod journal;
mod lease;
mod notify;
mod ops;
mod pipeline;
mod review;
mod runs;
mod schema;
mod sessions;
mod streams;
mod toolgraph;
mod usage;
mod values;

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;

pub use error::{PgError, redact};
pub use tokio_postgres;

use crate::Synchronous;
use exec::{Executor, Lane};

/// Read connections [`PgOptions::default`] keeps. Measured by the ignored test
/// `pg_readers_throughput` (crates/store/tests/suite/pg_exec.rs: 8 threads loading a run's
/// events, 4 blobs of 1.5 KB, through 1 to 8 readers; dev build, loopback, the 2-core machine
/// under a concurrent load of ~7): medians of 5 rounds 2.7k calls/s with one reader, 4.6k
/// with two, 4.0k / 5.0k / 5.2k with 3 / 4 / 8 — the second connection is worth ~70 %, more
/// are within the noise, and each costs the server a backend process (a process holds one
/// writer plus these).
pub const DEFAULT_READERS: usize = 2;

/// How to connect a [`PgStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PgOptions {
    /// Crash safety of the writer's commits: [`Synchronous::Full`] waits for the server's
    /// WAL flush at every commit; [`Synchronous::Normal`] sets `synchronous_commit = off`
    /// on the writing connection (a server crash may lose the last commits, never half of
    /// one).
    pub synchronous: Synchronous,
    /// How long to wait for a connection to the server, unless the URL sets
    /// `connect_timeout`.
    pub connect_timeout: Duration,
    /// Read connections (at least one), each opened when first needed.
    pub readers: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            connect_timeout: Duration::from_secs(10),
            readers: DEFAULT_READERS,
        }
    }
}

/// What the closure given to [`PgStore::read`] or [`PgStore::write`] fails with: a client
/// error (answered as [`PgError::Query`], naming the database) or a store error of its own,
/// both converted by `?`.
#[derive(Debug)]
pub enum JobError {
    /// A statement failed.
    Pg(tokio_postgres::Error),
    /// The job's own failure (a row it cannot decode, say).
    Store(crate::Error),
}

impl JobError {
    /// The store's error: a client error as [`PgError::Query`] naming `url` (the redacted
    /// `[store] url`).
    pub(crate) fn into_error(self, url: &str) -> crate::Error {
        match self {
            JobError::Pg(source) => PgError::query(url, source).into(),
            JobError::Store(e) => e,
        }
    }
}

impl From<tokio_postgres::Error> for JobError {
    fn from(e: tokio_postgres::Error) -> Self {
        JobError::Pg(e)
    }
}

impl From<crate::Error> for JobError {
    fn from(e: crate::Error) -> Self {
        JobError::Store(e)
    }
}

/// A PostgreSQL store, connected and migrated. Dropping it runs the jobs already queued,
/// then closes its connections and stops its thread.
pub struct PgStore {
    exec: Executor,
    url: Arc<str>,
    version: i64,
    /// The run journal's writes: the open group of batches, claims' owner, counters.
    journal: journal::JournalState,
}

impl PgStore {
    /// Connects to the database of `url` (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`,
    /// the `[store] url` setting) and migrates it to [`crate::SCHEMA_VERSION`]. Fails with
    /// [`PgError::BadUrl`], [`PgError::Connect`], [`PgError::Auth`], [`PgError::NoDatabase`],
    /// [`PgError::NewerSchema`] or [`PgError::Migration`], each naming the setting.
    pub fn connect(url: &str, options: PgOptions) -> crate::Result<PgStore> {
        Self::connect_with_password(url, None, options)
    }

    /// [`PgStore::connect`] with the password given apart from the URL (read from the
    /// environment variable `[store] password_env` names); it takes the place of one in the
    /// URL.
    pub fn connect_with_password(
        url: &str,
        password: Option<&str>,
        options: PgOptions,
    ) -> crate::Result<PgStore> {
        let shown: Arc<str> = redact(url).into();
        let bad = |detail: String| PgError::BadUrl {
            url: shown.to_string(),
            detail,
        };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(bad("it must start with postgres:// or postgresql://".into()).into());
        }
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e| bad(error::describe(&e)))?;
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(bad(
                "it asks for TLS (sslmode=require), which this trellis does not speak yet; \
                 use sslmode=disable on a trusted network"
                    .into(),
            )
            .into());
        }
        if let Some(password) = password {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("trellis");
        }
        // The server's default database is the user's name.
        let database = config
            .get_dbname()
            .or(config.get_user())
            .unwrap_or_default()
            .to_owned();
        let (exec, version) = Executor::start(config, database, shown.clone(), options)?;
        Ok(PgStore {
            exec,
            url: shown,
            version,
            journal: journal::JournalState::new(options.synchronous),
        })
    }

    /// The `[store] url` setting, redacted.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema version the database was at once connected (after migrating).
    pub fn schema_version(&self) -> i64 {
        self.version
    }

    /// Runs `f` on one of the read connections and answers what it answers; blocks until
    /// then. Reads run side by side on [`PgOptions::readers`] connections whose
    /// transactions are read-only. `f` must not call the store.
    pub fn read<T, F>(&self, f: F) -> crate::Result<T>
    where
        T: Send + 'static,
        F: AsyncFnOnce(&mut Client) -> Result<T, JobError> + Send + 'static,
    {
        self.exec.call(Lane::Read, f)
    }

    /// Runs `f` on the writing connection, after every write sent before, and answers what
    /// it answers; blocks until then. `f` must not call the store.
    pub fn write<T, F>(&self, f: F) -> crate::Result<T>
    where
        T: Send + 'static,
        F: AsyncFnOnce(&mut Client) -> Result<T, JobError> + Send + 'static,
    {
        self.exec.call(Lane::Write, f)
    }

    /// Queues `f` on the writing connection and returns at once, without waiting for it (the
    /// `*_nowait` methods): it runs after every write sent before, and what it answers — a
    /// failure too — is dropped. Fails only when the store is closed. `f` must not call the
    /// store.
    pub fn queue_write<F>(&self, f: F) -> crate::Result<()>
    where
        F: AsyncFnOnce(&mut Client) -> Result<(), JobError> + Send + 'static,
    {
        self.exec.post(Lane::Write, f)
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.url)
            .field("schema_version", &self.version)
            .finish()
    }
}
