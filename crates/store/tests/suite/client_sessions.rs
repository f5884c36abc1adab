//! Client sessions (an editor's ACP sessions): recorded, listed newest first, their turns
//! numbered, seen by another process, all of it still there after the store is reopened.

use trellis_protocol::RunId;
use trellis_store::prelude::*;
use trellis_store::{ClientSession, ClientTurn, SqliteStore, StoreOptions};

fn session(id: &str, cwd: &str) -> ClientSession {
    ClientSession {
        id: id.into(),
        client: "acp".into(),
        cwd: cwd.into(),
        title: None,
        config: "{}".into(),
        created_ms: 0,
        updated_ms: 0,
    }
}

fn turn(session: &str, run: &str, request: &str) -> ClientTurn {
    ClientTurn {
        session: session.into(),
        turn: 0,
        run: RunId::from_string(run),
        request: request.into(),
        workflow: Some("architecture_discussion".into()),
        plan: r#"{"planned":[]}"#.into(),
        created_ms: 0,
    }
}

/// Records two sessions and two turns of the first, then renames it.
fn record(store: &dyn ClientSessionStore) {
    let a = store.put_client_session(session("ses-a", "/w")).unwrap();
    assert!(a.created_ms > 0);
    assert_eq!(a.created_ms, a.updated_ms);
    store
        .put_client_session(session("ses-b", "/w/sub"))
        .unwrap();
    assert_eq!(
        store
            .add_client_turn(turn("ses-a", "run-1", "first"))
            .unwrap(),
        1
    );
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(
        store
            .add_client_turn(turn("ses-a", "run-2", "second"))
            .unwrap(),
        2
    );
    let mut titled = session("ses-a", "/w");
    titled.title = Some("first".into());
    titled.config = r#"{"workflow":"feature"}"#.into();
    let again = store.put_client_session(titled).unwrap();
    assert_eq!(again.created_ms, a.created_ms, "created stays");
    assert_eq!(again.title.as_deref(), Some("first"));
}

/// Reads back what [`record`] recorded.
fn read_back(store: &dyn ClientSessionStore) {
    let list = store.client_sessions("acp").unwrap();
    let ids: Vec<&str> = list.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        ["ses-a", "ses-b"],
        "the session with the newest turn first"
    );
    assert!(store.client_sessions("other").unwrap().is_empty());
    let a = store.client_session("ses-a").unwrap().unwrap();
    assert_eq!(a.config, r#"{"workflow":"feature"}"#);
    let turns = store.client_turns("ses-a").unwrap();
    let runs: Vec<(u32, &str, &str)> = turns
        .iter()
        .map(|t| (t.turn, t.run.as_str(), t.request.as_str()))
        .collect();
    assert_eq!(runs, [(1, "run-1", "first"), (2, "run-2", "second")]);
    assert!(store.client_session("nope").unwrap().is_none());
    assert!(store.client_turns("nope").unwrap().is_empty());
}

fn sessions_and_turns_read_back(store: &dyn ClientSessionStore) {
    record(store);
    read_back(store);
}
both!(sessions_and_turns_read_back);

fn sessions_and_turns_are_seen_by_another_store(
    a: &dyn ClientSessionStore,
    b: &dyn ClientSessionStore,
) {
    record(a);
    read_back(b);
}
two!(sessions_and_turns_are_seen_by_another_store);

#[test]
fn sessions_and_turns_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    record(&SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap());
    read_back(&SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap());
}
