//! The repository's language servers for agents (`lsp_integration`: `find_definition`,
//! `get_references`, `get_signature`) and for adaptive retrieval (the `lsp_tools` source), with
//! pyright on the inventory example (skipped, saying so, when pyright is not installed:
//! scripts/setup.d/72-lsp.sh puts it in a venv).

use std::path::PathBuf;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_agents::Overrides;
use trellis_agents::retrieval::{Source, SourceRequest};
use trellis_core::InputMode;
use trellis_core::code_intel::LspSource;
use trellis_index::strategy::ContextSource;
use trellis_index::{Index, IndexConfig, RetrievalScope, UpdateOptions};
use trellis_protocol::RunStatus;
use trellis_test_support::scripted::ScriptedProvider;

use super::common::*;

/// A one-stage workflow whose strategy turns the language server on for two of its tools
/// and names `lsp_tools` as an on-demand source.
const WORKFLOW: &str = r#"
metadata:
  name: "lsp_check"
  description: "One code stage with language-server tools"
retrieval_strategy_config:
  enabled: true
  ast_parsing:
    enabled: true
  lsp_integration:
    enabled: true
    execution: "on_demand"
    tools: [find_definition, get_references]
  rag_strategy:
    sources:
      - name: "codebase_semantic_search"
        priority: "HIGH"
      - name: "lsp_tools"
        execution_timing: "on_demand"
        priority: "HIGH"
stages:
  - stage_id: 1
    name: "code_generation"
    parallel_agents:
      - agent: "code_agent"
"#;

fn config(pyright: &std::path::Path) -> String {
    format!(
        "{CONFIG}\n[lsp.servers.python]\ncommand = {:?}\nargs = [\"--stdio\"]\n",
        pyright.display().to_string()
    )
}

fn pyright() -> Option<PathBuf> {
    let found = trellis_lsp::find("pyright-langserver");
    if found.is_none() {
        eprintln!("SKIPPED: pyright is not installed (scripts/setup.d/72-lsp.sh)");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_get_the_granted_language_server_tools_and_their_answers() {
    let Some(pyright) = pyright() else { return };
    let ws = inventory(&config(&pyright));
    let repo = path_of(&ws);
    std::fs::create_dir_all(repo.join(".trellis/workflows")).unwrap();
    std::fs::write(repo.join(".trellis/workflows/lsp_check.yaml"), WORKFLOW).unwrap();
    let script = ScriptedProvider::new([
        queries(),
        tool("get_references", json!({ "symbol": "reserve" })),
        tool(
            "find_definition",
            json!({ "path": "test_inventory.py", "line": 15, "column": 13 }),
        ),
        // Not in the workflow's `lsp_integration.tools`.
        tool("get_signature", json!({ "symbol": "reserve" })),
        tool("get_references", json!({ "symbol": "no_such_symbol" })),
        tool(
            "find_definition",
            json!({ "path": "../outside.py", "line": 1 }),
        ),
        report(false, "looked around"),
    ]);
    let rt = runtime(&repo, &script);
    let overrides = Overrides {
        workflow: Some("lsp_check".into()),
        ..Overrides::default()
    };
    let (orchestration, plan) = rt
        .plan(
            "Where is reserve used?",
            &overrides,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let (handle, _ctx) = rt
        .start(&plan, &orchestration, options(InputMode::Approve))
        .unwrap();
    let outcome = handle.wait().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Succeeded, "{:?}", outcome.error);
    assert_eq!(script.remaining(), 0);

    let requests = script.requests();
    let agent = requests
        .iter()
        .find(|r| r.tools.iter().any(|t| t.name == "get_references"))
        .expect("the code agent was offered get_references");
    let offered: Vec<&str> = agent.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(offered.contains(&"find_definition"), "{offered:?}");
    assert!(!offered.contains(&"get_signature"), "{offered:?}");

    // Every tool result, in call order, as the model read it.
    let last = requests.last().unwrap();
    let results: Vec<&str> = last
        .messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(results.len(), 5, "{results:#?}");
    // The declaration and the three calls in the tests.
    for place in [
        "inventory.py:25:",
        "test_inventory.py:15:",
        "test_inventory.py:18:",
        "test_inventory.py:23:",
    ] {
        assert!(results[0].contains(place), "{place} in {}", results[0]);
    }
    assert!(
        results[0].starts_with("inventory.py:25:9 (4 places)"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("inventory.py:25:"), "{}", results[1]);
    assert!(
        results[2].contains("unknown tool `get_signature`"),
        "{}",
        results[2]
    );
    assert!(
        results[3].contains("no symbol named `no_such_symbol`"),
        "{}",
        results[3]
    );
    assert!(results[4].contains("refused"), "{}", results[4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lsp_tools_source_returns_the_definition_and_uses_of_named_symbols() {
    let Some(pyright) = pyright() else { return };
    let ws = inventory(&config(&pyright));
    let repo = path_of(&ws);
    let script = ScriptedProvider::new(Vec::new());
    let rt = runtime(&repo, &script);
    let mut index_config: IndexConfig = rt.index_config().clone();
    index_config.embedding.backend = trellis_index::EmbeddingBackend::None;
    Index::open(&repo, index_config)
        .unwrap()
        .update(&UpdateOptions::default())
        .unwrap();
    let source = LspSource::new(rt.code_intel());
    let request = SourceRequest {
        spec: ContextSource {
            source: "lsp_tools".into(),
            strategy: None,
            indexing: None,
            priority: Some("HIGH".into()),
            execution_timing: Some("on_demand".into()),
            trigger_stages: Vec::new(),
        },
        scope: std::sync::Arc::new(RetrievalScope::code()),
        queries: vec![
            "OutOfStock raised by `reserve` in test_reserve_holds_stock".into(),
            "why does stock grow".into(),
        ],
        limit: 20,
    };
    let lists = source
        .search(request, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(lists.len(), 2);
    let places: Vec<(String, u32, u32, String)> = lists[0]
        .iter()
        .map(|i| (i.path.clone(), i.start_line, i.end_line, i.kind.clone()))
        .collect();
    // `reserve`'s declaration (line 25) and its three uses in the tests, with three lines
    // around each; `OutOfStock`'s too.
    for want in [
        ("inventory.py".to_owned(), 22, 28, "definition".to_owned()),
        (
            "test_inventory.py".to_owned(),
            12,
            18,
            "reference".to_owned(),
        ),
    ] {
        assert!(places.contains(&want), "{want:?} in {places:?}");
    }
    assert!(
        lists[0]
            .iter()
            .any(|i| i.symbol.as_deref() == Some("OutOfStock") && i.path == "inventory.py"),
        "{places:?}"
    );
    // `reserve`'s signature from the server (hover), not lines of the file.
    let sig = lists[0]
        .iter()
        .find(|i| i.kind == "signature" && i.symbol.as_deref() == Some("reserve"))
        .unwrap_or_else(|| panic!("no signature of reserve in {places:?}"));
    assert_eq!((sig.path.as_str(), sig.start_line), ("inventory.py", 0));
    assert!(
        sig.text.contains("reserve") && sig.text.contains("sku"),
        "{}",
        sig.text
    );
    assert!(
        sig.note.as_deref().unwrap().contains("line 25"),
        "{:?}",
        sig.note
    );
    for item in lists[0].iter().filter(|i| i.kind != "signature") {
        let file = std::fs::read_to_string(repo.join(&item.path)).unwrap();
        let lines: Vec<&str> = file.lines().collect();
        assert_eq!(
            item.text,
            lines[item.start_line as usize - 1..item.end_line as usize].join("\n")
        );
    }
    // A query naming no known symbol finds nothing (and starts no search for it).
    assert!(lists[1].is_empty(), "{:?}", lists[1]);
}
