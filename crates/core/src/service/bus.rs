//! The event side of the service: the recorder that numbers, coalesces and persists session
//! and workspace events, the live broadcast every committed event goes through, and
//! subscriptions that replay the store and continue live with no gap and no duplicate.
//!
//! ```text
//!  agents / ops ──record()──▶ recorder task ──append_stream──▶ store (group commit)
//!                              (seq per stream,                    │ committed
//!                               deltas coalesced)                  ▼
//!  engine RunHandle ─────────── forwarder ──────────────▶ live broadcast ──▶ Subscription
//!                                                                           (store replay
//!                                                                            + live, deduped)
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, mpsc, oneshot};
use trellis_protocol::{
    ServiceEvent, ServiceEventBody, SessionEvent, StreamId, SubmissionId, now_ms,
};
use trellis_store::Store;

use super::fanout::{Fanout, LiveEvent};
use super::subscription::{Delivered, Subscription};

/// How long streamed deltas of a session wait to be merged with the next ones before they
/// are stored and published (they are flushed at once by any other event of the session).
pub const DEFAULT_DELTA_FLUSH: Duration = Duration::from_millis(40);

/// Recorder settings.
#[derive(Clone, Copy, Debug)]
pub struct RecordOptions {
    /// Persist session and workspace events (off: they are numbered and published only;
    /// used to measure what recording costs).
    pub persist: bool,
    /// How long deltas wait to be coalesced.
    pub delta_flush: Duration,
}

impl Default for RecordOptions {
    fn default() -> Self {
        Self {
            persist: true,
            delta_flush: DEFAULT_DELTA_FLUSH,
        }
    }
}

// Almost every message is an `Event`; boxing it would add an allocation per event to save
// space only on the rare `Flush`.
#[allow(clippy::large_enum_variant)]
enum Msg {
    Event {
        stream: StreamId,
        submission: Option<SubmissionId>,
        body: ServiceEventBody,
        ts: i64,
    },
    Flush(oneshot::Sender<()>),
    /// The store holds `stream` up to seq `last`, as just read by the sender.
    Stored {
        stream: StreamId,
        last: u64,
    },
}

/// The live side: every committed event of every stream, in commit order per stream.
#[derive(Clone)]
pub struct Bus {
    live: Fanout,
    recorder: mpsc::UnboundedSender<Msg>,
    store: Arc<Store>,
    /// The session streams this process recorded events of that may not be stored yet.
    touched: Arc<std::sync::Mutex<Touched>>,
}

/// Above this many entries, the recorder forgets the session streams whose events are all
/// stored, and the next seqs it holds (read from the store again when needed).
const FORGET_AT: usize = 4096;

/// Hashes of the session streams this process recorded an event of (8 bytes each; a
/// collision only costs a needless flush), and how many session events it recorded.
#[derive(Default)]
struct Touched {
    streams: std::collections::HashSet<u64>,
    recorded: u64,
}

impl Bus {
    /// Starts the recorder task on the current tokio runtime.
    pub fn start(store: Arc<Store>, options: RecordOptions) -> Self {
        let live = Fanout::default();
        let (tx, rx) = mpsc::unbounded_channel();
        let touched: Arc<std::sync::Mutex<Touched>> = Arc::default();
        let task = Recorder {
            store: store.clone(),
            live: live.clone(),
            options,
            next: HashMap::new(),
            pending: Vec::new(),
            touched: touched.clone(),
            received: 0,
        };
        tokio::spawn(task.run(rx));
        Self {
            live,
            recorder: tx,
            store,
            touched,
        }
    }

    fn stream_hash(stream: &StreamId) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        stream.hash(&mut h);
        h.finish()
    }

    /// Whether events of `stream` recorded by this process may still be on their way to
    /// the store: `false` means the store already holds everything this process recorded
    /// of it (nothing, for a session it never touched), so reading it needs no
    /// [`Bus::flush`] — which waits for the recorder's next commit.
    pub fn may_hold(&self, stream: &StreamId) -> bool {
        self.touched
            .lock()
            .map_or(true, |t| t.streams.contains(&Self::stream_hash(stream)))
    }

    /// Records an event of a session or the workspace stream (numbered, persisted, then
    /// published). Never blocks.
    pub fn record(
        &self,
        stream: StreamId,
        submission: Option<SubmissionId>,
        body: ServiceEventBody,
    ) {
        if matches!(stream, StreamId::Session(_))
            && let Ok(mut t) = self.touched.lock()
        {
            t.streams.insert(Self::stream_hash(&stream));
            // Counted before it is sent: the recorder forgets only when it has stored as
            // many as were recorded.
            t.recorded += 1;
        }
        let _ = self.recorder.send(Msg::Event {
            stream,
            submission,
            body,
            ts: now_ms(),
        });
    }

    /// Records a session event.
    pub fn session(
        &self,
        session: &trellis_protocol::SessionId,
        submission: Option<SubmissionId>,
        event: SessionEvent,
    ) {
        self.record(
            StreamId::Session(session.clone()),
            submission,
            ServiceEventBody::Session(event),
        );
    }

    /// Records a workspace event.
    pub fn workspace(
        &self,
        submission: Option<SubmissionId>,
        event: trellis_protocol::WorkspaceEvent,
    ) {
        self.record(
            StreamId::Workspace,
            submission,
            ServiceEventBody::Workspace(event),
        );
    }

    /// Tells the recorder that the store holds `stream` up to seq `last` (read after
    /// everything this process recorded of it was stored, see [`Bus::may_hold`]), so that
    /// it numbers the stream's next event `last + 1` without reading the store. Ignored when
    /// the recorder numbers the stream already. A wrong `last` costs one failed commit: the
    /// recorder then reads the store's last seq and numbers the events again.
    pub fn stored_up_to(&self, stream: &StreamId, last: u64) {
        let _ = self.recorder.send(Msg::Stored {
            stream: stream.clone(),
            last,
        });
    }

    /// Resolves once everything recorded before the call is stored and published.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.recorder.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Publishes events that are already committed (a batch of a run's graph events); they
    /// carry the instant of this call as [`LiveEvent::published_at`].
    pub fn publish(&self, events: impl IntoIterator<Item = impl Into<Arc<ServiceEvent>>>) {
        self.live.send(events, Instant::now());
    }

    /// Every live event from now on (no replay).
    pub fn live(&self) -> broadcast::Receiver<Arc<LiveEvent>> {
        self.live.all()
    }

    /// The stored events of `stream` after `since`, then the live ones. `poll` is how often
    /// the store is re-read when nothing arrives live (for runs executing in another
    /// process); `None` never polls.
    pub fn subscribe(&self, stream: StreamId, since: u64, poll: Option<Duration>) -> Subscription {
        // Subscribe before reading the store: whatever commits after the read is in the
        // receiver, whatever committed before is in the read; the overlap is skipped by seq.
        // When the events after `since` are all still held in memory, they come from there
        // instead of the store.
        let (rx, recent) = self.live.subscribe(&stream, since);
        let primed = recent.is_some();
        // Likewise the store's notifications (other processes' commits), when it has them.
        let watch = self.store.watch();
        Subscription {
            key: stream.key(),
            stream,
            last: since,
            primed,
            backlog: recent
                .map(|held| held.into_iter().map(Delivered::Live).collect())
                .unwrap_or_default(),
            rx,
            watch,
            store: self.store.clone(),
            poll,
            // As after a read of the store (`refill`), when memory stood in for it.
            next_poll: poll
                .filter(|_| primed)
                .map(|p| tokio::time::Instant::now() + p),
        }
    }
}

/// A delta held back to be merged with the next ones.
struct Pending {
    stream: StreamId,
    submission: Option<SubmissionId>,
    event: SessionEvent,
    ts: i64,
    since: Instant,
}

struct Recorder {
    store: Arc<Store>,
    live: Fanout,
    options: RecordOptions,
    /// Next seq per stream (loaded from the store on first use).
    next: HashMap<StreamId, u64>,
    pending: Vec<Pending>,
    /// The bus's record of what may not be stored yet.
    touched: Arc<std::sync::Mutex<Touched>>,
    /// Session events received so far.
    received: u64,
}

impl Recorder {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        let mut out: Vec<ServiceEvent> = Vec::new();
        let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
        // Reused: a batch may hold thousands of messages.
        let mut batch: Vec<Msg> = Vec::new();
        loop {
            // Wait for work, or for the oldest held delta to be due.
            let first = match self.pending.iter().map(|p| p.since).min() {
                Some(oldest) => {
                    let due = oldest + self.options.delta_flush;
                    match tokio::time::timeout_at(due.into(), rx.recv()).await {
                        Ok(Some(m)) => Some(Some(m)),
                        Ok(None) => None,
                        Err(_) => Some(None),
                    }
                }
                None => rx.recv().await.map(Some),
            };
            let Some(first) = first else {
                // Channel closed: store what is held and stop.
                self.drain_pending(&mut out, None);
                self.commit(&mut out).await;
                return;
            };
            batch.extend(first);
            while batch.len() < 4096 {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            for m in batch.drain(..) {
                match m {
                    Msg::Flush(tx) => {
                        self.drain_pending(&mut out, None);
                        flushes.push(tx);
                    }
                    Msg::Stored { stream, last } => {
                        self.next.entry(stream).or_insert(last.saturating_add(1));
                    }
                    Msg::Event {
                        stream,
                        submission,
                        body,
                        ts,
                    } => {
                        if matches!(stream, StreamId::Session(_)) {
                            self.received += 1;
                        }
                        self.accept(&mut out, stream, submission, body, ts);
                    }
                }
            }
            let now = Instant::now();
            let due: Vec<StreamId> = self
                .pending
                .iter()
                .filter(|p| now.duration_since(p.since) >= self.options.delta_flush)
                .map(|p| p.stream.clone())
                .collect();
            for s in due {
                self.drain_pending(&mut out, Some(&s));
            }
            self.commit(&mut out).await;
            for tx in flushes.drain(..) {
                let _ = tx.send(());
            }
            self.forget_stored();
        }
    }

    /// Keeps a long-running process's memory bounded: once everything received is stored
    /// (no delta held), the session streams touched and the next seqs held can go — a
    /// session opened later reads its history without waiting for a flush, and a stream's
    /// next seq is read from the store again (or told by the session hub).
    fn forget_stored(&mut self) {
        if !self.pending.is_empty() {
            return;
        }
        if let Ok(mut t) = self.touched.lock()
            && t.streams.len() > FORGET_AT
            && t.recorded == self.received
        {
            t.streams = std::collections::HashSet::new();
        }
        // Without persistence the numbering lives only here.
        if self.options.persist && self.next.len() > FORGET_AT {
            self.next = HashMap::new();
        }
    }

    fn accept(
        &mut self,
        out: &mut Vec<ServiceEvent>,
        stream: StreamId,
        submission: Option<SubmissionId>,
        body: ServiceEventBody,
        ts: i64,
    ) {
        if let ServiceEventBody::Session(event) = &body
            && event.is_delta()
        {
            if let Some(p) = self.pending.iter_mut().find(|p| p.stream == stream)
                && merge(&mut p.event, event)
            {
                return;
            }
            self.drain_pending(out, Some(&stream));
            if let ServiceEventBody::Session(event) = body {
                self.pending.push(Pending {
                    stream,
                    submission,
                    event,
                    ts,
                    since: Instant::now(),
                });
            }
            return;
        }
        self.drain_pending(out, Some(&stream));
        self.push(out, stream, submission, body, ts);
    }

    fn drain_pending(&mut self, out: &mut Vec<ServiceEvent>, only: Option<&StreamId>) {
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending) {
            if only.is_none_or(|s| *s == p.stream) {
                self.push(
                    out,
                    p.stream,
                    p.submission,
                    ServiceEventBody::Session(p.event),
                    p.ts,
                );
            } else {
                keep.push(p);
            }
        }
        self.pending = keep;
    }

    fn push(
        &mut self,
        out: &mut Vec<ServiceEvent>,
        stream: StreamId,
        submission: Option<SubmissionId>,
        event: ServiceEventBody,
        ts: i64,
    ) {
        let seq = self.next_seq(&stream);
        out.push(ServiceEvent {
            stream,
            seq,
            ts,
            submission,
            event,
        });
    }

    async fn commit(&mut self, out: &mut Vec<ServiceEvent>) {
        if out.is_empty() {
            return;
        }
        // Shared by the store's writer and the live side: not copied.
        let mut events: Vec<Arc<ServiceEvent>> = out.drain(..).map(Arc::new).collect();
        if self.options.persist {
            let mut attempt = 0;
            while let Err(e) = self.store.append_shared(events.clone()).await {
                if let trellis_graph::JournalError::LeaseLost { run, .. } = &e {
                    // Another worker took over this run: its agents' events are not this
                    // process's to write any more; the others are written.
                    let prefix = format!("{run}:");
                    events.retain(|ev| {
                        !matches!(&ev.stream, StreamId::Session(s) if s.as_str().starts_with(&prefix))
                    });
                    if events.is_empty() {
                        return;
                    }
                    continue;
                }
                // Another process appended to one of these streams (the workspace stream is
                // shared by every process of the workspace): number them again after what
                // the store holds now, once.
                for ev in &events {
                    self.next.remove(&ev.stream);
                }
                attempt += 1;
                if attempt > 2 {
                    tracing::error!("recording {} event(s) failed: {e}", events.len());
                    return;
                }
                for ev in &mut events {
                    let seq = self.next_seq(&ev.stream);
                    Arc::make_mut(ev).seq = seq;
                }
            }
        }
        self.live.send(events, Instant::now());
    }

    /// Takes the next seq of `stream` (read from the store on first use).
    fn next_seq(&mut self, stream: &StreamId) -> u64 {
        let seq = match self.next.get_mut(stream) {
            Some(n) => n,
            None => {
                let last = if self.options.persist {
                    match self.store.stream_last_seq(stream) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!("cannot read the last seq of {stream}: {e}");
                            0
                        }
                    }
                } else {
                    0
                };
                self.next.entry(stream.clone()).or_insert(last + 1)
            }
        };
        let n = *seq;
        *seq += 1;
        n
    }
}

/// Appends `next` to `held` when both are deltas of the same kind and turn, or replaces
/// `held` with `next` when both report the progress of the same tool call or model call.
fn merge(held: &mut SessionEvent, next: &SessionEvent) -> bool {
    match (held, next) {
        (
            SessionEvent::MessageDelta { turn, text },
            SessionEvent::MessageDelta {
                turn: t,
                text: more,
            },
        )
        | (
            SessionEvent::ThoughtDelta { turn, text },
            SessionEvent::ThoughtDelta {
                turn: t,
                text: more,
            },
        ) if *turn == *t => {
            text.push_str(more);
            true
        }
        // A later progress report of the same call supersedes the held one.
        (
            held @ SessionEvent::ToolProgress { .. },
            SessionEvent::ToolProgress {
                turn: t,
                call_id: c,
                ..
            },
        ) => {
            let same = matches!(&*held, SessionEvent::ToolProgress { turn, call_id, .. } if turn == t && call_id == c);
            if same {
                held.clone_from(next);
            }
            same
        }
        // Likewise a model call's progress: the latest report of the turn is what counts.
        (held @ SessionEvent::TurnProgress { .. }, SessionEvent::TurnProgress { turn: t, .. }) => {
            let same = matches!(&*held, SessionEvent::TurnProgress { turn, .. } if turn == t);
            if same {
                held.clone_from(next);
            }
            same
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(call_id: &str, progress: f64) -> SessionEvent {
        SessionEvent::ToolProgress {
            turn: 1,
            call_id: call_id.into(),
            progress,
            total: Some(10.0),
            message: None,
        }
    }

    #[test]
    fn a_live_events_frame_is_encoded_once_per_workspace() {
        let event = LiveEvent::new(
            ServiceEvent {
                stream: StreamId::Workspace,
                seq: 1,
                ts: 0,
                submission: None,
                event: ServiceEventBody::Workspace(trellis_protocol::WorkspaceEvent::OpCompleted {
                    op: "x".into(),
                    result: serde_json::Value::Null,
                }),
            },
            Instant::now(),
        );
        let calls = std::cell::Cell::new(0);
        let encode = |e: &ServiceEvent| {
            calls.set(calls.get() + 1);
            Some(format!("frame {}", e.seq))
        };
        let a = event.frame("ws", encode);
        let b = event.frame("ws", encode);
        assert_eq!(calls.get(), 1);
        assert!(a.zip(b).is_some_and(|(a, b)| Arc::ptr_eq(&a, &b)));
        // Another workspace's frame is encoded for it.
        assert_eq!(event.frame("other", encode).as_deref(), Some("frame 1"));
        assert_eq!(calls.get(), 2);
    }

    /// A stream's last stored seq told to the recorder numbers its next event without a
    /// read of the store; a wrong one costs a failed batch, then the store's count wins.
    #[tokio::test]
    async fn a_told_last_seq_numbers_the_next_event_and_a_wrong_one_is_corrected() {
        let stream = StreamId::Session(trellis_protocol::SessionId::for_node(
            &trellis_protocol::RunId::from_string("r1"),
            &trellis_protocol::NodeId::from("n"),
        ));
        let event = || {
            ServiceEventBody::Session(SessionEvent::TurnStarted {
                turn: 1,
                attempt: 1,
                model: None,
            })
        };
        for persist in [false, true] {
            let dir = tempfile::tempdir().expect("test");
            let store = Store::open_workspace(dir.path(), trellis_store::StoreOptions::default())
                .expect("test");
            let options = RecordOptions {
                persist,
                ..RecordOptions::default()
            };
            let bus = Bus::start(store.clone(), options);
            let mut live = bus.live();
            bus.stored_up_to(&stream, 5);
            bus.record(stream.clone(), None, event());
            bus.flush().await;
            let seq = live.recv().await.expect("test").seq;
            if persist {
                // The store holds nothing of the stream: numbered again from 1.
                assert_eq!(seq, 1);
                assert_eq!(store.stream_last_seq(&stream).expect("test"), 1);
            } else {
                assert_eq!(seq, 6, "the told seq numbers the event");
            }
        }
    }

    /// A long-running process keeps no trace of every session it ever recorded: past the
    /// bound, once everything is stored, the streams are forgotten and a forgotten stream's
    /// next event is numbered on from the store.
    #[tokio::test]
    async fn stored_sessions_are_forgotten_past_the_bound_and_numbered_on_from_the_store() {
        let dir = tempfile::tempdir().expect("test");
        let store = Store::open_workspace(dir.path(), trellis_store::StoreOptions::default())
            .expect("test");
        let bus = Bus::start(store.clone(), RecordOptions::default());
        let run = trellis_protocol::RunId::from_string("r1");
        let stream = |i: usize| {
            let node = trellis_protocol::NodeId::from(format!("n{i}").as_str());
            StreamId::Session(trellis_protocol::SessionId::for_node(&run, &node))
        };
        let event = || {
            ServiceEventBody::Session(SessionEvent::TurnStarted {
                turn: 1,
                attempt: 1,
                model: None,
            })
        };
        for i in 0..=FORGET_AT {
            bus.record(stream(i), None, event());
        }
        // The recorder forgets after the batch that answered the flush: wait for the next.
        bus.flush().await;
        bus.flush().await;
        assert!(!bus.may_hold(&stream(0)), "stored streams are forgotten");
        bus.record(stream(0), None, event());
        assert!(bus.may_hold(&stream(0)));
        bus.flush().await;
        assert_eq!(store.stream_last_seq(&stream(0)).expect("test"), 2);
        assert_eq!(store.stream_last_seq(&stream(FORGET_AT)).expect("test"), 1);
    }

    #[test]
    fn the_latest_progress_of_a_model_call_supersedes_the_held_one() {
        let turn = |turn, prompt_done| SessionEvent::TurnProgress {
            turn,
            prompt_tokens: 2048,
            prompt_done,
            generated: 0,
        };
        let mut held = turn(1, 512);
        assert!(merge(&mut held, &turn(1, 1024)));
        assert_eq!(held, turn(1, 1024));
        assert!(!merge(&mut held, &turn(2, 512)));
        assert!(!merge(&mut held, &progress("a", 1.0)));
        assert_eq!(held, turn(1, 1024));
    }

    #[test]
    fn the_latest_progress_of_a_call_supersedes_the_held_one() {
        let mut held = progress("a", 1.0);
        assert!(merge(&mut held, &progress("a", 2.0)));
        assert_eq!(held, progress("a", 2.0));
        // Another call's report, or another kind of delta, is kept apart.
        assert!(!merge(&mut held, &progress("b", 3.0)));
        let text = SessionEvent::MessageDelta {
            turn: 1,
            text: "x".into(),
        };
        assert!(!merge(&mut held, &text));
        assert_eq!(held, progress("a", 2.0));
    }
}
