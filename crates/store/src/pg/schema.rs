//! Versioned schema migrations for PostgreSQL.
//!
//! The same append-only scheme as the SQLite file's (`crate::schema`), with the same
//! versions and names: migration N here creates the tables and indexes SQLite migration N
//! creates, so [`crate::SCHEMA_VERSION`] is one number for both backends and a version
//! recorded in either means the same tables. All pending migrations run in one
//! transaction that first takes a transaction-scoped advisory lock ([`MIGRATION_LOCK`]), so
//! two processes migrating a fresh database at once apply them once, and a failure leaves
//! the database as it was. A database whose recorded version is newer than
//! [`LATEST_VERSION`] is refused.
//!
//! # Translation from the SQLite DDL
//!
//! * `INTEGER` → `BIGINT` (times in ms, seqs, counts, sizes), `REAL` → `DOUBLE PRECISION`,
//!   `BLOB` → `BYTEA`; `WITHOUT ROWID` is dropped (a PostgreSQL table is a heap either way).
//! * The four 0/1 flags (`tool_calls.is_error`, `model_calls.reported`,
//!   `tool_executions.success`, `run_leases.runnable`) → `BOOLEAN`: the SQLite code binds Rust `bool`s there
//!   (rusqlite stores them as 0/1) and tokio-postgres binds `bool` to `BOOLEAN` only; the
//!   SQL that does arithmetic on them (`SUM(reported = 0)`) is rewritten either way.
//! * Every `TEXT` column is `COLLATE "C"`: SQLite compares text bytewise, and the store
//!   relies on it (a run id prefix is the range `[prefix, prefix || U+10FFFF)`, listings
//!   order by id or tool name); the database's default collation may be a locale's.
//! * Rowids the SQLite code lets the database assign (`runs.rk`, and the `id` of
//!   `commands`, `tool_calls`, `model_calls`, `turn_messages`, `turn_tools`, `artifacts`,
//!   `review_comments`, `tool_executions`, `speculations`) → `BIGINT GENERATED ALWAYS AS
//!   IDENTITY` (an importer supplies its own with `OVERRIDING SYSTEM VALUE` and moves the
//!   sequence on). `runs.rk` is capped at 2^31 - 1, the most an event key holds. Unlike a
//!   rowid, an identity value is drawn before `ON CONFLICT` is decided, so an upsert of an
//!   existing run spends one; the writer must look a run's `rk` up before inserting.
//! * `events.key` stays one `BIGINT` primary key, `(rk << 32) | first_seq`. Its blobs are
//!   already LZ4-compressed: `toast_tuple_target = 8160` and `STORAGE EXTERNAL` keep a row of
//!   up to ~8 KB in the heap page uncompressed (the SQLite comment's reason for a rowid
//!   table), and store larger ones out of line without trying to compress them again.
//!   Embeddings (`tool_nodes.embedding`, floats) are stored `EXTERNAL` as well.

use tokio_postgres::{Client, GenericClient};

use super::error::{PgError, describe};

/// One schema change: the PostgreSQL DDL of the SQLite migration with the same version.
pub(crate) struct Migration {
    /// Monotonic version, from 1 (the SQLite migration's).
    pub(crate) version: i64,
    /// Short name, recorded beside the version (the SQLite migration's).
    pub(crate) name: &'static str,
    /// The DDL.
    pub(crate) sql: &'static str,
}

/// The newest schema version this binary knows (the SQLite list's: [`crate::SCHEMA_VERSION`]).
pub(crate) const LATEST_VERSION: i64 = 9;

/// The advisory lock key every migrating transaction takes: `"trellis\0"` as a big-endian
/// integer.
pub(crate) const MIGRATION_LOCK: i64 = 0x7472_656c_6c69_7300;

/// Every migration, in order. Never edit a released entry; append a new one, with the
/// version and name of the SQLite migration it translates.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: r#"
        CREATE TABLE runs (
            rk          BIGINT GENERATED ALWAYS AS IDENTITY (MAXVALUE 2147483647) PRIMARY KEY,
            id          TEXT COLLATE "C" NOT NULL UNIQUE,
            graph       TEXT COLLATE "C" NOT NULL,
            status      TEXT COLLATE "C" NOT NULL,
            step        BIGINT NOT NULL,
            last_seq    BIGINT NOT NULL,
            terminal    TEXT COLLATE "C",
            error       TEXT COLLATE "C",
            fork_run    TEXT COLLATE "C",
            fork_seq    BIGINT,
            created_ts  BIGINT NOT NULL,
            updated_ts  BIGINT NOT NULL
        );

        CREATE TABLE events (
            key         BIGINT PRIMARY KEY,
            last_seq    BIGINT NOT NULL,
            data        BYTEA  NOT NULL
        ) WITH (toast_tuple_target = 8160);
        ALTER TABLE events ALTER COLUMN data SET STORAGE EXTERNAL;

        CREATE TABLE run_owners (
            run_id      TEXT COLLATE "C" PRIMARY KEY,
            pid         BIGINT NOT NULL,
            host        TEXT COLLATE "C" NOT NULL,
            start_time  BIGINT,
            claimed_at  BIGINT NOT NULL,
            heartbeat   BIGINT NOT NULL
        );

        CREATE TABLE commands (
            id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id      TEXT COLLATE "C" NOT NULL,
            created_at  BIGINT NOT NULL,
            body        TEXT COLLATE "C" NOT NULL,
            taken_at    BIGINT
        );
        CREATE INDEX commands_pending ON commands (run_id, id) WHERE taken_at IS NULL;
    "#,
    },
    Migration {
        version: 2,
        name: "tool_calls_and_changes",
        sql: r#"
        CREATE TABLE tool_calls (
            id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id      TEXT COLLATE "C",
            node_id     TEXT COLLATE "C",
            tool        TEXT COLLATE "C" NOT NULL,
            args        TEXT COLLATE "C" NOT NULL,
            decision    TEXT COLLATE "C" NOT NULL,
            is_error    BOOLEAN NOT NULL,
            summary     TEXT COLLATE "C" NOT NULL,
            duration_ms BIGINT NOT NULL,
            started_at  BIGINT NOT NULL
        );
        CREATE INDEX tool_calls_run ON tool_calls (run_id, id);

        CREATE TABLE change_sets (
            run_id      TEXT COLLATE "C" PRIMARY KEY,
            repo        TEXT COLLATE "C" NOT NULL,
            branch      TEXT COLLATE "C" NOT NULL,
            base_commit TEXT COLLATE "C" NOT NULL,
            worktree    TEXT COLLATE "C",
            state       TEXT COLLATE "C" NOT NULL,
            review      TEXT COLLATE "C",
            created_at  BIGINT NOT NULL,
            updated_at  BIGINT NOT NULL
        );

        CREATE TABLE change_ops (
            run_id      TEXT COLLATE "C" NOT NULL,
            seq         BIGINT NOT NULL,
            kind        TEXT COLLATE "C" NOT NULL,
            state       TEXT COLLATE "C" NOT NULL,
            journal     TEXT COLLATE "C" NOT NULL,
            files       BIGINT NOT NULL,
            created_at  BIGINT NOT NULL,
            finished_at BIGINT,
            PRIMARY KEY (run_id, seq)
        );
    "#,
    },
    Migration {
        version: 3,
        name: "model_calls",
        sql: r#"
        CREATE TABLE model_calls (
            id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id            TEXT COLLATE "C",
            stage             TEXT COLLATE "C",
            agent             TEXT COLLATE "C",
            profile           TEXT COLLATE "C" NOT NULL,
            model             TEXT COLLATE "C" NOT NULL,
            prompt_tokens     BIGINT NOT NULL,
            completion_tokens BIGINT NOT NULL,
            cached_tokens     BIGINT NOT NULL,
            reported          BOOLEAN NOT NULL,
            cost_usd          DOUBLE PRECISION,
            outcome           TEXT COLLATE "C" NOT NULL,
            at                BIGINT NOT NULL
        );
        CREATE INDEX model_calls_run ON model_calls (run_id, id);
    "#,
    },
    Migration {
        version: 4,
        name: "streams_sessions_artifacts",
        sql: r#"
        CREATE TABLE stream_events (
            stream      TEXT COLLATE "C" NOT NULL,
            seq         BIGINT NOT NULL,
            ts          BIGINT NOT NULL,
            submission  TEXT COLLATE "C",
            data        TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (stream, seq)
        );

        CREATE TABLE sessions (
            id          TEXT COLLATE "C" PRIMARY KEY,
            owner       TEXT COLLATE "C" NOT NULL,
            run         TEXT COLLATE "C",
            node        TEXT COLLATE "C",
            role        TEXT COLLATE "C",
            channel     TEXT COLLATE "C",
            status      TEXT COLLATE "C" NOT NULL,
            error       TEXT COLLATE "C",
            created_ms  BIGINT NOT NULL,
            updated_ms  BIGINT NOT NULL,
            last_seq    BIGINT NOT NULL
        );
        CREATE INDEX sessions_run ON sessions (run, created_ms) WHERE run IS NOT NULL;
        CREATE INDEX sessions_channel ON sessions (channel, created_ms) WHERE channel IS NOT NULL;
        CREATE INDEX sessions_created ON sessions (created_ms);

        CREATE TABLE turns (
            session           TEXT COLLATE "C" NOT NULL,
            turn              BIGINT NOT NULL,
            attempt           BIGINT NOT NULL,
            status            TEXT COLLATE "C" NOT NULL,
            started_ms        BIGINT NOT NULL,
            finished_ms       BIGINT,
            prompt_tokens     BIGINT,
            completion_tokens BIGINT,
            message           TEXT COLLATE "C",
            error             TEXT COLLATE "C",
            PRIMARY KEY (session, turn)
        );

        CREATE TABLE turn_messages (
            id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session     TEXT COLLATE "C" NOT NULL,
            turn        BIGINT NOT NULL,
            role        TEXT COLLATE "C" NOT NULL,
            text        TEXT COLLATE "C" NOT NULL
        );
        CREATE INDEX turn_messages_turn ON turn_messages (session, turn);
        CREATE UNIQUE INDEX turn_messages_assistant ON turn_messages (session, turn)
            WHERE role = 'assistant';

        CREATE TABLE turn_thoughts (
            session     TEXT COLLATE "C" NOT NULL,
            turn        BIGINT NOT NULL,
            text        TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (session, turn)
        );

        CREATE TABLE turn_tools (
            id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session     TEXT COLLATE "C" NOT NULL,
            turn        BIGINT NOT NULL,
            call_id     TEXT COLLATE "C" NOT NULL,
            name        TEXT COLLATE "C" NOT NULL,
            input       TEXT COLLATE "C",
            output      TEXT COLLATE "C",
            status      TEXT COLLATE "C" NOT NULL,
            started_ms  BIGINT NOT NULL,
            duration_ms BIGINT,
            UNIQUE (session, turn, call_id)
        );

        CREATE TABLE artifacts (
            id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run         TEXT COLLATE "C" NOT NULL,
            node        TEXT COLLATE "C",
            kind        TEXT COLLATE "C" NOT NULL,
            version     BIGINT NOT NULL,
            content     TEXT COLLATE "C" NOT NULL,
            status      TEXT COLLATE "C" NOT NULL,
            feedback    TEXT COLLATE "C",
            created_ms  BIGINT NOT NULL,
            updated_ms  BIGINT NOT NULL,
            UNIQUE (run, kind, version)
        );
    "#,
    },
    Migration {
        version: 5,
        name: "client_sessions",
        sql: r#"
        CREATE TABLE client_sessions (
            id          TEXT COLLATE "C" PRIMARY KEY,
            client      TEXT COLLATE "C" NOT NULL,
            cwd         TEXT COLLATE "C" NOT NULL,
            title       TEXT COLLATE "C",
            config      TEXT COLLATE "C" NOT NULL,
            created_ms  BIGINT NOT NULL,
            updated_ms  BIGINT NOT NULL
        );
        CREATE INDEX client_sessions_updated ON client_sessions (client, updated_ms);
        CREATE TABLE client_turns (
            session     TEXT COLLATE "C" NOT NULL,
            turn        BIGINT NOT NULL,
            run         TEXT COLLATE "C" NOT NULL,
            request     TEXT COLLATE "C" NOT NULL,
            workflow    TEXT COLLATE "C",
            plan        TEXT COLLATE "C" NOT NULL,
            created_ms  BIGINT NOT NULL,
            PRIMARY KEY (session, turn)
        );
    "#,
    },
    Migration {
        version: 6,
        name: "review_comments",
        sql: r#"
        CREATE TABLE review_comments (
            id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run         TEXT COLLATE "C" NOT NULL,
            node        TEXT COLLATE "C",
            author      TEXT COLLATE "C" NOT NULL,
            comment     TEXT COLLATE "C" NOT NULL,
            created_ms  BIGINT NOT NULL
        );
        CREATE INDEX review_comments_run ON review_comments (run, id);
    "#,
    },
    Migration {
        version: 7,
        name: "tool_graph",
        sql: r#"
        CREATE TABLE tool_nodes (
            tool        TEXT COLLATE "C" PRIMARY KEY,
            server      TEXT COLLATE "C",
            description TEXT COLLATE "C" NOT NULL,
            embedding   BYTEA,
            embedder    TEXT COLLATE "C",
            calls       BIGINT NOT NULL,
            successes   BIGINT NOT NULL,
            updated_ms  BIGINT NOT NULL
        );
        ALTER TABLE tool_nodes ALTER COLUMN embedding SET STORAGE EXTERNAL;

        CREATE TABLE tool_dependency (
            from_tool      TEXT COLLATE "C" NOT NULL,
            to_tool        TEXT COLLATE "C" NOT NULL,
            observed_count BIGINT NOT NULL,
            confidence     DOUBLE PRECISION NOT NULL,
            success_count  BIGINT NOT NULL,
            PRIMARY KEY (from_tool, to_tool)
        );

        CREATE TABLE tool_executions (
            id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            context     TEXT COLLATE "C" NOT NULL,
            tools       TEXT COLLATE "C" NOT NULL,
            success     BOOLEAN NOT NULL,
            created_ms  BIGINT NOT NULL
        );

        CREATE TABLE speculations (
            id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            context     TEXT COLLATE "C" NOT NULL,
            tools       TEXT COLLATE "C" NOT NULL,
            confidence  DOUBLE PRECISION NOT NULL,
            outcome     TEXT COLLATE "C" NOT NULL,
            created_ms  BIGINT NOT NULL
        );
    "#,
    },
    Migration {
        version: 8,
        name: "dag_checkpoints",
        sql: r#"
        CREATE TABLE dag_checkpoints (
            id          TEXT COLLATE "C" PRIMARY KEY,
            state       TEXT COLLATE "C" NOT NULL,
            updated_ms  BIGINT NOT NULL
        );
    "#,
    },
    Migration {
        version: 9,
        name: "run_leases",
        sql: r#"
        CREATE TABLE run_leases (
            run_id      TEXT COLLATE "C" PRIMARY KEY,
            owner       TEXT COLLATE "C",
            token       BIGINT NOT NULL DEFAULT 0,
            expires_at  BIGINT,
            runnable    BOOLEAN NOT NULL DEFAULT false,
            queued_at   BIGINT NOT NULL
        );
        CREATE INDEX run_leases_queue ON run_leases (queued_at) WHERE runnable;
    "#,
    },
];

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version     BIGINT PRIMARY KEY,
    name        TEXT COLLATE \"C\" NOT NULL,
    applied_at  BIGINT NOT NULL
)";

/// The version recorded in the database (0 when it has no `schema_migrations`).
async fn current_version(client: &impl GenericClient) -> Result<i64, tokio_postgres::Error> {
    let row = client
        .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
        .await?;
    if !row.get::<_, bool>(0) {
        return Ok(0);
    }
    let row = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::int8 FROM schema_migrations",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// Brings the database up to [`LATEST_VERSION`]; returns the version it is at afterwards.
/// `url` is the redacted `[store] url`, for messages.
pub(crate) async fn migrate(client: &mut Client, url: &str) -> Result<i64, PgError> {
    let query = |source| PgError::query(url, source);
    // Fast path without the lock: connecting to a current database (every process but the
    // first) waits for no one.
    let found = current_version(client).await.map_err(query)?;
    check_not_newer(found, url)?;
    if found == LATEST_VERSION {
        return Ok(found);
    }

    let tx = client.transaction().await.map_err(query)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(query)?;
    tx.batch_execute(CREATE_TABLE).await.map_err(query)?;
    // Re-read under the lock: another process may have migrated meanwhile (READ COMMITTED:
    // this statement sees what it committed).
    let found = current_version(&tx).await.map_err(query)?;
    check_not_newer(found, url)?;
    let now = crate::schema::now_ms();
    for m in MIGRATIONS.iter().filter(|m| m.version > found) {
        let err = |source: tokio_postgres::Error| PgError::Migration {
            url: url.to_owned(),
            version: m.version,
            name: m.name,
            detail: describe(&source),
        };
        tx.batch_execute(m.sql).await.map_err(err)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &now],
        )
        .await
        .map_err(err)?;
    }
    tx.commit().await.map_err(query)?;
    Ok(LATEST_VERSION)
}

fn check_not_newer(found: i64, url: &str) -> Result<(), PgError> {
    if found > LATEST_VERSION {
        return Err(PgError::NewerSchema {
            url: url.to_owned(),
            found,
            supported: LATEST_VERSION,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version N here is SQLite's version N: one `SCHEMA_VERSION` for both backends.
    #[test]
    fn versions_and_names_match_the_sqlite_list() {
        let pg: Vec<_> = MIGRATIONS.iter().map(|m| (m.version, m.name)).collect();
        let sqlite: Vec<_> = crate::schema::MIGRATIONS
            .iter()
            .map(|m| (m.version, m.name))
            .collect();
        assert_eq!(pg, sqlite);
        assert_eq!(LATEST_VERSION, crate::SCHEMA_VERSION);
    }

    #[test]
    fn the_lock_key_spells_trellis() {
        assert_eq!(MIGRATION_LOCK.to_be_bytes(), *b"trellis\0");
    }
}
