//! The `[notify]` section: which channels are told about which events.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trellis_protocol::NotificationKind;

/// The section's name in the configuration.
pub const SECTION: &str = "notify";

/// Notifications one webhook holds while its receiver is slow or down, by default.
pub const DEFAULT_QUEUE: usize = 64;
/// Attempts per notification and webhook, by default (the first one included).
pub const DEFAULT_ATTEMPTS: u32 = 5;
/// The wait before the first retry, by default; it doubles with every retry.
pub const DEFAULT_BACKOFF_MS: u64 = 500;
/// How long one POST may take, by default (connect included).
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// The `[notify]` section. Nothing is notified unless a channel is configured.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NotifyConfig {
    /// The events channels are told about when they do not list their own (default: all
    /// three, `input`, `failed`, `finished`).
    pub events: Option<Vec<NotificationKind>>,
    /// The address the web UI is reached at (`https://trellis.example:8420`), for the link to
    /// a run in notifications; `trellis serve` uses its own address when this is unset.
    pub base_url: Option<String>,
    /// Desktop notifications over the freedesktop session bus.
    pub desktop: DesktopConfig,
    /// Webhooks (`[[notify.webhooks]]`), each told on its own.
    pub webhooks: Vec<WebhookConfig>,
}

/// `[notify.desktop]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DesktopConfig {
    /// Show desktop notifications (off by default). Needs a session bus
    /// (`DBUS_SESSION_BUS_ADDRESS`); without one they are skipped with one line on stderr.
    pub enabled: bool,
    /// The events shown (default: `[notify] events`).
    pub events: Option<Vec<NotificationKind>>,
}

/// One `[[notify.webhooks]]` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookConfig {
    /// Where the JSON is POSTed (`http://` or `https://`).
    pub url: String,
    /// The events sent (default: `[notify] events`).
    pub events: Option<Vec<NotificationKind>>,
    /// The environment variable holding the secret the body is signed with
    /// (`X-Trellis-Signature-256: sha256=<hex HMAC-SHA256 of the body>`); unset: unsigned.
    /// The secret itself never goes in a configuration file.
    pub secret_env: Option<String>,
    /// Attempts per notification, the first included (default 5).
    pub attempts: Option<u32>,
    /// The wait before the first retry in milliseconds (default 500), doubled each retry.
    pub backoff_ms: Option<u64>,
    /// How long one POST may take in milliseconds (default 10000).
    pub timeout_ms: Option<u64>,
    /// Notifications held while the receiver is slow or down (default 64); beyond that new
    /// ones are dropped and the drop is reported once.
    pub queue: Option<usize>,
}

/// A webhook's delivery settings, defaults applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Attempts per notification (at least 1).
    pub attempts: u32,
    /// The first retry's wait.
    pub backoff: Duration,
    /// One POST's limit.
    pub timeout: Duration,
    /// The queue's bound (at least 1).
    pub queue: usize,
}

impl WebhookConfig {
    /// The delivery settings with the defaults for what is unset.
    pub fn delivery(&self) -> Delivery {
        Delivery {
            attempts: self.attempts.unwrap_or(DEFAULT_ATTEMPTS).max(1),
            backoff: Duration::from_millis(self.backoff_ms.unwrap_or(DEFAULT_BACKOFF_MS)),
            timeout: Duration::from_millis(self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).max(1)),
            queue: self.queue.unwrap_or(DEFAULT_QUEUE).max(1),
        }
    }
}

/// Which events a channel is told about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    bits: u8,
}

impl Filter {
    /// The channel's own list, else the section's, else every event.
    pub fn new(own: Option<&[NotificationKind]>, section: Option<&[NotificationKind]>) -> Self {
        let list = own.or(section).unwrap_or(&NotificationKind::ALL);
        Self {
            bits: list.iter().fold(0, |bits, kind| bits | Self::bit(*kind)),
        }
    }

    /// Whether `kind` passes.
    pub fn allows(self, kind: NotificationKind) -> bool {
        self.bits & Self::bit(kind) != 0
    }

    fn bit(kind: NotificationKind) -> u8 {
        match kind {
            NotificationKind::Input => 1,
            NotificationKind::Failed => 2,
            NotificationKind::Finished => 4,
        }
    }
}

impl NotifyConfig {
    /// Whether any channel is configured.
    pub fn is_active(&self) -> bool {
        self.desktop.enabled || !self.webhooks.is_empty()
    }

    /// The desktop channel's filter.
    pub fn desktop_filter(&self) -> Filter {
        Filter::new(self.desktop.events.as_deref(), self.events.as_deref())
    }

    /// Webhook `hook`'s filter.
    pub fn webhook_filter(&self, hook: &WebhookConfig) -> Filter {
        Filter::new(hook.events.as_deref(), self.events.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channels_own_list_wins_over_the_sections_and_nothing_listed_means_everything() {
        let cfg: NotifyConfig = serde_json::from_value(serde_json::json!({
            "events": ["failed"],
            "desktop": {"enabled": true, "events": ["input", "finished"]},
            "webhooks": [{"url": "http://127.0.0.1:1/"}],
        }))
        .unwrap();
        let desktop = cfg.desktop_filter();
        assert!(
            desktop.allows(NotificationKind::Input) && desktop.allows(NotificationKind::Finished)
        );
        assert!(!desktop.allows(NotificationKind::Failed));
        let hook = cfg.webhook_filter(&cfg.webhooks[0]);
        assert!(hook.allows(NotificationKind::Failed));
        assert!(!hook.allows(NotificationKind::Input) && !hook.allows(NotificationKind::Finished));
        let all = Filter::new(None, None);
        assert!(NotificationKind::ALL.iter().all(|k| all.allows(*k)));
        assert!(!NotifyConfig::default().is_active());
        let unknown = serde_json::from_value::<NotifyConfig>(serde_json::json!({"webhook": []}));
        assert!(unknown.is_err());
    }
}
