//! The web backend's rate limit: `governor`'s GCRA limiter (a maintained crate, no
//! background task) over the injectable [`Clock`].

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::Clock as _;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use crate::clock::{Clock, GovernorClock};
use crate::error::{Error, Result};

type Limiter = RateLimiter<NotKeyed, InMemoryState, GovernorClock, NoOpMiddleware<Duration>>;

/// At most `per_minute` queries in any minute, all allowed at once (a burst of
/// `per_minute`), then one every `60 s / per_minute`.
#[derive(Debug)]
pub(crate) struct Limit {
    per_minute: u32,
    max_wait: Duration,
    clock: GovernorClock,
    limiter: Option<Limiter>,
}

impl Limit {
    /// A limit of `per_minute` (0: none); a query waits at most `max_wait` for its turn.
    pub(crate) fn new(per_minute: u32, max_wait: Duration, clock: Arc<dyn Clock>) -> Self {
        let clock = GovernorClock(clock);
        let limiter = NonZeroU32::new(per_minute)
            .map(|n| Limiter::direct_with_clock(Quota::per_minute(n), clock.clone()));
        Limit {
            per_minute,
            max_wait,
            clock,
            limiter,
        }
    }

    /// Takes one query's turn now, or says how long until the next one.
    fn take(&self) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter
            .check()
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Waits for a turn (at most `max_wait`), or refuses with the time to wait.
    pub(crate) async fn acquire(&self, cancel: &tokio_util::sync::CancellationToken) -> Result<()> {
        let started = self.clock.now();
        loop {
            let wait = match self.take() {
                Ok(()) => return Ok(()),
                Err(wait) => wait,
            };
            let waited = self.clock.now().saturating_sub(started);
            if waited + wait > self.max_wait {
                return Err(Error::RateLimited {
                    per_minute: self.per_minute,
                    wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1),
                });
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = cancel.cancelled() => return Err(Error::Cancelled),
            }
        }
    }
}
