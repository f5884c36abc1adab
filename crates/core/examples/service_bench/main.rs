//! Benchmark of the runtime service (issue 13): concurrent workflow runs in one `Service`,
//! their model output streamed as text deltas, in-process subscribers of the live broadcast.
//!
//! ```sh
//! cargo run --release -p trellis-core --example service_bench -- \
//!     [--runs 50] [--subscribers 10] [--deltas 500] [--pace-ms 4] [--detect-test-command]
//!     [--no-warmup] [--json]
//! ```
//!
//! It runs the workload twice in this process, each time in a fresh temporary workspace,
//! store and service: with recording on (the default), then with recording off
//! (`RecordOptions { persist: false, .. }`), after an unreported warm-up (2 runs, 20 deltas).
//! It prints a markdown table of both, the recording overhead and whether the issue's goals
//! are met (p99 commit → subscriber ≤ 2 ms; recording ≤ 5 % of wall time). See
//! docs/benchmarks.md, "Runtime service (issue 13)".

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod workload;

use std::time::Duration;

use serde_json::json;
use workload::{Latency, Outcome, Phase, Settings};

fn usage() -> ! {
    eprintln!(
        "usage: service_bench [--runs N] [--subscribers N] [--deltas N] [--pace-ms MS] [--detect-test-command] [--no-warmup] [--json]"
    );
    std::process::exit(2)
}

struct Args {
    settings: Settings,
    warmup: bool,
    json: bool,
}

fn args() -> Args {
    let mut a = Args {
        settings: Settings {
            runs: 50,
            subscribers: 10,
            deltas: 500,
            pace: Duration::from_millis(4),
            record: true,
            test_command: true,
        },
        warmup: true,
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--runs" => a.settings.runs = value().parse().unwrap_or_else(|_| usage()),
            "--subscribers" => a.settings.subscribers = value().parse().unwrap_or_else(|_| usage()),
            "--deltas" => a.settings.deltas = value().parse().unwrap_or_else(|_| usage()),
            "--pace-ms" => {
                let ms: f64 = value().parse().unwrap_or_else(|_| usage());
                a.settings.pace = Duration::from_secs_f64(ms / 1e3);
            }
            "--no-warmup" => a.warmup = false,
            "--detect-test-command" => a.settings.test_command = false,
            "--json" => a.json = true,
            _ => usage(),
        }
    }
    a
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
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

fn utc_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M:%S UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn lat(l: &Latency) -> String {
    if l.n == 0 {
        return "–".into();
    }
    format!(
        "{} / {} / {} ms (n = {})",
        ms(l.p50),
        ms(l.p99),
        ms(l.max),
        l.n
    )
}

fn per_s(n: u64, d: Duration) -> String {
    format!("{:.0}", n as f64 / d.as_secs_f64())
}

/// The table's rows for one outcome, in the order they are printed.
fn rows(o: &Outcome) -> Vec<(String, String)> {
    let mut out = named(cost_rows(o));
    out.extend(named(delivery_rows(o)));
    // After the overall latency rows: the same per phase, and the runtime's wake delay.
    out.extend(phase_rows(o));
    out.push(phase_start_row(o));
    out.extend(named(volume_rows(o)));
    out
}

/// Rows with their names owned.
fn named(rows: Vec<(&str, String)>) -> Vec<(String, String)> {
    rows.into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
}

/// The runs that succeeded and what they cost: wall time, CPU, peak memory.
fn cost_rows(o: &Outcome) -> Vec<(&'static str, String)> {
    let ok = o
        .statuses
        .iter()
        .filter(|s| **s == trellis_protocol::RunStatus::Succeeded)
        .count();
    let wall = o.wall;
    vec![
        ("runs succeeded", format!("{ok} / {}", o.statuses.len())),
        ("wall time", format!("{:.3} s", wall.as_secs_f64())),
        (
            "CPU user+sys (getrusage)",
            format!(
                "{:.3} s ({:.0} % of one core)",
                o.cpu.as_secs_f64(),
                o.cpu.as_secs_f64() / wall.as_secs_f64() * 100.0
            ),
        ),
        (
            "CPU of child processes (git), user+sys",
            format!("{:.3} s", o.children_cpu.as_secs_f64()),
        ),
        (
            "peak RSS (VmHWM)",
            match o.peak_rss_kib {
                Some(k) => format!(
                    "{:.1} MiB{}",
                    k as f64 / 1024.0,
                    if o.peak_rss_reset {
                        ""
                    } else {
                        " (since process start)"
                    }
                ),
                None => "?".into(),
            },
        ),
    ]
}

/// The events the subscribers received, their rate, losses and latency by stream.
fn delivery_rows(o: &Outcome) -> Vec<(&'static str, String)> {
    let per_sub: Vec<u64> = o.subscribers.iter().map(|s| s.received).collect();
    vec![
        (
            "events delivered (all subscribers)",
            format!(
                "{} ({} … {} per subscriber)",
                o.received(),
                per_sub.iter().min().copied().unwrap_or(0),
                per_sub.iter().max().copied().unwrap_or(0)
            ),
        ),
        ("events/s delivered", per_s(o.received(), o.wall)),
        ("events lost to lag", o.lagged().to_string()),
        (
            "latency p50 / p99 / max, session events",
            lat(&o.session_latency),
        ),
        ("latency p50 / p99 / max, run events", lat(&o.run_latency)),
        (
            "latency p50 / p99 / max, workspace events",
            lat(&o.workspace_latency),
        ),
        ("latency p50 / p99 / max, all events", lat(&o.all_latency)),
    ]
}

/// The latency of all events per phase, then the runtime's wake delay per phase.
fn phase_rows(o: &Outcome) -> Vec<(String, String)> {
    let mut phases = Vec::new();
    for (i, p) in Phase::ALL.iter().enumerate() {
        phases.push((
            format!("latency p50 / p99 / max, all events, {}", p.label()),
            lat(&o.phase_latency[i]),
        ));
    }
    for (i, p) in Phase::ALL.iter().enumerate() {
        phases.push((
            format!(
                "wake → poll delay of an idle task (1 ms probe), {}",
                p.label()
            ),
            lat(&o.wake_latency[i]),
        ));
    }
    phases
}

/// When each phase began.
fn phase_start_row(o: &Outcome) -> (String, String) {
    (
        "phases began at (starting / streaming / finishing)".to_owned(),
        o.phase_began
            .iter()
            .map(|b| b.map_or("–".into(), |d| format!("{:.3} s", d.as_secs_f64())))
            .collect::<Vec<_>>()
            .join(" / "),
    )
}

/// What was produced and stored: model deltas, `messageDelta` events and rows, store
/// commits, and whether every subscriber saw every committed event.
fn volume_rows(o: &Outcome) -> Vec<(&'static str, String)> {
    let deltas_pub = o.subscribers.first().map_or(0, |s| s.message_deltas);
    let wall = o.wall;
    vec![
        (
            "model deltas produced",
            format!(
                "{} ({} agent calls, {} query calls)",
                o.raw_deltas, o.agent_calls, o.query_calls
            ),
        ),
        ("model deltas/s", per_s(o.raw_deltas, wall)),
        (
            "messageDelta events published (per subscriber)",
            deltas_pub.to_string(),
        ),
        (
            "messageDelta rows stored",
            o.stored_message_deltas.to_string(),
        ),
        (
            "messageDelta rows stored/s",
            per_s(o.stored_message_deltas, wall),
        ),
        (
            "store commits (fsync'd)",
            format!("{} ({})", o.store.commits, o.store.synced_commits),
        ),
        (
            "stream batches / events stored",
            format!("{} / {}", o.store.stream_batches, o.store.stream_events),
        ),
        (
            "every subscriber saw every committed event",
            if o.missing.is_empty() {
                format!("yes ({} stored events checked)", o.checked)
            } else {
                format!("NO: {} missing, e.g. {}", o.missing.len(), o.missing[0])
            },
        ),
    ]
}

fn outcome_json(o: &Outcome) -> serde_json::Value {
    let l = |l: &Latency| json!({ "n": l.n, "p50_ms": l.p50.as_secs_f64() * 1e3, "p99_ms": l.p99.as_secs_f64() * 1e3, "max_ms": l.max.as_secs_f64() * 1e3 });
    json!({
        "record": o.settings.record,
        "runs": o.statuses.len(),
        "succeeded": o.statuses.iter().filter(|s| **s == trellis_protocol::RunStatus::Succeeded).count(),
        "wall_s": o.wall.as_secs_f64(),
        "cpu_s": o.cpu.as_secs_f64(),
        "children_cpu_s": o.children_cpu.as_secs_f64(),
        "peak_rss_kib": o.peak_rss_kib,
        "peak_rss_reset": o.peak_rss_reset,
        "received": o.received(),
        "received_per_subscriber": o.subscribers.iter().map(|s| s.received).collect::<Vec<_>>(),
        "lagged": o.lagged(),
        "phase_began_s": o.phase_began.map(|b| b.map(|d| d.as_secs_f64())),
        "events_per_s": o.received() as f64 / o.wall.as_secs_f64(),
        "latency": {
            "session": l(&o.session_latency),
            "run": l(&o.run_latency),
            "workspace": l(&o.workspace_latency),
            "all": l(&o.all_latency),
            "phases": o.phase_latency.iter().map(l).collect::<Vec<_>>(),
            "wake_probe": o.wake_latency.iter().map(l).collect::<Vec<_>>(),
        },
        "raw_deltas": o.raw_deltas,
        "agent_calls": o.agent_calls,
        "query_calls": o.query_calls,
        "message_deltas_published": o.subscribers.first().map_or(0, |s| s.message_deltas),
        "message_deltas_stored": o.stored_message_deltas,
        "store": o.store,
        "checked": o.checked,
        "missing": o.missing.len(),
    })
}

fn pct(on: Duration, off: Duration) -> f64 {
    (on.as_secs_f64() / off.as_secs_f64() - 1.0) * 100.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args();
    let s = a.settings;
    if a.warmup {
        workload::run(Settings {
            runs: 2,
            subscribers: 1,
            deltas: 20,
            pace: Duration::from_millis(1),
            ..s
        })
        .await?;
    }
    let started = utc_now();
    let load_before = loadavg();
    let on = workload::run(Settings { record: true, ..s }).await?;
    let off = workload::run(Settings { record: false, ..s }).await?;
    let load_after = loadavg();

    let wall_overhead = pct(on.wall, off.wall);
    let cpu_overhead = pct(on.cpu, off.cpu);
    let p99 = on.all_latency.p99;
    let p99_off = off.all_latency.p99;
    let met = |ok: bool| if ok { "met" } else { "missed" };

    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "date": started,
                "machine": { "nproc": std::thread::available_parallelism().map_or(0, |n| n.get()), "cpu": cpu_model() },
                "load_before": load_before,
                "load_after": load_after,
                "settings": { "runs": s.runs, "subscribers": s.subscribers, "deltas": s.deltas, "pace_ms": s.pace.as_secs_f64() * 1e3 },
                "on": outcome_json(&on),
                "off": outcome_json(&off),
                "wall_overhead_pct": wall_overhead,
                "cpu_overhead_pct": cpu_overhead,
            }))?
        );
        return Ok(());
    }

    println!(
        "{} runs, {} subscribers, {} deltas per agent call, one every {} ms; started {started}; \
         {} CPUs ({}); load average before {load_before}, after {load_after}\n",
        s.runs,
        s.subscribers,
        s.deltas,
        s.pace.as_secs_f64() * 1e3,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model(),
    );
    println!("| | recording on | recording off |");
    println!("|---|---|---|");
    for ((name, with), (_, without)) in rows(&on).into_iter().zip(rows(&off)) {
        println!("| {name} | {with} | {without} |");
    }
    println!();
    println!(
        "- recording overhead: wall {:+.1} % ({:.3} s vs {:.3} s), CPU {:+.1} % ({:.3} s vs {:.3} s); goal ≤ 5 % of wall time: {}",
        wall_overhead,
        on.wall.as_secs_f64(),
        off.wall.as_secs_f64(),
        cpu_overhead,
        on.cpu.as_secs_f64(),
        off.cpu.as_secs_f64(),
        met(wall_overhead <= 5.0)
    );
    println!(
        "- p99 commit → subscriber, all events: {} ms with recording on, {} ms off; goal ≤ 2 ms: {}",
        ms(p99),
        ms(p99_off),
        met(p99 <= Duration::from_millis(2))
    );
    for (i, p) in Phase::ALL.iter().enumerate() {
        println!(
            "- p99 {}: {} ms with recording on, {} ms off (idle-task wake delay p99: {} ms, {} ms)",
            p.label(),
            ms(on.phase_latency[i].p99),
            ms(off.phase_latency[i].p99),
            ms(on.wake_latency[i].p99),
            ms(off.wake_latency[i].p99),
        );
    }
    Ok(())
}
