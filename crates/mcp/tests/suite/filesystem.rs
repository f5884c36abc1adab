//! The client against npm `@modelcontextprotocol/server-filesystem` (installed by
//! scripts/setup.d/70-mcp-peers.sh): its tools listed with their read-only hints, a directory
//! listed and a file read inside its allowed directory, and a path outside it reported to the
//! model as a failed tool call while the server keeps serving.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use trellis_mcp::{ServerConfig, ServerState};

use super::support::{Agent, hub, node_peer, status};

/// server-filesystem on stdio, allowed to read and write `allowed` only.
fn filesystem(allowed: &Path) -> ServerConfig {
    node_peer("server-filesystem", &[&allowed.display().to_string()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_filesystem_lists_and_reads_inside_its_directory_and_refuses_outside() {
    let dir = tempfile::tempdir().unwrap();
    // Canonical paths: the server resolves symlinks (a /tmp that is one) before comparing.
    let allowed = dir.path().canonicalize().unwrap().join("allowed");
    let outside = dir.path().canonicalize().unwrap().join("outside");
    std::fs::create_dir_all(allowed.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(allowed.join("notes.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(allowed.join("sub/deep.txt"), "deep").unwrap();
    std::fs::write(outside.join("secret.txt"), "the secret").unwrap();

    let hub = hub(dir.path(), vec![("fs", filesystem(&allowed))]);
    hub.start();
    let all = hub.settled(Duration::from_secs(60)).await;
    let s = status(&all, "fs");
    assert_eq!(s.state, ServerState::Ready, "{s:?}");
    let tool = |name: &str| {
        s.tools
            .iter()
            .find(|t| t.remote == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", s.tools))
    };
    // The server's own annotations decide what is read-only.
    assert!(tool("read_text_file").read_only, "{s:?}");
    assert!(tool("list_directory").read_only, "{s:?}");
    assert!(!tool("write_file").read_only, "{s:?}");

    let agent = Agent::new(dir.path(), &hub);
    let r = agent
        .call(
            "fs__list_directory",
            json!({"path": allowed.display().to_string()}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert!(r.content.contains("[FILE] notes.txt"), "{r:?}");
    assert!(r.content.contains("[DIR] sub"), "{r:?}");

    let r = agent
        .call(
            "fs__read_text_file",
            json!({"path": allowed.join("notes.txt").display().to_string(), "head": 1}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert!(r.content.contains("alpha"), "{r:?}");
    assert!(!r.content.contains("beta"), "head 1 reads one line: {r:?}");

    // Outside the allowed directory: a failed call with the server's reason, nothing read.
    for path in [
        outside.join("secret.txt"),
        allowed.join("../outside/secret.txt"),
    ] {
        let r = agent
            .call(
                "fs__read_text_file",
                json!({"path": path.display().to_string()}),
            )
            .await;
        assert!(r.is_error, "{path:?}: {r:?}");
        assert!(
            r.content.contains("outside allowed directories"),
            "{path:?}: {r:?}"
        );
        assert!(!r.content.contains("the secret"), "{r:?}");
    }
    // A file that does not exist inside it: a failure too.
    let r = agent
        .call(
            "fs__read_text_file",
            json!({"path": allowed.join("missing.txt").display().to_string()}),
        )
        .await;
    assert!(r.is_error, "{r:?}");

    // The server still serves after the refusals.
    let r = agent
        .call(
            "fs__read_text_file",
            json!({"path": allowed.join("sub/deep.txt").display().to_string()}),
        )
        .await;
    assert!(!r.is_error && r.content.contains("deep"), "{r:?}");
    assert_eq!(hub.status()[0].state, ServerState::Ready);
    let stopped = hub.stop(Duration::from_secs(10)).await;
    assert_eq!(status(&stopped, "fs").state, ServerState::Stopped);
}
