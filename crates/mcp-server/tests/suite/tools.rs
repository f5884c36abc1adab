//! Every tool against `examples/inventory` with known answers, and bad input.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use trellis_index::IndexConfig;
use trellis_mcp_server::CodeServer;
use trellis_test_support::TempWorkspace;

struct Session {
    _ws: TempWorkspace,
    client: RunningService<RoleClient, ()>,
}

async fn session() -> Session {
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let mut config = IndexConfig::default();
    config.embedding.backend = trellis_index::EmbeddingBackend::None;
    // No language server started ahead of use: these tests ask none.
    let lsp = trellis_lsp::LspConfig {
        warm_for_mcp: false,
        ..Default::default()
    };
    let server = CodeServer::open(ws.path(), config, &lsp).unwrap();
    let (a, b) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = server.serve(a).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = ().serve(b).await.unwrap();
    Session { _ws: ws, client }
}

impl Session {
    async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(map) = args else { panic!() };
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(map))
            .await
            .unwrap()
    }

    async fn ok(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args).await;
        assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
        r.structured_content.unwrap_or(Value::Null)
    }

    async fn err(&self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args).await;
        assert_eq!(r.is_error, Some(true), "{tool}: {r:?}");
        serde_json::to_string(&r.content).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_typed_read_only_and_answer_from_the_index() {
    let s = session().await;
    let tools = s.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for want in [
        "search",
        "symbols",
        "symbol_at",
        "repo_map",
        "ast_context_map",
        "doc_sections",
        "definition",
        "references",
        "hover",
        "signature",
        "diagnostics",
    ] {
        assert!(names.contains(&want), "{names:?}");
    }
    for t in &tools {
        assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{t:?}");
        let a = t.annotations.as_ref().unwrap();
        assert_eq!(a.read_only_hint, Some(true), "{t:?}");
        if t.name != "ast_context_map" {
            assert!(t.output_schema.is_some(), "{t:?}");
        }
        super::assert_standard_formats(t);
    }

    // Where is `reserve` defined?
    let found = s
        .ok("symbols", json!({"name": "reserve", "exact": true}))
        .await;
    let first = &found["symbols"][0];
    assert_eq!(first["path"], "inventory.py", "{found}");
    assert_eq!(first["start_line"], 25, "{found}");
    assert_eq!(first["kind"], "method", "{found}");
    // By part of a name, kind and path.
    let classes = s
        .ok(
            "symbols",
            json!({"name": "inventory", "kind": "class", "path": "inventory.py"}),
        )
        .await;
    let names: Vec<&str> = classes["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Inventory"], "{classes}");

    // Line 27 is inside Inventory.reserve, inside Inventory.
    let at = s
        .ok("symbol_at", json!({"path": "inventory.py", "line": 27}))
        .await;
    assert_eq!(at["symbols"][0]["name"], "reserve", "{at}");
    assert_eq!(at["symbols"][1]["name"], "Inventory", "{at}");

    let hits = s
        .ok(
            "search",
            json!({"query": "reserve stock for an order", "budget_tokens": 800}),
        )
        .await;
    assert!(
        hits["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["path"] == "inventory.py"),
        "{hits}"
    );
    assert!(hits["used_tokens"].as_u64().unwrap() <= 800, "{hits}");

    let docs = s
        .ok(
            "doc_sections",
            json!({"query": "why is stock kept in memory"}),
        )
        .await;
    assert!(
        docs["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["path"].as_str().unwrap().contains("adr/0001")),
        "{docs}"
    );

    let map = s
        .ok("repo_map", json!({"files": ["test_inventory.py"]}))
        .await;
    assert!(
        map["text"].as_str().unwrap().contains("inventory.py"),
        "{map}"
    );

    let ast = s
        .call("ast_context_map", json!({"paths": ["inventory.py"]}))
        .await;
    assert_ne!(ast.is_error, Some(true), "{ast:?}");
    assert!(
        serde_json::to_string(&ast.content)
            .unwrap()
            .contains("reserve")
    );
    s.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_tool_error_or_a_json_rpc_error_never_a_crash() {
    let s = session().await;
    assert!(
        s.err("symbol_at", json!({"path": "../etc/passwd", "line": 1}))
            .await
            .contains("outside the workspace")
    );
    assert!(
        s.err("symbol_at", json!({"path": "/etc/passwd", "line": 1}))
            .await
            .contains("outside the workspace")
    );
    assert!(
        s.err("symbol_at", json!({"path": "nope.py", "line": 3}))
            .await
            .contains("no such file")
    );
    assert!(
        s.err("symbols", json!({"name": "x", "kind": "spaceship"}))
            .await
            .contains("unknown kind")
    );
    assert!(
        s.err("symbols", json!({"name": "x", "limit": 100000}))
            .await
            .contains("limit")
    );
    assert!(
        s.err("search", json!({"query": "x".repeat(10_000)}))
            .await
            .contains("at most")
    );
    assert!(
        s.err("search", json!({"query": "x", "budget_tokens": 0}))
            .await
            .contains("out of range")
    );
    // Wrong types and unknown tools: JSON-RPC errors.
    let wrong = s
        .client
        .call_tool(
            CallToolRequestParams::new("symbol_at")
                .with_arguments(json!({"path": 3, "line": "x"}).as_object().unwrap().clone()),
        )
        .await;
    assert!(wrong.is_err() || wrong.unwrap().is_error == Some(true));
    let unknown = s
        .client
        .call_tool(CallToolRequestParams::new("no_such_tool"))
        .await;
    assert!(unknown.is_err() || unknown.unwrap().is_error == Some(true));
    // Still serving.
    s.ok("symbols", json!({"name": "release"})).await;
    s.client.cancel().await.unwrap();
}
