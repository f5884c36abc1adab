//! The fixture: a service over `examples/inventory` whose models play a script.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{self, ConnectionTo};
use agent_client_protocol::{Agent, Client, HandleDispatchFrom};
use serde_json::{Value, json};
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_core::Runtime;
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
use trellis_protocol::RunId;
use trellis_store::{Store, StoreOptions};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

/// BM25 only (no embedding model); the `local` profile (the scripted model here) has an
/// 8192-token context window, which `usage_update`s report.
pub const CONFIG: &str = r#"
[index.embedding]
backend = "none"

[models.profiles.local]
context = 8192
"#;

pub fn is_queries(r: &ChatRequest) -> bool {
    r.response_format
        .as_ref()
        .is_some_and(|f| f.schema["properties"].get("queries").is_some())
}

/// Retrieval queries, then agent reports; each agent call takes `delay`.
pub fn script(delay: Duration) -> ScriptedProvider {
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

pub struct Fixture {
    pub _ws: TempWorkspace,
    pub root: PathBuf,
    pub service: Arc<Service>,
}

/// A service over the workspace at `root` (its store opened afresh), as a new process
/// would start it.
pub fn service_at(root: &Path, delay: Duration) -> Arc<Service> {
    service_with(root, script(delay))
}

/// A service over the workspace at `root` whose models play `script`.
pub fn service_with(root: &Path, script: ScriptedProvider) -> Arc<Service> {
    let store = Store::open_workspace(root, StoreOptions::default()).unwrap();
    let rt = Runtime::open(root, &[], &[], store).unwrap();
    rt.models().install("local", Arc::new(script));
    Service::start(Arc::new(rt), ServiceOptions::default())
}

/// A temporary copy of `examples/inventory` with [`CONFIG`], and its canonical root.
pub fn workspace() -> (TempWorkspace, PathBuf) {
    let ws = trellis_test_support::example_repo("inventory", CONFIG).unwrap();
    let root = ws.path().canonicalize().unwrap();
    (ws, root)
}

/// A service over a fresh workspace whose agent calls take `delay` ([`script`]).
pub fn fixture(delay: Duration) -> Fixture {
    fixture_with(script(delay))
}

/// A service over a fresh workspace whose models play `script`.
pub fn fixture_with(script: ScriptedProvider) -> Fixture {
    let (ws, root) = workspace();
    let service = service_with(&root, script);
    Fixture {
        _ws: ws,
        root,
        service,
    }
}

pub fn agent(f: &Fixture) -> Arc<AcpAgent> {
    AcpAgent::with_service(
        f.service.clone(),
        AcpOptions {
            workflow: Some("architecture_discussion".into()),
        },
    )
}

pub type Updates = Arc<Mutex<Vec<Value>>>;

/// The `session/update`s received, as JSON.
pub fn kinds(updates: &Updates) -> Vec<String> {
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

pub async fn init(cx: &ConnectionTo<Agent>) {
    cx.send_request(acp::InitializeRequest::new(ProtocolVersion::V1))
        .block_task()
        .await
        .unwrap();
}

pub async fn with_timeout<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), f)
        .await
        .expect("the test timed out")
}

/// A client that records every `session/update` it receives in `updates`, as JSON.
pub fn recording(updates: &Updates) -> v1::Builder<Client, impl HandleDispatchFrom<Agent> + use<>> {
    let u = updates.clone();
    Client.v1().on_receive_notification(
        async move |n: acp::SessionNotification, _cx| {
            u.lock().unwrap().push(serde_json::to_value(&n).unwrap());
            Ok(())
        },
        agent_client_protocol::on_receive_notification!(),
    )
}

/// The permission requests a client received, as JSON.
pub type Asked = Arc<Mutex<Vec<Value>>>;

/// [`recording`], answering every permission request with option `option` and recording the
/// requests in `asked`.
pub fn answering(
    updates: &Updates,
    asked: &Asked,
    option: &'static str,
) -> v1::Builder<Client, impl HandleDispatchFrom<Agent> + use<>> {
    let q = asked.clone();
    recording(updates).on_receive_request(
        async move |req: acp::RequestPermissionRequest, responder, _cx| {
            q.lock().unwrap().push(serde_json::to_value(&req).unwrap());
            responder.respond(selected(option))
        },
        agent_client_protocol::on_receive_request!(),
    )
}

/// Extension method `method` of `session` with `params` (their `sessionId` added): its
/// result.
pub async fn ext(
    cx: &ConnectionTo<Agent>,
    method: &str,
    session: &acp::SessionId,
    params: Value,
) -> Result<Value, agent_client_protocol::Error> {
    let mut p = json!({"sessionId": session.0.as_ref()});
    if let (Some(p), Value::Object(more)) = (p.as_object_mut(), params) {
        p.extend(more);
    }
    cx.send_request(agent_client_protocol::UntypedMessage::new(method, p)?)
        .block_task()
        .await
}

/// `initialize`, then a new session in `cwd`: its id.
pub async fn open_session(
    cx: &ConnectionTo<Agent>,
    cwd: &Path,
) -> Result<acp::SessionId, agent_client_protocol::Error> {
    init(cx).await;
    new_session(cx, cwd).await
}

/// `initialize` from a client that takes the Trellis extension `methods` (listed in its
/// capabilities' `_meta`).
pub async fn initialize_taking(
    cx: &ConnectionTo<Agent>,
    methods: &[&str],
) -> Result<(), agent_client_protocol::Error> {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "trellis.dev/extensions".into(),
        json!({ "methods": methods }),
    );
    cx.send_request(
        acp::InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(acp::ClientCapabilities::new().meta(meta)),
    )
    .block_task()
    .await?;
    Ok(())
}

/// A new session in `cwd`: its id.
pub async fn new_session(
    cx: &ConnectionTo<Agent>,
    cwd: &Path,
) -> Result<acp::SessionId, agent_client_protocol::Error> {
    Ok(cx
        .send_request(acp::NewSessionRequest::new(cwd))
        .block_task()
        .await?
        .session_id)
}

/// A prompt of one text block to `session`.
pub async fn prompt(
    cx: &ConnectionTo<Agent>,
    session: &acp::SessionId,
    text: &str,
) -> Result<acp::PromptResponse, agent_client_protocol::Error> {
    cx.send_request(acp::PromptRequest::new(session.clone(), vec![text.into()]))
        .block_task()
        .await
}

/// Sets config option `id` of `session` to `value`.
pub async fn set_option(
    cx: &ConnectionTo<Agent>,
    session: &acp::SessionId,
    id: &str,
    value: &str,
) -> Result<acp::SetSessionConfigOptionResponse, agent_client_protocol::Error> {
    cx.send_request(acp::SetSessionConfigOptionRequest::new(
        session.clone(),
        id.to_owned(),
        value,
    ))
    .block_task()
    .await
}

/// The answer to a permission request that selects option `id`.
pub fn selected(id: &str) -> acp::RequestPermissionResponse {
    acp::RequestPermissionResponse::new(acp::RequestPermissionOutcome::Selected(
        acp::SelectedPermissionOutcome::new(id.to_owned()),
    ))
}

/// The run a turn named in its thoughts (`Workflow … (run <id>).`).
pub fn turn_run(updates: &Updates) -> RunId {
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
    RunId::from_string(run)
}
