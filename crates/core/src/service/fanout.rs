//! Where committed events go: the listeners of everything ([`super::Bus::live`]) and
//! each stream's subscribers through a channel of its own, so a subscriber wakes for its
//! stream's events only (with one workspace-wide channel each of N subscribers woke for,
//! cloned and dropped every event of every stream). Each stream's latest events are also
//! kept, so a subscriber that starts a little behind (a client following a run it just
//! started, from `since` 0) gets them from memory instead of decoding them from the store.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::broadcast;
use trellis_protocol::{ServiceEvent, StreamId};

/// A committed event as the live broadcast carries it: the event (its fields are reachable
/// through `Deref`) and the instant the service started publishing it.
#[derive(Clone, Debug)]
pub struct LiveEvent {
    inner: Arc<ServiceEvent>,
    published: Instant,
    /// The event's frame as the first subscriber encoded it (for the workspace named
    /// first), so the others send the same text without encoding it again.
    frame: std::sync::OnceLock<(String, Arc<str>)>,
}

impl PartialEq for LiveEvent {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner && self.published == other.published
    }
}

impl LiveEvent {
    pub(crate) fn new(inner: impl Into<Arc<ServiceEvent>>, published: Instant) -> Self {
        Self {
            inner: inner.into(),
            published,
            frame: std::sync::OnceLock::new(),
        }
    }

    /// The event's frame for `workspace`: `encode`d once, then shared by every subscriber
    /// (`None` when it does not encode).
    pub fn frame(
        &self,
        workspace: &str,
        encode: impl FnOnce(&ServiceEvent) -> Option<String>,
    ) -> Option<Arc<str>> {
        if let Some((w, text)) = self.frame.get()
            && w == workspace
        {
            return Some(text.clone());
        }
        let text: Arc<str> = encode(&self.inner)?.into();
        let _ = self.frame.set((workspace.to_owned(), text.clone()));
        Some(text)
    }

    /// The event.
    pub fn as_event(&self) -> &ServiceEvent {
        &self.inner
    }

    /// A copy of the event.
    pub fn to_event(&self) -> ServiceEvent {
        ServiceEvent::clone(&self.inner)
    }

    /// When the service handed the event to the broadcast, right after learning that it was
    /// committed: for session and workspace events, when the store's commit of the
    /// recorder's batch resolved; for run events, when [`Bus::publish`](super::Bus::publish)
    /// was called with the engine's committed batch. Receipt minus this instant is the
    /// delivery latency (every event of a batch carries the instant of its batch).
    pub fn published_at(&self) -> Instant {
        self.published
    }
}

impl std::ops::Deref for LiveEvent {
    type Target = ServiceEvent;

    fn deref(&self) -> &ServiceEvent {
        &self.inner
    }
}

/// Capacity of the channel of everything, in events. A subscriber that falls further behind
/// re-reads the store, so nothing is lost.
const LIVE_CAPACITY: usize = 16_384;

/// Capacity of a stream's channel.
const STREAM_CAPACITY: usize = 1024;

/// The latest events kept per stream (a run of the G1 benchmark has 78).
const RECENT: usize = 128;

/// Streams whose latest events are kept; past twice this many the least recently published
/// half without subscribers is forgotten.
const KEPT_STREAMS: usize = 256;

/// One stream's channel (while it has subscribers) and latest events.
#[derive(Default)]
struct Feed {
    tx: Option<broadcast::Sender<Arc<LiveEvent>>>,
    /// Contiguous seqs, oldest first.
    recent: VecDeque<Arc<LiveEvent>>,
    /// When an event of the stream was last published (the fanout's clock).
    touched: u64,
}

impl Feed {
    fn keep(&mut self, event: &Arc<LiveEvent>) {
        // A gap (events published elsewhere, or not at all) starts the run of seqs over.
        if self
            .recent
            .back()
            .is_some_and(|last| last.seq + 1 != event.seq)
        {
            self.recent.clear();
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(event.clone());
    }

    /// Every event after `since` when all of them are held (`None`: read the store).
    fn after(&self, since: u64) -> Option<Vec<Arc<LiveEvent>>> {
        let first = self.recent.front()?;
        (first.seq <= since + 1).then(|| {
            self.recent
                .iter()
                .filter(|e| e.seq > since)
                .cloned()
                .collect()
        })
    }
}

#[derive(Default)]
struct Feeds {
    streams: HashMap<StreamId, Feed>,
    clock: u64,
    /// How many streams make the next [`Feeds::trim`].
    trim_at: usize,
}

impl Feeds {
    /// Forgets the least recently published half of the streams that have no subscribers
    /// (also those whose subscribers all left since their last event).
    fn trim(&mut self) {
        for f in self.streams.values_mut() {
            if f.tx.as_ref().is_some_and(|tx| tx.receiver_count() == 0) {
                f.tx = None;
            }
        }
        self.trim_idle();
        // Many subscribed streams: trim again only once as many more came.
        self.trim_at = (2 * self.streams.len()).max(2 * KEPT_STREAMS);
    }

    fn trim_idle(&mut self) {
        let mut idle: Vec<u64> = self
            .streams
            .values()
            .filter(|f| f.tx.is_none())
            .map(|f| f.touched)
            .collect();
        if idle.len() < KEPT_STREAMS {
            return;
        }
        let mid = idle.len() / 2;
        let (_, cutoff, _) = idle.select_nth_unstable(mid);
        let cutoff = *cutoff;
        self.streams
            .retain(|_, f| f.tx.is_some() || f.touched > cutoff);
    }
}

/// The live side's channels.
#[derive(Clone)]
pub(crate) struct Fanout {
    all: broadcast::Sender<Arc<LiveEvent>>,
    feeds: Arc<Mutex<Feeds>>,
}

impl Default for Fanout {
    fn default() -> Self {
        Self {
            all: broadcast::channel(LIVE_CAPACITY).0,
            feeds: Arc::default(),
        }
    }
}

impl Fanout {
    fn feeds(&self) -> MutexGuard<'_, Feeds> {
        self.feeds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A receiver of every event from now on.
    pub(crate) fn all(&self) -> broadcast::Receiver<Arc<LiveEvent>> {
        self.all.subscribe()
    }

    /// Publishes committed `events`, all stamped `published`.
    pub(crate) fn send(
        &self,
        events: impl IntoIterator<Item = impl Into<Arc<ServiceEvent>>>,
        published: Instant,
    ) {
        let mut feeds = self.feeds();
        feeds.clock += 1;
        let clock = feeds.clock;
        for inner in events {
            let event = Arc::new(LiveEvent::new(inner, published));
            let feed = feeds.streams.entry(event.stream.clone()).or_default();
            feed.touched = clock;
            feed.keep(&event);
            if feed
                .tx
                .as_ref()
                .is_some_and(|tx| tx.send(event.clone()).is_err())
            {
                // Its last subscriber left.
                feed.tx = None;
            }
            let _ = self.all.send(event);
        }
        if feeds.streams.len() > feeds.trim_at.max(2 * KEPT_STREAMS) {
            feeds.trim();
        }
    }

    /// A receiver of `stream`'s events from now on, and the events after `since` published
    /// before, when they are all still held (`None`: read them from the store).
    pub(crate) fn subscribe(
        &self,
        stream: &StreamId,
        since: u64,
    ) -> (
        broadcast::Receiver<Arc<LiveEvent>>,
        Option<Vec<Arc<LiveEvent>>>,
    ) {
        let mut feeds = self.feeds();
        let feed = feeds.streams.entry(stream.clone()).or_default();
        let rx = match &feed.tx {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(STREAM_CAPACITY);
                feed.tx = Some(tx);
                rx
            }
        };
        (rx, feed.after(since))
    }
}

#[cfg(test)]
mod tests {
    use trellis_protocol::{RunId, ServiceEventBody, WorkspaceEvent};

    use super::*;

    fn event(stream: &StreamId, seq: u64) -> ServiceEvent {
        ServiceEvent {
            stream: stream.clone(),
            seq,
            ts: 0,
            submission: None,
            event: ServiceEventBody::Workspace(WorkspaceEvent::OpCompleted {
                op: "test".into(),
                result: serde_json::Value::Null,
            }),
        }
    }

    fn seqs(events: &[Arc<LiveEvent>]) -> Vec<u64> {
        events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn a_subscriber_hears_its_stream_only_and_everything_goes_to_all() {
        let fanout = Fanout::default();
        let (a, b) = (StreamId::Workspace, StreamId::Run(RunId::from_string("r1")));
        let mut all = fanout.all();
        let (mut rx, _) = fanout.subscribe(&a, 0);
        fanout.send([event(&b, 1), event(&a, 1), event(&b, 2)], Instant::now());
        assert_eq!(rx.try_recv().map(|e| e.seq).ok(), Some(1));
        assert!(rx.try_recv().is_err(), "woken for another stream");
        let mut n = 0;
        while all.try_recv().is_ok() {
            n += 1;
        }
        assert_eq!(n, 3);
    }

    #[test]
    fn a_late_subscriber_gets_the_held_events_after_since_and_a_gap_sends_it_to_the_store() {
        let fanout = Fanout::default();
        let s = StreamId::Run(RunId::from_string("r1"));
        fanout.send((1..=5).map(|q| event(&s, q)), Instant::now());
        let (_, held) = fanout.subscribe(&s, 2);
        assert_eq!(held.as_deref().map(seqs), Some(vec![3, 4, 5]));
        let (_, held) = fanout.subscribe(&s, 5);
        assert_eq!(held.as_deref().map(seqs), Some(vec![]));
        // Seq 7 without 6: only what follows the gap is held, so from 0 the store is read.
        fanout.send([event(&s, 7)], Instant::now());
        assert_eq!(fanout.subscribe(&s, 0).1, None);
        assert_eq!(
            fanout.subscribe(&s, 6).1.as_deref().map(seqs),
            Some(vec![7])
        );
        // A stream never published: the store.
        assert_eq!(fanout.subscribe(&StreamId::Workspace, 0).1, None);
    }

    #[test]
    fn only_the_latest_events_of_a_bounded_number_of_idle_streams_are_kept() {
        let fanout = Fanout::default();
        let s = StreamId::Run(RunId::from_string("long"));
        let n = u64::try_from(RECENT).unwrap_or(u64::MAX) + 10;
        fanout.send((1..=n).map(|q| event(&s, q)), Instant::now());
        assert_eq!(
            fanout.subscribe(&s, 0).1,
            None,
            "the first events were dropped"
        );
        assert_eq!(
            fanout.subscribe(&s, n - 1).1.as_deref().map(seqs),
            Some(vec![n])
        );
        let (_listening, _) = fanout.subscribe(&s, n);
        for i in 0..(3 * KEPT_STREAMS) {
            fanout.send(
                [event(
                    &StreamId::Run(RunId::from_string(format!("r{i}"))),
                    1,
                )],
                Instant::now(),
            );
        }
        assert!(fanout.feeds().streams.len() <= 2 * KEPT_STREAMS + 1);
        // The subscribed stream stays, however old.
        assert!(fanout.feeds().streams.contains_key(&s));
    }

    #[test]
    fn streams_whose_subscribers_left_are_forgotten_too() {
        let fanout = Fanout::default();
        for i in 0..(3 * KEPT_STREAMS) {
            let stream = StreamId::Run(RunId::from_string(format!("r{i}")));
            // Subscribed, published, then the subscriber leaves before the next event.
            let (rx, _) = fanout.subscribe(&stream, 0);
            fanout.send([event(&stream, 1)], Instant::now());
            drop(rx);
        }
        assert!(fanout.feeds().streams.len() <= 2 * KEPT_STREAMS + 1);
    }
}
