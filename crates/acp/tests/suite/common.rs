//! The fixture: a service over `examples/inventory` whose models play a script.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use serde_json::{Value, json};
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_core::Runtime;
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
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
    let store = Arc::new(Store::open_workspace(root, StoreOptions::default()).unwrap());
    let rt = Runtime::open(root, &[], &[], store).unwrap();
    rt.models.install("local", Arc::new(script));
    Service::start(Arc::new(rt), ServiceOptions::default())
}

pub fn fixture(delay: Duration) -> Fixture {
    let ws = trellis_test_support::example_repo("inventory", CONFIG).unwrap();
    let root = ws.path().canonicalize().unwrap();
    let service = service_at(&root, delay);
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

pub async fn init(cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>) {
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
