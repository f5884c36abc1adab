//! Front-end clients' sessions on PostgreSQL: [`ClientSessionStore`] for [`PgStore`].
//!
//! As on SQLite, a turn is numbered after its session's last one inside the transaction
//! that inserts it. Several servers may add turns to one session at once, so that
//! transaction first takes an advisory lock on the session (the two-key form, beside the
//! migrations' one-key lock): the second waits, then numbers its turn after the first's.
//! Text is bound as it is: a value holding a NUL character, which PostgreSQL text cannot
//! keep, is refused by the server and nothing of the call is written.

use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};
use trellis_protocol::records::{ClientSession, ClientTurn};

use super::{JobError, PgStore};
use crate::ClientSessionStore;
use crate::client_sessions::{SESSION_COLUMNS, TURN_COLUMNS, session_row, turn_row};
use crate::error::Result;
use crate::schema::now_ms;

/// The first key of the advisory lock a turn's transaction takes on its session (the
/// second is the session id's hash): `"clnt"` as a big-endian integer.
const TURN_LOCK: i32 = 0x636c_6e74;

const UPSERT_SQL: &str = "INSERT INTO client_sessions (id, client, cwd, title, config, created_ms,
                                  updated_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $6)
     ON CONFLICT (id) DO UPDATE SET title = excluded.title, config = excluded.config,
        updated_ms = excluded.updated_ms
     RETURNING id, client, cwd, title, config, created_ms, updated_ms";

fn session(r: &Row) -> Result<ClientSession, JobError> {
    Ok(session_row(r)?)
}

fn turn(r: &Row) -> Result<ClientTurn, JobError> {
    Ok(turn_row(r)?)
}

/// Numbers the turn after its session's last and inserts it; answers its number.
const INSERT_TURN_SQL: &str =
    "INSERT INTO client_turns (session, turn, run, request, workflow, plan,
                                   created_ms)
     SELECT $1, COALESCE(MAX(turn), 0) + 1, $2, $3, $4, $5, $6 FROM client_turns
     WHERE session = $1
     RETURNING turn";

impl ClientSessionStore for PgStore {
    fn put_client_session(&self, s: ClientSession) -> Result<ClientSession> {
        self.write(async move |c| {
            let now = now_ms();
            let params: [(&(dyn ToSql + Sync), Type); 6] = [
                (&s.id, Type::TEXT),
                (&s.client, Type::TEXT),
                (&s.cwd, Type::TEXT),
                (&s.title, Type::TEXT),
                (&s.config, Type::TEXT),
                (&now, Type::INT8),
            ];
            session(&c.query_typed_one(UPSERT_SQL, &params).await?)
        })
    }

    fn add_client_turn(&self, t: ClientTurn) -> Result<u32> {
        self.write(async move |c| {
            let now = now_ms();
            let lock: [(&(dyn ToSql + Sync), Type); 2] =
                [(&TURN_LOCK, Type::INT4), (&t.session, Type::TEXT)];
            let turn: [(&(dyn ToSql + Sync), Type); 6] = [
                (&t.session, Type::TEXT),
                (&t.run.as_str(), Type::TEXT),
                (&t.request, Type::TEXT),
                (&t.workflow, Type::TEXT),
                (&t.plan, Type::TEXT),
                (&now, Type::INT8),
            ];
            let touch: [(&(dyn ToSql + Sync), Type); 2] =
                [(&t.session, Type::TEXT), (&now, Type::INT8)];
            // One round trip; a failing statement makes the `COMMIT` a rollback.
            let (begun, locked, inserted, touched, ended) = futures::join!(
                c.batch_execute("BEGIN"),
                c.execute_typed("SELECT pg_advisory_xact_lock($1, hashtext($2))", &lock),
                c.query_typed_one(INSERT_TURN_SQL, &turn),
                c.execute_typed(
                    "UPDATE client_sessions SET updated_ms = $2 WHERE id = $1",
                    &touch
                ),
                c.batch_execute("COMMIT"),
            );
            begun?;
            locked?;
            let n: i64 = inserted?.try_get(0)?;
            touched?;
            ended?;
            Ok(u32::try_from(n).unwrap_or(u32::MAX))
        })
    }

    fn client_sessions(&self, client: &str) -> Result<Vec<ClientSession>> {
        let client = client.to_owned();
        self.read(async move |c| {
            let sql = format!(
                "SELECT {SESSION_COLUMNS} FROM client_sessions WHERE client = $1
                 ORDER BY updated_ms DESC, id"
            );
            c.query_typed(&sql, &[(&client, Type::TEXT)])
                .await?
                .iter()
                .map(session)
                .collect()
        })
    }

    fn client_session(&self, id: &str) -> Result<Option<ClientSession>> {
        let id = id.to_owned();
        self.read(async move |c| {
            let sql = format!("SELECT {SESSION_COLUMNS} FROM client_sessions WHERE id = $1");
            c.query_typed_opt(&sql, &[(&id, Type::TEXT)])
                .await?
                .map(|r| session(&r))
                .transpose()
        })
    }

    fn client_turns(&self, session: &str) -> Result<Vec<ClientTurn>> {
        let session = session.to_owned();
        self.read(async move |c| {
            let sql =
                format!("SELECT {TURN_COLUMNS} FROM client_turns WHERE session = $1 ORDER BY turn");
            c.query_typed(&sql, &[(&session, Type::TEXT)])
                .await?
                .iter()
                .map(turn)
                .collect()
        })
    }
}
