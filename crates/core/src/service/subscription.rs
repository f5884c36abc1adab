//! A subscriber's view of one stream: the stored events after `since`, then the live ones,
//! with no gap and no duplicate (made by [`Bus::subscribe`](super::Bus::subscribe)).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use trellis_protocol::{ServiceEvent, StreamId};
use trellis_store::Store;

use super::fanout::LiveEvent;

/// One subscriber's view of a stream: the stored events after `since`, then the live ones,
/// with no gap and no duplicate.
///
/// Events committed by other processes (a run executing on a worker, another server's
/// session) are read from the store: at once when the store notifies their commit
/// ([`trellis_store::Backend::watch`], PostgreSQL), and in any case every `poll` — counted
/// from the last read, so events of other streams arriving live never put it off.
pub struct Subscription {
    pub(super) stream: StreamId,
    /// The stream's key, as the store's notifications name it.
    pub(super) key: String,
    pub(super) last: u64,
    pub(super) backlog: VecDeque<Delivered>,
    pub(super) rx: broadcast::Receiver<Arc<LiveEvent>>,
    pub(super) watch: Option<broadcast::Receiver<Arc<str>>>,
    pub(super) store: Arc<Store>,
    pub(super) poll: Option<Duration>,
    /// When the store is read next if nothing else made it.
    pub(super) next_poll: Option<tokio::time::Instant>,
    pub(super) primed: bool,
}

/// What woke a waiting subscription.
enum Woken {
    Live(Result<Arc<LiveEvent>, broadcast::error::RecvError>),
    /// The store has news for this stream (or may have).
    Stored,
    /// A notification about another stream.
    Other,
    Polled,
}

/// The next notification of `watch`; never, without one.
async fn notice(
    watch: &mut Option<broadcast::Receiver<Arc<str>>>,
) -> Result<Arc<str>, broadcast::error::RecvError> {
    match watch {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

impl Subscription {
    /// The stream.
    pub fn stream(&self) -> &StreamId {
        &self.stream
    }

    /// The seq of the last event returned (or the `since` it started from).
    pub fn last_seq(&self) -> u64 {
        self.last
    }

    fn refill(&mut self) -> trellis_store::Result<()> {
        let events = self.store.stream_events(&self.stream, self.last, None)?;
        self.backlog
            .extend(events.into_iter().map(Delivered::Stored));
        self.next_poll = self.poll.map(|p| tokio::time::Instant::now() + p);
        Ok(())
    }

    /// Whether notification `n` (`<key> <seq>`, or `*`) may tell of events this
    /// subscription has not returned.
    fn news(&self, n: &str) -> bool {
        match trellis_store::Notice::parse(n) {
            Some(trellis_store::Notice::Appended { key, seq }) => {
                key == self.key && seq > self.last
            }
            Some(trellis_store::Notice::Missed) => true,
            _ => false,
        }
    }

    /// Waits for a live event, a notification or the next poll.
    async fn wait(&mut self) -> Woken {
        let poll_at = self.next_poll;
        tokio::select! {
            biased;
            r = self.rx.recv() => Woken::Live(r),
            n = notice(&mut self.watch) => match n {
                Ok(n) if self.news(&n) => Woken::Stored,
                Ok(_) => Woken::Other,
                Err(broadcast::error::RecvError::Lagged(_)) => Woken::Stored,
                Err(broadcast::error::RecvError::Closed) => {
                    self.watch = None;
                    Woken::Other
                }
            },
            () = async {
                match poll_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => Woken::Polled,
        }
    }

    /// The next event; `Ok(None)` when the service shut down.
    pub async fn next(&mut self) -> trellis_store::Result<Option<ServiceEvent>> {
        Ok(self.next_delivered().await?.map(Delivered::into_event))
    }

    /// The next event as delivered, shared with the stream's other subscribers when it
    /// came live (no copy); `Ok(None)` when the service shut down.
    pub async fn next_delivered(&mut self) -> trellis_store::Result<Option<Delivered>> {
        if !self.primed {
            self.primed = true;
            self.refill()?;
        }
        loop {
            if let Some(e) = self.backlog.pop_front() {
                if e.seq <= self.last {
                    continue;
                }
                self.last = e.seq;
                return Ok(Some(e));
            }
            let received = match self.wait().await {
                Woken::Live(r) => Some(r),
                // Committed by another process, or nothing live for a while: someone else
                // may be writing this stream.
                Woken::Stored | Woken::Polled => None,
                Woken::Other => continue,
            };
            match received {
                None => self.refill()?,
                Some(Ok(e)) => {
                    if e.stream != self.stream || e.seq <= self.last {
                        continue;
                    }
                    if e.seq == self.last + 1 {
                        self.last = e.seq;
                        return Ok(Some(Delivered::Live(e)));
                    }
                    // A gap (events committed by another writer): the store has them.
                    self.refill()?;
                    self.backlog.push_back(Delivered::Live(e));
                }
                Some(Err(broadcast::error::RecvError::Lagged(_))) => self.refill()?,
                Some(Err(broadcast::error::RecvError::Closed)) => return Ok(None),
            }
        }
    }
}

/// An event a [`Subscription`] delivers: shared with the other subscribers of its stream
/// when it was published live or is still held in memory, else read from the store.
// Stored events are moved straight out of the store's read (boxing them would allocate per
// event to save space in a value that lives one step).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Delivered {
    /// Published by this process.
    Live(Arc<LiveEvent>),
    /// Read from the store.
    Stored(ServiceEvent),
}

impl std::ops::Deref for Delivered {
    type Target = ServiceEvent;

    fn deref(&self) -> &ServiceEvent {
        match self {
            Delivered::Live(e) => e,
            Delivered::Stored(e) => e,
        }
    }
}

impl Delivered {
    /// The event, owned.
    pub fn into_event(self) -> ServiceEvent {
        match self {
            Delivered::Live(e) => e.to_event(),
            Delivered::Stored(e) => e,
        }
    }
}
