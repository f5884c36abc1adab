//! Sessions and their turns (the tables `sessions`, `turns`, `turn_messages`, `turn_tools`,
//! `turn_thoughts`), materialised from the session streams by the writer in the transaction
//! that appends the events, and read back as [`SessionRecord`]s and [`TurnRecord`]s through
//! [`SessionStore`].
//!
//! The tables are a function of the log: replaying a session's events through
//! [`materialise`] rebuilds them. A `turnStarted` for a turn that already has rows (a model
//! call started again) clears that turn's assistant text, thoughts and tool calls, keeping
//! the user messages that precede it.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Row, params, types::Type};
use serde_json::Value;
use trellis_protocol::records::{
    SessionFilter, SessionRecord, SessionStatus, TurnRecord, TurnStatus, TurnToolRecord,
};
use trellis_protocol::{
    NodeId, RunId, SessionEvent, SessionId, SessionOwner, ToolStatus, TurnUsage,
};

use crate::SqliteStore;
use crate::error::{Error, Result};
use crate::ops::to_i64;
use crate::read::Reader;

/// Parses a stored tool status: `Some(None)` for `running`, `None` when unknown.
fn parse_tool_status(s: &str) -> Option<Option<ToolStatus>> {
    if s == "running" {
        return Some(None);
    }
    ToolStatus::parse(s).map(Some)
}

/// Applies one session event to the session tables (the writer, inside the batch's
/// savepoint). `seq` and `ts` are the event's.
pub(crate) fn materialise(
    conn: &Connection,
    session: &SessionId,
    event: &SessionEvent,
    seq: u64,
    ts: i64,
) -> rusqlite::Result<()> {
    let rows = SessionRows {
        conn,
        id: session.as_str(),
        ts,
    };
    match event {
        SessionEvent::SessionStarted { owner } => rows.start_session(owner, seq),
        SessionEvent::TurnStarted { turn, attempt } => rows.start_turn(*turn, *attempt),
        SessionEvent::MessageDelta { turn, text } => rows.append_assistant_text(*turn, text),
        SessionEvent::ThoughtDelta { turn, text } => rows.append_thought(*turn, text),
        SessionEvent::UserMessage { text } => rows.add_user_message(text),
        SessionEvent::MessagesReceived { turn, texts } => rows.add_received_messages(*turn, texts),
        SessionEvent::ToolStarted {
            turn,
            call_id,
            name,
            input,
        } => rows.start_tool(*turn, call_id, name, input),
        SessionEvent::ToolCompleted {
            turn,
            call_id,
            name,
            output,
            status,
            duration_ms,
        } => rows.complete_tool(*turn, call_id, name, output, *status, *duration_ms),
        SessionEvent::TurnCompleted {
            turn,
            message,
            usage,
        } => rows.complete_turn(*turn, message, usage),
        SessionEvent::TurnFailed { turn, error } => rows.fail_turn(*turn, error),
        SessionEvent::SessionCompleted { .. } => rows.complete_session(),
        SessionEvent::SessionError { error } => rows.fail_session(error),
        // Progress lives in the stream only: the tool's row gets its outcome on completion.
        SessionEvent::PromptSet { .. }
        | SessionEvent::ContextCompacted { .. }
        | SessionEvent::Note { .. }
        | SessionEvent::ToolProgress { .. }
        | SessionEvent::TurnProgress { .. } => Ok(()),
    }
}

/// One session's rows as the writer sees them while applying an event at time `ts`.
struct SessionRows<'c> {
    conn: &'c Connection,
    id: &'c str,
    ts: i64,
}

impl SessionRows<'_> {
    /// `sessionStarted`: inserts the session (or restarts a recorded one) as running.
    fn start_session(&self, owner: &SessionOwner, seq: u64) -> rusqlite::Result<()> {
        let (kind, run, node, role, channel) = match owner {
            SessionOwner::Agent { run, node, role } => (
                "agent",
                Some(run.as_str()),
                Some(node.as_str()),
                Some(role.as_str()),
                None,
            ),
            SessionOwner::Channel { channel } => {
                ("channel", None, None, None, Some(channel.as_str()))
            }
        };
        self.conn
            .prepare_cached(
                "INSERT INTO sessions (id, owner, run, node, role, channel, status, error,
                                       created_ms, updated_ms, last_seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', NULL, ?7, ?7, ?8)
                 ON CONFLICT (id) DO UPDATE SET
                    owner = excluded.owner, run = excluded.run, node = excluded.node,
                    role = excluded.role, channel = excluded.channel, status = 'running',
                    error = NULL, updated_ms = excluded.updated_ms,
                    last_seq = excluded.last_seq",
            )?
            .execute(params![
                self.id,
                kind,
                run,
                node,
                role,
                channel,
                self.ts,
                to_i64(seq)
            ])?;
        Ok(())
    }

    /// `turnStarted`: marks the turn running and clears what an earlier model call of the
    /// same turn streamed.
    fn start_turn(&self, turn: u32, attempt: u32) -> rusqlite::Result<()> {
        let id = self.id;
        self.conn
            .prepare_cached(
                "INSERT INTO turns (session, turn, attempt, status, started_ms)
                 VALUES (?1, ?2, ?3, 'running', ?4)
                 ON CONFLICT (session, turn) DO UPDATE SET
                    attempt = excluded.attempt, status = 'running',
                    started_ms = excluded.started_ms, finished_ms = NULL,
                    prompt_tokens = NULL, completion_tokens = NULL, message = NULL,
                    error = NULL",
            )?
            .execute(params![id, turn, attempt, self.ts])?;
        // A model call started again: what the earlier call streamed is gone.
        for sql in [
            "DELETE FROM turn_messages WHERE session = ?1 AND turn = ?2 AND role = 'assistant'",
            "DELETE FROM turn_thoughts WHERE session = ?1 AND turn = ?2",
            "DELETE FROM turn_tools WHERE session = ?1 AND turn = ?2",
        ] {
            self.conn.prepare_cached(sql)?.execute(params![id, turn])?;
        }
        Ok(())
    }

    /// `messageDelta`: appends to the turn's assistant text.
    fn append_assistant_text(&self, turn: u32, text: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO turn_messages (session, turn, role, text)
                 VALUES (?1, ?2, 'assistant', ?3)
                 ON CONFLICT (session, turn) WHERE role = 'assistant'
                 DO UPDATE SET text = text || excluded.text",
            )?
            .execute(params![self.id, turn, text])?;
        Ok(())
    }

    /// `thoughtDelta`: appends to the turn's thinking text.
    fn append_thought(&self, turn: u32, text: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO turn_thoughts (session, turn, text) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session, turn) DO UPDATE SET text = text || excluded.text",
            )?
            .execute(params![self.id, turn, text])?;
        Ok(())
    }

    /// `userMessage`: records the message under the session's next turn.
    fn add_user_message(&self, text: &str) -> rusqlite::Result<()> {
        // The user speaks before the next model call: it belongs to the next turn.
        self.conn
            .prepare_cached(
                "INSERT INTO turn_messages (session, turn, role, text)
                 SELECT ?1, COALESCE(MAX(turn), 0) + 1, 'user', ?2 FROM turns WHERE session = ?1",
            )?
            .execute(params![self.id, text])?;
        Ok(())
    }

    /// `messagesReceived`: records the messages under the given turn, in order.
    fn add_received_messages(&self, turn: u32, texts: &[String]) -> rusqlite::Result<()> {
        let mut st = self.conn.prepare_cached(
            "INSERT INTO turn_messages (session, turn, role, text) VALUES (?1, ?2, 'user', ?3)",
        )?;
        for text in texts {
            st.execute(params![self.id, turn, text])?;
        }
        Ok(())
    }

    /// `toolStarted`: records the call as running (again, when its id was seen before).
    fn start_tool(
        &self,
        turn: u32,
        call_id: &str,
        name: &str,
        input: &Value,
    ) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO turn_tools (session, turn, call_id, name, input, status, started_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6)
                 ON CONFLICT (session, turn, call_id) DO UPDATE SET
                    name = excluded.name, input = excluded.input, output = NULL,
                    status = 'running', started_ms = excluded.started_ms, duration_ms = NULL",
            )?
            .execute(params![
                self.id,
                turn,
                call_id,
                name,
                input.to_string(),
                self.ts
            ])?;
        Ok(())
    }

    /// `toolCompleted`: records the call's outcome, inserting the call when its start was
    /// not recorded.
    fn complete_tool(
        &self,
        turn: u32,
        call_id: &str,
        name: &str,
        output: &str,
        status: ToolStatus,
        duration_ms: u64,
    ) -> rusqlite::Result<()> {
        let duration = to_i64(duration_ms);
        self.conn
            .prepare_cached(
                "INSERT INTO turn_tools (session, turn, call_id, name, input, output, status,
                                         started_ms, duration_ms)
                 VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?7, ?8)
                 ON CONFLICT (session, turn, call_id) DO UPDATE SET
                    output = excluded.output, status = excluded.status,
                    duration_ms = excluded.duration_ms",
            )?
            .execute(params![
                self.id,
                turn,
                call_id,
                name,
                output,
                status.as_str(),
                self.ts.saturating_sub(duration),
                duration
            ])?;
        Ok(())
    }

    /// `turnCompleted`: records the assistant message and the tokens.
    fn complete_turn(&self, turn: u32, message: &Value, usage: &TurnUsage) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO turns (session, turn, attempt, status, started_ms, finished_ms,
                                    prompt_tokens, completion_tokens, message)
                 VALUES (?1, ?2, {LATEST_ATTEMPT}, 'completed', ?3, ?3, ?4, ?5, ?6)
                 ON CONFLICT (session, turn) DO UPDATE SET
                    status = 'completed', finished_ms = excluded.finished_ms,
                    prompt_tokens = excluded.prompt_tokens,
                    completion_tokens = excluded.completion_tokens,
                    message = excluded.message, error = NULL"
            ))?
            .execute(params![
                self.id,
                turn,
                self.ts,
                to_i64(usage.prompt_tokens),
                to_i64(usage.completion_tokens),
                message.to_string()
            ])?;
        Ok(())
    }

    /// `turnFailed`: records why the model call failed.
    fn fail_turn(&self, turn: u32, error: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO turns (session, turn, attempt, status, started_ms, finished_ms, error)
                 VALUES (?1, ?2, {LATEST_ATTEMPT}, 'failed', ?3, ?3, ?4)
                 ON CONFLICT (session, turn) DO UPDATE SET
                    status = 'failed', finished_ms = excluded.finished_ms,
                    error = excluded.error"
            ))?
            .execute(params![self.id, turn, self.ts, error])?;
        Ok(())
    }

    /// `sessionCompleted`: marks the session completed.
    fn complete_session(&self) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("UPDATE sessions SET status = 'completed', error = NULL WHERE id = ?1")?
            .execute([self.id])?;
        Ok(())
    }

    /// `sessionError`: marks the session failed, with why.
    fn fail_session(&self, error: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("UPDATE sessions SET status = 'error', error = ?2 WHERE id = ?1")?
            .execute(params![self.id, error])?;
        Ok(())
    }
}

/// The attempt of a turn that completes or fails without having started: its session's
/// latest turn's.
const LATEST_ATTEMPT: &str = "COALESCE((SELECT attempt FROM turns WHERE session = ?1
                                         ORDER BY turn DESC LIMIT 1), 0)";

/// Records the session's last event (once per session and batch).
pub(crate) fn touch(
    conn: &Connection,
    session: &SessionId,
    seq: u64,
    ts: i64,
) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE sessions SET last_seq = ?2, updated_ms = ?3 WHERE id = ?1")?
        .execute(params![session.as_str(), to_i64(seq), ts])
        .map(drop)
}

const SESSION_COLUMNS: &str =
    "id, owner, run, node, role, channel, status, error, created_ms, updated_ms, last_seq";

fn bad_value(column: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, Type::Text, what.into())
}

fn session_row(r: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    let owner = match r.get::<_, String>(1)?.as_str() {
        "agent" => SessionOwner::Agent {
            run: RunId::from_string(r.get::<_, Option<String>>(2)?.unwrap_or_default()),
            node: NodeId::new(r.get::<_, Option<String>>(3)?.unwrap_or_default()),
            role: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
        },
        "channel" => SessionOwner::Channel {
            channel: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
        },
        other => return Err(bad_value(1, format!("unknown session owner '{other}'"))),
    };
    let status: String = r.get(6)?;
    Ok(SessionRecord {
        id: SessionId::from_string(r.get::<_, String>(0)?),
        owner,
        status: SessionStatus::parse(&status)
            .ok_or_else(|| bad_value(6, format!("unknown session status '{status}'")))?,
        error: r.get(7)?,
        created_ms: r.get(8)?,
        updated_ms: r.get(9)?,
        last_seq: u64::try_from(r.get::<_, i64>(10)?).unwrap_or(0),
    })
}

fn json_column(r: &Row<'_>, column: usize) -> rusqlite::Result<Option<Value>> {
    r.get::<_, Option<String>>(column)?
        .map(|text| serde_json::from_str(&text).map_err(|e| bad_value(column, e.to_string())))
        .transpose()
}

fn count(r: &Row<'_>, column: usize) -> rusqlite::Result<u64> {
    Ok(r.get::<_, Option<i64>>(column)?
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0))
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
    let mut turns: BTreeMap<u32, TurnRecord> = BTreeMap::new();
    {
        let mut st = tx.prepare_cached(
            "SELECT turn, attempt, status, started_ms, finished_ms, prompt_tokens,
                    completion_tokens, message, error
             FROM turns WHERE session = ?1",
        )?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let turn: u32 = r.get(0)?;
            let status: String = r.get(2)?;
            turns.insert(
                turn,
                TurnRecord {
                    attempt: r.get(1)?,
                    status: TurnStatus::parse(&status)
                        .ok_or_else(|| bad_value(2, format!("unknown turn status '{status}'")))?,
                    started_ms: r.get(3)?,
                    finished_ms: r.get(4)?,
                    usage: TurnUsage {
                        prompt_tokens: count(r, 5)?,
                        completion_tokens: count(r, 6)?,
                    },
                    message: json_column(r, 7)?,
                    error: r.get(8)?,
                    ..TurnRecord::pending(turn)
                },
            );
        }
    }
    {
        let mut st = tx.prepare_cached(
            "SELECT turn, role, text FROM turn_messages WHERE session = ?1 ORDER BY id",
        )?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let turn: u32 = r.get(0)?;
            let entry = turns
                .entry(turn)
                .or_insert_with(|| TurnRecord::pending(turn));
            let text: String = r.get(2)?;
            if r.get_ref(1)?.as_str()? == "assistant" {
                entry.text = text;
            } else {
                entry.user_texts.push(text);
            }
        }
    }
    {
        let mut st =
            tx.prepare_cached("SELECT turn, text FROM turn_thoughts WHERE session = ?1")?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let turn: u32 = r.get(0)?;
            turns
                .entry(turn)
                .or_insert_with(|| TurnRecord::pending(turn))
                .thoughts = r.get(1)?;
        }
    }
    {
        let mut st = tx.prepare_cached(
            "SELECT turn, call_id, name, input, output, status, started_ms, duration_ms
             FROM turn_tools WHERE session = ?1 ORDER BY id",
        )?;
        let mut rows = st.query([id])?;
        while let Some(r) = rows.next()? {
            let turn: u32 = r.get(0)?;
            let status: String = r.get(5)?;
            let tool = TurnToolRecord {
                call_id: r.get(1)?,
                name: r.get(2)?,
                input: json_column(r, 3)?.unwrap_or(Value::Null),
                output: r.get(4)?,
                status: parse_tool_status(&status)
                    .ok_or_else(|| bad_value(5, format!("unknown tool status '{status}'")))?,
                started_ms: r.get(6)?,
                duration_ms: r
                    .get::<_, Option<i64>>(7)?
                    .map(|d| u64::try_from(d).unwrap_or(0)),
            };
            turns
                .entry(turn)
                .or_insert_with(|| TurnRecord::pending(turn))
                .tools
                .push(tool);
        }
    }
    Ok(turns.into_values().collect())
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
    /// whose model call has not started is [`TurnStatus::Pending`]; a tool call whose
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
