//! Commands queued by one process are taken exactly once, in order, by another.

use trellis_graph::Journal;
use trellis_protocol::{Command, Message, NodeId, RunId};
use trellis_store::prelude::*;

use super::run_support::Backdoor;

two!(commands_are_taken_once_in_order);
fn commands_are_taken_once_in_order<S: RunStore + Journal>(engine: &S, cli: &S) {
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

two!(concurrent_takers_split_the_commands_without_duplicates);
fn concurrent_takers_split_the_commands_without_duplicates<S: RunStore + Journal>(a: &S, b: &S) {
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
    let takes: Vec<Vec<usize>> = std::thread::scope(|scope| {
        let takers: Vec<_> = [a, a, b, b]
            .into_iter()
            .map(|s| {
                let run = &run;
                scope.spawn(move || {
                    let mut got = Vec::new();
                    for _ in 0..20 {
                        got.extend(s.take_commands(run).unwrap());
                    }
                    got
                })
            })
            .collect();
        takers
            .into_iter()
            .map(|t| {
                let got = t.join().unwrap();
                got.into_iter()
                    .map(|c| match c {
                        Command::Cancel { reason: Some(r) } => r.parse().unwrap(),
                        other => panic!("unexpected {other:?}"),
                    })
                    .collect()
            })
            .collect()
    });
    // Each taker got its commands in enqueue order; together, each command exactly once.
    for got in &takes {
        assert!(got.is_sorted(), "{got:?}");
    }
    let mut seen: Vec<usize> = takes.into_iter().flatten().collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..N).collect::<Vec<_>>());
}

both!(unknown_command_bodies_stay_queued_for_a_newer_process);
fn unknown_command_bodies_stay_queued_for_a_newer_process<S: Backdoor + ?Sized>(store: &S) {
    let run = RunId::new();
    store.raw_command(&run, r#"{"type":"teleport"}"#);
    store
        .enqueue_command(&run, &Command::Cancel { reason: None })
        .unwrap();
    assert_eq!(
        store.take_commands(&run).unwrap(),
        vec![Command::Cancel { reason: None }]
    );
    assert!(store.take_commands(&run).unwrap().is_empty());
}
