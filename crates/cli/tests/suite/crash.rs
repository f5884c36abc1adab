//! Kill a run with SIGKILL at many random points, resume it from the store alone, and check
//! that no COMPLETED node ran twice and that the final state equals an uninterrupted run.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

use super::common::{args, json as run_json, trellis};

/// Executions logged by the handlers: (node#attempt, pid). A line that does not parse was
/// torn by the SIGKILL (the process died mid-write and the next one appended to it): that
/// activation was in flight, not completed, so it is left out.
fn executions(log: &Path) -> Vec<(String, u32)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (a, p) = l.split_once(' ')?;
            Some((a.to_owned(), p.parse().ok()?))
        })
        .collect()
}

fn completed_before_resume(repo: &Path, run: &str) -> Vec<String> {
    let out = super::common::ok(args(trellis(repo), &["runs", "events", run, "--json"]));
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == json!("nodeTransition") && e["to"] == json!("COMPLETED"))
        .map(|e| format!("{}#{}", e["node"].as_str().unwrap(), e["attempt"]))
        .collect()
}

#[test]
fn sigkill_at_random_points_then_resume() {
    let base = tempfile::tempdir().unwrap();
    let sleep_us = "5000";
    // The uninterrupted reference.
    let reference = base.path().join("reference");
    std::fs::create_dir_all(&reference).unwrap();
    let reference_log = reference.join("exec.log");
    let child = args(
        trellis(&reference),
        &[
            "demo",
            "crashtest",
            "--json",
            "--param",
            &format!("sleep_us={sleep_us}"),
            "--param",
            &format!("log={}", reference_log.display()),
        ],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // How long handlers run: from the first handler's log line to the process's exit.
    let waited = Instant::now();
    while executions(&reference_log).is_empty() && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let started = Instant::now();
    let output = child.wait_with_output().unwrap();
    let full_ms = started.elapsed().as_millis() as u64;
    let full: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(full["status"], json!("succeeded"));

    let mut rng = rand::rng();
    let (mut mid_run, mut before_first_commit, mut after_end) = (0, 0, 0);
    // Kill until 12 kills have landed mid-run (a kill can also land before the first commit
    // or after the end, depending on timing and machine load), trying at most 60 times.
    let mut i = 0;
    while mid_run < 12 && i < 60 {
        i += 1;
        let repo = base.path().join(format!("kill{i}"));
        std::fs::create_dir_all(&repo).unwrap();
        let log = repo.join("exec.log");
        let mut child = args(
            trellis(&repo),
            &[
                "demo",
                "crashtest",
                "--quiet",
                "--param",
                &format!("sleep_us={sleep_us}"),
                "--param",
                &format!("log={}", log.display()),
            ],
        )
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
        // Most kills should land while handlers run: wait for the first handler to log, then
        // kill at a random point within the length of a whole run (some land after the end).
        let waited = Instant::now();
        while executions(&log).is_empty() && waited.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let delay = rng.random_range(0..full_ms.max(2));
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let runs = run_json(args(trellis(&repo), &["runs", "list", "--json"]));
        let Some(run) = runs
            .as_array()
            .unwrap()
            .first()
            .and_then(|r| r["id"].as_str())
            .map(str::to_owned)
        else {
            before_first_commit += 1; // killed before anything was committed: nothing to resume
            continue;
        };
        let status = runs[0]["status"].clone();
        let completed = completed_before_resume(&repo, &run);
        let before = executions(&log).len();
        let final_state = if status == json!("succeeded") {
            after_end += 1;
            run_json(args(trellis(&repo), &["runs", "show", &run, "--json"]))["outcome"]["state"]
                .clone()
        } else {
            mid_run += 1;
            assert_eq!(
                status,
                json!("running"),
                "killed run {run} is recorded as running"
            );
            let resumed = run_json(args(trellis(&repo), &["runs", "resume", &run, "--json"]));
            assert_eq!(
                resumed["status"],
                json!("succeeded"),
                "resume after kill #{i} at {delay} ms"
            );
            resumed["state"].clone()
        };
        assert_eq!(
            final_state, full["state"],
            "final state after kill #{i} at {delay} ms"
        );
        let resume_pid_runs: Vec<String> = executions(&log)[before..]
            .iter()
            .map(|(a, _)| a.clone())
            .collect();
        for c in &completed {
            assert!(
                !resume_pid_runs.contains(c),
                "{c} COMPLETED before the kill (#{i}, {delay} ms) and ran again"
            );
        }
    }
    eprintln!(
        "kills: {mid_run} mid-run, {before_first_commit} before the first commit, {after_end} after the end"
    );
    assert!(
        mid_run >= 12,
        "12 of at most 60 kills should land mid-run ({mid_run} did)"
    );
}
