//! A role with `answer: prose`: its final answer is plain text that becomes the report's
//! output (no JSON report is asked for), `FAILED:` at its start marks the stage failed, and
//! out of turns it is asked once more for its answer, without tools.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use trellis_agents::roles::AnswerFormat;
use trellis_agents::{AgentOutcome, AgentRun, Resume, RoleCatalog};
use trellis_llm::{ChatRequest, Message};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_tools::{NonInteractive, Registry, ToolEnv, ToolsConfig, Workspace};

/// The built-in analysis agent (`max_turns` as given) answering with `turns`.
async fn run(turns: Vec<Turn>, max_turns: u32) -> (trellis_agents::AgentReport, Vec<ChatRequest>) {
    let ws = TempWorkspace::new("prose").unwrap();
    std::fs::write(ws.path().join("stock.py"), "STOCK = {}\n").unwrap();
    let role = RoleCatalog::builtin()
        .unwrap()
        .get("analysis_agent")
        .unwrap()
        .clone();
    assert_eq!(role.answer, AnswerFormat::Prose);
    let mut registry = Registry::builtin(&BTreeMap::new());
    registry.allow(&role.name, role.tools.iter().map(String::as_str));
    let scripted = ScriptedProvider::new(turns);
    let env = ToolEnv::new(
        Workspace::new(ws.path(), &Default::default()).unwrap(),
        Arc::new(ToolsConfig::default()),
        Arc::new(NonInteractive { approve: true }),
    );
    let messages = vec![
        Message::system(trellis_agents::prompt::system_prompt(&role, &[])),
        Message::user("## TASK\nRequest: discuss keeping stock in memory"),
    ];
    let agent = AgentRun {
        max_turns,
        ..AgentRun::new(
            "architectural_analysis",
            role,
            Arc::new(scripted.clone()),
            Arc::new(registry),
            env,
            messages,
        )
    };
    let report = match agent.run(Resume::Fresh).await.unwrap() {
        AgentOutcome::Done(r) => r,
        AgentOutcome::Interrupted { interrupt, .. } => panic!("interrupted: {interrupt:?}"),
    };
    (report, scripted.requests())
}

#[tokio::test]
async fn the_prose_answer_is_the_output_without_a_json_report() {
    let answer = "Stock lives in two dicts in `inventory.py` (`Inventory.stock`, \
                  `Inventory.reserved`); a restart loses it (ADR 0001).";
    let (report, requests) = run(vec![Turn::Text(answer.into())], 8).await;
    assert!(!report.report.failure);
    assert_eq!(report.report.output, answer);
    assert_eq!(report.turns, 1);
    assert_eq!(requests.len(), 1, "no second call for a report");
    // The role's penalty against greedy repetition goes with its requests.
    assert_eq!(requests[0].frequency_penalty, Some(0.3));
    assert!(
        requests[0].final_format.is_none(),
        "{:?}",
        requests[0].final_format
    );
}

#[tokio::test]
async fn an_answer_starting_failed_fails_the_stage() {
    let (report, _) = run(
        vec![Turn::Text(
            "FAILED: nothing about stock is written down.".into(),
        )],
        8,
    )
    .await;
    assert!(report.report.failure);
    assert!(report.report.output.contains("nothing about stock"));
    let (report, _) = run(vec![Turn::Text("  ".into())], 8).await;
    assert!(report.report.failure, "an empty answer is no analysis");
}

#[tokio::test]
async fn out_of_turns_it_is_asked_for_its_answer_without_tools() {
    let read = Turn::ToolCall {
        name: "read_file".into(),
        arguments: json!({"path": "stock.py"}),
    };
    let answer = "`stock.py` keeps `STOCK` in a module-level dict.";
    let (report, requests) = run(vec![read, Turn::Text(answer.into())], 1).await;
    assert_eq!(report.report.output, answer);
    assert!(!report.report.failure);
    assert_eq!((report.turns, report.tool_calls), (2, 1));
    let last = requests.last().unwrap();
    assert!(last.tools.is_empty() && last.final_format.is_none());
    let asked = &last.messages.last().unwrap().content;
    assert!(asked.contains("in plain prose (no tool calls)"), "{asked}");
}

#[tokio::test]
async fn a_json_report_given_anyway_is_read_as_the_report() {
    let report =
        json!({"failure": false, "output": "Stock is in memory.", "findings": ["no persistence"]});
    let (report, requests) = run(vec![Turn::Json(report)], 8).await;
    assert_eq!(report.report.output, "Stock is in memory.");
    assert_eq!(report.report.findings, ["no persistence"]);
    assert_eq!(requests.len(), 1);
}
