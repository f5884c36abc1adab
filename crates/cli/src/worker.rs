//! `trellis worker`: executes the runs of a workspace whose records are on a PostgreSQL
//! server (`[store] url`), beside other workers and `trellis serve --workers` servers.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use tokio_util::sync::CancellationToken;
use trellis_core::service::{ServiceOptions, WorkerOptions};
use trellis_store::Store;

/// `trellis worker` options.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The worker's name, recorded as the owner of its leases; unique among the workers
    /// (default: host-pid).
    #[arg(long)]
    pub name: Option<String>,
    /// At most this many runs execute here at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub runs: u16,
    /// Lease length, in seconds: a worker that dies (or loses the database) for this long
    /// has its runs taken over by another worker.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub lease_secs: f64,
    /// How long a stop (SIGINT or SIGTERM) waits for the runs executing here before it
    /// stops them where they are, for other workers to continue (a second signal does
    /// that at once).
    #[arg(long, default_value_t = 600.0, value_name = "SECS")]
    pub drain_secs: f64,
    /// How often to look for runnable runs, in milliseconds.
    #[arg(long, default_value_t = 250, value_name = "MS")]
    pub poll_ms: u64,
}

fn secs(flag: &str, v: f64, min: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v >= min) {
        bail!("--{flag} {v}: give a number of seconds of at least {min}");
    }
    Ok(Duration::from_secs_f64(v))
}

/// Runs the worker until SIGINT or SIGTERM (then drains).
pub async fn work(
    args: &WorkerArgs,
    repo: &Path,
    overrides: &[String],
    store: Arc<Store>,
) -> anyhow::Result<ExitCode> {
    let defaults = WorkerOptions::default();
    let options = WorkerOptions {
        name: args.name.clone().unwrap_or(defaults.name),
        runs: usize::from(args.runs),
        lease: secs("lease-secs", args.lease_secs, 1.0)?,
        poll: Duration::from_millis(args.poll_ms.max(1)),
        drain: secs("drain-secs", args.drain_secs, 0.0)?,
    };
    let location = store.location();
    let service = crate::workspace::open_service_with(
        repo,
        overrides,
        &[],
        store,
        ServiceOptions::default(),
    )?;
    let name = options.name.clone();
    let label = name.clone();
    crate::display::announce(&[format!(
        "worker {name}: executing the runs of {} from {location} (at most {} at once, lease {:?})",
        repo.display(),
        options.runs,
        options.lease
    )]);
    let stop = CancellationToken::new();
    let now = CancellationToken::new();
    let signals = {
        let (stop, now) = (stop.clone(), now.clone());
        tokio::spawn(async move {
            crate::serve::shutdown_signal().await;
            stop.cancel();
            crate::serve::shutdown_signal().await;
            now.cancel();
        })
    };
    let metrics = crate::telemetry::metrics();
    let report = move |e: trellis_core::service::WorkerEvent| {
        if let trellis_core::service::WorkerEvent::Queue { runnable } = e {
            // A sample for the metrics, every poll: not a line to show.
            if let Some(metrics) = &metrics {
                metrics.worker_queue(runnable);
            }
            return;
        }
        if let (Some(metrics), Some(event)) = (&metrics, metric_name(&e)) {
            metrics.worker_event(event);
        }
        crate::display::announce(&[format!("worker {name}: {e}")]);
    };
    let worked = service.work(options, stop, now, &report).await;
    signals.abort();
    service.shutdown().await;
    worked?;
    crate::display::announce(&[format!("worker {label}: stopped")]);
    Ok(ExitCode::SUCCESS)
}

/// The `event` label a worker event is counted under in the exported metrics
/// (`trellis.worker.events`; docs/observability.md); `None` for a drain's progress and the
/// queue's samples (`trellis.worker.queue`).
fn metric_name(e: &trellis_core::service::WorkerEvent) -> Option<&'static str> {
    use trellis_core::service::WorkerEvent;
    match e {
        WorkerEvent::Resumed { .. } => Some("resumed"),
        WorkerEvent::TookOver { .. } => Some("took_over"),
        WorkerEvent::Parked { .. } => Some("parked"),
        WorkerEvent::HandedBack { .. } => Some("handed_back"),
        WorkerEvent::LeaseLost { .. } => Some("lease_lost"),
        WorkerEvent::Error { .. } => Some("error"),
        WorkerEvent::Draining { .. }
        | WorkerEvent::DrainTimedOut { .. }
        | WorkerEvent::Queue { .. } => None,
    }
}
