//! The change set reaches the user's files only when accepted: `ask` shows the diffs in a
//! permission request (accept applies, reject keeps them in the run's worktree),
//! `auto-edit` applies at once, `read-only` never; `/undo` reverses (and redoes) the last
//! apply. Config options and modes set the autonomy and the workflow, and are recorded with
//! the session.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema as acp;
use serde_json::{Value, json};
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_llm::Role;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

const ADR: &str = "docs/adr/0002-persist-stock.md";

/// The orchestrator includes the documentation stage; the documentation agent writes an
/// ADR (`Accepted` when a review asked for it, else `Proposed`), then reports; the others
/// report.
fn writing_script() -> ScriptedProvider {
    ScriptedProvider::responding(|r| {
        let report = |output: &str| {
            Turn::Json(json!({
                "failure": false, "output": output, "files_changed": [], "findings": []
            }))
        };
        let schema = r.response_format.as_ref().map(|f| &f.schema["properties"]);
        if schema.is_some_and(|p| p.get("workflow").is_some()) {
            Turn::Json(json!({
                "reasoning": "record it",
                "workflow": "architecture_discussion",
                "stages": [{"stage": "decision_documentation", "include": true, "reason": "asked"}]
            }))
        } else if is_queries(r) {
            Turn::Json(json!({ "queries": ["Inventory commit stock"] }))
        } else if r.tools.iter().any(|t| t.name == "write_file")
            && !r.messages.iter().any(|m| m.role == Role::Tool)
        {
            let asked = r
                .messages
                .iter()
                .any(|m| m.content.contains("Status must be Accepted"));
            let status = if asked { "Accepted" } else { "Proposed" };
            Turn::ToolCall {
                name: "write_file".into(),
                arguments: json!({ "path": ADR, "content": format!("# ADR 0002: persist stock\n\nStatus: {status}\n") }),
            }
        } else {
            report("recorded ADR 0002")
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_change_set_is_applied_only_when_accepted_and_undo_reverses_it() {
    let f = fixture_with(writing_script());
    let (root, service) = (f.root.clone(), f.service.clone());
    let agent = AcpAgent::with_service(service.clone(), AcpOptions::default());
    let answers: Arc<Mutex<VecDeque<&'static str>>> = Arc::default();
    let asked: Arc<Mutex<Vec<Value>>> = Arc::default();
    let updates: Updates = Arc::default();
    let (a, q) = (answers.clone(), asked.clone());
    let adr = root.join(ADR);
    let exists = || adr.exists();
    with_timeout(
        recording(&updates)
            .on_receive_request(
                async move |req: acp::RequestPermissionRequest, responder, _cx| {
                    q.lock().unwrap().push(serde_json::to_value(&req).unwrap());
                    let answer = a
                        .lock()
                        .unwrap()
                        .pop_front()
                        .expect("an unexpected request");
                    responder.respond(selected(answer))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(agent.connection(), async |cx| {
                init(&cx).await;
                let s = cx
                    .send_request(acp::NewSessionRequest::new(root.clone()))
                    .block_task()
                    .await?;
                let v = serde_json::to_value(&s).unwrap();
                assert_eq!(v["modes"]["currentModeId"], "ask", "{v}");
                assert_eq!(v["configOptions"][1]["id"], "autonomy", "{v}");
                let sid = s.session_id;
                let prompt = async |text: &str| prompt(&cx, &sid, text).await.unwrap().stop_reason;

                // Ask, accepted: the permission shows the diff; the file is written.
                answers.lock().unwrap().push_back("allow_once");
                assert_eq!(
                    prompt("Record the decision").await,
                    acp::StopReason::EndTurn
                );
                assert_eq!(asked.lock().unwrap().len(), 1);
                assert!(exists(), "applied");
                // Undo, and undo the undo.
                assert_eq!(prompt("/undo").await, acp::StopReason::EndTurn);
                assert!(!exists(), "undone");
                assert_eq!(prompt("/undo").await, acp::StopReason::EndTurn);
                assert!(exists(), "redone");
                assert_eq!(prompt("/undo").await, acp::StopReason::EndTurn);
                assert!(!exists());

                // Ask, rejected: nothing written.
                answers.lock().unwrap().push_back("reject_once");
                assert_eq!(
                    prompt("Record the decision").await,
                    acp::StopReason::EndTurn
                );
                assert_eq!(asked.lock().unwrap().len(), 2);
                assert!(!exists(), "rejected: kept in the worktree");

                // Read-only (a mode): never applied, nothing asked.
                cx.send_request(acp::SetSessionModeRequest::new(sid.clone(), "read-only"))
                    .block_task()
                    .await?;
                assert_eq!(
                    prompt("Record the decision").await,
                    acp::StopReason::EndTurn
                );
                assert_eq!(asked.lock().unwrap().len(), 2);
                assert!(!exists(), "read-only");

                // Auto-edit (a config option): applied without asking.
                let r = set_option(&cx, &sid, "autonomy", "auto-edit").await?;
                let v = serde_json::to_value(&r).unwrap();
                assert_eq!(v["configOptions"][1]["currentValue"], "auto-edit", "{v}");
                assert_eq!(
                    prompt("Record the decision").await,
                    acp::StopReason::EndTurn
                );
                assert_eq!(asked.lock().unwrap().len(), 2);
                assert!(exists(), "auto-edit");
                // An unknown value is refused.
                let e = set_option(&cx, &sid, "autonomy", "yolo").await.unwrap_err();
                assert_eq!(e.code, agent_client_protocol::ErrorCode::INVALID_PARAMS);
                Ok(())
            }),
    )
    .await
    .unwrap();

    // The permission request: an edit with the ADR's diff and location.
    let first = &asked.lock().unwrap()[0];
    let call = &first["toolCall"];
    assert_eq!(call["kind"], "edit", "{first}");
    assert!(call["title"].as_str().unwrap().contains(ADR), "{first}");
    assert_eq!(call["content"][0]["type"], "diff");
    assert_eq!(
        call["content"][0]["path"],
        root.join(ADR).display().to_string()
    );
    assert!(
        call["content"][0]["newText"]
            .as_str()
            .unwrap()
            .contains("ADR 0002")
    );
    assert_eq!(
        call["locations"][0]["path"],
        root.join(ADR).display().to_string()
    );
    // The settings were recorded with the session.
    let rec = &service.client_sessions("acp").unwrap()[0];
    assert_eq!(rec.config, r#"{"autonomy":"auto-edit"}"#);
    let all = updates.lock().unwrap().clone();
    let kinds: Vec<&str> = all
        .iter()
        .filter_map(|u| u["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(kinds.contains(&"available_commands_update"), "{kinds:?}");
    assert!(kinds.contains(&"current_mode_update"), "{kinds:?}");
    assert!(kinds.contains(&"config_option_update"), "{kinds:?}");
}

/// `_trellis/review`: a change set kept in the run's worktree (`reject_once`) is shown with
/// its hunks, applied (the accepted files) and undone from the editor, one review op each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kept_change_set_is_reviewed_applied_and_undone_through_the_extension_method() {
    use agent_client_protocol::UntypedMessage;
    let f = fixture_with(writing_script());
    let (root, service) = (f.root.clone(), f.service.clone());
    let agent = AcpAgent::with_service(service, AcpOptions::default());
    let updates: Updates = Arc::default();
    let adr = root.join(ADR);
    with_timeout(
        recording(&updates)
            .on_receive_request(
                async move |_req: acp::RequestPermissionRequest, responder, _cx| {
                    responder.respond(selected("reject_once"))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(agent.connection(), async |cx| {
                let sid = open_session(&cx, &root).await?;
                let review = async |params: Value| ext(&cx, "_trellis/review", &sid, params).await;
                let stop = prompt(&cx, &sid, "Record the decision").await?.stop_reason;
                assert_eq!(stop, acp::StopReason::EndTurn);
                assert!(!adr.exists(), "kept in the run's worktree");

                let shown = review(json!({"action": "show"})).await?;
                assert_eq!(shown["state"], "open", "{shown}");
                let files = shown["changeSet"]["files"].as_array().unwrap();
                assert_eq!(files.len(), 1, "{shown}");
                assert_eq!(files[0]["path"], ADR);
                assert_eq!(files[0]["hunks"][0]["index"], 0);

                let applied =
                    review(json!({"action": "apply", "accept": [{"file": ADR, "hunks": [0]}]}))
                        .await?;
                assert_eq!(applied["outcome"], "applied", "{applied}");
                assert!(adr.exists(), "applied");
                let undone = review(json!({"action": "undo"})).await?;
                assert_eq!(undone["outcome"], "undone", "{undone}");
                assert!(!adr.exists(), "undone");

                let e = cx
                    .send_request(
                        UntypedMessage::new(
                            "_trellis/review",
                            json!({"sessionId": "nope", "action": "show"}),
                        )
                        .unwrap(),
                    )
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(i32::from(e.code), -32002, "{e:?}");
                let e = review(json!({"action": "explode"})).await.unwrap_err();
                assert_eq!(
                    e.code,
                    agent_client_protocol::ErrorCode::INVALID_PARAMS,
                    "{e:?}"
                );
                Ok(())
            }),
    )
    .await
    .unwrap();
}

/// `_trellis/requestChanges`: the runtime service's request for changes on a kept change
/// set — the stage that wrote it runs again with the feedback, followed as a turn of the
/// session (streamed, its new change set asked as a permission), in the same run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_for_changes_runs_the_stage_again_as_a_turn_of_the_session() {
    let f = fixture_with(writing_script());
    let (root, service) = (f.root.clone(), f.service.clone());
    let agent = AcpAgent::with_service(service, AcpOptions::default());
    let (updates, asked): (Updates, Asked) = Default::default();
    with_timeout(answering(&updates, &asked, "reject_once").connect_with(
        agent.connection(),
        async |cx| {
            let sid = open_session(&cx, &root).await?;
            let request_changes = async |feedback: &str| {
                let p = json!({ "feedback": feedback });
                ext(&cx, "_trellis/requestChanges", &sid, p).await
            };
            let stop = prompt(&cx, &sid, "Record the decision").await?.stop_reason;
            assert_eq!(stop, acp::StopReason::EndTurn);
            let run = turn_run(&updates);
            assert_eq!(asked.lock().unwrap().len(), 1, "the change set, kept");
            let before = updates.lock().unwrap().len();

            let r = request_changes(&format!(
                "- {ADR}:3 `+ Status: Proposed`: Status must be Accepted"
            ))
            .await?;
            assert_eq!(r["run"], run.as_str(), "{r}");
            assert_eq!(r["revising"], "decision_documentation", "{r}");
            assert_eq!(r["stopReason"], "end_turn", "{r}");
            // The revision streamed in the session, and its change set was offered.
            let streamed = kinds(&updates).split_off(before);
            assert!(streamed.iter().any(|k| k == "plan"), "{streamed:?}");
            assert!(streamed.iter().any(|k| k == "tool_call"), "{streamed:?}");
            let asked = asked.lock().unwrap().clone();
            assert_eq!(asked.len(), 2, "the new change set is asked: {asked:?}");
            assert_eq!(asked[1]["toolCall"]["toolCallId"], format!("{run}/apply"));
            assert!(
                asked[1].to_string().contains("Status: Accepted"),
                "{}",
                asked[1]
            );

            let e = request_changes(" ").await.unwrap_err();
            assert_eq!(
                e.code,
                agent_client_protocol::ErrorCode::INVALID_PARAMS,
                "{e:?}"
            );
            Ok(())
        },
    ))
    .await
    .unwrap();
}
