//! `_trellis/notification`: a client that takes it is told when a run of its session ends,
//! and when it needs input.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Error, UntypedMessage};
use serde_json::{Value, json};
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_protocol::acp::{NOTIFICATION_METHOD, QUESTION_METHOD};

use super::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_takes_notifications_is_told_its_run_finished() {
    let f = fixture(Duration::ZERO);
    let updates: Updates = Arc::default();
    let told: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let t = told.clone();
    let root = f.root.clone();
    let session = with_timeout(
        recording(&updates)
            .on_receive_notification(
                async move |n: UntypedMessage, _cx| {
                    t.lock()
                        .unwrap()
                        .push((n.method().to_owned(), n.params().clone()));
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(agent(&f).connection(), async |cx| {
                initialize_taking(&cx, &[NOTIFICATION_METHOD]).await?;
                let session = new_session(&cx, &root).await?;
                let r = prompt(&cx, &session, "Why is stock kept in memory?").await?;
                assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
                Ok(session)
            }),
    )
    .await
    .unwrap();
    let run = turn_run(&updates);
    let told = told.lock().unwrap().clone();
    let notices: Vec<&Value> = told
        .iter()
        .filter(|(m, _)| m == NOTIFICATION_METHOD)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(notices.len(), 1, "the run's end, once: {told:?}");
    let n = notices[0];
    assert_eq!(n["sessionId"], session.0.as_ref(), "{n}");
    assert_eq!(n["run"], run.as_str(), "{n}");
    assert_eq!(n["event"], "finished", "{n}");
    assert_eq!(n["outcome"], "succeeded", "{n}");
    assert!(n["workflow"].is_string(), "{n}");
}

/// A workflow question: a client that takes notifications is told the run needs input (the
/// node and the question), once, before the run goes on with the answer and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_takes_notifications_is_told_its_run_needs_input() {
    let f = fixture_with(super::feature::feature_script(true));
    let root = f.root.clone();
    let agent = AcpAgent::with_service(f.service.clone(), AcpOptions::default());
    let (updates, asked): (Updates, Asked) = Default::default();
    let told: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let (t, q) = (told.clone(), told.clone());
    with_timeout(
        answering(&updates, &asked, "allow_once")
            .on_receive_notification(
                async move |n: UntypedMessage, _cx| {
                    t.lock()
                        .unwrap()
                        .push((n.method().to_owned(), n.params().clone()));
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |req: UntypedMessage, responder, _cx| {
                    if req.method() != QUESTION_METHOD {
                        return responder.respond_with_error(Error::method_not_found());
                    }
                    q.lock()
                        .unwrap()
                        .push((req.method().to_owned(), req.params().clone()));
                    responder.respond(json!({"outcome": "answered", "answer": "yes"}))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(agent.connection(), async |cx| {
                initialize_taking(&cx, &[QUESTION_METHOD, NOTIFICATION_METHOD]).await?;
                let sid = new_session(&cx, &root).await?;
                set_option(&cx, &sid, "workflow", "feature_with_iterative_testing").await?;
                let r = prompt(&cx, &sid, "Fix the stock bookkeeping of commit").await?;
                assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
                Ok(())
            }),
    )
    .await
    .unwrap();
    let told = told.lock().unwrap().clone();
    let notices: Vec<&Value> = told
        .iter()
        .filter(|(m, _)| m == NOTIFICATION_METHOD)
        .map(|(_, p)| p)
        .collect();
    let inputs: Vec<&&Value> = notices.iter().filter(|n| n["event"] == "input").collect();
    assert_eq!(inputs.len(), 1, "the question, once: {told:?}");
    let n = inputs[0];
    assert_eq!(n["node"], "code_generation", "{n}");
    assert_eq!(n["outcome"], "waiting_input", "{n}");
    assert!(
        n["message"]
            .as_str()
            .is_some_and(|m| m.contains(super::feature::QUESTION)),
        "{n}"
    );
    assert!(notices.iter().any(|n| n["event"] == "finished"), "{told:?}");
}
