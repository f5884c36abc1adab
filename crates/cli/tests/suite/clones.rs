//! Repositories across machines (team scale): the server's workspace and two workers each
//! in a clone of their own, one PostgreSQL store, run branches travelling through a bare git
//! remote (`[repository] remote`). A worker killed mid-run is replaced by a worker in another
//! clone, which continues from the branch the first one pushed; the server reviews, applies
//! and undoes the run's work, none of which was written in its own repository.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trellis_test_pg::Cluster;
use trellis_test_support::git;

use super::common::*;
use super::mock::*;
use super::workers::{Worker, assert_each_once, completed, wait_status, workspace};

/// The analysis agent writes `ANALYSIS.md` with the shell, the documentation agent
/// `DECISION.md` with `write_file`; the documentation agent's first two requests (before
/// and after its write) take 3 s the first time, so that a test can kill its worker
/// meanwhile; every other request is answered as [`answer`] does.
fn two_writers() -> impl Fn(&Value) -> String + Send + 'static {
    let slowed = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    move |body| {
        if !is_agent(body) {
            return sse(&answer(body));
        }
        let analysis = system(body).contains("You analyse");
        let done = tool_results(body);
        if !analysis && done < 2 && !slowed[done].swap(true, Ordering::SeqCst) {
            std::thread::sleep(Duration::from_secs(3));
        }
        match (analysis, done) {
            (true, 0) => tool_sse(
                "call_a",
                "shell",
                &json!({ "command": "echo analysed > ANALYSIS.md" }).to_string(),
            ),
            (false, 0) => tool_sse(
                "call_d",
                "write_file",
                &json!({ "path": "DECISION.md", "content": "decided\n" }).to_string(),
            ),
            _ => sse(&answer(body)),
        }
    }
}

/// A worker killed during the documentation agent's request after `done` tool results
/// (0: before its write, 1: after it, before its work landed) is replaced by one in
/// another clone, which continues from the remote's branch: both agents' work is on the
/// run's branch, and the server reviews, applies and undoes it.
#[test]
fn workers_in_clones_of_their_own_continue_each_other_through_the_remote() {
    continue_in_another_clone(0);
}

/// Its write was recorded in the first clone but never landed: the second clone has not
/// got it, so the agent's attempt starts over there (replaying the recorded call would
/// claim an edit that is not there).
#[test]
fn an_agent_whose_edits_stayed_in_a_dead_worker_s_clone_starts_over() {
    continue_in_another_clone(1);
}

fn continue_in_another_clone(done: usize) {
    let (url, seen) = serve(two_writers());
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let root = tempfile::tempdir().unwrap();
    let remote = root.path().join("remote.git");
    git(
        root.path(),
        &[
            "clone",
            "--quiet",
            "--bare",
            ws.path().to_str().unwrap(),
            "remote.git",
        ],
    );
    // Every process names the remote; each worker has a clone of its own.
    let config = format!(
        "{}\n[repository]\nremote = \"{}\"\n",
        std::fs::read_to_string(ws.path().join(".trellis/config.toml")).unwrap(),
        remote.display()
    );
    let mut clones = Vec::new();
    for name in ["clone-b", "clone-c"] {
        git(
            root.path(),
            &["clone", "--quiet", remote.to_str().unwrap(), name],
        );
        let dir = root.path().join(name);
        std::fs::create_dir_all(dir.join(".trellis/agents")).unwrap();
        std::fs::copy(
            ws.path().join(".trellis/agents/analysis_agent.yaml"),
            dir.join(".trellis/agents/analysis_agent.yaml"),
        )
        .unwrap();
        std::fs::write(dir.join(".trellis/config.toml"), &config).unwrap();
        clones.push(dir);
    }
    std::fs::write(ws.path().join(".trellis/config.toml"), &config).unwrap();

    let queued = ok(args(
        isolated(ws.path()),
        &[
            "run",
            "Discuss the stock decision",
            "--workflow",
            "architecture_discussion",
            "--include",
            "decision_documentation",
            "--queue",
        ],
    ));
    let run = run_id(&queued);
    let branch = format!("trellis/run-{run}");

    // Worker B runs the analysis (its branch pushed when the agent's work lands), then dies
    // during the documentation agent's first model call.
    let mut b = Worker::start_in(&clones[0], "worker-b", "50");
    b.wait_for(&format!("run {run}: claimed"), 30);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !agent_bodies(&seen)
        .iter()
        .any(|body| !system(body).contains("You analyse") && tool_results(body) == done)
    {
        assert!(
            Instant::now() < deadline,
            "the documentation agent never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    b.signal("-9");
    let _ = b.child.wait();
    assert_eq!(
        git(&remote, &["show", &format!("{branch}:ANALYSIS.md")]).trim(),
        "analysed",
        "worker B pushed the analysis's work"
    );

    // Worker C, in another clone, continues from the remote's branch.
    let mut c = Worker::start_in(&clones[1], "worker-c", "50");
    c.wait_for(&format!("run {run}: claimed"), 30);
    wait_status(&ws, &run, "succeeded");
    c.wait_for(&format!("run {run}: stopped here (succeeded)"), 10);
    assert_each_once(&completed(&ws, &run));
    for (file, text) in [("ANALYSIS.md", "analysed"), ("DECISION.md", "decided")] {
        assert_eq!(
            git(&remote, &["show", &format!("{branch}:{file}")]).trim(),
            text
        );
    }
    assert!(clones[1].join(".trellis/worktrees").join(&run).exists());
    assert_eq!(
        git(
            &remote,
            &["for-each-ref", &format!("refs/heads/trellis/nodes/{run}")]
        ),
        "",
        "the node branches left the remote with the run's node worktrees"
    );

    // The server's workspace wrote nothing of the run; a fork of it there, at its last
    // step, starts from the remote's branch (fetched first).
    assert!(!ws.path().join(".trellis/worktrees").join(&run).exists());
    let steps =
        json(args(isolated(ws.path()), &["runs", "show", &run, "--json"]))["outcome"]["steps"]
            .as_u64()
            .unwrap();
    let fork = run_id(&ok(args(
        isolated(ws.path()),
        &["runs", "fork", &run, "--at", &format!("step:{steps}")],
    )));
    assert_eq!(
        git(
            ws.path(),
            &["show", &format!("trellis/run-{fork}:DECISION.md")]
        )
        .trim(),
        "decided"
    );
    // It reviews, applies and undoes the run.
    let shown = json(args(isolated(ws.path()), &["review", &run, "--json"]));
    let mut files: Vec<&str> = shown["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    files.sort_unstable();
    assert_eq!(files, ["ANALYSIS.md", "DECISION.md"], "{shown}");
    ok(args(
        isolated(ws.path()),
        &["review", &run, "--approve-all"],
    ));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("DECISION.md")).unwrap(),
        "decided\n"
    );
    ok(args(isolated(ws.path()), &["undo", &run]));
    assert!(!ws.path().join("DECISION.md").exists());
    assert!(!ws.path().join("ANALYSIS.md").exists());
}
