//! A team on one PostgreSQL database (a throwaway cluster on loopback): two `trellis serve
//! --workers` servers, three `trellis worker`s and WebSocket clients, the loopback model mock.
//! Runs are started through both servers; a worker and a server are killed with SIGKILL at
//! random moments and replaced; each client follows its run from one server and, when that
//! server dies, from another with `since`. Every run ends, no completed node ran twice, and
//! every client saw its run's events exactly once, in order, as stored.
//!
//! CI runs [`RUNS`] runs; the soak (issue 36's 200 runs) is the same test with
//! `TRELLIS_SOAK_RUNS=200 cargo nextest run -p trellis -E 'test(/team::/)'`.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

use super::mock::*;
use super::serve::{PATIENCE, Server, is_end, seqs, try_follow};
use super::workers::{Worker, assert_each_once, completed, workspace};

/// Runs in CI.
const RUNS: usize = 6;

/// Every model answer is this late: runs last a few seconds, so kills land inside them.
const PACE: Duration = Duration::from_millis(100);

/// The analysis agent reads this many files, one a turn, before it answers.
const READS: usize = 3;

fn paced(body: &Value) -> String {
    std::thread::sleep(PACE);
    let reads = tool_results(body);
    if is_agent(body) && reads < READS {
        tool_sse(
            &format!("call_{reads}"),
            "read_file",
            &json!({ "path": "inventory.py" }).to_string(),
        )
    } else {
        sse(&answer(body))
    }
}

/// Follows `stream` to its end from whichever server of `ports` answers, reconnecting with
/// the last seq seen when a connection ends; every event frame received, in order.
fn follow_to_end(ports: &Mutex<Vec<u16>>, token: &str, stream: &str, first: usize) -> Vec<Value> {
    let deadline = Instant::now() + PATIENCE * 2;
    let mut events: Vec<Value> = Vec::new();
    let mut turn = first;
    loop {
        assert!(
            Instant::now() < deadline,
            "{stream} never ended: {events:#?}"
        );
        let port = {
            let ports = ports.lock().unwrap();
            ports[turn % ports.len()]
        };
        turn += 1;
        let since = events.last().map_or(0, |f| f["seq"].as_u64().unwrap());
        let (tx, rx) = mpsc::channel();
        let Ok(reader) = try_follow(port, token, stream, since, tx) else {
            // That server is gone: try another one.
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        for frame in rx {
            if frame["type"] == "subscribed" {
                assert_eq!(frame["since"], since, "{frame}");
                continue;
            }
            if frame["type"] != "event" {
                continue;
            }
            let end = is_end(&frame);
            events.push(frame);
            if end {
                drop(reader);
                return events;
            }
        }
        let _ = reader.join();
    }
}

#[test]
fn runs_end_and_clients_see_every_event_once_while_workers_and_servers_are_killed() {
    let runs: usize = std::env::var("TRELLIS_SOAK_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(RUNS);
    let (url, _seen) = serve(paced);
    let cluster = trellis_test_pg::Cluster::shared();
    let db = cluster.database();
    let ws = workspace(&url, &db.url());
    let home = tempfile::tempdir().unwrap();
    let token_file = home.path().join("cfg/serve-token");

    let mut servers: Vec<Server> = (0..2)
        .map(|_| Server::start(ws.path(), home.path(), &token_file, &["--workers"]))
        .collect();
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    let ports = Arc::new(Mutex::new(
        servers.iter().map(|s| s.port).collect::<Vec<_>>(),
    ));
    let mut workers: Vec<Worker> = (0..3)
        .map(|i| Worker::start(&ws, &format!("worker-{i}")))
        .collect();

    // Runs started through both servers, each followed by a client of its own.
    let mut ids = Vec::new();
    let mut clients = Vec::new();
    for i in 0..runs {
        let created = servers[i % 2].http(
            "POST",
            "/api/workflows",
            Some(&token),
            Some(&json!({
                "request": format!("Discuss how stock is kept ({i})"),
                "workflow": "architecture_discussion",
                "skip": ["decision_documentation"],
            })),
        );
        assert_eq!(created.status, 201, "{}", created.body);
        assert_eq!(created.body["delivered"], "queued", "{}", created.body);
        let run = created.body["run"].as_str().unwrap().to_owned();
        let (ports, token) = (ports.clone(), token.clone());
        let stream = format!("run:{run}");
        clients.push(std::thread::spawn(move || {
            follow_to_end(&ports, &token, &stream, i)
        }));
        ids.push(run);
    }

    // A worker and a server die at random moments, once per 25 runs; each is replaced.
    let mut rng = rand::rng();
    for round in 0..runs.div_ceil(25) {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        let victim = rng.random_range(0..workers.len());
        let mut dead = workers.swap_remove(victim);
        dead.signal("-9");
        let _ = dead.child.wait();
        workers.push(Worker::start(&ws, &format!("worker-{}", 3 + round)));
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        let victim = rng.random_range(0..servers.len());
        servers[victim].kill();
        let replacement = Server::start(ws.path(), home.path(), &token_file, &["--workers"]);
        ports.lock().unwrap()[victim] = replacement.port;
        servers[victim] = replacement;
        for w in &mut workers {
            w.drain();
        }
    }

    for (run, client) in ids.iter().zip(clients) {
        let events = client.join().expect("a client failed");
        let end = events.last().unwrap();
        assert_eq!(end["name"], "workflow:completed", "{run}: {end}");
        let total = events.len() as u64;
        assert_eq!(
            seqs(&events),
            (1..=total).collect::<Vec<_>>(),
            "{run}: each event once, in order"
        );
        let stored = servers[0].http(
            "GET",
            &format!("/api/workflows/{run}/events?limit=10000"),
            Some(&token),
            None,
        );
        assert_eq!(stored.status, 200, "{}", stored.body);
        let stored = stored.body.as_array().unwrap();
        assert_eq!(
            stored.len() as u64,
            total,
            "{run}: the client saw all that is stored"
        );
        for (got, want) in events.iter().zip(stored) {
            assert_eq!(
                (&got["seq"], &got["name"], &got["event"]),
                (&want["seq"], &want["name"], &want["event"])
            );
        }
        assert_each_once(&completed(&ws, run));
    }
    for w in &mut workers {
        w.drain();
        w.signal("-TERM");
        assert!(w.child.wait().unwrap().success());
    }
}
