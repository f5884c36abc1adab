//! Project instructions (docs/conventions.md): a repository's `AGENTS.md`, a nested one and
//! the user's own reach a real run's agents through the loopback OpenAI mock — the user's and
//! the root's in the prompt, the nested one with the first tool result under its directory —
//! and the orchestrator; the run record names the files with their hashes; the test command
//! the file names is the run's; `trellis init` writes a starter and never overwrites.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use trellis_test_support::git;

use super::common::*;
use super::mock::*;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const ROOT: &str = "# Inventory\n\nRULE-ROOT: keep stock in integers.\nRun `python3 -m pytest -q tests` before you finish.\n@docs/style.md\n";

/// The inventory example with a root `AGENTS.md` (including a style file), a nested one in
/// `pkg/` and the user's own, committed; the mock's agent reads `pkg/util.py`.
fn workspace(config: &str) -> trellis_test_support::TempWorkspace {
    let ws = trellis_test_support::example_repo("inventory", config).unwrap();
    let r = ws.path();
    std::fs::write(r.join("AGENTS.md"), ROOT).unwrap();
    std::fs::create_dir_all(r.join("docs")).unwrap();
    std::fs::write(r.join("docs/style.md"), "RULE-INCLUDED: four spaces.\n").unwrap();
    std::fs::create_dir_all(r.join("pkg")).unwrap();
    std::fs::write(
        r.join("pkg/AGENTS.md"),
        "RULE-NESTED: pkg is pure functions.\n",
    )
    .unwrap();
    std::fs::write(r.join("pkg/util.py"), "def double(x):\n    return 2 * x\n").unwrap();
    git(r, &["add", "-A"]);
    git(r, &["commit", "-qm", "instructions"]);
    let user = r.join(".trellis/xdg-config/trellis");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("AGENTS.md"), "RULE-USER: answer briefly.\n").unwrap();
    ws
}

fn message_with(body: &Value, heading: &str) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .filter_map(|m| m["content"].as_str())
                .find(|c| c.starts_with(heading))
        })
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn agents_and_the_orchestrator_get_the_instructions_and_the_run_record_names_them() {
    let (url, seen) = serve(scripted_agent(vec![(
        "call_1",
        "read_file",
        json!({ "path": "pkg/util.py" }),
    )]));
    let ws = workspace(&mock_config(&url));
    let out = discuss(
        &ws,
        "Let's discuss the decision to keep stock in memory",
        &["--no-input", "--no-review"],
    );
    let run = run_id(&out);

    let bodies = agent_bodies(&seen);
    let first = &bodies[0];
    let project = message_with(first, "## PROJECT CONTEXT");
    for rule in ["RULE-USER", "RULE-ROOT", "RULE-INCLUDED"] {
        assert!(project.contains(rule), "{rule} missing: {project}");
    }
    assert!(
        project.find("RULE-USER") < project.find("RULE-ROOT"),
        "the user's file comes first: {project}"
    );
    assert!(!project.contains("RULE-NESTED"), "{project}");
    // The command the file names is the run's test command.
    assert!(
        project.contains("Test command: `python3 -m pytest -q tests` (from AGENTS.md)"),
        "{project}"
    );
    // The nested file comes with the first result under its directory, once.
    let second = bodies
        .iter()
        .find(|b| tool_results(b) == 1)
        .expect("a turn after the read");
    let read = tool_result(second, "call_1");
    assert!(
        read.contains("return 2 * x") && read.contains("RULE-NESTED"),
        "{read}"
    );

    // The orchestrator was told the project's instructions too.
    let all = seen.lock().unwrap().clone();
    let orchestrator = all
        .iter()
        .find(|b| {
            b["response_format"]["json_schema"]["schema"]["properties"]
                .get("workflow")
                .is_some()
        })
        .expect("the orchestrator was asked");
    assert!(
        message_with(orchestrator, "## PROJECT CONTEXT").contains("RULE-ROOT"),
        "{orchestrator:#}"
    );

    // The run record: which files, with their hashes.
    let shown = ok(args(isolated(ws.path()), &["runs", "show", &run[..12]]));
    let root_hash = hex(&Sha256::digest(ROOT.as_bytes()));
    assert!(
        shown.contains(&format!(
            "  AGENTS.md  (the whole repository)  sha256 {}",
            &root_hash[..12]
        )),
        "{shown}"
    );
    assert!(
        shown.contains("pkg/AGENTS.md  (paths under pkg/)"),
        "{shown}"
    );
    assert!(shown.contains("includes docs/style.md"), "{shown}");
    let v = json(args(
        isolated(ws.path()),
        &["runs", "show", &run[..12], "--json"],
    ));
    let files = v["instructions"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 3, "{v:#}");
    assert_eq!(files[0]["appliesTo"], "user");
    assert_eq!(files[1]["sha256"], root_hash);
}

#[test]
fn cut_and_unreadable_instructions_are_said_and_the_run_goes_on() {
    let (url, seen) = serve(scripted_agent(vec![]));
    let ws = trellis_test_support::example_repo("inventory", &mock_config(&url)).unwrap();
    let r = ws.path();
    let long: String = (0..2000)
        .map(|i| format!("rule {i}: be careful\n"))
        .collect();
    std::fs::write(r.join("AGENTS.md"), format!("@docs/gone.md\n{long}")).unwrap();
    let mut cmd = discussion_run(
        r,
        &[
            "--no-input",
            "--no-review",
            "-c",
            "instructions.max_chars=3000",
        ],
    );
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("AGENTS.md:1: include @docs/gone.md cannot be read")
            .count(),
        1,
        "said once: {stderr}"
    );
    assert!(stderr.contains("longer than 32 KiB"), "{stderr}");
    let project = message_with(&agent_bodies(&seen)[0], "## PROJECT CONTEXT");
    assert!(project.contains("rule 0: be careful"), "{project}");
    assert!(!project.contains("rule 1999"), "{project}");
    assert!(
        project.contains(
            "[instructions cut to fit the input budget: the rest of AGENTS.md is not shown]"
        ),
        "{project}"
    );
    let run = run_id(&String::from_utf8_lossy(&out.stdout));
    let shown = ok(args(isolated(r), &["runs", "show", &run[..12]]));
    assert!(
        shown.contains("! AGENTS.md:1: include @docs/gone.md"),
        "{shown}"
    );
}

#[test]
fn init_writes_a_starter_once_and_never_over_existing_instructions() {
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let r = ws.path();
    let out = ok(args(isolated(r), &["init"]));
    assert!(out.contains("wrote"), "{out}");
    let text = std::fs::read_to_string(r.join("AGENTS.md")).unwrap();
    assert!(text.contains("- Languages: Python (2 files)"), "{text}");
    assert!(text.contains("- Test: `python3 -B -m"), "{text}");
    std::fs::write(r.join("AGENTS.md"), "mine\n").unwrap();
    let again = ok(args(isolated(r), &["init"]));
    assert!(again.contains("AGENTS.md already holds"), "{again}");
    assert_eq!(
        std::fs::read_to_string(r.join("AGENTS.md")).unwrap(),
        "mine\n"
    );
    // Another tool's file stands for the directory: AGENTS.md would hide it.
    std::fs::remove_file(r.join("AGENTS.md")).unwrap();
    std::fs::write(r.join("CLAUDE.md"), "theirs\n").unwrap();
    let claude = ok(args(isolated(r), &["init"]));
    assert!(claude.contains("CLAUDE.md already holds"), "{claude}");
    assert!(!r.join("AGENTS.md").exists());
    let printed = ok(args(isolated(r), &["init", "--print"]));
    assert!(printed.starts_with("# AGENTS.md"), "{printed}");
}
