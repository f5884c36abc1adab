//! An interrupted run is always resumable (issue 33): the service shut down at any point of a
//! run — before, during and after each model request and tool call — leaves the run as it
//! was there, nothing recorded as failed, and a new service resumes it to the end.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use trellis_core::Runtime;
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
use trellis_protocol::records::RunState;
use trellis_protocol::{EventKind, InputMode, NodeState, Op, RunId, RunStatus};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::interrupt::Tripwire;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

/// BM25 only, no speculative tool calls: the run makes its calls one at a time, so the
/// points are passed in the same order every time.
const QUIET: &str = r#"
[index.embedding]
backend = "none"

[tools.speculation]
enabled = false
"#;

/// The retrieval's queries; the analysis reads a file, then reports.
fn answer(r: &ChatRequest) -> Turn {
    if is_queries(r) {
        queries()
    } else if calls(r) == 0 {
        tool("read_file", json!({ "path": "README.md" }))
    } else {
        report(false, "Stock lives in memory; see ADR 0001.")
    }
}

/// A service over `repo` (a store of its own, as a new process would have) whose model and
/// `read_file` pass `wire`'s points.
fn service(repo: &Path, wire: &Arc<Tripwire>) -> Arc<Service> {
    let store = Store::open_workspace(repo, StoreOptions::default()).unwrap();
    let mut rt = Runtime::open(repo, &[], &[], store).unwrap();
    let model = Arc::new(ScriptedProvider::responding(answer));
    rt.models().install("local", wire.provider(model));
    let read_file = trellis_tools::builtin::all()
        .into_iter()
        .find(|t| t.spec().name == "read_file")
        .unwrap();
    rt.add_tool(wire.tool(read_file));
    Service::start(Arc::new(rt), ServiceOptions::default())
}

fn start_op() -> Op {
    Op::StartRun {
        request: "Why is stock kept in memory?".into(),
        repo: None,
        workflow: Some("architecture_discussion".into()),
        include: Vec::new(),
        skip: vec!["decision_documentation".into()],
        input: InputMode::Approve,
        budgets: None,
        plan_only: false,
    }
}

async fn outcome(svc: &Service, run: &RunId) -> RunState {
    svc.wait_run(run).await;
    svc.flush().await.unwrap();
    svc.run_state(run).unwrap()
}

/// Every failure the run's log records: nodes gone FAILED, the run's status FAILED.
fn failures(svc: &Service, run: &RunId) -> Vec<String> {
    svc.run_events(run, 1, None)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::NodeTransition {
                node,
                attempt,
                to: NodeState::Failed,
                ..
            } => Some(format!("{node}#{attempt} failed")),
            EventKind::RunStatusChanged {
                status: RunStatus::Failed,
                error,
                ..
            } => Some(format!("run failed: {error:?}")),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_shut_down_at_any_point_resumes_to_the_end() {
    // The points of an uninterrupted run.
    let ws = inventory(QUIET);
    let repo = path_of(&ws);
    let wire = Tripwire::new(None);
    let svc = service(&repo, &wire);
    let run = RunId::from_string(svc.call(start_op()).await.unwrap()["run"].as_str().unwrap());
    let o = outcome(&svc, &run).await;
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    svc.shutdown().await;
    let points = wire.points();
    // Three model calls (queries, the analysis's tool call and its report), three points
    // each; one tool call, two points.
    assert_eq!(points.len(), 11, "{points:#?}");

    let mut problems = Vec::new();
    for (k, point) in points.iter().enumerate() {
        if let Err(problem) = shut_down_and_resume(k, point).await {
            problems.push(format!("shut down at {point}: {problem}"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Runs the workflow in a fresh workspace, shuts the service down at point `k` (`point`),
/// then resumes the run in a new service.
async fn shut_down_and_resume(k: usize, point: &str) -> Result<(), String> {
    let ws = inventory(QUIET);
    let repo = path_of(&ws);
    let wire = Tripwire::new(Some(k));
    let svc = service(&repo, &wire);
    let run = RunId::from_string(svc.call(start_op()).await.unwrap()["run"].as_str().unwrap());
    let at = tokio::time::timeout(Duration::from_secs(60), wire.tripped())
        .await
        .map_err(|_| "never reached".to_owned())?;
    assert_eq!(at, point);
    // Ctrl-C here: the service shuts down. Then the stopped call ends cut short, as the
    // calls of a process going away do; nothing may record that, or anything else.
    svc.shutdown().await;
    wire.release();
    tokio::time::sleep(Duration::from_millis(50)).await;
    svc.flush().await.unwrap();
    let failed = failures(&svc, &run);
    if !failed.is_empty() {
        return Err(format!("recorded after the shutdown: {failed:?}"));
    }
    let stored = svc.run_state(&run).unwrap().status;
    if stored.is_final() {
        return Err(format!(
            "the run went on after the shutdown: it is {stored}"
        ));
    }
    drop(svc);

    // A new service resumes it to the end.
    let svc = service(&repo, &Tripwire::new(None));
    svc.call(Op::ResumeRun {
        run: run.to_string(),
        answers: Vec::new(),
        messages: Vec::new(),
        input: InputMode::Approve,
    })
    .await
    .map_err(|e| format!("resume refused: {e}"))?;
    let o = outcome(&svc, &run).await;
    svc.shutdown().await;
    if o.status != RunStatus::Succeeded {
        return Err(format!("the resumed run ended {}: {:?}", o.status, o.error));
    }
    let failed = failures(&svc, &run);
    if !failed.is_empty() {
        return Err(format!("failures recorded: {failed:?}"));
    }
    Ok(())
}
