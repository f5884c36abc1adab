//! The `_trellis/...` extension methods: advertised under `_meta`; the graph of the
//! session's run, a message to a running node, a prune of a running node (its plan entry
//! ends "pruned"); errors for an unknown session, run or bad params.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{ErrorCode, UntypedMessage};
use serde_json::{Value, json};

use super::common::*;

/// Waits until an update satisfies `f`.
async fn until(updates: &Updates, f: impl Fn(&Value) -> bool) {
    for _ in 0..600 {
        if updates.lock().unwrap().iter().any(&f) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no such update: {:#?}", updates.lock().unwrap());
}

fn running(stage: &'static str) -> impl Fn(&Value) -> bool {
    move |u: &Value| {
        u["update"]["sessionUpdate"] == "plan"
            && u["update"]["entries"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["content"] == stage && e["status"] == "in_progress")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn extension_methods_list_message_and_prune_nodes() {
    let f = fixture(Duration::from_millis(1500));
    let root = f.root.clone();
    let updates: Updates = Arc::default();
    let graph: Arc<Mutex<Value>> = Arc::default();
    let g = graph.clone();
    with_timeout(
        recording(&updates)
            .connect_with(agent(&f).connection(), async |cx| {
                let init = cx
                    .send_request(acp::InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let v = serde_json::to_value(&init).unwrap();
                assert_eq!(
                    v["agentCapabilities"]["_meta"]["trellis.dev/extensions"]["methods"],
                    json!([
                        "_trellis/graph",
                        "_trellis/message",
                        "_trellis/prune",
                        "_trellis/review",
                        "_trellis/requestChanges"
                    ]),
                    "{v}"
                );
                let sid = new_session(&cx, &root).await?;
                let ext = async |method: &str, params: Value| {
                    cx.send_request(UntypedMessage::new(method, params).unwrap())
                        .block_task()
                        .await
                };
                // No run yet.
                let e = ext("_trellis/graph", json!({"sessionId": sid.0.as_ref()}))
                    .await
                    .unwrap_err();
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");

                // 1. While the analysis runs: its graph, and a message to it.
                let turn = cx.send_request(acp::PromptRequest::new(
                    sid.clone(),
                    vec!["Why is stock kept in memory?".into()],
                ));
                until(&updates, running("architectural_analysis")).await;
                let v = ext("_trellis/graph", json!({"sessionId": sid.0.as_ref()})).await?;
                let ids: Vec<&str> = v["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|n| n["id"].as_str())
                    .collect();
                assert!(ids.contains(&"architectural_analysis"), "{v}");
                *g.lock().unwrap() = v.clone();
                ext(
                    "_trellis/message",
                    json!({"sessionId": sid.0.as_ref(), "node": "architectural_analysis", "text": "Mind the reservations."}),
                )
                .await?;
                let stop = turn.block_task().await?.stop_reason;
                assert_eq!(stop, acp::StopReason::EndTurn);
                let done = ext("_trellis/graph", json!({"sessionId": sid.0.as_ref(), "run": v["run"]})).await?;
                assert_eq!(done["status"], "succeeded", "{done}");

                // 2. Prune the running analysis: its plan entry ends "pruned".
                updates.lock().unwrap().clear();
                let turn = cx.send_request(acp::PromptRequest::new(
                    sid.clone(),
                    vec!["Why is stock kept in memory?".into()],
                ));
                until(&updates, running("architectural_analysis")).await;
                ext(
                    "_trellis/prune",
                    json!({"sessionId": sid.0.as_ref(), "node": "architectural_analysis"}),
                )
                .await?;
                let stop = turn.block_task().await?.stop_reason;
                assert_eq!(stop, acp::StopReason::EndTurn);
                until(&updates, |u| {
                    u["update"]["sessionUpdate"] == "plan"
                        && u["update"]["entries"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|e| e["content"] == "architectural_analysis (pruned)")
                })
                .await;

                // Errors: an unknown session, a run of no session, bad params.
                let e = ext("_trellis/graph", json!({"sessionId": "ses-nope"}))
                    .await
                    .unwrap_err();
                assert_eq!(i32::from(e.code), -32002, "{e:?}");
                let e = ext("_trellis/graph", json!({"sessionId": sid.0.as_ref(), "run": "zzz"}))
                    .await
                    .unwrap_err();
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
                let e = ext("_trellis/message", json!({"sessionId": sid.0.as_ref()}))
                    .await
                    .unwrap_err();
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
                // Pruning what already completed is refused.
                let e = ext(
                    "_trellis/prune",
                    json!({"sessionId": sid.0.as_ref(), "node": "upfront_retrieval"}),
                )
                .await
                .unwrap_err();
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
                Ok(())
            }),
    )
    .await
    .unwrap();
    let v = graph.lock().unwrap().clone();
    let analysis = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "architectural_analysis")
        .unwrap()
        .clone();
    assert_eq!(analysis["state"], "RUNNING", "{v}");
}
