//! The live exporter: a service's broadcast of committed events mapped to spans as they
//! happen (the same [`Mapper`] as `trellis runs trace`) and sent to an SDK span exporter
//! (OTLP over HTTP or gRPC, [`crate::otlp::exporter`]).
//!
//! Nothing here is on a run's path. The pipeline reads the broadcast, which never waits for
//! a slow reader (a reader that falls behind loses the oldest events; they are counted in
//! [`Stats::lagged_events`]); finished spans go into a bounded queue that one task empties
//! in batches; while the collector is slow or down the queue fills, and spans that do not
//! fit are dropped and counted ([`Stats::dropped_spans`]), as are the spans of a batch the
//! collector refused or that timed out ([`Stats::failed_spans`]).

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use trellis_protocol::ServiceEvent;

use crate::mapper::{Mapper, Options};
use crate::sdk::{scope, span_data};

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
    /// `service.name`.
    pub service_name: String,
}

impl Default for LiveOptions {
    fn default() -> Self {
        Self {
            mapping: Options::default(),
            queue: crate::config::DEFAULT_QUEUE,
            batch: 512,
            linger: Duration::from_millis(500),
            export_timeout: Duration::from_secs(5),
            service_name: "trellis".to_owned(),
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
    stop: watch::Sender<bool>,
    mapper: JoinHandle<()>,
    exporter: JoinHandle<()>,
}

/// Starts mapping `events` (a service's live broadcast) to spans and exporting them with
/// `exporter`. Call from inside a tokio runtime.
pub fn spawn<E, X>(
    events: broadcast::Receiver<Arc<E>>,
    exporter: X,
    options: LiveOptions,
) -> Pipeline
where
    E: Deref<Target = ServiceEvent> + Send + Sync + 'static,
    X: SpanExporter + 'static,
{
    let stats = Arc::new(Stats::default());
    let (stop, stopped) = watch::channel(false);
    let (tx, rx) = mpsc::channel(options.queue.max(1));
    let mapper = tokio::spawn(map_events(
        events,
        tx,
        stopped,
        Mapper::new(options.mapping),
        stats.clone(),
    ));
    let exporter = tokio::spawn(export_spans(rx, exporter, options, stats.clone()));
    Pipeline {
        stats,
        stop,
        mapper,
        exporter,
    }
}

impl Pipeline {
    /// The pipeline's counters.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Maps the events already broadcast, exports what is queued and stops, within
    /// `deadline` (a dead collector costs at most that). Spans still open — a run paused
    /// for input — are not exported: the process that resumes the run ends them.
    pub async fn shutdown(self, deadline: Duration) -> Arc<Stats> {
        let Pipeline {
            stats,
            stop,
            mapper,
            exporter,
        } = self;
        let _ = stop.send(true);
        let both = async {
            let _ = mapper.await;
            let _ = exporter.await;
        };
        let _ = tokio::time::timeout(deadline, both).await;
        stats
    }
}

async fn map_events<E>(
    mut events: broadcast::Receiver<Arc<E>>,
    tx: mpsc::Sender<SpanData>,
    mut stopped: watch::Receiver<bool>,
    mut mapper: Mapper,
    stats: Arc<Stats>,
) where
    E: Deref<Target = ServiceEvent> + Send + Sync + 'static,
{
    let scope = scope();
    let feed = |ev: &ServiceEvent, mapper: &mut Mapper| {
        mapper.event(ev);
        for span in mapper.take_finished() {
            if tx.try_send(span_data(span, &scope)).is_err() {
                stats.dropped_spans.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) => {
                    let ev: &ServiceEvent = &ev;
                    feed(ev, &mut mapper);
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    stats.lagged_events.fetch_add(n, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = stopped.changed() => break,
        }
    }
    // What was broadcast before the stop.
    while let Ok(ev) = events.try_recv() {
        let ev: &ServiceEvent = &ev;
        feed(ev, &mut mapper);
    }
}

async fn export_spans<X: SpanExporter>(
    mut rx: mpsc::Receiver<SpanData>,
    mut exporter: X,
    options: LiveOptions,
    stats: Arc<Stats>,
) {
    exporter.set_resource(
        &Resource::builder_empty()
            .with_service_name(options.service_name.clone())
            .with_schema_url(
                [opentelemetry::KeyValue::new(
                    crate::semconv::SERVICE_VERSION,
                    env!("CARGO_PKG_VERSION"),
                )],
                crate::semconv::SCHEMA_URL,
            )
            .build(),
    );
    let mut batch = Vec::with_capacity(options.batch);
    loop {
        // Wait for a first span, then for the batch to fill or the linger to pass.
        let Some(first) = rx.recv().await else {
            break;
        };
        batch.push(first);
        let until = tokio::time::Instant::now() + options.linger;
        while batch.len() < options.batch {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(span)) => batch.push(span),
                Ok(None) | Err(_) => break,
            }
        }
        send(&exporter, &mut batch, options.export_timeout, &stats).await;
    }
    let _ = exporter.shutdown();
}

async fn send<X: SpanExporter>(
    exporter: &X,
    batch: &mut Vec<SpanData>,
    timeout: Duration,
    stats: &Stats,
) {
    let n = batch.len() as u64;
    let spans = std::mem::take(batch);
    match tokio::time::timeout(timeout, exporter.export(spans)).await {
        Ok(Ok(())) => stats.exported_spans.fetch_add(n, Ordering::Relaxed),
        Ok(Err(e)) => {
            tracing::debug!("telemetry: a batch of {n} spans was not exported: {e}");
            stats.failed_spans.fetch_add(n, Ordering::Relaxed)
        }
        Err(_) => stats.failed_spans.fetch_add(n, Ordering::Relaxed),
    };
}
