//! The cost of live export on the engine's G1 (`feature_with_iterative_testing`, 9 node
//! steps; docs/benchmarks.md, "Telemetry"): sequential G1 runs on an in-memory journal with
//! export off, and on — each run's event batches forwarded as the service's broadcast
//! carries them, into the live pipeline exporting over OTLP/HTTP protobuf to a loopback
//! receiver — interleaved in blocks, in one process.
//!
//! Per mode: the wall time of a block of runs, and the process's CPU time from the block's
//! start until the export has caught up with it (every event mapped, every span sent), so
//! the work the exporter's low-priority thread does after the runs is counted too.
//!
//! The OTLP receiver is this example again, run as a child process (`overhead receive`), so
//! the CPU time measured is what Trellis's process pays, not the collector's reading of the
//! requests (which shares the machine's cores all the same: the wall times include it).
//!
//! With the `trellis` binary's allocator (mimalloc: events are freed on whichever thread
//! reads them last, here often the exporter's; glibc malloc makes such frees costly) and its
//! settings (crates/cli/src/main.rs):
//!
//!     MIMALLOC_ARENA_EAGER_COMMIT=0 MIMALLOC_ALLOW_THP=0 \
//!         cargo run --release -p trellis-telemetry --example overhead -- [RUNS] [BLOCKS]
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tokio::sync::broadcast;
use trellis_graph::{Engine, MemoryJournal, demo};
use trellis_protocol::ServiceEvent;
use trellis_telemetry::config::{Export, Protocol};
use trellis_telemetry::live::{LiveOptions, Stats, spawn};
use trellis_telemetry::otlp;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Live(ServiceEvent);

impl std::ops::Deref for Live {
    type Target = ServiceEvent;
    fn deref(&self) -> &ServiceEvent {
        &self.0
    }
}

/// How long a partly filled batch waits. Shorter than the pipeline's default (0.5 s) only
/// so that each block's wait for the export to catch up is short: a block's spans fill
/// 512-span batches either way, and a batch lingering is idle time, not work.
const LINGER: Duration = Duration::from_millis(50);

/// The process's CPU time so far.
fn cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        t.tv_sec.unsigned_abs(),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// The CPU time of the exporter's thread (`trellis-otlp`) so far, from Linux's schedstat.
fn exporter_cpu() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == "trellis-otlp" {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            let ns = stat.split_whitespace().next().and_then(|n| n.parse().ok());
            return Duration::from_nanos(ns.unwrap_or(0));
        }
    }
    Duration::ZERO
}

/// Waits until the pipeline has read `sent` events and sent every span it holds.
async fn caught_up(stats: &Stats, sent: u64) {
    let read = || {
        stats.mapped_events.load(Ordering::Relaxed) + stats.lagged_events.load(Ordering::Relaxed)
    };
    let done = || {
        let (exported, dropped, failed, _) = stats.snapshot();
        exported + dropped + failed
    };
    while read() < sent {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The last spans wait for their batch's linger (`LINGER`), then one request.
    let mut last = done();
    loop {
        tokio::time::sleep(LINGER + Duration::from_millis(50)).await;
        let now = done();
        if now == last {
            return;
        }
        last = now;
    }
}

/// `runs` G1 runs one after another; with `tx`, every event is broadcast as it is committed.
/// Returns the wall time and how many events were broadcast.
async fn block(
    engine: &Engine,
    graph: &Arc<trellis_graph::Graph>,
    runs: usize,
    tx: Option<&broadcast::Sender<Arc<Live>>>,
) -> anyhow::Result<(Duration, u64)> {
    let started = Instant::now();
    let mut sent = 0;
    for _ in 0..runs {
        let mut handle = engine.start(graph.clone(), json!({ "messages": ["add a feature"] }))?;
        let forward = tx.map(|tx| {
            let mut batches = handle.subscribe();
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut sent = 0;
                while let Ok(batch) = batches.recv().await {
                    sent += batch.len() as u64;
                    for ev in batch.iter() {
                        let _ = tx.send(Arc::new(Live(ServiceEvent::from(ev))));
                    }
                }
                sent
            })
        });
        let out = handle.wait().await?;
        anyhow::ensure!(
            out.status == trellis_protocol::RunStatus::Succeeded,
            "{out:?}"
        );
        if let Some(f) = forward {
            sent += f.await?;
        }
    }
    Ok((started.elapsed(), sent))
}

/// `overhead receive`: a loopback OTLP/HTTP receiver that keeps connections open (as
/// collectors do) and answers 200 to every request; prints its URL, and when its stdin
/// closes, how many requests and bytes it read and its CPU time in µs.
fn receive() -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    println!("http://{}", listener.local_addr()?);
    let requests = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (r, b) = (requests.clone(), bytes.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (r, b) = (r.clone(), b.clone());
            std::thread::spawn(move || serve(stream, &r, &b));
        }
    });
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    println!(
        "{} {} {}",
        requests.load(Ordering::Relaxed),
        bytes.load(Ordering::Relaxed),
        cpu().as_micros()
    );
    Ok(())
}

/// Answers the requests of one connection until the client closes it.
fn serve(
    stream: std::net::TcpStream,
    requests: &std::sync::atomic::AtomicU64,
    bytes: &std::sync::atomic::AtomicU64,
) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(1 << 16, stream);
    let mut body = Vec::new();
    loop {
        let mut len = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some((key, value)) = line.split_once(':')
                && key.trim().eq_ignore_ascii_case("content-length")
            {
                len = value.trim().parse().unwrap_or(0);
            }
            if line.trim_end().is_empty() {
                break;
            }
        }
        body.resize(len, 0);
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        requests.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(len as u64, Ordering::Relaxed);
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if std::io::Write::write_all(&mut out, answer).is_err() {
            return;
        }
    }
}

fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("receive") {
        return receive();
    }
    bench()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn bench() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map_or(Ok(200), |a| a.parse())?;
    let blocks: usize = args.next().map_or(Ok(10), |a| a.parse())?;
    let mut receiver = Command::new(std::env::current_exe()?)
        .arg("receive")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut said = BufReader::new(receiver.stdout.take().context("receiver's stdout")?);
    let mut url = String::new();
    said.read_line(&mut url)?;
    let export = Export {
        url: format!("{}/v1/traces", url.trim()),
        metrics_url: None,
        protocol: Protocol::HttpProtobuf,
        capture_content: false,
        queue: 2048,
        service_name: "trellis-bench".into(),
    };
    // The service's live broadcast holds 16 384 events (`crates/core` fanout).
    let (tx, rx) = broadcast::channel(16_384);
    let pipeline = spawn(
        rx,
        otlp::exporter(&export, Duration::from_secs(5))?,
        LiveOptions {
            linger: LINGER,
            ..LiveOptions::default()
        },
    );
    // The broadcast alone, read by a task that maps nothing: what a service pays anyway
    // for its other subscribers, so the export's own cost is `on` minus `broadcast`.
    let (bare_tx, mut bare_rx) = broadcast::channel::<Arc<Live>>(16_384);
    let drain = tokio::spawn(async move { while bare_rx.recv().await.is_ok() {} });
    // The same no-op subscriber beside the exporter, so `on` minus `broadcast` is the export.
    let mut follower = tx.subscribe();
    let follow = tokio::spawn(async move { while follower.recv().await.is_ok() {} });
    let engine = Engine::new(Arc::new(MemoryJournal::new()));
    let graph = Arc::new(demo::build("feature", &json!({ "sleep_us": 0 }))?);
    let stats = pipeline.stats();
    let mut broadcast_total = 0;
    block(&engine, &graph, runs / 4, None).await?;
    broadcast_total += block(&engine, &graph, runs / 4, Some(&tx)).await?.1;
    caught_up(&stats, broadcast_total).await;
    let per_run = |d: Duration| d.as_secs_f64() * 1e6 / runs as f64;
    let mut modes: [(Vec<f64>, Vec<f64>); 3] = Default::default();
    let exporter_cpu0 = exporter_cpu();
    for _ in 0..blocks {
        for (mode, (wall, cpu_time)) in modes.iter_mut().enumerate() {
            let cpu0 = cpu();
            let sender = [None, Some(&bare_tx), Some(&tx)][mode];
            let (elapsed, sent) = block(&engine, &graph, runs, sender).await?;
            if mode == 2 {
                broadcast_total += sent;
                caught_up(&stats, broadcast_total).await;
            }
            wall.push(per_run(elapsed));
            cpu_time.push(per_run(cpu() - cpu0));
        }
    }
    let exporter_cpu_per_run = per_run(exporter_cpu() - exporter_cpu0) / blocks as f64;
    drop((tx, bare_tx));
    let _ = (drain.await, follow.await);
    let stats = pipeline.shutdown(Duration::from_secs(10)).await;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    // Each block with export on against the broadcast-only block just before it: a drift of
    // the machine's load between blocks cancels out.
    let mut paired: Vec<f64> = modes[2]
        .0
        .iter()
        .zip(&modes[1].0)
        .map(|(on, b)| on / b)
        .collect();
    let quartile = |v: &[f64], q: usize| v[(v.len() - 1) * q / 4];
    let paired_median = median(&mut paired);
    let paired = format!(
        "{paired_median:.3}, quartiles {:.3}–{:.3}",
        quartile(&paired, 1),
        quartile(&paired, 3)
    );
    let [off, bare, on] = modes.map(|(mut w, mut c)| (median(&mut w), median(&mut c)));
    let (exported, dropped, failed, lagged) = stats.snapshot();
    drop(receiver.stdin.take());
    let mut received = String::new();
    said.read_line(&mut received)?;
    let _ = receiver.wait();
    let mut received = received.split_whitespace();
    let requests = received.next().unwrap_or("?").to_owned();
    let bytes: f64 = received.next().and_then(|b| b.parse().ok()).unwrap_or(0.0);
    let receiver_cpu: f64 = received.next().and_then(|b| b.parse().ok()).unwrap_or(0.0);
    println!(
        "G1 in memory, {blocks} blocks of {runs} runs each way (median of blocks), wall / CPU \
         µs per run: no broadcast {:.1} / {:.1}, broadcast read by a no-op subscriber {:.1} / \
         {:.1}, export on {:.1} / {:.1}; wall on/broadcast {:.3} (median of paired blocks {paired}), on/none {:.3}; CPU \
         on/broadcast {:.3}; the exporter thread's CPU {exporter_cpu_per_run:.1} µs per run; \
         spans exported {exported}, dropped {dropped}, failed {failed}, events missed \
         {lagged}; {requests} export requests, {:.0} bytes per span; the receiver's CPU {:.1} µs per run exported",
        off.0,
        off.1,
        bare.0,
        bare.1,
        on.0,
        on.1,
        on.0 / bare.0,
        on.0 / off.0,
        on.1 / bare.1,
        bytes / exported.max(1) as f64,
        // The runs with export on: the warm-up's and the blocks'.
        receiver_cpu / (runs / 4 + blocks * runs) as f64
    );
    Ok(())
}
