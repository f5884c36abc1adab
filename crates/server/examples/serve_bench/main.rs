//! Benchmark of `trellis serve` (issue 14): concurrent workflow runs started over HTTP and
//! followed by WebSocket clients on loopback, server and clients in one process.
//!
//! ```sh
//! scripts/bench-serve            # the LangGraph API server anchor, then this; one table
//! cargo run --release -p trellis-server --example serve_bench -- \
//!     [--runs 50] [--clients-per-run 1,2] [--rounds 3] [--warmup 5] \
//!     [--query-chunks 2] [--agent-chunks 16] [--chunk-ms 4] [--workload discussion|g1] \
//!     [--pg] [--json FILE] [--anchor LANGGRAPH_JSON]
//! ```
//!
//! `--pg`: over a throwaway PostgreSQL cluster (Debian's server binaries, `scripts/setup`),
//! a fresh database per configuration; the runs execute in one server and the WebSocket
//! clients follow them from a second server of the workspace (its own connection, its events
//! from the database's notifications): commit → client is then the latency to a client of
//! another server. Both servers live in this process, so the two `Instant`s compare.
//!
//! Per clients-per-run value, a fresh process (this program again, so that each
//! configuration's RSS is its own) with a fresh server ([`workload::Server`]): an unreported
//! warm-up round of `--warmup` runs, then `--rounds` rounds of `--runs` concurrent runs, each
//! followed by its clients. Prints a markdown table; with `--anchor` (the JSON of
//! `bench/langgraph-server/run --json`), the LangGraph numbers side by side, the ratios and
//! the issue's goals (≥ 10× LangGraph's runs/s, p99 commit → client ≤ 10 ms). See
//! docs/benchmarks.md, "`trellis serve` (issue 14)".

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod workload;

/// The allocator of the `trellis` binary (crates/cli/src/main.rs), so that the server measured
/// here allocates as `trellis serve` does (glibc malloc took ~12 % more CPU per run); its
/// options as the binary sets them are passed to each configuration's process.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use serde_json::{Value, json};
use workload::{Pacing, Round, Server, Stats};

fn usage() -> ! {
    eprintln!(
        "usage: serve_bench [--runs N] [--clients-per-run N[,M…]] [--rounds N] [--warmup N] \
         [--query-chunks N] [--agent-chunks N] [--chunk-ms MS] [--workload discussion|g1] \
         [--pg] [--json FILE] [--anchor FILE]"
    );
    std::process::exit(2)
}

#[derive(Clone)]
struct Args {
    runs: usize,
    per_run: Vec<usize>,
    rounds: usize,
    warmup: usize,
    pacing: Pacing,
    json: Option<String>,
    anchor: Option<String>,
    /// Over PostgreSQL, the clients following the runs from a second server (`--pg`: a
    /// throwaway cluster of the benchmark's own).
    pg: bool,
    /// The database of one configuration (internal, with `--child`; or any given).
    pg_url: Option<String>,
    /// Internal: run the one configuration in this process and write its JSON here.
    child: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        runs: 50,
        per_run: vec![1, 2],
        rounds: 3,
        warmup: 5,
        pacing: Pacing {
            query_chunks: 2,
            agent_chunks: 16,
            chunk: Duration::from_millis(4),
            workload: workload::Workload::Discussion,
        },
        json: None,
        anchor: None,
        pg: false,
        pg_url: None,
        child: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        let num = |v: &str| v.parse::<usize>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--runs" => a.runs = num(&value()),
            "--clients-per-run" => a.per_run = value().split(',').map(num).collect(),
            "--rounds" => a.rounds = num(&value()),
            "--warmup" => a.warmup = num(&value()),
            "--query-chunks" => a.pacing.query_chunks = num(&value()),
            "--agent-chunks" => a.pacing.agent_chunks = num(&value()),
            "--chunk-ms" => {
                let ms: f64 = value().parse().unwrap_or_else(|_| usage());
                a.pacing.chunk = Duration::from_secs_f64(ms / 1e3);
            }
            "--workload" => {
                a.pacing.workload = workload::Workload::parse(&value()).unwrap_or_else(|| usage());
            }
            "--pg" => a.pg = true,
            "--pg-url" => a.pg_url = Some(value()),
            "--json" => a.json = Some(value()),
            "--anchor" => a.anchor = Some(value()),
            "--child" => a.child = Some(value()),
            _ => usage(),
        }
    }
    if a.runs == 0 || a.rounds == 0 || a.per_run.is_empty() || a.per_run.contains(&0) {
        usage();
    }
    a
}

fn sh(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "?".into())
}

fn commit() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let head = sh("git", &["-C", dir, "rev-parse", "--short", "HEAD"]);
    let dirty = !sh("git", &["-C", dir, "status", "--porcelain"]).is_empty();
    if dirty {
        format!("{head} (uncommitted changes)")
    } else {
        head
    }
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn mib(kib: Option<u64>) -> Value {
    kib.map_or(Value::Null, |k| json!(r3(k as f64 / 1024.0)))
}

/// Median (the lower middle value of an even count, as the anchor's driver), min, max.
fn spread(mut xs: Vec<f64>) -> Value {
    if xs.is_empty() {
        return Value::Null;
    }
    xs.sort_by(f64::total_cmp);
    json!({ "median": r3(xs[(xs.len() - 1) / 2]), "min": r3(xs[0]), "max": r3(xs[xs.len() - 1]) })
}

fn round_json(r: &Round) -> Value {
    let wall = r.wall.as_secs_f64();
    let (q, a, paced) = r.model_calls;
    let server = r.server_cpu().as_secs_f64();
    json!({
        "runs": r.runs,
        "clients_per_run": r.clients_per_run,
        "runs_ok": r.runs_ok,
        "failures": r.failures,
        "wall_s": r3(wall),
        "runs_per_s": r3(r.runs_per_s()),
        "events_delivered": r.frames,
        "events_per_s": r3(r.frames_per_s()),
        "run_events_per_run": r.events_per_run,
        "replayed_frames": r.replayed,
        "untapped_frames": r.untapped,
        "tap_lagged": r.client.tap_lagged,
        "runs_in_flight": { "mean": r3(r.in_flight.0), "max": r.in_flight.1 },
        "latency": {
            "commit_to_client_live": r.latency_live.json(),
            "commit_to_client_all": r.latency_all.json(),
            "event_ts_to_client_live": r.ts_lag_live.json(),
            "post_workflows": r.post.json(),
            "submit_to_first_event": r.submit_to_first_event.json(),
            "run_wall": r.run_wall.json(),
        },
        "server": {
            "cpu_s": r3(server),
            "cpu_cores_busy": r3(server / wall),
            "cpu_ms_per_run": r3(server * 1e3 / r.runs as f64),
            "git_children_cpu_s": r3(r.client.children_cpu.as_secs_f64()),
            "rss_before_mib": mib(r.machine.rss_before_kib),
            "vm_hwm_mib": mib(r.machine.peak_rss_kib),
            "vm_hwm_reset_before": r.machine.peak_reset,
        },
        "client": {
            "cpu_s": r3(r.client.client_cpu.as_secs_f64()),
            "cpu_cores_busy": r3(r.client.client_cpu.as_secs_f64() / wall),
        },
        "model": {
            "query_calls": q,
            "agent_calls": a,
            "paced_ms_per_run": r3(paced.as_secs_f64() * 1e3 / r.runs as f64),
        },
        "other_cpu_cores_busy": r.machine.other_cores_busy.map(r3),
        "store_per_run": {
            "commits": r3(r.machine.writes.commits as f64 / r.runs as f64),
            "synced_commits": r3(r.machine.writes.synced_commits as f64 / r.runs as f64),
            "run_event_batches": r3(r.machine.writes.batches as f64 / r.runs as f64),
            "stream_batches": r3(r.machine.writes.stream_batches as f64 / r.runs as f64),
            "run_event_bytes": r3(r.machine.writes.bytes as f64 / r.runs as f64),
        },
        "load_avg_before": r.machine.load_before,
        "load_avg_after": r.machine.load_after,
    })
}

/// Per-run client-side times of a round, in ms: (POST → 201, POST → first event frame,
/// POST → final frame at the last client).
fn run_times(r: &Round) -> Vec<(f64, Option<f64>, Option<f64>)> {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    r.client
        .runs
        .values()
        .map(|t| {
            (
                ms(t.created.saturating_duration_since(t.submitted)),
                t.first_event
                    .map(|f| ms(f.saturating_duration_since(t.submitted))),
                t.done.map(|d| ms(d.saturating_duration_since(t.submitted))),
            )
        })
        .collect()
}

/// One configuration in this process: a fresh server, the warm-up, the rounds.
fn configuration(a: &Args, per_run: usize) -> anyhow::Result<Value> {
    let server = Server::start_on(a.pacing, a.pg_url.as_deref())?;
    if a.warmup > 0 {
        let w = server.round(a.warmup, per_run)?;
        eprintln!(
            "warm-up: {} runs × {per_run} clients, {}/{} ok, {:.2} s",
            a.warmup,
            w.runs_ok,
            w.runs,
            w.wall.as_secs_f64()
        );
        for f in w.failures.iter().take(5) {
            eprintln!("  failed: {f}");
        }
    }
    let mut rounds = Vec::new();
    for i in 0..a.rounds {
        let r = server.round(a.runs, per_run)?;
        eprintln!(
            "{} runs × {per_run} clients, round {}: {}/{} ok in {:.3} s = {:.1} runs/s, \
             {:.0} events/s, commit → client p50 {:.3} p99 {:.3} max {:.3} ms (n {}, {} replayed), \
             {:.1} runs in flight (max {}), server CPU {:.2} s + git {:.2} s, clients {:.2} s, \
             other processes {:.2} cores, load {:?}; store per run: {:.1} commits ({:.1} synced), \
             {:.1} run batches, {:.1} stream batches",
            a.runs,
            i + 1,
            r.runs_ok,
            r.runs,
            r.wall.as_secs_f64(),
            r.runs_per_s(),
            r.frames_per_s(),
            r.latency_live.p50,
            r.latency_live.p99,
            r.latency_live.max,
            r.latency_live.n,
            r.replayed,
            r.in_flight.0,
            r.in_flight.1,
            r.server_cpu().as_secs_f64(),
            r.client.children_cpu.as_secs_f64(),
            r.client.client_cpu.as_secs_f64(),
            r.machine.other_cores_busy.unwrap_or(f64::NAN),
            r.machine.load_before,
            r.machine.writes.commits as f64 / r.runs as f64,
            r.machine.writes.synced_commits as f64 / r.runs as f64,
            r.machine.writes.batches as f64 / r.runs as f64,
            r.machine.writes.stream_batches as f64 / r.runs as f64,
        );
        for f in r.failures.iter().take(5) {
            eprintln!("  failed: {f}");
        }
        rounds.push(r);
    }
    server.shutdown();
    let runs: usize = rounds.iter().map(|r| r.runs).sum();
    let sum = |f: &dyn Fn(&Round) -> f64| rounds.iter().map(f).sum::<f64>();
    let cpu = sum(&|r| r.server_cpu().as_secs_f64());
    let git = sum(&|r| r.client.children_cpu.as_secs_f64());
    let client_cpu = sum(&|r| r.client.client_cpu.as_secs_f64());
    let wall = sum(&|r| r.wall.as_secs_f64());
    let paced = sum(&|r| r.model_calls.2.as_secs_f64());
    let times: Vec<_> = rounds.iter().flat_map(run_times).collect();
    let peak = rounds.iter().filter_map(|r| r.machine.peak_rss_kib).max();
    Ok(json!({
        "clients_per_run": per_run,
        "concurrent_clients": a.runs * per_run,
        "rounds": rounds.iter().map(round_json).collect::<Vec<_>>(),
        "summary": {
            "rounds": rounds.len(),
            "runs": runs,
            "runs_ok": rounds.iter().map(|r| r.runs_ok).sum::<usize>(),
            "runs_per_s": spread(rounds.iter().map(Round::runs_per_s).collect()),
            "events_per_s": spread(rounds.iter().map(Round::frames_per_s).collect()),
            "events_delivered": rounds.iter().map(|r| r.frames).sum::<u64>(),
            "run_events_per_run": rounds[0].events_per_run,
            "runs_in_flight_mean": spread(rounds.iter().map(|r| r.in_flight.0).collect()),
            "latency_pooled": {
                "commit_to_client_live": Stats::of(rounds.iter().flat_map(Round::live_samples).collect()).json(),
                "event_ts_to_client_live": Stats::of(rounds.iter().flat_map(|r| r.ts_lag_samples()).collect()).json(),
                "post_workflows": Stats::of(times.iter().map(|t| t.0).collect()).json(),
                "submit_to_first_event": Stats::of(times.iter().filter_map(|t| t.1).collect()).json(),
                "run_wall": Stats::of(times.iter().filter_map(|t| t.2).collect()).json(),
            },
            "replayed_frames": rounds.iter().map(|r| r.replayed).sum::<u64>(),
            "server_cpu_s": r3(cpu),
            "server_cpu_ms_per_run": r3(cpu * 1e3 / runs as f64),
            "server_cpu_cores_busy": spread(rounds.iter().map(|r| r.server_cpu().as_secs_f64() / r.wall.as_secs_f64()).collect()),
            "git_children_cpu_ms_per_run": r3(git * 1e3 / runs as f64),
            "client_cpu_cores_busy": r3(client_cpu / wall),
            "server_rss_before_mib": mib(rounds[0].machine.rss_before_kib),
            "server_rss_peak_mib": mib(peak),
            "paced_model_ms_per_run": r3(paced * 1e3 / runs as f64),
            "other_cpu_cores_busy": spread(rounds.iter().filter_map(|r| r.machine.other_cores_busy).collect()),
        },
    }))
}

/// Every configuration, each in a fresh process (this program with `--child`).
fn configurations(a: &Args) -> anyhow::Result<Vec<Value>> {
    let me = std::env::current_exe()?;
    let mut out = Vec::new();
    let cluster = (a.pg && a.pg_url.is_none())
        .then(|| trellis_test_pg::Cluster::start(trellis_test_pg::Durability::Durable));
    for &k in &a.per_run {
        // A fresh database per configuration.
        let db = cluster.as_ref().map(trellis_test_pg::Cluster::database);
        let url = db.as_ref().map(|d| d.url()).or_else(|| a.pg_url.clone());
        let pg: Vec<String> = url.map(|u| vec!["--pg-url".into(), u]).unwrap_or_default();
        let tmp = std::env::temp_dir().join(format!("serve-bench-{}-{k}.json", std::process::id()));
        let status = std::process::Command::new(&me)
            // The allocator settings the `trellis` binary makes before mimalloc starts
            // (crates/cli/src/main.rs): arenas committed on demand, no transparent huge pages.
            .env("MIMALLOC_ARENA_EAGER_COMMIT", "0")
            .env("MIMALLOC_ALLOW_THP", "0")
            .args(["--runs", &a.runs.to_string()])
            .args(["--clients-per-run", &k.to_string()])
            .args(["--rounds", &a.rounds.to_string()])
            .args(["--warmup", &a.warmup.to_string()])
            .args(["--query-chunks", &a.pacing.query_chunks.to_string()])
            .args(["--agent-chunks", &a.pacing.agent_chunks.to_string()])
            .args(["--workload", a.pacing.workload.name()])
            .args(&pg)
            .args([
                "--chunk-ms",
                &(a.pacing.chunk.as_secs_f64() * 1e3).to_string(),
            ])
            .args(["--child".as_ref(), tmp.as_os_str()])
            .status()?;
        anyhow::ensure!(
            status.success(),
            "the configuration with {k} clients per run failed"
        );
        let text = std::fs::read_to_string(&tmp)?;
        let _ = std::fs::remove_file(&tmp);
        out.push(serde_json::from_str(&text)?);
    }
    Ok(out)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// `p50 / p90 / p99 / max`.
fn lat(v: &Value) -> String {
    if v["n"].as_u64().unwrap_or(0) == 0 {
        return "–".into();
    }
    format!(
        "{:.2} / {:.2} / **{:.2}** / {:.2}",
        f(&v["p50_ms"]),
        f(&v["p90_ms"]),
        f(&v["p99_ms"]),
        f(&v["max_ms"])
    )
}

struct Row<'a> {
    side: &'a str,
    runs: u64,
    clients: u64,
    summary: &'a Value,
    latency: &'a Value,
    events_per_run: f64,
    cores_busy: f64,
    /// CPU of child processes (git) per run, when the side has any.
    git_ms: Option<f64>,
    rss_before: f64,
    model_ms: f64,
}

fn row(r: &Row<'_>) -> String {
    let s = r.summary;
    let rps = &s["runs_per_s"];
    format!(
        "| {} | {} × {} | {}/{} | **{:.1}** ({:.1}–{:.1}) | {:.0} ({:.0}) | {} | {:.1} ({:.2}){} | {:.1} → {:.1} | {:.0} |",
        r.side,
        r.runs,
        r.clients,
        s["runs_ok"],
        s["runs"],
        f(&rps["median"]),
        f(&rps["min"]),
        f(&rps["max"]),
        f(&s["events_per_s"]["median"]),
        r.events_per_run,
        lat(r.latency),
        f(&s["server_cpu_ms_per_run"]),
        r.cores_busy,
        r.git_ms
            .map(|g| format!(" + git {g:.1}"))
            .unwrap_or_default(),
        r.rss_before,
        f(&s["server_rss_peak_mib"]),
        r.model_ms,
    )
}

fn trellis_row<'a>(runs: u64, c: &'a Value) -> Row<'a> {
    let s = &c["summary"];
    Row {
        side: "Trellis (`trellis serve`, WebSocket)",
        runs,
        clients: c["clients_per_run"].as_u64().unwrap_or(0),
        summary: s,
        latency: &s["latency_pooled"]["commit_to_client_live"],
        events_per_run: f(&s["run_events_per_run"]),
        cores_busy: f(&s["server_cpu_cores_busy"]["median"]),
        git_ms: Some(f(&s["git_children_cpu_ms_per_run"])),
        rss_before: f(&s["server_rss_before_mib"]),
        model_ms: f(&s["paced_model_ms_per_run"]),
    }
}

fn anchor_row<'a>(a: &'a Value, c: &'a Value) -> Row<'a> {
    let s = &c["summary"];
    let w = &a["workload"];
    let per_reader = s["events_delivered"].as_f64().unwrap_or(0.0)
        / (s["runs"].as_f64().unwrap_or(1.0) * c["readers_per_run"].as_f64().unwrap_or(1.0));
    Row {
        side: "LangGraph (`langgraph dev`, SSE)",
        runs: w["runs"].as_u64().unwrap_or(0),
        clients: c["readers_per_run"].as_u64().unwrap_or(0),
        summary: s,
        latency: &s["latency_pooled"]["node_return_to_client_live"],
        events_per_run: per_reader,
        cores_busy: f(&s["server_cpu_cores_busy"]["median"]),
        git_ms: None,
        rss_before: f(&c["rounds"][0]["server"]["rss_before_mib"]),
        model_ms: f(&w["node_model_time_ms"]) * 9.0,
    }
}

fn table(trellis: &Value, anchor: Option<&Value>) -> String {
    // Followed from a second server (`--pg`), an event can reach its client before the
    // executing server published it: the latency column is then the event's timestamp
    // (the engine's clock when it recorded it, before its commit) → client, in ms.
    let across = trellis["workload"]["store"]
        .as_str()
        .is_some_and(|s| s.starts_with("PostgreSQL"));
    let latency = if across {
        "event ts → client of the other server"
    } else {
        "commit → client"
    };
    let mut out = format!(
        "| side | runs × clients per run | runs ok | runs/s, median (min–max) | events/s delivered \
         (events per run and client) | {latency} p50 / p90 / p99 / max, ms (LangGraph: node \
         return → client) | server CPU ms/run (cores busy) + child processes | RSS before → peak, MiB | model ms/run |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let runs = trellis["workload"]["runs"].as_u64().unwrap_or(0);
    let configs = trellis["configs"].as_array().cloned().unwrap_or_default();
    let anchor_of = |c: &Value| -> Option<Value> {
        let k = c["clients_per_run"].as_u64();
        anchor?["configs"]
            .as_array()?
            .iter()
            .find(|x| x["readers_per_run"].as_u64() == k)
            .cloned()
    };
    for c in &configs {
        let mut r = trellis_row(runs, c);
        if across {
            r.latency = &c["summary"]["latency_pooled"]["event_ts_to_client_live"];
        }
        out.push_str(&row(&r));
        out.push('\n');
        if let (Some(a), Some(ac)) = (anchor, anchor_of(c)) {
            out.push_str(&row(&anchor_row(a, &ac)));
            out.push('\n');
        }
    }
    let Some(a) = anchor else { return out };
    let (ar, ap) = (
        a["workload"]["runs"].as_u64(),
        f(&a["workload"]["node_model_time_ms"]) * 9.0,
    );
    let tp = f(&trellis["workload"]["paced_model_ms_per_run"]);
    if ar != Some(runs) || (ap - tp).abs() > 0.5 {
        out.push_str(&format!(
            "\n**The two sides ran different loads** (LangGraph {} runs, {ap:.0} ms of model time \
             per run; Trellis {runs} runs, {tp:.0} ms): the goals below do not apply.\n",
            ar.unwrap_or(0)
        ));
    }
    out.push_str(
        "\n| goal (issue 14) | concurrent clients | Trellis | LangGraph | Trellis ÷ LangGraph | met? |\n\
         |---|---|---|---|---|---|\n",
    );
    for c in &configs {
        let Some(ac) = anchor_of(c) else { continue };
        let n = c["concurrent_clients"].as_u64().unwrap_or(0);
        let t = f(&c["summary"]["runs_per_s"]["median"]);
        let l = f(&ac["summary"]["runs_per_s"]["median"]);
        out.push_str(&format!(
            "| runs/s ≥ 10 × LangGraph's | {n} | {t:.1} | {l:.1} | {:.2}× | {} |\n",
            t / l,
            if t / l >= 10.0 { "yes" } else { "**no**" }
        ));
        let tp = f(&c["summary"]["latency_pooled"]["commit_to_client_live"]["p99_ms"]);
        let lp = f(&ac["summary"]["latency_pooled"]["node_return_to_client_live"]["p99_ms"]);
        out.push_str(&format!(
            "| p99 commit → client ≤ 10 ms | {n} | {tp:.2} ms | {lp:.2} ms | {:.3}× | {} |\n",
            tp / lp,
            if tp <= 10.0 { "yes" } else { "**no**" }
        ));
    }
    out
}

fn main() -> anyhow::Result<()> {
    let a = args();
    if let Some(path) = &a.child {
        let k = a.per_run[0];
        let c = configuration(&a, k)?;
        std::fs::write(path, serde_json::to_string(&c)?)?;
        return Ok(());
    }
    let date = sh("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]);
    let load_start = workload::loadavg();
    let configs = configurations(&a)?;
    let load_end = workload::loadavg();
    let p = a.pacing;
    let out = json!({
        "bench": "trellis-serve",
        "date_utc": date,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "commit": commit(),
        "machine": {
            "nproc": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "cpu": cpu_model(),
            "kernel": sh("uname", &["-r"]),
            "load_avg_start": load_start,
            "load_avg_end": load_end,
        },
        "workload": {
            "workflow": p.workload.describe(),
            "store": if a.pg || a.pg_url.is_some() {
                "PostgreSQL (a throwaway cluster on loopback, fsync on); the runs execute in one server, the clients follow them from a second server of the same process over its own connection"
            } else {
                "SQLite (the workspace's file)"
            },
            "server_worker_threads": 2,
            "query_chunks": p.query_chunks,
            "agent_chunks": p.agent_chunks,
            "chunk_ms": p.chunk.as_secs_f64() * 1e3,
            "paced_model_ms_per_run": p.per_run().as_secs_f64() * 1e3,
            "warmup_runs": a.warmup,
            "rounds": a.rounds,
            "runs": a.runs,
        },
        "configs": configs,
    });
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&out)?)?;
    }
    let anchor: Option<Value> = match &a.anchor {
        Some(p) => Some(serde_json::from_str(&std::fs::read_to_string(p)?)?),
        None => None,
    };
    println!(
        "Trellis: `{}`, {date}, commit {}; {} runs per round, {} rounds after a {}-run warm-up; \
         {}; model per run: {} queries call(s) × {} × {:.0} ms + {} report call(s) × {} × {:.0} ms \
         = {:.0} ms; load average {:?} → {:?}; {}, {} CPUs, Linux {}.",
        out["command"].as_str().unwrap_or("?"),
        out["commit"].as_str().unwrap_or("?"),
        a.runs,
        a.rounds,
        a.warmup,
        p.workload.describe(),
        p.workload.calls().0,
        p.query_chunks,
        p.chunk.as_secs_f64() * 1e3,
        p.workload.calls().1,
        p.agent_chunks,
        p.chunk.as_secs_f64() * 1e3,
        p.per_run().as_secs_f64() * 1e3,
        load_start,
        load_end,
        out["machine"]["cpu"].as_str().unwrap_or("?"),
        out["machine"]["nproc"],
        out["machine"]["kernel"].as_str().unwrap_or("?"),
    );
    if let Some(an) = &anchor {
        let w = &an["workload"];
        println!(
            "\nLangGraph: `{}`, {} UTC; {} runs per round, {} rounds after a {}-run warm-up; \
             G1, 9 node steps × {} × {} ms = {} ms of model time per run; langgraph-api {}, \
             langgraph {}; load average {} → {}.",
            an["command"].as_str().unwrap_or("?"),
            an["date_utc"].as_str().unwrap_or("?"),
            w["runs"],
            w["rounds"],
            w["warmup_runs"],
            w["chunks_per_node"],
            w["chunk_ms"],
            f(&w["node_model_time_ms"]) * 9.0,
            an["versions"]["langgraph-api"].as_str().unwrap_or("?"),
            an["versions"]["langgraph"].as_str().unwrap_or("?"),
            an["machine"]["load_avg_start"],
            an["machine"]["load_avg_end"],
        );
    }
    println!();
    println!("{}", table(&out, anchor.as_ref()));
    let failed = out["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["summary"]["runs_ok"] != c["summary"]["runs"]);
    if failed {
        eprintln!("some runs failed (see the JSON)");
        std::process::exit(1);
    }
    Ok(())
}
