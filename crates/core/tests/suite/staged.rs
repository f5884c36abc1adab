//! The `staged_review` workflow end to end in the runtime service with the scripted model:
//! scoping → gate → research → gate → planning → gate → execution → review → gate, with a
//! request for changes on the scope card, a NEEDS_REVISION review that sends execution back
//! with the feedback, artifacts stored as versions and files, and review comments shown by
//! the change set's review.

use serde_json::json;
use trellis_core::service::{
    DriveEnd, Followed, LiveEvent, OpError, RunFrontEnd, Service, ServiceOptions,
};
use trellis_llm::ChatRequest;
use trellis_protocol::records::{RunFilter, RunState};
use trellis_protocol::{
    ArtifactStatus, InputMode, Op, ReviewAction, RunId, RunStatus, ServiceEventBody, StreamId,
    WorkspaceEvent,
};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

const BUG: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) + quantity";
const FIX: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) - quantity";

/// What each stage role does: one tool call per turn, then its report.
fn script(r: &ChatRequest) -> Turn {
    let (sys, all, n) = (system(r), text(r), calls(r));
    if sys.contains("scoping a change request") {
        let cli_out = all.contains("Leave the CLI out");
        return match n {
            0 => tool(
                "submit_scope",
                json!({
                    "in_scope": ["Fix Inventory.commit's stock bookkeeping"],
                    "out_of_scope": if cli_out { json!(["the CLI"]) } else { json!([]) },
                    "constraints": ["keep the public API"],
                }),
            ),
            _ => report(false, "scope submitted"),
        };
    }
    if sys.contains("researching a codebase") {
        return match n {
            0 => tool(
                "submit_research",
                json!({
                    "key_files": [{ "path": "inventory.py", "why": "Inventory.commit" }],
                    "patterns": ["plain classes"],
                    "recommendations": ["subtract shipped units"],
                }),
            ),
            _ => report(false, "research submitted"),
        };
    }
    if sys.contains("planning an approved") {
        return match n {
            0 => tool(
                "submit_plan",
                json!({
                    "approach_summary": "Subtract shipped units in commit.",
                    "pulses": [{ "id": "P1", "title": "fix commit", "description": "use -", "files": ["inventory.py"] }],
                }),
            ),
            _ => report(false, "plan submitted"),
        };
    }
    if sys.contains("implementing an approved plan") {
        let first = !all.contains("Feedback to address");
        return match (first, n) {
            (true, 0) => tool(
                "edit_file",
                json!({ "path": "inventory.py", "old_string": BUG, "new_string": FIX }),
            ),
            (true, 1) | (false, 0) => tool(
                "complete_pulse",
                json!({ "summary": "commit subtracts shipped units" }),
            ),
            _ => report(false, "pulse complete"),
        };
    }
    if sys.contains("meticulous code reviewer") {
        let second = all.contains("attempt 2");
        return match (second, n) {
            (false, 0) => tool(
                "add_line_comment",
                json!({ "path": "inventory.py", "line": 1, "comment": "add a regression test" }),
            ),
            (false, 1) => tool(
                "complete_review",
                json!({ "verdict": "NEEDS_REVISION", "summary": "add a regression test" }),
            ),
            (true, 0) => tool(
                "complete_review",
                json!({ "verdict": "APPROVED", "summary": "the fix is right" }),
            ),
            _ => report(false, "review complete"),
        };
    }
    report(false, "nothing to do")
}

async fn stopped(svc: &Service, run: &RunId) -> trellis_protocol::records::RunState {
    svc.wait_run(run).await;
    svc.flush().await.unwrap();
    svc.run_state(run).unwrap()
}

/// The latest version of artifact `kind` of `run`.
fn artifact(svc: &Service, run: &RunId, kind: &str) -> trellis_protocol::Artifact {
    svc.artifacts(run)
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == kind)
        .max_by_key(|a| a.version)
        .unwrap_or_else(|| panic!("no {kind} artifact"))
}

/// Waits at gate `node`, checks it awaits `kind`, then approves that artifact by id.
async fn approve(svc: &Service, run: &RunId, node: &str, kind: &str) {
    let o = stopped(svc, run).await;
    assert_eq!(o.status, RunStatus::WaitingInput, "{:?}", o.error);
    assert_eq!(o.waiting.len(), 1, "{:?}", o.waiting);
    assert_eq!(o.waiting[0].0.as_str(), node);
    let a = artifact(svc, run, kind);
    assert_eq!(a.status, ArtifactStatus::AwaitingApproval);
    assert_eq!(o.waiting[0].1.data["artifact"], json!(a.id));
    svc.call(Op::Approve {
        run: run.to_string(),
        node: None,
        artifact: Some(a.id),
        comment: None,
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_review_runs_with_approvals_changes_and_a_revision() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let provider = ScriptedProvider::responding(script);
    let svc = Service::start(runtime(&repo, &provider), ServiceOptions::default());
    let out = svc.call(start_staged()).await.unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());

    // The scope card waits; request changes on the artifact: scoping runs again with them.
    let o = stopped(&svc, &run).await;
    assert_eq!(o.status, RunStatus::WaitingInput, "{:?}", o.error);
    let v1 = artifact(&svc, &run, "scope_card");
    assert_eq!(
        (v1.version, v1.status),
        (1, ArtifactStatus::AwaitingApproval)
    );
    svc.call(Op::RequestChanges {
        run: run.to_string(),
        node: None,
        artifact: Some(v1.id),
        feedback: "Leave the CLI out of scope.".into(),
    })
    .await
    .unwrap();
    approve(&svc, &run, "approve_scope", "scope_card").await;
    let cards: Vec<_> = svc
        .artifacts(&run)
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == "scope_card")
        .collect();
    assert_eq!(cards.len(), 2);
    assert_eq!(cards[0].status, ArtifactStatus::ChangesRequested);
    assert_eq!(
        cards[0].feedback.as_deref(),
        Some("Leave the CLI out of scope.")
    );
    assert_eq!(cards[1].status, ArtifactStatus::Approved);
    assert!(cards[1].content.contains("the CLI"), "{}", cards[1].content);

    approve(&svc, &run, "approve_research", "research_card").await;
    approve(&svc, &run, "approve_plan", "plan").await;
    // Execution → review is automatic; the first review asks for a revision, the second
    // approves, and its review waits for the user.
    approve(&svc, &run, "approve_review", "review").await;
    let o = stopped(&svc, &run).await;
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    assert_eq!(o.terminal.as_ref().map(|t| t.as_str()), Some("DONE"));
    assert_eq!(
        activations_of(&svc, &run),
        // The run's first node plans; a gate appears twice: when it asks, and when it runs
        // again with the answer.
        [
            "orchestrate#1",
            "scoping#1",
            "approve_scope#1",
            "approve_scope#1",
            "scoping#2",
            "approve_scope#2",
            "approve_scope#2",
            "research#1",
            "approve_research#1",
            "approve_research#1",
            "planning#1",
            "approve_plan#1",
            "approve_plan#1",
            "execution#1",
            "review#1",
            "execution#2",
            "review#2",
            "approve_review#1",
            "approve_review#1",
            "DONE#1",
        ]
    );
    // The revision carried the reviewer's feedback; the first review is marked as having
    // requested changes, the second is approved.
    let reviews: Vec<_> = svc
        .artifacts(&run)
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == "review")
        .collect();
    assert_eq!(reviews.len(), 2);
    assert_eq!(reviews[0].status, ArtifactStatus::ChangesRequested);
    assert_eq!(reviews[1].status, ArtifactStatus::Approved);
    let execution = o.node("execution").unwrap();
    assert_eq!(execution.attempt, 2);
    let requests = provider.requests();
    let second_pulse = requests
        .iter()
        .filter(|r| system(r).contains("implementing an approved plan"))
        .find(|r| text(r).contains("Feedback to address"))
        .expect("the revision saw the review's feedback");
    assert!(text(second_pulse).contains("add a regression test"));
    // The second scoping request carried the user's feedback.
    assert!(
        requests
            .iter()
            .any(|r| system(r).contains("scoping") && text(r).contains("Leave the CLI out"))
    );

    // Artifacts are files too, versioned; the reviewer's comment is in the change set's
    // review, and the fix is in the change set.
    let dir = repo
        .join(".trellis/runs")
        .join(run.as_str())
        .join("artifacts");
    for f in [
        "scope_card.v1.json",
        "scope_card.v2.json",
        "scope_card.json",
        "plan.json",
    ] {
        assert!(dir.join(f).is_file(), "{} missing", dir.join(f).display());
    }
    let show = svc
        .call(Op::Review {
            run: run.to_string(),
            action: ReviewAction::Show,
        })
        .await
        .unwrap();
    let comments = show["comments"].to_string();
    assert!(comments.contains("add a regression test"), "{show}");
    assert!(
        show["changeSet"]
            .to_string()
            .contains("get(sku, 0) - quantity"),
        "{show}"
    );

    // Every artifact awaiting approval was announced (workflow:approval_needed).
    let events = svc.stream_events(&StreamId::Workspace, 0, None).unwrap();
    let announced = events
        .iter()
        .filter(|e| {
            matches!(&e.event, ServiceEventBody::Workspace(WorkspaceEvent::ArtifactChanged {
                status: ArtifactStatus::AwaitingApproval, run: r, ..
            }) if r == &run)
        })
        .count();
    assert!(announced >= 6, "{announced} approval_needed events");
}

/// A front-end of the run driver that approves every gate it is asked about (or, with
/// `refuse`, answers nothing), remembering what it was asked.
struct Approver {
    refuse: bool,
    follows: usize,
    asked: Vec<String>,
}

impl RunFrontEnd for Approver {
    type Error = String;

    async fn follow(
        &mut self,
        _live: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<LiveEvent>>,
        _run: &RunId,
    ) -> Result<Followed, String> {
        // The driver waits for the run to stop executing itself.
        self.follows += 1;
        Ok(Followed::Stopped)
    }

    async fn ask(
        &mut self,
        state: &RunState,
    ) -> Result<Option<Vec<trellis_protocol::NodeAnswer>>, String> {
        self.asked
            .extend(state.waiting.iter().map(|(node, _)| node.to_string()));
        if self.refuse {
            return Ok(None);
        }
        Ok(Some(
            state
                .waiting
                .iter()
                .map(|(node, _)| trellis_protocol::NodeAnswer {
                    node: node.clone(),
                    answer: trellis_protocol::Answer::approve(),
                })
                .collect(),
        ))
    }

    fn service_error(&self, error: OpError) -> String {
        error.message
    }
}

fn start_staged() -> Op {
    Op::StartRun {
        request: "Fix the stock bookkeeping of commit".into(),
        repo: None,
        workflow: Some("staged_review".into()),
        include: Vec::new(),
        skip: Vec::new(),
        input: InputMode::Interrupts,
        budgets: None,
        plan_only: false,
    }
}

/// Starts `staged_review` in a new workspace and drives it through an [`Approver`] (one that
/// refuses to answer, with `refuse`): the workspace, the service, the run, the front-end
/// and how the drive ended.
async fn drive_staged(
    refuse: bool,
) -> (
    trellis_test_support::TempWorkspace,
    std::sync::Arc<Service>,
    RunId,
    Approver,
    DriveEnd,
) {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let provider = ScriptedProvider::responding(script);
    let svc = Service::start(runtime(&repo, &provider), ServiceOptions::default());
    let mut live = svc.live();
    let out = svc.call(start_staged()).await.unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    let mut front = Approver {
        refuse,
        follows: 0,
        asked: Vec::new(),
    };
    let end = svc
        .drive(&run, &mut live, InputMode::Interrupts, &mut front)
        .await
        .unwrap();
    (ws, svc, run, front, end)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_driver_asks_the_front_end_at_every_gate_and_resumes_to_the_end() {
    let (_ws, svc, run, front, end) = drive_staged(false).await;
    let DriveEnd::Ended(state) = end else {
        panic!("the run did not end: {end:?}");
    };
    assert_eq!(state.status, RunStatus::Succeeded, "{:?}", state.error);
    assert_eq!(
        front.asked,
        [
            "approve_scope",
            "approve_research",
            "approve_plan",
            "approve_review"
        ]
    );
    assert_eq!(
        front.follows, 5,
        "followed after the start and after each answer"
    );
    let stat = svc.change_set_stat(&run).unwrap();
    assert!(stat.contains("inventory.py"), "{stat}");

    // The read side shows the finished run with its workflow, its request and its graph.
    let views = svc.run_views(&RunFilter::default()).unwrap();
    assert_eq!(views.len(), 1);
    let view = &views[0];
    assert_eq!(view.record.id, run);
    assert_eq!(view.workflow.as_deref(), Some("staged_review"));
    assert_eq!(
        view.request.as_deref(),
        Some("Fix the stock bookkeeping of commit")
    );
    assert_eq!(view.stage, None, "a finished run is in no stage");
    assert!(view.usage.run.calls > 0);
    let graph = svc.run_graph(&run).unwrap();
    assert_eq!(graph.workflow.as_deref(), Some("staged_review"));
    assert_eq!(graph.entry.as_deref(), Some("scoping"));
    assert!(graph.state.nodes.iter().any(|n| n.id.as_str() == "review"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_end_that_cannot_answer_leaves_the_run_paused_in_its_stage() {
    let (_ws, svc, run, front, end) = drive_staged(true).await;
    let DriveEnd::Paused(state) = end else {
        panic!("the run did not stay paused: {end:?}");
    };
    assert_eq!(state.status, RunStatus::WaitingInput);
    assert_eq!(front.asked, ["approve_scope"]);
    assert_eq!(svc.interrupts(&run).unwrap().len(), 1);
    // Listed as waiting in the gate's stage, with what it waits for.
    let view = svc.run_view(run.as_str()).unwrap();
    assert_eq!(view.record.summary.status, RunStatus::WaitingInput);
    let listed = svc.run_views(&RunFilter::default()).unwrap();
    assert_eq!(listed[0].stage, Some(Some("approve_scope".to_owned())));
}
