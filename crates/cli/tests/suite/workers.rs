//! `trellis worker` over a PostgreSQL store (a throwaway cluster on loopback) and the
//! loopback OpenAI-wire mock: a run queued with `trellis run --queue` is claimed by a
//! worker; a worker killed with SIGKILL mid-turn loses its lease and another worker resumes
//! the run from its recorded turns; a stopped worker drains and exits.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trellis_test_pg::Cluster;
use trellis_test_support::TempWorkspace;

use super::common::*;
use super::mock::*;

/// The inventory example on the mock model at `url`, its records in database `db_url`; its
/// analysis agent may run shell commands.
pub(super) fn workspace(url: &str, db_url: &str) -> TempWorkspace {
    example(url, Some(db_url))
}

/// The inventory example of [`workspace`], its records in `db_url` or, without one, in its
/// SQLite file.
pub(super) fn example(url: &str, db_url: Option<&str>) -> TempWorkspace {
    let store = db_url.map_or(String::new(), |db| format!("\n[store]\nurl = \"{db}\"\n"));
    let config = format!("{}{store}", mock_config(url));
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    std::fs::create_dir_all(ws.path().join(".trellis/agents")).unwrap();
    std::fs::write(
        ws.path().join(".trellis/agents/analysis_agent.yaml"),
        "name: analysis_agent\nrole: You analyse.\nobjective: Analyse.\ntools: [shell, read_file]\n",
    )
    .unwrap();
    ws
}

/// A worker process, its output lines arriving on a channel.
pub(super) struct Worker {
    pub(super) child: Child,
    lines: mpsc::Receiver<String>,
    printed: Vec<String>,
}

impl Worker {
    pub(super) fn start(ws: &TempWorkspace, name: &str) -> Self {
        Self::start_polling(ws, name, "50")
    }

    pub(super) fn start_polling(ws: &TempWorkspace, name: &str, poll_ms: &str) -> Self {
        Self::start_in(ws.path(), name, poll_ms)
    }

    /// A worker in the repository `dir` (its own clone).
    pub(super) fn start_in(dir: &std::path::Path, name: &str, poll_ms: &str) -> Self {
        Self::start_with(dir, name, poll_ms, &[])
    }

    /// A worker exporting its spans and metrics over OTLP/HTTP to `collector`.
    fn start_exporting(
        ws: &TempWorkspace,
        name: &str,
        collector: &trellis_test_http::Server,
    ) -> Self {
        let endpoint = format!("telemetry.otlp_endpoint=\"{}\"", collector.url());
        Self::start_with(ws.path(), name, "50", &["-c", &endpoint])
    }

    /// A worker in `dir`, with the global options `global` before the subcommand.
    fn start_with(dir: &std::path::Path, name: &str, poll_ms: &str, global: &[&str]) -> Self {
        let mut child = args(
            args(isolated(dir), global),
            &[
                "worker",
                "--name",
                name,
                "--lease-secs",
                "2",
                "--poll-ms",
                poll_ms,
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
        let out: ChildStdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            lines,
            printed: Vec::new(),
        }
    }

    /// Waits (at most `secs`) for a printed line holding `want`; the line.
    pub(super) fn wait_for(&mut self, want: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(l) = self.printed.iter().find(|l| l.contains(want)) {
                return l.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.printed.push(line),
                Err(_) => panic!(
                    "no line with {want:?} in {secs} s:\n{}",
                    self.printed.join("\n")
                ),
            }
        }
    }

    /// Keeps what the worker printed so far (so that it never blocks on a full pipe).
    pub(super) fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.printed.push(line);
        }
    }

    pub(super) fn signal(&self, signal: &str) {
        std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
    }
}

impl Drop for Worker {
    /// A test that fails half-way leaves no worker behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (at most 90 s) until `run` is recorded with `status`.
pub(super) fn wait_status(ws: &TempWorkspace, run: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let show = json(args(isolated(ws.path()), &["runs", "show", run, "--json"]));
        if show["outcome"]["status"] == json!(status) {
            return show;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} is not {status}: {}",
            show["outcome"]["status"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The mock model: agent turn 1 reads a file, turn 2 starts a long shell command (its
/// worker is stopped meanwhile), turn 3 reports.
fn three_turns() -> (Wire, Seen) {
    serve(scripted_agent(vec![
        ("call_read", "read_file", json!({ "path": "inventory.py" })),
        ("call_sleep", "shell", json!({ "command": "sleep 20" })),
    ]))
}

fn agent_calls(seen: &Seen) -> usize {
    agent_bodies(seen).len()
}

/// Queues the discussion run (without its documentation stage); its id.
fn queue(ws: &TempWorkspace) -> String {
    queue_with(ws, &["--skip", "decision_documentation"])
}

/// Queues the discussion run with `flags`; its id.
fn queue_with(ws: &TempWorkspace, flags: &[&str]) -> String {
    let mut a = vec![
        "run",
        "Discuss the stock decision",
        "--workflow",
        "architecture_discussion",
        "--queue",
    ];
    a.extend_from_slice(flags);
    let queued = ok(args(isolated(ws.path()), &a));
    assert!(queued.contains("queued for the workers"), "{queued}");
    run_id(&queued)
}

/// Waits (at most 60 s) until the agent has made `n` model calls, then 300 ms more.
fn wait_agent_calls(seen: &Seen, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while agent_calls(seen) < n {
        assert!(Instant::now() < deadline, "the agent's call {n} never came");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// The nodes that completed in `run`, in order (each once, if no completed node re-ran).
pub(super) fn completed(ws: &TempWorkspace, run: &str) -> Vec<String> {
    ok(args(
        isolated(ws.path()),
        &["runs", "events", run, "--json"],
    ))
    .lines()
    .map(|l| serde_json::from_str::<Value>(l).unwrap())
    .filter(|e| e["type"] == json!("nodeTransition") && e["to"] == json!("COMPLETED"))
    .map(|e| e["node"].as_str().unwrap().to_owned())
    .collect()
}

pub(super) fn assert_each_once(nodes: &[String]) {
    let mut unique = nodes.to_vec();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        nodes.len(),
        "a completed node ran twice: {nodes:?}"
    );
}

#[test]
fn a_killed_worker_s_run_is_resumed_by_another_worker_from_its_recorded_turns() {
    let (url, seen) = three_turns();
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let run = queue(&ws);
    // Recorded and runnable, and nothing executes it yet.
    assert_eq!(db.psql("SELECT count(*) FROM runs").trim(), "1");
    assert!(seen.lock().unwrap().is_empty());

    let mut a = Worker::start(&ws, "worker-a");
    let claimed = a.wait_for(&format!("run {run}: claimed"), 30);
    assert!(claimed.contains("lease token 1"), "{claimed}");
    wait_agent_calls(&seen, 2);
    a.signal("-9");
    let _ = a.child.wait();
    assert_eq!(agent_calls(&seen), 2, "two agent turns before the kill");
    assert_eq!(
        db.psql(&format!(
            "SELECT runnable, owner FROM run_leases WHERE run_id = '{run}'"
        ))
        .trim(),
        "t|worker-a",
        "the dead worker's lease stays until it expires"
    );

    // The worker that takes the run over exports its metrics (over OTLP: a worker serves no
    // `/metrics`).
    let collector = trellis_test_http::Server::concurrent(|_| {
        trellis_test_http::Response::new(200, "application/x-protobuf", Vec::new())
    });
    let mut b = Worker::start_exporting(&ws, "worker-b", &collector);
    b.wait_for(
        &format!("run {run}: took over the expired lease of worker worker-a"),
        30,
    );
    let claimed = b.wait_for(&format!("run {run}: claimed"), 30);
    assert!(claimed.contains("lease token 2"), "{claimed}");
    let show = wait_status(&ws, &run, "succeeded");
    b.wait_for(&format!("run {run}: stopped here (succeeded)"), 10);

    assert_resumed_from_recorded_turns(&seen);
    assert_each_once(&completed(&ws, &run));
    assert!(show["outcome"]["nodes"].as_array().is_some());
    // Parked once finished, lease released.
    assert_eq!(
        db.psql(&format!(
            "SELECT runnable, owner IS NULL FROM run_leases WHERE run_id = '{run}'"
        ))
        .trim(),
        "f|t"
    );

    // A stop drains (nothing executes) and exits cleanly.
    b.signal("-TERM");
    b.wait_for("stopping: no new runs", 10);
    b.wait_for("worker worker-b: stopped", 10);
    assert!(b.child.wait().unwrap().success());
    assert_worker_metrics(&collector);
}

/// The worker's metrics as exported at its exit: one takeover, and the queue it saw last
/// (empty: the one run is done).
fn assert_worker_metrics(collector: &trellis_test_http::Server) {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value as N};
    use prost::Message;

    let last = collector
        .requests()
        .into_iter()
        .rfind(|r| r.target == "/v1/metrics")
        .expect("the metrics, sent at exit");
    let req = ExportMetricsServiceRequest::decode(last.body.as_slice()).unwrap();
    let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
    let metric = |name: &str| {
        metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no {name} in {metrics:?}"))
    };
    let Some(Data::Sum(events)) = &metric("trellis.worker.events").data else {
        panic!("worker events are a sum");
    };
    let took_over: Vec<_> = events
        .data_points
        .iter()
        .filter(|p| format!("{:?}", p.attributes).contains("\"took_over\""))
        .map(|p| p.value)
        .collect();
    assert_eq!(took_over, [Some(N::AsInt(1))], "{events:?}");
    let Some(Data::Gauge(queue)) = &metric("trellis.worker.queue").data else {
        panic!("the queue is a gauge");
    };
    assert_eq!(
        queue
            .data_points
            .iter()
            .map(|p| p.value)
            .collect::<Vec<_>>(),
        [Some(N::AsInt(0))]
    );
}

#[test]
fn a_worker_cut_off_past_its_lease_writes_nothing_when_it_comes_back() {
    let (url, seen) = three_turns();
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let run = queue(&ws);

    let mut a = Worker::start(&ws, "worker-a");
    a.wait_for(&format!("run {run}: claimed"), 30);
    wait_agent_calls(&seen, 2);
    // Frozen mid-tool-call for longer than its lease: no heartbeat, no write.
    a.signal("-STOP");
    let mut b = Worker::start(&ws, "worker-b");
    let claimed = b.wait_for(&format!("run {run}: claimed"), 30);
    assert!(claimed.contains("lease token 2"), "{claimed}");
    wait_status(&ws, &run, "succeeded");
    b.wait_for(&format!("run {run}: stopped here (succeeded)"), 10);
    std::thread::sleep(Duration::from_millis(500));
    let rows = || {
        db.psql("SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM stream_events)")
            .trim()
            .to_owned()
    };
    let before = rows();

    // Back: its heartbeat finds the lease taken and the run stops there, writing nothing.
    a.signal("-CONT");
    a.wait_for(&format!("run {run}: another worker took its lease"), 10);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(rows(), before, "the fenced worker wrote nothing");
    assert_eq!(agent_calls(&seen), 3, "no turn was made twice");
    assert_each_once(&completed(&ws, &run));
    assert_eq!(
        db.psql(&format!(
            "SELECT token, owner IS NULL FROM run_leases WHERE run_id = '{run}'"
        ))
        .trim(),
        "2|t"
    );

    for w in [&mut a, &mut b] {
        w.signal("-TERM");
        assert!(w.child.wait().unwrap().success());
    }
}

/// The last user message of a request.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

#[test]
fn a_message_from_another_process_reaches_the_agent_running_on_a_worker() {
    // Slow first turn: the test sends its message meanwhile.
    let (url, seen) = serve(slow_first_turn());
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let run = queue(&ws);
    let mut a = Worker::start(&ws, "worker-a");
    a.wait_for(&format!("run {run}: claimed"), 30);
    wait_agent_calls(&seen, 1);

    // Another process of the team (`[store] workers = true`) queues the message in the
    // run's inbox; the worker's engine takes it and hands it to the agent.
    let sent = ok(args(
        isolated(ws.path()),
        &[
            "-c",
            "store.workers=true",
            "runs",
            "message",
            &run,
            "architectural_analysis",
            "Focus on reserve().",
        ],
    ));
    assert!(sent.contains("queued for the workers"), "{sent}");
    wait_status(&ws, &run, "succeeded");
    let agent = agent_bodies(&seen);
    assert_eq!(agent.len(), 2);
    assert!(!last_user_text(&agent[0]).contains("Focus on reserve()."));
    assert!(
        last_user_text(&agent[1]).contains("Focus on reserve()."),
        "{:#?}",
        agent[1]["messages"]
    );
    a.signal("-TERM");
    assert!(a.child.wait().unwrap().success());
}

/// The multi-process check of issue 36 at CI size: runs queued for three workers, workers
/// killed with SIGKILL at random moments and replaced, until every run has ended — each
/// succeeded, no completed node ran twice, every lease parked and free.
#[test]
fn runs_survive_workers_killed_at_random_moments() {
    use rand::Rng;
    const RUNS: usize = 10;
    const KILLS: usize = 4;
    // Every model call takes a moment, so kills land inside runs.
    let agent = scripted_agent(vec![(
        "call_read",
        "read_file",
        json!({ "path": "inventory.py" }),
    )]);
    let (url, _seen) = serve(move |body| {
        std::thread::sleep(Duration::from_millis(150));
        agent(body)
    });
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let runs: Vec<String> = (0..RUNS).map(|_| queue(&ws)).collect();

    let start = |i: usize| Worker::start(&ws, &format!("worker-{i}"));
    let mut workers: Vec<Worker> = (0..3).map(start).collect();
    let mut rng = rand::rng();
    for next in 3..3 + KILLS {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        let victim = rng.random_range(0..workers.len());
        let mut dead = workers.swap_remove(victim);
        dead.signal("-9");
        let _ = dead.child.wait();
        workers.push(start(next));
    }
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let listed = json(args(isolated(ws.path()), &["runs", "list", "--json"]));
        let ended = listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == json!("succeeded"))
            .count();
        if ended == RUNS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{ended} of {RUNS} runs ended:\n{listed:#}"
        );
        for w in &mut workers {
            w.drain();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for run in &runs {
        assert_each_once(&completed(&ws, run));
    }
    // The workers hand each run back a moment after its last commit.
    let deadline = Instant::now() + Duration::from_secs(10);
    let busy = || db.psql("SELECT count(*) FROM run_leases WHERE runnable OR owner IS NOT NULL");
    while busy().trim() != "0" {
        assert!(
            Instant::now() < deadline,
            "leases still held or runnable: {}",
            busy()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Kills landed inside runs: some runs were claimed again after their worker died.
    let taken_over = db.psql("SELECT count(*) FROM run_leases WHERE token > 1");
    assert_ne!(taken_over.trim(), "0", "no kill landed inside a run");
    for w in &mut workers {
        w.signal("-TERM");
        assert!(w.child.wait().unwrap().success());
    }
}

/// An approval the run waits for, given from the command line of another process of the
/// team: queued in the run's inbox; a worker resumes the run with it, and the command
/// follows the run to its end.
#[test]
fn an_approval_from_the_command_line_resumes_the_run_on_a_worker() {
    // An approval gate: the network command is `ask` by policy. The agent's turn after
    // the approval takes 2 s, so the command must follow the run on the worker to its end
    // (not read where it stands once the answer is queued).
    let agent = scripted_agent(vec![(
        "call_net",
        "shell",
        json!({ "command": "curl -s http://127.0.0.1:9/stock" }),
    )]);
    let (url, seen) = serve(move |body| {
        if is_agent(body) && tool_results(body) > 0 {
            std::thread::sleep(Duration::from_secs(2));
        }
        agent(body)
    });
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let run = queue(&ws);
    let mut a = Worker::start(&ws, "worker-a");
    a.wait_for(&format!("run {run}: stopped here (waitingInput)"), 60);
    assert_eq!(agent_calls(&seen), 1);

    let resumed = ok(args(
        isolated(ws.path()),
        &[
            "-c",
            "store.workers=true",
            "runs",
            "resume",
            &run,
            "--answer",
            "architectural_analysis=yes",
            "--json",
        ],
    ));
    assert!(resumed.contains("succeeded"), "{resumed}");
    let claims = a.wait_for(&format!("run {run}: claimed (lease token 2)"), 10);
    assert!(claims.contains("1 queued command"), "{claims}");
    wait_status(&ws, &run, "succeeded");
    assert_eq!(agent_calls(&seen), 2);
    a.signal("-TERM");
    assert!(a.child.wait().unwrap().success());
}

/// Pruning a running agent from another process of the team: the worker that runs it
/// prunes it and rolls its worktree back.
#[test]
fn pruning_an_agent_running_on_a_worker_rolls_its_edits_back_there() {
    let doc_agent = |body: &Value| {
        body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.contains("technical writer"))
    };
    let (url, _seen) = serve(move |body| {
        if !is_agent(body) || !doc_agent(body) {
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
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let run = queue_with(&ws, &["--include", "decision_documentation"]);
    let mut a = Worker::start(&ws, "worker-a");
    a.wait_for(&format!("run {run}: claimed"), 30);
    let nodes = trellis_tools::worktree::NodeWorktrees::open(
        ws.path(),
        &trellis_protocol::RunId::from_string(&run),
    )
    .unwrap();
    // The agent's edit, in its own worktree.
    let deadline = Instant::now() + Duration::from_secs(60);
    let draft = loop {
        if let Some(own) = nodes.get("decision_documentation").unwrap() {
            let draft = own.path.join("docs/adr/0002-draft.md");
            if draft.exists() {
                break (own, draft);
            }
        }
        assert!(Instant::now() < deadline, "the agent wrote nothing");
        std::thread::sleep(Duration::from_millis(50));
    };
    let (own, draft) = draft;
    let pruned = ok(args(
        isolated(ws.path()),
        &[
            "-c",
            "store.workers=true",
            "runs",
            "prune",
            &run,
            "decision_documentation",
        ],
    ));
    assert!(pruned.contains("queued for the workers"), "{pruned}");
    let show = wait_status(&ws, &run, "succeeded");
    let node = show["outcome"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "decision_documentation")
        .cloned()
        .unwrap();
    assert_eq!(node["state"], "PRUNED", "{node}");
    // The worker removes the pruned agent's worktree once the agent's cancelled task has
    // stopped, which may be just after the run's last status is recorded.
    let deadline = Instant::now() + Duration::from_secs(10);
    while draft.exists() || own.path.exists() {
        assert!(
            Instant::now() < deadline,
            "the pruned agent's worktree is still there"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    a.signal("-TERM");
    assert!(a.child.wait().unwrap().success());
}

/// A waiting worker claims a run as soon as it is queued (the store's notification), not
/// at its next poll; and it renews its lease in time however long its poll.
#[test]
fn a_queued_run_wakes_a_waiting_worker_which_keeps_its_lease() {
    // The agent's first turn (3 s) outlasts the lease (2 s).
    let (url, _seen) = serve(slow_first_turn());
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let mut a = Worker::start_polling(&ws, "worker-a", "30000");
    a.wait_for("worker worker-a: executing", 30);
    // Past the worker's first look for work.
    std::thread::sleep(Duration::from_millis(500));
    let queued = Instant::now();
    let run = queue(&ws);
    a.wait_for(&format!("run {run}: claimed"), 10);
    assert!(
        queued.elapsed() < Duration::from_secs(10),
        "claimed at the poll, not at the notification"
    );
    std::thread::sleep(Duration::from_millis(2500));
    let live = db.psql(&format!(
        "SELECT owner, token, expires_at > (extract(epoch FROM now()) * 1000)::bigint
         FROM run_leases WHERE run_id = '{run}'"
    ));
    assert_eq!(live.trim(), "worker-a|1|t", "the lease was renewed");
    a.signal("-9");
    let _ = a.child.wait();
}

#[test]
fn a_worker_and_a_queued_run_need_a_postgresql_store() {
    let dir = tempfile::tempdir().unwrap();
    let git = |a: &[&str]| {
        assert!(
            std::process::Command::new("git")
                .args(a)
                .current_dir(dir.path())
                .status()
                .unwrap()
                .success()
        )
    };
    git(&["init", "-q"]);
    let out = args(trellis(dir.path()), &["worker"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[store] url"), "{err}");
    let out = args(trellis(dir.path()), &["run", "anything", "--queue"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--queue") && err.contains("[store] url"),
        "{err}"
    );
}

/// A run queued for the workers is notified by the worker that executes it, once: the
/// process that queued it (its service dispatches to workers) notifies nothing.
#[test]
fn the_worker_that_executes_a_run_notifies_its_end_once() {
    let receiver =
        trellis_test_http::Server::concurrent(|_| trellis_test_http::Response::json("{}"));
    let (url, _seen) = serve(scripted_agent(vec![(
        "call_read",
        "read_file",
        json!({ "path": "inventory.py" }),
    )]));
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let config = ws.path().join(".trellis/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[[notify.webhooks]]\nurl = \"{}/hook\"\nevents = [\"finished\", \"failed\"]\n",
        receiver.url()
    ));
    std::fs::write(&config, text).unwrap();
    let mut worker = Worker::start(&ws, "worker-n");
    let run = queue(&ws);
    worker.wait_for(&format!("run {run}: claimed"), 30);
    let deadline = Instant::now() + Duration::from_secs(60);
    while receiver.requests().is_empty() {
        assert!(Instant::now() < deadline, "no notification from the worker");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Anything sent twice would have arrived by now.
    std::thread::sleep(Duration::from_millis(1500));
    let posts = receiver.requests();
    assert_eq!(posts.len(), 1, "{posts:?}");
    let body = posts[0].json();
    assert_eq!(
        (&body["event"], &body["run"]),
        (&json!("finished"), &json!(run))
    );
    worker.signal("-9");
    let _ = worker.child.wait();
}
