//! Commands queued by one process are taken exactly once, in order, by another.

use std::sync::Arc;

use trellis_graph::Journal;
use trellis_protocol::{Command, Message, NodeId, RunId};
use trellis_store::SqliteStore;
use trellis_store::prelude::*;

use super::fixtures::store;

#[test]
fn commands_are_taken_once_in_order() {
    let (_dir, engine) = store();
    let cli = SqliteStore::open(engine.db_path(), Default::default()).unwrap();
    let run = RunId::new();
    let other = RunId::new();
    assert!(engine.has_inbox());
    assert!(engine.take_commands(&run).unwrap().is_empty());

    let cmds = vec![
        Command::SendMessage {
            node: NodeId::new("a"),
            message: Message::user("hello"),
        },
        Command::Cancel {
            reason: Some("from the CLI".into()),
        },
    ];
    let id1 = cli.enqueue_command(&run, &cmds[0]).unwrap();
    let id2 = cli.enqueue_command(&run, &cmds[1]).unwrap();
    cli.enqueue_command(&other, &Command::Cancel { reason: None })
        .unwrap();
    assert!(id2 > id1);

    assert_eq!(engine.take_commands(&run).unwrap(), cmds);
    assert!(engine.take_commands(&run).unwrap().is_empty());
    assert_eq!(
        engine.take_commands(&other).unwrap(),
        vec![Command::Cancel { reason: None }]
    );
}

#[test]
fn concurrent_takers_split_the_commands_without_duplicates() {
    let (_dir, a) = store();
    let b = Arc::new(SqliteStore::open(a.db_path(), Default::default()).unwrap());
    let a = Arc::new(a);
    let run = RunId::new();
    const N: usize = 60;
    for i in 0..N {
        a.enqueue_command(
            &run,
            &Command::Cancel {
                reason: Some(i.to_string()),
            },
        )
        .unwrap();
    }
    let takers: Vec<_> = [a, b]
        .into_iter()
        .flat_map(|s| [s.clone(), s])
        .map(|s| {
            let run = run.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..20 {
                    got.extend(s.take_commands(&run).unwrap());
                }
                got
            })
        })
        .collect();
    let mut seen: Vec<usize> = takers
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .map(|c| match c {
            Command::Cancel { reason: Some(r) } => r.parse().unwrap(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..N).collect::<Vec<_>>());
}

#[test]
fn unknown_command_bodies_stay_queued_for_a_newer_process() {
    let (_dir, store) = store();
    let run = RunId::new();
    rusqlite::Connection::open(store.db_path())
        .unwrap()
        .execute(
            "INSERT INTO commands (run_id, created_at, body) VALUES (?1, 0, '{\"type\":\"teleport\"}')",
            [run.as_str()],
        )
        .unwrap();
    store
        .enqueue_command(&run, &Command::Cancel { reason: None })
        .unwrap();
    assert_eq!(
        store.take_commands(&run).unwrap(),
        vec![Command::Cancel { reason: None }]
    );
    assert!(store.take_commands(&run).unwrap().is_empty());
}
