//! The `staged_review` stage tools through the `Tool` trait against the store-backed sink on a
//! temporary repository with a run worktree.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_core::service::{Service, ServiceOptions};
use trellis_core::stage_tools::{StageRole, StageSignal, StageSink, StageTools, StoreSink};
use trellis_protocol::{ArtifactStatus, Op, ReviewAction, RunId};
use trellis_store::Store;
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::ScriptedProvider;
use trellis_tools::worktree::RunWorktree;
use trellis_tools::{NonInteractive, ToolContext, ToolEnv, ToolOutput, ToolsConfig, Workspace};

use super::common::{CONFIG, inventory, path_of, runtime};

struct Fixture {
    _ws: TempWorkspace,
    repo: PathBuf,
    svc: Arc<Service>,
    store: Arc<Store>,
    wt: RunWorktree,
    run: RunId,
    sink: Arc<StoreSink>,
    tools: StageTools,
}

fn fixture() -> Fixture {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let rt = runtime(&repo, &ScriptedProvider::new([]));
    let store = rt.store().clone();
    let svc = Service::start(rt, ServiceOptions::default());
    let run = RunId::new();
    let wt = RunWorktree::create(&repo, &run).unwrap();
    store.put_change_set(wt.record(1)).unwrap();
    let sink = Arc::new(StoreSink::new(store.clone(), &repo, run.clone()));
    let tools = StageTools::new(sink.clone());
    Fixture {
        _ws: ws,
        repo,
        svc,
        store,
        wt,
        run,
        sink,
        tools,
    }
}

impl Fixture {
    /// Calls `name` as `role`'s node would.
    async fn call(
        &self,
        role: StageRole,
        name: &str,
        args: Value,
    ) -> Result<ToolOutput, trellis_tools::Error> {
        let tool = self
            .tools
            .tools(role)
            .into_iter()
            .find(|t| t.spec().name == name)
            .unwrap_or_else(|| panic!("{role:?} has no tool {name}"));
        let config = Arc::new(ToolsConfig::default());
        let workspace = Workspace::new(&self.wt.path, &config.secrets).unwrap();
        let mut env = ToolEnv::new(
            workspace,
            config,
            Arc::new(NonInteractive { approve: false }),
        );
        env.run = Some(self.run.clone());
        env.node = Some(role.as_str().to_owned());
        env.base_commit = Some(self.wt.base.clone());
        let ctx = ToolContext::new(env, name, args.clone(), CancellationToken::new());
        tool.call(&ctx, args).await
    }

    fn artifacts(&self, kind: &str) -> Vec<trellis_protocol::Artifact> {
        let mut all = self.store.artifacts(&self.run).unwrap();
        all.retain(|a| a.kind == kind);
        all
    }

    fn file(&self, name: &str) -> String {
        let path = self
            .repo
            .join(".trellis/runs")
            .join(self.run.as_str())
            .join("artifacts")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    async fn show(&self) -> Value {
        self.svc
            .call(Op::Review {
                run: self.run.to_string(),
                action: ReviewAction::Show,
            })
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_scope_refuses_an_invalid_card_then_stores_versions_and_files() {
    let f = fixture();
    let err = f
        .call(
            StageRole::Scoping,
            "submit_scope",
            json!({"inscope": ["stock reservations"]}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("scope card: `in_scope` is missing; give a list of at least one string"),
        "{err}"
    );
    assert!(err.contains("ignored unknown field(s) `inscope`"), "{err}");
    assert!(
        err.contains("call submit_scope again with the whole scope card"),
        "{err}"
    );
    assert!(f.artifacts("scope_card").is_empty());

    let out = f
        .call(
            StageRole::Scoping,
            "submit_scope",
            json!({"in_scope": ["reservations expire"], "constraints": ["keep the API"]}),
        )
        .await
        .unwrap();
    assert!(
        out.text.contains("(version 1) for the user's approval"),
        "{}",
        out.text
    );
    assert!(out.text.contains("End your turn"), "{}", out.text);
    let v1 = f.artifacts("scope_card");
    assert_eq!(v1.len(), 1);
    assert_eq!(v1[0].version, 1);
    assert_eq!(v1[0].status, ArtifactStatus::AwaitingApproval);
    assert_eq!(v1[0].node.as_ref().unwrap().as_str(), "scoping");
    let card: Value = serde_json::from_str(&v1[0].content).unwrap();
    assert_eq!(card["in_scope"], json!(["reservations expire"]));
    assert_eq!(f.file("scope_card.v1.json"), v1[0].content);
    assert_eq!(f.file("scope_card.json"), v1[0].content);

    f.call(
        StageRole::Scoping,
        "submit_scope",
        json!({"in_scope": ["reservations expire after a timeout"]}),
    )
    .await
    .unwrap();
    let both = f.artifacts("scope_card");
    assert_eq!(both.iter().map(|a| a.version).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(f.file("scope_card.v1.json"), v1[0].content);
    assert_eq!(f.file("scope_card.v2.json"), both[1].content);
    assert_eq!(f.file("scope_card.json"), both[1].content);
    let submitted = f
        .sink
        .signals()
        .iter()
        .filter(|s| matches!(s, StageSignal::Submitted(_)) && s.ends_stage())
        .count();
    assert_eq!(submitted, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_comments_and_verdict_show_in_trellis_review() {
    let f = fixture();
    let review = StageRole::Review;
    f.call(
        review,
        "add_line_comment",
        json!({"path": "inventory.py", "line": 27, "comment": "check quantity > 0",
               "severity": "major"}),
    )
    .await
    .unwrap();
    f.call(
        review,
        "add_file_comment",
        json!({"path": "test_inventory.py", "comment": "no test for release"}),
    )
    .await
    .unwrap();
    let out = f
        .call(
            review,
            "add_review_comment",
            json!({"comment": "Small and clear."}),
        )
        .await
        .unwrap();
    assert!(out.text.contains("(3 in this review)"), "{}", out.text);
    let refused = f
        .call(
            review,
            "complete_review",
            json!({"verdict": "LGTM", "summary": "ok"}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(
            "unknown verdict `LGTM`; use one of APPROVED, NEEDS_REVISION, HUMAN_REVIEW_REQUESTED"
        ),
        "{refused}"
    );
    f.call(
        review,
        "complete_review",
        json!({"verdict": "needs revision", "summary": "Validate quantities."}),
    )
    .await
    .unwrap();

    let shown = f.show().await;
    let comments = shown["comments"].as_array().unwrap();
    assert_eq!(comments.len(), 3, "{shown}");
    assert_eq!(comments[0]["author"], "review");
    assert_eq!(comments[0]["node"], "review");
    assert_eq!(
        comments[0]["comment"],
        json!({"path": "inventory.py", "line": 27, "severity": "warning",
               "body": "check quantity > 0"})
    );
    assert_eq!(comments[1]["comment"]["path"], "test_inventory.py");
    assert_eq!(comments[2]["comment"]["body"], "Small and clear.");
    let agent = &shown["agentReview"];
    assert_eq!(agent["verdict"], "NEEDS_REVISION", "{shown}");
    assert_eq!(agent["status"], "awaiting_approval");
    assert_eq!(agent["comments"].as_array().unwrap().len(), 3);

    // A second round of review counts only its own comments.
    f.call(review, "add_review_comment", json!({"comment": "Fixed."}))
        .await
        .unwrap();
    f.call(
        review,
        "complete_review",
        json!({"verdict": "APPROVED", "summary": "Good now."}),
    )
    .await
    .unwrap();
    let shown = f.show().await;
    assert_eq!(shown["comments"].as_array().unwrap().len(), 4);
    assert_eq!(shown["agentReview"]["verdict"], "APPROVED");
    assert_eq!(shown["agentReview"]["version"], 2);
    assert_eq!(
        shown["agentReview"]["comments"][0]["comment"]["body"],
        "Fixed."
    );
    assert_eq!(f.file("review.json"), f.artifacts("review")[1].content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_diff_shows_the_run_worktree_change() {
    let f = fixture();
    let nothing = f
        .call(StageRole::Review, "get_diff", json!({}))
        .await
        .unwrap();
    assert_eq!(nothing.text, "This run changed nothing.\n");
    let file = f.wt.path.join("inventory.py");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("quantity must be positive", "quantity must be > 0"),
    )
    .unwrap();
    f.wt.commit("pulsing", "clearer message").unwrap();
    std::fs::write(f.wt.path.join("NOTES.md"), "draft\n").unwrap();
    let diff = f
        .call(StageRole::Review, "get_diff", json!({}))
        .await
        .unwrap()
        .text;
    assert!(diff.starts_with("1 file(s) changed, +1 -1"), "{diff}");
    assert!(diff.contains("── inventory.py (modified, +1 -1)"), "{diff}");
    assert!(
        diff.contains("      -            raise ValueError(\"quantity must be positive\")"),
        "{diff}"
    );
    assert!(
        diff.contains("   18 +            raise ValueError(\"quantity must be > 0\")"),
        "{diff}"
    );
    assert!(diff.contains("Not yet committed in the worktree"), "{diff}");
    assert!(diff.contains("?? NOTES.md"), "{diff}");
    let other = f
        .call(
            StageRole::Review,
            "get_diff",
            json!({"path": "test_inventory.py"}),
        )
        .await
        .unwrap()
        .text;
    assert!(
        other.starts_with("test_inventory.py is not changed by this run."),
        "{other}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_scope_card_returns_the_approved_card() {
    let f = fixture();
    let none = f
        .call(StageRole::Review, "get_scope_card", json!({}))
        .await
        .unwrap();
    assert!(
        none.text.starts_with("This run has no approved scope card"),
        "{}",
        none.text
    );
    f.call(
        StageRole::Scoping,
        "submit_scope",
        json!({"in_scope": ["reservations expire"], "out_of_scope": ["pricing"]}),
    )
    .await
    .unwrap();
    let id = f.artifacts("scope_card")[0].id;
    f.store
        .set_artifact_status(id, ArtifactStatus::Approved, None)
        .unwrap();
    let card = f
        .call(StageRole::Review, "get_scope_card", json!({}))
        .await
        .unwrap()
        .text;
    assert!(
        card.contains("## In scope\n\n- reservations expire\n\n## Out of scope\n\n- pricing"),
        "{card}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_tools_signal_the_handler() {
    let f = fixture();
    let out = f
        .call(
            StageRole::Pulsing,
            "request_extension",
            json!({"reason": "tests are slow", "turns": 5}),
        )
        .await
        .unwrap();
    assert!(
        out.text.starts_with("Your request was recorded."),
        "{}",
        out.text
    );
    let answered = f
        .call(
            StageRole::Pulsing,
            "ask_questions",
            json!({"questions": ["Keep the old API?", {"question": "Which DB?",
                                                        "options": ["sqlite", "pg"]}]}),
        )
        .await
        .unwrap();
    assert!(
        answered
            .text
            .starts_with("Q: Keep the old API?\nA: (no answer"),
        "{}",
        answered.text
    );
    assert!(answered.text.contains("Q: Which DB?"), "{}", answered.text);
    let empty = f
        .call(
            StageRole::Pulsing,
            "complete_pulse",
            json!({"summary": " "}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(empty.contains("`summary` is empty"), "{empty}");
    f.call(
        StageRole::Pulsing,
        "complete_pulse",
        json!({"summary": "P1 and P2 done, tests pass"}),
    )
    .await
    .unwrap();
    let kinds: Vec<&str> = f
        .sink
        .signals()
        .iter()
        .map(|s| match s {
            StageSignal::Extension {
                turns: Some(5),
                granted: None,
                ..
            } => "extension",
            StageSignal::Questions { answered: true, .. } => "questions",
            StageSignal::PulseComplete { .. } => "pulse",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["extension", "questions", "pulse"]);
    let pulse = f.artifacts("pulse_summary");
    assert_eq!(pulse[0].content, "P1 and P2 done, tests pass");
    assert_eq!(f.file("pulse_summary.md"), "P1 and P2 done, tests pass");
}
