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
//! by U+FFFD (the replacement character): [`SessionStore::turns`] and
//! [`SessionStore::sessions`] answer `\u{FFFD}` where SQLite answers `\0`, and the stream
//! ([`crate::StreamStore::stream_events`]) answers the text as appended. Ids are not
//! replaced but refused: a batch whose stream id (a session id) or submission id holds a NUL
//! fails with [`crate::Error::BadStreamEvent`] before it is sent.

use std::borrow::Cow;

use tokio_postgres::{IsolationLevel, Row};
use trellis_protocol::SessionId;
use trellis_protocol::records::{SessionFilter, SessionRecord, TurnRecord};

use super::pipeline::{Param, Pipeline, param};
use super::{JobError, PgStore};
use crate::SessionStore;
use crate::error::{Error, Result};
use crate::session_rows::{
    BadValue, RowChange, SESSION_COLUMNS, SessionRow, SqlValue, ToolRow, TurnRow, Turns,
};

/// `text` as PostgreSQL can hold it: each NUL replaced by U+FFFD (see the module docs).
pub(crate) fn nul_free(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// Whether `id` can be stored at all: one holding a NUL is refused when appended, so reads
/// of it find nothing (as on SQLite, where nothing was appended to it either).
pub(crate) fn storable(id: &str) -> bool {
    !id.contains('\0')
}

/// A shared statement's SQL as PostgreSQL writes it: `$N` for `?N`.
fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

/// A shared statement's parameter, its text as PostgreSQL can hold it.
fn bind(value: SqlValue<'_>) -> Param<'_> {
    match value {
        SqlValue::Int(v) => param(v),
        SqlValue::Text(s) => param(s.map(nul_free)),
    }
}

/// Adds the statements applying `change` to `session`'s tables to `p`.
pub(super) fn push_change<'a>(p: &mut Pipeline<'a>, session: &'a str, change: &'a RowChange<'a>) {
    let Ok(()) = change.statements(session, |sql, params| {
        p.push(dollars(sql), params.iter().map(|v| bind(*v)).collect());
        Ok::<(), std::convert::Infallible>(())
    });
}

/// A stored value no trellis writes, as the store's error.
fn damaged(url: &str, what: &str, e: BadValue) -> JobError {
    JobError::Store(Error::Damaged(format!(
        "PostgreSQL store [store] url = \"{url}\": {what} holds a value this trellis cannot \
         read (column {}: {}); the database was written by a newer trellis or another program",
        e.column, e.detail
    )))
}

/// A BIGINT column holding a turn number or an attempt.
fn small(r: &Row, column: usize, url: &str, what: &str) -> Result<u32, JobError> {
    let n: i64 = r.try_get(column)?;
    u32::try_from(n).map_err(|_| {
        damaged(
            url,
            what,
            BadValue {
                column,
                detail: format!("{n} is not a turn number"),
            },
        )
    })
}

fn session_row(r: &Row, url: &str) -> Result<SessionRecord, JobError> {
    SessionRow {
        id: r.try_get(0)?,
        owner: r.try_get(1)?,
        run: r.try_get(2)?,
        node: r.try_get(3)?,
        role: r.try_get(4)?,
        channel: r.try_get(5)?,
        status: r.try_get(6)?,
        error: r.try_get(7)?,
        created_ms: r.try_get(8)?,
        updated_ms: r.try_get(9)?,
        last_seq: r.try_get(10)?,
    }
    .into_record()
    .map_err(|e| damaged(url, "a sessions row", e))
}

/// A session's turns, read in one snapshot (the four queries sent together).
async fn read_turns(
    c: &mut tokio_postgres::Client,
    id: &str,
    url: &str,
) -> Result<Vec<TurnRecord>, JobError> {
    let tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let id: &[&(dyn tokio_postgres::types::ToSql + Sync)] = &[&id];
    let (turn_rows, messages, thoughts, tools) = tokio::try_join!(
        tx.query(
            "SELECT turn, attempt, status, started_ms, finished_ms, prompt_tokens,
                    completion_tokens, message, error
             FROM turns WHERE session = $1",
            id,
        ),
        tx.query(
            "SELECT turn, role, text FROM turn_messages WHERE session = $1 ORDER BY id",
            id,
        ),
        tx.query(
            "SELECT turn, text FROM turn_thoughts WHERE session = $1",
            id
        ),
        tx.query(
            "SELECT turn, call_id, name, input, output, status, started_ms, duration_ms
             FROM turn_tools WHERE session = $1 ORDER BY id",
            id,
        ),
    )?;
    tx.commit().await?;
    let mut turns = Turns::default();
    for r in &turn_rows {
        let row = TurnRow {
            turn: small(r, 0, url, "a turns row")?,
            attempt: small(r, 1, url, "a turns row")?,
            status: r.try_get(2)?,
            started_ms: r.try_get(3)?,
            finished_ms: r.try_get(4)?,
            prompt_tokens: r.try_get(5)?,
            completion_tokens: r.try_get(6)?,
            message: r.try_get(7)?,
            error: r.try_get(8)?,
        };
        turns
            .turn(row)
            .map_err(|e| damaged(url, "a turns row", e))?;
    }
    for r in &messages {
        let role: &str = r.try_get(1)?;
        turns.message(
            small(r, 0, url, "a turn_messages row")?,
            role,
            r.try_get(2)?,
        );
    }
    for r in &thoughts {
        turns.thoughts(small(r, 0, url, "a turn_thoughts row")?, r.try_get(1)?);
    }
    for r in &tools {
        let row = ToolRow {
            turn: small(r, 0, url, "a turn_tools row")?,
            call_id: r.try_get(1)?,
            name: r.try_get(2)?,
            input: r.try_get(3)?,
            output: r.try_get(4)?,
            status: r.try_get(5)?,
            started_ms: r.try_get(6)?,
            duration_ms: r.try_get(7)?,
        };
        turns
            .tool(row)
            .map_err(|e| damaged(url, "a turn_tools row", e))?;
    }
    Ok(turns.finish())
}

impl SessionStore for PgStore {
    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        let run = filter.run.as_ref().map(|r| r.as_str());
        if !run
            .into_iter()
            .chain(filter.channel.as_deref())
            .all(storable)
        {
            return Ok(Vec::new());
        }
        let mut clauses = Vec::new();
        let mut values: Vec<Option<String>> = Vec::new();
        if let Some(run) = &filter.run {
            values.push(Some(run.as_str().to_owned()));
            clauses.push(format!("run = ${}", values.len()));
        }
        if let Some(channel) = &filter.channel {
            values.push(Some(channel.clone()));
            clauses.push(format!("channel = ${}", values.len()));
        }
        let filter_sql = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", clauses.join(" AND "))
        };
        let limit = filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions {filter_sql}
             ORDER BY created_ms DESC, id DESC LIMIT ${}",
            values.len() + 1
        );
        let url = self.url.clone();
        self.read(async move |c| {
            let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::new();
            for v in &values {
                params.push(v);
            }
            params.push(&limit);
            let rows = c.query(&sql, &params).await?;
            rows.iter().map(|r| session_row(r, &url)).collect()
        })
    }

    fn session(&self, id: &SessionId) -> Result<SessionRecord> {
        let key = id.as_str().to_owned();
        let url = self.url.clone();
        let found = if !storable(&key) {
            None
        } else {
            self.read(async move |c| {
                let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1");
                c.query_opt(&sql, &[&key])
                    .await?
                    .map(|r| session_row(&r, &url))
                    .transpose()
            })?
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
