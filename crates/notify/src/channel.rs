//! A channel's outlet: a bounded queue in front of one task that delivers its notifications
//! in order. The dispatcher only ever `try_send`s into it, so a slow or dead receiver costs a
//! full queue (new notifications dropped, reported once), never a wait.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use trellis_protocol::{Notification, NotificationKind};

use crate::Reporter;
use crate::config::Filter;
use crate::error::Error;

/// Something that delivers notifications (a webhook, the desktop).
pub trait Deliver: Send + 'static {
    /// Delivers `notification`, retrying as the channel sees fit.
    fn deliver(
        &mut self,
        notification: &Notification,
    ) -> impl Future<Output = Result<(), Error>> + Send;
}

/// What an outlet did so far.
#[derive(Debug, Default)]
pub struct Stats {
    /// Notifications delivered.
    pub delivered: AtomicU64,
    /// Notifications that could not be delivered.
    pub failed: AtomicU64,
    /// Notifications dropped on a full queue.
    pub dropped: AtomicU64,
}

/// One channel as the dispatcher sees it.
pub struct Outlet {
    /// How problems name it (`notify.webhooks[0] (https://hooks.example)`).
    name: String,
    filter: Filter,
    tx: mpsc::Sender<Arc<Notification>>,
    task: JoinHandle<()>,
    stats: Arc<Stats>,
    reported: Arc<AtomicBool>,
    report: Reporter,
}

impl Outlet {
    /// Starts delivering through `channel`; `queue` notifications wait at most. Call inside a
    /// tokio runtime.
    pub fn spawn(
        name: String,
        filter: Filter,
        queue: usize,
        mut channel: impl Deliver,
        report: Reporter,
    ) -> Self {
        let (tx, mut rx) = mpsc::channel::<Arc<Notification>>(queue.max(1));
        let stats = Arc::new(Stats::default());
        let reported = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (stats, reported, report, name) = (
                stats.clone(),
                reported.clone(),
                report.clone(),
                name.clone(),
            );
            async move {
                while let Some(notification) = rx.recv().await {
                    match channel.deliver(&notification).await {
                        Ok(()) => stats.delivered.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            once(&reported, &report, || {
                                format!(
                                    "notify: {name}: {e}; the run goes on, later problems of \
                                     this channel are not shown"
                                )
                            });
                            stats.failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            }
        });
        Self {
            name,
            filter,
            tx,
            task,
            stats,
            reported,
            report,
        }
    }

    /// Whether the channel wants `kind`.
    pub fn wants(&self, kind: NotificationKind) -> bool {
        self.filter.allows(kind)
    }

    /// Queues `notification`; drops it when the queue is full.
    pub fn offer(&self, notification: Arc<Notification>) {
        if self.tx.try_send(notification).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            once(&self.reported, &self.report, || {
                format!(
                    "notify: {}: too slow, notifications dropped (raise its `queue`, or fix \
                     the receiver); the run goes on",
                    self.name
                )
            });
        }
    }

    /// The outlet's counters.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Closes the queue and waits for what it holds to be delivered (bound the wait with a
    /// timeout: a channel retrying a dead receiver takes its whole backoff).
    pub async fn finish(self) {
        drop(self.tx);
        let _ = self.task.await;
    }
}

/// Reports `message()` through `report` unless this outlet already reported a problem.
fn once(reported: &AtomicBool, report: &Reporter, message: impl FnOnce() -> String) {
    if !reported.swap(true, Ordering::Relaxed) {
        report(&message());
    }
}
