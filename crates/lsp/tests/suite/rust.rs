//! rust-analyzer on a two-file crate with known answers.

use std::path::Path;
use std::time::Duration;

use trellis_lsp::{LspClient, ServerSpec};

const LIB: &str = "pub mod shapes;

pub fn total_area(items: &[shapes::Square]) -> u32 {
    items.iter().map(|s| s.area()).sum()
}

pub fn scaled(s: &shapes::Square, by: u32) -> u32 {
    s.area() * by
}

pub fn doubled(s: &shapes::Square) -> u32 {
    scaled(s, 2)
}
";

const SHAPES: &str = "/// A square.
pub struct Square {
    pub side: u32,
}

impl Square {
    /// Its area, in square units.
    pub fn area(&self) -> u32 {
        self.side * self.side
    }
}
";

fn installed(program: &str) -> bool {
    let ok = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: {program} is not installed (rustup component add rust-analyzer)");
    }
    ok
}

fn krate(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"shapes\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIB).unwrap();
    std::fs::write(dir.join("src/shapes.rs"), SHAPES).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_analyzer_answers_definitions_references_hovers_signatures_and_diagnostics() {
    if !installed("rust-analyzer") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    krate(dir.path());
    let spec = ServerSpec::for_path(Path::new("src/lib.rs")).unwrap();
    let lsp = LspClient::start(&spec, dir.path()).await.unwrap();
    assert!(
        lsp.ready(Duration::from_secs(120)).await,
        "rust-analyzer did not finish indexing in 120 s"
    );

    // `area` as called in lib.rs (line 4, column of "area") is defined in shapes.rs line 8.
    let col = LIB.lines().nth(3).unwrap().find("area").unwrap() as u32 + 1;
    let defs = lsp.definition("src/lib.rs", 4, col).await.unwrap();
    assert_eq!(defs.len(), 1, "{defs:?}");
    assert_eq!(
        (defs[0].path.as_str(), defs[0].line),
        ("src/shapes.rs", 8),
        "{defs:?}"
    );

    // Its references: the declaration and the two calls.
    let refs = lsp.references("src/shapes.rs", 8, 12).await.unwrap();
    let at: Vec<(&str, u32)> = refs.iter().map(|p| (p.path.as_str(), p.line)).collect();
    assert_eq!(
        at,
        [("src/lib.rs", 4), ("src/lib.rs", 8), ("src/shapes.rs", 8)],
        "{refs:?}"
    );

    let hover = lsp
        .hover("src/lib.rs", 4, col)
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(hover.contains("fn area(&self) -> u32"), "{hover}");
    assert!(hover.contains("Its area, in square units."), "{hover}");

    // In `scaled(s, 2)` at the 2: the second parameter.
    let help = super::signature(&lsp, "src/lib.rs", 12, 15).await;
    assert_eq!(
        super::active(&help),
        ("fn scaled(s: &Square, by: u32) -> u32", 1, "by: u32"),
        "{help:?}"
    );

    // A type error written to disk: the file is sent again, the mismatch reported.
    std::fs::write(
        dir.path().join("src/lib.rs"),
        format!("{LIB}\npub fn wrong() -> u32 {{\n    \"four\"\n}}\n"),
    )
    .unwrap();
    let found = lsp
        .diagnostics("src/lib.rs", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(found.complete, "{found:?}");
    let mismatch = found
        .diagnostics
        .iter()
        .find(|d| d.code == "E0308")
        .unwrap_or_else(|| panic!("no E0308 in {found:?}"));
    assert_eq!(
        (mismatch.line, mismatch.column, mismatch.severity.as_str()),
        (16, 5, "error"),
        "{found:?}"
    );

    // Bad input: a path outside the workspace, a 0 line.
    assert!(lsp.definition("../outside.rs", 1, 1).await.is_err());
    assert!(lsp.hover("src/lib.rs", 0, 1).await.is_err());

    lsp.shutdown().await;
    assert!(
        !lsp.alive()
            || tokio::time::timeout(Duration::from_secs(5), async {
                while lsp.alive() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await
            .is_ok()
    );
}
