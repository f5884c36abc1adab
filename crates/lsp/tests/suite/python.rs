//! pyright on the example repository (`examples/inventory`) with known answers (skipped,
//! saying so, when pyright is not installed: scripts/setup.d/72-lsp.sh puts it in a venv).

use std::path::{Path, PathBuf};
use std::time::Duration;

use trellis_lsp::{LspClient, ServerSpec};

/// pyright-langserver from the setup's venv, else from PATH.
fn pyright() -> Option<PathBuf> {
    trellis_lsp::find("pyright-langserver")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyright_answers_definitions_references_hovers_signatures_and_diagnostics() {
    let Some(program) = pyright() else {
        eprintln!("SKIPPED: pyright is not installed (scripts/setup.d/72-lsp.sh)");
        return;
    };
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let mut spec = ServerSpec::for_path(Path::new("inventory.py")).unwrap();
    spec.program = program.display().to_string();
    let lsp = LspClient::start(&spec, ws.path()).await.unwrap();
    assert!(lsp.ready(Duration::from_secs(60)).await);

    // `reserve` as called on test_inventory.py line 15 is defined at inventory.py line 25.
    let defs = lsp.definition("test_inventory.py", 15, 13).await.unwrap();
    let at: Vec<(&str, u32)> = defs.iter().map(|p| (p.path.as_str(), p.line)).collect();
    assert_eq!(at, [("inventory.py", 25)], "{defs:?}");

    // Its references: the declaration and the three calls in the tests.
    let refs = lsp.references("inventory.py", 25, 9).await.unwrap();
    let at: Vec<(&str, u32)> = refs.iter().map(|p| (p.path.as_str(), p.line)).collect();
    assert_eq!(
        at,
        [
            ("inventory.py", 25),
            ("test_inventory.py", 15),
            ("test_inventory.py", 18),
            ("test_inventory.py", 23)
        ],
        "{refs:?}"
    );

    let hover = lsp
        .hover("test_inventory.py", 15, 13)
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(hover.contains("reserve"), "{hover}");
    assert!(hover.contains("raises OutOfStock"), "{hover}");

    // In `inv.reserve("apple", 3)` at the 3: the second parameter.
    let help = super::signature(&lsp, "test_inventory.py", 15, 30).await;
    assert_eq!(
        super::active(&help),
        (
            "(sku: Unknown, quantity: Unknown) -> None",
            1,
            "quantity: Unknown"
        ),
        "{help:?}"
    );

    // A call with a missing argument: pyright's error, with its rule as the code.
    std::fs::write(
        ws.path().join("broken.py"),
        "from inventory import Inventory\n\nInventory().reserve(\"apple\")\n",
    )
    .unwrap();
    let found = super::diagnostics(&lsp, "broken.py").await;
    assert_eq!(
        super::brief(&found),
        [(3, 1, "error", "reportCallIssue", "Pyright")],
        "{found:?}"
    );
    assert!(
        found.diagnostics[0].message.contains("quantity"),
        "{found:?}"
    );
    lsp.shutdown().await;
}
