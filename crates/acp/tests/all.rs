//! `trellis acp` in process: the SDK's client side drives the agent over an in-memory
//! connection, with a service over `examples/inventory` whose models play a script.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, ErrorCode, UntypedMessage};
use serde_json::{Value, json};
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_core::Runtime;
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
use trellis_protocol::{RunId, RunStatus};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

/// BM25 only (no embedding model).
const CONFIG: &str = r#"
[index.embedding]
backend = "none"
"#;

fn is_queries(r: &ChatRequest) -> bool {
    r.response_format
        .as_ref()
        .is_some_and(|f| f.schema["properties"].get("queries").is_some())
}

/// Retrieval queries, then agent reports; each agent call takes `delay`.
fn script(delay: Duration) -> ScriptedProvider {
    ScriptedProvider::responding(move |r| {
        if is_queries(r) {
            Turn::Json(json!({ "queries": ["Inventory commit stock", "reserve release"] }))
        } else {
            std::thread::sleep(delay);
            Turn::Json(json!({
                "failure": false,
                "output": "Stock lives in memory; see ADR 0001.",
                "files_changed": [],
                "findings": []
            }))
        }
    })
}

struct Fixture {
    _ws: TempWorkspace,
    root: PathBuf,
    service: Arc<Service>,
}

/// A service over the workspace at `root` (its store opened afresh), as a new process
/// would start it.
fn service_at(root: &Path, delay: Duration) -> Arc<Service> {
    let store = Arc::new(Store::open_workspace(root, StoreOptions::default()).unwrap());
    let rt = Runtime::open(root, &[], &[], store).unwrap();
    rt.models.install("local", Arc::new(script(delay)));
    Service::start(Arc::new(rt), ServiceOptions::default())
}

fn fixture(delay: Duration) -> Fixture {
    let ws = trellis_test_support::example_repo("inventory", CONFIG).unwrap();
    let root = ws.path().canonicalize().unwrap();
    let service = service_at(&root, delay);
    Fixture {
        _ws: ws,
        root,
        service,
    }
}

fn agent(f: &Fixture) -> Arc<AcpAgent> {
    AcpAgent::with_service(
        f.service.clone(),
        AcpOptions {
            workflow: Some("architecture_discussion".into()),
        },
    )
}

type Updates = Arc<Mutex<Vec<Value>>>;

/// The `session/update`s received, as JSON.
fn kinds(updates: &Updates) -> Vec<String> {
    updates
        .lock()
        .unwrap()
        .iter()
        .map(|u| {
            u["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

async fn init(cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>) {
    cx.send_request(acp::InitializeRequest::new(ProtocolVersion::V1))
        .block_task()
        .await
        .unwrap();
}

async fn with_timeout<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), f)
        .await
        .expect("the test timed out")
}

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
            assert_ne!(c["promptCapabilities"]["embeddedContext"], true, "{c}");
            assert_ne!(c["mcpCapabilities"]["http"], true, "{c}");
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
    let u = updates.clone();
    let root = f.root.clone();
    let (stop, session) = with_timeout(
        Client
            .v1()
            .on_receive_notification(
                async move |n: acp::SessionNotification, _cx| {
                    u.lock().unwrap().push(serde_json::to_value(&n).unwrap());
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(agent(&f).connection(), async |cx| {
                init(&cx).await;
                let s = cx
                    .send_request(acp::NewSessionRequest::new(root.clone()))
                    .block_task()
                    .await?;
                let r = cx
                    .send_request(acp::PromptRequest::new(
                        s.session_id.clone(),
                        vec!["Why is stock kept in memory?".into()],
                    ))
                    .block_task()
                    .await?;
                Ok((r.stop_reason, s.session_id))
            }),
    )
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
                init(&cx).await;
                let s = cx
                    .send_request(acp::NewSessionRequest::new(root.clone()))
                    .block_task()
                    .await?;
                let r = cx
                    .send_request(acp::PromptRequest::new(
                        s.session_id.clone(),
                        vec!["Why is stock kept in memory?".into()],
                    ))
                    .block_task()
                    .await?;
                // The session takes another prompt after a cancelled one.
                let again = cx
                    .send_request(acp::PromptRequest::new(s.session_id.clone(), vec![]))
                    .block_task()
                    .await;
                assert_eq!(again.unwrap_err().code, ErrorCode::INVALID_PARAMS);
                Ok(r.stop_reason)
            }),
    )
    .await
    .unwrap();
    assert_eq!(stop, acp::StopReason::Cancelled);
    let thought: String = updates
        .lock()
        .unwrap()
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "agent_thought_chunk")
        .filter_map(|u| u["update"]["content"]["text"].as_str().map(str::to_owned))
        .collect();
    let run = thought
        .split("(run ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .expect("the turn names its run");
    let o = f
        .service
        .runtime()
        .inspect(&RunId::from_string(run))
        .unwrap();
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

/// The first prompt's text.
const ASK: &str = "Why is stock kept in memory?";

/// A session survives its agent: a new service over the same store (a restarted
/// `trellis acp`) lists it, `session/load` replays the prompt, plan, messages and summary
/// from the store, and the loaded session takes new prompts; `session/close` forgets it in
/// the process, `session/resume` brings it back without a replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_survive_a_restart_load_replays_list_resume_and_close() {
    let f = fixture(Duration::ZERO);
    let root = f.root.clone();
    let first: Updates = Arc::default();
    let u = first.clone();
    let session = with_timeout(
        Client
            .v1()
            .on_receive_notification(
                async move |n: acp::SessionNotification, _cx| {
                    u.lock().unwrap().push(serde_json::to_value(&n).unwrap());
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(agent(&f).connection(), async |cx| {
                init(&cx).await;
                let s = cx
                    .send_request(acp::NewSessionRequest::new(root.clone()))
                    .block_task()
                    .await?;
                let r = cx
                    .send_request(acp::PromptRequest::new(
                        s.session_id.clone(),
                        vec![ASK.into()],
                    ))
                    .block_task()
                    .await?;
                assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
                Ok(s.session_id)
            }),
    )
    .await
    .unwrap();
    f.service.shutdown().await;

    // "Restart": a new service and agent over the same workspace store.
    let service = service_at(&root, Duration::ZERO);
    let restarted = AcpAgent::with_service(service.clone(), AcpOptions::default());
    let replay: Updates = Arc::default();
    let u = replay.clone();
    let sid = session.clone();
    let replayed = with_timeout(
        Client
            .v1()
            .on_receive_notification(
                async move |n: acp::SessionNotification, _cx| {
                    u.lock().unwrap().push(serde_json::to_value(&n).unwrap());
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(restarted.connection(), async |cx| {
                init(&cx).await;
                // Unknown to this process until loaded.
                let e = cx
                    .send_request(acp::PromptRequest::new(sid.clone(), vec!["hi".into()]))
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(i32::from(e.code), -32002, "{e:?}");
                let list = cx
                    .send_request(acp::ListSessionsRequest::new().cwd(root.clone()))
                    .block_task()
                    .await?;
                let v = serde_json::to_value(&list).unwrap();
                assert_eq!(v["sessions"][0]["sessionId"], sid.0.as_ref(), "{v}");
                assert_eq!(v["sessions"][0]["title"], ASK, "{v}");
                assert_eq!(v["sessions"][0]["cwd"], root.display().to_string(), "{v}");
                assert!(
                    v["sessions"][0]["updatedAt"]
                        .as_str()
                        .unwrap()
                        .contains('T')
                );
                let elsewhere = cx
                    .send_request(acp::ListSessionsRequest::new().cwd(root.join("src")))
                    .block_task()
                    .await?;
                assert!(elsewhere.sessions.is_empty());
                // A wrong cwd or an unknown id.
                let e = cx
                    .send_request(acp::LoadSessionRequest::new(sid.clone(), root.join("src")))
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
                let e = cx
                    .send_request(acp::LoadSessionRequest::new("ses-nope", root.clone()))
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(i32::from(e.code), -32002, "{e:?}");

                cx.send_request(acp::LoadSessionRequest::new(sid.clone(), root.clone()))
                    .block_task()
                    .await?;
                let replayed = replay.lock().unwrap().len();
                assert!(replayed > 0);
                // Live again: it takes a prompt.
                let r = cx
                    .send_request(acp::PromptRequest::new(
                        sid.clone(),
                        vec!["And the reservations?".into()],
                    ))
                    .block_task()
                    .await?;
                assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
                // Closed: forgotten here; resumed: live again, nothing replayed.
                cx.send_request(acp::CloseSessionRequest::new(sid.clone()))
                    .block_task()
                    .await?;
                let e = cx
                    .send_request(acp::PromptRequest::new(sid.clone(), vec!["hi".into()]))
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(i32::from(e.code), -32002, "{e:?}");
                let before = replay.lock().unwrap().len();
                cx.send_request(acp::ResumeSessionRequest::new(sid.clone(), root.clone()))
                    .block_task()
                    .await?;
                assert_eq!(
                    replay.lock().unwrap().len(),
                    before,
                    "resume replays nothing"
                );
                let r = cx
                    .send_request(acp::PromptRequest::new(
                        sid.clone(),
                        vec!["Once more".into()],
                    ))
                    .block_task()
                    .await?;
                assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
                Ok(replayed)
            }),
    )
    .await
    .unwrap();

    // The replay (before the second prompt's updates): the prompt, the workflow, the
    // plan as it ended, the agents' text, the summary.
    let all = replay.lock().unwrap().clone();
    let first_live = first.lock().unwrap().clone();
    let kind = |u: &Value| {
        u["update"]["sessionUpdate"]
            .as_str()
            .unwrap_or("?")
            .to_owned()
    };
    assert_eq!(kind(&all[0]), "user_message_chunk", "{all:#?}");
    assert_eq!(all[0]["update"]["content"]["text"], ASK);
    assert!(all.iter().all(|u| u["sessionId"] == session.0.as_ref()));
    let replayed = &all[..replayed];
    let plan = replayed
        .iter()
        .find(|u| kind(u) == "plan")
        .expect("the plan is replayed");
    let entries = plan["update"]["entries"].as_array().unwrap();
    assert!(!entries.is_empty());
    assert!(entries.iter().all(|e| e["status"] == "completed"), "{plan}");
    let text = |us: &[Value]| -> String {
        us.iter()
            .filter(|u| kind(u) == "agent_message_chunk")
            .filter_map(|u| u["update"]["content"]["text"].as_str())
            .collect()
    };
    assert!(
        text(replayed).contains("Stock lives in memory"),
        "{replayed:#?}"
    );
    // What the live turn streamed as messages is what the replay shows.
    assert_eq!(text(replayed), text(&first_live));
    // The second turn was recorded too.
    let turns = service
        .runtime()
        .store
        .client_turns(session.0.as_ref())
        .unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[1].request, "And the reservations?");
}
