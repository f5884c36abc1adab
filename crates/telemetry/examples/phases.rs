//! The live exporter's work per engine G1 run, phase by phase, on one thread and without a
//! broadcast (docs/benchmarks.md, "Telemetry"): the events of `RUNS` G1 runs are recorded
//! once, then timed as the exporter's thread handles them — mapped to spans, counted into
//! the metrics, the spans encoded as OTLP protobuf requests of 512 spans, and the events
//! dropped.
//!
//!     MIMALLOC_ARENA_EAGER_COMMIT=0 MIMALLOC_ALLOW_THP=0 \
//!         cargo run --release -p trellis-telemetry --example phases -- [RUNS]
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use trellis_graph::{Engine, MemoryJournal, demo};
use trellis_protocol::ServiceEvent;
use trellis_telemetry::metrics::Metrics;
use trellis_telemetry::otlp::proto;
use trellis_telemetry::otlp_json::Resource;
use trellis_telemetry::{Mapper, Options};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The events of `n` G1 runs, each run's in commit order.
async fn record(n: usize) -> anyhow::Result<Vec<Vec<ServiceEvent>>> {
    let engine = Engine::new(Arc::new(MemoryJournal::new()));
    let graph = Arc::new(demo::build("feature", &json!({ "sleep_us": 0 }))?);
    let mut runs = Vec::with_capacity(n);
    for _ in 0..n {
        let mut handle = engine.start(graph.clone(), json!({ "messages": ["add a feature"] }))?;
        let mut batches = handle.subscribe();
        let events = tokio::spawn(async move {
            let mut events = Vec::new();
            while let Ok(batch) = batches.recv().await {
                events.extend(batch.iter().map(ServiceEvent::from));
            }
            events
        });
        handle.wait().await?;
        runs.push(events.await?);
    }
    Ok(runs)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args().nth(1).map_or(Ok(2000), |a| a.parse())?;
    let runs = record(n).await?;
    let per_run = |t: Instant| t.elapsed().as_secs_f64() * 1e6 / n as f64;

    let t = Instant::now();
    let mut mapper = Mapper::new(Options::default());
    let mut spans = Vec::new();
    for run in &runs {
        for ev in run {
            mapper.event(ev);
        }
        spans.extend(mapper.take_finished());
    }
    let map = per_run(t);

    let metrics = Metrics::default();
    let t = Instant::now();
    for run in &runs {
        metrics.observe_all(run);
    }
    let observe = per_run(t);

    let resource = Resource::default();
    let mut body = Vec::new();
    let mut bytes = 0;
    let t = Instant::now();
    for batch in spans.chunks(512) {
        body.clear();
        body.reserve(proto::request_len(&resource, batch));
        proto::encode_request(&resource, batch, &mut body);
        bytes += body.len();
    }
    let encode = per_run(t);

    let t = Instant::now();
    drop(spans);
    let drop_spans = per_run(t);
    let events = runs.iter().map(Vec::len).sum::<usize>() / n;
    let t = Instant::now();
    drop(runs);
    let drop_events = per_run(t);
    println!(
        "{n} G1 runs, {events} events a run; µs per run: mapping {map:.2}, metrics {observe:.2}, \
         encoding {encode:.2} ({} bytes a run), dropping the spans {drop_spans:.2}, dropping \
         the events {drop_events:.2}",
        bytes / n
    );
    Ok(())
}
