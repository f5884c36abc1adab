//! The LSP-backed tools through MCP, against rust-analyzer on a two-file crate (skipped,
//! saying so, when rust-analyzer is not installed).

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use trellis_index::IndexConfig;
use trellis_mcp_server::CodeServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definition_references_and_hover_by_position_and_by_symbol() {
    if !std::process::Command::new("rust-analyzer")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("SKIPPED: rust-analyzer is not installed (scripts/setup.d/72-lsp.sh)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"ledger\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "/// Adds a posting to the balance.\npub fn post(balance: i64, amount: i64) -> i64 {\n    balance + amount\n}\n\npub fn month(postings: &[i64]) -> i64 {\n    postings.iter().fold(0, |b, p| post(b, *p))\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("README.md"), "# Ledger\n").unwrap();
    let mut config = IndexConfig::default();
    config.embedding.backend = trellis_index::EmbeddingBackend::None;
    let server = CodeServer::open(root, config, &Default::default()).unwrap();
    let (a, b) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = server.serve(a).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = ().serve(b).await.unwrap();
    let call = |tool: &'static str, args: Value| {
        let client = &client;
        async move {
            let Value::Object(map) = args else { panic!() };
            let r = client
                .call_tool(CallToolRequestParams::new(tool).with_arguments(map))
                .await
                .unwrap();
            (
                r.is_error == Some(true),
                r.structured_content.unwrap_or(Value::Null),
                r.content,
            )
        }
    };

    // `post` as called on line 7 is defined on line 2.
    let (err, defs, content) = call(
        "definition",
        json!({"path": "src/lib.rs", "line": 7, "column": 37}),
    )
    .await;
    assert!(!err, "{content:?}");
    assert_eq!(defs["places"][0]["path"], "src/lib.rs", "{defs}");
    assert_eq!(defs["places"][0]["line"], 2, "{defs}");

    // By name: its declaration and its call.
    let (err, refs, content) = call("references", json!({"symbol": "post"})).await;
    assert!(!err, "{content:?}");
    let lines: Vec<u64> = refs["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [2, 7], "{refs}");
    assert_eq!(refs["at"], "src/lib.rs:2:8", "{refs}");

    let (err, hover, content) = call("hover", json!({"symbol": "post"})).await;
    assert!(!err, "{content:?}");
    let text = hover["text"].as_str().unwrap();
    assert!(
        text.contains("fn post(balance: i64, amount: i64) -> i64"),
        "{text}"
    );
    assert!(text.contains("Adds a posting"), "{text}");

    // Bad input: tool errors, the server goes on.
    let (err, _, content) = call("definition", json!({"symbol": "no_such_fn"})).await;
    assert!(
        err && format!("{content:?}").contains("no symbol named"),
        "{content:?}"
    );
    let (err, _, content) = call("hover", json!({"path": "README.md", "line": 1})).await;
    assert!(
        err && format!("{content:?}").contains("no language server"),
        "{content:?}"
    );
    let (err, _, _) = call("references", json!({})).await;
    assert!(err);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_python_server_answers_references_by_symbol() {
    let Some(home) = std::env::var_os("HOME") else {
        return;
    };
    let pyright =
        std::path::PathBuf::from(home).join(".cache/trellis/lsp-venv/bin/pyright-langserver");
    if !pyright.exists() {
        eprintln!("SKIPPED: pyright is not installed (scripts/setup.d/72-lsp.sh)");
        return;
    }
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let mut config = IndexConfig::default();
    config.embedding.backend = trellis_index::EmbeddingBackend::None;
    let lsp = trellis_lsp::LspConfig {
        servers: [(
            "python".to_owned(),
            trellis_lsp::ServerCommand {
                command: pyright.display().to_string(),
                args: vec!["--stdio".into()],
            },
        )]
        .into(),
        ..trellis_lsp::LspConfig::default()
    };
    let server = CodeServer::open(ws.path(), config, &lsp).unwrap();
    let (a, b) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = server.serve(a).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = ().serve(b).await.unwrap();
    let r = client
        .call_tool(
            CallToolRequestParams::new("references")
                .with_arguments(json!({"symbol": "reserve"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let refs = r.structured_content.unwrap();
    let at: Vec<String> = refs["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("{}:{}", p["path"].as_str().unwrap(), p["line"]))
        .collect();
    assert_eq!(
        at,
        [
            "inventory.py:25",
            "test_inventory.py:15",
            "test_inventory.py:18",
            "test_inventory.py:23"
        ],
        "{refs}"
    );
    client.cancel().await.unwrap();
}
