//! Throughput: C = 100 G1 runs in flight at once on one multi-thread tokio runtime, every
//! node sleeping 10 ms (simulated I/O), a worker pool pulling the next run as soon as one
//! finishes — like the anchor's `bench_async.py` (asyncio `gather` of 100 workers). The ideal
//! is `C / (9 × 10 ms)` = 1111 runs/s. Each configuration runs in its own child process (this
//! binary with `--concurrent-child`) so its peak RSS is attributable, as in the anchor.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use trellis_graph::{Durability, demo};
use trellis_store::Synchronous;

use crate::harness::{
    Backend, G1_NODE_STEPS, Setup, check_g1, commits_per_run, durability_key, g1_graph,
    parse_durability,
};
use crate::results::Throughput;
use crate::stats::Stats;
use crate::sys;

/// One configuration.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// No engine at all: each "run" is 9 sequential sleeps (the runtime's own floor).
    pub sleep_only: bool,
    /// Journal.
    pub backend: Backend,
    /// Commit pipelining.
    pub durability: Durability,
    /// Per-node sleep, µs.
    pub sleep_us: u64,
    /// Runs in flight.
    pub concurrency: usize,
    /// Timed runs.
    pub runs: usize,
}

impl Config {
    fn spec(&self) -> String {
        format!(
            "{}:{}:{}:{}:{}",
            if self.sleep_only {
                "sleep_only"
            } else {
                self.backend.key()
            },
            durability_key(self.durability),
            self.sleep_us,
            self.concurrency,
            self.runs
        )
    }

    fn parse(spec: &str) -> anyhow::Result<Self> {
        let parts: Vec<&str> = spec.split(':').collect();
        let [backend, durability, sleep_us, concurrency, runs] = parts[..] else {
            bail!(
                "bad --concurrent-child spec `{spec}` (backend:durability:sleep_us:concurrency:runs)"
            );
        };
        Ok(Self {
            sleep_only: backend == "sleep_only",
            backend: if backend == "sleep_only" {
                Backend::None
            } else {
                Backend::parse(backend)?
            },
            durability: parse_durability(durability)?,
            sleep_us: sleep_us.parse().context("sleep_us")?,
            concurrency: concurrency.parse().context("concurrency")?,
            runs: runs.parse().context("runs")?,
        })
    }

    fn key(&self) -> String {
        if self.sleep_only {
            return format!("sleep_only/sleep={}us", self.sleep_us);
        }
        let d = match self.backend {
            Backend::Durable(_) => format!("/{}", durability_key(self.durability)),
            _ => String::new(),
        };
        format!("{}{d}/sleep={}us", self.backend.key(), self.sleep_us)
    }
}

/// The configurations, with the anchor's run counts (`max(100, int(base × scale))`).
pub fn configs(scale: f64) -> Vec<Config> {
    let r = |base: usize| ((base as f64 * scale) as usize).max(100);
    let c = |backend, durability, sleep_us, runs| Config {
        sleep_only: false,
        backend,
        durability,
        sleep_us,
        concurrency: 100,
        runs,
    };
    let (full, normal) = (
        Backend::Durable(Synchronous::Full),
        Backend::Durable(Synchronous::Normal),
    );
    vec![
        c(Backend::None, Durability::Async, 10_000, r(2000)),
        c(Backend::Memory, Durability::Async, 10_000, r(2000)),
        c(full, Durability::Async, 10_000, r(1000)),
        c(full, Durability::Sync, 10_000, r(1000)),
        c(normal, Durability::Async, 10_000, r(2000)),
        c(normal, Durability::Sync, 10_000, r(2000)),
        c(Backend::None, Durability::Async, 0, r(2000)),
        c(normal, Durability::Async, 0, r(1000)),
        Config {
            sleep_only: true,
            ..c(Backend::None, Durability::Async, 10_000, r(2000))
        },
    ]
}

/// Runs every configuration, each in a child process working in `dir`.
pub fn run(scale: f64, dir: &Path) -> anyhow::Result<Vec<Throughput>> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let mut out = Vec::new();
    for config in configs(scale) {
        let child = Command::new(&exe)
            .arg("--concurrent-child")
            .arg(config.spec())
            .arg("--work-dir")
            .arg(dir)
            .output()
            .with_context(|| format!("spawning {}", exe.display()))?;
        if !child.status.success() {
            bail!(
                "concurrent child {} failed: {}",
                config.spec(),
                String::from_utf8_lossy(&child.stderr)
            );
        }
        let line = String::from_utf8_lossy(&child.stdout);
        let t: Throughput = serde_json::from_str(line.trim())
            .with_context(|| format!("parsing child output {line}"))?;
        crate::progress(&format!(
            "concurrent {:<30} runs={:<5} {:7.1} runs/s (ideal {}) cpu/run {:6.3} ms  latency median {:7.1} ms p90 {:7.1} ms  RSS {:.1} -> peak {:.1} MiB  commits/fsyncs per run {}",
            t.key,
            t.runs,
            t.runs_per_s,
            t.ideal_runs_per_s.map_or("-".into(), |i| format!("{i:.0}")),
            t.cpu_ms_per_run,
            t.latency.median_ms,
            t.latency.p90_ms,
            t.rss_before_mib,
            t.peak_rss_mib,
            crate::results::Commits::show(t.commits_per_run, 3),
        ));
        out.push(t);
    }
    Ok(out)
}

/// The child: measures one configuration and prints it as one JSON line.
pub fn child(spec: &str, dir: &Path) -> anyhow::Result<()> {
    let config = Config::parse(spec)?;
    let rss_before_mib = sys::rss_mib();
    let load0 = sys::loadavg()[0];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(measure(config, dir))?;
    let t = Throughput {
        rss_before_mib,
        peak_rss_mib: sys::peak_rss_mib(),
        load: [load0, sys::loadavg()[0]],
        ..result
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", serde_json::to_string(&t)?)?;
    Ok(())
}

async fn measure(config: Config, dir: &Path) -> anyhow::Result<Throughput> {
    let name = format!("concurrent_{}", config.key().replace(['/', '='], "_"));
    let setup = Arc::new(Setup::new(config.backend, config.durability, dir, &name)?);
    let graph = g1_graph(config.sleep_us, None)?;
    let drive = |runs: usize| {
        let (setup, graph) = (setup.clone(), graph.clone());
        async move {
            if config.sleep_only {
                drive_sleep_only(config.sleep_us, runs, config.concurrency).await
            } else {
                drive(&setup, &graph, runs, config.concurrency).await
            }
        }
    };
    // Warm-up: one full wave.
    drive(config.concurrency).await?;
    let before = setup.store_stats();
    let c0 = sys::cpu_seconds();
    let t0 = Instant::now();
    let latencies = drive(config.runs).await?;
    let elapsed_s = t0.elapsed().as_secs_f64();
    let cpu = sys::cpu_seconds() - c0;
    let commits = setup
        .store
        .as_ref()
        .map(|_| commits_per_run(before, setup.store_stats(), config.runs));
    let ideal = (config.sleep_us > 0).then(|| {
        config.concurrency as f64 / (G1_NODE_STEPS as f64 * config.sleep_us as f64 * 1e-6)
    });
    Ok(Throughput {
        key: config.key(),
        concurrency: config.concurrency,
        sleep_us: config.sleep_us,
        runs: config.runs,
        elapsed_s,
        runs_per_s: config.runs as f64 / elapsed_s,
        ideal_runs_per_s: ideal,
        cpu_ms_per_run: cpu / config.runs as f64 * 1e3,
        latency: Stats::of(&latencies, None),
        rss_before_mib: 0.0,
        peak_rss_mib: 0.0,
        commits_per_run: commits,
        load: [0.0; 2],
    })
}

/// Runs `runs` G1 runs through the engine, `concurrency` at a time; returns each latency (s).
async fn drive(
    setup: &Arc<Setup>,
    graph: &Arc<trellis_graph::Graph>,
    runs: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<f64>> {
    let (setup, graph) = (setup.clone(), graph.clone());
    pool(runs, concurrency, move || {
        let (setup, graph) = (setup.clone(), graph.clone());
        async move {
            let out = setup.engine.run(graph, demo::feature_input()).await?;
            check_g1(&out)
        }
    })
    .await
}

/// Like [`drive`] without the engine: each "run" is 9 sequential sleeps, with the same
/// precise sleep as the demo handlers (`trellis_graph::demo::precise_sleep`).
async fn drive_sleep_only(
    sleep_us: u64,
    runs: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<f64>> {
    pool(runs, concurrency, move || async move {
        for _ in 0..G1_NODE_STEPS {
            trellis_graph::demo::precise_sleep(std::time::Duration::from_micros(sleep_us)).await;
        }
        anyhow::Ok(())
    })
    .await
}

/// `concurrency` tasks take turns running `one()` until `runs` have been done; returns the
/// latency of each (s).
async fn pool<F, Fut>(runs: usize, concurrency: usize, one: F) -> anyhow::Result<Vec<f64>>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (next, one) = (next.clone(), one.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < runs {
                let t0 = Instant::now();
                one().await?;
                latencies.push(t0.elapsed().as_secs_f64());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut all = Vec::with_capacity(runs);
    for w in workers {
        all.extend(w.await??);
    }
    Ok(all)
}
