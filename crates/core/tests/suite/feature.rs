//! The whole feature workflow with the scripted model on the inventory example, whose test
//! fails until `Inventory.commit` is fixed.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::Overrides;
use trellis_core::InputMode;
use trellis_protocol::RunStatus;
use trellis_test_support::scripted::ScriptedProvider;
use trellis_tools::git::Git;
use trellis_tools::review::{self, Selection};

use super::common::*;

const BUG: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) + quantity";
const FIX: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) - quantity";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tests_fail_twice_adaptive_retrieval_then_code_retries_and_review_applies() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let script = ScriptedProvider::new([
        // Upfront retrieval: queries for the two planned stages.
        queries(),
        queries(),
        // code_generation#1 reads the code and reports (no change yet).
        tool("read_file", json!({ "path": "inventory.py" })),
        tool("grep", json!({ "pattern": "def commit" })),
        report(false, "read inventory.py; nothing to change yet"),
        // A success without a change is questioned once (changes_files); the answer stands.
        report(false, "read inventory.py; no change is needed yet"),
        // test_generation_and_execution#1: the runtime runs the tests; they fail.
        report(false, "tests look fine to me"),
        // adaptive_retrieval#1, then code_generation#2 changes nothing again.
        queries(),
        report(false, "still nothing to change"),
        report(false, "still no change needed"),
        report(false, "tests look fine to me"),
        // adaptive_retrieval#2, then code_generation#3 fixes the bug.
        queries(),
        tool(
            "edit_file",
            json!({ "path": "inventory.py", "old_string": BUG, "new_string": FIX }),
        ),
        report(false, "commit now removes shipped units from the stock"),
        report(false, "all tests pass"),
    ]);
    let rt = runtime(&repo, &script);
    let overrides = Overrides {
        workflow: Some("feature_with_iterative_testing".into()),
        skip: vec!["security_review".into(), "lint_and_format".into()],
        ..Overrides::default()
    };
    let (orchestration, plan) = rt
        .plan(
            "Fix the stock bookkeeping of commit",
            &overrides,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    // Everything was decided on the command line: no orchestrator call was made.
    assert_eq!(orchestration.workflow, "feature_with_iterative_testing");
    assert_eq!(plan.planned.len(), 2);
    let (handle, ctx) = rt
        .start(&plan, &orchestration, options(InputMode::Approve))
        .unwrap();
    let run = handle.id().clone();
    let outcome = handle.wait().await.unwrap();
    rt.store().flush().unwrap();
    assert_eq!(
        outcome.status,
        RunStatus::Succeeded,
        "{:?}\n{:?}\n{:?}\n{}",
        outcome.error,
        rt.store()
            .tool_calls(&run)
            .unwrap()
            .iter()
            .map(|c| format!("{} {} {}", c.tool, c.is_error, c.summary))
            .collect::<Vec<_>>(),
        activations(rt.store().as_ref(), &run),
        serde_json::to_string_pretty(&outcome.state.get("stage_results")).unwrap()
    );
    assert_eq!(outcome.terminal.as_ref().unwrap().as_str(), "DONE");
    assert_eq!(script.remaining(), 0, "every scripted turn was used");
    rt.store().flush().unwrap();
    // The project context does not name the run: two runs of one request on one repository
    // send the model the same prompt (its greedy answers, and so the evaluations, repeat).
    let project: Vec<String> = script
        .requests()
        .iter()
        .flat_map(|r| r.messages.iter().map(|m| m.content.clone()))
        .filter(|m| m.contains("You work in a git worktree"))
        .collect();
    assert!(!project.is_empty());
    assert!(
        project.iter().all(|m| !m.contains(&run.to_string())),
        "{project:?}"
    );

    assert_eq!(
        activations(rt.store().as_ref(), &run),
        [
            "upfront_retrieval#1",
            "code_generation#1",
            "test_generation_and_execution#1",
            "adaptive_retrieval#1",
            "code_generation#2",
            "test_generation_and_execution#2",
            "adaptive_retrieval#2",
            "code_generation#3",
            "test_generation_and_execution#3",
            "DONE#1",
        ]
    );
    // The tests really ran: the failing test's name reached the stage result and, through
    // adaptive retrieval, the retried code stage's prompt.
    let stages = outcome.state.get("stage_results").unwrap();
    let tests = &stages["test_generation_and_execution"];
    assert_eq!(tests["failure"], false);
    assert_eq!(tests["output"]["tests"]["passed"], true);
    let requests = script.requests();
    let code2 = requests
        .iter()
        .find(|r| {
            r.messages
                .iter()
                .any(|m| m.content.contains("This is attempt 2 of this stage"))
        })
        .expect("the second code attempt");
    let enriched = code2
        .messages
        .iter()
        .find(|m| m.content.starts_with("## ENRICHED CONTEXT"))
        .expect("enriched context in the retry's prompt");
    assert!(
        enriched
            .content
            .contains("test_commit_ships_reserved_units"),
        "{}",
        enriched.content
    );
    // Each success without a change was questioned once per activation; the fix was not.
    let questioned = requests
        .iter()
        .filter(|r| {
            r.messages.last().is_some_and(|m| {
                m.content
                    .starts_with("You reported success, but no call that changes files")
            })
        })
        .count();
    assert_eq!(questioned, 2);
    // The upfront context reached the first stage, attributed.
    let code1 = &requests[2];
    let codebase = code1
        .messages
        .iter()
        .find(|m| m.content.starts_with("## RELEVANT CODEBASE"))
        .expect("retrieved context in the first prompt");
    assert!(
        codebase.content.contains("inventory.py"),
        "{}",
        codebase.content
    );
    // Tools were offered per role, and the test role runs the suite through the shell tool.
    assert!(code1.tools.iter().any(|t| t.name == "edit_file"));
    let calls = rt.store().tool_calls(&run).unwrap();
    assert!(calls.iter().any(|c| c.tool == "edit_file"));
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.tool == "shell"
                && c.node_id.as_deref().is_some_and(|n| n.starts_with("test_")))
            .count(),
        3
    );
    // Usage was recorded per call.
    assert!(rt.store().model_calls(&run).unwrap().len() >= 12);

    // Nothing touched the user's tree before review; the change set is exactly the fix.
    let user_file = std::fs::read_to_string(repo.join("inventory.py")).unwrap();
    assert!(user_file.contains(BUG));
    let rec = rt.store().change_set(run.as_str()).unwrap();
    let set = review::load(
        &Git::new(&repo),
        &run,
        &rec.base_commit,
        &ctx.space.get().unwrap().head().unwrap(),
    )
    .unwrap();
    let files: Vec<&str> = set.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["inventory.py"]);
    review::apply(&**rt.store(), &rec, &set, &Selection::all(&set)).unwrap();
    let fixed = std::fs::read_to_string(repo.join("inventory.py")).unwrap();
    assert!(fixed.contains(FIX) && !fixed.contains(BUG));
    let status = std::process::Command::new("python3")
        .args(["-m", "unittest", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(status.success(), "the user's tests pass after review");
    let _: Value = Value::Null;

    // The tool knowledge graph learned each activation's calls: their order and outcomes.
    let graph = trellis_toolgraph::ToolGraph::load(&**rt.store()).unwrap();
    let edge = graph
        .edge("read_file", "grep")
        .expect("code_generation#1 read, then searched");
    assert_eq!(edge.observed_count, 1);
    assert_eq!(graph.calls("edit_file"), Some((1, 1)));
    assert!(
        graph.edge("grep", "edit_file").is_none(),
        "two activations, not one"
    );
}
