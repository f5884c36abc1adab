//! Kill a run with SIGKILL at many random points, resume it from the store alone, and check
//! that no COMPLETED node ran twice and that the final state equals an uninterrupted run
//! (`crashtest`, lock-step) — or, free-running (`tickets`), that the completion order recorded
//! before the kill is replayed exactly.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

use super::common::{args, json as run_json, trellis};

/// Starts `trellis demo GRAPH` in `repo` with `sleep_us` and handlers logging to `log`;
/// stdout is piped with `--json`, dropped with `--quiet`.
fn start_demo(repo: &Path, graph: &str, sleep_us: &str, log: &Path, json: bool) -> Child {
    let sleep = format!("sleep_us={sleep_us}");
    let log = format!("log={}", log.display());
    let output = if json { "--json" } else { "--quiet" };
    args(
        trellis(repo),
        &["demo", graph, output, "--param", &sleep, "--param", &log],
    )
    .stdout(if json { Stdio::piped() } else { Stdio::null() })
    .spawn()
    .unwrap()
}

/// Waits (at most 10 s) until a handler has logged.
fn wait_for_first_execution(log: &Path) {
    let waited = Instant::now();
    while executions(log).is_empty() && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

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
    let child = start_demo(&reference, "crashtest", sleep_us, &reference_log, true);
    // How long handlers run: from the first handler's log line to the process's exit.
    wait_for_first_execution(&reference_log);
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
        let mut child = start_demo(&repo, "crashtest", sleep_us, &log, false);
        // Most kills should land while handlers run: wait for the first handler to log, then
        // kill at a random point within the length of a whole run (some land after the end).
        wait_for_first_execution(&log);
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

/// Node ids in the order the `tickets` demo recorded their completions (its `order` channel)
/// in a `RunOutcome`'s state.
fn order(state: &Value) -> Vec<String> {
    state["order"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// A `RunOutcome`'s nodes that were reached: id → (attempt, state, result).
fn node_results(outcome: &Value) -> BTreeMap<String, Value> {
    outcome["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| !n["state"].is_null())
        .map(|n| {
            let id = n["id"].as_str().unwrap().to_owned();
            (id, json!([n["attempt"], n["state"], n["result"]]))
        })
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// A run's events, from `trellis runs events RUN --json`.
fn events(repo: &Path, run: &str) -> Vec<Value> {
    let out = super::common::ok(args(trellis(repo), &["runs", "events", run, "--json"]));
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The dependencies of spawned children (`nodeAdded.after`): node → the nodes it waits for.
fn dependencies(events: &[Value]) -> Vec<(String, Vec<String>)> {
    events
        .iter()
        .filter(|e| e["type"] == json!("nodeAdded") && e["after"].is_array())
        .map(|e| {
            let after = e["after"].as_array().unwrap();
            let after = after.iter().map(|a| a.as_str().unwrap().to_owned());
            (e["node"].as_str().unwrap().to_owned(), after.collect())
        })
        .collect()
}

/// Checks that, in `order`, the last completion of every node comes after the last completion
/// of each node it waits for, and every ticket's merge after the merges its work waits for
/// (`tickets/t<k>` after `tickets/t<j>.merge` ⇒ `tickets/t<k>.merge` after it). Returns how
/// many merge → merge dependencies it checked.
fn check_dependency_order(order: &[String], deps: &[(String, Vec<String>)], what: &str) -> usize {
    let last = |node: &str| {
        order
            .iter()
            .rposition(|n| n == node)
            .unwrap_or_else(|| panic!("{what}: {node} never completed: {order:?}"))
    };
    let mut merges = 0;
    for (node, after) in deps {
        for dep in after {
            assert!(
                last(dep) < last(node),
                "{what}: {node} completed before its dependency {dep}: {order:?}"
            );
            if dep.ends_with(".merge") {
                let merge = format!("{node}.merge");
                assert!(
                    last(dep) < last(&merge),
                    "{what}: {merge} completed before {dep}: {order:?}"
                );
                merges += 1;
            }
        }
    }
    merges
}

/// Free-running (`trellis demo tickets`: ticket pipelines that interleave, a revision, a
/// collector): after each SIGKILL, the state rebuilt from the log alone (`runs show`) holds the
/// completion order so far; the resumed run must replay that order exactly — its final `order`
/// starts with it element for element — and continue from there, re-running no activation
/// that had COMPLETED. The final order itself depends on timing, so it is compared with the
/// uninterrupted run only as a multiset; the completed nodes and each node's final attempt,
/// state and result must be the same.
#[test]
fn sigkill_free_running_tickets_then_resume_replays_the_recorded_order() {
    let base = tempfile::tempdir().unwrap();
    let sleep_us = "4000";
    // The uninterrupted reference.
    let reference = base.path().join("reference");
    std::fs::create_dir_all(&reference).unwrap();
    let reference_log = reference.join("exec.log");
    let child = start_demo(&reference, "tickets", sleep_us, &reference_log, true);
    wait_for_first_execution(&reference_log);
    let started = Instant::now();
    let output = child.wait_with_output().unwrap();
    let full_ms = started.elapsed().as_millis() as u64;
    let full: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(full["status"], json!("succeeded"));
    let full_nodes = node_results(&full);
    let full_order = order(&full["state"]);
    // Every node completed, the revised work twice.
    let completions: usize = full_nodes
        .values()
        .map(|n| n[0].as_u64().unwrap() as usize)
        .sum();
    assert_eq!(full_order.len(), completions - 1, "{full_order:?}"); // less the failed review
    let without_order = |state: &Value| {
        let mut s = state.clone();
        s.as_object_mut().unwrap().remove("order");
        s
    };

    let mut rng = rand::rng();
    let (mut mid_run, mut with_order, mut before_first_commit, mut after_end) = (0, 0, 0, 0);
    // Activations running at the kill and re-queued by the resume; of those, the ones that
    // had already logged (finished, output not yet committed).
    let (mut requeued, mut reran_in_flight) = (0, 0);
    // How many completions each mid-run kill had recorded.
    let mut prefixes = Vec::new();
    // Kill until 12 kills have landed mid-run with some completions recorded, trying at most
    // 60 times (a kill can also land before the first commit or after the end).
    let mut i = 0;
    while with_order < 12 && i < 60 {
        i += 1;
        let repo = base.path().join(format!("kill{i}"));
        std::fs::create_dir_all(&repo).unwrap();
        let log = repo.join("exec.log");
        let mut child = start_demo(&repo, "tickets", sleep_us, &log, false);
        let killed_pid = child.id();
        wait_for_first_execution(&log);
        let delay = rng.random_range(0..full_ms.max(2));
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let at = format!("kill #{i} at {delay} ms");

        let runs = run_json(args(trellis(&repo), &["runs", "list", "--json"]));
        let Some(run) = runs[0]["id"].as_str().map(str::to_owned) else {
            before_first_commit += 1; // nothing committed: nothing to resume
            continue;
        };
        // (a) The state at the kill, rebuilt from the log alone.
        let at_kill = run_json(args(trellis(&repo), &["runs", "show", &run, "--json"]));
        let recorded = order(&at_kill["outcome"]["state"]);
        let events_at_kill = events(&repo, &run);
        let completed: Vec<String> = events_at_kill
            .iter()
            .filter(|e| e["type"] == json!("nodeTransition") && e["to"] == json!("COMPLETED"))
            .map(|e| format!("{}#{}", e["node"].as_str().unwrap(), e["attempt"]))
            .collect();
        // The recorded order holds exactly the completions in the log.
        let completed_nodes = completed
            .iter()
            .map(|c| c.split('#').next().unwrap().to_owned());
        assert_eq!(
            sorted(recorded.clone()),
            sorted(completed_nodes.collect()),
            "{at}: the recorded order and the COMPLETED transitions differ"
        );
        // (b) Resume (unless the kill came after the end).
        let outcome = if runs[0]["status"] == json!("succeeded") {
            after_end += 1;
            at_kill["outcome"].clone()
        } else {
            mid_run += 1;
            with_order += usize::from(!recorded.is_empty());
            prefixes.push(recorded.len());
            assert_eq!(runs[0]["status"], json!("running"), "{at}: {run}");
            let resumed = run_json(args(trellis(&repo), &["runs", "resume", &run, "--json"]));
            assert_eq!(resumed["status"], json!("succeeded"), "resume after {at}");
            resumed
        };
        // (c) The order recorded before the kill is replayed exactly, then extended.
        let final_order = order(&outcome["state"]);
        assert!(
            final_order.len() >= recorded.len() && final_order[..recorded.len()] == recorded[..],
            "{at}: the final order does not start with the order recorded before the kill\n\
             recorded: {recorded:?}\nfinal:    {final_order:?}"
        );
        // A fresh process rebuilds exactly the resumed process's final outcome.
        let shown = run_json(args(trellis(&repo), &["runs", "show", &run, "--json"]));
        assert_eq!(
            shown["outcome"], outcome,
            "{at}: runs show after the resume"
        );
        // No activation that had COMPLETED before the kill ran again.
        let runs_after: Vec<String> = executions(&log)
            .into_iter()
            .filter(|(_, pid)| *pid != killed_pid)
            .map(|(a, _)| a)
            .collect();
        for c in &completed {
            assert!(
                !runs_after.contains(c),
                "{c} COMPLETED before {at} and ran again"
            );
        }
        let ran_before: Vec<String> = executions(&log)
            .into_iter()
            .filter(|(_, pid)| *pid == killed_pid)
            .map(|(a, _)| a)
            .collect();
        reran_in_flight += runs_after.iter().filter(|a| ran_before.contains(a)).count();
        // The log before the kill is untouched: the resumed run appended to it.
        let final_events = events(&repo, &run);
        assert_eq!(
            final_events[..events_at_kill.len()],
            events_at_kill[..],
            "{at}: the events recorded before the kill changed"
        );
        let completed_in_the_end = final_events
            .iter()
            .filter(|e| e["type"] == json!("nodeTransition") && e["to"] == json!("COMPLETED"))
            .map(|e| e["node"].as_str().unwrap().to_owned());
        assert_eq!(
            sorted(final_order.clone()),
            sorted(completed_in_the_end.collect()),
            "{at}: the final order and the COMPLETED transitions differ"
        );
        requeued += final_events[events_at_kill.len()..]
            .iter()
            .filter(|e| e["type"] == json!("nodeTransition") && e["from"] == json!("RUNNING"))
            .filter(|e| e["to"] == json!("READY"))
            .count();
        // Dependencies hold in the final order: merges after the merges they wait for.
        let deps = dependencies(&final_events);
        let merges = check_dependency_order(&final_order, &deps, &at);
        assert!(
            merges >= 3,
            "{at}: only {merges} merge → merge dependencies"
        );
        // The same nodes completed, with the same final attempts and results, as uninterrupted.
        assert_eq!(node_results(&outcome), full_nodes, "{at}: node results");
        assert_eq!(
            sorted(final_order.clone()),
            sorted(full_order.clone()),
            "{at}: completions"
        );
        assert_eq!(
            without_order(&outcome["state"]),
            without_order(&full["state"]),
            "{at}: final state besides the order"
        );
    }
    eprintln!(
        "tickets kills: {mid_run} mid-run ({with_order} with completions recorded — \
         {prefixes:?} of {}; {requeued} running activations re-queued, {reran_in_flight} of \
         them logged but not committed), {before_first_commit} before the first commit, \
         {after_end} after the end",
        full_order.len()
    );
    assert!(
        with_order >= 12,
        "12 of at most 60 kills should land mid-run after a completion ({with_order} did)"
    );
    assert!(requeued > 0, "no kill landed while a handler ran");
}
