//! Issue 33, item 6: the flagship workflow `feature_with_iterative_testing` on the embedded
//! coder model (profile `local`, Qwen2.5-Coder-1.5B-Instruct) against `examples/inventory`,
//! whose `Inventory.commit` has a planted bug that `test_commit_ships_reserved_units`
//! exposes. The run must go through the real stages — the coder agent with its tools, the
//! project's tests really run, the change set reviewable — and end; whether the model fixed
//! the bug is printed (`.config/nextest.toml` shows this test's output), not asserted.
//! The only slow coder-model test of the suite: the optional stages are skipped and the
//! agents' turns capped so that it stays within minutes on two cores.

use serde_json::Value;

use super::common::*;
use super::mock::*;

const CONFIG: &str = "[index.embedding]\nbackend = \"none\"\n\n[models]\ndefault = \"local\"\n\n\
[agents]\ntest_command = \"python3 -B -m unittest -q\"\nmax_turns = 6\n";

const REQUEST: &str = "Fix the bug in Inventory.commit that makes \
test_commit_ships_reserved_units fail";

#[test]
fn the_coder_model_runs_the_feature_workflow_on_the_planted_bug() {
    let ws = trellis_test_support::example_repo("inventory", CONFIG).unwrap();
    let started = std::time::Instant::now();
    let out = args(
        isolated(ws.path()),
        &[
            "run",
            REQUEST,
            "--workflow",
            "feature_with_iterative_testing",
            "--skip",
            "security_review",
            "--skip",
            "lint_and_format",
            "--yes",
            "--no-review",
        ],
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    println!("{text}\n--- stderr ---\n{err}\n--- {minutes:.1} min ---");
    assert!(
        text.contains("succeeded at DONE") || text.contains("at ABORT"),
        "the run did not end:\n{text}\n{err}"
    );
    let run = run_id(&text);

    // The stages ran for real: the coder agent called tools, and the test stage ran the
    // project's tests (their exit code and output are in its result).
    let shown = json(args(isolated(ws.path()), &["runs", "show", &run, "--json"]));
    let stages = &shown["outcome"]["state"]["stage_results"];
    assert!(
        stages["code_generation"].is_object(),
        "no code stage result: {stages}"
    );
    let tests = &stages["test_generation_and_execution"]["output"]["tests"];
    assert!(
        tests["exit_code"].is_i64() && tests["passed"].is_boolean(),
        "the tests did not run: {stages}"
    );
    let turns = ok(args(
        isolated(ws.path()),
        &["runs", "show", &run, "--turns"],
    ));
    assert!(turns.contains("── code_generation"), "{turns}");
    // Whether the model used its tools is reported, not asserted (a 1.5B model may answer
    // without them; the agent then questions a success without a change once).
    let calls = turns.matches("    → ").count();
    println!("{turns}");
    // Prefix reuse (issue 33): prompt tokens served from the model's KV cache, per call.
    let usage = ok(args(isolated(ws.path()), &["runs", "usage", &run]));
    println!("{usage}");
    assert!(usage.contains("prompt"), "{usage}");

    // The change set is reviewable: its files and hunks are listed, nothing applied yet.
    let set = json(args(isolated(ws.path()), &["review", &run, "--json"]));
    let files: Vec<&str> = set["files"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["path"].as_str()).collect())
        .unwrap_or_default();
    let original = std::fs::read_to_string(ws.path().join("inventory.py")).unwrap();
    assert!(
        original.contains("self.stock.get(sku, 0) + quantity"),
        "nothing is applied before review"
    );
    let fixed = tests["passed"] == Value::Bool(true);
    println!(
        "coder model: run {run} ended {} in {minutes:.1} min; {calls} tool calls; tests {}; change set: {}; planted bug fixed: {}",
        if text.contains("succeeded at DONE") {
            "DONE"
        } else {
            "ABORT"
        },
        if fixed { "pass" } else { "fail" },
        if files.is_empty() {
            "empty".to_owned()
        } else {
            files.join(", ")
        },
        if fixed { "yes" } else { "no" }
    );
}
