//! Approvals: `session/request_permission` with the four options; "once" answers ask again,
//! "always" answers are remembered per session (and only there); `session/cancel` while a
//! permission request is pending ends the turn `cancelled` without waiting for the answer
//! and leaves the run paused (resumable); feedback typed with a rejection (the answer's
//! `_meta`) is the rejection's comment.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema as acp;
use serde_json::{Value, json};
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_llm::Role;
use trellis_protocol::acp::FEEDBACK_META;
use trellis_protocol::{RunId, RunStatus};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

/// The network command the analysis agent runs: the policy asks before it runs.
const CURL: &str = "curl -s --max-time 1 http://127.0.0.1:9/stock";

/// Agents with tools call the shell once, then report what the call returned; retrieval
/// gets queries; everything else a report.
fn shell_script() -> ScriptedProvider {
    ScriptedProvider::responding(|r| {
        let report = |output: String| {
            Turn::Json(json!({
                "failure": false, "output": output, "files_changed": [], "findings": []
            }))
        };
        if is_queries(r) {
            Turn::Json(json!({ "queries": ["Inventory commit stock"] }))
        } else if r.tools.iter().any(|t| t.name == "shell") {
            match r.messages.last() {
                Some(m) if m.role == Role::Tool => report(format!("shell said: {}", m.content)),
                _ => Turn::ToolCall {
                    name: "shell".into(),
                    arguments: json!({ "command": CURL }),
                },
            }
        } else {
            report("analysed".into())
        }
    })
}

/// The feedback typed with a rejection (`_meta` of the answer).
const FEEDBACK: &str = "read the stock from the cache instead";

/// What the client answers to each permission request, in order: an option id, or
/// `"cancel"` (send `session/cancel`, answer `cancelled` two seconds later).
type Answers = Arc<Mutex<VecDeque<&'static str>>>;

/// The permission requests received, as JSON.
struct Asked {
    requests: Vec<Value>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn permissions_once_always_and_cancel_while_asking() {
    let (_ws, root) = workspace();
    // The analysis agent may use the shell (a workspace role file).
    std::fs::create_dir_all(root.join(".trellis/agents")).unwrap();
    std::fs::write(
        root.join(".trellis/agents/analysis_agent.yaml"),
        "name: analysis_agent\nrole: You analyse.\nobjective: Analyse.\ntools: [shell, read_file]\n",
    )
    .unwrap();
    let service = service_with(&root, shell_script());
    let agent = AcpAgent::with_service(
        service.clone(),
        AcpOptions {
            workflow: Some("architecture_discussion".into()),
        },
    );
    let answers: Answers = Arc::default();
    let asked = Arc::new(Mutex::new(Asked {
        requests: Vec::new(),
    }));
    let updates: Updates = Arc::default();
    let (a, q) = (answers.clone(), asked.clone());
    let outcomes = with_timeout(
        recording(&updates)
            .on_receive_request(
                async move |req: acp::RequestPermissionRequest, responder, cx| {
                    q.lock()
                        .unwrap()
                        .requests
                        .push(serde_json::to_value(&req).unwrap());
                    let answer = a
                        .lock()
                        .unwrap()
                        .pop_front()
                        .expect("an unexpected request");
                    if answer == "cancel" {
                        cx.send_notification(acp::CancelNotification::new(req.session_id))?;
                        // Answered late, off the dispatch loop: the turn must not wait for it.
                        cx.spawn(async move {
                            tokio::time::sleep(Duration::from_secs(2)).await;
                            responder.respond(acp::RequestPermissionResponse::new(
                                acp::RequestPermissionOutcome::Cancelled,
                            ))
                        })
                    } else if let Some(option) = answer.strip_prefix("feedback:") {
                        // An option with typed feedback in the answer's `_meta`.
                        let mut meta = serde_json::Map::new();
                        meta.insert(FEEDBACK_META.into(), json!(FEEDBACK));
                        responder.respond(acp::RequestPermissionResponse::new(
                            acp::RequestPermissionOutcome::Selected(
                                acp::SelectedPermissionOutcome::new(option.to_owned()).meta(meta),
                            ),
                        ))
                    } else {
                        responder.respond(selected(answer))
                    }
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(agent.connection(), async |cx| {
                init(&cx).await;
                let mut outcomes = Vec::new();
                // (session, the answer to queue for its permission request, if one)
                let s1 = new_session(&cx, &root).await?;
                let s2 = new_session(&cx, &root).await?;
                let s3 = new_session(&cx, &root).await?;
                let s4 = new_session(&cx, &root).await?;
                let steps: [(&acp::SessionId, Option<&'static str>); 8] = [
                    (&s1, Some("allow_once")),
                    (&s1, Some("reject_once")),
                    (&s1, Some("allow_always")),
                    (&s1, None),                  // remembered: allowed without asking
                    (&s2, Some("reject_always")), // another session asks again
                    (&s2, None),                  // remembered: rejected without asking
                    (&s3, Some("cancel")),
                    (&s4, Some("feedback:reject_once")), // the typed text is the comment
                ];
                for (session, answer) in steps {
                    if let Some(answer) = answer {
                        a_push(&answers, answer);
                    }
                    let before = asked.lock().unwrap().requests.len();
                    let started = std::time::Instant::now();
                    let r = prompt(&cx, session, "Can the stock service be reached?").await?;
                    let after = asked.lock().unwrap().requests.len();
                    let text: String = updates
                        .lock()
                        .unwrap()
                        .drain(..)
                        .filter(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
                        .filter_map(|u| u["update"]["content"]["text"].as_str().map(str::to_owned))
                        .collect();
                    outcomes.push((r.stop_reason, after - before, text, started.elapsed()));
                }
                Ok(outcomes)
            }),
    )
    .await
    .unwrap();

    let rejected = "rejected in the editor";
    let check = |i: usize, asks: usize, rejected_expected: bool| {
        let (stop, n, text, _) = &outcomes[i];
        assert_eq!(*stop, acp::StopReason::EndTurn, "turn {i}: {text}");
        assert_eq!(*n, asks, "turn {i}: permission requests");
        assert!(text.contains("shell said"), "turn {i}: {text}");
        assert_eq!(
            text.contains(rejected),
            rejected_expected,
            "turn {i}: {text}"
        );
    };
    check(0, 1, false);
    check(1, 1, true);
    check(2, 1, false);
    check(3, 0, false);
    check(4, 1, true);
    check(5, 0, true);
    // A rejection with typed feedback: the feedback is the rejection's comment.
    check(7, 1, false);
    assert!(outcomes[7].2.contains(FEEDBACK), "{}", outcomes[7].2);
    // Cancelled while asking: `cancelled` at once (not after the client's late answer).
    let (stop, n, _, took) = &outcomes[6];
    assert_eq!(*stop, acp::StopReason::Cancelled);
    assert_eq!(*n, 1);
    assert!(*took < Duration::from_secs(2), "{took:?}");

    // The request: the four options, the command in the title, a pending tool call.
    let first = &asked.lock().unwrap().requests[0];
    let options: Vec<(&str, &str)> = first["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["optionId"].as_str().unwrap(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        [
            ("allow_once", "allow_once"),
            ("allow_always", "allow_always"),
            ("reject_once", "reject_once"),
            ("reject_always", "reject_always")
        ]
    );
    assert!(
        first["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("curl"),
        "{first}"
    );
    assert_eq!(first["toolCall"]["kind"], "execute", "{first}");

    // "Always" answers are recorded with their session (a restarted agent keeps them).
    let configs: Vec<String> = service
        .client_sessions("acp")
        .unwrap()
        .iter()
        .map(|s| s.config.clone())
        .collect();
    assert!(
        configs
            .iter()
            .any(|c| c.contains(r#""approvals":{"shell":true}"#)),
        "{configs:?}"
    );
    assert!(
        configs
            .iter()
            .any(|c| c.contains(r#""approvals":{"shell":false}"#)),
        "{configs:?}"
    );
    // The cancelled turn's run (the only turn of its session, like the feedback's) waits for
    // its answer: resumable.
    let runs: Vec<RunId> = service
        .client_sessions("acp")
        .unwrap()
        .iter()
        .map(|s| service.client_turns(&s.id).unwrap())
        .filter(|t| t.len() == 1)
        .map(|t| t[0].run.clone())
        .collect();
    assert_eq!(runs.len(), 2);
    let waiting = runs
        .iter()
        .filter(|r| service.run_state(r).unwrap().status == RunStatus::WaitingInput)
        .count();
    assert_eq!(waiting, 1);
}

fn a_push(answers: &Answers, answer: &'static str) {
    answers.lock().unwrap().push_back(answer);
}
