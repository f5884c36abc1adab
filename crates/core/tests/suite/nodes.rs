//! A worktree per editing agent: parallel agents of one stage edit in worktrees of their
//! own and both changes reach the run branch; a conflict fails the later agent naming the
//! file and the other node; a pruned agent leaves no branch, worktree or change behind;
//! a run that ends drops its node worktrees; a service at start sweeps a crashed run's; a
//! fork gets worktrees of its own at its checkpoint.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
use trellis_protocol::{InputMode, NodeId, NodeState, Op, RunId, RunStatus};
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_tools::git::Git;
use trellis_tools::worktree::nodes::{NODE_BRANCH_PREFIX, NodeWorktrees};
use trellis_tools::worktree::{RunWorktree, trellis_dir};

use super::common::*;

const STAGE: &str = "pair";

/// A workflow whose one stage runs two `code_agent`s in parallel.
const PAIR: &str = r#"
metadata:
  name: "pair_edit"
  description: "Two code agents edit in parallel"
stages:
  - stage_id: 1
    name: "pair"
    parallel_agents:
      - agent: "code_agent"
      - agent: "code_agent"
    routing:
      next_stage_on_success: "DONE"
      next_stage_on_failure: "ABORT"
      max_attempts: 1
"#;

fn with_pair_workflow(repo: &Path) {
    let dir = repo.join(".trellis/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pair_edit.yaml"), PAIR).unwrap();
}

fn start_op(request: &str, input: InputMode) -> Op {
    Op::StartRun {
        request: request.into(),
        repo: None,
        workflow: Some("pair_edit".into()),
        include: Vec::new(),
        skip: Vec::new(),
        input,
        budgets: None,
        plan_only: false,
    }
}

/// Whether the agent of `r` called a tool with `needle` in its arguments.
fn called_with(r: &ChatRequest, needle: &str) -> bool {
    r.messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .any(|c| c.arguments.contains(needle))
}

/// Each agent's first call gets the next of `first` (in the order the agents ask), later
/// calls a report.
fn first_calls(first: Vec<Turn>) -> ScriptedProvider {
    let next = AtomicUsize::new(0);
    ScriptedProvider::responding(move |r| {
        if is_queries(r) {
            return queries();
        }
        if calls(r) == 0 {
            let i = next.fetch_add(1, Ordering::SeqCst);
            return first[i % first.len()].clone();
        }
        report(false, "done")
    })
}

fn service(repo: &Path, script: &ScriptedProvider) -> Arc<Service> {
    Service::start(runtime(repo, script), ServiceOptions::default())
}

async fn start(svc: &Service, op: Op) -> (RunId, std::path::PathBuf) {
    let out = svc.call(op).await.unwrap();
    (
        RunId::from_string(out["run"].as_str().unwrap()),
        out["worktree"].as_str().unwrap().into(),
    )
}

async fn stopped(svc: &Service, run: &RunId) -> trellis_protocol::records::RunState {
    svc.wait_run(run).await;
    svc.flush().await.unwrap();
    svc.run_state(run).unwrap()
}

/// The agent nodes of the stage (its fan-out children), with their results.
fn agents(o: &trellis_protocol::records::RunState) -> Vec<(String, Option<NodeState>, Value)> {
    o.nodes
        .iter()
        .filter(|n| n.result.get("agent").is_some() || n.parent.is_some())
        .filter(|n| n.id.as_str() != STAGE)
        .map(|n| (n.id.to_string(), n.state, n.result.clone()))
        .collect()
}

/// The pair workflow's two agents each writing a note (alpha, beta), started with approvals
/// granted: the workspace (kept alive), its path, the model, the service, the run and its
/// worktree.
async fn two_notes() -> (
    trellis_test_support::TempWorkspace,
    std::path::PathBuf,
    ScriptedProvider,
    Arc<Service>,
    RunId,
    std::path::PathBuf,
) {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    with_pair_workflow(&repo);
    let script = first_calls(vec![
        tool(
            "write_file",
            json!({ "path": "notes/alpha.md", "content": "alpha\n" }),
        ),
        tool(
            "write_file",
            json!({ "path": "notes/beta.md", "content": "beta\n" }),
        ),
    ]);
    let svc = service(&repo, &script);
    let (run, worktree) = start(&svc, start_op("Write two notes", InputMode::Approve)).await;
    (ws, repo, script, svc, run, worktree)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_agents_edit_in_their_own_worktrees_and_both_changes_reach_the_run_branch() {
    let (_ws, repo, _script, svc, run, worktree) = two_notes().await;
    let o = stopped(&svc, &run).await;
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    let agents = agents(&o);
    assert_eq!(agents.len(), 2, "{agents:?}");
    let mut branches = Vec::new();
    for (id, state, result) in &agents {
        assert_eq!(*state, Some(NodeState::Completed), "{id}: {result}");
        let files = result["files_changed"].as_array().unwrap();
        assert_eq!(files.len(), 1, "{id}: {result}");
        // Each agent committed on a branch of its own.
        let branch = result["branch"].as_str().unwrap().to_owned();
        assert!(branch.starts_with(NODE_BRANCH_PREFIX), "{branch}");
        branches.push(branch);
    }
    assert_ne!(branches[0], branches[1]);
    // Both changes are on the run branch, and in the run's worktree.
    assert_eq!(
        on_run_branch(&repo, &run, "notes/alpha.md").as_deref(),
        Some("alpha\n")
    );
    assert_eq!(
        on_run_branch(&repo, &run, "notes/beta.md").as_deref(),
        Some("beta\n")
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes/alpha.md")).unwrap(),
        "alpha\n"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes/beta.md")).unwrap(),
        "beta\n"
    );
    // The run ended: its node worktrees and branches are gone, its own branch stays.
    assert!(
        node_branches(&repo).is_empty(),
        "{:?}",
        node_branches(&repo)
    );
    assert!(node_dirs(&repo, &run).is_empty());
    // The change set's review sees both changes.
    let show = svc
        .call(Op::Review {
            run: run.to_string(),
            action: trellis_protocol::ReviewAction::Show,
        })
        .await
        .unwrap();
    let mut paths: Vec<&str> = show["changeSet"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["notes/alpha.md", "notes/beta.md"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conflict_between_parallel_agents_fails_the_later_naming_the_file_and_the_other_node() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    with_pair_workflow(&repo);
    let rename = |to: &str| {
        tool(
            "edit_file",
            json!({ "path": "inventory.py", "old_string": "class Inventory", "new_string": format!("class {to}") }),
        )
    };
    let script = first_calls(vec![rename("Stock"), rename("Store")]);
    let svc = service(&repo, &script);
    let (run, _) = start(&svc, start_op("Rename the class", InputMode::Approve)).await;
    let o = stopped(&svc, &run).await;
    assert_eq!(o.status, RunStatus::Failed, "{:?}", o.error);
    let agents = agents(&o);
    assert_eq!(agents.len(), 2, "{agents:?}");
    let (won, lost): (Vec<_>, Vec<_>) = agents
        .iter()
        .partition(|(_, s, _)| *s == Some(NodeState::Completed));
    assert_eq!((won.len(), lost.len()), (1, 1), "{agents:?}");
    let (winner, _, _) = won[0];
    let (loser, state, result) = lost[0];
    assert_eq!(*state, Some(NodeState::Failed));
    let conflict = &result["merge_conflict"];
    assert_eq!(conflict["files"], json!(["inventory.py"]), "{result}");
    assert_eq!(conflict["with"], json!([winner]), "{result}");
    let reason = result["reason"].as_str().unwrap();
    assert!(
        reason.contains("merge conflict") && reason.contains("inventory.py"),
        "{reason}"
    );
    assert!(reason.contains(winner.as_str()), "{reason}");
    // The winner's change is on the run branch; the loser's is not.
    let text = on_run_branch(&repo, &run, "inventory.py").unwrap();
    assert_ne!(
        text.contains("class Stock"),
        text.contains("class Store"),
        "{loser}: {text}"
    );
    assert!(!text.contains("<<<<<<<"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pruned_agent_leaves_no_branch_worktree_or_change_while_its_sibling_merges() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    with_pair_workflow(&repo);
    let (asked_tx, asked_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (asked_tx, go_rx) = (Mutex::new(asked_tx), Mutex::new(go_rx));
    let next = AtomicUsize::new(0);
    let script = ScriptedProvider::responding(move |r| {
        if is_queries(r) {
            return queries();
        }
        if calls(r) == 0 {
            let path = match next.fetch_add(1, Ordering::SeqCst) {
                0 => "notes/kept.md",
                _ => "notes/pruned.md",
            };
            return tool("write_file", json!({ "path": path, "content": "x\n" }));
        }
        if called_with(r, "notes/pruned.md") {
            // Hold the second call until the test has pruned this agent.
            let _ = asked_tx.lock().unwrap().send(());
            let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
        }
        report(false, "done")
    });
    let svc = service(&repo, &script);
    let (run, worktree) = start(&svc, start_op("Write notes", InputMode::Approve)).await;
    tokio::task::spawn_blocking(move || asked_rx.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("the agent never made its second call");
    // The held agent edits in its own worktree, not in the run's.
    let nodes = NodeWorktrees::open(&repo, &run).unwrap();
    let held = nodes
        .list()
        .unwrap()
        .into_iter()
        .find(|w| w.path.join("notes/pruned.md").exists())
        .expect("the held agent's worktree");
    assert!(!worktree.join("notes/pruned.md").exists());
    let pruned = svc
        .call(Op::Prune {
            run: run.to_string(),
            node: NodeId::new(held.node.clone()),
            subtree: false,
            reason: Some("not needed".into()),
        })
        .await;
    go_tx.send(()).unwrap();
    pruned.unwrap();
    let o = stopped(&svc, &run).await;
    assert_eq!(
        o.node(&held.node).and_then(|n| n.state),
        Some(NodeState::Pruned)
    );
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    // Nothing of the pruned agent is left; its sibling's work reached the run branch.
    assert!(!held.path.exists(), "{}", held.path.display());
    assert!(!node_branches(&repo).contains(&held.branch));
    assert_eq!(on_run_branch(&repo, &run, "notes/pruned.md"), None);
    assert_eq!(
        on_run_branch(&repo, &run, "notes/kept.md").as_deref(),
        Some("x\n")
    );
    assert!(!worktree.join("notes/pruned.md").exists());
    // The pruned node's session says what was rolled back.
    let notes: Vec<String> = svc
        .stream_events(
            &trellis_protocol::StreamId::Session(trellis_protocol::SessionId::for_node(
                &run,
                &NodeId::new(held.node.clone()),
            )),
            0,
            None,
        )
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            trellis_protocol::ServiceEventBody::Session(trellis_protocol::SessionEvent::Note {
                text,
            }) => Some(text),
            _ => None,
        })
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("pruned; rolled back notes/pruned.md")),
        "{notes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_service_start_sweeps_the_node_worktrees_of_crashed_runs_and_keeps_unfinished_ones() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    with_pair_workflow(&repo);
    // An unfinished run: both agents wait for an answer, in worktrees of their own.
    let script = first_calls(vec![tool(
        "ask_questions",
        json!({ "questions": [{ "question": "Which name?" }] }),
    )]);
    let svc = service(&repo, &script);
    let (waiting, _) = start(&svc, start_op("Ask first", InputMode::Interrupts)).await;
    let o = stopped(&svc, &waiting).await;
    assert_eq!(o.status, RunStatus::WaitingInput, "{:?}", o.error);
    let kept = NodeWorktrees::open(&repo, &waiting)
        .unwrap()
        .list()
        .unwrap();
    assert_eq!(kept.len(), 2, "{kept:?}");
    // What a crashed process left: a run the store does not know, with a node worktree
    // holding an edit.
    let crashed = RunId::new();
    let run_wt = RunWorktree::create(&repo, &crashed).unwrap();
    let nodes = NodeWorktrees::open(&repo, &crashed).unwrap();
    let left = nodes.create("pair:code_agent_1", &run_wt.branch).unwrap();
    std::fs::write(left.path.join("half.md"), "half\n").unwrap();
    assert!(node_branches(&repo).contains(&left.branch));
    drop(svc);
    // A new service (the restarted process) sweeps before anything resumes.
    let svc = service(&repo, &ScriptedProvider::new([]));
    assert!(!left.path.exists());
    assert!(!node_branches(&repo).contains(&left.branch));
    assert!(
        !trellis_dir(&repo)
            .unwrap()
            .join("nodes")
            .join(crashed.as_str())
            .exists()
    );
    // The run branch of the crashed run stays (it carries a result for review).
    assert!(
        Git::new(&repo)
            .resolve(&format!("refs/heads/{}", run_wt.branch))
            .unwrap()
            .is_some()
    );
    // The unfinished run keeps its node worktrees.
    for wt in &kept {
        assert!(wt.path.exists(), "{}", wt.path.display());
        assert!(node_branches(&repo).contains(&wt.branch));
    }
    drop(svc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forked_run_gets_its_own_worktrees_at_the_checkpoint() {
    let (_ws, repo, script, svc, run, worktree) = two_notes().await;
    assert_eq!(stopped(&svc, &run).await.status, RunStatus::Succeeded);
    let checkpoints: Vec<u64> = svc
        .run_events(&run, 1, None)
        .unwrap()
        .iter()
        .filter(|e| e.kind.is_checkpoint())
        .map(|e| e.seq)
        .collect();
    let parent = svc.change_set_record(run.as_str()).unwrap();
    let asked = script.requests().len();
    // At the last checkpoint both agents had merged: the fork's branch starts with both
    // notes, and nothing runs again.
    let last = *checkpoints.last().unwrap();
    let fork = svc
        .fork_run(run.as_str(), last, Vec::new(), InputMode::Approve)
        .await
        .unwrap();
    let o = stopped(&svc, &fork).await;
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    assert_eq!(script.requests().len(), asked, "an agent ran again");
    let forked = svc.change_set_record(fork.as_str()).unwrap();
    assert_eq!(forked.branch, format!("trellis/run-{fork}"));
    assert_eq!(forked.base_commit, parent.base_commit);
    let fork_wt = std::path::PathBuf::from(forked.worktree.clone().unwrap());
    assert_ne!(fork_wt, worktree);
    for (path, text) in [("notes/alpha.md", "alpha\n"), ("notes/beta.md", "beta\n")] {
        assert_eq!(on_run_branch(&repo, &fork, path).as_deref(), Some(text));
        assert_eq!(std::fs::read_to_string(fork_wt.join(path)).unwrap(), text);
    }
    // At the start, the fork's branch is the run's base: the agents run again in worktrees
    // of the fork, and their work reaches the fork's branch only.
    let again = svc
        .fork_run(run.as_str(), checkpoints[0], Vec::new(), InputMode::Approve)
        .await
        .unwrap();
    let o = stopped(&svc, &again).await;
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    assert!(
        script.requests().len() > asked,
        "the agents did not run again"
    );
    let branches: Vec<String> = agents(&o)
        .iter()
        .filter_map(|(_, _, r)| r["branch"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(branches.len(), 2, "{branches:?}");
    assert!(
        branches
            .iter()
            .all(|b| b.starts_with(&format!("{NODE_BRANCH_PREFIX}{again}/"))),
        "{branches:?}"
    );
    for path in ["notes/alpha.md", "notes/beta.md"] {
        assert!(on_run_branch(&repo, &again, path).is_some(), "{path}");
    }
    assert!(
        node_branches(&repo).is_empty(),
        "{:?}",
        node_branches(&repo)
    );
}
