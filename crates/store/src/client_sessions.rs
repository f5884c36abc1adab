//! Sessions of front-end clients (an editor's ACP sessions): the `client_sessions` and
//! `client_turns` tables. A client session is a conversation whose every prompt turn is a
//! run; the rows map the client's session id to those runs, so a session survives the
//! process that served it (`session/load` replays the runs' recorded events). Behind
//! [`ClientSessionStore`].
//!
//! Writes go through the writer thread as [`Record`]s; reads use the reader pool.

use rusqlite::{Connection, OptionalExtension, params};
use trellis_protocol::RunId;
use trellis_protocol::records::{ClientSession, ClientTurn};

use crate::error::Result;
use crate::read::Reader;
use crate::runs::Columns;
use crate::schema::now_ms;
use crate::{Msg, Record, SqliteStore};

/// Inserts the session or updates its title and config (`created_ms` stays).
pub(crate) fn upsert(conn: &Connection, s: &ClientSession) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO client_sessions (id, client, cwd, title, config, created_ms, updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
         ON CONFLICT (id) DO UPDATE SET title = excluded.title, config = excluded.config,
                                        updated_ms = excluded.updated_ms",
    )?
    .execute(params![s.id, s.client, s.cwd, s.title, s.config, now_ms()])?;
    Ok(0)
}

/// Appends a turn numbered after the session's last; returns its number.
pub(crate) fn insert_turn(conn: &Connection, t: &ClientTurn) -> rusqlite::Result<i64> {
    let now = now_ms();
    let turn: i64 = conn
        .prepare_cached("SELECT COALESCE(MAX(turn), 0) + 1 FROM client_turns WHERE session = ?1")?
        .query_row([&t.session], |r| r.get(0))?;
    conn.prepare_cached(
        "INSERT INTO client_turns (session, turn, run, request, workflow, plan, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        t.session,
        turn,
        t.run.as_str(),
        t.request,
        t.workflow,
        t.plan,
        now
    ])?;
    conn.prepare_cached("UPDATE client_sessions SET updated_ms = ?2 WHERE id = ?1")?
        .execute(params![t.session, now])?;
    Ok(turn)
}

/// The `client_sessions` columns every backend reads, in the order [`session_row`] takes
/// them.
pub(crate) const SESSION_COLUMNS: &str = "id, client, cwd, title, config, created_ms, updated_ms";

/// The `client_turns` columns every backend reads, in the order [`turn_row`] takes them.
pub(crate) const TURN_COLUMNS: &str = "session, turn, run, request, workflow, plan, created_ms";

/// A row of [`SESSION_COLUMNS`] as its record (every backend's).
pub(crate) fn session_row<C: Columns>(r: &C) -> Result<ClientSession, C::Error> {
    Ok(ClientSession {
        id: r.text(0)?,
        client: r.text(1)?,
        cwd: r.text(2)?,
        title: r.text_opt(3)?,
        config: r.text(4)?,
        created_ms: r.int(5)?,
        updated_ms: r.int(6)?,
    })
}

/// A row of [`TURN_COLUMNS`] as its record (every backend's).
pub(crate) fn turn_row<C: Columns>(r: &C) -> Result<ClientTurn, C::Error> {
    Ok(ClientTurn {
        session: r.text(0)?,
        turn: u32::try_from(r.int(1)?).unwrap_or(u32::MAX),
        run: RunId::from_string(r.text(2)?),
        request: r.text(3)?,
        workflow: r.text_opt(4)?,
        plan: r.text(5)?,
        created_ms: r.int(6)?,
    })
}

impl Reader {
    fn client_sessions(&self, client: &str) -> Result<Vec<ClientSession>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM client_sessions WHERE client = ?1
                 ORDER BY updated_ms DESC, id"
            ))
            .and_then(|mut st| st.query_map([client], |r| session_row(r))?.collect())
            .map_err(self.sqlite())
        })
    }

    fn client_session(&self, id: &str) -> Result<Option<ClientSession>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM client_sessions WHERE id = ?1"
            ))
            .and_then(|mut st| st.query_row([id], |r| session_row(r)).optional())
            .map_err(self.sqlite())
        })
    }

    fn client_turns(&self, session: &str) -> Result<Vec<ClientTurn>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {TURN_COLUMNS} FROM client_turns WHERE session = ?1 ORDER BY turn"
            ))
            .and_then(|mut st| st.query_map([session], |r| turn_row(r))?.collect())
            .map_err(self.sqlite())
        })
    }
}

/// Front-end clients' sessions (an editor's ACP sessions) and their prompt turns, each turn
/// a run.
pub trait ClientSessionStore: Send + Sync {
    /// Records a client session, or updates its title and config; returns it as committed.
    fn put_client_session(&self, session: ClientSession) -> Result<ClientSession>;

    /// Appends a prompt turn to a client session; returns its number (1, 2, …).
    fn add_client_turn(&self, turn: ClientTurn) -> Result<u32>;

    /// The sessions of a client (`acp`), most recently changed first.
    fn client_sessions(&self, client: &str) -> Result<Vec<ClientSession>>;

    /// One client session, if recorded.
    fn client_session(&self, id: &str) -> Result<Option<ClientSession>>;

    /// A client session's turns, in order.
    fn client_turns(&self, session: &str) -> Result<Vec<ClientTurn>>;
}

impl ClientSessionStore for SqliteStore {
    fn put_client_session(&self, session: ClientSession) -> Result<ClientSession> {
        let id = session.id.clone();
        self.request(|reply| Msg::Record(Record::ClientSession(session), reply))??;
        self.reader
            .client_session(&id)?
            .ok_or_else(|| crate::Error::NotFound {
                what: "client session",
                id,
            })
    }

    fn add_client_turn(&self, turn: ClientTurn) -> Result<u32> {
        let n = self.request(|reply| Msg::Record(Record::ClientTurn(turn), reply))??;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    fn client_sessions(&self, client: &str) -> Result<Vec<ClientSession>> {
        self.reader.client_sessions(client)
    }

    fn client_session(&self, id: &str) -> Result<Option<ClientSession>> {
        self.reader.client_session(id)
    }

    fn client_turns(&self, session: &str) -> Result<Vec<ClientTurn>> {
        self.reader.client_turns(session)
    }
}
