//! Migrations apply once, survive reopening, and refuse files from the future.

use rusqlite::Connection;
use trellis_store::{Error, SCHEMA_VERSION, SqliteStore, StoreOptions};

fn recorded(path: &std::path::Path) -> Vec<(i64, String)> {
    let conn = Connection::open(path).unwrap();
    let mut st = conn
        .prepare("SELECT version, name FROM schema_migrations ORDER BY version")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn reopening_applies_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = SqliteStore::open_workspace(dir.path(), StoreOptions::default())
        .unwrap()
        .db_path()
        .to_owned();
    assert_eq!(path, dir.path().join(".trellis").join("trellis.db"));
    let first = recorded(&path);
    assert_eq!(first.len() as i64, SCHEMA_VERSION);
    assert_eq!(first[0], (1, "initial".to_owned()));
    for _ in 0..3 {
        drop(SqliteStore::open(&path, StoreOptions::default()).unwrap());
    }
    assert_eq!(recorded(&path), first);
    let mode: String = Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = SqliteStore::open_workspace(dir.path(), StoreOptions::default())
        .unwrap()
        .db_path()
        .to_owned();
    Connection::open(&path)
        .unwrap()
        .execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, 'future', 0)",
            [SCHEMA_VERSION + 1],
        )
        .unwrap();
    let err = SqliteStore::open(&path, StoreOptions::default()).unwrap_err();
    assert!(matches!(err, Error::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1));
    let msg = err.to_string();
    assert!(
        msg.contains("newer trellis") && msg.contains("upgrade"),
        "{msg}"
    );
    assert!(msg.contains("trellis.db"), "{msg}");
}

#[test]
fn a_non_database_file_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.db");
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    let msg = SqliteStore::open(&path, StoreOptions::default())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("junk.db"), "{msg}");
}
