//! Listing, filtering and resolving runs by id prefix.

use trellis_graph::Journal;
use trellis_protocol::{RunId, RunStatus};
use trellis_store::prelude::*;
use trellis_store::{Error, RunFilter};

use super::fixtures::{batch, block_on};

fn add<S: Journal + ?Sized>(store: &S, id: &str, status: RunStatus, created: i64) {
    let run = RunId::from_string(id);
    let mut b = batch(&run, 1, 1);
    b.summary.status = status;
    b.summary.created_ts = created;
    block_on(store.append(b)).unwrap();
}

both!(prefixes_resolve_when_unique);
fn prefixes_resolve_when_unique<S: RunStore + Journal + ?Sized>(store: &S) {
    add(
        store,
        "0199aa00000000000000000000000001",
        RunStatus::Running,
        1,
    );
    add(
        store,
        "0199aa00000000000000000000000002",
        RunStatus::Running,
        2,
    );
    add(
        store,
        "0199bb00000000000000000000000003",
        RunStatus::Running,
        3,
    );

    assert_eq!(
        store.get_run("0199b").unwrap().id.as_str(),
        "0199bb00000000000000000000000003"
    );
    assert_eq!(
        store
            .get_run("0199aa00000000000000000000000002")
            .unwrap()
            .id
            .as_str(),
        "0199aa00000000000000000000000002"
    );

    match store.get_run("0199aa") {
        Err(Error::AmbiguousRun { prefix, candidates }) => {
            assert_eq!(prefix, "0199aa");
            assert_eq!(
                candidates,
                [
                    "0199aa00000000000000000000000001",
                    "0199aa00000000000000000000000002"
                ]
            );
        }
        other => panic!("expected ambiguity, got {other:?}"),
    }
    let msg = store.get_run("0199a").unwrap_err().to_string();
    assert!(msg.contains("0199aa00000000000000000000000001") && msg.contains("more characters"));

    for unknown in ["0199c", "", "zz"] {
        let err = store.get_run(unknown).unwrap_err();
        assert!(matches!(err, Error::RunNotFound(_)), "{err:?}");
        assert!(err.to_string().contains("trellis runs list"));
    }

    // The id alone resolves the same way.
    assert_eq!(
        store.run_id("0199b").unwrap().as_str(),
        "0199bb00000000000000000000000003"
    );
    assert_eq!(
        store
            .run_id("0199aa00000000000000000000000002")
            .unwrap()
            .as_str(),
        "0199aa00000000000000000000000002"
    );
    assert!(matches!(
        store.run_id("0199aa"),
        Err(Error::AmbiguousRun { .. })
    ));
    for unknown in ["0199c", "", "zz"] {
        assert!(matches!(store.run_id(unknown), Err(Error::RunNotFound(_))));
    }
}

both!(list_is_newest_first_and_filters);
fn list_is_newest_first_and_filters<S: RunStore + Journal + ?Sized>(store: &S) {
    add(store, "a", RunStatus::Succeeded, 10);
    add(store, "b", RunStatus::Running, 30);
    add(store, "c", RunStatus::Failed, 20);
    add(store, "d", RunStatus::Running, 40);
    let ids = |f: RunFilter| -> Vec<String> {
        store
            .list_runs(&f)
            .unwrap()
            .into_iter()
            .map(|r| r.id.to_string())
            .collect()
    };
    assert_eq!(ids(RunFilter::default()), ["d", "b", "c", "a"]);
    assert_eq!(
        ids(RunFilter {
            status: Some(RunStatus::Running),
            limit: None
        }),
        ["d", "b"]
    );
    assert_eq!(
        ids(RunFilter {
            status: None,
            limit: Some(2)
        }),
        ["d", "b"]
    );
    assert!(
        ids(RunFilter {
            status: Some(RunStatus::Cancelled),
            limit: None
        })
        .is_empty()
    );

    let json = serde_json::to_value(store.get_run("a").unwrap()).unwrap();
    assert_eq!(json["status"], "succeeded");
    assert_eq!(json["ownerAlive"], false);
    assert_eq!(json["lastSeq"], 1);
}

#[test]
fn open_existing_creates_nothing_and_opens_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".trellis").join("trellis.db");
    let err = trellis_store::SqliteStore::open_existing(&path, Default::default()).unwrap_err();
    assert!(matches!(&err, Error::NoStore(p) if *p == path), "{err}");
    assert!(err.to_string().contains("nothing has run"), "{err}");
    assert!(!dir.path().join(".trellis").exists());

    let store = trellis_store::SqliteStore::open_workspace(dir.path(), Default::default()).unwrap();
    add(
        &store,
        "0199aa00000000000000000000000001",
        RunStatus::Running,
        1,
    );
    drop(store);
    let again = trellis_store::SqliteStore::open_existing(&path, Default::default()).unwrap();
    assert_eq!(again.list_runs(&RunFilter::default()).unwrap().len(), 1);
}

/// A run whose graph continued (`runContinued`) after `before` other events: its first
/// graph, then `next`, then `after` more events; the summary names the graph it runs with.
fn continued_run<S: Journal + ?Sized>(store: &S, before: u64, after: u64) -> RunId {
    use serde_json::json;
    use std::sync::Arc;
    use trellis_graph::Batch;
    use trellis_protocol::EventKind;
    let run = RunId::new();
    let mut events = vec![super::fixtures::ev(
        &run,
        1,
        EventKind::RunStarted {
            graph: "planning".into(),
            fingerprint: "f0".into(),
            params: json!({ "planning": { "request": "fix it" } }),
            input: serde_json::Value::Null,
            fork: None,
        },
    )];
    let step = |seq| EventKind::StepStarted { step: seq };
    for seq in 2..2 + before {
        events.push(super::fixtures::ev(&run, seq, step(seq)));
    }
    let at = 2 + before;
    events.push(super::fixtures::ev(
        &run,
        at,
        EventKind::RunContinued {
            graph: "bug_fix".into(),
            fingerprint: "f1".into(),
            params: json!({ "workflow": "bug_fix" }),
            input: json!({ "task": "fix it" }),
        },
    ));
    for seq in at + 1..=at + after {
        events.push(super::fixtures::ev(&run, seq, step(seq)));
    }
    let mut summary = super::fixtures::summary(RunStatus::Running, 0, at + after);
    summary.graph = "bug_fix".into();
    block_on(store.append(Batch {
        run: run.clone(),
        events: Arc::new(events),
        summary,
    }))
    .unwrap();
    run
}

both!(graphs_name_the_first_graph_and_the_one_the_run_continued_with);
fn graphs_name_the_first_graph_and_the_one_the_run_continued_with<
    S: RunStore + Journal + ?Sized,
>(
    store: &S,
) {
    // Early (as planning does), and past the first chunk of events read.
    for before in [3, 200] {
        let run = continued_run(store, before, 500);
        let g = store.graphs(&run).unwrap();
        assert_eq!(
            (g.graph.as_str(), g.fingerprint.as_str()),
            ("planning", "f0")
        );
        let c = g.continued.clone().expect("continued");
        assert_eq!(c.seq, 2 + before);
        assert_eq!(
            (c.graph.as_str(), c.fingerprint.as_str()),
            ("bug_fix", "f1")
        );
        assert_eq!(
            g.current(),
            ("bug_fix", &serde_json::json!({ "workflow": "bug_fix" }))
        );
    }
    // A run that never continued runs with its first graph.
    let plain = RunId::new();
    let started = super::fixtures::ev(
        &plain,
        1,
        trellis_protocol::EventKind::RunStarted {
            graph: "feature".into(),
            fingerprint: "f".into(),
            params: serde_json::Value::Null,
            input: serde_json::Value::Null,
            fork: None,
        },
    );
    block_on(store.append(trellis_graph::Batch {
        run: plain.clone(),
        events: std::sync::Arc::new(vec![started]),
        summary: super::fixtures::summary(RunStatus::Running, 0, 1),
    }))
    .unwrap();
    let g = store.graphs(&plain).unwrap();
    assert!(g.continued.is_none());
    assert_eq!(g.current().0, g.graph);
}
