//! Review: change sets upserted by run and found by id or unique prefix, their operations
//! upserted by seq, reviewers' comments in the order added — on both backends.

use trellis_protocol::{NodeId, RunId};
use trellis_store::prelude::*;
use trellis_store::{ChangeOpRecord, ChangeSetRecord, Error, NewReviewComment};

pub fn change_set(run: &str, created_at: i64) -> ChangeSetRecord {
    ChangeSetRecord {
        run_id: RunId::from_string(run),
        repo: "/home/dev/project".into(),
        branch: format!("trellis/run-{run}"),
        base_commit: "4f2a9c1".into(),
        worktree: Some(format!("/home/dev/project/.trellis/worktrees/{run}")),
        state: "pending".into(),
        review: None,
        created_at,
        updated_at: created_at,
    }
}

fn op(run: &str, seq: i64, kind: &str) -> ChangeOpRecord {
    ChangeOpRecord {
        run_id: RunId::from_string(run),
        seq,
        kind: kind.into(),
        state: "pending".into(),
        journal: format!(".trellis/journal/{run}-{seq}"),
        files: 3,
        created_at: 1_763_700_000_000 + seq,
        finished_at: None,
    }
}

fn change_sets_upsert_list_newest_first_and_resolve_prefixes(store: &dyn ReviewStore) {
    assert!(store.change_sets().unwrap().is_empty());
    store.put_change_set(change_set("run-abc1", 100)).unwrap();
    store.put_change_set(change_set("run-abc2", 300)).unwrap();
    store.put_change_set(change_set("run-xyz", 200)).unwrap();
    // Same creation time: by run id, descending.
    store.put_change_set(change_set("run-b", 300)).unwrap();

    // An update keeps the creation time and changes the rest.
    let mut reviewed = change_set("run-abc1", 999);
    reviewed.state = "approved".into();
    reviewed.review = Some(r#"{"verdict":"approve"}"#.into());
    reviewed.worktree = None;
    reviewed.updated_at = 500;
    store.put_change_set(reviewed.clone()).unwrap();
    let stored = store.change_set("run-abc1").unwrap();
    assert_eq!(
        stored,
        ChangeSetRecord {
            created_at: 100,
            ..reviewed
        }
    );

    let order: Vec<String> = store
        .change_sets()
        .unwrap()
        .iter()
        .map(|c| c.run_id.to_string())
        .collect();
    assert_eq!(order, ["run-b", "run-abc2", "run-xyz", "run-abc1"]);

    assert_eq!(
        store.change_set("run-x").unwrap().run_id.as_str(),
        "run-xyz"
    );
    match store.change_set("run-abc").unwrap_err() {
        Error::AmbiguousRun { prefix, candidates } => {
            assert_eq!(prefix, "run-abc");
            assert_eq!(candidates, ["run-abc2", "run-abc1"]);
        }
        other => panic!("{other}"),
    }
    for missing in ["run-q", "", "RUN-B"] {
        let err = store.change_set(missing).unwrap_err();
        assert!(
            matches!(&err, Error::RunNotFound(p) if p == missing),
            "{err}"
        );
    }
}
both!(change_sets_upsert_list_newest_first_and_resolve_prefixes);

fn change_ops_upsert_by_seq_in_order(store: &dyn ReviewStore) {
    store.put_change_op(op("run-a", 2, "undo")).unwrap();
    store.put_change_op(op("run-a", 1, "apply")).unwrap();
    store.put_change_op(op("run-b", 1, "apply")).unwrap();
    let mut done = op("run-a", 2, "undo");
    done.state = "done".into();
    done.files = 5;
    done.finished_at = Some(1_763_700_009_999);
    store.put_change_op(done.clone()).unwrap();
    assert_eq!(
        store.change_ops(&RunId::from_string("run-a")).unwrap(),
        [op("run-a", 1, "apply"), done]
    );
    assert_eq!(
        store
            .change_ops(&RunId::from_string("run-b"))
            .unwrap()
            .len(),
        1
    );
    assert!(
        store
            .change_ops(&RunId::from_string("none"))
            .unwrap()
            .is_empty()
    );
}
both!(change_ops_upsert_by_seq_in_order);

fn review_comments_list_in_the_order_added(store: &dyn ReviewStore) {
    let run = RunId::from_string("run-r");
    let comment = |node: Option<&str>, author: &str, body: &str| NewReviewComment {
        run: run.clone(),
        node: node.map(NodeId::new),
        author: author.into(),
        comment: format!(r#"{{"path":"src/lib.rs","line":3,"body":"{body}"}}"#),
    };
    let first = store
        .add_review_comment(comment(Some("review"), "review", "unwrap here"))
        .unwrap();
    let other = store
        .add_review_comment(NewReviewComment {
            run: RunId::from_string("run-other"),
            ..comment(None, "user", "elsewhere")
        })
        .unwrap();
    let second = store
        .add_review_comment(comment(None, "user", "agreed ✓"))
        .unwrap();
    assert!(first < other && other < second);
    let comments = store.review_comments(&run).unwrap();
    let got: Vec<(i64, Option<&str>, &str)> = comments
        .iter()
        .map(|c| (c.id, c.node.as_ref().map(NodeId::as_str), c.author.as_str()))
        .collect();
    assert_eq!(
        got,
        [(first, Some("review"), "review"), (second, None, "user")]
    );
    assert!(comments[1].comment.contains("agreed ✓"));
    assert!(comments.iter().all(|c| c.run == run && c.created_ms > 0));
    assert!(
        store
            .review_comments(&RunId::from_string("none"))
            .unwrap()
            .is_empty()
    );
}
both!(review_comments_list_in_the_order_added);
