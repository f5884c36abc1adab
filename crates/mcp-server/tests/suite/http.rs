//! `serve_http`: Trellis's own MCP client over Streamable HTTP with the token, and the
//! refusals (no token, a wrong one, a foreign Host, a foreign Origin).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_index::IndexConfig;
use trellis_mcp::{McpConfig, McpHub, ServerConfig, ServerState};
use trellis_mcp_server::{CodeServer, serve_http};
use trellis_tools::interaction::NonInteractive;
use trellis_tools::{Registry, ToolEnv, ToolsConfig, Workspace};

const TOKEN: &str = "test-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_with_the_token_and_refused_without_it() {
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let mut config = IndexConfig::default();
    config.embedding.backend = trellis_index::EmbeddingBackend::None;
    // No language server started ahead of use: these tests ask none.
    let lsp = trellis_lsp::LspConfig {
        warm_for_mcp: false,
        ..Default::default()
    };
    let server = CodeServer::open(ws.path(), config, &lsp).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve_http(
        server,
        listener,
        Arc::new(|t: &str| t == TOKEN),
        stop.clone(),
    ));
    let url = format!("http://127.0.0.1:{port}/mcp");

    // Trellis's MCP client, the token in a configured header.
    let hub = McpHub::new(
        ws.path(),
        &McpConfig {
            servers: [(
                "code".to_owned(),
                ServerConfig {
                    url: Some(url.clone()),
                    headers: [("Authorization".to_owned(), format!("Bearer {TOKEN}"))].into(),
                    ..ServerConfig::default()
                },
            )]
            .into(),
            startup_wait_secs: 0.0,
        },
    )
    .unwrap();
    hub.start();
    let all = hub.settled(Duration::from_secs(30)).await;
    assert_eq!(all[0].state, ServerState::Ready, "{all:?}");
    let tools = Arc::new(ToolsConfig::default());
    let env = ToolEnv::new(
        Workspace::new(ws.path(), &tools.secrets).unwrap(),
        tools,
        Arc::new(NonInteractive { approve: true }),
    );
    let mut registry = Registry::new().with_source(Arc::new(hub.clone()));
    registry.allow("agent", ["code__*"]);
    let r = registry
        .call(
            &env,
            "agent",
            "code__symbols",
            json!({"name": "commit", "exact": true}),
            CancellationToken::new(),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert!(r.content.contains("inventory.py"), "{r:?}");
    hub.stop(Duration::from_secs(5)).await;

    // Refusals, before any MCP is spoken.
    let http = trellis_fetch::client(Duration::from_secs(5), None).unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}});
    let post = |token: Option<&str>, host: Option<&str>, origin: Option<&str>| {
        let mut req = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init.to_string());
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if let Some(h) = host {
            req = req.header("host", h);
        }
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(post(None, None, None).await, 401);
    assert_eq!(post(Some("wrong-token-0123456789"), None, None).await, 401);
    let evil_host = post(Some(TOKEN), Some("evil.example:80"), None).await;
    assert!(
        (400..500).contains(&evil_host),
        "DNS rebinding: {evil_host}"
    );
    let evil_origin = post(Some(TOKEN), None, Some("http://evil.example")).await;
    assert!(
        (400..500).contains(&evil_origin),
        "cross-site: {evil_origin}"
    );
    let own = format!("http://127.0.0.1:{port}");
    assert_eq!(post(Some(TOKEN), None, Some(&own)).await, 200);
    assert_eq!(post(Some(TOKEN), None, None).await, 200);

    stop.cancel();
    task.await.unwrap().unwrap();
}
