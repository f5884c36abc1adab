//! Hooks (docs/conventions.md) around a real run against the loopback OpenAI mock: a
//! `before_tool` hook denies a read with its message going back to the agent, an
//! `after_tool` hook sees the call's result, a `run_end` hook is told the run's status, a
//! hook that hangs is killed at its timeout and said once — and every hook run is in the
//! run record (`runs show`).

use serde_json::{Value, json};

use super::common::*;
use super::mock::*;

const GUARD: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"path":"inventory.py"'*) echo "inventory.py is off limits" >&2; exit 1 ;;
esac
"#;

#[test]
fn hooks_deny_observe_and_end_with_a_real_run_and_are_recorded() {
    let (url, seen) = serve(scripted_agent(vec![
        ("call_1", "read_file", json!({ "path": "inventory.py" })),
        (
            "call_2",
            "read_file",
            json!({ "path": "test_inventory.py" }),
        ),
    ]));
    let config = format!(
        "{}\n\
         [[hooks]]\nevent = \"before_tool\"\nname = \"guard\"\ntools = [\"read_*\"]\ncommand = \"sh .hooks/guard.sh\"\n\n\
         [[hooks]]\nevent = \"before_tool\"\nname = \"slow\"\ntimeout_secs = 1\ncommand = \"sleep 30\"\n\n\
         [[hooks]]\nevent = \"after_tool\"\nname = \"crash\"\ncommand = \"kill -SEGV $$\"\n\n\
         [[hooks]]\nevent = \"after_tool\"\nname = \"log\"\ncommand = \"cat >> \\\"$TRELLIS_REPO/.trellis/after.jsonl\\\"; echo >> \\\"$TRELLIS_REPO/.trellis/after.jsonl\\\"\"\n\n\
         [[hooks]]\nevent = \"run_end\"\nname = \"end\"\ncommand = \"cat > \\\"$TRELLIS_REPO/.trellis/end.json\\\"\"\n",
        mock_config(&url)
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    let r = ws.path();
    std::fs::create_dir_all(r.join(".hooks")).unwrap();
    std::fs::write(r.join(".hooks/guard.sh"), GUARD).unwrap();
    trellis_test_support::git(r, &["add", "-A"]);
    trellis_test_support::git(r, &["commit", "-qm", "hooks"]);

    let mut cmd = discussion_run(
        r,
        &[
            "--no-input",
            "--no-review",
            // The hooks write under .trellis/ of the repository.
            "-c",
            "sandbox.mode=\"off\"",
        ],
    );
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let run = run_id(&String::from_utf8_lossy(&out.stdout));

    // The denial's message reached the agent; the other read went ahead.
    let last = &assert_guarded(&seen);
    // The hanging hook was killed at 1 s each time and said once.
    assert_eq!(
        stderr
            .matches("hook `slow` (before_tool #1 of [[hooks]]): did not finish within 1 s")
            .count(),
        1,
        "{stderr}"
    );

    // A hook that crashes changes nothing and is said once too.
    assert_eq!(
        stderr
            .matches("hook `crash` (after_tool #2 of [[hooks]]): was killed by a signal")
            .count(),
        1,
        "{stderr}"
    );
    assert!(!tool_result(last, "call_2").contains("crash"), "{last:#}");

    // after_tool saw the allowed call's result; run_end was told the status.
    let after = std::fs::read_to_string(r.join(".trellis/after.jsonl")).unwrap();
    let events: Vec<Value> = after
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let read = events
        .iter()
        .find(|e| e["arguments"]["path"] == "test_inventory.py")
        .unwrap_or_else(|| panic!("{after}"));
    assert_eq!(read["event"], "after_tool");
    assert_eq!(read["run"], run.as_str());
    assert!(read["output"].as_str().unwrap().contains("def test_"));
    let end: Value =
        serde_json::from_str(&std::fs::read_to_string(r.join(".trellis/end.json")).unwrap())
            .unwrap();
    assert_eq!(end["event"], "run_end");
    assert_eq!(end["status"], "succeeded");
    assert_eq!(end["workflow"], "architecture_discussion");

    // The run record has every hook run.
    let shown = ok(args(isolated(r), &["runs", "show", &run[..12]]));
    assert!(shown.contains("hook:before_tool"), "{shown}");
    assert_recorded(&shown);
    assert!(
        shown
            .lines()
            .any(|l| l.contains("broken") && l.contains("slow")),
        "{shown}"
    );
}

/// Hooks that write their event to `.trellis/<event>.json` (the sandbox off: they write
/// under the repository's `.trellis/`).
fn recording(url: &str) -> String {
    let mut config = mock_config(url);
    for event in ["needs_input", "stage_failed", "run_end"] {
        config.push_str(&format!(
            "\n[[hooks]]\nevent = \"{event}\"\ncommand = \"cat > \\\"$TRELLIS_REPO/.trellis/{event}.json\\\"\"\n"
        ));
    }
    config.push_str("\n[sandbox]\nmode = \"off\"\n");
    config
}

fn told(repo: &std::path::Path, event: &str) -> Value {
    let text = std::fs::read_to_string(repo.join(format!(".trellis/{event}.json")))
        .unwrap_or_else(|e| panic!("the {event} hook did not run: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{event}: {e}: {text}"))
}

#[test]
fn a_run_waiting_for_the_user_and_a_failed_stage_run_their_hooks() {
    // The agent asks the user: the run waits (stdin is no terminal), needs_input is told.
    let (url, _seen) = serve(scripted_agent(vec![(
        "call_q",
        "ask_questions",
        json!({ "questions": [{ "question": "Which store should hold stock?" }] }),
    )]));
    // The analysis agent may ask (its role's tools, as a project would configure them).
    let config = format!(
        "{}\n[tools.roles]\nanalysis_agent = [\"read_file\", \"ask_questions\"]\n",
        recording(&url)
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    let r = ws.path();
    let out = ok(discussion_run(r, &[]));
    assert!(out.contains("waiting for input"), "{out}");
    let asked = told(r, "needs_input");
    assert_eq!(asked["event"], "needs_input");
    assert!(
        asked["interrupt"]
            .to_string()
            .contains("Which store should hold stock?"),
        "{asked:#}"
    );
    assert!(
        !r.join(".trellis/run_end.json").exists(),
        "the run has not ended"
    );

    // Every agent call refused by the model server: the stage fails, then the run.
    let (url, _seen) = trellis_test_support::wire::serve(|body| {
        if is_agent(body) {
            trellis_test_support::wire::Reply::json(
                400,
                &json!({ "error": { "message": "no such model" } }),
            )
        } else {
            trellis_test_support::wire::Reply::sse(sse(&answer(body)))
        }
    });
    let ws = trellis_test_support::example_repo("inventory", &recording(&url)).unwrap();
    let r = ws.path();
    let out = discussion_run(r, &["--no-input"]).output().unwrap();
    assert!(!out.status.success());
    let failed = told(r, "stage_failed");
    assert_eq!(failed["stage"], "architectural_analysis", "{failed:#}");
    assert!(
        failed["error"].to_string().contains("400")
            || failed["error"].to_string().contains("no such model"),
        "{failed:#}"
    );
    let end = told(r, "run_end");
    assert_eq!(end["status"], "failed", "{end:#}");
}

/// The built-in discussion workflow as the user workflow `guarded_discussion`
/// (`.trellis/workflows/guarded_discussion.yaml`), with `hooks` (YAML) of its own.
fn guarded_discussion(repo: &std::path::Path, hooks: &str) -> std::path::PathBuf {
    let builtin = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../workflows/architecture_discussion.yaml"),
    )
    .unwrap();
    let renamed = builtin.replace(
        "  name: \"architecture_discussion\"",
        "  name: \"guarded_discussion\"",
    );
    assert_ne!(renamed, builtin);
    let with_hooks = renamed.replace("\nstages:\n", &format!("\n{hooks}\nstages:\n"));
    assert_ne!(with_hooks, renamed);
    let dir = repo.join(".trellis/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("guarded_discussion.yaml");
    std::fs::write(&file, with_hooks).unwrap();
    file
}

#[test]
fn a_workflows_own_hooks_run_in_its_runs_only_after_the_configurations() {
    let reads = || {
        scripted_agent(vec![
            ("call_1", "read_file", json!({ "path": "inventory.py" })),
            (
                "call_2",
                "read_file",
                json!({ "path": "test_inventory.py" }),
            ),
        ])
    };
    // A configuration hook for every run, first; it notes its turn.
    let config = |url: &str| {
        format!(
            "{}\n[[hooks]]\nevent = \"before_tool\"\nname = \"first\"\ntools = [\"read_*\"]\n\
             command = \"echo config >> \\\"$TRELLIS_REPO/.trellis/order.txt\\\"\"\n",
            mock_config(url)
        )
    };
    let (url, seen) = serve(reads());
    let ws = trellis_test_support::example_repo("inventory", &config(&url)).unwrap();
    let r = ws.path();
    std::fs::create_dir_all(r.join(".hooks")).unwrap();
    std::fs::write(r.join(".hooks/guard.sh"), GUARD).unwrap();
    trellis_test_support::git(r, &["add", "-A"]);
    trellis_test_support::git(r, &["commit", "-qm", "hooks"]);
    let file = guarded_discussion(
        r,
        "hooks:\n\
         \x20 - event: before_tool\n\
         \x20   name: guard\n\
         \x20   tools: [\"read_*\"]\n\
         \x20   command: echo workflow >> \"$TRELLIS_REPO/.trellis/order.txt\"; sh .hooks/guard.sh\n\
         \x20 - event: after_tool\n\
         \x20   name: crash\n\
         \x20   command: kill -SEGV $$\n\
         \x20 - event: run_end\n\
         \x20   name: end\n\
         \x20   command: cat > \"$TRELLIS_REPO/.trellis/guarded_end.json\"\n",
    );
    let shown = ok(args(
        isolated(r),
        &["workflows", "show", "guarded_discussion"],
    ));
    assert!(
        shown.contains("hooks (after the configuration's [[hooks]]):")
            && shown.contains("before_tool   guard  tools: read_*"),
        "{shown}"
    );
    let run_of = |workflow: &str| {
        let out = args(
            isolated(r),
            &[
                "run",
                "Let's discuss the decision to keep stock in memory",
                "--workflow",
                workflow,
                "--skip",
                "decision_documentation",
                "--no-input",
                "--no-review",
                // The hooks write under .trellis/ of the repository.
                "-c",
                "sandbox.mode=\"off\"",
            ],
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        (run_id(&String::from_utf8_lossy(&out.stdout)), stderr)
    };

    // A run of the workflow: its guard denies the read, after the configuration's hook.
    let (run, stderr) = run_of("guarded_discussion");
    assert_guarded(&seen);
    let order = std::fs::read_to_string(r.join(".trellis/order.txt")).unwrap();
    assert!(order.starts_with("config\nworkflow\n"), "{order}");
    // A broken workflow hook is said once, named by its file and place.
    let said = format!(
        "hook `crash` (workflow {}, hooks[1]): was killed by a signal",
        file.display()
    );
    assert_eq!(stderr.matches(&said).count(), 1, "{stderr}");
    let end: Value = serde_json::from_str(
        &std::fs::read_to_string(r.join(".trellis/guarded_end.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(end["event"], "run_end");
    assert_eq!(end["workflow"], "guarded_discussion");
    // Recorded like the configuration's hooks.
    let shown = ok(args(isolated(r), &["runs", "show", &run[..12]]));
    assert_recorded(&shown);

    // A run of another workflow in the same repository: only the configuration's hook.
    std::fs::remove_file(r.join(".trellis/order.txt")).unwrap();
    std::fs::remove_file(r.join(".trellis/guarded_end.json")).unwrap();
    let (url, seen) = serve(reads());
    std::fs::write(r.join(".trellis/config.toml"), config(&url)).unwrap();
    let (_, stderr) = run_of("architecture_discussion");
    let bodies = agent_bodies(&seen);
    let last = bodies.iter().max_by_key(|b| tool_results(b)).unwrap();
    let read = tool_result(last, "call_1");
    assert!(!read.contains("refused"), "{read}");
    assert!(read.contains("class ") || read.contains("def "), "{read}");
    let order = std::fs::read_to_string(r.join(".trellis/order.txt")).unwrap();
    assert!(!order.contains("workflow"), "{order}");
    assert!(order.starts_with("config\n"), "{order}");
    assert!(!stderr.contains("crash"), "{stderr}");
    assert!(!r.join(".trellis/guarded_end.json").exists());
}

/// The last agent request: the guard's denial of the first read reached the agent, and the
/// second read went ahead. Returns that request.
fn assert_guarded(seen: &Seen) -> Value {
    let bodies = agent_bodies(seen);
    let last = bodies
        .iter()
        .max_by_key(|b| tool_results(b))
        .unwrap()
        .clone();
    let last = &last;
    let denied = tool_result(last, "call_1");
    assert!(
        denied.contains("a before_tool hook refused the call: `guard`: inventory.py is off limits"),
        "{denied}"
    );
    assert!(
        tool_result(last, "call_2").contains("def test_"),
        "{last:#}"
    );
    last.clone()
}

/// `runs show` lists the guard's objection to the read and a `run_end` hook that passed.
fn assert_recorded(shown: &str) {
    let objected = shown
        .lines()
        .find(|l| l.contains("hook:before_tool") && l.contains("objected"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        objected.contains("guard (read_file)") && objected.contains("off limits"),
        "{objected}"
    );
    assert!(
        shown
            .lines()
            .any(|l| l.contains("hook:run_end") && l.contains("passed")),
        "{shown}"
    );
}
