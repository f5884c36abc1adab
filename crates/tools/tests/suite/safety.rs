//! Path escapes, secret gating, roles and recording.

use std::sync::Arc;

use serde_json::json;
use trellis_tools::{Action, ApprovalDecision, Registry, ScriptedInteraction, ToolsConfig};

use super::support::{Tools, auto};

#[tokio::test]
async fn traversal_absolute_and_symlink_escapes_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.txt"), "inside\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        dir.path().join("file_link"),
    )
    .unwrap();
    let t = Tools::new(dir.path(), ToolsConfig::default(), auto());

    let abs = outside.path().join("secret.txt");
    for path in [
        "../secret.txt".to_owned(),
        "a/../../secret.txt".to_owned(),
        abs.to_string_lossy().into_owned(),
        "link/secret.txt".to_owned(),
        "file_link".to_owned(),
        ".git/config".to_owned(),
    ] {
        let r = t.call("read_file", json!({ "path": path })).await;
        assert!(r.is_error, "read of {path} must fail: {}", r.content);
        assert!(r.content.contains("refused"), "{path}: {}", r.content);
        let w = t
            .call("write_file", json!({ "path": path, "content": "x" }))
            .await;
        assert!(w.is_error, "write of {path} must fail");
    }
    // Nothing was written outside.
    assert_eq!(std::fs::read_to_string(&abs).unwrap(), "outside");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    // Inside paths, including `a/../ok.txt`, work.
    let r = t
        .call("read_file", json!({ "path": "sub/../ok.txt" }))
        .await;
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("inside"));
}

#[tokio::test]
async fn secret_reads_need_approval() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "API_KEY=hunter2\n").unwrap();
    std::fs::write(dir.path().join("main.rs"), "fn main() {} // API_KEY\n").unwrap();

    // Denied by the user: the content never reaches the model.
    let scripted = Arc::new(ScriptedInteraction::new(
        [
            ApprovalDecision::Deny {
                reason: Some("no".into()),
            },
            ApprovalDecision::Approve,
        ],
        [],
    ));
    let t = Tools::new(dir.path(), ToolsConfig::default(), scripted.clone());
    let r = t.call("read_file", json!({ "path": ".env" })).await;
    assert!(r.is_error);
    assert!(!r.content.contains("hunter2"));
    let r = t.call("read_file", json!({ "path": ".env" })).await;
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("hunter2"));
    let reqs = scripted.approval_requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].reason.contains(".env"));
    let decisions: Vec<String> = t
        .sink
        .records()
        .iter()
        .map(|r| r.decision.clone())
        .collect();
    assert_eq!(decisions, ["denied", "approved"]);

    // grep skips secret files without asking.
    let r = t.call("grep", json!({ "pattern": "API_KEY" })).await;
    assert!(r.content.contains("main.rs"));
    assert!(!r.content.contains("hunter2"));
    assert!(r.content.contains("1 secret file"));

    // Policy deny never asks.
    let mut cfg = ToolsConfig::default();
    cfg.policy.secret_access = Action::Deny;
    let scripted = Arc::new(ScriptedInteraction::default());
    let t = Tools::new(dir.path(), cfg, scripted.clone());
    let r = t.call("read_file", json!({ "path": ".env" })).await;
    assert!(
        r.is_error && r.content.contains("policy forbids"),
        "{}",
        r.content
    );
    assert!(scripted.approval_requests().is_empty());
}

#[tokio::test]
async fn roles_unknown_tools_and_bad_arguments_are_error_results() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tools::new(dir.path(), ToolsConfig::default(), auto());
    let cancel = tokio_util::sync::CancellationToken::new();
    let r = t
        .registry
        .call(
            &t.env,
            "reviewer",
            "write_file",
            json!({"path": "a", "content": "b"}),
            cancel.clone(),
        )
        .await;
    assert!(r.is_error && r.content.contains("not allowed"));
    assert!(!dir.path().join("a").exists());
    let r = t.call("no_such_tool", json!({})).await;
    assert!(r.is_error && r.content.contains("unknown tool"));
    let r = t.call("read_file", json!({ "file": "x" })).await;
    assert!(
        r.is_error && r.content.contains("invalid arguments"),
        "{}",
        r.content
    );
    // Every call was recorded, errors included.
    assert_eq!(t.sink.records().len(), 3);
    assert!(t.sink.records().iter().all(|r| r.is_error));

    let specs = t.registry.specs_for("reviewer");
    assert!(specs.iter().any(|s| s.name == "read_file"));
    assert!(!specs.iter().any(|s| s.name == "shell"));
    let all = Registry::builtin(&Default::default()).specs();
    assert_eq!(all.len(), 14);
    for s in &all {
        assert_eq!(s.input_schema["type"], "object", "{}", s.name);
        assert!(s.input_schema.get("$schema").is_none());
    }
}

#[tokio::test]
async fn calls_are_recorded_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let store = trellis_store::Store::open(dir.path().join("t.db"), Default::default()).unwrap();
    let mut t = Tools::new(dir.path(), ToolsConfig::default(), auto());
    t.registry = t
        .registry
        .clone()
        .with_sink(Arc::new(trellis_tools::StoreSink(store.clone())));
    let run = trellis_protocol::RunId::new();
    t.env.run = Some(run.clone());
    t.env.node = Some("implement".into());
    t.call("read_file", json!({ "path": "a.txt" })).await;
    t.call("shell", json!({ "command": "curl http://example.invalid" }))
        .await;
    store.flush().unwrap();
    let calls = store.tool_calls(&run).unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].tool, "read_file");
    assert_eq!(calls[0].decision, "auto");
    assert!(!calls[0].is_error);
    assert_eq!(calls[0].node_id.as_deref(), Some("implement"));
    assert_eq!(calls[1].decision, "denied");
    assert!(calls[1].is_error);
    assert!(calls[1].args.contains("curl"));
}

#[tokio::test]
async fn questions_go_to_the_interaction() {
    let dir = tempfile::tempdir().unwrap();
    let scripted = Arc::new(ScriptedInteraction::new([], [vec!["Postgres".to_owned()]]));
    let t = Tools::new(dir.path(), ToolsConfig::default(), scripted.clone());
    let r = t
        .call(
            "ask_questions",
            json!({ "questions": [{ "question": "Which database?", "options": ["SQLite", "Postgres"] }] }),
        )
        .await;
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("Postgres"));
    assert_eq!(scripted.questions()[0][0].options.len(), 2);
    // The script is exhausted: a second question fails instead of hanging.
    let r = t
        .call(
            "ask_questions",
            json!({ "questions": [{ "question": "More?" }] }),
        )
        .await;
    assert!(r.is_error);
}
