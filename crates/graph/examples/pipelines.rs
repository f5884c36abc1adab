//! Free-running vs lock-step scheduling, side by side with LangGraph (issue 18;
//! `docs/benchmarks.md`, "Free-running scheduling"):
//!
//! ```sh
//! cargo run --release -p trellis-graph --example pipelines -- [--runs 20] [--fast-ms 10]
//!     [--slow-ms 100] [--langgraph-dir ../shared/bench/langgraph] [--venv /tmp/lgvenv]
//!     [--skip-langgraph]
//! cargo run -p trellis-graph --example pipelines -- --smoke
//! ```
//!
//! Runs the `pipelines` demo (10 pipelines of 3 nodes after a common start) in both layouts —
//! `slow_pipeline` (pipeline 0's nodes are slow) and `staggered` (node i+1 of pipeline i is
//! slow) — in both scheduling modes (runs interleaved), then the anchor's
//! `bench_pipelines.py` on the same shape with the venv's Python, and prints a markdown
//! report. `--smoke` (what `scripts/check` runs, in the dev profile) checks that it works in
//! about a second: sleeps of 1 ms / 5 ms, one run of each case, no warm-up, no LangGraph —
//! the same report, with figures that mean nothing.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use serde_json::{Value, json};
use trellis_graph::demo::pipelines::{Timing, time_run};
use trellis_graph::{Engine, NullJournal, demo};

const PIPELINES: usize = 10;
const STAGES: usize = 3;
const LAYOUTS: [&str; 2] = ["slow_pipeline", "staggered"];

struct Args {
    runs: usize,
    warmups: usize,
    fast_ms: f64,
    slow_ms: f64,
    langgraph_dir: PathBuf,
    venv: PathBuf,
    skip_langgraph: bool,
}

fn args() -> Args {
    let mut a = Args {
        runs: 20,
        warmups: 2,
        fast_ms: 10.0,
        slow_ms: 100.0,
        langgraph_dir: PathBuf::from("../shared/bench/langgraph"),
        venv: std::env::var_os("LG_VENV").map_or_else(|| PathBuf::from("/tmp/lgvenv"), Into::into),
        skip_langgraph: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--runs" => a.runs = value().parse().unwrap(),
            "--fast-ms" => a.fast_ms = value().parse().unwrap(),
            "--slow-ms" => a.slow_ms = value().parse().unwrap(),
            "--langgraph-dir" => a.langgraph_dir = value().into(),
            "--venv" => a.venv = value().into(),
            "--skip-langgraph" => a.skip_langgraph = true,
            "--smoke" => {
                (a.runs, a.warmups, a.fast_ms, a.slow_ms) = (1, 0, 1.0, 5.0);
                a.skip_langgraph = true;
            }
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn p90(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[((0.9 * (xs.len() - 1) as f64).round() as usize).min(xs.len() - 1)]
}

/// Medians over the runs: total, and when each pipeline finished.
struct Summary {
    total_median: f64,
    total_p90: f64,
    pipelines: Vec<f64>,
}

fn summarize(timings: &[Timing]) -> Summary {
    let totals: Vec<f64> = timings.iter().map(|t| ms(t.total)).collect();
    Summary {
        total_median: median(totals.clone()),
        total_p90: p90(totals),
        pipelines: (0..PIPELINES)
            .map(|p| median(timings.iter().map(|t| ms(t.pipelines[p])).collect()))
            .collect(),
    }
}

fn from_langgraph(layout: &Value) -> Summary {
    let total = &layout["total"];
    Summary {
        total_median: total["median_ms"].as_f64().unwrap(),
        total_p90: total["p90_ms"].as_f64().unwrap(),
        pipelines: layout["pipelines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["median_ms"].as_f64().unwrap())
            .collect(),
    }
}

fn is_slow(layout: &str, p: usize, s: usize) -> bool {
    match layout {
        "slow_pipeline" => p == 0,
        _ => p + 1 == s,
    }
}

/// (fast pipelines, slow pipelines) by index.
fn split(layout: &str) -> (Vec<usize>, Vec<usize>) {
    (0..PIPELINES).partition(|&p| !(1..=STAGES).any(|s| is_slow(layout, p, s)))
}

/// Zero-overhead expectations: (free run end, lock-step run end, fast pipelines free, fast
/// pipelines lock-step).
fn ideal(layout: &str, fast: f64, slow: f64) -> (f64, f64, f64, f64) {
    let cost = |p: usize, s: usize| if is_slow(layout, p, s) { slow } else { fast };
    let free = (0..PIPELINES)
        .map(|p| (1..=STAGES).map(|s| cost(p, s)).sum::<f64>())
        .fold(0.0, f64::max);
    let step_max = |s: usize| (0..PIPELINES).map(|p| cost(p, s)).fold(0.0, f64::max);
    let steps: f64 = (1..=STAGES).map(step_max).sum();
    let fast_free = fast * STAGES as f64;
    // A fast pipeline's last node starts when the previous steps have ended.
    let fast_steps = (1..STAGES).map(step_max).sum::<f64>() + fast;
    (free, steps, fast_free, fast_steps)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" / "))
        .unwrap_or_default()
}

fn shell(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// The Trellis side of one layout: both scheduling modes, medians over the runs.
struct LayoutTimes {
    layout: &'static str,
    steps: Summary,
    free: Summary,
}

/// Times the `pipelines` demo in `layout` under both scheduling modes, runs interleaved.
fn time_layout(
    rt: &tokio::runtime::Runtime,
    engine: &Engine,
    a: &Args,
    layout: &'static str,
) -> LayoutTimes {
    let fast_us = (a.fast_ms * 1e3) as u64;
    let slow_us = (a.slow_ms * 1e3) as u64;
    let graph = |scheduling: &str| {
        Arc::new(
            demo::build(
                "pipelines",
                &json!({"pipelines": PIPELINES, "stages": STAGES, "fast_us": fast_us,
                        "slow_us": slow_us, "layout": layout, "scheduling": scheduling}),
            )
            .unwrap(),
        )
    };
    let (steps_g, free_g) = (graph("steps"), graph("free"));
    let (mut steps, mut free) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for i in 0..a.runs + a.warmups {
            // Interleaved, so both modes see the same machine load; warm-up runs first.
            let s = time_run(engine, steps_g.clone()).await.unwrap();
            let f = time_run(engine, free_g.clone()).await.unwrap();
            if i >= a.warmups {
                steps.push(s);
                free.push(f);
            }
        }
    });
    eprintln!(
        "trellis {layout}: steps {:.1} ms, free {:.1} ms (medians)",
        summarize(&steps).total_median,
        summarize(&free).total_median
    );
    LayoutTimes {
        layout,
        steps: summarize(&steps),
        free: summarize(&free),
    }
}

/// Runs the anchor's `bench_pipelines.py` with the venv's Python: its JSON report and how
/// long it took.
fn run_langgraph(a: &Args) -> (Value, Duration) {
    let results = std::env::temp_dir().join(format!("lg-pipelines-{}", std::process::id()));
    std::fs::create_dir_all(&results).unwrap();
    let python = a.venv.join("bin/python");
    let t0 = std::time::Instant::now();
    let status = Command::new(&python)
        .arg("bench_pipelines.py")
        .args(["--runs", &a.runs.to_string()])
        .args(["--fast", &(a.fast_ms / 1e3).to_string()])
        .args(["--slow", &(a.slow_ms / 1e3).to_string()])
        .current_dir(&a.langgraph_dir)
        .env("LG_BENCH_RESULTS", &results)
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    assert!(status.success(), "bench_pipelines.py failed: {status}");
    let file = results.join("pipelines.json");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&results);
    (json, t0.elapsed())
}

/// Load averages: before, after the Trellis side, at the end.
struct Loads {
    before: String,
    after_trellis: String,
    end: String,
}

/// The report's opening lines: when, where, how the cases ran, and the LangGraph side's versions.
fn print_preamble(a: &Args, loads: &Loads, lg: Option<&(Value, Duration)>) {
    let when = shell("date -u '+%Y-%m-%d %H:%M UTC'");
    let cpu = shell("nproc; grep -m1 'model name' /proc/cpuinfo | cut -d: -f2");
    let commit = shell("git rev-parse --short HEAD");
    let profile = if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    };
    println!(
        "{when}, commit `{commit}`, CPUs: {}, {profile} build.",
        cpu.replace('\n', " ×").trim()
    );
    let Loads {
        before: load0,
        after_trellis: load_trellis,
        end: load1,
    } = loads;
    println!(
        "{} runs of each case after {} warm-up runs; fast nodes sleep {} ms, slow nodes {} ms; \
         load average (1/5/15 min) {load0} before, {load_trellis} after the Trellis side, {load1} at the end.",
        a.runs, a.warmups, a.fast_ms, a.slow_ms
    );
    if let Some((json, elapsed)) = lg {
        let v = &json["versions"];
        println!(
            "LangGraph side: `bench_pipelines.py` in this invocation ({:.0} s), langgraph {}, langchain-core {}, Python {}, no checkpointer.",
            elapsed.as_secs_f64(),
            v["langgraph"].as_str().unwrap_or("?"),
            v["langchain-core"].as_str().unwrap_or("?"),
            v["python"].as_str().unwrap_or("?"),
        );
    }
}

/// The markdown table: per layout, each engine's figures beside the zero-overhead
/// expectation, and LangGraph against Trellis free when it ran.
fn print_table(a: &Args, trellis: &[LayoutTimes], lg: Option<&(Value, Duration)>) {
    println!(
        "| layout | engine | run total median / p90 ms | fast pipelines done ms | slow pipeline(s) done ms | zero-overhead expectation (total; fast pipelines) ms |"
    );
    println!("|---|---|---|---|---|---|");
    for LayoutTimes {
        layout,
        steps,
        free,
    } in trellis
    {
        let (fast, slow) = split(layout);
        let (i_free, i_steps, i_ffree, i_fsteps) = ideal(layout, a.fast_ms, a.slow_ms);
        let worst =
            |s: &Summary, set: &[usize]| set.iter().map(|&p| s.pipelines[p]).fold(0.0, f64::max);
        let mut rows = vec![
            ("Trellis free", free, format!("{i_free:.0}; {i_ffree:.0}")),
            (
                "Trellis steps",
                steps,
                format!("{i_steps:.0}; {i_fsteps:.0}"),
            ),
        ];
        let lg_summary = lg.map(|(json, _)| from_langgraph(&json["layouts"][*layout]));
        if let Some(s) = &lg_summary {
            rows.push(("LangGraph", s, format!("{i_steps:.0}; {i_fsteps:.0}")));
        }
        for (engine, s, expect) in rows {
            println!(
                "| {layout} | {engine} | {:.1} / {:.1} | {:.1} | {:.1} | {expect} |",
                s.total_median,
                s.total_p90,
                worst(s, &fast),
                worst(s, &slow),
            );
        }
        if let Some(s) = &lg_summary {
            println!(
                "| {layout} | LangGraph ÷ Trellis free | {:.2}× | {:.2}× | {:.2}× | |",
                s.total_median / free.total_median,
                worst(s, &fast) / worst(free, &fast),
                worst(s, &slow) / worst(free, &slow),
            );
        }
    }
}

fn main() {
    let a = args();
    let before = loadavg();
    let started = std::time::SystemTime::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::new(Arc::new(NullJournal));
    let trellis: Vec<LayoutTimes> = LAYOUTS
        .into_iter()
        .map(|layout| time_layout(&rt, &engine, &a, layout))
        .collect();
    let after_trellis = loadavg();
    let lg = (!a.skip_langgraph).then(|| run_langgraph(&a));
    let end = loadavg();
    let _ = started;
    let loads = Loads {
        before,
        after_trellis,
        end,
    };
    print_preamble(&a, &loads, lg.as_ref());
    println!();
    print_table(&a, &trellis, lg.as_ref());
}
