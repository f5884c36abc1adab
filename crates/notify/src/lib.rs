//! Notifications for Trellis: when a run needs input, fails or finishes, the people who
//! care are told — a desktop notification over the freedesktop session bus ([`desktop`]),
//! signed JSON POSTs to webhooks with retries ([`webhook`]) — as configured in `[notify]`
//! ([`config`]). A [`Notifier`] reads a service's live broadcast; it never holds a run up,
//! and a channel's problem is reported once and costs only its own notifications.
//! The web UI's browser notifications and ACP clients' `_trellis/notification` come from
//! the same [`Detector`]. See docs/conventions.md, "Notifications".

mod channel;
pub mod config;
pub mod desktop;
mod detect;
mod error;
mod notifier;
pub mod webhook;

use std::sync::Arc;

pub use channel::{Deliver, Outlet, Stats};
pub use config::NotifyConfig;
pub use detect::{Detector, run_url};
pub use error::{Error, Result};
pub use notifier::{Notifier, outlets};
pub use trellis_protocol::{Notification, NotificationKind};

/// Where a channel's problems are told (stderr in the CLI): once per channel, with the
/// setting to fix.
pub type Reporter = Arc<dyn Fn(&str) + Send + Sync>;
