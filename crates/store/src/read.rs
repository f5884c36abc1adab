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
        crate::stable_plans(&conn).map_err(open)?;
        // Reads only: a bug here must not write behind the writer thread's back.
        conn.pragma_update(None, "query_only", true).map_err(open)?;
        Ok(conn)
    }

    /// The host this process runs on (claims taken on it can be checked for liveness).
    pub(crate) fn host(&self) -> &str {
        &self.host
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rusqlite::StatementStatus;

    use super::*;

    /// A cached statement with a bound `LIMIT` keeps its plan across executions: SQLite
    /// would otherwise parse and plan it again after every bind (see `stable_plans`).
    #[test]
    fn a_cached_statement_is_not_prepared_again_for_new_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let setup = Connection::open(&path).unwrap();
        setup
            .execute_batch(
                "CREATE TABLE t (k TEXT, seq INTEGER, PRIMARY KEY (k, seq));
                 INSERT INTO t VALUES ('a', 1), ('a', 2), ('a', 3);",
            )
            .unwrap();
        let reader = Reader::new(path, std::time::Duration::from_secs(1), String::new());
        let reprepared = reader
            .with(|c| {
                let mut st = c
                    .prepare_cached("SELECT seq FROM t WHERE k = ?1 AND seq >= ?2 LIMIT ?3")
                    .unwrap();
                for limit in [1_i64, 2, -1, 3] {
                    let n = st
                        .query_map(rusqlite::params!["a", limit.max(1), limit], |r| {
                            r.get::<_, i64>(0)
                        })
                        .unwrap()
                        .count();
                    assert!(n > 0);
                }
                Ok(st.get_status(StatementStatus::RePrepare))
            })
            .unwrap();
        assert_eq!(reprepared, 0);
    }
}
