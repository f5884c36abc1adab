//! Desktop notifications: `org.freedesktop.Notifications.Notify` on the session bus
//! (the Desktop Notifications Specification), over zbus — no C libdbus.

use std::collections::HashMap;

use trellis_protocol::{Notification, NotificationKind};
use zbus::zvariant::Value;

use crate::channel::Deliver;
use crate::error::Result;

/// The bus name, object path and interface of the notification server.
pub const SERVICE: &str = "org.freedesktop.Notifications";
/// The object path of the notification server.
pub const PATH: &str = "/org/freedesktop/Notifications";
/// The variable naming the session bus.
pub const BUS_ENV: &str = "DBUS_SESSION_BUS_ADDRESS";

/// The desktop channel: a session bus connection, opened at the first notification (and
/// again after a failure).
pub struct Desktop {
    address: String,
    connection: Option<zbus::Connection>,
}

impl Desktop {
    /// Notifications through the session bus at `address` (the value of
    /// `DBUS_SESSION_BUS_ADDRESS`).
    pub fn new(address: String) -> Self {
        Self {
            address,
            connection: None,
        }
    }

    async fn connection(&mut self) -> Result<zbus::Connection> {
        if let Some(c) = &self.connection {
            return Ok(c.clone());
        }
        let c = zbus::connection::Builder::address(self.address.as_str())?
            .build()
            .await?;
        self.connection = Some(c.clone());
        Ok(c)
    }
}

impl Deliver for Desktop {
    async fn deliver(&mut self, notification: &Notification) -> Result<()> {
        let connection = self.connection().await?;
        // Urgency (the specification's hint): critical for a run that waits for someone or
        // failed — most servers keep those until they are dismissed — normal otherwise.
        let urgency: u8 = match notification.event {
            NotificationKind::Input | NotificationKind::Failed => 2,
            NotificationKind::Finished => 1,
        };
        let mut hints: HashMap<&str, Value<'_>> = HashMap::new();
        hints.insert("urgency", Value::U8(urgency));
        let mut body = notification.message.clone();
        if let Some(url) = &notification.url {
            body.push('\n');
            body.push_str(url);
        }
        let actions: Vec<&str> = Vec::new();
        let sent = connection
            .call_method(
                Some(SERVICE),
                PATH,
                Some(SERVICE),
                "Notify",
                &(
                    "Trellis",
                    0u32,
                    "",
                    notification.title(),
                    body,
                    actions,
                    hints,
                    -1i32,
                ),
            )
            .await;
        if sent.is_err() {
            // A bus that went away is reconnected next time.
            self.connection = None;
        }
        sent.map(drop).map_err(Into::into)
    }
}
