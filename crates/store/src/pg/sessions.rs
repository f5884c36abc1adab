//! Sessions and their turns on PostgreSQL: [`SessionStore`] for [`PgStore`], and the SQL that
//! applies the shared plan ([`crate::session_rows::RowChange`]) inside the transaction that
//! appends the session events (`super::streams`).
//!
//! # NUL characters
//!
//! PostgreSQL text cannot hold U+0000, which SQLite text can. A session event's text — a
//! message or thought delta, a user message, a tool's output, name or call id, an error —
//! may carry one (a tool printing a binary file): refusing it would fail the whole batch and
//! lose every event in it. So the event itself is stored exactly (its body is JSON, where a
//! NUL is the escape `\u0000`), and only its copy in the session tables has each NUL replaced
//! by U+FFFD, the replacement character (as a run's summary does, `super::runs::text`):
//! [`SessionStore::turns`] and [`SessionStore::sessions`] answer `\u{FFFD}` where SQLite
//! answers `\0`, and the stream ([`crate::StreamStore::stream_events`]) answers the text as
//! appended. Ids are not replaced but refused: a batch whose stream id (a session id) or
//! submission id holds a NUL fails with [`crate::Error::BadStreamEvent`] before it is sent,
//! and reading such an id finds nothing, as on SQLite where nothing was appended to it.
//!
//! Reads are typed statements (`query_typed`: one round trip each); a session's turns are
//! read in one snapshot, its four queries and their transaction sent together.

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row};
use trellis_protocol::SessionId;
use trellis_protocol::records::{SessionFilter, SessionRecord, TurnRecord};

use super::pipeline::{Param, Pipeline, int, text};
use super::runs::{self, storable};
use super::{JobError, PgStore};
use crate::SessionStore;
use crate::error::{Error, Result};
use crate::session_rows::{
    ReadError, RowChange, SESSION_COLUMNS, SqlValue, TURNS_SQL, Turns, session_record,
};

/// A shared statement's SQL as PostgreSQL writes it: `$N` for `?N`.
fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

/// A shared statement's parameter, its text as PostgreSQL can hold it.
fn bind(value: SqlValue<'_>) -> Param<'_> {
    match value {
        SqlValue::Int(v) => int(v),
        SqlValue::Text(s) => text(s.map(runs::text)),
    }
}

/// Adds the statements applying `change` to `session`'s tables to `p`.
pub(super) fn push_change<'a>(p: &mut Pipeline<'a>, session: &'a str, change: &'a RowChange<'a>) {
    let Ok(()) = change.statements(session, |sql, params| {
        p.push(dollars(sql), params.iter().map(|v| bind(*v)).collect());
        Ok::<(), std::convert::Infallible>(())
    });
}

/// A row no trellis writes, as the store's error; `what` names the row.
fn read_error(url: &str, what: &str, e: ReadError<tokio_postgres::Error>) -> JobError {
    match e {
        ReadError::Driver(e) => JobError::Pg(e),
        ReadError::Bad(b) => JobError::Store(Error::Damaged(format!(
            "PostgreSQL store [store] url = \"{url}\": {what} holds a value this trellis \
             cannot read (column {}: {}); the database was written by a newer trellis or \
             another program",
            b.column, b.detail
        ))),
    }
}

fn session_row(r: &Row, url: &str) -> Result<SessionRecord, JobError> {
    session_record(r).map_err(|e| read_error(url, "a sessions row", e))
}

/// A session's turns, read in one snapshot: the transaction and its four queries are sent
/// together (one round trip).
async fn read_turns(c: &Client, id: &str, url: &str) -> Result<Vec<TurnRecord>, JobError> {
    let p: &[(&(dyn ToSql + Sync), Type)] = &[(&id, Type::TEXT)];
    let [turns_sql, messages_sql, thoughts_sql, tools_sql] = TURNS_SQL.map(dollars);
    let (begun, turn_rows, messages, thoughts, tools, ended) = futures::join!(
        c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
        c.query_typed(&turns_sql, p),
        c.query_typed(&messages_sql, p),
        c.query_typed(&thoughts_sql, p),
        c.query_typed(&tools_sql, p),
        // After a failed query this ends the aborted transaction (a rollback).
        c.batch_execute("COMMIT"),
    );
    begun?;
    let answers = [turn_rows?, messages?, thoughts?, tools?];
    ended?;
    let mut turns = Turns::default();
    for (query, rows) in answers.iter().enumerate() {
        for r in rows {
            turns
                .add(query, r)
                .map_err(|e| read_error(url, "a turn row", e))?;
        }
    }
    Ok(turns.finish())
}

impl SessionStore for PgStore {
    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        let run = filter.run.as_ref().map(|r| r.as_str().to_owned());
        let channel = filter.channel.clone();
        if !run.iter().chain(&channel).all(|s| storable(s)) {
            return Ok(Vec::new());
        }
        let limit = filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let url = self.url.clone();
        self.read(async move |c| {
            let mut clauses = Vec::new();
            let mut params: Vec<(&(dyn ToSql + Sync), Type)> = Vec::new();
            for (column, value) in [("run", &run), ("channel", &channel)] {
                if let Some(v) = value {
                    params.push((v, Type::TEXT));
                    clauses.push(format!("{column} = ${}", params.len()));
                }
            }
            params.push((&limit, Type::INT8));
            let filter_sql = if clauses.is_empty() {
                String::new()
            } else {
                format!("WHERE {}", clauses.join(" AND "))
            };
            let sql = format!(
                "SELECT {SESSION_COLUMNS} FROM sessions {filter_sql}
                 ORDER BY created_ms DESC, id DESC LIMIT ${}",
                params.len()
            );
            let rows = c.query_typed(&sql, &params).await?;
            rows.iter().map(|r| session_row(r, &url)).collect()
        })
    }

    fn session(&self, id: &SessionId) -> Result<SessionRecord> {
        let key = id.as_str().to_owned();
        let url = self.url.clone();
        let found = if storable(&key) {
            self.read(async move |c| {
                let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1");
                c.query_typed_opt(&sql, &[(&key, Type::TEXT)])
                    .await?
                    .map(|r| session_row(&r, &url))
                    .transpose()
            })?
        } else {
            None
        };
        found.ok_or_else(|| Error::NotFound {
            what: "session",
            id: id.to_string(),
        })
    }

    fn turns(&self, session: &SessionId) -> Result<Vec<TurnRecord>> {
        let id = session.as_str().to_owned();
        if !storable(&id) {
            return Ok(Vec::new());
        }
        let url = self.url.clone();
        self.read(async move |c| read_turns(c, &id, &url).await)
    }
}
