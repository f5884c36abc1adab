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
//! processes they ran, from `/proc/<pid>/stat`) and, for PostgreSQL, its server processes;
//! and, through a counting proxy every process reaches PostgreSQL by ([`Wire`]), the round
//! trips and statements per node step (a node that completed).

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
    /// Round trips to PostgreSQL and statements executed, all processes ([`Wire`]).
    wire: Option<(u64, u64)>,
    /// Node steps of all runs: nodes that completed.
    nodes: u64,
}

/// A TCP proxy on loopback in front of PostgreSQL counting, over all its connections, the
/// round trips (a client's send after the server answered, or its first) and the statements
/// executed (the frontend protocol's `Execute` and simple `Query` messages).
struct Wire {
    port: u16,
    round_trips: std::sync::Arc<std::sync::atomic::AtomicU64>,
    statements: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Wire {
    fn start(upstream: u16) -> Self {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (round_trips, statements) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (rt, st) = (round_trips.clone(), statements.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                // Whether the last bytes went server → client (the next client send is a
                // new round trip).
                let answered = Arc::new(AtomicBool::new(true));
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (rt, st, seen) = (rt.clone(), st.clone(), answered.clone());
                std::thread::spawn(move || {
                    let mut parser = Frontend::default();
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = std::io::Read::read(&mut c_in, &mut buf) {
                        if n == 0 {
                            break;
                        }
                        if seen.swap(false, Ordering::SeqCst) {
                            rt.fetch_add(1, Ordering::Relaxed);
                        }
                        st.fetch_add(parser.feed(&buf[..n]), Ordering::Relaxed);
                        if std::io::Write::write_all(&mut s_out, &buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = s_out.shutdown(std::net::Shutdown::Both);
                });
                let (mut s_in, mut c_out) = (server, client);
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = std::io::Read::read(&mut s_in, &mut buf) {
                        if n == 0 {
                            break;
                        }
                        answered.store(true, Ordering::SeqCst);
                        if std::io::Write::write_all(&mut c_out, &buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Self {
            port,
            round_trips,
            statements,
        }
    }

    fn counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering;
        (
            self.round_trips.load(Ordering::Relaxed),
            self.statements.load(Ordering::Relaxed),
        )
    }
}

/// The frontend side of the PostgreSQL protocol, split into messages: the startup message
/// (no type byte), then `type, length, body`.
#[derive(Default)]
struct Frontend {
    started: bool,
    /// Bytes of the current message still to skip.
    skip: usize,
    /// A header being read (type byte and length).
    header: Vec<u8>,
    /// The body of a `Parse` or `Query` message being read (its SQL is counted).
    sql: Option<Vec<u8>>,
}

/// How often each SQL text was sent (`Parse` and `Query` messages), all connections.
static SQL: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, u64>>> =
    std::sync::LazyLock::new(Default::default);

impl Frontend {
    /// Feeds bytes sent by the client; the statements (`E`, `Q`) among the messages done.
    fn feed(&mut self, mut bytes: &[u8]) -> u64 {
        let mut statements = 0;
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                if let Some(sql) = &mut self.sql {
                    sql.extend_from_slice(&bytes[..n]);
                }
                self.skip -= n;
                bytes = &bytes[n..];
                if self.skip == 0
                    && let Some(body) = self.sql.take()
                {
                    // `Parse`: name NUL query NUL …; `Query`: query NUL.
                    let text = String::from_utf8_lossy(&body);
                    let mut parts = text.split('\0');
                    let first = parts.next().unwrap_or_default();
                    let query = parts.next().filter(|q| !q.is_empty()).unwrap_or(first);
                    let key: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
                    *SQL.lock().unwrap().entry(key).or_default() += 1;
                }
                continue;
            }
            let want = if self.started { 5 } else { 4 };
            let n = (want - self.header.len()).min(bytes.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() < want {
                break;
            }
            let len_at = want - 4;
            let len = u32::from_be_bytes(self.header[len_at..want].try_into().unwrap()) as usize;
            if self.started && matches!(self.header[0], b'E' | b'Q') {
                statements += 1;
            }
            if self.started && matches!(self.header[0], b'P' | b'Q') {
                self.sql = Some(Vec::new());
            }
            self.skip = len.saturating_sub(4);
            self.started = true;
            self.header.clear();
        }
        statements
    }
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

/// The nodes that completed in every run the server lists.
fn node_steps(server: &Server, token: &str) -> u64 {
    let listed = server.http("GET", "/api/workflows?limit=100000", Some(token), None);
    let mut n = 0;
    for run in listed.body.as_array().into_iter().flatten() {
        let id = run["id"].as_str().unwrap_or_default();
        let graph = server.http(
            "GET",
            &format!("/api/workflows/{id}/graph"),
            Some(token),
            None,
        );
        n += graph.body["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|node| node["state"] == "COMPLETED")
            .count() as u64;
    }
    n
}

fn measure(
    workers: usize,
    runs: usize,
    url: &str,
    db: Option<(&str, u32)>,
    wire: Option<&Wire>,
) -> Measured {
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
    let wire_before = wire.map(Wire::counts);
    let pids: Vec<u32> = std::iter::once(server.pid())
        .chain(team.iter().map(|w| w.child.id()))
        .collect();
    let before: f64 = pids.iter().map(|p| cpu_with_children(*p)).sum();
    let wall = drive(&server, &token, runs);
    let after: f64 = pids.iter().map(|p| cpu_with_children(*p)).sum();
    let pg_after = db.map(|(_, pm)| postgres_cpu(pm));
    let wire_after = wire.map(Wire::counts);
    for w in &mut team {
        w.signal("-TERM");
        let _ = w.child.wait();
    }
    let nodes = node_steps(&server, &token);
    Measured {
        wire: wire_before
            .zip(wire_after)
            .map(|(b, a)| (a.0 - b.0, a.1 - b.1)),
        nodes,
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
        measure(0, runs, &url, None, None),
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
        // Every process reaches the database through the counting proxy.
        let port = db
            .url()
            .rsplit_once(':')
            .unwrap()
            .1
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        let wire = Wire::start(port.parse().unwrap());
        let proxied = db
            .url()
            .replace(&format!(":{port}/"), &format!(":{}/", wire.port));
        let m = measure(
            workers,
            runs,
            &url,
            Some((&proxied, postmaster)),
            Some(&wire),
        );
        rows.push((
            format!("serve --workers + {workers} worker(s), PostgreSQL"),
            m,
        ));
    }
    let mut sql: Vec<(String, u64)> = SQL.lock().unwrap().clone().into_iter().collect();
    sql.sort_by_key(|b| std::cmp::Reverse(b.1));
    let all: u64 = sql.iter().map(|(_, n)| n).sum();
    println!("\nSQL sent, all PostgreSQL rows ({all} statements; the 12 most frequent):\n");
    for (text, n) in sql.iter().take(12) {
        let short: String = text.chars().take(110).collect();
        println!("{n:>8}  {short}");
    }
    println!("\n{runs} runs each (architecture_discussion, mock model answering at once)\n");
    println!(
        "| setup | runs/s | Trellis CPU ms/run | PostgreSQL CPU ms/run | node steps | \
         PostgreSQL round trips per node step | statements per node step |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, m) in &rows {
        let pg = m
            .postgres_ms
            .map_or("—".to_owned(), |ms| format!("{ms:.1}"));
        let per = |x: u64| format!("{:.1}", x as f64 / m.nodes.max(1) as f64);
        let (trips, statements) = m.wire.map_or(("—".to_owned(), "—".to_owned()), |(r, s)| {
            (per(r), per(s))
        });
        println!(
            "| {name} | {:.1} | {:.1} | {pg} | {} | {trips} | {statements} |",
            m.runs_per_s, m.trellis_ms, m.nodes
        );
    }
}
