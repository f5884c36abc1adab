//! A served workspace over `examples/inventory` whose models play a script.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use trellis_core::Runtime;
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
use trellis_server::{AppState, Limits, Settings, Token, Workspace};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";
pub const HOST: &str = "127.0.0.1:8420";
pub const ANALYSIS: &str = "architectural_analysis";

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

fn is_channel(r: &ChatRequest) -> bool {
    r.messages
        .first()
        .is_some_and(|m| m.content.contains("discuss this repository"))
}

/// Retrieval queries, channel answers, agent reports.
pub fn answer(r: &ChatRequest) -> Turn {
    if is_queries(r) {
        Turn::Json(json!({ "queries": ["Inventory commit stock", "reserve release"] }))
    } else if is_channel(r) {
        Turn::Text("Stock is kept in memory (docs/adr/0001).".into())
    } else {
        Turn::Json(json!({
            "failure": false,
            "output": "Stock lives in memory; see ADR 0001.",
            "files_changed": [],
            "findings": []
        }))
    }
}

/// A workspace served by an app.
pub struct Served {
    pub _ws: TempWorkspace,

    pub state: AppState,
    pub app: Router,
}

impl Served {
    pub fn service(&self) -> &Arc<Service> {
        &self.state.workspaces()[0].service
    }
}

pub fn settings(hosts: Vec<String>, limits: Limits) -> Settings {
    Settings {
        token: Token::new(TOKEN),
        allowed_hosts: hosts,
        limits,
    }
}

fn runtime(repo: &Path, script: &ScriptedProvider) -> Arc<Runtime> {
    let store = Store::open_workspace(repo, StoreOptions::default()).unwrap();
    let rt = Runtime::open(repo, &[], &[], store).unwrap();
    rt.models().install("local", Arc::new(script.clone()));
    Arc::new(rt)
}

/// One workspace (id `inventory`) with the default limits and `HOST` allowed.
pub fn served() -> Served {
    served_with(vec![HOST.into()], Limits::default())
}

pub fn served_with(hosts: Vec<String>, limits: Limits) -> Served {
    let mut s = served_many(&["inventory"], hosts, limits);
    Served {
        _ws: s._ws.pop().unwrap(),
        state: s.state,
        app: s.app,
    }
}

/// Several workspaces (copies of `examples/inventory`) under the given ids.
pub struct ServedMany {
    pub _ws: Vec<TempWorkspace>,
    pub state: AppState,
    pub app: Router,
}

pub fn served_many(ids: &[&str], hosts: Vec<String>, limits: Limits) -> ServedMany {
    let mut temps = Vec::new();
    let mut workspaces = Vec::new();
    for id in ids {
        let ws = trellis_test_support::example_repo("inventory", CONFIG).unwrap();
        let root = ws.path().canonicalize().unwrap();
        let script = ScriptedProvider::responding(answer);
        let service = Service::start(runtime(&root, &script), ServiceOptions::default());
        workspaces.push(Workspace {
            id: (*id).to_owned(),
            root,
            service,
        });
        temps.push(ws);
    }
    let state = AppState::new(workspaces, settings(hosts, limits)).unwrap();
    let app = trellis_server::app(state.clone());
    ServedMany {
        _ws: temps,
        state,
        app,
    }
}

/// A request with the host and token set.
pub fn request(method: &str, uri: &str, body: Option<Value>) -> Request<Body> {
    let b = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    }
}

/// Sends `req` and returns the status and the JSON body (`Null` when not JSON).
pub async fn send(app: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

pub async fn get(app: &Router, uri: &str) -> (StatusCode, Value) {
    send(app, request("GET", uri, None)).await
}

pub async fn post(app: &Router, uri: &str, body: Value) -> (StatusCode, Value) {
    send(app, request("POST", uri, Some(body))).await
}

/// Starts an architecture discussion (no orchestrator call, no documentation stage) and
/// returns its id.
pub async fn start_run(app: &Router, request: &str) -> String {
    let (status, body) = post(
        app,
        "/api/workflows",
        json!({
            "request": request,
            "workflow": "architecture_discussion",
            "skip": ["decision_documentation"],
            "input": "approve",
        }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["workspace"], "inventory");
    body["run"].as_str().unwrap().to_owned()
}

/// Waits until `run` stops executing and everything it recorded is stored.
pub async fn finished(s: &Served, run: &str) {
    let svc = s.service();
    let id = svc.run_id(run).unwrap();
    svc.wait_run(&id).await;
    svc.flush().await.unwrap();
}

/// A workspace served on a free loopback port (its `Host` values allowed), with `limits`.
pub async fn listening(limits: Limits) -> (Served, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut hosts = trellis_server::loopback_hosts(addr.port());
    hosts.push(HOST.into()); // the in-process requests of `post` and `get`
    let s = served_with(hosts, limits);
    let state = s.state.clone();
    tokio::spawn(async move {
        trellis_server::serve(listener, state, std::future::pending())
            .await
            .unwrap();
    });
    (s, addr)
}
