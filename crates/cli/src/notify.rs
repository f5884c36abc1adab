//! Notifications of the services this process starts (`[notify]`, docs/conventions.md
//! "Notifications"): each service's live broadcast feeds a `trellis_notify::Notifier` when a
//! channel is configured, problems are told once on stderr, and [`flush`] delivers what is
//! queued before the process exits (bounded: a dead webhook costs at most
//! [`FLUSH_DEADLINE`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use trellis_config::Config;
use trellis_core::service::Service;
use trellis_notify::config::SECTION;
use trellis_notify::{Notifier, NotifyConfig, Reporter, outlets};

/// How long the last deliveries may take at exit.
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(3);

/// The notifiers started in this process, and whether their base URL is configured.
static NOTIFIERS: Mutex<Vec<(Notifier, bool)>> = Mutex::new(Vec::new());

/// Starts notifying what `service`'s runs do when the workspace's `config` configures a
/// channel; does nothing otherwise. Call inside the runtime the service runs on.
pub fn start(config: &Config, service: &Service) -> anyhow::Result<()> {
    let config: NotifyConfig = config.section(SECTION)?;
    if !config.is_active() {
        return Ok(());
    }
    let report: Reporter = Arc::new(|line: &str| eprintln!("{line}"));
    let outlets = outlets(&config, &|var| std::env::var(var).ok(), &report);
    if outlets.is_empty() {
        return Ok(());
    }
    let notifier = Notifier::spawn(service.live(), outlets, config.base_url.clone());
    NOTIFIERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((notifier, config.base_url.is_some()));
    Ok(())
}

/// Links notifications to runs in the web UI at `base` (`trellis serve`'s address), where
/// `[notify] base_url` does not say otherwise.
pub fn serving(base: &str) {
    for (notifier, configured) in NOTIFIERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
    {
        if !configured {
            notifier.set_base_url(base.to_owned());
        }
    }
}

/// Delivers what the notifiers hold and stops them.
pub async fn flush() {
    let notifiers = std::mem::take(&mut *NOTIFIERS.lock().unwrap_or_else(PoisonError::into_inner));
    for (notifier, _) in notifiers {
        notifier.shutdown(FLUSH_DEADLINE).await;
    }
}
