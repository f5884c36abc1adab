use std::path::{Path, PathBuf};

use std::sync::Arc;

use trellis_llm::ChatRequest;
use trellis_protocol::RunId;
use trellis_tools::git::Git;
use trellis_tools::worktree::nodes::NODE_BRANCH_PREFIX;

use serde_json::{Value, json};
use trellis_core::{InputMode, RunOptions, Runtime};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

/// A copy of `examples/inventory` as a fresh git repository with `config`.
pub fn inventory(config: &str) -> TempWorkspace {
    trellis_test_support::example_repo("inventory", config).unwrap()
}

/// BM25 only (no embedding model), the unittest runner.
pub const CONFIG: &str = r#"
[index.embedding]
backend = "none"

[agents]
test_command = "python3 -B -m unittest -q"
"#;

/// A runtime over `repo` whose every model role plays `script`.
pub fn runtime(repo: &Path, script: &ScriptedProvider) -> Arc<Runtime> {
    let store = Store::open_workspace(repo, StoreOptions::default()).unwrap();
    let rt = Runtime::open(repo, &[], &[], store).unwrap();
    rt.models().install("local", Arc::new(script.clone()));
    Arc::new(rt)
}

pub fn options(input: InputMode) -> RunOptions {
    RunOptions {
        input,
        ..RunOptions::default()
    }
}

pub fn queries() -> Turn {
    Turn::Json(json!({ "queries": ["Inventory commit stock", "reserve release"] }))
}

pub fn report(failure: bool, output: &str) -> Turn {
    Turn::Json(json!({ "failure": failure, "output": output, "files_changed": [], "findings": [] }))
}

pub fn tool(name: &str, arguments: Value) -> Turn {
    Turn::ToolCall {
        name: name.into(),
        arguments,
    }
}

/// `node#attempt` of every activation, in journal order.
pub fn activations(store: &Store, run: &trellis_protocol::RunId) -> Vec<String> {
    activations_in(store.events(run, 1, None).unwrap())
}

/// `node#attempt` of every activation of a run the service holds, in journal order.
pub fn activations_of(
    svc: &trellis_core::service::Service,
    run: &trellis_protocol::RunId,
) -> Vec<String> {
    activations_in(svc.run_events(run, 1, None).unwrap())
}

fn activations_in(events: Vec<trellis_protocol::Event>) -> Vec<String> {
    events
        .into_iter()
        .filter_map(|e| match e.kind {
            trellis_protocol::EventKind::NodeTransition {
                node,
                attempt,
                to: trellis_protocol::NodeState::Running,
                ..
            } => Some(format!("{node}#{attempt}")),
            _ => None,
        })
        .collect()
}

/// Overrides the discussion's analysis agent in `repo` with one that may run the shell.
pub fn shell_capable_analysis(repo: &Path) {
    std::fs::create_dir_all(repo.join(".trellis/agents")).unwrap();
    std::fs::write(
        repo.join(".trellis/agents/analysis_agent.yaml"),
        "name: analysis_agent\nrole: You analyse.\nobjective: Analyse.\ntools: [shell, read_file]\n",
    )
    .unwrap();
}

pub fn path_of(ws: &TempWorkspace) -> PathBuf {
    ws.path().canonicalize().unwrap()
}

/// The repository's node branches.
pub fn node_branches(repo: &Path) -> Vec<String> {
    Git::new(repo)
        .text(&[
            "for-each-ref",
            "--format=%(refname:strip=2)",
            &format!("refs/heads/{}", NODE_BRANCH_PREFIX.trim_end_matches('/')),
        ])
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The node worktree directories of `run` left on disk.
pub fn node_dirs(repo: &Path, run: &RunId) -> Vec<String> {
    let dir = repo.join(".trellis/nodes").join(run.as_str()).join("work");
    match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// `path` on the run branch, if it is there.
pub fn on_run_branch(repo: &Path, run: &RunId, path: &str) -> Option<String> {
    Git::new(repo)
        .try_run(&["show", &format!("trellis/run-{run}:{path}")])
        .unwrap()
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The system prompt of a request (which role is asking).
pub fn system(r: &ChatRequest) -> &str {
    r.messages.first().map_or("", |m| m.content.as_str())
}

/// Every message of a request, concatenated.
pub fn text(r: &ChatRequest) -> String {
    r.messages.iter().map(|m| m.content.as_str()).collect()
}

/// Tool results so far in a request's conversation.
pub fn calls(r: &ChatRequest) -> usize {
    r.messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .count()
}

/// Whether a request is the retrieval agent's query planning (structured `queries`).
pub fn is_queries(r: &ChatRequest) -> bool {
    r.response_format
        .as_ref()
        .is_some_and(|f| f.schema["properties"].get("queries").is_some())
}

/// The discussion workflow without its documentation stage, planned for `rt`.
pub async fn analysis_only(
    rt: &trellis_core::Runtime,
) -> (trellis_agents::Orchestration, trellis_workflow::Plan) {
    let overrides = trellis_agents::Overrides {
        workflow: Some("architecture_discussion".into()),
        skip: vec!["decision_documentation".into()],
        ..trellis_agents::Overrides::default()
    };
    rt.plan(
        "Discuss the stock API",
        &overrides,
        tokio_util::sync::CancellationToken::new(),
    )
    .await
    .unwrap()
}
