//! Sessions and their turns (the tables `sessions`, `turns`, `turn_messages`, `turn_tools`,
//! `turn_thoughts`), materialised from the session streams by the writer in the transaction
//! that appends the events, and read back as [`SessionRecord`]s and [`TurnRecord`]s through
//! [`SessionStore`].
//!
//! The tables are a function of the log: replaying a session's events through
//! [`crate::session_rows::plan`] rebuilds them. That plan — which event changes which row,
//! and how, down to the statements — is every backend's; this module runs its statements on
//! SQLite ([`apply`]) and reads the rows back into its record builders. A `turnStarted` for
//! a turn that already has rows (a model call started again) clears that turn's assistant
//! text, thoughts and tool calls, keeping the user messages that precede it.

use rusqlite::types::{ToSqlOutput, Type};
use rusqlite::{Connection, OptionalExtension, Row, params};
use trellis_protocol::records::{SessionFilter, SessionRecord, TurnRecord};
use trellis_protocol::{RunId, SessionId};

use crate::SqliteStore;
use crate::error::{Error, Result};
use crate::read::Reader;
use crate::session_rows::{
    ReadError, RowChange, SESSION_COLUMNS, SqlValue, TURNS_SQL, Turns, session_record,
};

/// Applies one change of `session`'s tables (the writer, inside the batch's savepoint).
pub(crate) fn apply(
    conn: &Connection,
    session: &SessionId,
    change: &RowChange<'_>,
) -> rusqlite::Result<()> {
    change.statements(session.as_str(), |sql, params| {
        conn.prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(params))
            .map(drop)
    })
}

impl rusqlite::ToSql for SqlValue<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            SqlValue::Int(v) => ToSqlOutput::from(v),
            SqlValue::Text(Some(s)) => ToSqlOutput::from(s),
            SqlValue::Text(None) => ToSqlOutput::from(rusqlite::types::Null),
        })
    }
}

/// A shared builder's complaint as rusqlite's.
fn read_error(e: ReadError<rusqlite::Error>) -> rusqlite::Error {
    match e {
        ReadError::Driver(e) => e,
        ReadError::Bad(b) => {
            rusqlite::Error::FromSqlConversionFailure(b.column, Type::Text, b.detail.into())
        }
    }
}

fn session_row(r: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    session_record(r).map_err(read_error)
}

impl Reader {
    /// Sessions newest first.
    pub(crate) fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        let mut clauses = Vec::new();
        if filter.run.is_some() {
            clauses.push("run = ?1");
        }
        if filter.channel.is_some() {
            clauses.push("channel = ?2");
        }
        let filter_sql = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", clauses.join(" AND "))
        };
        let limit = filter
            .limit
            .map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        // `?3` is always used, so all three parameters can be bound whatever the filter.
        let run = filter.run.as_ref().map(RunId::as_str);
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions {filter_sql}
                 ORDER BY created_ms DESC, id DESC LIMIT ?3"
            ))
            .and_then(|mut st| {
                st.query_map(params![run, filter.channel, limit], session_row)?
                    .collect()
            })
            .map_err(self.sqlite())
        })
    }

    /// One session.
    pub(crate) fn session(&self, id: &SessionId) -> Result<Option<SessionRecord>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"
            ))
            .and_then(|mut st| st.query_row([id.as_str()], session_row).optional())
            .map_err(self.sqlite())
        })
    }

    /// A session's turns in order, read in one transaction.
    pub(crate) fn turns(&self, session: &SessionId) -> Result<Vec<TurnRecord>> {
        self.with(|c| read_turns(c, session.as_str()).map_err(self.sqlite()))
    }
}

fn read_turns(c: &Connection, id: &str) -> rusqlite::Result<Vec<TurnRecord>> {
    // One snapshot: the writer may commit between the queries.
    let tx = c.unchecked_transaction()?;
    let mut turns = Turns::default();
    for (query, sql) in TURNS_SQL.into_iter().enumerate() {
        let mut st = tx.prepare_cached(sql)?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            turns.add(query, r).map_err(read_error)?;
        }
    }
    Ok(turns.finish())
}

/// Agent and channel sessions and their turns, as materialised from the session streams
/// (written by [`crate::StreamStore::append_stream`]).
pub trait SessionStore: Send + Sync {
    /// Sessions, newest first: all of them, an agent run's, or a channel's (see
    /// [`SessionFilter`]).
    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>>;

    /// One session; [`Error::NotFound`] when no `sessionStarted` was appended for it.
    fn session(&self, id: &SessionId) -> Result<SessionRecord>;

    /// A session's turns in order (empty for an unknown session). A turn with user messages
    /// whose model call has not started is [`crate::TurnStatus::Pending`]; a tool call whose
    /// process died before it completed keeps the status `None` ("running").
    fn turns(&self, session: &SessionId) -> Result<Vec<TurnRecord>>;
}

impl SessionStore for SqliteStore {
    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        self.reader.sessions(filter)
    }

    fn session(&self, id: &SessionId) -> Result<SessionRecord> {
        self.reader.session(id)?.ok_or_else(|| Error::NotFound {
            what: "session",
            id: id.to_string(),
        })
    }

    fn turns(&self, session: &SessionId) -> Result<Vec<TurnRecord>> {
        self.reader.turns(session)
    }
}
