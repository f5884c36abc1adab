//! Artifacts: versions per run and kind, status changes with feedback — on both backends.

use trellis_protocol::{ArtifactStatus, NodeId, RunId};
use trellis_store::prelude::*;
use trellis_store::{Error, NewArtifact};

pub fn new(run: &RunId, kind: &str, content: &str) -> NewArtifact {
    NewArtifact {
        run: run.clone(),
        node: Some(NodeId::new("scoping")),
        kind: kind.into(),
        content: content.into(),
        status: ArtifactStatus::AwaitingApproval,
    }
}

fn versions_count_per_run_and_kind(store: &dyn ArtifactStore) {
    let run = RunId::from_string("run-a");
    let other = RunId::from_string("run-b");
    let scope1 = store.put_artifact(new(&run, "scope_card", "v1")).unwrap();
    let plan1 = store.put_artifact(new(&run, "plan", "p1")).unwrap();
    let scope2 = store.put_artifact(new(&run, "scope_card", "v2")).unwrap();
    let elsewhere = store.put_artifact(new(&other, "scope_card", "x")).unwrap();
    assert_eq!(
        [
            scope1.version,
            plan1.version,
            scope2.version,
            elsewhere.version
        ],
        [1, 1, 2, 1]
    );
    assert_eq!(scope2.content, "v2");
    assert_eq!(scope2.node, Some(NodeId::new("scoping")));
    assert_eq!(scope2.status, ArtifactStatus::AwaitingApproval);
    assert_eq!(scope2.feedback, None);
    assert!(scope2.created_ms > 0 && scope2.created_ms == scope2.updated_ms);
    assert_eq!(
        store.artifacts(&run).unwrap(),
        [scope1.clone(), plan1, scope2.clone()]
    );
    assert_eq!(store.artifacts(&other).unwrap(), [elsewhere]);
    assert_eq!(store.artifact(scope1.id).unwrap(), scope1);
    assert!(
        store
            .artifacts(&RunId::from_string("none"))
            .unwrap()
            .is_empty()
    );

    let unowned = store
        .put_artifact(NewArtifact {
            node: None,
            status: ArtifactStatus::Draft,
            ..new(&run, "tickets", "- [ ] one")
        })
        .unwrap();
    assert_eq!(
        (unowned.node, unowned.status),
        (None, ArtifactStatus::Draft)
    );
}
both!(versions_count_per_run_and_kind);

fn status_changes_carry_feedback_and_unknown_ids_are_not_found(store: &dyn ArtifactStore) {
    let run = RunId::from_string("run-a");
    let a = store.put_artifact(new(&run, "plan", "p1")).unwrap();
    let changed = store
        .set_artifact_status(a.id, ArtifactStatus::ChangesRequested, Some("split step 2"))
        .unwrap();
    assert_eq!(changed.status, ArtifactStatus::ChangesRequested);
    assert_eq!(changed.feedback.as_deref(), Some("split step 2"));
    assert_eq!((changed.content, changed.version), (a.content.clone(), 1));
    assert!(changed.updated_ms >= a.updated_ms);
    assert_eq!(
        store.artifact(a.id).unwrap().status,
        ArtifactStatus::ChangesRequested
    );

    let b = store.put_artifact(new(&run, "plan", "p2")).unwrap();
    assert_eq!(b.version, 2);
    let approved = store
        .set_artifact_status(b.id, ArtifactStatus::Approved, None)
        .unwrap();
    assert_eq!(
        (approved.status, approved.feedback),
        (ArtifactStatus::Approved, None)
    );
    // The earlier version keeps its own status.
    assert_eq!(
        store.artifact(a.id).unwrap().feedback.as_deref(),
        Some("split step 2")
    );

    let err = store
        .set_artifact_status(9_999, ArtifactStatus::Approved, None)
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::NotFound {
                what: "artifact",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("9999"), "{err}");
    let err = store.artifact(0).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }));
}
both!(status_changes_carry_feedback_and_unknown_ids_are_not_found);
