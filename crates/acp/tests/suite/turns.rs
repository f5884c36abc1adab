//! initialize, a prompt turn, cancel, bad input.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, ErrorCode, UntypedMessage};
use serde_json::{Value, json};
use trellis_protocol::RunStatus;

use super::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn initialize_is_honest_and_remembers_the_client() {
    let f = fixture(Duration::ZERO);
    let agent = agent(&f);
    let a = agent.clone();
    Client
        .v1()
        .connect_with(agent.connection(), async |cx| {
            let caps = acp::ClientCapabilities::new()
                .fs(acp::FileSystemCapabilities::new().read_text_file(true))
                .terminal(true);
            let r = cx
                .send_request(
                    acp::InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps),
                )
                .block_task()
                .await?;
            let v = serde_json::to_value(&r).unwrap();
            assert_eq!(v["protocolVersion"], 1);
            assert_eq!(v["authMethods"], json!([]));
            assert_eq!(v["agentInfo"]["name"], "trellis");
            let c = &v["agentCapabilities"];
            assert_eq!(c["loadSession"], true, "{c}");
            for cap in ["list", "resume", "close"] {
                assert_eq!(c["sessionCapabilities"][cap], json!({}), "{cap}: {c}");
            }
            assert!(c["sessionCapabilities"].get("delete").is_none(), "{c}");
            assert_ne!(c["promptCapabilities"]["image"], true, "{c}");
            assert_eq!(c["promptCapabilities"]["embeddedContext"], true, "{c}");
            assert_eq!(c["mcpCapabilities"]["http"], true, "{c}");
            assert_ne!(c["mcpCapabilities"]["sse"], true, "{c}");
            let caps = a.client_caps();
            assert!(caps.read_text_file && caps.terminal && !caps.write_text_file);
            Ok(())
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prompt_runs_a_discussion_and_streams_plan_and_messages() {
    let f = fixture(Duration::ZERO);
    let updates: Updates = Arc::default();
    let root = f.root.clone();
    let (stop, session) = with_timeout(recording(&updates).connect_with(
        agent(&f).connection(),
        async |cx| {
            let session = open_session(&cx, &root).await?;
            let r = prompt(&cx, &session, "Why is stock kept in memory?").await?;
            Ok((r.stop_reason, session))
        },
    ))
    .await
    .unwrap();
    assert_eq!(stop, acp::StopReason::EndTurn);
    let all = updates.lock().unwrap().clone();
    assert!(
        all.iter().all(|u| u["sessionId"] == session.0.as_ref()),
        "{all:#?}"
    );
    let kinds = kinds(&updates);
    assert!(kinds.contains(&"plan".to_owned()), "{kinds:?}");
    assert!(
        kinds.contains(&"agent_message_chunk".to_owned()),
        "{kinds:?}"
    );
    // The plan: the first has every stage pending, the last every stage completed.
    let plans: Vec<&Value> = all
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "plan")
        .collect();
    let statuses = |p: &Value| -> Vec<String> {
        p["update"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["status"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = statuses(plans[0]);
    assert!(
        !first.is_empty() && first.iter().all(|s| s == "pending"),
        "{first:?}"
    );
    let last = statuses(plans[plans.len() - 1]);
    assert!(last.iter().all(|s| s == "completed"), "{plans:#?}");
    assert!(
        plans
            .iter()
            .any(|p| statuses(p).contains(&"in_progress".to_owned())),
        "{plans:#?}"
    );
    let text: String = all
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["update"]["content"]["text"].as_str())
        .collect();
    assert!(text.contains("Stock lives in memory"), "{text}");
    // Each completed model call reports its context use.
    let usage: Vec<&Value> = all
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "usage_update")
        .collect();
    assert!(!usage.is_empty(), "{kinds:?}");
    assert!(
        usage.iter().all(|u| u["update"]["size"] == 8192),
        "{usage:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_mid_turn_ends_the_turn_cancelled_and_cancels_the_run() {
    let f = fixture(Duration::from_millis(400));
    let updates: Updates = Arc::default();
    let u = updates.clone();
    let root = f.root.clone();
    let stop = with_timeout(
        Client
            .v1()
            .on_receive_notification(
                async move |n: acp::SessionNotification, cx| {
                    let first_plan = {
                        let mut u = u.lock().unwrap();
                        let v = serde_json::to_value(&n).unwrap();
                        let is_plan = v["update"]["sessionUpdate"] == "plan";
                        let first =
                            is_plan && !u.iter().any(|x| x["update"]["sessionUpdate"] == "plan");
                        u.push(v);
                        first
                    };
                    if first_plan {
                        cx.send_notification(acp::CancelNotification::new(n.session_id))?;
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(agent(&f).connection(), async |cx| {
                let session = open_session(&cx, &root).await?;
                let r = prompt(&cx, &session, "Why is stock kept in memory?").await?;
                // The session takes another prompt after a cancelled one.
                let again = cx
                    .send_request(acp::PromptRequest::new(session.clone(), vec![]))
                    .block_task()
                    .await;
                assert_eq!(again.unwrap_err().code, ErrorCode::INVALID_PARAMS);
                Ok(r.stop_reason)
            }),
    )
    .await
    .unwrap();
    assert_eq!(stop, acp::StopReason::Cancelled);
    let o = f.service.run_state(&turn_run(&updates)).unwrap();
    assert_eq!(o.status, RunStatus::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_gets_json_rpc_errors_and_the_agent_lives_on() {
    let f = fixture(Duration::ZERO);
    let root = f.root.clone();
    Client
        .v1()
        .connect_with(agent(&f).connection(), async |cx| {
            // Nothing before `initialize`.
            let e = cx
                .send_request(acp::NewSessionRequest::new(root.clone()))
                .block_task()
                .await;
            assert!(e.is_err(), "{e:?}");
            init(&cx).await;
            for method in ["session/set_model", "_trellis/nope", "nope"] {
                let e = cx
                    .send_request(UntypedMessage::new(method, json!({"sessionId": "x"}))?)
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND, "{method}: {e:?}");
            }
            // Invalid params: a missing cwd, a relative cwd, a cwd outside the workspace.
            let e = cx
                .send_request(UntypedMessage::new(
                    "session/new",
                    json!({"mcpServers": []}),
                )?)
                .block_task()
                .await
                .unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
            for cwd in [Path::new("relative/dir"), Path::new("/")] {
                let e = cx
                    .send_request(acp::NewSessionRequest::new(cwd))
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{cwd:?}: {e:?}");
            }
            // A prompt for a session that does not exist.
            let e = cx
                .send_request(acp::PromptRequest::new("nope", vec!["hi".into()]))
                .block_task()
                .await
                .unwrap_err();
            assert_eq!(i32::from(e.code), -32002, "{e:?}");
            // Still alive: a session opens.
            cx.send_request(acp::NewSessionRequest::new(root.clone()))
                .block_task()
                .await?;
            Ok(())
        })
        .await
        .unwrap();
}

/// `$/cancel_request` for a running `session/prompt` cancels the turn as `session/cancel`
/// does: the turn ends `cancelled` and the run is cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_request_for_a_prompt_cancels_its_turn() {
    let f = fixture(Duration::from_millis(400));
    let root = f.root.clone();
    let handle: Arc<Mutex<Option<agent_client_protocol::RequestCancellationHandle>>> =
        Arc::default();
    let updates: Updates = Arc::default();
    let (h, u) = (handle.clone(), updates.clone());
    let stop = with_timeout(
        Client
            .v1()
            .on_receive_notification(
                async move |n: acp::SessionNotification, _cx| {
                    let v = serde_json::to_value(&n).unwrap();
                    if v["update"]["sessionUpdate"] == "plan"
                        && let Some(handle) = h.lock().unwrap().take()
                    {
                        handle.cancel()?;
                    }
                    u.lock().unwrap().push(v);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(agent(&f).connection(), async |cx| {
                let session = open_session(&cx, &root).await?;
                let sent = cx.send_request(acp::PromptRequest::new(
                    session.clone(),
                    vec!["Why is stock kept in memory?".into()],
                ));
                *handle.lock().unwrap() = Some(sent.cancellation_handle());
                // The client side may settle a cancelled request itself (-32800); either
                // way the agent's turn ends and the session takes the next prompt.
                let first = sent.block_task().await;
                let again = prompt(&cx, &session, "Why is stock kept in memory?").await?;
                Ok((first.map(|r| r.stop_reason), again.stop_reason))
            }),
    )
    .await
    .unwrap();
    match &stop.0 {
        Ok(reason) => assert_eq!(*reason, acp::StopReason::Cancelled),
        Err(e) => assert_eq!(i32::from(e.code), -32800, "{e:?}"),
    }
    assert_eq!(stop.1, acp::StopReason::EndTurn);
    let o = f.service.run_state(&turn_run(&updates)).unwrap();
    assert_eq!(o.status, RunStatus::Cancelled);
}

/// Files the prompt links are read through the client when it advertised
/// `fs/read_text_file` (its buffer, unsaved changes included, is what the agents see); a
/// file the client cannot read stays a link, and a client that did not advertise reading is
/// never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn linked_files_are_read_through_the_client_when_it_can() {
    let model = script(Duration::ZERO);
    let f = fixture_with(model.clone());
    let root = f.root.clone();
    let seen = |needle: &str| {
        model
            .requests()
            .iter()
            .any(|r| r.messages.iter().any(|m| m.content.contains(needle)))
    };
    let reads: Arc<Mutex<Vec<String>>> = Arc::default();
    for advertise in [true, false] {
        let r = reads.clone();
        let agent = agent(&f);
        let root = root.clone();
        with_timeout(
            Client
                .v1()
                .on_receive_request(
                    async move |req: acp::ReadTextFileRequest, responder, _cx| {
                        let path = req.path.display().to_string();
                        r.lock().unwrap().push(path.clone());
                        if path.ends_with("inventory.py") {
                            responder.respond(acp::ReadTextFileResponse::new(
                                "UNSAVED-BUFFER-TEXT in inventory.py",
                            ))
                        } else {
                            responder.respond_with_error(agent_client_protocol::Error::new(
                                -32603,
                                "outside the allowed tree",
                            ))
                        }
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(agent.connection(), async |cx| {
                    let caps = acp::ClientCapabilities::new()
                        .fs(acp::FileSystemCapabilities::new().read_text_file(advertise));
                    cx.send_request(
                        acp::InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps),
                    )
                    .block_task()
                    .await?;
                    let session = new_session(&cx, &root).await?;
                    let link = |p: &str| {
                        acp::ContentBlock::ResourceLink(acp::ResourceLink::new(
                            p,
                            format!("file://{}", root.join(p).display()),
                        ))
                    };
                    let r = cx
                        .send_request(acp::PromptRequest::new(
                            session,
                            vec![
                                "Why is stock kept in memory? See".into(),
                                link("inventory.py"),
                                link("README.md"),
                            ],
                        ))
                        .block_task()
                        .await?;
                    assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
                    Ok(())
                }),
        )
        .await
        .unwrap();
        if advertise {
            assert!(seen("UNSAVED-BUFFER-TEXT"), "the buffer reached the agents");
            assert!(seen("(see file://"), "an unreadable file stays a link");
            assert_eq!(reads.lock().unwrap().len(), 2);
        } else {
            assert_eq!(
                reads.lock().unwrap().len(),
                2,
                "not asked without the capability"
            );
        }
    }
}
