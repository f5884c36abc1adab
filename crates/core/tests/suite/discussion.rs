//! The orchestrator's structured answer picks the workflow and its optional stage; the
//! discussion workflow's document strategy skips AST work; interrupts (approval, budget)
//! pause the run and resume it where it stopped.

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_agents::{DecidedBy, Overrides};
use trellis_core::InputMode;
use trellis_index::{Index, IndexConfig};
use trellis_protocol::{Answer, Command, InterruptKind, RunStatus};
use trellis_test_support::scripted::ScriptedProvider;

use super::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orchestrator_answer_decides_and_discussion_skips_ast_work() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let script = ScriptedProvider::new([
        tool_free_orchestrator(),
        queries(),
        queries(),
        report(
            false,
            "Stock is kept in memory (ADR 0001): a restart loses it; persistence is next.",
        ),
        tool(
            "write_file",
            json!({ "path": "docs/adr/0002-persist-stock.md", "content": "# ADR 0002: Persist stock in SQLite\n\n## Status\n\nProposed.\n" }),
        ),
        report(false, "recorded ADR 0002"),
    ]);
    let rt = runtime(&repo, &script);
    let (orchestration, plan) = rt
        .plan(
            "Let's discuss the decision to keep stock in memory",
            &Overrides::default(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(orchestration.workflow, "architecture_discussion");
    assert_eq!(orchestration.workflow_by, DecidedBy::Model);
    assert_eq!(orchestration.stages[0].stage, "decision_documentation");
    assert!(orchestration.stages[0].include);
    assert_eq!(orchestration.stages[0].by, DecidedBy::Model);
    assert!(plan.is_planned("decision_documentation"));
    // The orchestrator saw every workflow, the project context and the request, and was
    // asked for a schema naming only real workflows.
    let ask = &script.requests()[0];
    let all: String = ask.messages.iter().map(|m| m.content.as_str()).collect();
    assert!(all.contains("feature_with_iterative_testing") && all.contains("Python"));
    let schema = &ask.response_format.as_ref().unwrap().schema;
    assert_eq!(
        schema["properties"]["workflow"]["enum"],
        json!([
            "architecture_discussion",
            "bug_fix",
            "feature_with_iterative_testing",
            "staged_review",
            "task_tree",
            "three_phase"
        ])
    );

    let (handle, _ctx) = rt
        .start(&plan, &orchestration, options(InputMode::Interrupts))
        .unwrap();
    let run = handle.id().clone();
    let outcome = handle.wait().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Succeeded, "{:?}", outcome.error);
    rt.store().flush().unwrap();
    assert_eq!(
        activations(rt.store().as_ref(), &run),
        [
            "upfront_retrieval#1",
            "architectural_analysis#1",
            "decision_documentation#1",
            "DONE#1"
        ]
    );
    // The decisions are stored with the run.
    assert_eq!(
        outcome.state.get("orchestrator").unwrap()["workflow"],
        "architecture_discussion"
    );
    // Document strategy: sections indexed, no symbols (the .py files were not parsed).
    let index = Index::open(&repo, IndexConfig::default()).unwrap();
    let counts = index.counts().unwrap();
    assert_eq!(counts.symbols, 0);
    assert!(counts.sections > 0);
    // The analysis got the ADR as context, and the documentation stage saw the analysis.
    let reqs = script.requests();
    let analysis = reqs
        .iter()
        .find(|r| r.messages[0].content.contains("software architect"))
        .unwrap();
    assert!(
        analysis
            .messages
            .iter()
            .any(|m| m.content.starts_with("## RELEVANT CODEBASE") && m.content.contains("0001"))
    );
    let docs = reqs
        .iter()
        .find(|r| r.messages[0].content.contains("technical writer"))
        .unwrap();
    assert!(
        docs.messages
            .iter()
            .any(|m| m.content.contains("a restart loses it"))
    );
    let stages = outcome.state.get("stage_results").unwrap();
    assert_eq!(
        stages["decision_documentation"]["output"]["files_changed"],
        json!(["docs/adr/0002-persist-stock.md"])
    );
}

fn tool_free_orchestrator() -> trellis_test_support::scripted::Turn {
    trellis_test_support::scripted::Turn::Json(json!({
        "reasoning": "The user wants to discuss an architecture decision; recording the outcome helps.",
        "workflow": "architecture_discussion",
        "stages": [{ "stage": "decision_documentation", "include": true, "reason": "record the outcome as an ADR" }]
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_interrupt_pauses_and_the_answer_resumes_the_agent() {
    let ws =
        inventory("[index.embedding]\nbackend = \"none\"\n[agents.retrieval]\ndisabled = true\n");
    let repo = path_of(&ws);
    let script = ScriptedProvider::new([
        tool(
            "shell",
            json!({ "command": "curl -s http://127.0.0.1:9/stock" }),
        ),
        report(false, "could not fetch; analysed the files instead"),
    ]);
    let rt = runtime(&repo, &script);
    let (o, plan) = analysis_only(&rt).await;
    // Give the analysis role the shell for this test through a workspace role file.
    std::fs::create_dir_all(repo.join(".trellis/agents")).unwrap();
    let (handle, _) = rt.start(&plan, &o, options(InputMode::Interrupts)).unwrap();
    let run = handle.id().clone();
    let out = handle.wait().await.unwrap();
    // analysis_agent may not use the shell: the call comes back as an error, no interrupt.
    assert_eq!(
        out.status,
        RunStatus::Succeeded,
        "{:?} {:?}",
        out.error,
        out.state.get("stage_results")
    );
    let calls = rt.store().tool_calls(&run).unwrap();
    assert!(
        calls[0].is_error && calls[0].summary.contains("not allowed"),
        "{calls:?}"
    );

    // Now with a role that may use the shell: the network command needs approval.
    shell_capable_analysis(&repo);
    let script = ScriptedProvider::new([
        tool(
            "shell",
            json!({ "command": "curl -s http://127.0.0.1:9/stock" }),
        ),
        report(
            false,
            "the user refused the network call; analysed the files instead",
        ),
    ]);
    let rt = runtime(&repo, &script);
    let (handle, _) = rt.start(&plan, &o, options(InputMode::Interrupts)).unwrap();
    let run = handle.id().clone();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::WaitingInput);
    let (node, interrupt) = &out.waiting[0];
    assert_eq!(node.as_str(), "architectural_analysis");
    assert_eq!(interrupt.kind, InterruptKind::Approval);
    assert!(interrupt.prompt.contains("curl"), "{}", interrupt.prompt);
    assert_eq!(script.remaining(), 1);
    // Answer in a fresh runtime (as `trellis runs resume --answer` does after a restart).
    rt.store().flush().unwrap();
    let rt2 = runtime(&repo, &script);
    let (handle, _) = rt2
        .resume(
            &run,
            vec![Command::Answer {
                node: node.clone(),
                answer: Answer::reject("no network from agents"),
            }],
            options(InputMode::Interrupts),
        )
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    assert_eq!(script.remaining(), 0);
    // The model was not asked again for the turn before the interrupt, and it saw the
    // refusal as the shell call's result.
    let reqs = script.requests();
    assert_eq!(reqs.len(), 2);
    let last = reqs[1].messages.last().unwrap();
    assert!(
        last.content.contains("no network from agents"),
        "{}",
        last.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_budget_is_not_made_and_a_grant_resumes_it() {
    let ws = inventory(
        "[index.embedding]\nbackend = \"none\"\n[agents.retrieval]\ndisabled = true\n[budgets.run]\ntokens = 50\n",
    );
    let repo = path_of(&ws);
    let script = ScriptedProvider::new([report(false, "analysed")]);
    let rt = runtime(&repo, &script);
    let (o, plan) = analysis_only(&rt).await;
    let (handle, _) = rt.start(&plan, &o, options(InputMode::Interrupts)).unwrap();
    let run = handle.id().clone();
    let out = handle.wait().await.unwrap();
    assert_eq!(
        out.status,
        RunStatus::WaitingInput,
        "{:?} {:?}",
        out.error,
        out.state.get("stage_results")
    );
    assert!(
        out.waiting[0].1.prompt.contains("budget"),
        "{}",
        out.waiting[0].1.prompt
    );
    // The refused call never reached the model.
    assert!(script.requests().is_empty());
    rt.store().flush().unwrap();
    let (handle, _) = rt
        .resume(
            &run,
            vec![Command::Answer {
                node: out.waiting[0].0.clone(),
                answer: Answer(json!({ "grant": 100000 })),
            }],
            options(InputMode::Interrupts),
        )
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(
        out.status,
        RunStatus::Succeeded,
        "{:?} {:?}",
        out.error,
        out.state.get("stage_results")
    );
    assert_eq!(script.requests().len(), 1);
}

/// The discussion workflow without its optional stage (no orchestrator call).
/// A run whose agents only read does no repository work: no worktree, no run branch, no
/// change set. The first agent that can write creates them,
/// from the user's working state at that moment (an uncommitted file included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_readers_creates_no_worktree_and_its_first_writer_creates_it() {
    let ws =
        inventory("[index.embedding]\nbackend = \"none\"\n[agents.retrieval]\ndisabled = true\n");
    let repo = path_of(&ws);
    let script = ScriptedProvider::new([
        report(false, "read the files: stock is kept in memory"),
        report(false, "stock is still kept in memory"),
        tool(
            "write_file",
            json!({ "path": "docs/adr/0002-persist-stock.md", "content": "# ADR 0002\n" }),
        ),
        report(false, "recorded ADR 0002"),
    ]);
    let rt = runtime(&repo, &script);
    let branch_exists = |run: &trellis_protocol::RunId| {
        std::process::Command::new("git")
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("refs/heads/trellis/run-{run}"))
            .current_dir(&repo)
            .status()
            .unwrap()
            .success()
    };

    let (orchestration, plan) = analysis_only(&rt).await;
    let (handle, ctx) = rt
        .start(&plan, &orchestration, options(InputMode::Interrupts))
        .unwrap();
    let run = handle.id().clone();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    rt.store().flush().unwrap();
    assert!(ctx.space.get().is_none());
    assert!(!ctx.space.path().exists(), "{}", ctx.space.path().display());
    assert!(!branch_exists(&run));
    assert!(rt.store().change_set_of(&run).unwrap().is_none());

    // The user's uncommitted file is in the base the writer's worktree starts from.
    std::fs::write(repo.join("NOTES.md"), "uncommitted\n").unwrap();
    let overrides = Overrides {
        workflow: Some("architecture_discussion".into()),
        include: vec!["decision_documentation".into()],
        ..Overrides::default()
    };
    let (orchestration, plan) = rt
        .plan(
            "Discuss the stock API",
            &overrides,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let (handle, ctx) = rt
        .start(&plan, &orchestration, options(InputMode::Interrupts))
        .unwrap();
    let run = handle.id().clone();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    rt.store().flush().unwrap();
    let wt = ctx
        .space
        .get()
        .expect("the writer created the run's worktree");
    assert!(branch_exists(&run));
    let rec = rt.store().change_set_of(&run).unwrap().unwrap();
    assert_eq!(rec.base_commit, wt.base);
    assert_eq!(
        std::fs::read_to_string(wt.path.join("NOTES.md")).unwrap(),
        "uncommitted\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.path.join("docs/adr/0002-persist-stock.md")).unwrap(),
        "# ADR 0002\n"
    );
}

/// A run's own budgets (the start op's) are recorded with it: the process that executes it
/// later — a `trellis worker`, a resume after a crash — applies them without being told.
/// Recorded with 50 tokens, the analysis agent's call waits for a grant; recorded without,
/// the same run goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_recorded_with_its_own_budget_is_held_to_it_where_it_resumes() {
    let ws =
        inventory("[index.embedding]\nbackend = \"none\"\n[agents.retrieval]\ndisabled = true\n");
    let repo = path_of(&ws);
    let script = ScriptedProvider::new([report(false, "analysed")]);
    let rt = runtime(&repo, &script);
    let recorded = |tokens: Option<u64>| {
        let (run, commit) = rt
            .create_planning(
                "Discuss the stock decision",
                &Overrides {
                    workflow: Some("architecture_discussion".into()),
                    skip: vec!["decision_documentation".into()],
                    ..Overrides::default()
                },
                tokens.map(|t| trellis_protocol::Budgets {
                    tokens: Some(t),
                    cost_usd: None,
                }),
                None,
            )
            .unwrap();
        (run, commit)
    };
    // Resumed with no budgets of its own: the recorded 50 tokens hold.
    let (run, commit) = recorded(Some(50));
    commit.await.unwrap();
    let (handle, _ctx) = rt
        .resume(&run, Vec::new(), options(InputMode::Interrupts))
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::WaitingInput, "{:?}", out.error);
    assert!(
        out.waiting[0].1.prompt.contains("budget"),
        "{}",
        out.waiting[0].1.prompt
    );
    assert!(script.requests().is_empty(), "the refused call was made");
    let (run, commit) = recorded(None);
    commit.await.unwrap();
    let (handle, _ctx) = rt
        .resume(&run, Vec::new(), options(InputMode::Interrupts))
        .unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    assert_eq!(script.requests().len(), 1);
}
