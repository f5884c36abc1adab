//! Versioned schema migrations.
//!
//! Migrations are an ordered, append-only list. Each is applied at most once, recorded in
//! `schema_migrations`, and all pending ones run in one `BEGIN IMMEDIATE` transaction, so two
//! processes opening a fresh file at once cannot both apply them and a failure leaves the file
//! as it was. A file whose recorded version is newer than [`LATEST_VERSION`] is refused: an
//! old binary must not write into a layout it does not understand.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::error::{Error, Result};

/// One schema change.
pub(crate) struct Migration {
    /// Monotonic version, from 1.
    pub(crate) version: i64,
    /// Short name, recorded beside the version.
    pub(crate) name: &'static str,
    /// The DDL.
    pub(crate) sql: &'static str,
}

/// Every migration, in order. Never edit a released entry; append a new one.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: r#"
        -- One row per run. `rk` is the compact integer key the event rows use, so the 32-char
        -- run id is stored once per run instead of once per batch.
        CREATE TABLE runs (
            rk          INTEGER PRIMARY KEY,
            id          TEXT    NOT NULL UNIQUE,
            graph       TEXT    NOT NULL,
            status      TEXT    NOT NULL,
            step        INTEGER NOT NULL,
            last_seq    INTEGER NOT NULL,
            terminal    TEXT,
            error       TEXT,
            fork_run    TEXT,
            fork_seq    INTEGER,
            created_ts  INTEGER NOT NULL,
            updated_ts  INTEGER NOT NULL
        );

        -- One row per appended batch. The rowid is the key `(rk << 32) | first_seq`, so a
        -- run's batches are one contiguous key range, the key costs no extra index, and the
        -- row lives in a table b-tree, which keeps blobs of up to ~4 KB on the leaf page (an
        -- index b-tree such as a WITHOUT ROWID table spills anything over ~1 KB to a mostly
        -- empty overflow page). `data` is the codec's blob (see codec.rs).
        CREATE TABLE events (
            key         INTEGER PRIMARY KEY,
            last_seq    INTEGER NOT NULL,
            data        BLOB    NOT NULL
        );

        -- Which process executes a run. Kept apart from `runs` because a run is claimed
        -- before its first batch creates its row, and released rows cost nothing.
        CREATE TABLE run_owners (
            run_id      TEXT    PRIMARY KEY,
            pid         INTEGER NOT NULL,
            host        TEXT    NOT NULL,
            start_time  INTEGER,
            claimed_at  INTEGER NOT NULL,
            heartbeat   INTEGER NOT NULL
        ) WITHOUT ROWID;

        -- Cross-process command inbox.
        CREATE TABLE commands (
            id          INTEGER PRIMARY KEY,
            run_id      TEXT    NOT NULL,
            created_at  INTEGER NOT NULL,
            body        TEXT    NOT NULL,
            taken_at    INTEGER
        );
        CREATE INDEX commands_pending ON commands (run_id, id) WHERE taken_at IS NULL;
    "#,
    },
    Migration {
        version: 2,
        name: "tool_calls_and_changes",
        sql: r#"
        -- Every tool call an agent made: arguments, decision, outcome. `run_id` and
        -- `node_id` are NULL for calls outside a run.
        CREATE TABLE tool_calls (
            id          INTEGER PRIMARY KEY,
            run_id      TEXT,
            node_id     TEXT,
            tool        TEXT    NOT NULL,
            args        TEXT    NOT NULL,
            decision    TEXT    NOT NULL,
            is_error    INTEGER NOT NULL,
            summary     TEXT    NOT NULL,
            duration_ms INTEGER NOT NULL,
            started_at  INTEGER NOT NULL
        );
        CREATE INDEX tool_calls_run ON tool_calls (run_id, id);

        -- A run's change set: its worktree branch and base commit, and where its review
        -- stands (`open`, `changes_requested`, `rejected`, `applied`, `undone`, `pruned`).
        CREATE TABLE change_sets (
            run_id      TEXT    PRIMARY KEY,
            repo        TEXT    NOT NULL,
            branch      TEXT    NOT NULL,
            base_commit TEXT    NOT NULL,
            worktree    TEXT,
            state       TEXT    NOT NULL,
            review      TEXT,
            created_at  INTEGER NOT NULL,
            updated_at  INTEGER NOT NULL
        ) WITHOUT ROWID;

        -- Apply / undo / redo operations on the user's working tree, in order per run.
        -- `journal` is the operation's directory (manifest and file contents).
        CREATE TABLE change_ops (
            run_id      TEXT    NOT NULL,
            seq         INTEGER NOT NULL,
            kind        TEXT    NOT NULL,
            state       TEXT    NOT NULL,
            journal     TEXT    NOT NULL,
            files       INTEGER NOT NULL,
            created_at  INTEGER NOT NULL,
            finished_at INTEGER,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID;
    "#,
    },
    Migration {
        version: 3,
        name: "model_calls",
        sql: r#"
        -- Every model call's usage, booked when the call ended (also failed and cancelled
        -- calls: the endpoint may have billed them). `reported` says whether the provider
        -- reported the counts (else they were counted or estimated locally); `cost_usd` is
        -- NULL without a configured price; `outcome` is `ok`, `failed` or `cancelled`.
        CREATE TABLE model_calls (
            id                INTEGER PRIMARY KEY,
            run_id            TEXT,
            stage             TEXT,
            agent             TEXT,
            profile           TEXT    NOT NULL,
            model             TEXT    NOT NULL,
            prompt_tokens     INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            cached_tokens     INTEGER NOT NULL,
            reported          INTEGER NOT NULL,
            cost_usd          REAL,
            outcome           TEXT    NOT NULL,
            at                INTEGER NOT NULL
        );
        CREATE INDEX model_calls_run ON model_calls (run_id, id);
    "#,
    },
    Migration {
        version: 4,
        name: "streams_sessions_artifacts",
        sql: r#"
        -- The log of the runtime service's non-run streams: `stream` is the StreamId's text
        -- form (`session:<id>`, `workspace`), `data` the compact JSON of the SessionEvent or
        -- WorkspaceEvent. Runs keep their own log (`events`). A rowid table (not WITHOUT
        -- ROWID) so large bodies, such as a tool's output, stay off the key's b-tree.
        CREATE TABLE stream_events (
            stream      TEXT    NOT NULL,
            seq         INTEGER NOT NULL,
            ts          INTEGER NOT NULL,
            submission  TEXT,
            data        TEXT    NOT NULL,
            PRIMARY KEY (stream, seq)
        );

        -- Sessions, materialised from their streams in the same transaction. `owner` is
        -- `agent` (with run, node and role) or `channel` (with channel); `status` is
        -- `running`, `completed` or `error`; `last_seq` is the session stream's last seq.
        CREATE TABLE sessions (
            id          TEXT    PRIMARY KEY,
            owner       TEXT    NOT NULL,
            run         TEXT,
            node        TEXT,
            role        TEXT,
            channel     TEXT,
            status      TEXT    NOT NULL,
            error       TEXT,
            created_ms  INTEGER NOT NULL,
            updated_ms  INTEGER NOT NULL,
            last_seq    INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX sessions_run ON sessions (run, created_ms) WHERE run IS NOT NULL;
        CREATE INDEX sessions_channel ON sessions (channel, created_ms) WHERE channel IS NOT NULL;
        CREATE INDEX sessions_created ON sessions (created_ms);

        -- One model call of a session. `status` is `running`, `completed` or `failed`;
        -- `message` the assistant message's JSON once completed.
        CREATE TABLE turns (
            session           TEXT    NOT NULL,
            turn              INTEGER NOT NULL,
            attempt           INTEGER NOT NULL,
            status            TEXT    NOT NULL,
            started_ms        INTEGER NOT NULL,
            finished_ms       INTEGER,
            prompt_tokens     INTEGER,
            completion_tokens INTEGER,
            message           TEXT,
            error             TEXT,
            PRIMARY KEY (session, turn)
        );

        -- A turn's text: one `assistant` row (the deltas appended) and the `user` messages
        -- that precede its model call, in rowid order.
        CREATE TABLE turn_messages (
            id          INTEGER PRIMARY KEY,
            session     TEXT    NOT NULL,
            turn        INTEGER NOT NULL,
            role        TEXT    NOT NULL,
            text        TEXT    NOT NULL
        );
        CREATE INDEX turn_messages_turn ON turn_messages (session, turn);
        CREATE UNIQUE INDEX turn_messages_assistant ON turn_messages (session, turn)
            WHERE role = 'assistant';

        -- A turn's thinking (the deltas appended).
        CREATE TABLE turn_thoughts (
            session     TEXT    NOT NULL,
            turn        INTEGER NOT NULL,
            text        TEXT    NOT NULL,
            PRIMARY KEY (session, turn)
        );

        -- A turn's tool calls, in rowid order. `status` is `running` until the call
        -- completes, then the ToolStatus wire name (`ok`, `error`, `denied`, `interrupted`,
        -- `cancelled`); a call left `running` was cut off by a crash.
        CREATE TABLE turn_tools (
            id          INTEGER PRIMARY KEY,
            session     TEXT    NOT NULL,
            turn        INTEGER NOT NULL,
            call_id     TEXT    NOT NULL,
            name        TEXT    NOT NULL,
            input       TEXT,
            output      TEXT,
            status      TEXT    NOT NULL,
            started_ms  INTEGER NOT NULL,
            duration_ms INTEGER,
            UNIQUE (session, turn, call_id)
        );

        -- Versioned artifacts of a run (scope cards, plans, specs …); `status` is
        -- ArtifactStatus::as_str.
        CREATE TABLE artifacts (
            id          INTEGER PRIMARY KEY,
            run         TEXT    NOT NULL,
            node        TEXT,
            kind        TEXT    NOT NULL,
            version     INTEGER NOT NULL,
            content     TEXT    NOT NULL,
            status      TEXT    NOT NULL,
            feedback    TEXT,
            created_ms  INTEGER NOT NULL,
            updated_ms  INTEGER NOT NULL,
            UNIQUE (run, kind, version)
        );
    "#,
    },
    Migration {
        version: 5,
        name: "client_sessions",
        sql: r#"
        -- Sessions of front-end clients (an editor's ACP sessions) and their prompt turns,
        -- each a run: what `session/load` and `session/list` read after a restart.
        CREATE TABLE client_sessions (
            id          TEXT    PRIMARY KEY,
            client      TEXT    NOT NULL,
            cwd         TEXT    NOT NULL,
            title       TEXT,
            config      TEXT    NOT NULL,
            created_ms  INTEGER NOT NULL,
            updated_ms  INTEGER NOT NULL
        );
        CREATE INDEX client_sessions_updated ON client_sessions (client, updated_ms);
        CREATE TABLE client_turns (
            session     TEXT    NOT NULL,
            turn        INTEGER NOT NULL,
            run         TEXT    NOT NULL,
            request     TEXT    NOT NULL,
            workflow    TEXT,
            plan        TEXT    NOT NULL,
            created_ms  INTEGER NOT NULL,
            PRIMARY KEY (session, turn)
        );
    "#,
    },
    Migration {
        version: 6,
        name: "review_comments",
        sql: r#"
        -- Reviewers' comments on a run's change set (the review agent's comment tools), in
        -- the order they were added; `comment` is a ReviewComment as JSON.
        CREATE TABLE review_comments (
            id          INTEGER PRIMARY KEY,
            run         TEXT    NOT NULL,
            node        TEXT,
            author      TEXT    NOT NULL,
            comment     TEXT    NOT NULL,
            created_ms  INTEGER NOT NULL
        );
        CREATE INDEX review_comments_run ON review_comments (run, id);
    "#,
    },
    Migration {
        version: 7,
        name: "tool_graph",
        sql: r#"
        -- The tool knowledge graph: tools, with an embedding cached under the key
        -- of the embedder and text it came from, and their call counts in executions.
        CREATE TABLE tool_nodes (
            tool        TEXT    PRIMARY KEY,
            server      TEXT,
            description TEXT    NOT NULL,
            embedding   BLOB,
            embedder    TEXT,
            calls       INTEGER NOT NULL,
            successes   INTEGER NOT NULL,
            updated_ms  INTEGER NOT NULL
        );

        -- Dependencies learned from executions: `from_tool` ran before `to_tool` (or fed it
        -- data) in `observed_count` executions, `success_count` of them with both calls
        -- succeeding; `confidence` is computed from the two counts.
        CREATE TABLE tool_dependency (
            from_tool      TEXT    NOT NULL,
            to_tool        TEXT    NOT NULL,
            observed_count INTEGER NOT NULL,
            confidence     REAL    NOT NULL,
            success_count  INTEGER NOT NULL,
            PRIMARY KEY (from_tool, to_tool)
        ) WITHOUT ROWID;

        -- The executions they were learned from; `tools` is a JSON array of names in order.
        CREATE TABLE tool_executions (
            id          INTEGER PRIMARY KEY,
            context     TEXT    NOT NULL,
            tools       TEXT    NOT NULL,
            success     INTEGER NOT NULL,
            created_ms  INTEGER NOT NULL
        );

        -- Speculative executions' outcomes (`used`, `wasted`, `failed`), which adapt the
        -- speculation threshold.
        CREATE TABLE speculations (
            id          INTEGER PRIMARY KEY,
            context     TEXT    NOT NULL,
            tools       TEXT    NOT NULL,
            confidence  REAL    NOT NULL,
            outcome     TEXT    NOT NULL,
            created_ms  INTEGER NOT NULL
        );
    "#,
    },
    Migration {
        version: 8,
        name: "dag_checkpoints",
        sql: r#"
        -- Tool DAG executions in progress (the controlled executor's checkpoints): the
        -- plan, the results of its completed steps and the decisions taken, as JSON, so a
        -- paused or interrupted execution resumes without running its completed steps again.
        CREATE TABLE dag_checkpoints (
            id          TEXT    PRIMARY KEY,
            state       TEXT    NOT NULL,
            updated_ms  INTEGER NOT NULL
        ) WITHOUT ROWID;
    "#,
    },
    Migration {
        version: 9,
        name: "run_leases",
        sql: r#"
        -- Leases of runs for workers (crate::lease): who holds the run, a token raised at
        -- every claim (the fence of its writes), until when (ms of the database's clock),
        -- whether a worker may claim it, and since when it waits (oldest first). The
        -- PostgreSQL backend serves them; the table is here so one schema version means the
        -- same tables in both backends.
        CREATE TABLE run_leases (
            run_id      TEXT    PRIMARY KEY,
            owner       TEXT,
            token       INTEGER NOT NULL DEFAULT 0,
            expires_at  INTEGER,
            runnable    INTEGER NOT NULL DEFAULT 0,
            queued_at   INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX run_leases_queue ON run_leases (queued_at) WHERE runnable = 1;
    "#,
    },
];

/// The newest schema version this binary knows.
pub const LATEST_VERSION: i64 = 9;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version     INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    applied_at  INTEGER NOT NULL
)";

/// The version recorded in the file (0 for a fresh file).
pub(crate) fn current_version(conn: &Connection) -> rusqlite::Result<i64> {
    let has_table: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if has_table.is_none() {
        return Ok(0);
    }
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )
}

/// Brings the file up to [`LATEST_VERSION`]; returns the version it is at afterwards.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<i64> {
    let sqlite = |source| Error::Sqlite {
        path: path.to_owned(),
        source,
    };
    // Fast path without taking the write lock: opening a current file (the common case, and
    // the CLI reading while a run writes) must not wait for writers.
    let found = current_version(conn).map_err(sqlite)?;
    check_not_newer(found, path)?;
    if found == LATEST_VERSION {
        return Ok(found);
    }

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite)?;
    tx.execute_batch(CREATE_TABLE).map_err(sqlite)?;
    // Re-read under the lock: another process may have migrated meanwhile.
    let found = current_version(&tx).map_err(sqlite)?;
    check_not_newer(found, path)?;
    let now = now_ms();
    for m in MIGRATIONS.iter().filter(|m| m.version > found) {
        let err = |source| Error::Migration {
            path: path.to_owned(),
            version: m.version,
            name: m.name,
            source,
        };
        tx.execute_batch(m.sql).map_err(err)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            rusqlite::params![m.version, m.name, now],
        )
        .map_err(err)?;
    }
    tx.commit().map_err(sqlite)?;
    Ok(LATEST_VERSION)
}

fn check_not_newer(found: i64, path: &Path) -> Result<()> {
    if found > LATEST_VERSION {
        return Err(Error::NewerSchema {
            path: path.to_owned(),
            found,
            supported: LATEST_VERSION,
        });
    }
    Ok(())
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[test]
    fn migrations_are_ordered_and_end_at_latest() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "migration {} out of order", m.name);
        }
        assert_eq!(MIGRATIONS.last().map(|m| m.version), Some(LATEST_VERSION));
    }

    #[test]
    fn migrate_twice_is_a_no_op() {
        let mut conn = Connection::open_in_memory().unwrap();
        let p = Path::new(":memory:");
        assert_eq!(migrate(&mut conn, p).unwrap(), LATEST_VERSION);
        assert_eq!(migrate(&mut conn, p).unwrap(), LATEST_VERSION);
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, LATEST_VERSION);
    }

    #[test]
    fn a_version_2_file_is_migrated_keeping_its_rows() {
        let dir = std::env::temp_dir().join(format!("trellis-store-v2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("v2.db");
        let _ = std::fs::remove_file(&path);
        // What a version-2 binary left behind: migrations 1 and 2, and some rows.
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(CREATE_TABLE).unwrap();
            for m in MIGRATIONS.iter().filter(|m| m.version <= 2) {
                conn.execute_batch(m.sql).unwrap();
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, 0)",
                    rusqlite::params![m.version, m.name],
                )
                .unwrap();
            }
            conn.execute_batch(
                "INSERT INTO runs (id, graph, status, step, last_seq, created_ts, updated_ts)
                     VALUES ('r1', 'g', 'completed', 3, 9, 1, 2);
                 INSERT INTO tool_calls (run_id, node_id, tool, args, decision, is_error,
                                         summary, duration_ms, started_at)
                     VALUES ('r1', 'n', 'read_file', '{}', 'auto', 0, 'ok', 5, 1);
                 INSERT INTO change_sets (run_id, repo, branch, base_commit, state,
                                          created_at, updated_at)
                     VALUES ('r1', '/repo', 'trellis/run-r1', 'abc', 'open', 1, 1);",
            )
            .unwrap();
            assert_eq!(current_version(&conn).unwrap(), 2);
        }
        let mut conn = Connection::open(&path).unwrap();
        assert_eq!(migrate(&mut conn, &path).unwrap(), LATEST_VERSION);
        let count = |table: &str| -> i64 {
            conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(count("runs"), 1);
        assert_eq!(count("tool_calls"), 1);
        assert_eq!(count("change_sets"), 1);
        assert_eq!(count("model_calls"), 0);
        let names: Vec<String> = conn
            .prepare("SELECT name FROM schema_migrations ORDER BY version")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            names,
            [
                "initial",
                "tool_calls_and_changes",
                "model_calls",
                "streams_sessions_artifacts",
                "client_sessions",
                "review_comments",
                "tool_graph",
                "dag_checkpoints",
                "run_leases"
            ]
        );
        let summary: String = conn
            .query_row(
                "SELECT summary FROM tool_calls WHERE run_id = 'r1'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(summary, "ok");
        drop(conn);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file exactly as a version-3 trellis left it (the old migrations only), opened by
    /// this binary through [`crate::SqliteStore::open`]: its runs, events, tool calls, change sets
    /// and model calls read back unchanged, and the new tables work.
    #[test]
    fn a_version_3_store_opens_with_its_data_and_gains_the_stream_tables() {
        use trellis_graph::Journal;
        use trellis_protocol::{
            Event, EventKind, RunId, ServiceEvent, ServiceEventBody, SessionEvent, SessionId,
            SessionOwner, StreamId,
        };

        let dir = std::env::temp_dir().join(format!("trellis-store-v3-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("v3.db");
        let _ = std::fs::remove_file(&path);
        let run = RunId::from_string("r1");
        let events = vec![Event {
            run: run.clone(),
            seq: 1,
            ts: 1_000,
            cause: None,
            kind: EventKind::StepStarted { step: 1 },
        }];
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(CREATE_TABLE).unwrap();
            for m in MIGRATIONS.iter().filter(|m| m.version <= 3) {
                conn.execute_batch(m.sql).unwrap();
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, 0)",
                    rusqlite::params![m.version, m.name],
                )
                .unwrap();
            }
            let blob = crate::codec::encode(&events).unwrap();
            conn.execute_batch(
                "INSERT INTO runs (rk, id, graph, status, step, last_seq, created_ts, updated_ts)
                     VALUES (1, 'r1', 'g', 'succeeded', 1, 1, 1000, 1000);
                 INSERT INTO tool_calls (run_id, node_id, tool, args, decision, is_error,
                                         summary, duration_ms, started_at)
                     VALUES ('r1', 'n', 'read_file', '{}', 'auto', 0, 'ok', 5, 1);
                 INSERT INTO change_sets (run_id, repo, branch, base_commit, state,
                                          created_at, updated_at)
                     VALUES ('r1', '/repo', 'trellis/run-r1', 'abc', 'open', 1, 1);
                 INSERT INTO model_calls (run_id, profile, model, prompt_tokens,
                                          completion_tokens, cached_tokens, reported, outcome, at)
                     VALUES ('r1', 'default', 'm', 10, 2, 0, 1, 'ok', 1);",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO events (key, last_seq, data) VALUES (?1, 1, ?2)",
                rusqlite::params![crate::ops::event_key(1, 1).unwrap(), blob],
            )
            .unwrap();
            assert_eq!(current_version(&conn).unwrap(), 3);
        }

        let store = crate::SqliteStore::open(&path, crate::StoreOptions::default()).unwrap();
        assert_eq!(
            current_version(&Connection::open(&path).unwrap()).unwrap(),
            LATEST_VERSION
        );
        assert_eq!(store.load(&run).unwrap(), events);
        let record = store.get_run("r1").unwrap();
        assert_eq!(
            (record.summary.graph.as_str(), record.summary.last_seq),
            ("g", 1)
        );
        assert_eq!(store.tool_calls(&run).unwrap()[0].summary, "ok");
        assert_eq!(store.change_set("r1").unwrap().branch, "trellis/run-r1");
        assert_eq!(store.run_usage(&run).unwrap().run.prompt_tokens, 10);
        // The run's stream reads its old log; the new tables take appends.
        let wrapped = store
            .stream_events(&StreamId::Run(run.clone()), 0, None)
            .unwrap();
        assert_eq!(wrapped.len(), 1);
        assert_eq!(
            wrapped[0].event,
            ServiceEventBody::Run(EventKind::StepStarted { step: 1 })
        );
        let session = SessionId::from_string("s1");
        let commit = store.append_stream(vec![ServiceEvent {
            stream: StreamId::Session(session.clone()),
            seq: 1,
            ts: 2_000,
            submission: None,
            event: ServiceEventBody::Session(SessionEvent::SessionStarted {
                owner: SessionOwner::Channel {
                    channel: "general".into(),
                },
            }),
        }]);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(commit)
            .unwrap();
        assert_eq!(store.session(&session).unwrap().last_seq, 1);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
