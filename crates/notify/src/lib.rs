//! Notifications for Trellis: when a run needs input, fails or finishes, the people who
//! care are told — a desktop notification over the freedesktop session bus (`desktop`),
//! signed JSON POSTs to webhooks with retries (`webhook`) — as configured in `[notify]`
//! ([`config`]). A `Notifier` reads a service's live broadcast; it never holds a run up,
//! and a channel's problem is reported once and costs only its own notifications.
//! ACP clients' `_trellis/notification` come from the same [`Detector`] (the web UI applies
//! its rule to the workspace stream). Without the `channels` feature (default on) only the
//! section and the detector are built. See docs/conventions.md, "Notifications".

#[cfg(feature = "channels")]
mod channel;
pub mod config;
#[cfg(feature = "channels")]
pub mod desktop;
mod detect;
#[cfg(feature = "channels")]
mod error;
#[cfg(feature = "channels")]
mod notifier;
#[cfg(feature = "channels")]
pub mod webhook;

#[cfg(feature = "channels")]
pub use channel::{Deliver, Outlet, Stats};
pub use config::NotifyConfig;
pub use detect::{Detector, run_url};
#[cfg(feature = "channels")]
pub use error::{Error, Result};
#[cfg(feature = "channels")]
pub use notifier::{Notifier, outlets};
pub use trellis_protocol::{Notification, NotificationKind};

/// Where a channel's problems are told (stderr in the CLI): once per channel, with the
/// setting to fix.
pub type Reporter = std::sync::Arc<dyn Fn(&str) + Send + Sync>;
