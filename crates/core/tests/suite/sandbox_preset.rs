//! The sandbox's per-workflow preset reaches the commands a real run's agents run: with
//! `[sandbox.workflows] architecture_discussion = "read-only"` the analysis agent's shell
//! command cannot write the run's worktree; without it (workspace-write) the same command does.

use serde_json::json;
use trellis_core::InputMode;
use trellis_protocol::RunStatus;
use trellis_test_support::scripted::ScriptedProvider;

use super::common::*;

const BASE: &str = "[index.embedding]\nbackend = \"none\"\n[agents.retrieval]\ndisabled = true\n";

/// Runs the discussion's analysis stage, whose agent may use the shell, with one command
/// that writes a file; answers whether the file is in the run's worktree, and the call's
/// summary.
async fn write_in_a_discussion(config: &str) -> (bool, String) {
    let ws = inventory(config);
    let repo = path_of(&ws);
    shell_capable_analysis(&repo);
    let script = ScriptedProvider::new([
        tool(
            "shell",
            json!({ "command": "echo written > made-by-agent.txt" }),
        ),
        report(false, "tried to write a file"),
    ]);
    let rt = runtime(&repo, &script);
    let (orchestration, plan) = analysis_only(&rt).await;
    let (handle, ctx) = rt
        .start(&plan, &orchestration, options(InputMode::Approve))
        .unwrap();
    let run = handle.id().clone();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    rt.store().flush().unwrap();
    let calls = rt.store().tool_calls(&run).unwrap();
    let shell = calls
        .iter()
        .find(|c| c.tool == "shell")
        .unwrap_or_else(|| panic!("no shell call: {calls:?}"));
    let wt = ctx
        .space
        .get()
        .expect("a shell-capable agent makes the worktree");
    (
        wt.path.join("made-by-agent.txt").exists(),
        format!("{} {}", shell.is_error, shell.summary),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflows_read_only_preset_keeps_its_agents_commands_from_writing() {
    let (written, call) = write_in_a_discussion(BASE).await;
    assert!(
        written,
        "workspace-write (default) lets the command write: {call}"
    );
    let read_only = format!("{BASE}[sandbox.workflows]\narchitecture_discussion = \"read-only\"\n");
    let (written, call) = write_in_a_discussion(&read_only).await;
    assert!(
        !written,
        "the read-only preset must refuse the write: {call}"
    );
}
