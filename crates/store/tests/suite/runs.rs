//! Listing, filtering and resolving runs by id prefix.

use trellis_graph::Journal;
use trellis_protocol::{RunId, RunStatus};
use trellis_store::{Error, RunFilter};

use super::fixtures::{batch, block_on, store};

fn add(store: &trellis_store::Store, id: &str, status: RunStatus, created: i64) {
    let run = RunId::from_string(id);
    let mut b = batch(&run, 1, 1);
    b.summary.status = status;
    b.summary.created_ts = created;
    block_on(store.append(b)).unwrap();
}

#[test]
fn prefixes_resolve_when_unique() {
    let (_dir, store) = store();
    add(
        &store,
        "0199aa00000000000000000000000001",
        RunStatus::Running,
        1,
    );
    add(
        &store,
        "0199aa00000000000000000000000002",
        RunStatus::Running,
        2,
    );
    add(
        &store,
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
}

#[test]
fn list_is_newest_first_and_filters() {
    let (_dir, store) = store();
    add(&store, "a", RunStatus::Succeeded, 10);
    add(&store, "b", RunStatus::Running, 30);
    add(&store, "c", RunStatus::Failed, 20);
    add(&store, "d", RunStatus::Running, 40);
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
    let err = trellis_store::Store::open_existing(&path, Default::default()).unwrap_err();
    assert!(matches!(&err, Error::NotFound(p) if *p == path), "{err}");
    assert!(err.to_string().contains("nothing has run"), "{err}");
    assert!(!dir.path().join(".trellis").exists());

    let store = trellis_store::Store::open_workspace(dir.path(), Default::default()).unwrap();
    add(
        &store,
        "0199aa00000000000000000000000001",
        RunStatus::Running,
        1,
    );
    drop(store);
    let again = trellis_store::Store::open_existing(&path, Default::default()).unwrap();
    assert_eq!(again.list_runs(&RunFilter::default()).unwrap().len(), 1);
}
