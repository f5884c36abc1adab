//! Revisions and dependents that run again: a review sends its work back
//! (`NodeOutput::revise`), a revised ticket re-runs its dependents, skipped dependents run once
//! their dependency completes.

use serde_json::{Value, json};
use trellis_graph::Journal;
use trellis_protocol::{EventKind, NodeId, NodeState, RunStatus};

use super::common::{assert_replays, assert_succeeded, mem, revise_to_end};
use super::deps::{
    MODES, collector_runs, expect, expect_pipelines, run, seq, skip_reason, states, three_tickets,
    tickets, transitions,
};

#[tokio::test]
async fn a_review_sends_the_work_back_and_the_pipeline_runs_again() {
    for mode in MODES {
        let (engine, journal) = mem();
        let mut list = three_tickets();
        list[0].revise = true;
        // No terminal: the review's failed first attempt must not fail the run.
        let g = tickets(mode, list, false);
        let out = run(&engine, &g).await;
        assert_succeeded(&out, mode);
        assert_eq!(out.error, None);
        use NodeState::Completed as C;
        assert_eq!(
            states(&out, "tickets/T1"),
            expect(&[("T1", 2, C), ("T1.review", 2, C), ("T1.merge", 1, C)]),
            "{mode:?}"
        );
        let ev = journal.load(&out.run).unwrap();
        let t1 = transitions(&ev, "tickets/T1");
        let again = t1.iter().find(|t| t.0 == 2 && t.1.is_none()).unwrap();
        assert_eq!(again.3.as_deref(), Some("revision requested"));
        // work#1, review#1 (fails, asks), work#2, review#2, merge — in that order.
        let order = [
            seq(&ev, "tickets/T1", 1, C),
            seq(&ev, "tickets/T1.review", 1, NodeState::Failed),
            seq(&ev, "tickets/T1", 2, NodeState::Running),
            seq(&ev, "tickets/T1", 2, C),
            seq(&ev, "tickets/T1.review", 2, NodeState::Running),
            seq(&ev, "tickets/T1.review", 2, C),
            seq(&ev, "tickets/T1.merge", 1, NodeState::Running),
            seq(&ev, "tickets/T2", 1, NodeState::Running),
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{mode:?}: {order:?}");
        // The merge waited: never skipped while the revision was pending.
        assert_eq!(transitions(&ev, "tickets/T1.merge")[0].0, 1);
        assert!(
            transitions(&ev, "tickets/T1.merge")
                .iter()
                .all(|t| t.2 != NodeState::Skipped)
        );
        // The feedback reached the second attempt through the state.
        assert_eq!(
            out.state.get("seen").unwrap()["tickets/T1#2"],
            json!("handle the empty list")
        );
        assert_eq!(out.state.get("seen").unwrap()["tickets/T1#1"], Value::Null);
        // The request is recorded with the review's output.
        let asked: Vec<&Vec<NodeId>> = ev
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::NodeOutput { revise, .. } if !revise.is_empty() => Some(revise),
                _ => None,
            })
            .collect();
        assert_eq!(asked, [&vec![NodeId::new("tickets/T1")]]);
        assert_eq!(collector_runs(&ev), 1);
        assert_eq!(
            out.node("collect").unwrap().state,
            Some(NodeState::Completed)
        );
    }
}

#[tokio::test]
async fn revising_a_node_that_is_not_a_dependency_fails_the_activation() {
    for mode in MODES {
        let (engine, journal) = mem();
        let mut list = three_tickets();
        list[0].revise_other = Some("T3");
        let g = tickets(mode, list, true);
        let out = run(&engine, &g).await;
        let review = out.node("tickets/T1.review").unwrap();
        assert_eq!(review.state, Some(NodeState::Failed));
        assert_eq!(
            review.error.as_deref(),
            Some(
                "cannot revise `T3`: it is not a dependency of tickets/T1.review (its dependencies: tickets/T1)"
            ),
            "{mode:?}"
        );
        assert_eq!(out.node("tickets/T3").unwrap().attempt, 1, "not revised");
        let ev = journal.load(&out.run).unwrap();
        assert_eq!(
            skip_reason(&ev, "T1.merge"),
            "dependency tickets/T1.review failed"
        );
        assert_eq!(collector_runs(&ev), 1);
    }
}

#[tokio::test]
async fn revising_a_finished_ticket_reruns_its_dependents() {
    for mode in MODES {
        let (engine, _) = mem();
        let g = tickets(mode, three_tickets(), false);
        let first = run(&engine, &g).await;
        assert_eq!(first.status, RunStatus::Succeeded);
        let revised = revise_to_end(
            &engine,
            g.clone(),
            &first.run,
            "tickets/T1.review",
            "look again",
        )
        .await;
        assert_eq!(revised.status, RunStatus::Succeeded);
        let attempts: Vec<(String, u32)> = revised
            .nodes
            .iter()
            .filter(|n| n.id.as_str().starts_with("tickets/"))
            .map(|n| (n.id.to_string(), n.attempt))
            .collect();
        let expected: Vec<(String, u32)> = [
            ("T1", 1),
            ("T1.review", 2),
            ("T1.merge", 2),
            ("T2", 2),
            ("T2.review", 2),
            ("T2.merge", 2),
            ("T3", 1),
            ("T3.review", 1),
            ("T3.merge", 1),
        ]
        .iter()
        .map(|(n, a)| (format!("tickets/{n}"), *a))
        .collect();
        assert_eq!(attempts, expected, "{mode:?}");
        assert_eq!(
            revised.node("collect").unwrap().attempt,
            1,
            "no second collection"
        );
        assert_replays(&engine, g, &revised.run, &revised);
    }
}

#[tokio::test]
async fn skipped_dependents_run_when_their_dependency_completes_after_a_revision() {
    for mode in MODES {
        let (engine, _) = mem();
        let mut list = three_tickets();
        list[0].fail_once = true;
        let g = tickets(mode, list, true);
        let first = run(&engine, &g).await;
        assert_eq!(
            first.node("tickets/T2.merge").unwrap().state,
            Some(NodeState::Skipped)
        );
        let revised =
            revise_to_end(&engine, g.clone(), &first.run, "tickets/T1", "try again").await;
        assert_eq!(revised.status, RunStatus::Succeeded, "{:?}", revised.error);
        use NodeState::Completed as C;
        assert_eq!(
            states(&revised, "tickets/"),
            expect_pipelines(&[
                ("T1", 2, [C, C, C]),
                ("T2", 2, [C, C, C]),
                ("T3", 1, [C, C, C])
            ]),
            "{mode:?}: attempt 1 of the dependents was the skip"
        );
        assert_replays(&engine, g, &revised.run, &revised);
    }
}
