//! The shell tool runs every command in the OS sandbox (trellis-sandbox): an escape is
//! refused and the refusal is the call's recorded result; `[sandbox] mode = "off"` lets
//! the same escape through, with a warning in the result; inside the sandbox a command
//! that can only write the worktree no longer asks.

use std::net::TcpListener;

use serde_json::json;
use trellis_sandbox::{Mode, Preset};
use trellis_tools::{Action, ToolsConfig};

use super::support::{Tools, auto, repo};

fn config(mode: Mode) -> ToolsConfig {
    let mut cfg = ToolsConfig::default();
    cfg.sandbox.mode = mode;
    // Decided by the sandbox, not by the classifier: every class runs.
    cfg.policy.destructive = Action::Allow;
    cfg.policy.network = Action::Allow;
    cfg.policy.unknown = Action::Allow;
    cfg
}

#[tokio::test]
async fn a_write_outside_the_worktree_is_refused_and_recorded() {
    let ws = repo(&[("a.txt", "a\n")]);
    // Neither under the private /tmp nor under the hidden home: only read-only refuses it.
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let target = outside.path().join("escaped");
    let line = format!("echo x > {}", target.display());
    let t = Tools::new(ws.path(), config(Mode::Auto), auto());
    let r = t.call("shell", json!({ "command": line })).await;
    assert!(!target.exists(), "{}", r.content);
    assert!(r.content.contains("Read-only file system"), "{}", r.content);
    assert_eq!(r.data.as_ref().unwrap()["sandbox"], "bwrap");
    let recorded = t.sink.records();
    assert!(
        recorded
            .iter()
            .any(|c| c.tool == "shell" && c.summary.starts_with("exit code 1")),
        "{recorded:?}"
    );
    // The same call without the sandbox escapes, and says it ran unsandboxed.
    let off = Tools::new(ws.path(), config(Mode::Off), auto());
    let r = off.call("shell", json!({ "command": line })).await;
    assert!(target.exists(), "{}", r.content);
    assert!(r.content.contains("WITHOUT a sandbox"), "{}", r.content);
    assert_eq!(r.data.as_ref().unwrap()["sandbox"], "off");
}

#[tokio::test]
async fn the_network_follows_the_roles_preset() {
    let ws = repo(&[("a.txt", "a\n")]);
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let line = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let t = Tools::new(ws.path(), config(Mode::Auto), auto());
    let r = t.call("shell", json!({ "command": line })).await;
    assert!(!r.content.contains("connected"), "{}", r.content);
    let mut cfg = config(Mode::Auto);
    cfg.sandbox
        .roles
        .insert("implementor".into(), Preset::WorkspaceWriteNetwork);
    let t = Tools::new(ws.path(), cfg, auto());
    let r = t.call("shell", json!({ "command": line })).await;
    assert!(r.content.contains("connected"), "{}", r.content);
}

#[tokio::test]
async fn inside_the_sandbox_a_local_script_no_longer_asks() {
    let ws = repo(&[("run.sh", "echo ran > out.txt\n")]);
    let mut cfg = ToolsConfig::default();
    assert_eq!(cfg.policy.unknown, Action::Ask);
    // The interaction denies every question: a call that asks is refused.
    let t = Tools::new(ws.path(), cfg.clone(), auto());
    let r = t.call("shell", json!({ "command": "bash ./run.sh" })).await;
    assert!(!r.is_error, "{}", r.content);
    assert!(ws.path().join("out.txt").exists());
    // Network still asks (and is refused here).
    let r = t
        .call("shell", json!({ "command": "curl http://127.0.0.1:1/" }))
        .await;
    assert!(r.is_error, "{}", r.content);
    // Unsandboxed, the unknown script asks again.
    std::fs::remove_file(ws.path().join("out.txt")).unwrap();
    cfg.sandbox.mode = Mode::Off;
    let t = Tools::new(ws.path(), cfg, auto());
    let r = t.call("shell", json!({ "command": "bash ./run.sh" })).await;
    assert!(r.is_error, "{}", r.content);
    assert!(!ws.path().join("out.txt").exists());
}

#[tokio::test]
async fn a_build_directory_outside_the_worktree_is_not_passed_in() {
    let ws = repo(&[("a.txt", "a\n")]);
    let t = Tools::new(ws.path(), config(Mode::Auto), auto());
    // This process may name a shared CARGO_TARGET_DIR (the test runner does): inside the
    // sandbox it would be read-only, so the command does not get it.
    let r = t
        .call(
            "shell",
            json!({ "command": "echo target=${CARGO_TARGET_DIR:-none} tmp=$TMPDIR" }),
        )
        .await;
    assert!(r.content.contains("target=none"), "{}", r.content);
    assert!(r.content.contains("tmp=/tmp"), "{}", r.content);
}

#[tokio::test]
async fn the_landlock_backend_refuses_the_same_write() {
    let ws = repo(&[("a.txt", "a\n")]);
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let target = outside.path().join("escaped");
    let t = Tools::new(ws.path(), config(Mode::Landlock), auto());
    let r = t
        .call(
            "shell",
            json!({ "command": format!("echo x > {}; echo y > inside.txt", target.display()) }),
        )
        .await;
    assert!(!target.exists(), "{}", r.content);
    assert!(r.content.contains("Permission denied"), "{}", r.content);
    assert_eq!(r.data.as_ref().unwrap()["sandbox"], "landlock");
    assert!(ws.path().join("inside.txt").exists(), "{}", r.content);
}
