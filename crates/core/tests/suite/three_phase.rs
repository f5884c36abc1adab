//! The `three_phase` workflow end to end in the runtime service with the scripted model:
//! discovery (an orchestrator's areas → discovery agents → discovery.md), planning (parts →
//! planners → plan.md, spec.md, tickets.md; an invalid tickets.md goes back to its collector
//! with the validation error), then one pipeline per ticket in dependency order — a ticket
//! agent in its own worktree (failing tests send it back), a review (NEEDS_REVISION makes a
//! revision node), a merge (a conflict resolved by the merge agent) — and a pruned ticket that
//! leaves nothing behind while the others merge.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
use trellis_protocol::{InputMode, NodeId, NodeState, Op, RunId, RunStatus};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

// `restock` has the same line as the bug, so each edit includes the line above it.
const BUG: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) + quantity";
const FIX: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) - quantity";
const FIX3: &str = "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) - quantity  # shipped units leave";

const TICKETS_WITHOUT_CRITERIA: &str = "# Plan\n## Goal\nFix commit.\n# Spec\n## R1: commit ships units\n# Tickets\n## T1: Fix commit\nDepends on: none\n";

const PLANNED: &str = "# Plan\n## Goal\nFix the stock bookkeeping, then report stock.\n\
# Spec\n## R1: commit subtracts shipped units\n\
# Tickets\n## T1: Fix commit\nDepends on: none\nFiles: inventory.py\n\n### Acceptance criteria\n- commit subtracts shipped units\n\n\
## T2: Stock report\nDepends on: T1\nFiles: report.py\n\n### Acceptance criteria\n- report lists stock per SKU\n\n\
## T3: Say what shipping does\nDepends on: none\nFiles: inventory.py\n\n### Acceptance criteria\n- the shipping line is explained\n";

/// The ticket a request is about (its work item's id).
fn ticket(r: &ChatRequest) -> &'static str {
    let all = text(r);
    ["T1", "T2", "T3", "T4"]
        .into_iter()
        .find(|t| all.contains(&format!("\"id\":\"{t}\"")))
        .unwrap_or("")
}

/// The conflicted `inventory.py` of a merge waiting in `repo`, resolved by taking the
/// ticket's side of every hunk (what the scripted merge agent writes).
fn resolve_conflict(repo: &Path) -> Option<String> {
    let nodes = repo.join(".trellis/nodes");
    for run in std::fs::read_dir(&nodes).ok()? {
        let merge = run.ok()?.path().join("merge");
        for m in std::fs::read_dir(&merge).into_iter().flatten() {
            let file = m.ok()?.path().join("inventory.py");
            let Ok(content) = std::fs::read_to_string(&file) else {
                continue;
            };
            if !content.contains("<<<<<<<") {
                continue;
            }
            let mut out = String::new();
            let mut side = 0; // 0: outside, 1: ours (dropped), 2: theirs (kept)
            for line in content.lines() {
                if line.starts_with("<<<<<<<") {
                    side = 1;
                } else if line.starts_with("=======") && side == 1 {
                    side = 2;
                } else if line.starts_with(">>>>>>>") && side == 2 {
                    side = 0;
                } else if side != 1 {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            return Some(out);
        }
    }
    None
}

fn script(repo: std::path::PathBuf) -> impl Fn(&ChatRequest) -> Turn + Send + Sync + 'static {
    move |r: &ChatRequest| {
        if is_queries(r) {
            return queries();
        }
        let (sys, all, n) = (system(r), text(r), calls(r));
        let revising = all.contains("Feedback to address");
        if sys.contains("You lead the discovery phase") {
            return report(false, "- storage: stock levels\n- api: reservations");
        }
        if sys.contains("You study one area") {
            return report(false, "## Files\ninventory.py holds the stock.");
        }
        if sys.contains("findings of the discovery agents") {
            return report(
                false,
                "# Discovery\n## Inventory\nStock lives in inventory.py.",
            );
        }
        if sys.contains("You lead the planning phase") {
            return report(false, "- fix: the commit bug and a report");
        }
        if sys.contains("You plan one part") {
            return report(false, "1. Fix commit in inventory.py\n2. Add report.py");
        }
        if sys.contains("the planners' parts") {
            return report(
                false,
                if revising {
                    PLANNED
                } else {
                    TICKETS_WITHOUT_CRITERIA
                },
            );
        }
        if sys.contains("implementing one ticket") {
            let t = ticket(r);
            return match (t, revising, n) {
                ("T1", _, 0) => tool(
                    "edit_file",
                    json!({ "path": "inventory.py", "old_string": BUG, "new_string": FIX }),
                ),
                ("T2", false, 0) => tool(
                    "write_file",
                    json!({ "path": "report.py", "content": "def report(inv):\n    return dict(inv.stock)\n" }),
                ),
                ("T2", true, 0) => tool(
                    "edit_file",
                    json!({ "path": "report.py", "old_string": "def report(inv):\n",
                            "new_string": "def report(inv):\n    \"\"\"Stock per SKU.\"\"\"\n" }),
                ),
                // T3's first attempt leaves the bug: the tests fail in its worktree.
                ("T3", false, 0) => tool(
                    "write_file",
                    json!({ "path": "NOTES.md", "content": "Shipping notes.\n" }),
                ),
                ("T3", true, 0) => tool(
                    "edit_file",
                    json!({ "path": "inventory.py", "old_string": BUG, "new_string": FIX3 }),
                ),
                _ => report(false, &format!("{t} implemented")),
            };
        }
        if sys.contains("meticulous code reviewer") {
            let second = all.contains("This is attempt 2");
            return match (ticket(r), second, n) {
                ("T2", false, 0) => tool(
                    "complete_review",
                    json!({ "verdict": "NEEDS_REVISION", "summary": "add a docstring to report" }),
                ),
                ("T2", true, 0) => tool(
                    "complete_review",
                    json!({ "verdict": "APPROVED", "summary": "documented now" }),
                ),
                ("T2", _, _) => report(false, "review complete"),
                _ => report(false, "APPROVED: the change does what the ticket asks"),
            };
        }
        if sys.contains("You resolve git merge conflicts") {
            return match n {
                0 => match resolve_conflict(&repo) {
                    Some(content) => tool(
                        "write_file",
                        json!({ "path": "inventory.py", "content": content }),
                    ),
                    None => report(true, "no conflict found"),
                },
                _ => report(false, "took the ticket's side of the shipping line"),
            };
        }
        report(false, "nothing to do")
    }
}

fn start_op(input: InputMode) -> Op {
    Op::StartRun {
        request: "Fix the stock bookkeeping of commit and add a stock report".into(),
        repo: None,
        workflow: Some("three_phase".into()),
        include: Vec::new(),
        skip: Vec::new(),
        input,
        budgets: None,
        plan_only: false,
    }
}

async fn stopped(svc: &Service, run: &RunId) -> trellis_protocol::records::RunState {
    svc.wait_run(run).await;
    svc.flush().await.unwrap();
    svc.run_state(run).unwrap()
}

fn position(list: &[String], item: &str) -> usize {
    list.iter()
        .position(|a| a == item)
        .unwrap_or_else(|| panic!("{item} never ran: {list:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_phase_discovers_plans_and_implements_tickets_in_dependency_order() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let provider = ScriptedProvider::responding(script(repo.clone()));
    let svc = Service::start(runtime(&repo, &provider), ServiceOptions::default());
    let out = svc.call(start_op(InputMode::Interrupts)).await.unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    let o = stopped(&svc, &run).await;
    assert_eq!(
        o.status,
        RunStatus::Succeeded,
        "{:?}\n{:#?}",
        o.error,
        o.nodes
    );
    assert_eq!(o.terminal.as_ref().map(|t| t.as_str()), Some("DONE"));

    let ran = activations_of(&svc, &run);
    // Two discovery agents, one planner; the planning collector ran twice (its first
    // tickets.md had no acceptance criteria and was sent back with the error).
    for node in ["discovery/storage#1", "discovery/api#1", "planning/fix#1"] {
        position(&ran, node);
    }
    position(&ran, "planning_collector#2");
    let requests = provider.requests();
    assert!(
        requests
            .iter()
            .any(|r| system(r).contains("the planners' parts")
                && text(r).contains("Feedback to address")
                && text(r).contains("acceptance criteri"))
    );
    // T2 depends on T1: it starts only after T1's merge.
    assert!(
        position(&ran, "implementation/T2#1") > position(&ran, "implementation/T1.merge#1"),
        "{ran:?}"
    );
    // T3's failing tests sent it back before any reviewer saw it (a revision: attempt 2);
    // T2's reviewer asked for a revision, which carried the review's feedback.
    let node = |id: &str| o.node(id).unwrap_or_else(|| panic!("no node {id}"));
    assert_eq!(node("implementation/T3").attempt, 2);
    assert_eq!(node("implementation/T2").attempt, 2);
    assert_eq!(node("implementation/T2.review").attempt, 2);
    assert_eq!(node("implementation/T1").attempt, 1);
    assert!(
        requests
            .iter()
            .any(|r| system(r).contains("implementing one ticket")
                && ticket(r) == "T3"
                && text(r).contains("tests fail"))
    );
    assert!(
        requests
            .iter()
            .any(|r| system(r).contains("implementing one ticket")
                && ticket(r) == "T2"
                && text(r).contains("add a docstring to report"))
    );
    // The reviewer was shown the ticket's diff.
    assert!(
        requests
            .iter()
            .any(|r| system(r).contains("meticulous code reviewer")
                && ticket(r) == "T1"
                && text(r).contains("```diff")
                && text(r).contains("- quantity"))
    );
    // Every ticket merged; T1 and T3 change the same line, so the later merge went to the
    // merge agent, whose strategy is recorded.
    let strategies: Vec<String> = ["T1", "T2", "T3"]
        .iter()
        .map(|t| {
            let m = node(&format!("implementation/{t}.merge"));
            assert_eq!(m.state, Some(NodeState::Completed), "{t}: {:?}", m.result);
            m.result["merged"][0]["strategy"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        strategies
            .iter()
            .filter(|s| *s == trellis_core::merge::AGENT_RESOLVED)
            .count(),
        1,
        "{strategies:?}"
    );
    let inventory = on_run_branch(&repo, &run, "inventory.py").unwrap();
    assert!(inventory.contains("get(sku, 0) - quantity"), "{inventory}");
    assert!(
        !inventory.contains("<<<<<<<") && !inventory.contains(BUG),
        "{inventory}"
    );
    assert!(
        on_run_branch(&repo, &run, "report.py")
            .unwrap()
            .contains("Stock per SKU")
    );
    assert!(on_run_branch(&repo, &run, "NOTES.md").is_some());
    // Artifacts: discovery.md, plan.md, spec.md, tickets.md (two versions), as files too.
    let dir = repo
        .join(".trellis/runs")
        .join(run.as_str())
        .join("artifacts");
    for f in ["discovery.md", "plan.md", "spec.md", "tickets.md"] {
        assert!(dir.join(f).is_file(), "{} missing", dir.join(f).display());
    }
    // The run ended: no node worktree or branch is left.
    assert!(
        node_dirs(&repo, &run).is_empty(),
        "{:?}",
        node_dirs(&repo, &run)
    );
    assert!(
        !node_branches(&repo)
            .iter()
            .any(|b| b.contains(run.as_str())),
        "{:?}",
        node_branches(&repo)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pruned_ticket_leaves_no_branch_worktree_or_merge_while_the_others_merge() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let planned = "# Plan\n## Goal\nNotes.\n# Spec\n## R1: notes exist\n# Tickets\n\
## T1: Fix commit\nDepends on: none\n\n### Acceptance criteria\n- commit subtracts\n\n\
## T4: Slow notes\nDepends on: none\n\n### Acceptance criteria\n- notes exist\n\n\
## T2: After slow\nDepends on: T4\n\n### Acceptance criteria\n- runs after T4\n";
    let base = script(repo.clone());
    let provider = ScriptedProvider::responding(move |r| {
        if system(r).contains("the planners' parts") {
            return report(false, planned);
        }
        if system(r).contains("implementing one ticket") && ticket(r) == "T4" {
            // T4 writes a file, then works for a long time (until it is pruned). The scripted
            // model answers one request at a time, so the wait is a tool's, not the model's.
            return match calls(r) {
                0 => tool(
                    "write_file",
                    json!({ "path": "SLOW.md", "content": "slow\n" }),
                ),
                1 => tool("shell", json!({ "command": "sleep 120" })),
                _ => report(false, "T4 implemented"),
            };
        }
        base(r)
    });
    let svc = Service::start(runtime(&repo, &provider), ServiceOptions::default());
    let out = svc.call(start_op(InputMode::Approve)).await.unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    // T1 is independent: it merges while T4 works.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let o = svc.run_state(&run).unwrap();
        if o.node("implementation/T1.merge").and_then(|n| n.state) == Some(NodeState::Completed) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "T1 never merged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // T4 is at work: its file is written in its own worktree.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let slow = loop {
        let wt = trellis_tools::worktree::nodes::NodeWorktrees::open(&repo, &run)
            .unwrap()
            .get("implementation/T4")
            .unwrap();
        if let Some(wt) = wt.filter(|w| w.path.join("SLOW.md").is_file()) {
            break wt;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "T4 never wrote its file"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    svc.call(Op::Prune {
        run: run.to_string(),
        node: NodeId::new("implementation/T4"),
        subtree: false,
        reason: Some("not needed".into()),
    })
    .await
    .unwrap();
    let o = stopped(&svc, &run).await;
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    let state = |id: &str| o.node(id).and_then(|n| n.state);
    assert_eq!(state("implementation/T4"), Some(NodeState::Pruned));
    // T4's review and merge, and T2 (which depends on T4) with its pipeline, are skipped.
    for id in ["T4.review", "T4.merge", "T2", "T2.review", "T2.merge"] {
        assert_eq!(
            state(&format!("implementation/{id}")),
            Some(NodeState::Skipped),
            "{id}"
        );
    }
    assert_eq!(state("implementation/T1.merge"), Some(NodeState::Completed));
    assert!(!slow.path.exists(), "{}", slow.path.display());
    assert!(!node_branches(&repo).contains(&slow.branch));
    assert_eq!(on_run_branch(&repo, &run, "SLOW.md"), None);
    assert!(
        on_run_branch(&repo, &run, "inventory.py")
            .unwrap()
            .contains(FIX)
    );
}

const MERGED: &str = r#"
metadata:
  name: "merged_pair"
  description: "Two code agents, merged by a merge stage"
stages:
  - stage_id: pair
    name: "pair"
    parallel_agents:
      - agent: "code_agent"
      - agent: "code_agent"
    routing: {next_stage_on_failure: ABORT, max_attempts: 1}
  - stage_id: land
    name: "land"
    kind: merge
    merges: pair
    parallel_agents: [{agent: "merger"}]
    routing: {next_stage_on_success: DONE}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_stage_lands_a_stages_agents_and_its_agent_resolves_their_conflict() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let dir = repo.join(".trellis/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("merged_pair.yaml"), MERGED).unwrap();
    let count = std::sync::atomic::AtomicUsize::new(0);
    let base = script(repo.clone());
    // Both agents change the same line differently: the second merge conflicts.
    let provider = ScriptedProvider::responding(move |r| {
        if system(r).contains("senior software engineer working inside a git worktree") {
            return match calls(r) {
                0 => {
                    let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let new = if n == 0 { FIX } else { FIX3 };
                    tool(
                        "edit_file",
                        json!({ "path": "inventory.py", "old_string": BUG, "new_string": new }),
                    )
                }
                _ => report(false, "fixed commit"),
            };
        }
        base(r)
    });
    let svc = Service::start(runtime(&repo, &provider), ServiceOptions::default());
    let out = svc
        .call(Op::StartRun {
            request: "Fix commit".into(),
            repo: None,
            workflow: Some("merged_pair".into()),
            include: Vec::new(),
            skip: Vec::new(),
            input: InputMode::Interrupts,
            budgets: None,
            plan_only: false,
        })
        .await
        .unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    let o = stopped(&svc, &run).await;
    assert_eq!(
        o.status,
        RunStatus::Succeeded,
        "{:?}\n{:#?}",
        o.error,
        o.nodes
    );
    // The agents only committed; the merge stage brought both in, the second through the
    // merge agent, and says so.
    for n in o
        .nodes
        .iter()
        .filter(|n| n.id.as_str().starts_with("pair/"))
    {
        assert!(n.result["run_head"].is_null(), "{} merged itself", n.id);
    }
    let land = o.node("land").unwrap();
    let merged = land.result["merged"].as_array().unwrap();
    assert_eq!(merged.len(), 2, "{:?}", land.result);
    assert_eq!(merged[0]["strategy"], trellis_core::merge::NODE_MERGE);
    assert_eq!(merged[1]["strategy"], trellis_core::merge::AGENT_RESOLVED);
    assert_eq!(land.result["conflicts"], json!(["inventory.py"]));
    let inventory = on_run_branch(&repo, &run, "inventory.py").unwrap();
    assert!(inventory.contains("get(sku, 0) - quantity") && !inventory.contains("<<<<<<<"));
}
