use std::sync::Arc;

use serde_json::json;
use trellis_graph::{Engine, Journal, MemoryJournal};
use trellis_protocol::{Event, EventKind, NodeState, RunStatus};

use super::common::{demo, feature, key, mem};

#[tokio::test]
async fn replay_of_the_log_equals_the_live_run() {
    let (engine, _) = mem();
    let g = demo("crashtest", json!({"sleep_us": 0}));
    let live = engine.run(g.clone(), json!({})).await.unwrap();
    let replayed = engine.inspect(g, &live.run).unwrap();
    assert_eq!(key(&live), key(&replayed));
    assert_eq!(live.status, replayed.status);
    assert_eq!(live.last_seq, replayed.last_seq);
}

fn executions(path: &std::path::Path) -> Vec<(String, u32)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let id = l.split(' ').next().unwrap();
            let (node, attempt) = id.rsplit_once('#').unwrap();
            (node.to_owned(), attempt.parse().unwrap())
        })
        .collect()
}

/// Every point where a crash can leave the log (a batch boundary): resuming from there ends
/// in the same state as the uninterrupted run, and nothing COMPLETED before the crash runs
/// again.
#[tokio::test]
async fn resume_from_every_batch_boundary_matches_the_uninterrupted_run() {
    let ws = trellis_test_support::TempWorkspace::new("graph-resume").unwrap();
    let dir = ws.path();
    let log = dir.join("full.log");
    let g = demo(
        "crashtest",
        json!({"sleep_us": 5000, "log": log.to_str().unwrap()}),
    );
    let (engine, journal) = mem();
    let full = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(full.status, RunStatus::Succeeded);
    let events = journal.load(&full.run).unwrap();
    let ends = journal.batch_ends(&full.run);
    assert!(
        ends.len() > 5,
        "sleeping handlers split the run into many batches: {ends:?}"
    );
    for (i, &end) in ends.iter().enumerate().filter(|(_, e)| **e < full.last_seq) {
        let prefix: Vec<Event> = events.iter().filter(|e| e.seq <= end).cloned().collect();
        let completed: Vec<(String, u32)> = prefix
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::NodeTransition {
                    node,
                    attempt,
                    to: NodeState::Completed,
                    ..
                } => Some((node.to_string(), *attempt)),
                _ => None,
            })
            .collect();
        let log_i = dir.join(format!("resume-{i}.log"));
        let g_i = demo(
            "crashtest",
            json!({"sleep_us": 5000, "log": log_i.to_str().unwrap()}),
        );
        let crashed = Arc::new(MemoryJournal::with_log(prefix));
        let engine = Engine::new(crashed);
        let resumed = engine
            .resume(g_i, &full.run, vec![])
            .unwrap()
            .wait()
            .await
            .unwrap();
        assert_eq!(
            key(&resumed).0,
            key(&full).0,
            "state after resuming at seq {end}"
        );
        assert_eq!(
            resumed.counters, full.counters,
            "counters after resuming at seq {end}"
        );
        assert_eq!(resumed.status, RunStatus::Succeeded);
        let rerun = executions(&log_i);
        for c in &completed {
            assert!(
                !rerun.contains(c),
                "{c:?} COMPLETED before the crash at seq {end} but ran again"
            );
        }
    }
}

#[tokio::test]
async fn fork_from_every_checkpoint_reaches_the_same_end_and_leaves_the_parent_alone() {
    let (engine, journal) = mem();
    let g = feature();
    let full = engine.run(g.clone(), json!({})).await.unwrap();
    let parent_log = journal.load(&full.run).unwrap();
    let checkpoints: Vec<u64> = parent_log
        .iter()
        .filter(|e| e.kind.is_checkpoint())
        .map(|e| e.seq)
        .collect();
    assert_eq!(checkpoints.len(), 10, "runStarted + 9 steps");
    for seq in checkpoints {
        let forked = engine
            .fork(g.clone(), &full.run, seq, vec![])
            .unwrap()
            .wait()
            .await
            .unwrap();
        assert_ne!(forked.run, full.run);
        assert_eq!(key(&forked).0, key(&full).0, "fork at {seq}");
        assert_eq!(forked.status, RunStatus::Succeeded);
        // A fork of the fork works too (ancestry is resolved recursively).
        if seq == 1 {
            let log = journal.load(&forked.run).unwrap();
            let cp = log
                .iter()
                .filter(|e| e.kind.is_checkpoint())
                .nth(3)
                .unwrap()
                .seq;
            let grand = engine
                .fork(g.clone(), &forked.run, cp, vec![])
                .unwrap()
                .wait()
                .await
                .unwrap();
            assert_eq!(key(&grand).0, key(&full).0);
        }
    }
    assert_eq!(
        journal.load(&full.run).unwrap(),
        parent_log,
        "forks never touch the parent's log"
    );
}

#[tokio::test]
async fn fork_at_a_non_checkpoint_names_the_valid_ones() {
    let (engine, _) = mem();
    let full = engine.run(feature(), json!({})).await.unwrap();
    let err = engine
        .fork(feature(), &full.run, 3, vec![])
        .err()
        .unwrap()
        .to_string();
    assert!(err.starts_with("event 3 of run"), "{err}");
    assert!(
        err.contains("not a checkpoint; checkpoints are: 1, "),
        "{err}"
    );
}

#[tokio::test]
async fn resume_refuses_finished_runs_and_changed_graphs() {
    let (engine, _) = mem();
    let full = engine.run(feature(), json!({})).await.unwrap();
    let err = engine
        .resume(feature(), &full.run, vec![])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("already succeeded; fork it to run again"),
        "{err}"
    );
    let err = engine
        .inspect(demo("chain", json!({"n": 3})), &full.run)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("graph definition changed"), "{err}");
}

#[tokio::test]
async fn a_log_with_an_invalid_transition_is_rejected() {
    let (engine, journal) = mem();
    let full = engine.run(feature(), json!({})).await.unwrap();
    let mut log = journal.load(&full.run).unwrap();
    // Turn the first READY → RUNNING into READY → COMPLETED.
    let e = log
        .iter_mut()
        .find(|e| {
            matches!(
                e.kind,
                EventKind::NodeTransition {
                    to: NodeState::Running,
                    ..
                }
            )
        })
        .unwrap();
    if let EventKind::NodeTransition { to, .. } = &mut e.kind {
        *to = NodeState::Completed;
    }
    let engine = Engine::new(Arc::new(MemoryJournal::with_log(log)));
    let err = engine
        .inspect(feature(), &full.run)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "node code_generation#1: invalid node transition READY → COMPLETED"
    );
}

/// A run recorded without being driven (a server hands it to a worker) executes nothing;
/// resumed — by another engine over the same journal, as a worker would — it ends exactly
/// as a run started and driven at once.
#[tokio::test]
async fn a_created_run_executes_nothing_until_resumed_and_then_ends_as_a_started_one() {
    let ws = trellis_test_support::TempWorkspace::new("graph-create").unwrap();
    let log = ws.path().join("exec.log");
    let g = demo(
        "crashtest",
        json!({"sleep_us": 0, "log": log.to_str().unwrap()}),
    );
    let (engine, journal) = mem();
    let reference = engine.run(g.clone(), json!({})).await.unwrap();

    let lines = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let by_reference = lines();
    assert!(by_reference > 0);

    let run = trellis_protocol::RunId::new();
    engine
        .create_as_by(run.clone(), g.clone(), json!({}), None)
        .unwrap()
        .await
        .unwrap();
    let recorded = journal.load(&run).unwrap();
    assert!(matches!(recorded[0].kind, EventKind::RunStarted { .. }));
    assert!(
        !recorded
            .iter()
            .any(|e| matches!(e.kind, EventKind::StepStarted { .. })),
        "nothing ran: {recorded:#?}"
    );
    assert_eq!(lines(), by_reference, "no handler ran");
    assert_eq!(
        engine.inspect(g.clone(), &run).unwrap().status,
        RunStatus::Running
    );

    let worker = Engine::new(journal.clone());
    let out = super::common::resume_to_end(&worker, g, &run, Vec::new()).await;
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(key(&out), key(&reference));
    assert_eq!(
        lines(),
        2 * by_reference,
        "every node ran once, as in the reference"
    );
}
