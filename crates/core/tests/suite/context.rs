//! Context management in a workflow run: the `[context]` section's cap and output limit
//! reach the agent, its large tool outputs are stored in the run's directory and read back,
//! and its prompts are summarised by the summary role's model, booked to the agent's budget.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_agents::Overrides;
use trellis_core::InputMode;
use trellis_llm::budget::Scope;
use trellis_llm::tokens::estimate_request;
use trellis_protocol::{RunStatus, SessionEvent};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

const CONFIG: &str = r#"
[index.embedding]
backend = "none"

[context]
caps.analysis_agent = 2000
tool_output_max_bytes = 1000
keep_last = 4
"#;

const FILES: &[&str] = &[
    "inventory.py",
    "test_inventory.py",
    "docs/adr/0001-in-memory-stock.md",
    "docs/architecture.md",
    "README.md",
];

fn is_summary(r: &trellis_llm::ChatRequest) -> bool {
    r.messages[0]
        .content
        .starts_with("You maintain the working memory")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_of_a_run_keeps_to_its_configured_cap() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let agent_calls = Arc::new(Mutex::new(0usize));
    let calls = agent_calls.clone();
    // The first handle an excerpt named (the excerpt may be summarised away later).
    let first_handle: Arc<Mutex<Option<String>>> = Arc::default();
    let script = ScriptedProvider::responding(move |r| {
        if is_summary(r) {
            return Turn::Text("SUMMARY: read the inventory code and its documents.".into());
        }
        if r.response_format
            .as_ref()
            .is_some_and(|f| f.schema.to_string().contains("queries"))
        {
            return queries();
        }
        let mut handle = first_handle.lock().unwrap();
        if handle.is_none() {
            *handle = r.messages.iter().find_map(|m| {
                m.content
                    .split("stored as `")
                    .nth(1)
                    .and_then(|s| s.split('`').next())
                    .map(str::to_owned)
            });
        }
        let mut n = calls.lock().unwrap();
        *n += 1;
        match *n {
            i if i <= FILES.len() => tool("read_file", json!({ "path": FILES[i - 1] })),
            i if i == FILES.len() + 1 => tool(
                "read_tool_output",
                json!({ "handle": handle.clone().unwrap_or_default(), "offset": 0, "limit": 200 }),
            ),
            _ => report(false, "stock lives in memory (ADR 0001)"),
        }
    });
    let rt = runtime(&repo, &script);
    let overrides = Overrides {
        workflow: Some("architecture_discussion".into()),
        skip: vec!["decision_documentation".into()],
        ..Overrides::default()
    };
    let (orchestration, plan) = rt
        .plan(
            "Discuss where the stock should live",
            &overrides,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let events: Arc<Mutex<Vec<SessionEvent>>> = Arc::default();
    let sink = events.clone();
    let mut opts = options(InputMode::Approve);
    opts.events = Some(Arc::new(move |_node| {
        let sink = sink.clone();
        Arc::new(move |e| sink.lock().unwrap().push(e))
    }));
    let (handle, ctx) = rt.start(&plan, &orchestration, opts).unwrap();
    let run = handle.id().clone();
    let outcome = handle.wait().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Succeeded, "{:?}", outcome.error);

    // Every request of the agent fits its cap.
    let requests = script.requests();
    let agent: Vec<_> = requests
        .iter()
        .filter(|r| !is_summary(r) && r.response_format.is_none())
        .collect();
    assert_eq!(agent.len(), FILES.len() + 2);
    for (i, r) in agent.iter().enumerate() {
        let tokens = estimate_request(r).tokens;
        assert!(tokens <= 2000, "agent request {i}: {tokens} tokens");
    }
    let events = events.lock().unwrap().clone();
    let compacted: Vec<&SessionEvent> = events
        .iter()
        .filter(|e| matches!(e, SessionEvent::ContextCompacted { .. }))
        .collect();
    assert!(!compacted.is_empty());
    for e in &compacted {
        println!("{}", e.compaction_text().unwrap());
    }

    // The stored outputs live in the run's directory, and one was read back.
    let dir = repo
        .join(".trellis/runs")
        .join(run.as_str())
        .join("tool-outputs/architectural_analysis");
    let stored: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!stored.is_empty(), "{}", dir.display());
    let read = events.iter().find_map(|e| match e {
        SessionEvent::ToolCompleted { name, output, .. } if name == "read_tool_output" => {
            Some(output.clone())
        }
        _ => None,
    });
    let read = read.unwrap();
    assert!(read.contains("[bytes 0–200 of "), "{read}");

    // One summary call per compaction that used the model (the others condensed too little
    // to be worth one: digests); they were booked to the agent, like its own turns.
    let summaries = requests.iter().filter(|r| is_summary(r)).count();
    let by_model = compacted
        .iter()
        .filter(|e| {
            matches!(
                e,
                SessionEvent::ContextCompacted {
                    method: trellis_protocol::CompactionMethod::Summary,
                    ..
                }
            )
        })
        .count();
    assert!(by_model > 0);
    assert_eq!(summaries, by_model);
    let turns: u64 = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::TurnCompleted { usage, .. } => {
                Some(usage.prompt_tokens + usage.completion_tokens)
            }
            _ => None,
        })
        .sum();
    let summary: u64 = compacted
        .iter()
        .map(|e| match e {
            SessionEvent::ContextCompacted { usage, .. } => {
                usage.prompt_tokens + usage.completion_tokens
            }
            _ => 0,
        })
        .sum();
    assert!(summary > 0);
    let (spent, _) = ctx.ledger.spent(&Scope::Agent("analysis_agent".into()));
    assert_eq!(spent, turns + summary);
}
