//! The client's MCP servers: a stdio server named in `session/new` (npm server-everything,
//! installed by scripts/setup.d/70-mcp-peers.sh) joins the workspace's MCP hub, and an agent
//! of the next prompt calls its tool; the answer reaches the model.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use serde_json::json;
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_llm::Role;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

fn everything() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../mcp/tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_clients_mcp_server_gives_agents_its_tools() {
    let entry = everything();
    assert!(
        entry.exists(),
        "{} is missing: run scripts/setup.d/70-mcp-peers.sh",
        entry.display()
    );
    let ws = trellis_test_support::example_repo("inventory", CONFIG).unwrap();
    let root = ws.path().canonicalize().unwrap();
    let model = ScriptedProvider::responding(|r| {
        let sum = r.tools.iter().any(|t| t.name == "everything__get-sum");
        match r.messages.last() {
            _ if is_queries(r) => Turn::Json(json!({ "queries": ["stock"] })),
            Some(m) if m.role == Role::Tool => Turn::Json(json!({
                "failure": false, "output": format!("the server said: {}", m.content),
                "files_changed": [], "findings": []
            })),
            _ if sum => Turn::ToolCall {
                name: "everything__get-sum".into(),
                arguments: json!({"a": 2, "b": 40}),
            },
            _ => Turn::Json(json!({
                "failure": false, "output": "no sum tool", "files_changed": [], "findings": []
            })),
        }
    });
    let service = service_with(&root, model);
    let agent = AcpAgent::with_service(
        service.clone(),
        AcpOptions {
            workflow: Some("architecture_discussion".into()),
        },
    );
    let text: Arc<Mutex<String>> = Arc::default();
    let t = text.clone();
    let init = with_timeout(
        Client
            .v1()
            .on_receive_notification(
                async move |n: acp::SessionNotification, _cx| {
                    let v = serde_json::to_value(&n).unwrap();
                    if v["update"]["sessionUpdate"] == "agent_message_chunk" {
                        t.lock()
                            .unwrap()
                            .push_str(v["update"]["content"]["text"].as_str().unwrap_or_default());
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |_req: acp::RequestPermissionRequest, responder, _cx| {
                    responder.respond(acp::RequestPermissionResponse::new(
                        acp::RequestPermissionOutcome::Selected(
                            acp::SelectedPermissionOutcome::new("allow_once"),
                        ),
                    ))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(agent.connection(), async |cx| {
                let init = cx
                    .send_request(acp::InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let server: acp::McpServer = serde_json::from_value(json!({
                    "name": "everything", "command": "node",
                    "args": [entry.display().to_string(), "stdio"], "env": []
                }))
                .unwrap();
                let s = cx
                    .send_request(
                        acp::NewSessionRequest::new(root.clone()).mcp_servers(vec![server]),
                    )
                    .block_task()
                    .await?;
                // An SSE server is refused: not advertised, not supported.
                let sse: acp::McpServer = serde_json::from_value(json!({
                    "type": "sse", "name": "s", "url": "http://127.0.0.1:9/sse", "headers": []
                }))
                .unwrap();
                let e = cx
                    .send_request(acp::NewSessionRequest::new(root.clone()).mcp_servers(vec![sse]))
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(e.code, agent_client_protocol::ErrorCode::INVALID_PARAMS);
                let r = cx
                    .send_request(acp::PromptRequest::new(
                        s.session_id,
                        vec!["What is 2 + 40?".into()],
                    ))
                    .block_task()
                    .await?;
                assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
                Ok(serde_json::to_value(&init).unwrap())
            }),
    )
    .await
    .unwrap();
    assert_eq!(
        init["agentCapabilities"]["mcpCapabilities"]["http"], true,
        "{init}"
    );
    assert_ne!(
        init["agentCapabilities"]["mcpCapabilities"]["sse"], true,
        "{init}"
    );
    assert!(service.mcp_servers().contains(&"everything".to_owned()));
    let text = text.lock().unwrap().clone();
    assert!(
        text.contains("the server said") && text.contains("42"),
        "{text}"
    );
    service.shutdown().await;
}
