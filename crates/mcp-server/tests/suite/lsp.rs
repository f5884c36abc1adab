//! The LSP-backed tools through MCP with known answers: rust-analyzer on a one-file crate,
//! pyright on `examples/inventory`, typescript-language-server on the TypeScript fixture of
//! `crates/lsp/tests` (each skipped, saying so, when its server is not installed).

use std::path::Path;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use trellis_index::IndexConfig;
use trellis_lsp::LspConfig;
use trellis_mcp_server::CodeServer;

type Client = RunningService<RoleClient, ()>;

/// `trellis mcp` on `root` with the language servers of `lsp`, and a client talking to it
/// over an in-memory pipe.
async fn connect(root: &Path, lsp: &LspConfig) -> Client {
    let mut config = IndexConfig::default();
    config.embedding.backend = trellis_index::EmbeddingBackend::None;
    let server = CodeServer::open(root, config, lsp).unwrap();
    let (a, b) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let running = server.serve(a).await.unwrap();
        let _ = running.waiting().await;
    });
    ().serve(b).await.unwrap()
}

/// A call's structured content, which must not be a tool error.
fn ok((err, value, content): (bool, Value, String)) -> Value {
    assert!(!err, "{content}");
    value
}

/// Calls `tool`: whether it failed, its structured content, its content (as debug text).
async fn call(client: &Client, tool: &'static str, args: Value) -> (bool, Value, String) {
    let Value::Object(map) = args else {
        panic!("arguments are an object")
    };
    let r = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(map))
        .await
        .unwrap();
    (
        r.is_error == Some(true),
        r.structured_content.unwrap_or(Value::Null),
        format!("{:?}", r.content),
    )
}

const LIB: &str = "/// Adds a posting to the balance.\npub fn post(balance: i64, amount: i64) -> i64 {\n    balance + amount\n}\n\npub fn month(postings: &[i64]) -> i64 {\n    postings.iter().fold(0, |b, p| post(b, *p))\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definition_references_hover_signature_and_diagnostics_by_position_and_by_symbol() {
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
    std::fs::write(root.join("src/lib.rs"), LIB).unwrap();
    std::fs::write(root.join("README.md"), "# Ledger\n").unwrap();
    let client = connect(root, &LspConfig::default()).await;
    let call = |tool, args| call(&client, tool, args);

    // `post` as called on line 7 is defined on line 2.
    let defs = ok(call(
        "definition",
        json!({"path": "src/lib.rs", "line": 7, "column": 37}),
    )
    .await);
    assert_eq!(defs["places"][0]["path"], "src/lib.rs", "{defs}");
    assert_eq!(defs["places"][0]["line"], 2, "{defs}");

    // By name: its declaration and its call.
    let refs = ok(call("references", json!({"symbol": "post"})).await);
    let lines: Vec<u64> = refs["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [2, 7], "{refs}");
    assert_eq!(refs["at"], "src/lib.rs:2:8", "{refs}");

    let hover = ok(call("hover", json!({"symbol": "post"})).await);
    let text = hover["text"].as_str().unwrap();
    assert!(
        text.contains("fn post(balance: i64, amount: i64) -> i64"),
        "{text}"
    );
    assert!(text.contains("Adds a posting"), "{text}");

    // At the `b` of `post(b, *p)`, on the name `post`, and by name (at its call): the
    // first parameter.
    for args in [
        json!({"path": "src/lib.rs", "line": 7, "column": 41}),
        json!({"path": "src/lib.rs", "line": 7, "column": 37}),
        json!({"symbol": "post"}),
    ] {
        let (err, sig, content) = call("signature", args.clone()).await;
        assert!(!err, "{args} {content:?}");
        assert_eq!(sig["at"], "src/lib.rs:7:41", "{sig}");
        let active = &sig["signatures"][sig["active_signature"].as_u64().unwrap() as usize];
        assert_eq!(
            active["label"], "fn post(balance: i64, amount: i64) -> i64",
            "{sig}"
        );
        assert_eq!(active["active_parameter"], 0, "{sig}");
        assert_eq!(active["active_parameter_label"], "balance: i64", "{sig}");
    }
    let (err, _, content) = call(
        "signature",
        json!({"path": "src/lib.rs", "line": 2, "column": 1}),
    )
    .await;
    assert!(
        err && content.contains("not in a call's arguments"),
        "{content:?}"
    );

    // Clean; then a type error written to disk is reported.
    let diags = ok(call("diagnostics", json!({"path": "src/lib.rs"})).await);
    assert_eq!(diags["errors"], 0, "{diags}");
    std::fs::write(
        root.join("src/lib.rs"),
        format!("{LIB}\npub fn wrong() -> i64 {{\n    \"four\"\n}}\n"),
    )
    .unwrap();
    let diags = ok(call("diagnostics", json!({"path": "src/lib.rs"})).await);
    assert_eq!(diags["complete"], true, "{diags}");
    let e0308: Vec<&Value> = diags["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "E0308")
        .collect();
    assert_eq!(e0308.len(), 1, "{diags}");
    assert_eq!(
        (&e0308[0]["line"], &e0308[0]["column"]),
        (&json!(11), &json!(5))
    );
    assert_eq!(e0308[0]["severity"], "error");

    // Bad input: tool errors, the server goes on.
    let (err, _, content) = call("definition", json!({"symbol": "no_such_fn"})).await;
    assert!(err && content.contains("no symbol named"), "{content:?}");
    let (err, _, content) = call("hover", json!({"path": "README.md", "line": 1})).await;
    assert!(err && content.contains("no language server"), "{content:?}");
    let (err, _, _) = call("references", json!({})).await;
    assert!(err);
    client.cancel().await.unwrap();
}

/// `[lsp.servers.python]` set to `pyright`, started with `trellis mcp` when `warm`.
fn pyright_config(pyright: &Path, warm: bool) -> LspConfig {
    LspConfig {
        servers: [(
            "python".to_owned(),
            trellis_lsp::ServerCommand {
                command: pyright.display().to_string(),
                args: vec!["--stdio".into()],
            },
        )]
        .into(),
        warm_for_mcp: warm,
        ..LspConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_python_server_answers_references_and_signatures_by_symbol() {
    let Some(pyright) = trellis_lsp::find("pyright-langserver") else {
        eprintln!("SKIPPED: pyright is not installed (scripts/setup.d/72-lsp.sh)");
        return;
    };
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let client = connect(ws.path(), &pyright_config(&pyright, true)).await;
    let refs = ok(call(&client, "references", json!({"symbol": "reserve"})).await);
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

    // By name: at its first call (`inv.reserve("apple", 3)`), the first parameter.
    let sig = ok(call(&client, "signature", json!({"symbol": "reserve"})).await);
    assert_eq!(sig["at"], "test_inventory.py:15:21", "{sig}");
    assert_eq!(
        sig["signatures"][0]["label"],
        "(sku: Unknown, quantity: Unknown) -> None"
    );
    assert_eq!(
        sig["signatures"][0]["active_parameter_label"],
        "sku: Unknown"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspaces_language_servers_start_with_the_server_unless_turned_off() {
    let Some(pyright) = trellis_lsp::find("pyright-langserver") else {
        eprintln!("SKIPPED: pyright is not installed (scripts/setup.d/72-lsp.sh)");
        return;
    };
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let open = |warm| {
        let mut config = IndexConfig::default();
        config.embedding.backend = trellis_index::EmbeddingBackend::None;
        CodeServer::open(ws.path(), config, &pyright_config(&pyright, warm)).unwrap()
    };
    // Turned off: nothing starts until a call needs it.
    let cold = open(false);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(cold.language_servers().await.is_empty());
    drop(cold);
    // On (the default): pyright starts with no call asking for it (inventory is Python).
    let warm = open(true);
    let started = std::time::Instant::now();
    loop {
        let running = warm.language_servers().await;
        if !running.is_empty() {
            assert_eq!(running, [pyright.display().to_string()]);
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "pyright was not started ahead of use"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// typescript-language-server found where the setup installs it (no `[lsp]` configuration),
/// on `crates/lsp/tests/fixtures/geometry`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_through_the_default_lookup() {
    let program = trellis_lsp::locate("typescript-language-server");
    if !std::process::Command::new(&program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!(
            "SKIPPED: typescript-language-server is not installed (scripts/setup.d/72-lsp.sh)"
        );
        return;
    }
    let ws = trellis_test_support::TempWorkspace::new("mcp-geometry").unwrap();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../lsp/tests/fixtures/geometry");
    trellis_test_support::copy_tree(&fixture, ws.path()).unwrap();
    let client = connect(ws.path(), &LspConfig::default()).await;
    let call = |tool, args| call(&client, tool, args);

    let defs = ok(call(
        "definition",
        json!({"path": "src/main.ts", "line": 4, "column": 15}),
    )
    .await);
    assert_eq!(defs["places"][0]["path"], "src/geometry.ts", "{defs}");
    assert_eq!(defs["places"][0]["line"], 8, "{defs}");

    let refs = ok(call("references", json!({"symbol": "translate"})).await);
    assert_eq!(refs["at"], "src/geometry.ts:8:17", "{refs}");
    let at: Vec<String> = refs["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("{}:{}", p["path"].as_str().unwrap(), p["line"]))
        .collect();
    assert_eq!(
        at,
        [
            "src/broken.ts:1",
            "src/broken.ts:4",
            "src/broken.ts:5",
            "src/geometry.ts:8",
            "src/main.ts:1",
            "src/main.ts:4"
        ],
        "{refs}"
    );

    let hover = ok(call("hover", json!({"symbol": "distance"})).await);
    let text = hover["text"].as_str().unwrap();
    assert!(
        text.contains("function distance(a: Point, b: Point): number"),
        "{text}"
    );

    // On the called name of `translate(origin, 3, 4)`: the first parameter; at the `4`, the
    // third.
    let sig = ok(call(
        "signature",
        json!({"path": "src/main.ts", "line": 4, "column": 15}),
    )
    .await);
    assert_eq!(sig["at"], "src/main.ts:4:25", "{sig}");
    assert_eq!(sig["signatures"][0]["active_parameter_label"], "p: Point");
    let sig = ok(call(
        "signature",
        json!({"path": "src/main.ts", "line": 4, "column": 36}),
    )
    .await);
    assert_eq!(
        sig["signatures"][0]["label"],
        "translate(p: Point, dx: number, dy: number): Point"
    );
    assert_eq!(sig["signatures"][0]["active_parameter"], 2, "{sig}");

    let diags = ok(call("diagnostics", json!({"path": "src/broken.ts"})).await);
    assert_eq!(
        (&diags["errors"], &diags["complete"]),
        (&json!(2), &json!(true))
    );
    let codes: Vec<(u64, &str)> = diags["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["line"].as_u64().unwrap(), d["code"].as_str().unwrap()))
        .collect();
    assert_eq!(codes, [(4, "2322"), (5, "2345")], "{diags}");

    // Bad input.
    let (err, _, content) = call(
        "diagnostics",
        json!({"path": "src/broken.ts", "wait_secs": 1000}),
    )
    .await;
    assert!(err && content.contains("wait_secs 1000"), "{content}");
    let (err, _, content) = call("diagnostics", json!({"path": "src/missing.ts"})).await;
    assert!(err && content.contains("no such file"), "{content}");
    let (err, _, content) = call("diagnostics", json!({"path": "../x.ts"})).await;
    assert!(
        err && content.contains("outside the workspace"),
        "{content}"
    );
    client.cancel().await.unwrap();
}
