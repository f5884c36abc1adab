use serde_json::Value;

use super::common::{args, json, ok, trellis};

const BAD: &str = "metadata:\n  name: bad\nstages:\n  - stage_id: 1\n    name: a\n    parallel_agents: [{agent: x}]\n    routing: {next_stage_on_success: 3, max_atempts: 2}\n";

#[test]
fn list_show_validate_and_plan_only() {
    let repo = tempfile::tempdir().unwrap();
    let list = ok(args(trellis(repo.path()), &["workflows", "list"]));
    assert!(
        list.contains("feature_with_iterative_testing   code_implementation  builtin"),
        "{list}"
    );
    assert!(list.contains("architecture_discussion"), "{list}");
    // Workflow commands do not create a store.
    assert!(!repo.path().join(".trellis").exists());

    let show = ok(args(
        trellis(repo.path()),
        &["workflows", "show", "feature_with_iterative_testing"],
    ));
    assert!(
        show.contains("3 security_review                  optional"),
        "{show}"
    );
    assert!(show.contains("(any_fails)"), "{show}");
    let j = json(args(
        trellis(repo.path()),
        &["workflows", "show", "architecture_discussion", "--json"],
    ));
    assert_eq!(j["source"]["kind"], "builtin");
    assert_eq!(j["workflow"]["stages"][1]["required"], false);

    // A user workflow overriding a built-in, and a broken one.
    let dir = repo.path().join(".trellis/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    let over = trellis_workflow::BUILTINS[1]
        .1
        .replace("Discuss and plan architectural decisions", "ours");
    std::fs::write(dir.join("arch.yaml"), over).unwrap();
    let show = ok(args(
        trellis(repo.path()),
        &["workflows", "show", "architecture_discussion"],
    ));
    assert!(show.contains("overrides: builtin"), "{show}");
    assert!(
        ok(args(trellis(repo.path()), &["workflows", "validate"]))
            .contains("ok   architecture_discussion (repo ")
    );
    std::fs::write(dir.join("bad.yaml"), BAD).unwrap();
    let out = args(trellis(repo.path()), &["workflows", "validate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml:7:38: stage `a`: next_stage_on_success routes to stage `3`"),
        "{err}"
    );
    assert!(err.contains("bad.yaml:7:41: unknown key `max_atempts` in routing\n    fix: did you mean `max_attempts`?"), "{err}");
    let file = dir.join("bad.yaml");
    let out = args(
        trellis(repo.path()),
        &["workflows", "validate", file.to_str().unwrap()],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_file(&file).unwrap();

    let plan = ok(args(
        trellis(repo.path()),
        &[
            "run",
            "--plan-only",
            "--workflow",
            "feature_with_iterative_testing",
            "--include",
            "3",
            "Implement JWT auth",
        ],
    ));
    assert!(plan.contains("3 security_review"), "{plan}");
    assert!(
        plan.contains("4 lint_and_format                  (optional stage not included)"),
        "{plan}"
    );
    assert!(plan.contains("adaptive_retrieval DONE ABORT"), "{plan}");
    // Failure routes as the graph takes them (the failure path, max_attempts times).
    assert!(
        plan.contains(
            "failure → code_generation up to 3 times (the first 2 through adaptive_retrieval), then ABORT"
        ),
        "{plan}"
    );
    assert!(
        plan.contains("failure → code_generation once (through adaptive_retrieval), then ABORT"),
        "{plan}"
    );
    let j: Value = json(args(
        trellis(repo.path()),
        &[
            "run",
            "--plan-only",
            "--json",
            "--workflow",
            "feature_with_iterative_testing",
            "--skip",
            "security_review",
            "x",
        ],
    ));
    assert_eq!(
        j["plan"]["skipped"][0]["reason"],
        "--skip on the command line"
    );
    assert_eq!(j["graph"]["entry"], "upfront_retrieval");

    let out = args(trellis(repo.path()), &["run", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    // Not a git repository: a run needs one for its worktree, and says so.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("git"), "{err}");
    let out = args(
        trellis(repo.path()),
        &["run", "--plan-only", "--workflow", "feature", "x"],
    )
    .output()
    .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no workflow named `feature`"));
}
