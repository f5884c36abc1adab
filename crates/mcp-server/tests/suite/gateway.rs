//! `trellis mcp --gateway` (`serve_gateway_http`) driven by rmcp's client over loopback HTTP,
//! with npm server-everything (scripts/setup.d/70-mcp-peers.sh) and a small notes server
//! (`crates/mcp/tests/peers/notes.mjs`, the official SDK) behind the hub: the listing within
//! the budget, `search_tools` and `list_changed`, forwarding, `execute_dag`, and a learned
//! pattern run ahead and used while a dangerous-named tool never runs ahead.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_core::gateway::{Gateway, GatewayTool};
use trellis_mcp::{McpConfig, ServerConfig};
use trellis_mcp_server::serve_gateway_http;
use trellis_store::{SpeculationOutcome, Store};
use trellis_tools::ToolsConfig;

const TOKEN: &str = "gateway-token-0123456789abcdef";

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/peers")
}

fn node(script: PathBuf, args: &[&str]) -> ServerConfig {
    assert!(
        script.is_file(),
        "{} is missing: run scripts/setup.d/70-mcp-peers.sh",
        script.display()
    );
    let mut all = vec![script.display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    ServerConfig {
        command: Some("node".into()),
        args: all,
        ..ServerConfig::default()
    }
}

fn everything() -> ServerConfig {
    node(
        peers().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        &["stdio"],
    )
}

fn notes() -> ServerConfig {
    node(peers().join("notes.mjs"), &[])
}

/// A gateway over `servers`, served on a free loopback port.
struct Served {
    url: String,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), trellis_mcp_server::Error>>,
    gateway: Arc<Gateway>,
}

async fn serve(
    dir: &Path,
    servers: Vec<(&str, ServerConfig)>,
    tools: ToolsConfig,
    store: Arc<Store>,
) -> Served {
    let mcp = McpConfig {
        servers: servers
            .into_iter()
            .map(|(n, s)| (n.to_owned(), s))
            .collect(),
        startup_wait_secs: 60.0,
    };
    let gateway = Arc::new(Gateway::new(dir, tools, mcp, Some(store)).unwrap());
    gateway.start().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve_gateway_http(
        gateway.clone(),
        listener,
        Arc::new(|t: &str| t == TOKEN),
        stop.clone(),
    ));
    Served {
        url: format!("http://127.0.0.1:{port}/mcp"),
        stop,
        task,
        gateway,
    }
}

impl Served {
    async fn shutdown(self) {
        self.stop.cancel();
        self.task.await.unwrap().unwrap();
        self.gateway.stop(Duration::from_secs(10)).await;
    }
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Counting {
    changed: Arc<AtomicUsize>,
}

impl ClientHandler for Counting {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.fetch_add(1, Ordering::SeqCst);
    }
}

type Client = RunningService<RoleClient, Counting>;

async fn connect(url: &str) -> (Client, Arc<AtomicUsize>) {
    let handler = Counting::default();
    let changed = handler.changed.clone();
    // trellis-fetch's client: reqwest with the crypto provider installed.
    let http = trellis_fetch::client(Duration::from_secs(30), None).unwrap();
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(TOKEN),
    );
    (handler.serve(transport).await.unwrap(), changed)
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap()
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn names(tools: &[Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

fn cost(t: &Tool) -> usize {
    GatewayTool {
        name: t.name.to_string(),
        description: t.description.as_deref().unwrap_or_default().to_owned(),
        input_schema: Value::Object((*t.input_schema).clone()),
        output_schema: None,
        annotations: None,
    }
    .cost()
}

fn store(dir: &Path) -> Arc<Store> {
    Store::open_workspace(dir, Default::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_lists_within_the_budget_finds_forwards_and_runs_plans() {
    let dir = tempfile::tempdir().unwrap();
    let mut tools = ToolsConfig::default();
    tools.gateway.budget_tokens = Some(1200);
    let served = serve(
        dir.path(),
        vec![("everything", everything())],
        tools,
        store(dir.path()),
    )
    .await;
    let (client, changed) = connect(&served.url).await;

    // Within the budget, the meta tools included (~500 tokens); some of server-everything's
    // tools left out (with no intent yet, they are taken by PageRank, then name, while they
    // fit: get-sum's 71 tokens do not fit after echo, get-annotated-message and get-env).
    let listed = client.list_all_tools().await.unwrap();
    let listed_names = names(&listed);
    listed.iter().for_each(super::assert_standard_formats);
    assert!(
        listed_names.contains(&"search_tools".to_owned()),
        "{listed_names:?}"
    );
    assert!(
        listed_names.contains(&"execute_dag".to_owned()),
        "{listed_names:?}"
    );
    let used: usize = listed.iter().map(cost).sum();
    assert!(used <= 1200, "{used} tokens: {listed_names:?}");
    assert!(listed.len() > 2, "some hub tools fit: {listed_names:?}");
    assert!(
        !listed_names.contains(&"everything__get-sum".to_owned()),
        "{listed_names:?}"
    );
    // Annotations pass through.
    let echo = listed
        .iter()
        .find(|t| t.name == "everything__echo")
        .expect("echo is listed");
    assert_eq!(
        echo.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );

    // A tool left out is not callable until found.
    let r = call(&client, "everything__get-sum", json!({"a": 2, "b": 3})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    assert!(text(&r).contains("search_tools"), "{r:?}");

    // search_tools finds it; the client is told its list changed; then it is listed and
    // callable, and the call reaches the real server.
    let r = call(
        &client,
        "search_tools",
        json!({"query": "add two numbers sum"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(text(&r).contains("everything__get-sum"), "{r:?}");
    for _ in 0..100 {
        if changed.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(changed.load(Ordering::SeqCst) > 0, "no list_changed");
    let relisted = names(&client.list_all_tools().await.unwrap());
    assert!(
        relisted.contains(&"everything__get-sum".to_owned()),
        "{relisted:?}"
    );
    let r = call(&client, "everything__get-sum", json!({"a": 2, "b": 3})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(text(&r).contains("The sum of 2 and 3 is 5"), "{r:?}");
    let r = call(
        &client,
        "everything__echo",
        json!({"message": "through the gateway"}),
    )
    .await;
    assert!(text(&r).contains("through the gateway"), "{r:?}");

    // execute_dag: the sum flows into the echo through a reference.
    let plan = json!({"steps": [
        {"id": "sum", "tool": "everything__get-sum", "args": {"a": 1, "b": 2}},
        {"id": "env", "tool": "everything__get-env", "args": {}},
        {"id": "say", "tool": "everything__echo", "args": {"message": "${sum}"}}
    ]});
    let r = call(&client, "execute_dag", plan).await;
    let report = text(&r);
    assert_ne!(r.is_error, Some(true), "{report}");
    assert!(
        report.starts_with("DAG of 3 steps in 2 layers."),
        "{report}"
    );
    assert!(
        report.contains("## say (everything__echo, layer 1): ok"),
        "{report}"
    );
    assert!(
        report.contains("Echo: The sum of 1 and 2 is 3."),
        "{report}"
    );

    // A plan that pauses for the client's decision keeps a checkpoint; replan_dag drops a
    // pending step, adds one that uses the finished step's output, and goes on.
    let plan = json!({
        "steps": [
            {"id": "sum", "tool": "everything__get-sum", "args": {"a": 20, "b": 22}},
            {"id": "later", "tool": "everything__echo", "args": {"message": "never"}, "depends_on": ["sum"]}
        ],
        "decide_after": ["sum"]
    });
    let r = call(&client, "execute_dag", plan).await;
    let paused = text(&r);
    assert!(paused.contains("Paused after `sum`"), "{paused}");
    let id = paused
        .split("DAG `")
        .nth(1)
        .and_then(|t| t.split('`').next())
        .expect("the paused plan's id")
        .to_owned();
    let r = call(
        &client,
        "replan_dag",
        json!({
            "dag_id": id,
            "remove": ["later"],
            "add": [{"id": "say", "tool": "everything__echo", "args": {"message": "${sum}"}}]
        }),
    )
    .await;
    let done = text(&r);
    assert_ne!(r.is_error, Some(true), "{done}");
    assert!(done.contains("Echo: The sum of 20 and 22 is 42."), "{done}");
    assert!(
        done.contains("## sum (everything__get-sum, layer 0): ok (earlier)"),
        "{done}"
    );
    assert!(!done.contains("never"), "{done}");

    // A tool the gateway does not have is a protocol error.
    let e = client
        .call_tool(CallToolRequestParams::new("nowhere__nothing"))
        .await;
    assert!(e.is_err(), "{e:?}");

    client.cancel().await.unwrap();
    served.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_pattern_runs_ahead_and_answers_the_next_call_but_a_dangerous_tool_never_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let mut tools = ToolsConfig::default();
    tools.gateway.budget_tokens = Some(100_000);
    let served = serve(
        dir.path(),
        vec![("everything", everything()), ("notes", notes())],
        tools,
        store.clone(),
    )
    .await;

    // The pattern, learned through the gateway: echo → get-env, find_note → delete_note
    // (which its server calls read-only), one session each time.
    const SESSIONS: usize = 24;
    for _ in 0..SESSIONS {
        let (client, _) = connect(&served.url).await;
        call(&client, "everything__echo", json!({"message": "hi"})).await;
        call(&client, "everything__get-env", json!({})).await;
        call(&client, "notes__find_note", json!({"id": "n1"})).await;
        call(&client, "notes__delete_note", json!({"id": "n1"})).await;
        client.cancel().await.unwrap();
    }
    let used = |store: &Store| {
        store
            .speculations(1000)
            .unwrap()
            .iter()
            .filter(|s| {
                s.context == "gateway"
                    && s.outcome == SpeculationOutcome::Used
                    && s.tools == ["everything__get-env"]
            })
            .count()
    };
    let before = used(&*store);

    // A new session: after echo, get-env runs ahead; the same call is answered from it.
    let (client, _) = connect(&served.url).await;
    call(&client, "everything__echo", json!({"message": "hi"})).await;
    let r = call(&client, "everything__get-env", json!({})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(!text(&r).is_empty(), "{r:?}");
    assert_eq!(used(&*store), before + 1, "the call was answered ahead");

    // After find_note, delete_note is predicted just as strongly, but never runs ahead.
    call(&client, "notes__find_note", json!({"id": "n2"})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = call(&client, "notes__find_note", json!({"id": "n3"})).await;
    assert!(
        text(&r).contains(&format!("delete_note ran {SESSIONS} times")),
        "{r:?}"
    );
    let all = store.speculations(1000).unwrap();
    assert!(
        all.iter()
            .all(|s| !s.tools.iter().any(|t| t == "notes__delete_note")),
        "{all:?}"
    );
    let graph = trellis_toolgraph::ToolGraph::load(&*store).unwrap();
    let edge = graph
        .edge("notes__find_note", "notes__delete_note")
        .unwrap();
    assert!(edge.confidence >= 0.92, "{edge:?}");

    client.cancel().await.unwrap();
    served.shutdown().await;
}
