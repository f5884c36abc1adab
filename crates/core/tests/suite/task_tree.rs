//! The `task_tree` workflow end to end in the runtime service with the scripted model: two
//! milestones; one task without a gap, one that QA finds incomplete and then passes, one that
//! keeps taking the wrong approach until its retry limit and fails — its dependent BLOCKED
//! while an independent branch completes —, an assessor's gap that the expander turns into a
//! task, and an expansion whose cycle is refused with its path and then corrected.

use serde_json::{Value, json};
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
use trellis_protocol::{InputMode, Op, RunId, RunStatus};
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_workflow::tasktree::{CHANNEL, TaskStatus, TaskTree};

use super::common::*;

/// The task a step works on (its id in the work item).
fn task_of(r: &ChatRequest) -> String {
    let all = text(r);
    let Some(i) = all.find("\"task\":{") else {
        return String::new();
    };
    let rest = &all[i..];
    rest.find("\"id\":\"")
        .map(|j| {
            rest[j + 6..]
                .chars()
                .take_while(|c| *c != '"')
                .collect::<String>()
        })
        .unwrap_or_default()
}

fn answer(v: Value) -> Turn {
    report(false, &v.to_string())
}

static WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static T2_REVIEWS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn script(r: &ChatRequest) -> Turn {
    if is_queries(r) {
        return queries();
    }
    let (sys, all) = (system(r), text(r));
    if sys.contains("You interpret a user's request") {
        return answer(json!({
            "remit": "Colony management: colonies exist and are shown",
            "explicit_needs": ["colonies"], "implied_needs": ["a data model"],
        }));
    }
    if sys.contains("sequential milestones") {
        return answer(json!({ "milestones": ["Colonies exist", "Colonies are shown"] }));
    }
    if sys.contains("You expand one milestone") {
        let m2 = all.contains("\"id\":\"m2\"");
        if all.contains("Uncovered gaps to add as tasks") && !m2 {
            return answer(json!({ "tasks": [
                { "id": "t6", "description": "colonies have names", "measurable_outcome": "names" }
            ]}));
        }
        if m2 && !all.contains("form a cycle") {
            return answer(json!({ "tasks": [
                { "id": "a", "description": "A", "depends_on": ["b"] },
                { "id": "b", "description": "B", "depends_on": ["a"] },
            ]}));
        }
        if m2 {
            return answer(json!({ "tasks": [{ "id": "t7", "description": "show colonies" }] }));
        }
        return answer(json!({ "tasks": [
            { "id": "t1", "description": "colony model exists already" },
            { "id": "t2", "description": "colony storage" },
            { "id": "t3", "description": "colony growth" },
            { "id": "t4", "description": "growth events", "depends_on": ["t3"] },
            { "id": "t5", "description": "colony list" },
        ]}));
    }
    if sys.contains("You analyse the gap") {
        return answer(json!({ "gap_exists": task_of(r) != "t1",
                              "gap_description": "missing", "relevant_files": [] }));
    }
    if sys.contains("You plan the change") {
        // Longer than the plan summary's limit (500): compressed by the summary model.
        return report(
            false,
            &format!(
                "# Implementation Plan\n## Changes\n### Create: notes\n{}",
                "Detail. ".repeat(100)
            ),
        );
    }
    if sys.contains("You compress text that one agent hands to another") {
        return Turn::Text("PLAN-SUMMARY: create the task's note".into());
    }
    if sys.contains("implementing one task's plan") {
        let t = task_of(r);
        return match calls(r) {
            // Every implementation changes the task's note (a retry writes a new version).
            0 => {
                let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tool(
                    "write_file",
                    json!({ "path": format!("notes/{t}.md"), "content": format!("{t} v{n}\n") }),
                )
            }
            _ => report(false, &format!("wrote notes/{t}.md")),
        };
    }
    if sys.contains("implemented change satisfies") {
        let t = task_of(r);
        // t2's first review finds it incomplete, the second passes it.
        let reviewed_before =
            t == "t2" && T2_REVIEWS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0;
        return match t.as_str() {
            "t2" if !reviewed_before => answer(json!({
                "passed": false, "failure_type": "incomplete", "feedback": "storage lacks a save" })),
            "t3" => answer(json!({
                "passed": false, "failure_type": "wrong_approach", "feedback": "growth is not per tick" })),
            _ => answer(json!({ "passed": true, "feedback": "meets the outcome" })),
        };
    }
    if sys.contains("You assess a milestone") {
        let gap = all.contains("\"id\":\"m1\"")
            && !all.contains("t6")
            && all.contains("\"open_tasks_in_milestone\":[]");
        return answer(
            json!({ "uncovered_gaps": if gap { json!(["colonies need names"]) } else { json!([]) } }),
        );
    }
    report(false, "nothing to do")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_tree_runs_milestones_with_gaps_retries_failures_and_blocked_dependents() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let provider = ScriptedProvider::responding(script);
    let svc = Service::start(runtime(&repo, &provider), ServiceOptions::default());
    let out = svc
        .call(Op::StartRun {
            request: "Add colony management".into(),
            repo: None,
            workflow: Some("task_tree".into()),
            include: Vec::new(),
            skip: Vec::new(),
            input: InputMode::Approve,
            budgets: None,
            plan_only: false,
        })
        .await
        .unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    svc.wait_run(&run).await;
    svc.bus().flush().await;
    svc.flush().await.unwrap();
    let o = svc.run_state(&run).unwrap();
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    let tree = TaskTree::from_value(o.state.get(CHANNEL)).unwrap();
    let st = |id: &str| {
        tree.task(id)
            .unwrap_or_else(|| panic!("no {id}: {tree:#?}"))
            .status
    };
    // The plan summary was compressed by the summary model (the output normaliser), not cut.
    assert_eq!(
        tree.task("t2")
            .unwrap()
            .implementation_plan_summary
            .as_deref(),
        Some("PLAN-SUMMARY: create the task's note")
    );
    // No gap: complete without a plan.
    assert_eq!(st("t1"), TaskStatus::Complete);
    assert!(
        tree.task("t1")
            .unwrap()
            .implementation_plan_summary
            .is_none()
    );
    // Incomplete once, then passed: the implementor ran twice.
    assert_eq!(st("t2"), TaskStatus::Complete);
    assert_eq!(tree.task("t2").unwrap().attempts["implementor"], 2);
    // Wrong approach until the researcher's limit: failed, its dependent blocked, the
    // independent branch done.
    assert_eq!(st("t3"), TaskStatus::Failed);
    assert_eq!(
        tree.task("t3").unwrap().attempts["researcher"],
        trellis_core::tasktree::RESEARCHER_RUNS
    );
    assert_eq!(st("t4"), TaskStatus::Blocked);
    assert_eq!(st("t5"), TaskStatus::Complete);
    // The assessor's gap became a task of m1; m2's cyclic expansion was refused, then fixed.
    assert_eq!(tree.task("t6").unwrap().milestone, "m1");
    assert_eq!(st("t6"), TaskStatus::Complete);
    assert_eq!(tree.task("t7").unwrap().milestone, "m2");
    assert!(tree.task("a").is_none());
    let requests = provider.requests();
    assert!(
        requests
            .iter()
            .any(|r| system(r).contains("You expand one milestone")
                && text(r).contains("form a cycle: "))
    );
    // The final report lists what was done, what failed and why, and what is blocked.
    let assess = o.node("assess").unwrap();
    let report = assess.result["report"].as_str().unwrap_or_default();
    assert!(report.contains("Failed (1):\n- t3"), "{report}");
    assert!(report.contains("wrong_approach"), "{report}");
    assert!(report.contains("Blocked (1):\n- t4"), "{report}");
    assert_eq!(o.terminal.as_ref().map(|t| t.as_str()), Some("DONE"));
    // The files the tasks wrote reached the run branch.
    assert!(on_run_branch(&repo, &run, "notes/t7.md").is_some());
    assert_eq!(on_run_branch(&repo, &run, "notes/t1.md"), None);
}
