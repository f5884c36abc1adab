//! An MCP stdio server that opts in (`sandbox = "<preset>"`) runs inside the OS sandbox:
//! it still serves its tools, and what it writes outside the workspace is refused.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use trellis_mcp::{ServerConfig, ServerState};
use trellis_sandbox::Preset;

use super::support::{Agent, hub, sh, status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opted_in_server_serves_its_tools_inside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let escaped = outside.path().join("escaped");
    // A server that first tries to write outside the workspace, then serves.
    let dynamic = ServerConfig {
        command: Some("sh".into()),
        args: vec![
            "-c".into(),
            format!(
                "echo x > {} 2>/dev/null; exec node {}",
                escaped.display(),
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/peers/dynamic.mjs")
                    .display()
            ),
        ],
        sandbox: Some(Preset::WorkspaceWrite),
        ..ServerConfig::default()
    };
    let hub = hub(dir.path(), vec![("dyn", dynamic)]);
    hub.start();
    let all = hub.settled(Duration::from_secs(60)).await;
    assert_eq!(status(&all, "dyn").state, ServerState::Ready, "{all:?}");
    let agent = Agent::new(dir.path(), &hub);
    let r = agent.call("dyn__grow", json!({})).await;
    assert!(!r.is_error, "{r:?}");
    assert!(
        !escaped.exists(),
        "the sandboxed server wrote outside the workspace"
    );
    hub.stop(Duration::from_secs(10)).await;

    // Not opted in: the same server writes where it likes (the default).
    let mut plain = sh(&format!("echo x > {}; sleep 600", escaped.display()));
    plain.startup_timeout_secs = 1.0;
    plain.max_restarts = 0;
    let hub2 = super::support::hub(dir.path(), vec![("plain", plain)]);
    hub2.start();
    let _ = hub2.settled(Duration::from_secs(10)).await;
    assert!(escaped.exists());
    hub2.stop(Duration::from_secs(10)).await;
}
