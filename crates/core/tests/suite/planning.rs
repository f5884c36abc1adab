//! Planning is the run's first node: `startRun` answers with the run id while the
//! orchestrator's call is still waiting; the run is listed, its graph shows the planning node
//! running and its stream carries it; the call is booked to the run's usage; the run can be
//! cancelled while it plans, and a run stopped while it plans resumes by planning again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::{ChatRequest, ChatStream, ModelProvider, ProviderInfo};
use trellis_protocol::records::RunFilter;
use trellis_protocol::{EventKind, InputMode, NodeState, Op, RunId, RunStatus, StreamId};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

/// The orchestrator's structured request (its answer names a workflow).
fn is_orchestrator(r: &ChatRequest) -> bool {
    r.response_format
        .as_ref()
        .is_some_and(|f| f.schema["properties"].get("workflow").is_some())
}

fn answer(r: &ChatRequest) -> Turn {
    if is_orchestrator(r) {
        Turn::Json(json!({
            "reasoning": "a question about the design",
            "workflow": "architecture_discussion",
            "stages": [{ "stage": "decision_documentation", "include": false, "reason": "no ADR asked for" }]
        }))
    } else if r
        .response_format
        .as_ref()
        .is_some_and(|f| f.schema["properties"].get("queries").is_some())
    {
        queries()
    } else {
        report(false, "Stock lives in memory; see ADR 0001.")
    }
}

/// The scripted model, whose orchestrator calls wait for a permit of `gate` (or their
/// cancellation); `asked` is notified when one starts waiting.
#[derive(Clone)]
struct Gated {
    inner: ScriptedProvider,
    gate: Arc<Semaphore>,
    asked: Arc<Notify>,
    /// Set when a waiting orchestrator call was cancelled.
    cancelled: Arc<AtomicBool>,
}

impl ModelProvider for Gated {
    fn info(&self) -> &ProviderInfo {
        self.inner.info()
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        if !is_orchestrator(&request) {
            return self.inner.stream(request, cancel);
        }
        let (inner, gate, asked) = (self.inner.clone(), self.gate.clone(), self.asked.clone());
        let cancelled = self.cancelled.clone();
        Box::pin(
            futures::stream::once(async move {
                asked.notify_one();
                tokio::select! {
                    permit = gate.acquire_owned() => {
                        permit.expect("gate open").forget();
                        inner.stream(request, cancel)
                    }
                    () = cancel.cancelled() => {
                        cancelled.store(true, Ordering::SeqCst);
                        Box::pin(futures::stream::once(async { Err(trellis_llm::Error::Cancelled) }))
                            as ChatStream
                    }
                }
            })
            .flatten(),
        )
    }
}

fn gated() -> Gated {
    Gated {
        inner: ScriptedProvider::responding(answer),
        gate: Arc::new(Semaphore::new(0)),
        asked: Arc::new(Notify::new()),
        cancelled: Arc::default(),
    }
}

fn service_with(repo: &std::path::Path, model: &Gated) -> Arc<Service> {
    let store = Store::open_workspace(repo, StoreOptions::default()).unwrap();
    let rt = trellis_core::Runtime::open(repo, &[], &[], store).unwrap();
    rt.models().install("local", Arc::new(model.clone()));
    Service::start(Arc::new(rt), ServiceOptions::default())
}

fn start_op() -> Op {
    Op::StartRun {
        request: "Why is stock kept in memory?".into(),
        repo: None,
        workflow: None,
        include: Vec::new(),
        skip: Vec::new(),
        input: InputMode::Approve,
        budgets: None,
        plan_only: false,
    }
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within a minute"))
}

fn orchestrate_state(svc: &Service, run: &RunId) -> Option<NodeState> {
    svc.run_graph(run)
        .unwrap()
        .state
        .nodes
        .iter()
        .find(|n| n.id.as_str() == "orchestrate")
        .and_then(|n| n.state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn start_run_answers_before_the_orchestrator_and_the_run_shows_its_planning() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let model = gated();
    let svc = service_with(&repo, &model);
    let mut live = svc.live();
    // The orchestrator's call waits for the gate: the op answers anyway.
    let out = within("startRun", svc.call(start_op())).await.unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    assert_eq!(out["planning"], "orchestrate");
    assert!(out.get("plan").is_none(), "{out}");
    within("the orchestrator's call", model.asked.notified()).await;
    svc.flush().await.unwrap();

    // Listed, planning, with its planning node running in the graph and on its stream.
    let views = svc.run_views(&RunFilter::default()).unwrap();
    let view = views.iter().find(|v| v.record.id == run).unwrap();
    assert_eq!(view.workflow.as_deref(), Some("planning"));
    assert_eq!(
        view.request.as_deref(),
        Some("Why is stock kept in memory?")
    );
    assert_eq!(view.stage, Some(Some("orchestrate".to_owned())));
    assert_eq!(orchestrate_state(&svc, &run), Some(NodeState::Running));
    let streamed = svc
        .stream_events(&StreamId::Run(run.clone()), 0, None)
        .unwrap();
    assert!(
        streamed.iter().any(|e| matches!(
            &e.event,
            trellis_protocol::ServiceEventBody::Run(EventKind::NodeTransition { node, to: NodeState::Running, .. })
                if node.as_str() == "orchestrate"
        )),
        "the planning node's start is not on the run's stream"
    );
    assert!(svc.run_planned(&run).unwrap().is_none());

    // The orchestrator answers: the run continues with the workflow it chose.
    model.gate.add_permits(1);
    let planned = within("the plan", svc.planned(&run, &mut live))
        .await
        .unwrap()
        .expect("planned");
    assert_eq!(planned.workflow, "architecture_discussion");
    assert_eq!(planned.orchestration["workflow_by"], "model");
    svc.wait_run(&run).await;
    svc.flush().await.unwrap();
    let state = svc.run_state(&run).unwrap();
    assert_eq!(state.status, RunStatus::Succeeded, "{:?}", state.error);
    assert_eq!(orchestrate_state(&svc, &run), Some(NodeState::Completed));
    let view = svc.run_view(run.as_str()).unwrap();
    assert_eq!(view.workflow.as_deref(), Some("architecture_discussion"));
    assert_eq!(
        svc.run_plan(&run).unwrap().workflow,
        "architecture_discussion"
    );
    // The orchestrator's call is in the run's usage, under its node.
    let calls = svc.model_calls(&run).unwrap();
    assert!(
        calls
            .iter()
            .any(|c| c.stage.as_deref() == Some("orchestrate")
                && c.agent.as_deref() == Some("orchestrator")),
        "{calls:?}"
    );
    let usage = svc.usage(&run).unwrap();
    assert!(
        usage.stages.iter().any(|(s, _)| s == "orchestrate"),
        "{usage:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_cancelled_while_it_plans_stops_its_orchestrator() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let model = gated();
    let svc = service_with(&repo, &model);
    let out = svc.call(start_op()).await.unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    within("the orchestrator's call", model.asked.notified()).await;
    svc.call(Op::Cancel {
        run: run.to_string(),
        reason: Some("changed my mind".into()),
    })
    .await
    .unwrap();
    within("the run's stop", svc.wait_run(&run)).await;
    svc.flush().await.unwrap();
    let state = svc.run_state(&run).unwrap();
    assert_eq!(state.status, RunStatus::Cancelled);
    assert!(
        model.cancelled.load(Ordering::SeqCst),
        "the orchestrator's call was not cancelled"
    );
    assert_eq!(model.inner.requests().len(), 0, "a model call went through");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_stopped_while_it_plans_plans_again_when_resumed() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let model = gated();
    let run = {
        let svc = service_with(&repo, &model);
        let out = svc.call(start_op()).await.unwrap();
        let run = RunId::from_string(out["run"].as_str().unwrap());
        within("the orchestrator's call", model.asked.notified()).await;
        // The process goes away while the orchestrator thinks: the run stays resumable.
        svc.shutdown().await;
        run
    };
    let svc = service_with(&repo, &model);
    assert_eq!(
        svc.run_record(run.as_str()).unwrap().summary.status,
        RunStatus::Running
    );
    let mut live = svc.live();
    model.gate.add_permits(1);
    svc.call(Op::ResumeRun {
        run: run.to_string(),
        answers: Vec::new(),
        messages: Vec::new(),
        input: InputMode::Approve,
    })
    .await
    .unwrap();
    let planned = within("the plan", svc.planned(&run, &mut live))
        .await
        .unwrap()
        .expect("planned");
    assert_eq!(planned.workflow, "architecture_discussion");
    within("the run's end", svc.wait_run(&run)).await;
    svc.flush().await.unwrap();
    let state = svc.run_state(&run).unwrap();
    assert_eq!(state.status, RunStatus::Succeeded, "{:?}", state.error);
    // The planning node ran again (its first activation was interrupted), once more.
    let starts: Vec<String> = activations_of(&svc, &run)
        .into_iter()
        .filter(|a| a.starts_with("orchestrate"))
        .collect();
    assert_eq!(starts, ["orchestrate#1", "orchestrate#1"]);
}
