//! typescript-language-server 6.0.2 with typescript 6.0.3 on `tests/fixtures/geometry` with
//! known answers, and the pool's restart after a crash and idle shutdown (skipped, saying so,
//! when the server is not installed: scripts/setup.d/72-lsp.sh puts it in
//! ~/.cache/trellis/lsp-node).

use std::path::{Path, PathBuf};
use std::time::Duration;

use trellis_lsp::{LspClient, LspConfig, LspPool, ServerCommand, ServerSpec};
use trellis_test_support::TempWorkspace;

/// The installed typescript-language-server (PATH, else the setup's install dir).
pub fn typescript_language_server() -> Option<PathBuf> {
    let program = trellis_lsp::locate("typescript-language-server");
    let ok = std::process::Command::new(&program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "SKIPPED: typescript-language-server is not installed (scripts/setup.d/72-lsp.sh)"
        );
    }
    ok.then(|| PathBuf::from(program))
}

/// A copy of the fixture project.
pub fn geometry() -> TempWorkspace {
    let ws = TempWorkspace::new("lsp-geometry").unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/geometry");
    trellis_test_support::copy_tree(&src, ws.path()).unwrap();
    ws
}

/// 1-based column of the `n`th (0-based) occurrence of `word` on 1-based `line` of `text`.
fn col(text: &str, line: usize, word: &str, n: usize) -> u32 {
    let l = text.lines().nth(line - 1).unwrap();
    l.match_indices(word).nth(n).unwrap().0 as u32 + 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_answers_definitions_references_hovers_signatures_and_diagnostics() {
    let Some(program) = typescript_language_server() else {
        return;
    };
    let ws = geometry();
    let main = std::fs::read_to_string(ws.path().join("src/main.ts")).unwrap();
    let broken = std::fs::read_to_string(ws.path().join("src/broken.ts")).unwrap();
    let mut spec = ServerSpec::for_path(Path::new("src/main.ts")).unwrap();
    spec.program = program.display().to_string();
    let lsp = LspClient::start(&spec, ws.path()).await.unwrap();
    assert!(lsp.ready(Duration::from_secs(5)).await);

    // `translate` as called on main.ts line 4 is defined on geometry.ts line 8, column 17.
    let at = col(&main, 4, "translate", 0);
    let defs = lsp.definition("src/main.ts", 4, at).await.unwrap();
    let got: Vec<(&str, u32, u32)> = defs
        .iter()
        .map(|p| (p.path.as_str(), p.line, p.column))
        .collect();
    assert_eq!(got, [("src/geometry.ts", 8, 17)], "{defs:?}");

    // Its references: the declaration, two imports and three calls.
    let refs = lsp.references("src/geometry.ts", 8, 17).await.unwrap();
    let got: Vec<(&str, u32)> = refs.iter().map(|p| (p.path.as_str(), p.line)).collect();
    assert_eq!(
        got,
        [
            ("src/broken.ts", 1),
            ("src/broken.ts", 4),
            ("src/broken.ts", 5),
            ("src/geometry.ts", 8),
            ("src/main.ts", 1),
            ("src/main.ts", 4)
        ],
        "{refs:?}"
    );

    let hover = lsp
        .hover("src/main.ts", 4, at)
        .await
        .unwrap()
        .unwrap_or_default();
    // Imported: tsserver calls it an alias.
    assert!(
        hover.contains("(alias) translate(p: Point, dx: number, dy: number): Point"),
        "{hover}"
    );
    assert!(hover.contains("Moves a point by dx and dy."), "{hover}");

    // At the `3` of `translate(origin, 3, 4)`: the second parameter.
    let help = super::signature(&lsp, "src/main.ts", 4, col(&main, 4, "3", 0)).await;
    assert_eq!(
        super::active(&help),
        (
            "translate(p: Point, dx: number, dy: number): Point",
            1,
            "dx: number"
        ),
        "{help:?}"
    );
    let sig = &help.signatures[0];
    let params: Vec<&str> = sig.parameters.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(params, ["p: Point", "dx: number", "dy: number"]);
    assert!(sig.documentation.contains("Moves a point"), "{help:?}");
    // Not in a call: none.
    assert_eq!(lsp.signature("src/main.ts", 3, 7).await.unwrap(), None);

    // A clean file has none; the broken one its two type errors.
    let clean = super::diagnostics(&lsp, "src/main.ts").await;
    assert!(clean.diagnostics.is_empty(), "{clean:?}");
    let found = super::diagnostics(&lsp, "src/broken.ts").await;
    assert_eq!(
        super::brief(&found),
        [
            (
                4,
                col(&broken, 4, "moved", 0),
                "error",
                "2322",
                "typescript"
            ),
            (
                5,
                col(&broken, 5, "\"1\"", 0),
                "error",
                "2345",
                "typescript"
            )
        ],
        "{found:?}"
    );
    assert!(
        found.diagnostics[0]
            .message
            .contains("Type 'Point' is not assignable to type 'string'"),
        "{found:?}"
    );
    assert_eq!(found.diagnostics[0].end_column, col(&broken, 4, ":", 0));

    // Fixed on disk: the server is sent the new text and the errors go.
    std::fs::write(
        ws.path().join("src/broken.ts"),
        broken
            .replace("moved: string", "moved")
            .replace("\"1\"", "1"),
    )
    .unwrap();
    let fixed = super::diagnostics(&lsp, "src/broken.ts").await;
    assert!(fixed.diagnostics.is_empty(), "{fixed:?}");
    lsp.shutdown().await;
}

fn pool_config(program: &Path, idle_secs: f64) -> LspConfig {
    LspConfig {
        servers: [(
            "typescript".to_owned(),
            ServerCommand {
                command: program.display().to_string(),
                args: vec!["--stdio".into()],
            },
        )]
        .into(),
        idle_shutdown_secs: idle_secs,
        ..LspConfig::default()
    }
}

fn running(pid: u32) -> bool {
    // A zombie (exited, not yet waited for) has state Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "waited 15 s for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_started_again_on_next_use() {
    let Some(program) = typescript_language_server() else {
        return;
    };
    let ws = geometry();
    let pool = LspPool::new(ws.path(), &pool_config(&program, 0.0));
    let first = pool.for_path("src/main.ts").await.unwrap();
    let pid = first.pid().unwrap();
    assert!(running(pid));
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    until("the killed server to be noticed", async || !first.alive()).await;
    drop(first);

    let second = pool.for_path("src/main.ts").await.unwrap();
    assert_ne!(second.pid(), Some(pid));
    let defs = second.definition("src/main.ts", 4, 15).await.unwrap();
    assert_eq!(defs.len(), 1, "{defs:?}");
    assert_eq!(
        (defs[0].path.as_str(), defs[0].line),
        ("src/geometry.ts", 8)
    );
    pool.shutdown().await;
    assert!(!second.alive());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_is_shut_down_and_started_again_on_next_use() {
    let Some(program) = typescript_language_server() else {
        return;
    };
    let ws = geometry();
    let pool = LspPool::new(ws.path(), &pool_config(&program, 1.0));
    let lsp = pool.for_path("src/main.ts").await.unwrap();
    let pid = lsp.pid().unwrap();
    // In use (a call holds it): not shut down, however long it takes.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(lsp.alive() && running(pid));
    assert!(lsp.hover("src/main.ts", 4, 15).await.unwrap().is_some());
    drop(lsp);
    assert_eq!(pool.running().await.len(), 1);

    until("the idle server to be shut down", async || {
        pool.running().await.is_empty() && !running(pid)
    })
    .await;

    let again = pool.for_path("src/main.ts").await.unwrap();
    assert_ne!(again.pid(), Some(pid));
    let hover = again.hover("src/main.ts", 4, 15).await.unwrap();
    assert!(hover.is_some_and(|h| h.contains("translate")));
    drop(again);
    pool.shutdown().await;
}
