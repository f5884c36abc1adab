//! The HTTP client of the endpoints (the workspace's one client, from `trellis-fetch`) and
//! the pieces shared by the wire formats: the request, error classification, and reading a
//! streamed body frame by frame (SSE events, Ollama's JSON lines) into [`StreamEvent`]s.

use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::provider::{EventSender, Received};
use crate::types::StreamEvent;
use crate::{Error, Result};

/// Builds the one HTTP client ([`trellis_fetch::client`]: reqwest on rustls with ring).
pub fn client(
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
) -> Result<reqwest::Client> {
    trellis_fetch::client(connect_timeout, read_timeout).map_err(|e| Error::Config(e.to_string()))
}

/// Converts configured header pairs.
pub(crate) fn header_map(
    provider: &str,
    pairs: impl IntoIterator<Item = (String, String)>,
) -> Result<HeaderMap> {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| Error::Config(format!("{provider}: header name `{k}`: {e}")))?;
        let value = HeaderValue::from_str(&v)
            .map_err(|e| Error::Config(format!("{provider}: header `{k}` value: {e}")))?;
        map.insert(name, value);
    }
    Ok(map)
}

pub(crate) fn transport(provider: &str, e: &reqwest::Error) -> Error {
    Error::Transport {
        provider: provider.to_string(),
        message: trellis_fetch::error_chain(e),
        timeout: e.is_timeout(),
    }
}

/// `Retry-After` (seconds, or an HTTP date) or OpenAI's `retry-after-ms`.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return Some(Duration::from_secs_f64(secs.max(0.0)));
    }
    let when = httpdate_to_unix(v)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(when.saturating_sub(now)))
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to Unix seconds.
fn httpdate_to_unix(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let hms: Vec<u64> = time.split(':').filter_map(|p| p.parse().ok()).collect();
    let [h, m, sec] = hms.as_slice() else {
        return None;
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days)
        .ok()
        .map(|d| d * 86_400 + h * 3600 + m * 60 + sec)
}

/// POSTs `body` and returns the response if its status is a success; otherwise the
/// classified [`Error::Http`] with the body's error message.
pub(crate) async fn post(
    provider: &str,
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &serde_json::Value,
    cancel: &CancellationToken,
) -> Result<reqwest::Response> {
    let bytes = serde_json::to_vec(body).map_err(|e| Error::Protocol {
        provider: provider.to_string(),
        message: format!("cannot encode the request: {e}"),
        overloaded: false,
    })?;
    let send = client
        .post(url)
        .headers(headers)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(bytes)
        .send();
    let response = tokio::select! {
        r = send => r.map_err(|e| transport(provider, &e))?,
        () = cancel.cancelled() => return Err(Error::Cancelled),
    };
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = retry_after(response.headers());
    let text = tokio::select! {
        t = response.text() => t.unwrap_or_default(),
        () = cancel.cancelled() => return Err(Error::Cancelled),
    };
    Err(Error::Http {
        provider: provider.to_string(),
        status: status.as_u16(),
        message: error_message(&text, status.canonical_reason().unwrap_or("error")),
        retry_after,
    })
}

/// The `error.message` of a JSON error body, else the (truncated) body, else `fallback`.
pub(crate) fn error_message(body: &str, fallback: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let msg = v
            .pointer("/error/message")
            .or_else(|| v.pointer("/message"))
            .or_else(|| v.get("error"))
            .and_then(|m| m.as_str());
        if let Some(m) = msg {
            return m.to_string();
        }
    }
    let body = body.trim();
    if body.is_empty() {
        fallback.to_string()
    } else {
        body.chars().take(500).collect()
    }
}

/// An error a server reported inside a stream that had already started (its HTTP status
/// was a success): retryable when it says the server is overloaded, or carries a 429 or 5xx
/// `code`.
pub(crate) fn stream_error(provider: &str, message: String, code: Option<u64>) -> Error {
    let overloaded =
        message.to_lowercase().contains("overload") || code.is_some_and(|c| c == 429 || c >= 500);
    Error::Protocol {
        provider: provider.to_string(),
        message,
        overloaded,
    }
}

/// What a wire-format decoder made of one frame.
#[derive(Default)]
pub(crate) struct Decoded {
    /// Events to forward.
    pub(crate) events: Vec<StreamEvent>,
    /// Whether the response is complete.
    pub(crate) done: bool,
}

/// How a streamed body is cut into frames: SSE events ([`crate::sse::SseDecoder`]),
/// newline-delimited JSON ([`crate::ndjson::LineDecoder`]).
pub(crate) trait Framing: Send {
    /// One frame.
    type Frame;
    /// Adds bytes and returns the frames they complete.
    fn feed(&mut self, bytes: &[u8]) -> Vec<Self::Frame>;
    /// The body ended: a last frame that needed no terminator, if the format has one.
    fn finish(&mut self) -> Vec<Self::Frame> {
        Vec::new()
    }
}

/// A wire format's stream decoder, fed the frames of type `F`.
pub(crate) trait StreamHandler<F> {
    /// Decodes one frame.
    fn event(&mut self, frame: F) -> Result<Decoded>;
    /// The body ended without the end marker: the closing events if the response is
    /// nonetheless complete (lenient servers), `None` for a cut stream.
    fn eof(&mut self) -> Option<Vec<StreamEvent>>;
}

/// How an endpoint expects its API key.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KeyHeader {
    /// `Authorization: Bearer KEY`.
    Bearer,
    /// `NAME: KEY` (a lowercase header name).
    Named(&'static str),
}

/// An endpoint's resolved connection settings.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    pub(crate) profile: String,
    pub(crate) client: reqwest::Client,
    pub(crate) base_url: String,
    pub(crate) api_key_env: Option<String>,
    pub(crate) headers: HeaderMap,
}

impl Endpoint {
    /// `base_url` joined with `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!(
            "{}/{}",
            self.base_url.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    }

    /// POSTs `body` to `path` with the API key (as `key`) and `extra` headers, then forwards
    /// the streamed response, cut into frames by `framing`, through `handler` to `tx`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn stream<F: Framing>(
        &self,
        path: &str,
        key: KeyHeader,
        extra: &[(&'static str, &'static str)],
        body: &serde_json::Value,
        cancel: &CancellationToken,
        tx: &EventSender,
        framing: F,
        handler: &mut (dyn StreamHandler<F::Frame> + Send),
    ) -> Result<()> {
        let mut headers = self.headers_with_key(key)?;
        for (k, v) in extra {
            headers.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let response = post(
            &self.profile,
            &self.client,
            &self.url(path),
            headers,
            body,
            cancel,
        )
        .await?;
        forward(&self.profile, response, cancel, tx, framing, handler).await
    }

    /// The configured headers with the API key (as `key`) when one is configured.
    pub(crate) fn headers_with_key(&self, key: KeyHeader) -> Result<HeaderMap> {
        let mut headers = self.headers.clone();
        if let Some(key_value) = self.api_key()? {
            let (name, text) = match key {
                KeyHeader::Bearer => (
                    reqwest::header::AUTHORIZATION,
                    format!("Bearer {key_value}"),
                ),
                KeyHeader::Named(n) => (HeaderName::from_static(n), key_value),
            };
            let value = HeaderValue::from_str(&text)
                .map_err(|_| Error::Config(format!("{}: invalid API key", self.profile)))?;
            headers.insert(name, value);
        }
        Ok(headers)
    }

    /// The API key from the environment; `None` when no variable is configured.
    pub(crate) fn api_key(&self) -> Result<Option<String>> {
        let Some(var) = &self.api_key_env else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(v) if !v.is_empty() => Ok(Some(v)),
            _ => Err(Error::MissingApiKey {
                provider: self.profile.clone(),
                var: var.clone(),
            }),
        }
    }
}

/// Reads the frames of a response, decodes each with `handler` and forwards the results to
/// `tx` until `handler` reports the end. A body that ends first is [`Error::StreamCut`]
/// (unless [`StreamHandler::eof`] finds the response complete); a consumer that went away
/// ends the call quietly.
pub(crate) async fn forward<F: Framing>(
    provider: &str,
    response: reqwest::Response,
    cancel: &CancellationToken,
    tx: &EventSender,
    mut framing: F,
    handler: &mut (dyn StreamHandler<F::Frame> + Send),
) -> Result<()> {
    let mut body = response.bytes_stream();
    let mut received = Received::default();
    let mut bytes = 0usize;
    loop {
        let chunk = tokio::select! {
            c = body.next() => c,
            () = cancel.cancelled() => return Err(Error::Cancelled),
        };
        let (frames, ended) = match chunk {
            Some(chunk) => {
                let chunk = chunk.map_err(|e| {
                    // A body that breaks off mid-way is a cut stream whatever hyper calls it.
                    if e.is_timeout() {
                        transport(provider, &e)
                    } else {
                        Error::StreamCut {
                            provider: provider.to_string(),
                            received: format!(
                                "{received}; the body broke off after {bytes} bytes: {}",
                                trellis_fetch::error_chain(&e)
                            ),
                        }
                    }
                })?;
                bytes += chunk.len();
                (framing.feed(&chunk), false)
            }
            None => (framing.finish(), true),
        };
        for frame in frames {
            let decoded = handler.event(frame)?;
            for ev in decoded.events {
                received.note(&ev);
                if tx.send(Ok(ev)).await.is_err() {
                    return Ok(());
                }
            }
            if decoded.done {
                return Ok(());
            }
        }
        if ended {
            let Some(events) = handler.eof() else {
                return Err(Error::StreamCut {
                    provider: provider.to_string(),
                    received: format!(
                        "{received}; the body ended after {bytes} bytes without the end marker"
                    ),
                });
            };
            for ev in events {
                if tx.send(Ok(ev)).await.is_err() {
                    break;
                }
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO)); // in the past
        assert_eq!(
            httpdate_to_unix("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error_message(
                r#"{"error":{"message":"slow down","type":"rate_limit"}}"#,
                "x"
            ),
            "slow down"
        );
        assert_eq!(error_message("", "Too Many Requests"), "Too Many Requests");
        assert_eq!(error_message("plain", "x"), "plain");
    }
}
