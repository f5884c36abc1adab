//! A run's hooks ([`Hooks::with_workflow`]): the workspace's first, then its workflow's,
//! problems and records naming where each was declared, the workspace's own hooks
//! untouched.

use std::sync::Arc;

use serde_json::{Value, json};
use trellis_protocol::RunId;
use trellis_sandbox::{Mode, SandboxConfig};
use trellis_tools::{HookConfig, HookEvent, HookScope, Hooks, MemorySink, ShellConfig};

fn hook(name: &str, command: &str) -> HookConfig {
    HookConfig {
        event: HookEvent::BeforeTool,
        command: command.into(),
        name: Some(name.into()),
        tools: Vec::new(),
        workflows: Vec::new(),
        timeout_secs: 5,
        preset: None,
    }
}

#[tokio::test]
async fn a_runs_hooks_are_the_workspaces_then_its_workflows() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(MemorySink::default());
    let sandbox = SandboxConfig {
        mode: Mode::Off,
        ..SandboxConfig::default()
    };
    let workspace = Hooks::new(
        vec![hook("first", "echo config >> order.txt")],
        dir.path(),
        ShellConfig::default(),
        sandbox,
        Some(sink.clone()),
    );
    let run = workspace.with_workflow([
        (
            hook("guard", "echo workflow >> order.txt; echo no >&2; exit 1"),
            "workflow flow.yaml, hooks[0]".to_owned(),
        ),
        (
            hook("crash", "kill -SEGV $$"),
            "workflow flow.yaml, hooks[1]".to_owned(),
        ),
    ]);
    let id = RunId::new();
    let scope = HookScope {
        run: Some(&id),
        node: Some("build"),
        workflow: Some("flow"),
        tool: Some("read_file"),
        cwd: dir.path(),
    };

    // The workspace's hooks alone: nothing objects.
    let objections = workspace
        .run(HookEvent::BeforeTool, scope, json!({}), true)
        .await;
    assert!(objections.is_empty(), "{objections:?}");
    std::fs::remove_file(dir.path().join("order.txt")).unwrap();

    // The run's: the workspace's first, then the workflow's; the first objection stops
    // the rest.
    let objections = run.run(HookEvent::BeforeTool, scope, json!({}), true).await;
    assert_eq!(objections, ["`guard`: no"]);
    let order = std::fs::read_to_string(dir.path().join("order.txt")).unwrap();
    assert_eq!(order, "config\nworkflow\n");
    let records = sink.records();
    let sources: Vec<Value> = records
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.args).unwrap()["source"].clone())
        .collect();
    assert_eq!(
        sources[1..],
        [
            json!("before_tool #0 of [[hooks]]"),
            json!("workflow flow.yaml, hooks[0]")
        ]
    );
    assert_eq!(records[2].decision, "objected");

    // Without the objection the broken one runs: it counts for nothing.
    let objections = run
        .run(HookEvent::BeforeTool, scope, json!({}), false)
        .await;
    assert_eq!(objections, ["`guard`: no"]);
    assert_eq!(sink.records().last().unwrap().decision, "broken");
}
