//! The dispatcher: reads a service's live broadcast, turns its events into notifications
//! ([`Detector`]) and offers each to the channels that want it. Nothing here is on a run's
//! path: the broadcast never waits for a slow reader, and channels only get a `try_send`.

use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use trellis_protocol::{Notification, ServiceEvent};

use crate::Reporter;
use crate::channel::Outlet;
use crate::config::NotifyConfig;
use crate::desktop::{BUS_ENV, Desktop};
use crate::detect::Detector;
use crate::webhook::Webhook;

/// The channels `config` configures, with the environment looked up through `env` (the
/// session bus's address, webhook secrets). A channel that cannot work is reported through
/// `report` and left out. Call inside a tokio runtime.
pub fn outlets(
    config: &NotifyConfig,
    env: &dyn Fn(&str) -> Option<String>,
    report: &Reporter,
) -> Vec<Outlet> {
    let mut outlets = Vec::new();
    if config.desktop.enabled {
        match env(BUS_ENV).filter(|a| !a.trim().is_empty()) {
            Some(address) => outlets.push(Outlet::spawn(
                "notify.desktop".to_owned(),
                config.desktop_filter(),
                crate::config::DEFAULT_QUEUE,
                Desktop::new(address),
                report.clone(),
            )),
            None => report(&format!(
                "notify: no session bus ({BUS_ENV} is unset): desktop notifications are \
                 skipped (set `[notify.desktop] enabled = false` to silence this)"
            )),
        }
    }
    for (index, hook) in config.webhooks.iter().enumerate() {
        match Webhook::new(hook, index, env) {
            Ok(webhook) => outlets.push(Outlet::spawn(
                Webhook::name(index, hook),
                config.webhook_filter(hook),
                webhook.delivery().queue,
                webhook,
                report.clone(),
            )),
            Err(e) => report(&format!("notify: {e}")),
        }
    }
    outlets
}

/// A running dispatcher; [`Notifier::shutdown`] delivers what is queued.
pub struct Notifier {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<Outlet>>,
    base_url: Arc<Mutex<Option<String>>>,
    sent: broadcast::Sender<Arc<Notification>>,
}

impl Notifier {
    /// Starts notifying `outlets` of what `events` (a service's live broadcast) tell, with
    /// links to runs under `base_url`. Call inside a tokio runtime.
    pub fn spawn<E>(
        events: broadcast::Receiver<Arc<E>>,
        outlets: Vec<Outlet>,
        base_url: Option<String>,
    ) -> Self
    where
        E: Deref<Target = ServiceEvent> + Send + Sync + 'static,
    {
        let (stop, stopped) = watch::channel(false);
        let base_url = Arc::new(Mutex::new(base_url));
        let (sent, _) = broadcast::channel(256);
        let task = tokio::spawn(dispatch(
            events,
            outlets,
            stopped,
            base_url.clone(),
            sent.clone(),
        ));
        Self {
            stop,
            task,
            base_url,
            sent,
        }
    }

    /// Links notifications from now on to runs under `base_url` (a server's address, known
    /// once it listens); a configured `[notify] base_url` should win over it.
    pub fn set_base_url(&self, base_url: String) {
        *self.base_url.lock().unwrap_or_else(PoisonError::into_inner) = Some(base_url);
    }

    /// Every notification from now on, as it is offered to the channels.
    pub fn notifications(&self) -> broadcast::Receiver<Arc<Notification>> {
        self.sent.subscribe()
    }

    /// Notifies what was broadcast before the call, delivers what the channels hold and
    /// stops, within `deadline` (a dead receiver costs at most that).
    pub async fn shutdown(self, deadline: Duration) {
        let _ = self.stop.send(true);
        let finish = async {
            if let Ok(outlets) = self.task.await {
                for outlet in outlets {
                    outlet.finish().await;
                }
            }
        };
        let _ = tokio::time::timeout(deadline, finish).await;
    }
}

async fn dispatch<E>(
    mut events: broadcast::Receiver<Arc<E>>,
    outlets: Vec<Outlet>,
    mut stopped: watch::Receiver<bool>,
    base_url: Arc<Mutex<Option<String>>>,
    sent: broadcast::Sender<Arc<Notification>>,
) -> Vec<Outlet>
where
    E: Deref<Target = ServiceEvent> + Send + Sync + 'static,
{
    let mut detector = Detector::default();
    let mut feed = |event: &ServiceEvent| {
        let url = base_url
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        detector.set_base_url(url);
        let Some(notification) = detector.event(event) else {
            return;
        };
        let notification = Arc::new(notification);
        for outlet in outlets.iter().filter(|o| o.wants(notification.event)) {
            outlet.offer(notification.clone());
        }
        let _ = sent.send(notification);
    };
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) => feed(&event),
                // Missed events are missed notifications; the run is not affected.
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!("notify: {n} events missed");
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = stopped.changed() => {
                while let Ok(event) = events.try_recv() {
                    feed(&event);
                }
                break;
            }
        }
    }
    outlets
}
