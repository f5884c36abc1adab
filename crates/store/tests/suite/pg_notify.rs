//! Notifications of commits across stores on one database (`Backend::watch`, `LISTEN` /
//! `NOTIFY`): another store's run batches and service-stream batches are announced with
//! their stream and last seq once committed; a failed batch announces nothing; a lost
//! listening connection says `*` and listens again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::Receiver;
use trellis_graph::Journal;
use trellis_protocol::{RunId, ServiceEventBody, StreamId, WorkspaceEvent};
use trellis_store::Backend;
use trellis_store::prelude::*;

use super::fixtures::{batch, block_on, sev};
use super::pg_support::{cluster, connect};

/// The next notification, waiting at most 10 s.
fn next(rx: &mut Receiver<Arc<str>>) -> String {
    block_on(async { tokio::time::timeout(Duration::from_secs(10), rx.recv()).await })
        .expect("no notification in 10 s")
        .expect("the watch closed")
        .to_string()
}

/// Whether a notification arrives within `ms`.
fn quiet_for(rx: &mut Receiver<Arc<str>>, ms: u64) -> bool {
    block_on(async { tokio::time::timeout(Duration::from_millis(ms), rx.recv()).await }).is_err()
}

fn workspace_event(seq: u64) -> trellis_protocol::ServiceEvent {
    sev(
        &StreamId::Workspace,
        seq,
        ServiceEventBody::Workspace(WorkspaceEvent::OpFailed {
            op: "prune".into(),
            error: format!("#{seq}"),
            kind: None,
        }),
    )
}

#[test]
fn another_store_s_commits_are_announced_with_their_stream_and_last_seq() {
    let cluster = cluster();
    let db = cluster.database();
    let (writer, watcher) = (connect(&db), connect(&db));
    let mut rx = watcher.watch().expect("PostgreSQL stores notify");
    assert_eq!(
        next(&mut rx),
        "*",
        "listening begins: re-read what you follow"
    );

    let run = RunId::new();
    block_on(writer.append(batch(&run, 1, 3))).unwrap();
    assert_eq!(next(&mut rx), format!("run:{run} 3"));
    block_on(writer.append_stream(vec![workspace_event(1), workspace_event(2)])).unwrap();
    assert_eq!(next(&mut rx), "workspace 2");

    // A batch that fails (seq 5 does not follow 2) rolls back: nobody hears of it.
    assert!(block_on(writer.append_stream(vec![workspace_event(5)])).is_err());
    assert!(quiet_for(&mut rx, 500), "a rolled-back batch was announced");

    // Every connection of the database cut: the watcher is told to re-read (the connection
    // is lost), and again once it listens anew; it hears later commits.
    assert!(cluster.terminate_connections(db.name()) >= 3);
    assert_eq!(next(&mut rx), "*", "lost");
    assert_eq!(next(&mut rx), "*", "listening again");
    let mut appended = false;
    for _ in 0..100 {
        // The writer's first job after the cut may find its connection closed.
        if block_on(writer.append(batch(&run, 4, 1))).is_ok() {
            appended = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(appended);
    assert_eq!(next(&mut rx), format!("run:{run} 4"));
}

/// A command queued by another store fires the inbox signal of the run's engine here (so
/// it is taken at once, not at the next poll of the inbox); another run's signal stays
/// quiet.
#[test]
fn a_command_queued_elsewhere_fires_the_run_s_inbox_signal() {
    let cluster = cluster();
    let db = cluster.database();
    let (server, worker) = (connect(&db), connect(&db));
    let (run, other) = (RunId::new(), RunId::new());
    let signal = worker.inbox_signal(&run).expect("PostgreSQL stores signal");
    let quiet = worker.inbox_signal(&other).unwrap();
    // The signal fires once listening begins (commands queued before may have been
    // missed): take that one first.
    block_on(async { tokio::time::timeout(Duration::from_secs(10), signal.notified()).await })
        .expect("no first signal");
    block_on(async { tokio::time::timeout(Duration::from_secs(10), quiet.notified()).await })
        .expect("no first signal");

    let command = trellis_protocol::Command::Cancel { reason: None };
    server.enqueue_command(&run, &command).unwrap();
    block_on(async { tokio::time::timeout(Duration::from_secs(10), signal.notified()).await })
        .expect("the queued command did not signal the run's engine");
    assert!(
        block_on(async {
            tokio::time::timeout(Duration::from_millis(300), quiet.notified()).await
        })
        .is_err(),
        "another run was signalled"
    );
    assert_eq!(worker.take_commands(&run).unwrap(), vec![command]);
}
