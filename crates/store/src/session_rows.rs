//! What the session tables hold, decided once for every backend.
//!
//! Writing: [`plan`] turns one session event into the [`RowChange`]s it makes to the tables
//! `sessions`, `turns`, `turn_messages`, `turn_thoughts` and `turn_tools`, and
//! [`RowChange::statements`] into the statements that make them — SQL both engines speak
//! (SQLite's upsert is PostgreSQL's), with `?N` parameters, which PostgreSQL's binder writes
//! `$N`. A backend only binds and runs them, in the transaction that appends the event:
//! SQLite in `crate::sessions::apply`, PostgreSQL in `crate::pg::sessions`. So which event
//! changes which row, and how, is written once.
//!
//! Reading: a backend runs [`TURNS_SQL`] (and selects [`SESSION_COLUMNS`]) with its driver
//! and hands the rows, as [`Columns`], to [`session_record`] and [`Turns`], which build the
//! records and reject values no trellis writes.

use std::collections::BTreeMap;

use serde_json::Value;
use trellis_protocol::records::{
    SessionRecord, SessionStatus, TurnRecord, TurnStatus, TurnToolRecord,
};
use trellis_protocol::{
    NodeId, RunId, SessionEvent, SessionId, SessionOwner, ToolStatus, TurnUsage,
};

use crate::ops::to_i64;
use crate::runs::Columns;

/// The owner columns of a `sessions` row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OwnerColumns<'e> {
    /// `owner`: `agent` or `channel`.
    pub(crate) kind: &'static str,
    /// `run`, `node`, `role`: an agent's.
    pub(crate) run: Option<&'e str>,
    pub(crate) node: Option<&'e str>,
    pub(crate) role: Option<&'e str>,
    /// `channel`: a channel session's.
    pub(crate) channel: Option<&'e str>,
}

impl<'e> OwnerColumns<'e> {
    fn of(owner: &'e SessionOwner) -> Self {
        match owner {
            SessionOwner::Agent { run, node, role } => OwnerColumns {
                kind: "agent",
                run: Some(run.as_str()),
                node: Some(node.as_str()),
                role: Some(role.as_str()),
                channel: None,
            },
            SessionOwner::Channel { channel } => OwnerColumns {
                kind: "channel",
                run: None,
                node: None,
                role: None,
                channel: Some(channel.as_str()),
            },
        }
    }
}

/// Which streamed text of a turn a delta extends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Streamed {
    /// The assistant's text: the turn's `turn_messages` row of role `assistant`.
    Assistant,
    /// The thinking text: the turn's `turn_thoughts` row.
    Thoughts,
}

/// One change to one session's tables (the session is the event's). Numbers are as stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RowChange<'e> {
    /// `sessions`: inserts the session, or restarts the recorded one: its owner, status
    /// `running`, no error, `updated_ms` = `ts`, `last_seq` = `seq`. `created_ms` is `ts`
    /// when inserted and stays when restarted.
    StartSession {
        owner: OwnerColumns<'e>,
        ts: i64,
        seq: i64,
    },
    /// `sessions`: sets the status and the error of a recorded session (none: nothing).
    SetStatus {
        status: SessionStatus,
        error: Option<&'e str>,
    },
    /// `turns`: inserts the turn as `running` with this attempt and `started_ms` = `ts`, or
    /// resets the recorded one to that, clearing its finish time, tokens, message and
    /// error.
    StartTurn { turn: i64, attempt: i64, ts: i64 },
    /// Deletes what an earlier model call of the turn streamed: its `assistant` row of
    /// `turn_messages`, its `turn_thoughts` row and its `turn_tools` rows. Its user messages
    /// stay.
    ClearTurn { turn: i64 },
    /// `turn_messages` (`assistant`) or `turn_thoughts`: appends `text` to the turn's row,
    /// inserting it when there is none.
    AppendText {
        to: Streamed,
        turn: i64,
        text: &'e str,
    },
    /// `turn_messages`: inserts `texts` in order as `user` messages of `turn` or, when
    /// `None`, of the turn after the session's latest `turns` row (1 when it has none).
    AddUserTexts {
        turn: Option<i64>,
        texts: &'e [String],
    },
    /// `turn_tools`: inserts the call as `running` (name, input JSON, `started_ms` = `ts`),
    /// or restarts the recorded one: name, input, status and start replaced, output and
    /// duration cleared.
    StartTool {
        turn: i64,
        call_id: &'e str,
        name: &'e str,
        input: String,
        ts: i64,
    },
    /// `turn_tools`: records the call's output, status and duration; a call whose start was
    /// not recorded is inserted with this name, no input and `started_ms`.
    CompleteTool {
        turn: i64,
        call_id: &'e str,
        name: &'e str,
        output: &'e str,
        status: ToolStatus,
        started_ms: i64,
        duration_ms: i64,
    },
    /// `turns`: marks the turn `completed` at `ts` with the tokens and the assistant message
    /// JSON, clearing its error. A turn that was not started is inserted with `started_ms`
    /// = `ts` and the attempt of the session's latest turn (0 when it has none).
    CompleteTurn {
        turn: i64,
        ts: i64,
        prompt_tokens: i64,
        completion_tokens: i64,
        message: String,
    },
    /// `turns`: marks the turn `failed` at `ts` with the error (tokens and message stay); a
    /// turn that was not started is inserted as for [`RowChange::CompleteTurn`].
    FailTurn { turn: i64, ts: i64, error: &'e str },
    /// `sessions`: records the session's last event, `last_seq` = `seq` and `updated_ms` =
    /// `ts` (once per session and batch, after its events).
    Touch { seq: i64, ts: i64 },
}

/// A statement parameter, as both backends bind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SqlValue<'a> {
    /// An integer (`BIGINT`).
    Int(i64),
    /// Text, or NULL.
    Text(Option<&'a str>),
}

impl<'a> From<i64> for SqlValue<'a> {
    fn from(v: i64) -> Self {
        SqlValue::Int(v)
    }
}

impl<'a> From<&'a str> for SqlValue<'a> {
    fn from(v: &'a str) -> Self {
        SqlValue::Text(Some(v))
    }
}

impl<'a> From<Option<&'a str>> for SqlValue<'a> {
    fn from(v: Option<&'a str>) -> Self {
        SqlValue::Text(v)
    }
}

/// Runs one statement of a [`RowChange`]: `$run(sql, params)`, `?1` being `params[0]`;
/// the parameters live on the stack for the call.
macro_rules! run {
    ($run:ident, $sql:expr, $($param:expr),+ $(,)?) => {
        $run($sql, &[$(SqlValue::from($param)),+])
    };
}

/// The attempt of a turn that completes or fails without having started: its session's
/// latest turn's (`?1` is the session).
macro_rules! latest_attempt {
    () => {
        "COALESCE((SELECT attempt FROM turns WHERE session = ?1 ORDER BY turn DESC LIMIT 1), 0)"
    };
}

const START_SESSION: &str = "INSERT INTO sessions (id, owner, run, node, role, channel, status,
                                       error, created_ms, updated_ms, last_seq)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', NULL, ?7, ?7, ?8)
     ON CONFLICT (id) DO UPDATE SET
        owner = excluded.owner, run = excluded.run, node = excluded.node,
        role = excluded.role, channel = excluded.channel, status = 'running',
        error = NULL, updated_ms = excluded.updated_ms, last_seq = excluded.last_seq";

const SET_STATUS: &str = "UPDATE sessions SET status = ?2, error = ?3 WHERE id = ?1";

const START_TURN: &str = "INSERT INTO turns (session, turn, attempt, status, started_ms)
     VALUES (?1, ?2, ?3, 'running', ?4)
     ON CONFLICT (session, turn) DO UPDATE SET
        attempt = excluded.attempt, status = 'running', started_ms = excluded.started_ms,
        finished_ms = NULL, prompt_tokens = NULL, completion_tokens = NULL, message = NULL,
        error = NULL";

const CLEAR_TURN: [&str; 3] = [
    "DELETE FROM turn_messages WHERE session = ?1 AND turn = ?2 AND role = 'assistant'",
    "DELETE FROM turn_thoughts WHERE session = ?1 AND turn = ?2",
    "DELETE FROM turn_tools WHERE session = ?1 AND turn = ?2",
];

const APPEND_ASSISTANT: &str = "INSERT INTO turn_messages (session, turn, role, text)
     VALUES (?1, ?2, 'assistant', ?3)
     ON CONFLICT (session, turn) WHERE role = 'assistant'
     DO UPDATE SET text = turn_messages.text || excluded.text";

const APPEND_THOUGHTS: &str = "INSERT INTO turn_thoughts (session, turn, text) VALUES (?1, ?2, ?3)
     ON CONFLICT (session, turn) DO UPDATE SET text = turn_thoughts.text || excluded.text";

const ADD_USER_TEXT: &str = "INSERT INTO turn_messages (session, turn, role, text)
     VALUES (?1, ?2, 'user', ?3)";

const ADD_NEXT_USER_TEXT: &str = "INSERT INTO turn_messages (session, turn, role, text)
     SELECT ?1, COALESCE(MAX(turn), 0) + 1, 'user', CAST(?2 AS TEXT) FROM turns
     WHERE session = ?1";

const START_TOOL: &str = "INSERT INTO turn_tools (session, turn, call_id, name, input, status,
                                        started_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6)
     ON CONFLICT (session, turn, call_id) DO UPDATE SET
        name = excluded.name, input = excluded.input, output = NULL, status = 'running',
        started_ms = excluded.started_ms, duration_ms = NULL";

const COMPLETE_TOOL: &str = "INSERT INTO turn_tools (session, turn, call_id, name, input, output,
                                        status, started_ms, duration_ms)
     VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?7, ?8)
     ON CONFLICT (session, turn, call_id) DO UPDATE SET
        output = excluded.output, status = excluded.status, duration_ms = excluded.duration_ms";

const COMPLETE_TURN: &str = concat!(
    "INSERT INTO turns (session, turn, attempt, status, started_ms, finished_ms, prompt_tokens,
                        completion_tokens, message)
     VALUES (?1, ?2, ",
    latest_attempt!(),
    ", 'completed', ?3, ?3, ?4, ?5, ?6)
     ON CONFLICT (session, turn) DO UPDATE SET
        status = 'completed', finished_ms = excluded.finished_ms,
        prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,
        message = excluded.message, error = NULL"
);

const FAIL_TURN: &str = concat!(
    "INSERT INTO turns (session, turn, attempt, status, started_ms, finished_ms, error)
     VALUES (?1, ?2, ",
    latest_attempt!(),
    ", 'failed', ?3, ?3, ?4)
     ON CONFLICT (session, turn) DO UPDATE SET
        status = 'failed', finished_ms = excluded.finished_ms, error = excluded.error"
);

const TOUCH: &str = "UPDATE sessions SET last_seq = ?2, updated_ms = ?3 WHERE id = ?1";

impl<'e> RowChange<'e> {
    /// Hands the statements making this change to session `id`'s tables, in order, to
    /// `run` (its SQL, in the dialect both backends speak, and its parameters); stops at the
    /// first error `run` answers.
    pub(crate) fn statements<'s, E>(
        &'s self,
        id: &'s str,
        mut run: impl FnMut(&'static str, &[SqlValue<'s>]) -> Result<(), E>,
    ) -> Result<(), E> {
        match *self {
            RowChange::StartSession { owner, ts, seq } => run!(
                run,
                START_SESSION,
                id,
                owner.kind,
                owner.run,
                owner.node,
                owner.role,
                owner.channel,
                ts,
                seq
            ),
            RowChange::SetStatus { status, error } => {
                run!(run, SET_STATUS, id, status.as_str(), error)
            }
            RowChange::StartTurn { turn, attempt, ts } => {
                run!(run, START_TURN, id, turn, attempt, ts)
            }
            RowChange::ClearTurn { turn } => CLEAR_TURN
                .iter()
                .try_for_each(|sql| run!(run, sql, id, turn)),
            RowChange::AppendText { to, turn, text } => {
                let sql = match to {
                    Streamed::Assistant => APPEND_ASSISTANT,
                    Streamed::Thoughts => APPEND_THOUGHTS,
                };
                run!(run, sql, id, turn, text)
            }
            RowChange::AddUserTexts { turn, texts } => {
                texts.iter().try_for_each(|text| match turn {
                    Some(turn) => run!(run, ADD_USER_TEXT, id, turn, text.as_str()),
                    None => run!(run, ADD_NEXT_USER_TEXT, id, text.as_str()),
                })
            }
            RowChange::StartTool {
                turn,
                call_id,
                name,
                ref input,
                ts,
            } => run!(run, START_TOOL, id, turn, call_id, name, input.as_str(), ts),
            RowChange::CompleteTool {
                turn,
                call_id,
                name,
                output,
                status,
                started_ms,
                duration_ms,
            } => run!(
                run,
                COMPLETE_TOOL,
                id,
                turn,
                call_id,
                name,
                output,
                status.as_str(),
                started_ms,
                duration_ms
            ),
            RowChange::CompleteTurn {
                turn,
                ts,
                prompt_tokens,
                completion_tokens,
                ref message,
            } => run!(
                run,
                COMPLETE_TURN,
                id,
                turn,
                ts,
                prompt_tokens,
                completion_tokens,
                message.as_str()
            ),
            RowChange::FailTurn { turn, ts, error } => {
                run!(run, FAIL_TURN, id, turn, ts, error)
            }
            RowChange::Touch { seq, ts } => run!(run, TOUCH, id, seq, ts),
        }
    }
}

/// The changes one session event makes to its session's tables, in order; `seq` and `ts`
/// are the event's. Events that live in the stream only (progress, notes, prompts,
/// compactions) make none.
pub(crate) fn plan(event: &SessionEvent, seq: u64, ts: i64) -> impl Iterator<Item = RowChange<'_>> {
    let (first, then) = match event {
        SessionEvent::TurnStarted { turn, attempt, .. } => (
            Some(RowChange::StartTurn {
                turn: i64::from(*turn),
                attempt: i64::from(*attempt),
                ts,
            }),
            // A model call started again: what the earlier call streamed is gone.
            Some(RowChange::ClearTurn {
                turn: i64::from(*turn),
            }),
        ),
        other => (change(other, seq, ts), None),
    };
    first.into_iter().chain(then)
}

/// The one change an event other than `turnStarted` makes, if any.
fn change(event: &SessionEvent, seq: u64, ts: i64) -> Option<RowChange<'_>> {
    let append = |to, turn: &u32, text| RowChange::AppendText {
        to,
        turn: i64::from(*turn),
        text,
    };
    Some(match event {
        SessionEvent::SessionStarted { owner } => RowChange::StartSession {
            owner: OwnerColumns::of(owner),
            ts,
            seq: to_i64(seq),
        },
        SessionEvent::MessageDelta { turn, text } => append(Streamed::Assistant, turn, text),
        SessionEvent::ThoughtDelta { turn, text } => append(Streamed::Thoughts, turn, text),
        // The user speaks before the next model call: it belongs to the next turn.
        SessionEvent::UserMessage { text } => RowChange::AddUserTexts {
            turn: None,
            texts: std::slice::from_ref(text),
        },
        SessionEvent::MessagesReceived { turn, texts } => RowChange::AddUserTexts {
            turn: Some(i64::from(*turn)),
            texts,
        },
        SessionEvent::ToolStarted {
            turn,
            call_id,
            name,
            input,
        } => RowChange::StartTool {
            turn: i64::from(*turn),
            call_id,
            name,
            input: input.to_string(),
            ts,
        },
        SessionEvent::ToolCompleted { .. } => {
            let done = event.tool_completion()?;
            RowChange::CompleteTool {
                turn: i64::from(done.turn),
                call_id: done.call_id,
                name: done.name,
                output: done.output,
                status: done.status,
                started_ms: done.started_ms(ts),
                duration_ms: to_i64(done.duration_ms),
            }
        }
        SessionEvent::TurnCompleted {
            turn,
            message,
            usage,
        } => RowChange::CompleteTurn {
            turn: i64::from(*turn),
            ts,
            prompt_tokens: to_i64(usage.prompt_tokens),
            completion_tokens: to_i64(usage.completion_tokens),
            message: message.to_string(),
        },
        SessionEvent::TurnFailed { turn, error } => RowChange::FailTurn {
            turn: i64::from(*turn),
            ts,
            error,
        },
        SessionEvent::SessionCompleted { .. } => RowChange::SetStatus {
            status: SessionStatus::Completed,
            error: None,
        },
        SessionEvent::SessionError { error } => RowChange::SetStatus {
            status: SessionStatus::Error,
            error: Some(error),
        },
        // Progress lives in the stream only: the tool's row gets its outcome on completion.
        SessionEvent::TurnStarted { .. }
        | SessionEvent::PromptSet { .. }
        | SessionEvent::ContextCompacted { .. }
        | SessionEvent::Note { .. }
        | SessionEvent::ToolProgress { .. }
        | SessionEvent::TurnProgress { .. } => return None,
    })
}

/// A stored value no trellis writes: the column (its index in the backend's query) and
/// what is wrong with it.
#[derive(Debug)]
pub(crate) struct BadValue {
    /// The column's index in the query that read it.
    pub(crate) column: usize,
    /// What is wrong.
    pub(crate) detail: String,
}

/// Why a row could not be read: the driver failed, or the row holds a [`BadValue`].
#[derive(Debug)]
pub(crate) enum ReadError<E> {
    /// The driver's error.
    Driver(E),
    /// A value no trellis writes.
    Bad(BadValue),
}

fn bad<E>(column: usize, detail: String) -> ReadError<E> {
    ReadError::Bad(BadValue { column, detail })
}

/// The `sessions` columns every backend reads, in the order [`session_record`] takes them.
pub(crate) const SESSION_COLUMNS: &str =
    "id, owner, run, node, role, channel, status, error, created_ms, updated_ms, last_seq";

/// A session's rows of the four turn tables, in the order [`Turns`] takes them (`?1` is the
/// session; PostgreSQL writes it `$1`).
pub(crate) const TURNS_SQL: [&str; 4] = [
    "SELECT turn, attempt, status, started_ms, finished_ms, prompt_tokens, completion_tokens,
            message, error
     FROM turns WHERE session = ?1",
    "SELECT turn, role, text FROM turn_messages WHERE session = ?1 ORDER BY id",
    "SELECT turn, text FROM turn_thoughts WHERE session = ?1",
    "SELECT turn, call_id, name, input, output, status, started_ms, duration_ms
     FROM turn_tools WHERE session = ?1 ORDER BY id",
];

/// A row of [`SESSION_COLUMNS`] as its record.
pub(crate) fn session_record<C: Columns>(r: &C) -> Result<SessionRecord, ReadError<C::Error>> {
    let d = ReadError::Driver;
    let owner = match r.text(1).map_err(d)?.as_str() {
        "agent" => SessionOwner::Agent {
            run: RunId::from_string(r.text_opt(2).map_err(d)?.unwrap_or_default()),
            node: NodeId::new(r.text_opt(3).map_err(d)?.unwrap_or_default()),
            role: r.text_opt(4).map_err(d)?.unwrap_or_default(),
        },
        "channel" => SessionOwner::Channel {
            channel: r.text_opt(5).map_err(d)?.unwrap_or_default(),
        },
        other => return Err(bad(1, format!("unknown session owner '{other}'"))),
    };
    let status = r.text(6).map_err(d)?;
    Ok(SessionRecord {
        id: SessionId::from_string(r.text(0).map_err(d)?),
        owner,
        status: SessionStatus::parse(&status)
            .ok_or_else(|| bad(6, format!("unknown session status '{status}'")))?,
        error: r.text_opt(7).map_err(d)?,
        created_ms: r.int(8).map_err(d)?,
        updated_ms: r.int(9).map_err(d)?,
        last_seq: u64::try_from(r.int(10).map_err(d)?).unwrap_or(0),
    })
}

/// A session's turns, built from its rows of the four turn tables ([`TURNS_SQL`], read in
/// one snapshot).
#[derive(Default)]
pub(crate) struct Turns(BTreeMap<u32, TurnRecord>);

impl Turns {
    fn entry(&mut self, turn: u32) -> &mut TurnRecord {
        self.0
            .entry(turn)
            .or_insert_with(|| TurnRecord::pending(turn))
    }

    /// A row answered by `TURNS_SQL[query]`.
    pub(crate) fn add<C: Columns>(
        &mut self,
        query: usize,
        r: &C,
    ) -> Result<(), ReadError<C::Error>> {
        match query {
            0 => self.turn(r),
            1 => self.message(r),
            2 => self.thoughts(r),
            _ => self.tool(r),
        }
    }

    /// A `turns` row.
    fn turn<C: Columns>(&mut self, r: &C) -> Result<(), ReadError<C::Error>> {
        let d = ReadError::Driver;
        let turn = small(r, 0)?;
        let status = r.text(2).map_err(d)?;
        let record = TurnRecord {
            attempt: small(r, 1)?,
            status: TurnStatus::parse(&status)
                .ok_or_else(|| bad(2, format!("unknown turn status '{status}'")))?,
            started_ms: r.int_opt(3).map_err(d)?,
            finished_ms: r.int_opt(4).map_err(d)?,
            usage: TurnUsage {
                prompt_tokens: count(r.int_opt(5).map_err(d)?),
                completion_tokens: count(r.int_opt(6).map_err(d)?),
            },
            message: json(r, 7)?,
            error: r.text_opt(8).map_err(d)?,
            ..TurnRecord::pending(turn)
        };
        self.0.insert(turn, record);
        Ok(())
    }

    /// A `turn_messages` row: the assistant's text, or a user message.
    fn message<C: Columns>(&mut self, r: &C) -> Result<(), ReadError<C::Error>> {
        let d = ReadError::Driver;
        let (role, text) = (r.text(1).map_err(d)?, r.text(2).map_err(d)?);
        let entry = self.entry(small(r, 0)?);
        if role == "assistant" {
            entry.text = text;
        } else {
            entry.user_texts.push(text);
        }
        Ok(())
    }

    /// A `turn_thoughts` row.
    fn thoughts<C: Columns>(&mut self, r: &C) -> Result<(), ReadError<C::Error>> {
        let text = r.text(1).map_err(ReadError::Driver)?;
        self.entry(small(r, 0)?).thoughts = text;
        Ok(())
    }

    /// A `turn_tools` row.
    fn tool<C: Columns>(&mut self, r: &C) -> Result<(), ReadError<C::Error>> {
        let d = ReadError::Driver;
        let status = r.text(5).map_err(d)?;
        let tool = TurnToolRecord {
            call_id: r.text(1).map_err(d)?,
            name: r.text(2).map_err(d)?,
            input: json(r, 3)?.unwrap_or(Value::Null),
            output: r.text_opt(4).map_err(d)?,
            status: parse_tool_status(&status)
                .ok_or_else(|| bad(5, format!("unknown tool status '{status}'")))?,
            started_ms: r.int(6).map_err(d)?,
            duration_ms: r
                .int_opt(7)
                .map_err(d)?
                .map(|n| u64::try_from(n).unwrap_or(0)),
        };
        self.entry(small(r, 0)?).tools.push(tool);
        Ok(())
    }

    /// The turns in order.
    pub(crate) fn finish(self) -> Vec<TurnRecord> {
        self.0.into_values().collect()
    }
}

/// Parses a stored tool status: `Some(None)` for `running`, `None` when unknown.
fn parse_tool_status(s: &str) -> Option<Option<ToolStatus>> {
    if s == "running" {
        return Some(None);
    }
    ToolStatus::parse(s).map(Some)
}

/// A turn number or an attempt.
fn small<C: Columns>(r: &C, column: usize) -> Result<u32, ReadError<C::Error>> {
    let n = r.int(column).map_err(ReadError::Driver)?;
    u32::try_from(n).map_err(|_| bad(column, format!("{n} is not a turn number or attempt")))
}

fn json<C: Columns>(r: &C, column: usize) -> Result<Option<Value>, ReadError<C::Error>> {
    r.text_opt(column)
        .map_err(ReadError::Driver)?
        .map(|t| serde_json::from_str(&t).map_err(|e| bad(column, e.to_string())))
        .transpose()
}

fn count(n: Option<i64>) -> u64 {
    n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}
