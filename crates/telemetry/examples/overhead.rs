//! The cost of live export on the engine's G1 (`feature_with_iterative_testing`, 9 node
//! steps; docs/benchmarks.md, "Telemetry"): sequential G1 runs on an in-memory journal with
//! export off, and on — each run's event batches forwarded as the service's broadcast
//! carries them, into the live pipeline exporting over OTLP/HTTP protobuf to a loopback
//! receiver — interleaved in blocks, in one process.
//!
//!     cargo run -p trellis-telemetry --example overhead -- [RUNS] [BLOCKS]
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::broadcast;
use trellis_graph::{Engine, MemoryJournal, demo};
use trellis_protocol::{ServiceEvent, ServiceEventBody, StreamId};
use trellis_telemetry::config::{Export, Protocol};
use trellis_telemetry::live::{LiveOptions, spawn};
use trellis_telemetry::otlp;

struct Live(ServiceEvent);

impl std::ops::Deref for Live {
    type Target = ServiceEvent;
    fn deref(&self) -> &ServiceEvent {
        &self.0
    }
}

/// `runs` G1 runs one after another; with `tx`, every event is broadcast as it is committed.
async fn block(
    engine: &Engine,
    graph: &Arc<trellis_graph::Graph>,
    runs: usize,
    tx: Option<&broadcast::Sender<Arc<Live>>>,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for _ in 0..runs {
        let mut handle = engine.start(graph.clone(), json!({ "messages": ["add a feature"] }))?;
        let forward = tx.map(|tx| {
            let mut batches = handle.subscribe();
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Ok(batch) = batches.recv().await {
                    for ev in batch.iter() {
                        let _ = tx.send(Arc::new(Live(ServiceEvent {
                            stream: StreamId::Run(ev.run.clone()),
                            seq: ev.seq,
                            ts: ev.ts,
                            submission: None,
                            event: ServiceEventBody::Run(ev.kind.clone()),
                        })));
                    }
                }
            })
        });
        let out = handle.wait().await?;
        anyhow::ensure!(
            out.status == trellis_protocol::RunStatus::Succeeded,
            "{out:?}"
        );
        if let Some(f) = forward {
            let _ = f.await;
        }
    }
    Ok(started.elapsed())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map_or(Ok(200), |a| a.parse())?;
    let blocks: usize = args.next().map_or(Ok(10), |a| a.parse())?;
    let receiver = trellis_test_http::Server::concurrent(|_| {
        trellis_test_http::Response::new(200, "application/x-protobuf", Vec::new())
    });
    let export = Export {
        url: format!("{}/v1/traces", receiver.url()),
        protocol: Protocol::HttpProtobuf,
        capture_content: false,
        queue: 2048,
        service_name: "trellis-bench".into(),
    };
    let (tx, rx) = broadcast::channel(4096);
    let pipeline = spawn(
        rx,
        otlp::exporter(&export, Duration::from_secs(5))?,
        LiveOptions::default(),
    );
    // The broadcast alone, read by a task that maps nothing: what a service pays anyway
    // for its other subscribers, so the export's own cost is `on` minus `broadcast`.
    let (bare_tx, mut bare_rx) = broadcast::channel::<Arc<Live>>(4096);
    let drain = tokio::spawn(async move { while bare_rx.recv().await.is_ok() {} });
    let engine = Engine::new(Arc::new(MemoryJournal::new()));
    let graph = Arc::new(demo::build("feature", &json!({ "sleep_us": 0 }))?);
    block(&engine, &graph, runs / 4, None).await?;
    block(&engine, &graph, runs / 4, Some(&tx)).await?;
    let per_run = |d: Duration| d.as_secs_f64() * 1e6 / runs as f64;
    let (mut off, mut bare, mut on) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..blocks {
        off.push(per_run(block(&engine, &graph, runs, None).await?));
        bare.push(per_run(block(&engine, &graph, runs, Some(&bare_tx)).await?));
        on.push(per_run(block(&engine, &graph, runs, Some(&tx)).await?));
    }
    drop((tx, bare_tx));
    let _ = drain.await;
    let stats = pipeline.shutdown(Duration::from_secs(10)).await;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (m_off, m_bare, m_on) = (median(&mut off), median(&mut bare), median(&mut on));
    let (exported, dropped, failed, lagged) = stats.snapshot();
    println!(
        "G1 in memory, {blocks} blocks of {runs} runs each way (median of blocks): no broadcast \
         {m_off:.1} µs/run, broadcast read by a no-op subscriber {m_bare:.1} µs/run, export on \
         {m_on:.1} µs/run; on/broadcast {:.3}, on/none {:.3}; spans exported {exported}, \
         dropped {dropped}, failed {failed}, events missed {lagged}; {} export requests",
        m_on / m_bare,
        m_on / m_off,
        receiver.requests().len()
    );
    Ok(())
}
