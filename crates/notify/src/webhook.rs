//! Webhooks: the [`Notification`] as a JSON POST (docs/conventions.md, "Notifications"),
//! signed with HMAC-SHA256 when a secret is configured, retried with exponential backoff on
//! connection errors, timeouts, 408, 429 and 5xx.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use sha2::Sha256;
use trellis_protocol::Notification;

use crate::channel::Deliver;
use crate::config::{Delivery, WebhookConfig};
use crate::error::{Error, Result};

/// The signature header: `sha256=<hex HMAC-SHA256 of the body with the secret>`.
pub const SIGNATURE_HEADER: &str = "x-trellis-signature-256";
/// The event header (`input`, `failed`, `finished`).
pub const EVENT_HEADER: &str = "x-trellis-event";
/// The delivery header: the notification's identity, the same on every retry.
pub const DELIVERY_HEADER: &str = "x-trellis-delivery";

/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One configured webhook.
pub struct Webhook {
    url: reqwest::Url,
    secret: Option<Vec<u8>>,
    delivery: Delivery,
    client: reqwest::Client,
}

impl Webhook {
    /// Webhook `config` (entry `index` of `[[notify.webhooks]]`) with the secret read from
    /// its variable through `env`. A named variable that is unset is an error: sending
    /// unsigned would make a receiver that checks signatures refuse every notification.
    pub fn new(
        config: &WebhookConfig,
        index: usize,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let setting = |field: &str| format!("notify.webhooks[{index}].{field}");
        let url = reqwest::Url::parse(config.url.trim())
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| Error::Config {
                setting: setting("url"),
                message: "not an http:// or https:// URL; this webhook is not used".to_owned(),
            })?;
        let secret = match &config.secret_env {
            None => None,
            Some(var) => Some(
                env(var)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| Error::Config {
                        setting: setting("secret_env"),
                        message: format!(
                            "the variable {var} is not set; set it, or remove `secret_env` to \
                             send unsigned — this webhook is not used"
                        ),
                    })?
                    .into_bytes(),
            ),
        };
        let delivery = config.delivery();
        let client = trellis_fetch::client(delivery.timeout, None)?;
        Ok(Self {
            url,
            secret,
            delivery,
            client,
        })
    }

    /// How problems name the webhook: its setting and origin (never the path or query, which
    /// often hold a token).
    pub fn name(index: usize, config: &WebhookConfig) -> String {
        let origin = reqwest::Url::parse(config.url.trim())
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| "an invalid URL".to_owned());
        format!("notify.webhooks[{index}] ({origin})")
    }

    /// The delivery settings.
    pub fn delivery(&self) -> Delivery {
        self.delivery
    }

    async fn attempt(&self, notification: &Notification, body: &[u8]) -> Attempt {
        let mut request = self
            .client
            .post(self.url.clone())
            .timeout(self.delivery.timeout)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(EVENT_HEADER, notification.event.as_str())
            .header(DELIVERY_HEADER, notification.id())
            .body(body.to_vec());
        if let Some(secret) = &self.secret {
            request = request.header(SIGNATURE_HEADER, signature(secret, body));
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status();
                if status.is_success() {
                    Attempt::Done
                } else if status.is_server_error()
                    || status == reqwest::StatusCode::TOO_MANY_REQUESTS
                    || status == reqwest::StatusCode::REQUEST_TIMEOUT
                {
                    Attempt::Retry(format!("HTTP {}", status.as_u16()))
                } else {
                    Attempt::Refused(status.as_u16())
                }
            }
            // Without the URL: its path and query often hold a token.
            Err(e) => Attempt::Retry(trellis_fetch::error_chain(&e.without_url())),
        }
    }
}

enum Attempt {
    Done,
    Retry(String),
    Refused(u16),
}

impl Deliver for Webhook {
    async fn deliver(&mut self, notification: &Notification) -> Result<()> {
        let body = serde_json::to_vec(notification).map_err(|e| Error::Undelivered {
            attempts: 0,
            last: e.to_string(),
        })?;
        let mut last = String::new();
        for n in 0..self.delivery.attempts {
            if n > 0 {
                tokio::time::sleep(backoff(self.delivery.backoff, n)).await;
            }
            match self.attempt(notification, &body).await {
                Attempt::Done => return Ok(()),
                Attempt::Refused(status) => return Err(Error::Refused(status)),
                Attempt::Retry(why) => last = why,
            }
        }
        Err(Error::Undelivered {
            attempts: self.delivery.attempts,
            last,
        })
    }
}

/// The wait before retry `n` (from 1): `first`, doubled each retry, at most a minute.
pub fn backoff(first: Duration, n: u32) -> Duration {
    first
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

/// `sha256=<hex>`: the HMAC-SHA256 of `body` keyed with `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).map(|mut mac| {
        mac.update(body);
        mac.finalize().into_bytes()
    });
    let mut out = String::from("sha256=");
    if let Ok(bytes) = mac {
        for b in bytes {
            out.push_str(&format!("{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_a_minute() {
        let first = Duration::from_millis(500);
        let waits: Vec<u64> = (1..=4)
            .map(|n| backoff(first, n).as_millis() as u64)
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000]);
        assert_eq!(backoff(first, 30), MAX_BACKOFF);
    }

    #[test]
    fn the_signature_is_rfc_4231s_hmac_sha256() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
