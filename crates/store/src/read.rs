//! The read side's connections: every domain module reads through [`Reader`].
//!
//! Reads use their own connections (WAL lets them run while the writer commits), taken from
//! a small pool so concurrent readers do not serialise on one connection.

use std::path::PathBuf;
use std::sync::Mutex;

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Connections kept for reuse; more may be open at once, the extras are closed after use.
const POOL_SIZE: usize = 16;

/// A pool of read connections to one file.
pub(crate) struct Reader {
    path: PathBuf,
    busy_timeout: std::time::Duration,
    idle: Mutex<Vec<Connection>>,
    host: String,
}

impl Reader {
    pub(crate) fn new(path: PathBuf, busy_timeout: std::time::Duration, host: String) -> Self {
        Self {
            path,
            busy_timeout,
            idle: Mutex::new(Vec::new()),
            host,
        }
    }

    /// The database file.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    pub(crate) fn sqlite(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        |source| Error::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Runs `f` on a pooled connection.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let conn = match pooled {
            Some(c) => c,
            None => self.connect()?,
        };
        let out = f(&conn);
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < POOL_SIZE
        {
            idle.push(conn);
        }
        out
    }

    fn connect(&self) -> Result<Connection> {
        let open = |source| Error::Open {
            path: self.path.clone(),
            source,
        };
        let conn = Connection::open(&self.path).map_err(open)?;
        conn.busy_timeout(self.busy_timeout).map_err(open)?;
        conn.set_prepared_statement_cache_capacity(crate::STATEMENT_CACHE);
        // Reads only: a bug here must not write behind the writer thread's back.
        conn.pragma_update(None, "query_only", true).map_err(open)?;
        Ok(conn)
    }

    /// The host this process runs on (claims taken on it can be checked for liveness).
    pub(crate) fn host(&self) -> &str {
        &self.host
    }
}
