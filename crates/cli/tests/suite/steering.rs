//! Steering runs through the binary and the runtime service, against the loopback
//! OpenAI-wire mock: a `kill -9` in the middle of an agent's turn and a resume that continues
//! from the recorded turns; messages and pruning from another command; `trellis chat`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use trellis_test_support::TempWorkspace;

use super::common::*;
use super::mock::*;

/// The inventory example whose analysis agent may also run shell commands.
fn example(url: &str) -> TempWorkspace {
    let ws = trellis_test_support::example_repo("inventory", &mock_config(url)).unwrap();
    std::fs::create_dir_all(ws.path().join(".trellis/agents")).unwrap();
    std::fs::write(
        ws.path().join(".trellis/agents/analysis_agent.yaml"),
        "name: analysis_agent\nrole: You analyse.\nobjective: Analyse.\ntools: [shell, read_file]\n",
    )
    .unwrap();
    ws
}

/// Reads `child`'s stdout until a line satisfies `until`; returns everything read.
fn read_until(out: &mut impl BufRead, until: impl Fn(&str) -> bool) -> String {
    let mut printed = String::new();
    loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "ended early:\n{printed}"
        );
        printed.push_str(&line);
        if until(&line) {
            return printed;
        }
    }
}

#[test]
fn a_run_killed_mid_tool_call_resumes_from_its_recorded_turns() {
    // Agent turn 1 reads a file, turn 2 starts a long shell command (killed in flight),
    // turn 3 reports.
    let (url, seen) = serve(scripted_agent(vec![
        ("call_read", "read_file", json!({ "path": "inventory.py" })),
        ("call_sleep", "shell", json!({ "command": "sleep 30" })),
    ]));
    let ws = example(&url);
    // The tool call line is printed once its start is recorded.
    let (mut child, _out, printed) = start(
        &ws,
        &["--skip", "decision_documentation", "--yes", "--no-review"],
        |l| l.contains("→ shell"),
    );
    let run = run_id(&printed);
    std::thread::sleep(Duration::from_millis(300));
    std::process::Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    let _ = child.wait();
    assert_eq!(
        agent_bodies(&seen).len(),
        2,
        "two agent turns before the kill"
    );

    let resumed = ok(args(isolated(ws.path()), &["runs", "resume", &run]));
    assert!(resumed.contains("succeeded at DONE"), "{resumed}");
    let bodies = assert_resumed_from_recorded_turns(&seen);
    // The prompt of the resumed request is the one the first process sent.
    assert_eq!(bodies[2]["messages"][0], bodies[0]["messages"][0]);
    // read_file ran once, in the first process.
    let db = ws.path().join(".trellis/trellis.db");
    let store = trellis_store::Store::open(&db, Default::default()).unwrap();
    let rec = store.get_run(&run).unwrap();
    let reads = store
        .tool_calls(&rec.id)
        .unwrap()
        .iter()
        .filter(|c| c.tool == "read_file")
        .count();
    assert_eq!(reads, 1);
    // The recorded turns are intact and shown.
    let turns = ok(args(
        isolated(ws.path()),
        &["runs", "show", &run, "--turns"],
    ));
    for want in [
        "turn 1",
        "turn 2",
        "turn 3",
        "→ read_file",
        "→ shell",
        "[interrupted",
    ] {
        assert!(turns.contains(want), "{want:?} in\n{turns}");
    }
}

#[test]
fn messages_and_pruning_reach_a_paused_run_from_another_command() {
    let (url, seen) = serve(|body| {
        if !is_agent(body) {
            return sse(&answer(body));
        }
        match tool_results(body) {
            // An approval gate: the network command is `ask` by policy.
            0 => tool_sse(
                "call_net",
                "shell",
                &json!({ "command": "curl -s http://127.0.0.1:9/stock" }).to_string(),
            ),
            _ => sse(&answer(body)),
        }
    });
    let ws = example(&url);
    let out = discuss(
        &ws,
        "Discuss the stock API",
        &["--skip", "decision_documentation", "--no-review"],
    );
    assert!(out.contains("the run is waiting for input"), "{out}");
    let run = run_id(&out);
    // A message to the waiting node: the run is resumed to take it, and waits again.
    let sent = ok(args(
        isolated(ws.path()),
        &[
            "runs",
            "message",
            &run,
            "architectural_analysis",
            "Also look at reserve().",
        ],
    ));
    assert!(sent.contains("resumed here"), "{sent}");
    // Finished nodes cannot be pruned; the waiting one can, and the run then ends.
    let refused = args(
        isolated(ws.path()),
        &["runs", "prune", &run, "upfront_retrieval"],
    )
    .output()
    .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("finished work cannot be pruned"),
        "{refused:?}"
    );
    let pruned = ok(args(
        isolated(ws.path()),
        &[
            "runs",
            "prune",
            &run,
            "architectural_analysis",
            "--reason",
            "not needed",
        ],
    ));
    assert!(pruned.contains("PRUNED"), "{pruned}");
    let show = json(args(isolated(ws.path()), &["runs", "show", &run, "--json"]));
    let node = show["outcome"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "architectural_analysis")
        .unwrap()
        .clone();
    assert_eq!(node["state"], "PRUNED", "{show}");
    // The agent never saw a second model call: the message was buffered, then pruned.
    assert_eq!(
        seen.lock().unwrap().iter().filter(|b| is_agent(b)).count(),
        1
    );
}

#[test]
fn chat_answers_and_continues_a_stored_session() {
    let (url, seen) = serve(|body| {
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        sse(&format!("You asked: {last}"))
    });
    let ws = trellis_test_support::example_repo("inventory", &mock_config(&url)).unwrap();
    let first = json(args(
        isolated(ws.path()),
        &[
            "chat",
            "--channel",
            "design",
            "-m",
            "Where is stock kept?",
            "--json",
        ],
    ));
    assert_eq!(
        first["answer"], "You asked: Where is stock kept?",
        "{first}"
    );
    let session = first["session"].as_str().unwrap().to_owned();
    let second = json(args(
        isolated(ws.path()),
        &[
            "chat",
            "--session",
            &session,
            "-m",
            "And reservations?",
            "--json",
        ],
    ));
    assert_eq!(second["session"], session.as_str());
    assert_eq!(second["answer"], "You asked: And reservations?");
    // The second request carried the first exchange.
    let bodies = seen.lock().unwrap().clone();
    // The workspace was never indexed: the first message's context came from an index
    // brought up to date for it.
    let first_request = bodies[0]["messages"].to_string();
    assert!(
        first_request.contains("## RETRIEVED CODE") && first_request.contains("inventory.py"),
        "{first_request}"
    );
    let history = bodies.last().unwrap()["messages"].to_string();
    assert!(history.contains("Where is stock kept?") && history.contains("You asked: Where"));
}

fn doc_agent(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("technical writer"))
}

fn last_user_text(body: &Value) -> String {
    body["messages"].to_string()
}

/// Starts `trellis run` in the background with `flags`; returns the child, its stdout and the
/// lines read until `until` matched.
fn start(
    ws: &TempWorkspace,
    flags: &[&str],
    until: impl Fn(&str) -> bool,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStdout>,
    String,
) {
    let mut a = vec![
        "run",
        "Document the stock decision",
        "--workflow",
        "architecture_discussion",
    ];
    a.extend_from_slice(flags);
    let mut child = args(isolated(ws.path()), &a)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let printed = read_until(&mut out, until);
    (child, out, printed)
}

#[test]
fn a_message_from_another_process_reaches_the_running_agent() {
    // Slow first turn: the test sends its message meanwhile.
    let (url, seen) = serve(slow_first_turn());
    let ws = example(&url);
    let (mut child, mut out, printed) = start(
        &ws,
        &["--skip", "decision_documentation", "--yes", "--no-review"],
        |l| l.contains("architectural_analysis#1") && l.contains("RUNNING"),
    );
    let run = run_id(&printed);
    // Sent while the first turn's call is under way (the agent's worktree is made before
    // it: the node is RUNNING earlier).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while agent_bodies(&seen).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never called"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let sent = ok(args(
        isolated(ws.path()),
        &[
            "runs",
            "message",
            &run,
            "architectural_analysis",
            "Focus on reserve().",
        ],
    ));
    assert!(sent.contains("sent to"), "{sent}");
    let rest = read_until(&mut out, |l| l.contains("succeeded at DONE"));
    assert!(rest.contains("← user: Focus on reserve()."), "{rest}");
    assert!(child.wait().unwrap().success());
    let agent: Vec<Value> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|b| is_agent(b))
        .cloned()
        .collect();
    assert_eq!(agent.len(), 2);
    assert!(!last_user_text(&agent[0]).contains("Focus on reserve()."));
    assert!(last_user_text(&agent[1]).contains("Focus on reserve()."));
}

#[test]
fn pruning_a_running_agent_from_another_process_rolls_back_its_edits() {
    let (url, _seen) = serve(|body| {
        if !is_agent(body) {
            return sse(&answer(body));
        }
        if !doc_agent(body) {
            return sse(&answer(body));
        }
        match tool_results(body) {
            0 => tool_sse(
                "call_write",
                "write_file",
                &json!({ "path": "docs/adr/0002-draft.md", "content": "# draft\n" }).to_string(),
            ),
            _ => {
                std::thread::sleep(Duration::from_secs(5));
                sse(&answer(body))
            }
        }
    });
    let ws = example(&url);
    let (mut child, mut out, printed) = start(
        &ws,
        &[
            "--include",
            "decision_documentation",
            "--yes",
            "--no-review",
        ],
        |l| l.contains("[decision_documentation]") && l.contains("ok"),
    );
    let run = run_id(&printed);
    let worktree = printed
        .lines()
        .find_map(|l| l.strip_prefix("worktree "))
        .and_then(|l| l.split(" (branch").next())
        .unwrap()
        .to_owned();
    // The agent edits in a worktree of its own, not in the run's.
    let nodes = trellis_tools::worktree::NodeWorktrees::open(
        ws.path(),
        &trellis_protocol::RunId::from_string(&run),
    )
    .unwrap();
    let own = nodes
        .get("decision_documentation")
        .unwrap()
        .expect("the agent's worktree");
    let draft = own.path.join("docs/adr/0002-draft.md");
    assert!(draft.exists(), "the agent wrote nothing");
    assert!(!Path::new(&worktree).join("docs/adr/0002-draft.md").exists());
    let pruned = ok(args(
        isolated(ws.path()),
        &["runs", "prune", &run, "decision_documentation"],
    ));
    assert!(pruned.contains("sent to"), "{pruned}");
    let rest = read_until(&mut out, |l| l.starts_with("run ") && l.contains("after"));
    assert!(rest.contains("PRUNED"), "{rest}");
    let _ = child.wait();
    assert!(
        !draft.exists() && !own.path.exists(),
        "the pruned agent's worktree is still there"
    );
    let branch = std::process::Command::new("git")
        .args(["-C", &worktree, "rev-parse", "--verify", "--quiet"])
        .arg(format!("refs/heads/{}", own.branch))
        .output()
        .unwrap();
    assert!(
        !branch.status.success(),
        "the pruned agent's branch is left"
    );
    let status = std::process::Command::new("git")
        .args(["-C", &worktree, "status", "--porcelain"])
        .output()
        .unwrap();
    assert!(status.stdout.is_empty(), "{status:?}");
}

#[test]
fn request_changes_in_review_runs_the_stage_again() {
    let (url, _seen) = serve(|body| {
        if !is_agent(body) || !doc_agent(body) {
            return sse(&answer(body));
        }
        if tool_results(body) > 0 {
            return sse(&answer(body));
        }
        let status = if body["messages"]
            .to_string()
            .contains("Status must be Accepted")
        {
            "Accepted"
        } else {
            "Proposed"
        };
        tool_sse(
            "call_write",
            "write_file",
            &json!({ "path": "docs/adr/0002-persist.md", "content": format!("# ADR 0002\n\nStatus: {status}\n") })
                .to_string(),
        )
    });
    let ws = example(&url);
    let out = discuss(
        &ws,
        "Document the stock decision",
        &[
            "--include",
            "decision_documentation",
            "--yes",
            "--no-review",
        ],
    );
    assert!(out.contains("succeeded at DONE"), "{out}");
    let run = run_id(&out);
    let set = json(args(isolated(ws.path()), &["review", &run, "--json"]));
    assert!(set.to_string().contains("Status: Proposed"), "{set}");
    let revised = ok(args(
        isolated(ws.path()),
        &[
            "review",
            &run,
            "--request-changes",
            "Status must be Accepted.",
            "--stage",
            "decision_documentation",
        ],
    ));
    assert!(
        revised.contains("running `decision_documentation` again"),
        "{revised}"
    );
    assert!(revised.contains("succeeded"), "{revised}");
    let set = json(args(isolated(ws.path()), &["review", &run, "--json"]));
    assert!(set.to_string().contains("Status: Accepted"), "{set}");
    assert!(!set.to_string().contains("Status: Proposed"), "{set}");
}
