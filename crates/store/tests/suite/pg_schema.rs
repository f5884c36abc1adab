//! PostgreSQL migrations: a fresh database gets the SQLite file's tables, columns and
//! indexes; migrating again or from two processes at once applies nothing twice; a newer
//! schema and a database that is not trellis's are refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};

use rusqlite::Connection;
use trellis_store::pg::{PgError, PgOptions, PgStore};
use trellis_store::{Error, SCHEMA_VERSION, Store, StoreOptions};
use trellis_test_pg::PASSWORD;

use super::pg_support::{cluster, connect, connect_error, recorded, rows};

/// The 0/1 flags the PostgreSQL schema declares `BOOLEAN` (pg/schema.rs).
const FLAGS: [(&str, &str); 4] = [
    ("tool_calls", "is_error"),
    ("model_calls", "reported"),
    ("tool_executions", "success"),
    ("run_leases", "runnable"),
];

/// A column as both schemas describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    /// The PostgreSQL type (`data_type`), for SQLite the one its type translates to.
    ty: String,
    not_null: bool,
    /// Assigned by the database: SQLite's `INTEGER PRIMARY KEY` rowid aliases, PostgreSQL's
    /// identity columns.
    assigned: bool,
}

/// A SQLite file as `Store::open` creates it, read through rusqlite alone.
fn sqlite() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trellis.db");
    drop(Store::open(&path, StoreOptions::default()).unwrap());
    let conn = Connection::open(&path).unwrap();
    (dir, conn)
}

fn sqlite_strings(conn: &Connection, sql: &str) -> Vec<String> {
    let mut st = conn.prepare(sql).unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// `(table, column)` → column, from `pragma_table_info`, translated as pg/schema.rs says.
fn sqlite_columns(conn: &Connection) -> BTreeMap<(String, String), Column> {
    let mut st = conn
        .prepare(
            "SELECT m.name, p.name, p.type, p.\"notnull\", p.pk,
                    (SELECT COUNT(*) FROM pragma_table_info(m.name) q WHERE q.pk > 0)
             FROM sqlite_master m JOIN pragma_table_info(m.name) p
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, bool>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap);
    rows.map(|(table, column, ty, not_null, pk, pk_columns)| {
        let flag = FLAGS.contains(&(table.as_str(), column.as_str()));
        let ty = match ty.as_str() {
            "INTEGER" if flag => "boolean",
            "INTEGER" => "bigint",
            "TEXT" => "text",
            "REAL" => "double precision",
            "BLOB" => "bytea",
            other => panic!("{table}.{column}: SQLite type {other} has no translation"),
        };
        // A rowid alias the code lets SQLite assign; an event's key and a migration's
        // version are the writer's.
        let assigned = ty == "bigint"
            && pk == 1
            && pk_columns == 1
            && !["events", "schema_migrations"].contains(&table.as_str());
        let col = Column {
            ty: ty.to_owned(),
            not_null: not_null || pk > 0,
            assigned,
        };
        ((table, column), col)
    })
    .collect()
}

fn pg_columns(store: &PgStore) -> BTreeMap<(String, String), Column> {
    rows(
        store,
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text,
                is_identity::text, COALESCE(collation_name::text, '')
         FROM information_schema.columns WHERE table_schema = current_schema()",
    )
    .into_iter()
    .map(|r| {
        if r[2] == "text" {
            assert_eq!(r[5], "C", "{}.{} must compare bytewise", r[0], r[1]);
        }
        let col = Column {
            ty: r[2].clone(),
            not_null: r[3] == "NO",
            assigned: r[4] == "YES",
        };
        ((r[0].clone(), r[1].clone()), col)
    })
    .collect()
}

#[test]
fn a_fresh_database_gets_every_table_column_and_index_of_the_sqlite_file() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    assert_eq!(store.schema_version(), SCHEMA_VERSION);
    let (_dir, file) = sqlite();

    let tables = |v: Vec<String>| v.into_iter().collect::<BTreeSet<_>>();
    let pg_tables = tables(
        rows(
            &store,
            "SELECT table_name::text FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
        )
        .into_iter()
        .map(|r| r[0].clone())
        .collect(),
    );
    let sqlite_tables = tables(sqlite_strings(
        &file,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    ));
    assert_eq!(pg_tables, sqlite_tables);
    assert!(
        pg_tables.contains("events") && pg_tables.len() > 20,
        "{pg_tables:?}"
    );

    let (pg, sqlite) = (pg_columns(&store), sqlite_columns(&file));
    let keys: BTreeSet<_> = pg.keys().chain(sqlite.keys()).collect();
    let differ: Vec<_> = keys
        .into_iter()
        .filter(|k| pg.get(*k) != sqlite.get(*k))
        .map(|k| (k, pg.get(k), sqlite.get(k)))
        .collect();
    assert!(
        differ.is_empty(),
        "(column, PostgreSQL, SQLite): {differ:#?}"
    );

    // Indexes created by CREATE INDEX (not those behind a primary key or UNIQUE).
    let pg_indexes = tables(
        rows(
            &store,
            "SELECT c.relname::text FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_schema()
               AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)",
        )
        .into_iter()
        .map(|r| r[0].clone())
        .collect(),
    );
    let sqlite_indexes = tables(sqlite_strings(
        &file,
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL",
    ));
    assert_eq!(pg_indexes, sqlite_indexes);

    // The same versions and names as the file records.
    let sqlite_recorded: Vec<(i64, String)> = {
        let mut st = file
            .prepare("SELECT version, name FROM schema_migrations ORDER BY version")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let pg_recorded: Vec<(i64, String)> = recorded(&store)
        .into_iter()
        .map(|(v, n, _)| (v, n))
        .collect();
    assert_eq!(pg_recorded, sqlite_recorded);
}

#[test]
fn migrating_twice_is_a_no_op() {
    let cluster = cluster();
    let db = cluster.database();
    let first = recorded(&connect(&db));
    assert_eq!(first.len() as i64, SCHEMA_VERSION);
    for _ in 0..2 {
        let store = connect(&db);
        assert_eq!(store.schema_version(), SCHEMA_VERSION);
        assert_eq!(recorded(&store), first);
    }
}

#[test]
fn two_processes_connecting_to_a_fresh_database_apply_the_migrations_once() {
    let cluster = cluster();
    for _ in 0..3 {
        // A fresh database each round, raced by four connects.
        let db = cluster.database();
        let url = db.url();
        let start = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (url, start) = (url.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    PgStore::connect(&url, PgOptions::default()).map(|s| s.schema_version())
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap().unwrap(), SCHEMA_VERSION);
        }
        let store = connect(&db);
        let applied = recorded(&store);
        assert_eq!(applied.len() as i64, SCHEMA_VERSION);
        // One transaction applied all of them: one timestamp.
        assert!(applied.iter().all(|(_, _, at)| *at == applied[0].2));
    }
}

#[test]
fn a_newer_schema_is_refused_naming_the_setting() {
    let cluster = cluster();
    let db = cluster.database();
    drop(connect(&db));
    db.psql(&format!(
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES ({}, 'future', 0)",
        SCHEMA_VERSION + 1
    ));
    let err = connect_error(&db.url());
    assert!(
        matches!(
            &err,
            Error::Postgres(PgError::NewerSchema { found, supported, .. })
                if *found == SCHEMA_VERSION + 1 && *supported == SCHEMA_VERSION
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    for want in [
        "[store] url",
        "newer trellis",
        "upgrade trellis",
        db.name(),
        "***",
    ] {
        assert!(msg.contains(want), "{want}: {msg}");
    }
    assert!(!msg.contains(PASSWORD), "{msg}");
    // Refused before anything was written.
    assert_eq!(
        db.psql("SELECT count(*) FROM schema_migrations").trim(),
        (SCHEMA_VERSION + 1).to_string()
    );
}

#[test]
fn a_database_holding_other_tables_is_left_as_it_was() {
    let cluster = cluster();
    let db = cluster.database();
    // Someone else's `tool_nodes`: migration 7 fails, and 1-6 are rolled back with it.
    db.psql("CREATE TABLE tool_nodes (x int)");
    let err = connect_error(&db.url());
    assert!(
        matches!(
            &err,
            Error::Postgres(PgError::Migration {
                version: 7,
                name: "tool_graph",
                ..
            })
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("[store] url") && msg.contains("already exists") && msg.contains("unchanged"),
        "{msg}"
    );
    let tables = db.psql(
        "SELECT string_agg(table_name, ',') FROM information_schema.tables
         WHERE table_schema = 'public'",
    );
    assert_eq!(tables.trim(), "tool_nodes");
}
