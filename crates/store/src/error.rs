//! The store's error type.
//!
//! Every variant that concerns the database names its file, so a message printed by the CLI
//! tells the user which `trellis.db` is at fault and what to do about it.

use std::path::PathBuf;

use trellis_graph::JournalError;

/// Errors raised by the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `[store] url` names a PostgreSQL server but this binary was built without it.
    #[error(
        "[store] url names a PostgreSQL server (…@{url}), but this trellis was built without \
         PostgreSQL (cargo feature `postgres`); build it with the feature, or remove the setting \
         to use the workspace's SQLite file"
    )]
    NoPostgres {
        /// The URL after its user info.
        url: String,
    },
    /// Leases of runs (`trellis worker`) asked of a SQLite store.
    #[error(
        "leases of runs (trellis worker) need a PostgreSQL store ([store] url); on one machine \
         the workspace's SQLite file hands a crashed process's runs over without them"
    )]
    LeasesNeedPostgres,
    /// An append for a run whose lease this store held was refused: another worker took
    /// the lease (see [`trellis_graph::JournalError::LeaseLost`]).
    #[error(
        "run {run}: the lease of worker {worker} was taken by another worker; \
         nothing was written and the run must stop here"
    )]
    LeaseLost {
        /// The run.
        run: String,
        /// The worker whose lease was taken.
        worker: String,
    },
    /// `[store] workers = true` without `url`.
    #[error(
        "[store] workers = true: runs execute on `trellis worker` processes, which share a \
         PostgreSQL store; set [store] url too (docs/deploy.md)"
    )]
    WorkersNeedPostgres,
    /// `[store] password_env` names a variable that is unset or empty.
    #[error(
        "[store] password_env = \"{var}\": the environment variable {var} is not set (or empty); \
         export the database password in it, or remove password_env"
    )]
    PasswordEnv {
        /// The variable.
        var: String,
    },
    /// The `.trellis/` directory could not be created.
    #[error("cannot create the store directory {path}: {source}; check permissions and free space")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The database file could not be opened or configured.
    #[error(
        "cannot open the trellis store {path}: {source}; check that the file is a trellis database \
         and that its directory is writable"
    )]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The database was written by a newer trellis.
    #[error(
        "the trellis store {path} was created by a newer trellis (schema version {found}, this \
         binary knows up to {supported}); upgrade trellis to open it"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The schema version found in the file.
        found: i64,
        /// The newest schema version this binary knows.
        supported: i64,
    },
    /// The file system does not support SQLite's write-ahead log (a network file system?).
    #[error(
        "the trellis store {path} cannot use SQLite's WAL mode (journal_mode stayed '{mode}'); \
         keep the workspace on a local file system"
    )]
    NoWal {
        /// The database file.
        path: PathBuf,
        /// The journal mode SQLite kept.
        mode: String,
    },
    /// The writer thread could not be started.
    #[error("cannot start the writer thread of the trellis store {path}: {source}")]
    Thread {
        /// The database file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A file-system operation on the store failed.
    #[error("trellis store {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A schema migration failed (nothing of it was applied).
    #[error(
        "cannot migrate the trellis store {path} to schema version {version} ({name}): {source}; \
         the file is unchanged — back it up and report this"
    )]
    Migration {
        /// The database file.
        path: PathBuf,
        /// The migration's version.
        version: i64,
        /// The migration's name.
        name: &'static str,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// A query failed.
    #[error("trellis store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// A write transaction failed; nothing of it was written.
    #[error(
        "trellis store {path}: the write transaction failed ({detail}); nothing of it was \
         written — check free disk space and that no other program locks the file"
    )]
    Transaction {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
        /// Whether the failure was a lock held by another process.
        retryable: bool,
    },
    /// A value exceeds what the store's layout can hold.
    #[error("trellis store {path}: {detail}")]
    Limit {
        /// The database file.
        path: PathBuf,
        /// What overflowed.
        detail: String,
    },
    /// A stored event blob could not be decoded.
    #[error(
        "trellis store {path}: the events of run {run} from seq {first_seq} are corrupt ({detail}); \
         restore the file from a backup or delete the run"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// The run.
        run: String,
        /// First seq of the damaged batch.
        first_seq: u64,
        /// What was wrong.
        detail: String,
    },
    /// An appended stream event does not follow its stream's last event.
    #[error(
        "trellis store {path}: stream {stream} got seq {seq} after seq {last}; every event must \
         follow its stream's last one (seq {last} + 1), so this one is a duplicate or an event \
         before it was lost — nothing of its batch was written"
    )]
    StreamSeq {
        /// The database file (PostgreSQL: the redacted `[store] url`).
        path: PathBuf,
        /// The stream (its text form).
        stream: String,
        /// The seq the event carried.
        seq: u64,
        /// The stream's last stored seq (0 when empty).
        last: u64,
    },
    /// An event that cannot be appended to a service stream.
    #[error("cannot append to stream {stream}: {detail}")]
    BadStreamEvent {
        /// The stream (its text form).
        stream: String,
        /// What is wrong.
        detail: String,
    },
    /// A stored stream event could not be decoded.
    #[error(
        "trellis store {path}: event {seq} of stream {stream} is corrupt or from a newer trellis \
         ({detail}); upgrade trellis or restore the file from a backup"
    )]
    CorruptStream {
        /// The database file (PostgreSQL: the redacted `[store] url`).
        path: PathBuf,
        /// The stream (its text form).
        stream: String,
        /// The event's seq.
        seq: u64,
        /// What was wrong.
        detail: String,
    },
    /// No record of this kind has this id.
    #[error("no {what} '{id}' in this workspace's store")]
    NotFound {
        /// What was looked for (`session`, `artifact`).
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// A value could not be encoded for storage.
    #[error("cannot encode {what} for the trellis store: {source}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// A run's record is inconsistent.
    #[error("{0}")]
    Damaged(String),
    /// No run has this id or prefix.
    #[error("no run matches '{0}'; see `trellis runs list` for the runs in this workspace")]
    RunNotFound(String),
    /// Several runs start with this prefix.
    #[error(
        "'{prefix}' matches several runs ({}); type more characters of the id",
        candidates.join(", ")
    )]
    AmbiguousRun {
        /// The prefix typed.
        prefix: String,
        /// The matching run ids (at most a handful).
        candidates: Vec<String>,
    },
    /// The writer thread has stopped (the store is shutting down or it panicked).
    #[error("the trellis store {0} is closed (its writer thread stopped)")]
    Closed(PathBuf),
    /// [`crate::SqliteStore::open_existing`] found no database file.
    #[error("no trellis store at {0} (nothing has run in this workspace yet)")]
    NoStore(PathBuf),
    /// The PostgreSQL backend failed; the message names `[store] url`.
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Postgres(#[from] crate::pg::PgError),
}

/// The store's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether retrying the same operation later may succeed (the database was locked by
    /// another process for longer than the busy timeout).
    pub fn is_retryable(&self) -> bool {
        if let Error::Transaction { retryable, .. } = self {
            return *retryable;
        }
        #[cfg(feature = "postgres")]
        if let Error::Postgres(e) = self {
            return e.is_retryable();
        }
        let source = match self {
            Error::Open { source, .. }
            | Error::Sqlite { source, .. }
            | Error::Migration { source, .. } => source,
            _ => return false,
        };
        matches!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

impl From<Error> for JournalError {
    fn from(e: Error) -> Self {
        match e {
            Error::RunNotFound(id) => JournalError::RunNotFound(id),
            Error::Closed(_) => JournalError::Closed,
            Error::LeaseLost { run, worker } => JournalError::LeaseLost { run, worker },
            other => JournalError::Backend(other.to_string()),
        }
    }
}
