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
