//! The read side: run records, event ranges and checkpoints for the CLI and the engine.
//!
//! Reads use their own connections (WAL lets them run while the writer commits), taken from
//! a small pool so concurrent readers do not serialise on one connection.

use std::path::PathBuf;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, Row, params};
use trellis_protocol::records::{Owner, RunFilter, RunRecord, RunSummary};
use trellis_protocol::{Event, ForkRef, NodeId, RunId, RunStatus};

use crate::codec;
use crate::error::{Error, Result};
use crate::ops::{event_key, to_i64};

/// Connections kept for reuse; more may be open at once, the extras are closed after use.
const POOL_SIZE: usize = 4;

/// How many candidates an ambiguous-prefix error lists.
const MAX_CANDIDATES: usize = 10;

pub(crate) const RUN_COLUMNS: &str = "r.id, r.graph, r.status, r.step, r.last_seq, r.terminal, \
     r.error, r.fork_run, r.fork_seq, r.created_ts, r.updated_ts, o.pid, o.host, o.start_time, \
     o.claimed_at, o.heartbeat";

pub(crate) const RUN_FROM: &str = "runs r LEFT JOIN run_owners o ON o.run_id = r.id";

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
        if id_or_prefix.is_empty() {
            return Err(Error::RunNotFound(String::new()));
        }
        if let Some(rec) = self.run(id_or_prefix)? {
            return Ok(rec);
        }
        // Ids compare bytewise, so the prefix's matches are the range [prefix, prefix+U+10FFFF).
        let upper = format!("{id_or_prefix}\u{10FFFF}");
        let ids: Vec<String> = self.with(|c| {
            c.prepare_cached("SELECT id FROM runs WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3")
                .and_then(|mut st| {
                    st.query_map(
                        params![id_or_prefix, upper, MAX_CANDIDATES as i64 + 1],
                        |r| r.get(0),
                    )?
                    .collect()
                })
                .map_err(self.sqlite())
        })?;
        match ids.as_slice() {
            [] => Err(Error::RunNotFound(id_or_prefix.to_owned())),
            [one] => self
                .run(one)?
                .ok_or_else(|| Error::RunNotFound(id_or_prefix.to_owned())),
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
        let mut out = Vec::new();
        for (first_seq, last_seq, data) in rows {
            let batch = codec::decode(run, first_seq, last_seq, &data).map_err(|detail| {
                Error::Corrupt {
                    path: self.path.clone(),
                    run: run.to_string(),
                    first_seq,
                    detail,
                }
            })?;
            out.extend(batch.into_iter().filter(|e| e.seq >= from && e.seq <= to));
        }
        Ok(Some(out))
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
        let status: String = r.get(2)?;
        let status = RunStatus::parse(&status).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                2,
                rusqlite::types::Type::Text,
                format!("unknown run status '{status}'").into(),
            )
        })?;
        let fork = match (r.get::<_, Option<String>>(7)?, r.get::<_, Option<i64>>(8)?) {
            (Some(run), Some(seq)) => Some(ForkRef {
                run: RunId::from_string(run),
                seq: seq as u64,
            }),
            _ => None,
        };
        let owner = match (
            r.get::<_, Option<i64>>(11)?,
            r.get::<_, Option<String>>(12)?,
        ) {
            (Some(pid), Some(host)) => Some(Owner {
                pid: u32::try_from(pid).unwrap_or(0),
                host,
                start_time: r.get::<_, Option<i64>>(13)?.map(|t| t as u64),
            }),
            _ => None,
        };
        let owner_alive = owner
            .as_ref()
            .is_some_and(|o| crate::claim::is_alive(o, &self.host));
        Ok(RunRecord {
            id: RunId::from_string(r.get::<_, String>(0)?),
            summary: RunSummary {
                graph: r.get(1)?,
                status,
                step: r.get::<_, i64>(3)? as u64,
                last_seq: r.get::<_, i64>(4)? as u64,
                terminal: r.get::<_, Option<String>>(5)?.map(NodeId::new),
                error: r.get(6)?,
                fork,
                created_ts: r.get(9)?,
                updated_ts: r.get(10)?,
            },
            owner,
            claimed_at: r.get(14)?,
            heartbeat: r.get(15)?,
            owner_alive,
        })
    }
}
