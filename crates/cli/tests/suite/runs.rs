use serde_json::json;

use super::common::{args, json, ok, trellis};

#[test]
fn demo_list_show_events_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let text = ok(args(trellis(dir.path()), &["demo", "feature"]));
    assert!(text.contains("✗ test_generation#1"), "{text}");
    assert!(text.contains("succeeded at DONE after 9 steps"), "{text}");
    assert!(dir.path().join(".trellis/trellis.db").exists());

    let runs = json(args(trellis(dir.path()), &["runs", "list", "--json"]));
    let id = runs[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(runs[0]["status"], json!("succeeded"));
    assert_eq!(runs[0]["terminal"], json!("DONE"));

    let listed = ok(args(trellis(dir.path()), &["runs", "list"]));
    assert!(
        listed.contains(&id[..16]) && listed.contains("succeeded"),
        "{listed}"
    );

    let show = json(args(
        trellis(dir.path()),
        &["runs", "show", &id[..20], "--json"],
    ));
    assert_eq!(show["outcome"]["state"]["outcome"], json!("DONE"));
    assert_eq!(show["checkpoints"].as_array().unwrap().len(), 10);
    let text = ok(args(trellis(dir.path()), &["runs", "show", &id]));
    assert!(text.contains("test_generation#3"), "{text}");
    assert!(
        text.contains("enrichment_attempts:test_generation = 2"),
        "{text}"
    );

    let events = ok(args(
        trellis(dir.path()),
        &["runs", "events", &id, "--json"],
    ));
    let lines: Vec<serde_json::Value> = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], json!("runStarted"));
    assert!(
        lines
            .windows(2)
            .all(|w| w[1]["seq"].as_u64() == w[0]["seq"].as_u64().map(|s| s + 1))
    );
    assert_eq!(lines.last().unwrap()["type"], json!("runStatusChanged"));
}

#[test]
fn waiting_run_is_answered_forked_and_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let out = json(args(
        trellis(dir.path()),
        &[
            "demo",
            "feature",
            "--param",
            "approval_stage=security_review",
            "--json",
        ],
    ));
    assert_eq!(out["status"], json!("waitingInput"));
    let id = out["run"].as_str().unwrap().to_owned();

    // Fork the waiting run from step 2, then cancel the fork (no live process holds it).
    let fork = json(args(
        trellis(dir.path()),
        &["runs", "fork", &id, "--at", "step:2", "--json"],
    ));
    assert_eq!(fork["status"], json!("waitingInput"));
    let fork_id = fork["run"].as_str().unwrap().to_owned();
    let cancelled = ok(args(
        trellis(dir.path()),
        &["runs", "cancel", &fork_id, "--reason", "not needed"],
    ));
    assert!(cancelled.contains("cancelled"), "{cancelled}");
    let shown = json(args(
        trellis(dir.path()),
        &["runs", "show", &fork_id, "--json"],
    ));
    assert_eq!(shown["run"]["status"], json!("cancelled"));
    assert_eq!(shown["run"]["fork"]["run"], json!(id));

    // Answer the original.
    let done = json(args(
        trellis(dir.path()),
        &[
            "runs",
            "resume",
            &id,
            "--answer",
            "security_review=yes",
            "--json",
        ],
    ));
    assert_eq!(done["status"], json!("succeeded"));
    let again = args(trellis(dir.path()), &["runs", "resume", &id])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already succeeded; fork it to run again")
    );
}

#[test]
fn bad_input_gets_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    ok(args(
        trellis(dir.path()),
        &["demo", "chain", "--param", "n=3", "-q"],
    ));
    for (a, expect) in [
        (
            vec!["runs", "show", "zzz"],
            "no run matches 'zzz'; see `trellis runs list`",
        ),
        (
            vec!["demo", "featur"],
            "unknown graph `featur` (did you mean `feature`?)",
        ),
        (
            vec!["runs", "list", "--status", "done"],
            "unknown status `done`",
        ),
        (
            vec!["demo", "feature", "--param", "oops"],
            "`oops` is not KEY=VALUE",
        ),
    ] {
        let out = args(trellis(dir.path()), &a).output().unwrap();
        assert!(!out.status.success(), "{a:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{a:?}: {err}");
    }
}

#[test]
fn usage_lists_a_runs_model_calls_with_totals() {
    use trellis_store::{ModelCallRecord, Store, StoreOptions};

    let dir = tempfile::tempdir().unwrap();
    ok(args(trellis(dir.path()), &["demo", "feature"]));
    let runs = json(args(trellis(dir.path()), &["runs", "list", "--json"]));
    let id = runs[0]["id"].as_str().unwrap().to_owned();

    let text = ok(args(trellis(dir.path()), &["runs", "usage", &id]));
    assert!(text.contains("no model calls recorded"), "{text}");

    // What a run's budget ledger persists through the store (see trellis_agents::usage).
    {
        let store = Store::open_workspace(dir.path(), StoreOptions::default()).unwrap();
        let run = store.get_run(&id).unwrap().id;
        let row = |stage: &str, agent: &str, prompt, completion, cost| ModelCallRecord {
            id: 0,
            run_id: Some(run.clone()),
            stage: Some(stage.into()),
            agent: Some(agent.into()),
            profile: "remote".into(),
            model: "gpt-test".into(),
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_tokens: 0,
            reported: true,
            cost_usd: cost,
            outcome: "ok".into(),
            at: 1_763_700_000_000,
        };
        store
            .record_model_call(row("plan", "planner", 1200, 300, Some(0.0081)))
            .unwrap();
        let mut cut = row("code", "coder", 2000, 50, Some(0.0069));
        cut.outcome = "failed".into();
        cut.reported = false;
        store.record_model_call(cut).unwrap();
    }

    let v = json(args(
        trellis(dir.path()),
        &["runs", "usage", &id[..12], "--json"],
    ));
    assert_eq!(v["run"], json!(id));
    assert_eq!(v["calls"].as_array().unwrap().len(), 2);
    assert_eq!(v["usage"]["run"]["calls"], json!(2));
    assert_eq!(v["usage"]["run"]["promptTokens"], json!(3200));
    assert_eq!(v["usage"]["run"]["completionTokens"], json!(350));
    assert_eq!(v["usage"]["run"]["estimatedCalls"], json!(1));
    assert_eq!(v["usage"]["stages"][0][0], json!("code"));
    assert_eq!(v["usage"]["agents"][1][0], json!("planner"));
    assert_eq!(v["usage"]["agents"][1][1]["promptTokens"], json!(1200));

    let text = ok(args(trellis(dir.path()), &["runs", "usage", &id]));
    assert!(
        text.contains("2 calls, 3550 tokens (3200 prompt, 350 completion), $0.0150"),
        "{text}"
    );
    assert!(text.contains("1 call estimated"), "{text}");
    assert!(text.contains("1 call failed or cancelled"), "{text}");
    assert!(
        text.contains("plan/planner  remote (gpt-test)  1200+300 tokens"),
        "{text}"
    );
    assert!(text.contains("(estimated)  $0.0069  failed"), "{text}");
}
