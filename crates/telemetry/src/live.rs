//! The live exporter: a service's broadcast of committed events mapped to spans as they
//! happen (the same [`Mapper`] as `trellis runs trace`) and sent to a [`SpanSink`] (OTLP over
//! HTTP or gRPC, [`crate::otlp::exporter`]; any SDK exporter through [`crate::sdk::SdkSink`]).
//!
//! Nothing here is on a run's path. The pipeline reads the broadcast, which never waits for
//! a slow reader (a reader that falls behind loses the oldest events; they are counted in
//! [`Stats::lagged_events`]). It reads in bursts — whatever has been broadcast, then a short
//! pause ([`LiveOptions::pause`]) — so a busy service's publisher is not made to wake it for
//! every event. Finished spans wait in batches; at most [`LiveOptions::queue`] spans wait
//! (besides the batch being sent), and while the collector is slow or down spans beyond that
//! are dropped and counted ([`Stats::dropped_spans`]), as are the spans of a batch the
//! collector refused or that timed out ([`Stats::failed_spans`]). A batch becomes one OTLP
//! request, encoded and sent by a second task.
//!
//! Where the work runs: the mapping task on the runtime that starts the pipeline (the
//! service's), where the events were made, so that the events it is the last to hold are
//! freed by the threads that allocated them (mimalloc frees another thread's memory at a
//! higher cost: on the exporter's thread the engine's G1 runs took 2–3 % more wall time,
//! docs/benchmarks.md, "Telemetry"); it yields every 512 events. Encoding and sending, on a thread of its own (`trellis-otlp`).

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;
use trellis_protocol::ServiceEvent;

use crate::mapper::{Mapper, Options};
use crate::metrics::Metrics;
use crate::otlp::SpanSink;
use crate::otlp_json::Resource;
use crate::span::Span;

/// How the pipeline batches and bounds.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// What the spans carry.
    pub mapping: Options,
    /// The span queue's bound.
    pub queue: usize,
    /// The most spans one export sends.
    pub batch: usize,
    /// How long a span waits for its batch to fill before it is sent anyway.
    pub linger: Duration,
    /// How long one export may take before its spans are given up.
    pub export_timeout: Duration,
    /// After reading what had been broadcast, how long to wait before reading again (the
    /// events of the pause are read as one burst).
    pub pause: Duration,
    /// `service.name`.
    pub service_name: String,
    /// How often the metrics are sent (and once more at shutdown).
    pub metrics_interval: Duration,
}

impl Default for LiveOptions {
    fn default() -> Self {
        Self {
            mapping: Options::default(),
            queue: crate::config::DEFAULT_QUEUE,
            batch: 512,
            linger: Duration::from_millis(500),
            export_timeout: Duration::from_secs(5),
            pause: Duration::from_millis(2),
            service_name: "trellis".to_owned(),
            metrics_interval: Duration::from_secs(60),
        }
    }
}

/// What the pipeline did so far.
#[derive(Debug, Default)]
pub struct Stats {
    /// Spans the exporter accepted.
    pub exported_spans: AtomicU64,
    /// Spans dropped because the queue was full.
    pub dropped_spans: AtomicU64,
    /// Spans of batches that failed or timed out.
    pub failed_spans: AtomicU64,
    /// Events the pipeline fell too far behind to read.
    pub lagged_events: AtomicU64,
    /// Events read and mapped.
    pub mapped_events: AtomicU64,
}

impl Stats {
    /// `(exported, dropped, failed, lagged)` now.
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        (
            self.exported_spans.load(Ordering::Relaxed),
            self.dropped_spans.load(Ordering::Relaxed),
            self.failed_spans.load(Ordering::Relaxed),
            self.lagged_events.load(Ordering::Relaxed),
        )
    }
}

/// A running pipeline; [`Pipeline::shutdown`] flushes it.
pub struct Pipeline {
    stats: Arc<Stats>,
    metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    /// Closed when the pipeline's thread is done.
    done: oneshot::Receiver<()>,
}

/// The most events mapped before the mapping task yields (on a service's runtime, up to
/// ~0.2 ms of mapping and dropping events; 128 made the engine's G1 runs slower, not faster).
const BURST: usize = 512;

/// Starts mapping `events` (a service's live broadcast) to spans — a task on the current
/// runtime, or on the exporter's thread when called outside one — and exporting them with
/// `sink` on a thread of its own (`trellis-otlp`, with its own current-thread runtime); the
/// current runtime needs its timers (`enable_all`), as the pipeline pauses between bursts. The
/// thread keeps the process's priority: a lowered thread, starved, made the flush at a
/// command's exit slow (docs/benchmarks.md, "Telemetry").
pub fn spawn<E, S>(events: broadcast::Receiver<Arc<E>>, sink: S, options: LiveOptions) -> Pipeline
where
    E: Deref<Target = ServiceEvent> + Send + Sync + 'static,
    S: SpanSink,
{
    let stats = Arc::new(Stats::default());
    let (stop, stopped) = watch::channel(false);
    let (done_tx, done) = oneshot::channel();
    let thread_stats = stats.clone();
    let metrics = Arc::new(Metrics::default());
    let thread_metrics = metrics.clone();
    let caller = tokio::runtime::Handle::try_current().ok();
    let thread_main = move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        match runtime {
            Ok(runtime) => runtime.block_on(run(
                events,
                sink,
                options,
                stopped,
                (thread_stats, thread_metrics),
                caller,
            )),
            Err(e) => tracing::warn!("telemetry: no runtime for the exporter: {e}"),
        }
        let _ = done_tx.send(());
    };
    if let Err(e) = std::thread::Builder::new()
        .name("trellis-otlp".to_owned())
        .spawn(thread_main)
    {
        tracing::warn!("telemetry: the exporter's thread did not start: {e}");
    }
    Pipeline {
        stats,
        metrics,
        stop,
        done,
    }
}

/// The pipeline's two tasks: mapping and batching (on `caller` when given), and sending.
async fn run<E, S>(
    events: broadcast::Receiver<Arc<E>>,
    sink: S,
    options: LiveOptions,
    stopped: watch::Receiver<bool>,
    (stats, metrics): (Arc<Stats>, Arc<Metrics>),
    caller: Option<tokio::runtime::Handle>,
) where
    E: Deref<Target = ServiceEvent> + Send + Sync + 'static,
    S: SpanSink,
{
    let held = Arc::new(AtomicUsize::new(0));
    // Unbounded: `held` bounds what it carries.
    let (tx, rx) = mpsc::unbounded_channel();
    let batcher = Batcher {
        tx,
        batch: Vec::new(),
        since: None,
        held: held.clone(),
        stats: stats.clone(),
        options: options.clone(),
    };
    let mapper = Mapper::new(options.mapping);
    let exporter = tokio::spawn(export_batches(
        rx,
        sink,
        options,
        held,
        (stats, metrics.clone()),
    ));
    match caller {
        Some(caller) => {
            let _ = caller
                .spawn(map_events(events, batcher, stopped, (mapper, metrics)))
                .await;
        }
        None => map_events(events, batcher, stopped, (mapper, metrics)).await,
    }
    let _ = exporter.await;
}

impl Pipeline {
    /// The pipeline's counters.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// The metrics it exports (kept from the events; more can be counted into them, e.g.
    /// [`Metrics::worker_event`]).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Maps the events already broadcast, exports what is queued and stops, within
    /// `deadline` (a dead collector costs at most that). Spans still open — a run paused
    /// for input — are not exported: the process that resumes the run ends them.
    pub async fn shutdown(self, deadline: Duration) -> Arc<Stats> {
        let Pipeline {
            stats, stop, done, ..
        } = self;
        let _ = stop.send(true);
        let _ = tokio::time::timeout(deadline, done).await;
        stats
    }
}

/// Finished spans waiting for their batch to fill or to linger long enough.
struct Batcher {
    tx: mpsc::UnboundedSender<Vec<Span>>,
    batch: Vec<Span>,
    /// When the oldest span of `batch` came.
    since: Option<Instant>,
    /// Spans batched or queued, not yet being sent.
    held: Arc<AtomicUsize>,
    stats: Arc<Stats>,
    options: LiveOptions,
}

impl Batcher {
    fn take(&mut self, mapper: &mut Mapper) {
        for span in mapper.take_finished() {
            if self.held.load(Ordering::Relaxed) >= self.options.queue {
                self.stats.dropped_spans.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.held.fetch_add(1, Ordering::Relaxed);
            self.since.get_or_insert_with(Instant::now);
            self.batch.push(span);
            if self.batch.len() >= self.options.batch {
                self.send();
            }
        }
    }

    /// When the batch must go even if not full.
    fn due(&self) -> Option<Instant> {
        self.since.map(|t| t + self.options.linger)
    }

    fn send(&mut self) {
        self.since = None;
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        if let Err(mpsc::error::SendError(lost)) = self.tx.send(batch) {
            self.held.fetch_sub(lost.len(), Ordering::Relaxed);
            self.stats
                .failed_spans
                .fetch_add(lost.len() as u64, Ordering::Relaxed);
        }
    }
}

async fn map_events<E>(
    mut events: broadcast::Receiver<Arc<E>>,
    mut batcher: Batcher,
    mut stopped: watch::Receiver<bool>,
    (mut mapper, metrics): (Mapper, Arc<Metrics>),
) where
    E: Deref<Target = ServiceEvent> + Send + Sync + 'static,
{
    let pause = batcher.options.pause;
    let far = Duration::from_secs(3600);
    loop {
        let due = batcher.due();
        // Wait for an event (one wake-up), then take every event already broadcast.
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) => {
                    mapper.event(&ev);
                    metrics.observe(&ev);
                    batcher.stats.mapped_events.fetch_add(1, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    batcher.stats.lagged_events.fetch_add(n, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(|| Instant::now() + far)), if due.is_some() => {
                batcher.send();
                continue;
            }
            _ = stopped.changed() => break,
        }
        let drained = loop {
            let drained = drain(&mut events, (&mut mapper, &metrics), &batcher.stats);
            batcher.take(&mut mapper);
            if drained != Drained::Burst {
                break drained;
            }
            // Let the exporter task take the batches filled so far.
            tokio::task::yield_now().await;
        };
        if drained == Drained::Closed {
            break;
        }
        if batcher.due().is_some_and(|d| d <= Instant::now()) {
            batcher.send();
        }
        // Let the next burst gather; the publisher wakes nobody meanwhile.
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = stopped.changed() => break,
        }
    }
    // What was broadcast before the stop.
    while drain(&mut events, (&mut mapper, &metrics), &batcher.stats) == Drained::Burst {
        batcher.take(&mut mapper);
    }
    batcher.take(&mut mapper);
    batcher.send();
}

/// What [`drain`] found.
#[derive(PartialEq)]
enum Drained {
    /// Nothing more is broadcast now.
    Empty,
    /// [`BURST`] events mapped, more may wait.
    Burst,
    /// The broadcast has closed.
    Closed,
}

/// Maps the events already broadcast, [`BURST`] at most.
fn drain<E>(
    events: &mut broadcast::Receiver<Arc<E>>,
    (mapper, metrics): (&mut Mapper, &Metrics),
    stats: &Stats,
) -> Drained
where
    E: Deref<Target = ServiceEvent> + Send + Sync + 'static,
{
    let mut mapped = 0;
    // The metrics' lock is taken once a burst, when the burst has an event.
    let mut observer = None;
    let drained = loop {
        if mapped == BURST {
            break Drained::Burst;
        }
        match events.try_recv() {
            Ok(ev) => {
                mapper.event(&ev);
                observer
                    .get_or_insert_with(|| metrics.observer())
                    .observe(&ev);
                mapped += 1;
            }
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                stats.lagged_events.fetch_add(n, Ordering::Relaxed);
            }
            Err(broadcast::error::TryRecvError::Empty) => break Drained::Empty,
            Err(broadcast::error::TryRecvError::Closed) => break Drained::Closed,
        }
    };
    stats
        .mapped_events
        .fetch_add(mapped as u64, Ordering::Relaxed);
    drained
}

async fn export_batches<S: SpanSink>(
    mut rx: mpsc::UnboundedReceiver<Vec<Span>>,
    mut sink: S,
    options: LiveOptions,
    held: Arc<AtomicUsize>,
    (stats, metrics): (Arc<Stats>, Arc<Metrics>),
) {
    let resource = Resource {
        service_name: options.service_name.clone(),
        ..Resource::default()
    };
    let started = unix_nanos_now();
    let mut tick = tokio::time::interval(options.metrics_interval);
    tick.tick().await;
    loop {
        let batch = tokio::select! {
            batch = rx.recv() => batch,
            _ = tick.tick() => {
                send_metrics(&mut sink, &resource, &metrics, started, &options).await;
                continue;
            }
        };
        let Some(batch) = batch else {
            break;
        };
        let n = batch.len();
        // Sent (or given up) from here on: no longer held.
        held.fetch_sub(n, Ordering::Relaxed);
        let sent = tokio::time::timeout(options.export_timeout, sink.export(&resource, batch));
        match sent.await {
            Ok(Ok(())) => stats.exported_spans.fetch_add(n as u64, Ordering::Relaxed),
            Ok(Err(e)) => {
                tracing::debug!("telemetry: a batch of {n} spans was not exported: {e}");
                stats.failed_spans.fetch_add(n as u64, Ordering::Relaxed)
            }
            Err(_) => stats.failed_spans.fetch_add(n as u64, Ordering::Relaxed),
        };
    }
    send_metrics(&mut sink, &resource, &metrics, started, &options).await;
}

/// Sends the metrics as they are now (a failure is only logged: the next send has them all).
async fn send_metrics<S: SpanSink>(
    sink: &mut S,
    resource: &Resource,
    metrics: &Metrics,
    started: u64,
    options: &LiveOptions,
) {
    let request = crate::otlp::metrics::export_request(
        resource,
        metrics.families(),
        started,
        unix_nanos_now(),
    );
    let sent = tokio::time::timeout(options.export_timeout, sink.export_metrics(request));
    match sent.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("telemetry: metrics not exported: {e}"),
        Err(_) => tracing::debug!("telemetry: metrics export timed out"),
    }
}

fn unix_nanos_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
