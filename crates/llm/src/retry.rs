//! Retries with exponential backoff and full jitter, honouring `Retry-After`.
//!
//! A call is retried only while nothing has reached the consumer: once a delta has been
//! forwarded, repeating the call would duplicate output, so a later failure (a stream cut
//! mid-way) is passed on and the caller decides (it is [`Error::is_retryable`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::provider::{ChatStream, ModelProvider, ProviderInfo, Received, spawn_stream};
use crate::tokens::TokenCount;
use crate::types::ChatRequest;
use crate::{Error, Result};

/// How to retry.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay cap for attempt 1; doubles per attempt.
    pub base_delay: Duration,
    /// Upper bound of any delay, including a server's `Retry-After`.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The delay before retry number `attempt` (1-based) after `error`: the server's
    /// `Retry-After` when given, otherwise a uniformly random delay in
    /// `[0, base · 2^(attempt-1)]` ("full jitter"), both capped at `max_delay`.
    pub fn delay(&self, attempt: u32, error: &Error) -> Duration {
        if let Some(d) = error.retry_after() {
            return d.min(self.max_delay);
        }
        let exp = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let cap = exp.min(self.max_delay);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

/// Wraps a provider with a [`RetryPolicy`].
pub struct Retrying {
    inner: Arc<dyn ModelProvider>,
    policy: RetryPolicy,
}

impl Retrying {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn ModelProvider>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

impl ModelProvider for Retrying {
    fn info(&self) -> &ProviderInfo {
        self.inner.info()
    }

    fn prepare(&self) -> futures::future::BoxFuture<'_, Result<()>> {
        self.inner.prepare()
    }

    fn context_window(
        &self,
    ) -> futures::future::BoxFuture<'_, Option<crate::window::ContextWindow>> {
        self.inner.context_window()
    }

    fn count_tokens(&self, request: &ChatRequest) -> Result<TokenCount> {
        self.inner.count_tokens(request)
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let inner = Arc::clone(&self.inner);
        let policy = self.policy;
        spawn_stream(&self.inner.info().profile, move |tx| async move {
            let mut attempt = 0u32;
            loop {
                let mut stream = inner.stream(request.clone(), cancel.clone());
                let mut received = Received::default();
                let failure = loop {
                    match stream.next().await {
                        None if received.finished() => return Ok(()),
                        // Neither a finish nor an error: a cut stream, retried like one.
                        None => {
                            break Error::StreamCut {
                                provider: inner.info().profile.clone(),
                                received: received.to_string(),
                            };
                        }
                        Some(Ok(event)) => {
                            received.note(&event);
                            if tx.send(Ok(event)).await.is_err() {
                                return Ok(());
                            }
                        }
                        Some(Err(e)) => break e,
                    }
                };
                let forwarded = received.events() > 0;
                if forwarded || !failure.is_retryable() || attempt >= policy.max_retries {
                    return Err(failure);
                }
                attempt += 1;
                let delay = policy.delay(attempt, &failure);
                tracing::warn!(
                    profile = %inner.info().profile,
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    error = %failure,
                    "model call failed; retrying"
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = cancel.cancelled() => return Err(Error::Cancelled),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_jittered_capped_and_honour_retry_after() {
        let p = RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
        };
        let e = Error::StreamCut {
            provider: "x".into(),
            received: String::new(),
        };
        for attempt in 1..=6 {
            let d = p.delay(attempt, &e);
            let cap = Duration::from_millis(100 * (1 << (attempt - 1))).min(p.max_delay);
            assert!(d <= cap, "attempt {attempt}: {d:?} > {cap:?}");
        }
        let e = Error::Http {
            provider: "x".into(),
            status: 429,
            message: String::new(),
            retry_after: Some(Duration::from_millis(200)),
        };
        assert_eq!(p.delay(1, &e), Duration::from_millis(200));
        let e = Error::Http {
            provider: "x".into(),
            status: 429,
            message: String::new(),
            retry_after: Some(Duration::from_secs(100)),
        };
        assert_eq!(p.delay(1, &e), Duration::from_millis(350));
    }
}
