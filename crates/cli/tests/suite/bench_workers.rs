//! The team-scale benchmark (issue 36, item 6), a documented command rather than a timed
//! test (it is ignored in the suite):
//!
//! ```sh
//! TRELLIS_BENCH_RUNS=200 cargo nextest run -p trellis --cargo-profile release \
//!     --run-ignored only -E 'test(bench_workers)' --no-capture
//! ```
//!
//! The same runs (the discussion workflow on the inventory example, the loopback model mock
//! answering at once) go through `trellis serve` over SQLite executing them itself (the one
//! machine baseline), then through a `--workers` server and 1, 2 and 4 `trellis worker`s on
//! one PostgreSQL cluster (its own, with the server's durable defaults). Runs are posted as
//! fast as the server answers; the clock stops when the last one is recorded as succeeded.
//! It prints runs/s and CPU per run: Trellis's processes (server and workers, with the git
//! processes they ran, from `/proc/<pid>/stat`) and, for PostgreSQL, its server processes.

use std::time::{Duration, Instant};

use serde_json::json;

use super::mock::*;
use super::serve::Server;
use super::workers::{Worker, example};

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`, 100 on Linux).
const TICKS: f64 = 100.0;

/// Fields of `/proc/<pid>/stat` after the command name, from field 3 on.
fn stat(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// utime + stime of `pid`, in seconds (fields 14 and 15; index 11 and 12 after the name).
fn cpu(pid: u32) -> f64 {
    stat(pid).map_or(0.0, |f| {
        (f[11].parse::<f64>().unwrap_or(0.0) + f[12].parse::<f64>().unwrap_or(0.0)) / TICKS
    })
}

/// [`cpu`] plus that of `pid`'s children it has reaped (fields 16 and 17: the git
/// processes a Trellis process runs).
fn cpu_with_children(pid: u32) -> f64 {
    stat(pid).map_or(0.0, |f| {
        f[11..15]
            .iter()
            .map(|v| v.parse::<f64>().unwrap_or(0.0))
            .sum::<f64>()
            / TICKS
    })
}

/// The CPU of a PostgreSQL cluster so far: its postmaster's own and its reaped children's
/// (fields 14-17), and its live children's.
fn postgres_cpu(postmaster: u32) -> f64 {
    let own = cpu_with_children(postmaster);
    let children: f64 = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| stat(*pid).is_some_and(|f| f[1] == postmaster.to_string()))
        .map(cpu)
        .sum();
    own + children
}

struct Measured {
    runs_per_s: f64,
    trellis_ms: f64,
    postgres_ms: Option<f64>,
}

/// Posts `runs` runs to `server` and waits until all succeeded; the wall time.
fn drive(server: &Server, token: &str, runs: usize) -> Duration {
    let started = Instant::now();
    for i in 0..runs {
        let created = server.http(
            "POST",
            "/api/workflows",
            Some(token),
            Some(&json!({
                "request": format!("Discuss how stock is kept ({i})"),
                "workflow": "architecture_discussion",
                "skip": ["decision_documentation"],
                "input": "approve",
            })),
        );
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let deadline = started + Duration::from_secs(1800);
    loop {
        let listed = server.http(
            "GET",
            "/api/workflows?status=succeeded&limit=100000",
            Some(token),
            None,
        );
        let done = listed.body.as_array().map_or(0, Vec::len);
        if done == runs {
            return started.elapsed();
        }
        assert!(Instant::now() < deadline, "{done} of {runs} ended");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn measure(workers: usize, runs: usize, url: &str, db: Option<(&str, u32)>) -> Measured {
    // The same workspace either way (its analysis agent may run the shell, so each run
    // also makes and drops the agent's own worktree).
    let ws = example(url, db.map(|(db_url, _)| db_url));
    let home = tempfile::tempdir().unwrap();
    let token_file = home.path().join("cfg/serve-token");
    let extra: &[&str] = if db.is_some() { &["--workers"] } else { &[] };
    let server = Server::start(ws.path(), home.path(), &token_file, extra);
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    let mut team: Vec<Worker> = (0..workers)
        .map(|i| Worker::start_polling(&ws, &format!("bench-{i}"), "250"))
        .collect();
    let pg_before = db.map(|(_, pm)| postgres_cpu(pm));
    let pids: Vec<u32> = std::iter::once(server.pid())
        .chain(team.iter().map(|w| w.child.id()))
        .collect();
    let before: f64 = pids.iter().map(|p| cpu_with_children(*p)).sum();
    let wall = drive(&server, &token, runs);
    let after: f64 = pids.iter().map(|p| cpu_with_children(*p)).sum();
    let pg_after = db.map(|(_, pm)| postgres_cpu(pm));
    for w in &mut team {
        w.signal("-TERM");
        let _ = w.child.wait();
    }
    Measured {
        runs_per_s: runs as f64 / wall.as_secs_f64(),
        trellis_ms: (after - before) * 1000.0 / runs as f64,
        postgres_ms: pg_before
            .zip(pg_after)
            .map(|(b, a)| (a - b) * 1000.0 / runs as f64),
    }
}

#[test]
#[ignore = "a benchmark: run it with --run-ignored only (module docs)"]
fn bench_workers() {
    let runs: usize = std::env::var("TRELLIS_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let (url, _seen) = serve(|body| sse(&answer(body)));
    let cluster = trellis_test_pg::Cluster::start(trellis_test_pg::Durability::Durable);
    let mut rows = vec![(
        "serve over SQLite, executing its runs".to_owned(),
        measure(0, runs, &url, None),
    )];
    for workers in [1, 2, 4] {
        let db = cluster.database();
        let data = db.psql("SHOW data_directory");
        let postmaster: u32 = std::fs::read_to_string(format!("{}/postmaster.pid", data.trim()))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let m = measure(workers, runs, &url, Some((&db.url(), postmaster)));
        rows.push((
            format!("serve --workers + {workers} worker(s), PostgreSQL"),
            m,
        ));
    }
    println!("\n{runs} runs each (architecture_discussion, mock model answering at once)\n");
    println!("| setup | runs/s | Trellis CPU ms/run | PostgreSQL CPU ms/run |");
    println!("|---|---|---|---|");
    for (name, m) in &rows {
        let pg = m
            .postgres_ms
            .map_or("—".to_owned(), |ms| format!("{ms:.1}"));
        println!(
            "| {name} | {:.1} | {:.1} | {pg} |",
            m.runs_per_s, m.trellis_ms
        );
    }
}
