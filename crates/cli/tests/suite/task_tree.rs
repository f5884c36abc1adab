//! `trellis run --workflow task_tree` through the binary against the loopback OpenAI-wire
//! mock: the remit, one milestone, three tasks (one without a gap, one depending on another),
//! the tree shown by `trellis runs show`; and a run killed with SIGKILL in the middle of the
//! execution loop, resumed from the store alone, ends with exactly the same tree.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trellis_test_support::TempWorkspace;

use super::common::*;
use super::mock::*;

/// The task a step works on: the `"id"` after `"task":{` in the messages (escaped JSON).
fn task_of(all: &str) -> String {
    let Some(i) = all.find("\\\"task\\\":{") else {
        return String::new();
    };
    let rest = &all[i..];
    rest.find("\\\"id\\\":\\\"")
        .map(|j| {
            rest[j + 9..]
                .chars()
                .take_while(|c| *c != '\\')
                .collect::<String>()
        })
        .unwrap_or_default()
}

/// Each `task_tree` role's answer, decided by the request alone (so a resumed run gets the same
/// answers as an uninterrupted one).
fn task_tree(body: &Value) -> String {
    let (sys, all, n) = (
        system(body),
        body["messages"].to_string(),
        tool_results(body),
    );
    let done = |what: &str| {
        sse(
            &json!({ "failure": false, "output": what, "files_changed": [], "findings": [] })
                .to_string(),
        )
    };
    let answer = |v: Value| done(&v.to_string());
    if sys.contains("You interpret a user's request") {
        return answer(json!({ "remit": "Colonies exist", "explicit_needs": ["colonies"] }));
    }
    if sys.contains("sequential milestones") {
        return answer(json!({ "milestones": ["Colonies exist"] }));
    }
    if sys.contains("You expand one milestone") {
        return answer(json!({ "tasks": [
            { "id": "t1", "description": "colony model exists already" },
            { "id": "t2", "description": "colony storage" },
            { "id": "t3", "description": "colony list", "depends_on": ["t2"] },
        ]}));
    }
    let task = task_of(&all);
    if sys.contains("You analyse the gap") {
        return answer(json!({ "gap_exists": task != "t1", "gap_description": "missing" }));
    }
    if sys.contains("You plan the change") {
        return done("# Implementation Plan\n## Changes\n### Create: notes");
    }
    if sys.contains("implementing one task's plan") {
        return match n {
            0 => tool_sse(
                "call_0",
                "write_file",
                &json!({ "path": format!("notes/{task}.md"), "content": format!("{task}\n") })
                    .to_string(),
            ),
            _ => done(&format!("wrote notes/{task}.md")),
        };
    }
    if sys.contains("implemented change satisfies") {
        return answer(json!({ "passed": true, "feedback": "meets the outcome" }));
    }
    if sys.contains("You assess a milestone") {
        return answer(json!({ "uncovered_gaps": [] }));
    }
    sse(&answer_for(body))
}

fn answer_for(body: &Value) -> String {
    super::mock::answer(body)
}

fn workspace(url: &str) -> TempWorkspace {
    trellis_test_support::example_repo("inventory", &mock_config(url)).unwrap()
}

fn tree_of(ws: &TempWorkspace, run: &str) -> Value {
    let shown = json(args(isolated(ws.path()), &["runs", "show", run, "--json"]));
    shown["outcome"]["state"]["task_tree"].clone()
}

#[test]
fn task_tree_runs_through_the_binary_and_runs_show_prints_the_tree() {
    let (url, _seen) = serve(task_tree);
    let ws = workspace(&url);
    let out = ok(args(
        isolated(ws.path()),
        &[
            "run",
            "Add colony management",
            "--workflow",
            "task_tree",
            "--no-review",
        ],
    ));
    assert!(out.contains("succeeded at DONE"), "{out}");
    let run = run_id(&out);
    let shown = ok(args(isolated(ws.path()), &["runs", "show", &run]));
    assert!(shown.contains("task tree — Colonies exist"), "{shown}");
    assert!(shown.contains("t1 COMPLETE"), "{shown}");
    assert!(
        shown.contains("t3 COMPLETE    colony list (after t2)"),
        "{shown}"
    );
    assert!(
        shown.contains("3 tasks: 3 complete; milestones 1/1 complete"),
        "{shown}"
    );
}

#[test]
fn a_task_tree_killed_mid_loop_resumes_to_exactly_the_same_tree() {
    // The uninterrupted reference.
    let (url, _) = serve(task_tree);
    let reference = workspace(&url);
    let out = ok(args(
        isolated(reference.path()),
        &[
            "run",
            "Add colony management",
            "--workflow",
            "task_tree",
            "--no-review",
        ],
    ));
    let expected = tree_of(&reference, &run_id(&out));
    assert_eq!(expected["tasks"]["t3"]["status"], "COMPLETE");

    // The same run, killed once the execution loop has started on its second task.
    let (url, seen) = serve(|body: &Value| {
        std::thread::sleep(Duration::from_millis(30));
        task_tree(body)
    });
    let ws = workspace(&url);
    let mut child = args(
        isolated(ws.path()),
        &[
            "run",
            "Add colony management",
            "--workflow",
            "task_tree",
            "--no-review",
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let started = Instant::now();
    let in_loop = || {
        seen.lock().unwrap().iter().any(|b| {
            system(b).contains("You analyse the gap") && task_of(&b["messages"].to_string()) == "t1"
        })
    };
    while !in_loop() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(in_loop(), "the run never reached t1");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let runs = json(args(isolated(ws.path()), &["runs", "list", "--json"]));
    let run = runs[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(runs[0]["status"], "running", "{runs}");
    // The tree as the log left it: t2 (it unblocks t3, so it went first) done, t1 started.
    let at_kill = tree_of(&ws, &run);
    assert_eq!(at_kill["tasks"]["t2"]["status"], "COMPLETE", "{at_kill}");
    assert_eq!(at_kill["tasks"]["t1"]["status"], "IN_PROGRESS", "{at_kill}");
    assert_eq!(at_kill["tasks"]["t3"]["status"], "READY", "{at_kill}");
    let out = ok(args(isolated(ws.path()), &["runs", "resume", &run]));
    assert!(out.contains("succeeded at DONE"), "{out}");
    assert_eq!(tree_of(&ws, &run), expected);
}
