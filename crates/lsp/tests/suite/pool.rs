//! The pool with fake language servers (tests/fixtures/fake_lsp.py, python3): a server that
//! is slow to start holds up only the calls for its own program, calls for the same program
//! share one start, and `warm` starts servers ahead of use.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use trellis_lsp::{LspConfig, LspPool, ServerCommand};
use trellis_test_support::TempWorkspace;

/// A copy of the fake server named `name` (the pool keys servers by program), executable.
fn fake(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_lsp.py");
    let dst = dir.join(name);
    std::fs::copy(src, &dst).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dst
}

/// A workspace with a Python and a TypeScript file; Python is served by a fake that answers
/// `initialize` after `slow_secs`, TypeScript by one that answers at once.
fn setup(slow_secs: f64) -> (TempWorkspace, tempfile::TempDir, LspConfig) {
    let ws = TempWorkspace::new("lsp-pool").unwrap();
    std::fs::write(ws.path().join("a.py"), "x = 1\n").unwrap();
    std::fs::write(ws.path().join("b.py"), "y = 2\n").unwrap();
    std::fs::write(ws.path().join("c.ts"), "const z = 3;\n").unwrap();
    let bin = tempfile::tempdir().unwrap();
    let server = |program: PathBuf, args: Vec<String>| ServerCommand {
        command: program.display().to_string(),
        args,
    };
    let config = LspConfig {
        servers: [
            (
                "python".to_owned(),
                server(
                    fake(bin.path(), "slow-lsp"),
                    vec![
                        "--delay".into(),
                        slow_secs.to_string(),
                        "--name".into(),
                        "slow".into(),
                        "--opened".into(),
                        bin.path().join("opened.txt").display().to_string(),
                    ],
                ),
            ),
            (
                "typescript".to_owned(),
                server(
                    fake(bin.path(), "fast-lsp"),
                    vec!["--name".into(), "fast".into()],
                ),
            ),
        ]
        .into(),
        ready_timeout_secs: 30.0,
        idle_shutdown_secs: 0.0,
        ..LspConfig::default()
    };
    (ws, bin, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_starts_slowly_holds_up_only_the_calls_for_its_program() {
    let (ws, _bin, config) = setup(4.0);
    let pool = Arc::new(LspPool::new(ws.path(), &config));
    let started = Instant::now();
    let slow = |path: &'static str| {
        let pool = pool.clone();
        tokio::spawn(async move { pool.for_path(path).await })
    };
    let (a, b) = (slow("a.py"), slow("b.py"));
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The fast server starts and answers while the slow one is still starting.
    let fast = tokio::time::timeout(Duration::from_secs(3), pool.for_path("c.ts"))
        .await
        .expect("the call for TypeScript waited for the Python server's start")
        .unwrap();
    let hover = fast.hover("c.ts", 1, 7).await.unwrap();
    assert_eq!(hover.as_deref(), Some("hover from fast"));
    assert!(
        !a.is_finished() && !b.is_finished(),
        "the slow server was ready after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(4));

    // Both calls for Python waited for the one start and got its server.
    let (a, b) = (a.await.unwrap().unwrap(), b.await.unwrap().unwrap());
    assert!(started.elapsed() >= Duration::from_secs(4));
    assert!(Arc::ptr_eq(&a, &b));
    let hover = a.hover("a.py", 1, 1).await.unwrap();
    assert_eq!(hover.as_deref(), Some("hover from slow"));
    let mut running = pool.running().await;
    running.sort();
    assert_eq!(running.len(), 2, "{running:?}");
    assert!(running[0].ends_with("fast-lsp") && running[1].ends_with("slow-lsp"));
    pool.shutdown().await;
    assert!(!a.alive() && !fast.alive());
    assert!(pool.running().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warming_starts_each_language_server_once_ahead_of_use() {
    let (ws, bin, config) = setup(1.0);
    let pool = LspPool::new(ws.path(), &config);
    // Two Python files, one TypeScript file, one file no server serves.
    pool.warm(["a.py", "b.py", "c.ts", "README.md"], true);
    let started = Instant::now();
    while pool.running().await.len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            pool.running().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Already running: the first call does not start anything.
    let t = Instant::now();
    let py = pool.for_path("b.py").await.unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    let pid = py.pid();
    let again = pool.for_path("a.py").await.unwrap();
    assert_eq!(again.pid(), pid);
    // Asked to, the servers were given their files to analyse.
    let opened = || std::fs::read_to_string(bin.path().join("opened.txt")).unwrap_or_default();
    while !(opened().contains("/a.py") && opened().contains("/b.py")) {
        assert!(started.elapsed() < Duration::from_secs(15), "{}", opened());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!opened().contains("c.ts"), "{}", opened());
    pool.shutdown().await;
}
