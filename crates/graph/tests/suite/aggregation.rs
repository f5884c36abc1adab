use serde_json::json;
use trellis_graph::FailurePolicy;
use trellis_protocol::{NodeState, RunStatus};

use super::common::{demo, mem};

async fn fanout(policy: serde_json::Value) -> trellis_graph::RunOutcome {
    let (engine, _) = mem();
    engine
        .run(
            demo("fanout", json!({"n": 10, "policy": policy})),
            json!({}),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn each_policy_decides_on_the_same_children() {
    // workers 0 and 7 fail: 2 failures out of 10.
    for (policy, failed) in [
        (json!("any_fails"), true),
        (json!("all_fail"), false),
        (json!("majority_fail"), false),
        (json!({"quorum": 8}), false),
        (json!({"quorum": 9}), true),
    ] {
        let out = fanout(policy.clone()).await;
        assert_eq!(out.status, RunStatus::Succeeded, "{policy}");
        assert_eq!(out.state.get("failed"), Some(&json!(failed)), "{policy}");
        assert_eq!(out.state.get("n_failed"), Some(&json!(2)), "{policy}");
        assert_eq!(
            out.state.get("results").unwrap().as_array().unwrap().len(),
            10
        );
    }
}

#[test]
fn policy_arithmetic() {
    use FailurePolicy::*;
    assert!(AnyFails.group_failed(1, 5));
    assert!(!AnyFails.group_failed(0, 5));
    assert!(AllFail.group_failed(5, 5));
    assert!(!AllFail.group_failed(4, 5));
    assert!(!AllFail.group_failed(0, 0), "an empty group does not fail");
    assert!(MajorityFail.group_failed(3, 5));
    assert!(!MajorityFail.group_failed(2, 4), "half is not a majority");
    assert!(Quorum(3).group_failed(3, 5));
    assert!(!Quorum(2).group_failed(3, 5));
}

#[tokio::test]
async fn results_are_appended_in_spawn_order() {
    let out = fanout(json!("any_fails")).await;
    let idx: Vec<u64> = out
        .state
        .get("results")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["idx"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, (0..10).collect::<Vec<_>>());
}

#[tokio::test]
async fn retry_reruns_only_failed_children() {
    let (engine, _) = mem();
    let out = engine
        .run(demo("crashtest", json!({"sleep_us": 0})), json!({}))
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Succeeded);
    assert_eq!(out.node("plan").unwrap().attempt, 2);
    assert_eq!(out.node("gather").unwrap().attempt, 2);
    for (k, attempts) in [("t0", 1), ("t1", 2), ("t2", 1), ("t3", 1)] {
        let n = out.node(&format!("plan/{k}")).unwrap();
        assert_eq!(
            (n.attempt, n.state),
            (attempts, Some(NodeState::Completed)),
            "{k}"
        );
    }
    assert_eq!(out.counters["work_runs"], 5);
}

#[tokio::test]
async fn default_collector_records_the_aggregate() {
    let (engine, _) = mem();
    let out = engine
        .run(demo("crashtest", json!({"sleep_us": 0})), json!({}))
        .await
        .unwrap();
    let gather = out.node("gather").unwrap();
    assert_eq!(
        gather.result["aggregate"],
        json!({"policy": "any_fails", "failed": false, "total": 4, "failures": 0, "pruned": 0})
    );
}
