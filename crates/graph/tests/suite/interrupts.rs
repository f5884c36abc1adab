use serde_json::json;
use trellis_protocol::{Answer, Command, InterruptKind, NodeId, NodeState, RunStatus};

use super::common::{demo, mem};

#[tokio::test]
async fn approval_gate_pauses_and_resumes_with_the_answer() {
    let (engine, _) = mem();
    let g = demo("feature", json!({"approval_stage": "security_review"}));
    let out = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(out.status, RunStatus::WaitingInput);
    assert_eq!(out.waiting.len(), 1);
    let (node, question) = &out.waiting[0];
    assert_eq!(node, &NodeId::new("security_review"));
    assert_eq!(question.kind, InterruptKind::Approval);
    assert_eq!(
        out.node("security_review").unwrap().state,
        Some(NodeState::WaitingInput)
    );

    // An answer to a node that is not waiting is refused, with the reason recorded.
    let bad = engine
        .resume(
            g.clone(),
            &out.run,
            vec![Command::Answer {
                node: "code_generation".into(),
                answer: Answer::approve(),
            }],
        )
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(
        bad.status,
        RunStatus::WaitingInput,
        "still waiting after a refused answer"
    );

    // A rejection makes the handler ask again.
    let again = answer(
        &engine,
        g.clone(),
        &out.run,
        "security_review",
        Answer::reject("no"),
    )
    .await;
    assert_eq!(again.status, RunStatus::WaitingInput);
    assert_eq!(
        again.node("security_review").unwrap().attempt,
        1,
        "same activation asks again"
    );

    let done = answer(&engine, g, &out.run, "security_review", Answer::approve()).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.state.get("outcome"), Some(&json!("DONE")));
}

#[tokio::test]
async fn refused_answer_is_in_the_log() {
    let (engine, journal) = mem();
    let g = demo("feature", json!({"approval_stage": "code_generation"}));
    let out = engine.run(g.clone(), json!({})).await.unwrap();
    engine
        .resume(
            g,
            &out.run,
            vec![Command::Answer {
                node: "DONE".into(),
                answer: Answer::approve(),
            }],
        )
        .unwrap()
        .wait()
        .await
        .unwrap();
    let events = trellis_graph::Journal::load(&*journal, &out.run).unwrap();
    let refused = events.iter().find_map(|e| match &e.kind {
        trellis_protocol::EventKind::CommandRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(
        refused.as_deref(),
        Some("node DONE is not started, not WAITING_INPUT; only waiting nodes take answers")
    );
}

#[tokio::test]
async fn a_paused_run_resumed_by_an_answer_says_it_is_running_again() {
    let (engine, journal) = mem();
    let g = demo("feature", json!({"approval_stage": "security_review"}));
    let out = engine.run(g.clone(), json!({})).await.unwrap();
    assert_eq!(out.status, RunStatus::WaitingInput);
    let paused_at = out.last_seq;
    let done = answer(&engine, g, &out.run, "security_review", Answer::approve()).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    let events = trellis_graph::Journal::load(&*journal, &out.run).unwrap();
    let after: Vec<_> = events
        .iter()
        .filter(|e| e.seq > paused_at)
        .map(|e| match &e.kind {
            trellis_protocol::EventKind::RunStatusChanged { status, .. } => {
                format!("status:{status}")
            }
            k => k.name().to_owned(),
        })
        .collect();
    let resumed = after.iter().position(|k| k == "runResumed").unwrap();
    assert_eq!(
        after.get(resumed + 1).map(String::as_str),
        Some("status:running"),
        "runResumed is followed by the status change: {after:?}"
    );
    assert_eq!(after.last().map(String::as_str), Some("status:succeeded"));
}

/// Resumes `run` with `answer` for `node` and waits for where it stops.
async fn answer(
    engine: &trellis_graph::Engine,
    g: std::sync::Arc<trellis_graph::Graph>,
    run: &trellis_protocol::RunId,
    node: &str,
    answer: Answer,
) -> trellis_graph::RunOutcome {
    engine
        .resume(
            g,
            run,
            vec![Command::Answer {
                node: node.into(),
                answer,
            }],
        )
        .unwrap()
        .wait()
        .await
        .unwrap()
}
