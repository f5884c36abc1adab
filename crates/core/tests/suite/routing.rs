//! Failure routing end to end (`docs/workflows.md`, "Failure routing"): the feature
//! workflow's unchanged YAML, its agents playing a scripted model on the inventory example
//! (code generation fixes the bug, so the tests pass). A failure route to DONE ends the run
//! there; one back to a stage is taken at most `max_attempts` times, enriched by adaptive
//! retrieval, then the run aborts.

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_agents::Overrides;
use trellis_core::InputMode;
use trellis_graph::RunOutcome;
use trellis_llm::ChatRequest;
use trellis_protocol::RunStatus;
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_tools::git::Git;
use trellis_tools::review;

use super::common::*;

const BUG: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) + quantity";
const FIX: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) - quantity";

const FINDING: &str = "inventory.py: commit accepts a negative quantity, which adds stock";
const LINT: &str = "inventory.py:12:80: E501 line too long (93 > 79 characters)";

/// The stage an agent's request belongs to (the task message's `Stage:` line).
fn stage_of(r: &ChatRequest) -> String {
    text(r)
        .lines()
        .find_map(|l| l.strip_prefix("Stage: "))
        .map(|s| s.split(' ').next().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// Answers by stage: code generation fixes the bug on its first attempt, the tests pass,
/// security review reports `FINDING`, and in lint_and_format the formatter reports `LINT`.
/// The lint stage's two agents run at once, so the answers cannot be a fixed sequence.
fn agents() -> ScriptedProvider {
    ScriptedProvider::responding(|r| {
        if is_queries(r) {
            return queries();
        }
        let first = !text(r).contains("This is attempt");
        match stage_of(r).as_str() {
            "code_generation" if first && calls(r) == 0 => tool(
                "edit_file",
                json!({ "path": "inventory.py", "old_string": BUG, "new_string": FIX }),
            ),
            "code_generation" => report(false, "commit removes shipped units from the stock"),
            "test_generation_and_execution" => report(false, "all tests pass"),
            "security_review" => Turn::Json(json!({
                "failure": true, "output": "one finding", "files_changed": [], "findings": [FINDING]
            })),
            "lint_and_format" if system(r).contains("formatted and lint-clean") => {
                Turn::Json(json!({
                    "failure": true, "output": "flake8 still fails", "files_changed": [], "findings": [LINT]
                }))
            }
            "lint_and_format" => report(false, "nothing to lint"),
            other => panic!("no answer for stage `{other}`: {}", text(r)),
        }
    })
}

/// The workspace (removed when dropped), the runtime, the outcome and the activations.
type Ran = (
    TempWorkspace,
    Arc<trellis_core::Runtime>,
    RunOutcome,
    Vec<String>,
);

/// Runs the feature workflow on the inventory example with every stage but `skip`.
async fn run(script: &ScriptedProvider, skip: &str) -> Ran {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let rt = runtime(&repo, script);
    let overrides = Overrides {
        workflow: Some("feature_with_iterative_testing".into()),
        include: ["security_review", "lint_and_format"]
            .into_iter()
            .filter(|s| *s != skip)
            .map(str::to_owned)
            .collect(),
        skip: vec![skip.into()],
    };
    let (orchestration, plan) = rt
        .plan(
            "Fix the stock bookkeeping of commit",
            &overrides,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let (handle, _ctx) = rt
        .start(&plan, &orchestration, options(InputMode::Approve))
        .unwrap();
    let run = handle.id().clone();
    let outcome = handle.wait().await.unwrap();
    rt.store().flush().unwrap();
    let activations = activations(rt.store().as_ref(), &run);
    (ws, rt, outcome, activations)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lint_failure_ends_the_run_done_with_the_report_and_the_change_kept() {
    let script = agents();
    let (_ws, rt, outcome, activations) = run(&script, "security_review").await;
    assert_eq!(outcome.status, RunStatus::Succeeded, "{:?}", outcome.error);
    assert_eq!(outcome.terminal.as_ref().unwrap().as_str(), "DONE");
    assert_eq!(
        activations[..3],
        [
            "upfront_retrieval#1",
            "code_generation#1",
            "test_generation_and_execution#1"
        ]
    );
    assert!(
        !activations
            .iter()
            .any(|a| a.starts_with("adaptive_retrieval")),
        "DONE is taken as written: {activations:?}"
    );
    assert_eq!(activations.last().unwrap(), "DONE#1");
    let lint = outcome
        .state
        .get_in("stage_results", "lint_and_format")
        .unwrap();
    assert_eq!(lint["failure"], true, "{lint}");
    assert!(
        lint["output"]["findings"].to_string().contains("E501"),
        "{lint}"
    );
    // The fix is in the change set, for review.
    let rec = rt.store().change_set(outcome.run.as_str()).unwrap();
    let set = review::load(
        &Git::new(&rec.repo),
        &outcome.run,
        &rec.base_commit,
        &rec.branch,
    )
    .unwrap();
    let files: Vec<&str> = set.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["inventory.py"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_security_finding_sends_the_code_back_once_and_a_second_one_aborts() {
    let script = agents();
    let (_ws, _rt, outcome, activations) = run(&script, "lint_and_format").await;
    assert_eq!(
        activations,
        [
            "upfront_retrieval#1",
            "code_generation#1",
            "test_generation_and_execution#1",
            "security_review#1",
            "adaptive_retrieval#1",
            "code_generation#2",
            "test_generation_and_execution#2",
            "security_review#2",
            "ABORT#1",
        ]
    );
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.clone().unwrap_or_default();
    assert!(
        error.contains("security_review") && error.contains("max_attempts (1) reached"),
        "{error}"
    );
    // The retried code stage was told what the review found.
    let requests = script.requests();
    let code2 = requests
        .iter()
        .find(|r| stage_of(r) == "code_generation" && text(r).contains("This is attempt 2"))
        .expect("the second code attempt");
    let enriched = code2
        .messages
        .iter()
        .find(|m| m.content.starts_with("## ENRICHED CONTEXT"))
        .expect("enriched context in the retry's prompt");
    assert!(enriched.content.contains(FINDING), "{}", enriched.content);
}
