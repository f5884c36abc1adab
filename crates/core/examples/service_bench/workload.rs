//! The workload of the runtime-service benchmark, shared by the `service_bench` example and
//! its smoke test (`tests/suite/service_bench.rs`, which includes this file by path).
//!
//! One [`Service`] over a temporary copy of `examples/inventory` runs `runs` concurrent
//! `architecture_discussion` runs (decision documentation skipped, input Approve) against a
//! model that streams its report in `deltas` text deltas, one every `pace`. `subscribers`
//! tasks read [`Service::live`] meanwhile and time every event from its
//! [`LiveEvent::published_at`] to its receipt.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use trellis_core::Runtime;
use trellis_core::service::{LiveEvent, RecordOptions, Service, ServiceOptions};
use trellis_protocol::{InputMode, Op, RunId, RunStatus, ServiceEventBody, SessionEvent, StreamId};
use trellis_store::{SessionFilter, Store, StoreOptions, StoreStats};
use trellis_test_support::paced::{self, PacedModel, Reply};
use trellis_test_support::usage::{children_cpu_time, cpu_time, peak_rss_kib, reset_peak_rss};

/// BM25 retrieval only (no embedding model to load).
const CONFIG: &str = r#"
[index.embedding]
backend = "none"
"#;

/// A configured test command (as the service tests have): without one, every run start
/// detects it, which for this Python repository runs `python3 -c "import pytest"`.
const TEST_COMMAND: &str = r#"
[agents]
test_command = "python3 -B -m unittest -q"
"#;

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Concurrent workflow runs.
    pub runs: usize,
    /// In-process subscribers of the live broadcast.
    pub subscribers: usize,
    /// Text deltas per agent model call.
    pub deltas: usize,
    /// Time between two deltas of a call.
    pub pace: Duration,
    /// Whether session and workspace events are persisted (`RecordOptions::persist`).
    pub record: bool,
    /// Whether the workspace configures `agents.test_command` (else each run detects it).
    pub test_command: bool,
}

/// Latency percentiles of one kind of event, over every subscriber's receipts.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    /// Receipts measured.
    pub n: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile (nearest rank).
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
}

impl Latency {
    fn of(mut ns: Vec<u64>) -> Self {
        if ns.is_empty() {
            return Self::default();
        }
        ns.sort_unstable();
        let rank = |p: f64| {
            let i = ((p * ns.len() as f64).ceil() as usize).clamp(1, ns.len()) - 1;
            Duration::from_nanos(ns[i])
        };
        Self {
            n: ns.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: Duration::from_nanos(ns[ns.len() - 1]),
        }
    }
}

/// What one subscriber received.
#[derive(Debug, Default)]
pub struct Subscriber {
    /// Events received.
    pub received: u64,
    /// Events lost to `Lagged` (not received).
    pub lagged: u64,
    /// `messageDelta` events received.
    pub message_deltas: u64,
    /// `(stream, seq)` of every event received.
    pub keys: HashSet<(StreamId, u64)>,
    /// Every receipt: what kind of event, when it was published, latency in nanoseconds.
    samples: Vec<(Kind, Instant, u64)>,
}

/// The stream an event belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Session,
    Run,
    Workspace,
}

/// Where the workload stood when an event was published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Start ops are running (each creates its run's worktree with git).
    Starting = 0,
    /// Every start op returned and no agent's reply ended yet: the runs stream their
    /// reports.
    Streaming = 1,
    /// At least one agent's reply ended (its run collects the agent's changes with git,
    /// then stops).
    Finishing = 2,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 3] = [Phase::Starting, Phase::Streaming, Phase::Finishing];

    /// How tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Starting => "while runs start",
            Phase::Streaming => "all started, no reply ended",
            Phase::Finishing => "after the first reply ended",
        }
    }
}

/// The workload's phases: when each began. A receipt belongs to the phase in which its
/// event was published (or its probe sent), so that a stall that spans a phase change is
/// counted where it began.
#[derive(Debug, Default)]
struct Clock {
    phase: AtomicU8,
    began: std::sync::Mutex<[Option<Instant>; 3]>,
}

impl Clock {
    fn start(&self) {
        if let Ok(mut b) = self.began.lock() {
            b[Phase::Starting as usize] = Some(Instant::now());
        }
    }

    /// Moves to `p` unless a later phase was entered already.
    fn enter(&self, p: Phase) {
        if self.phase.fetch_max(p as u8, Ordering::Relaxed) < p as u8
            && let Ok(mut b) = self.began.lock()
        {
            b[p as usize] = Some(Instant::now());
        }
    }

    fn began(&self) -> [Option<Instant>; 3] {
        self.began.lock().map(|b| *b).unwrap_or_default()
    }
}

/// The phase `at` fell in, given when each began.
fn phase_at(began: &[Option<Instant>; 3], at: Instant) -> Phase {
    Phase::ALL
        .into_iter()
        .rev()
        .find(|p| began[*p as usize].is_some_and(|b| b <= at))
        .unwrap_or(Phase::Starting)
}

/// The measurements of one workload.
#[derive(Debug)]
pub struct Outcome {
    /// What ran.
    pub settings: Settings,
    /// From the first start op to the last event received by every subscriber after every
    /// run stopped and every recorded event was committed.
    pub wall: Duration,
    /// User + system CPU time of the process over `wall` (`getrusage(RUSAGE_SELF)`).
    pub cpu: Duration,
    /// User + system CPU time of the child processes (git) that ended during `wall`
    /// (`getrusage(RUSAGE_CHILDREN)`).
    pub children_cpu: Duration,
    /// Per [`Phase`] in which the wake was sent: how long a task of the same runtime takes
    /// to be polled after a plain thread wakes it (a probe every millisecond during `wall`) — the scheduling delay any
    /// subscriber pays on top of the broadcast itself.
    pub wake_latency: [Latency; 3],
    /// Peak resident set size (`VmHWM`), KiB; reset before the workload when the kernel
    /// allows it (`peak_rss_reset`).
    pub peak_rss_kib: Option<u64>,
    /// Whether `VmHWM` was reset before the workload (else it is the peak since the process
    /// started).
    pub peak_rss_reset: bool,
    /// Final status of every run.
    pub statuses: Vec<RunStatus>,
    /// Per subscriber.
    pub subscribers: Vec<Subscriber>,
    /// Latency of session events (recorded, coalesced, committed by the recorder).
    pub session_latency: Latency,
    /// Latency of run events (the engine's committed batches, forwarded).
    pub run_latency: Latency,
    /// Latency of workspace events (recorded like session events).
    pub workspace_latency: Latency,
    /// Latency of every event.
    pub all_latency: Latency,
    /// Latency of every event, per [`Phase`] in which it was published.
    pub phase_latency: [Latency; 3],
    /// When each [`Phase`] began, from the start of the workload (`None`: never, e.g. a
    /// reply ended before the last start op returned).
    pub phase_began: [Option<Duration>; 3],
    /// Text deltas the model produced (all calls).
    pub raw_deltas: u64,
    /// Agent model calls (paced).
    pub agent_calls: u64,
    /// Retrieval query calls (answered at once).
    pub query_calls: u64,
    /// `messageDelta` rows stored in the runs' session streams at the end.
    pub stored_message_deltas: u64,
    /// Store counters over the workload.
    pub store: StoreStats,
    /// Committed events some subscriber did not receive, as `subscriber: stream#seq`
    /// (empty when every subscriber saw every stored event of the runs' graph streams, their
    /// sessions' streams and the workspace stream).
    pub missing: Vec<String>,
    /// Stored events checked against every subscriber.
    pub checked: usize,
}

impl Outcome {
    /// Events received by all subscribers together.
    pub fn received(&self) -> u64 {
        self.subscribers.iter().map(|s| s.received).sum()
    }

    /// Events lost to lagging, all subscribers together.
    pub fn lagged(&self) -> u64 {
        self.subscribers.iter().map(|s| s.lagged).sum()
    }
}

/// Counts what the model was asked.
#[derive(Default)]
struct Counters {
    agent_calls: AtomicU64,
    query_calls: AtomicU64,
}

/// A model that streams its answer at a steady pace (`trellis_test_support::paced`):
/// retrieval query requests get a small queries object at once, every other request a report
/// in `deltas` deltas, one every `pace`; the end of a paced reply moves `clock` to
/// [`Phase::Finishing`].
fn paced_model(
    deltas: usize,
    pace: Duration,
    counters: Arc<Counters>,
    clock: Arc<Clock>,
) -> PacedModel {
    PacedModel::new("paced-bench", move |r| {
        if paced::is_queries(r) {
            counters.query_calls.fetch_add(1, Ordering::Relaxed);
            Reply {
                pieces: paced::query_pieces(0),
                pace: Duration::ZERO,
            }
        } else {
            counters.agent_calls.fetch_add(1, Ordering::Relaxed);
            Reply {
                pieces: paced::report_pieces(deltas),
                pace,
            }
        }
    })
    .on_paced_finish(move || clock.enter(Phase::Finishing))
}

impl Subscriber {
    fn take(&mut self, e: &LiveEvent) {
        let latency = Instant::now().saturating_duration_since(e.published_at());
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.received += 1;
        let published = e.published_at();
        match &e.event {
            ServiceEventBody::Session(s) => {
                self.samples.push((Kind::Session, published, ns));
                if matches!(s, SessionEvent::MessageDelta { .. }) {
                    self.message_deltas += 1;
                }
            }
            ServiceEventBody::Run(_) => self.samples.push((Kind::Run, published, ns)),
            ServiceEventBody::Workspace(_) => {
                self.samples.push((Kind::Workspace, published, ns));
            }
        }
        self.keys.insert((e.stream.clone(), e.seq));
    }
}

/// Reads the live broadcast until `stop`, then takes what is already queued.
async fn subscribe(
    mut rx: broadcast::Receiver<Arc<LiveEvent>>,
    stop: CancellationToken,
) -> Subscriber {
    let mut s = Subscriber::default();
    loop {
        let received = tokio::select! {
            biased;
            r = rx.recv() => r,
            () = stop.cancelled() => break,
        };
        match received {
            Ok(e) => s.take(&e),
            Err(broadcast::error::RecvError::Lagged(n)) => s.lagged += n,
            Err(broadcast::error::RecvError::Closed) => return s,
        }
    }
    loop {
        match rx.try_recv() {
            Ok(e) => s.take(&e),
            Err(broadcast::error::TryRecvError::Lagged(n)) => s.lagged += n,
            Err(_) => return s,
        }
    }
}

/// Wakes a task of the runtime from a plain thread every millisecond until `stop`, and
/// returns when each wake was sent and its delay to the task being polled, in nanoseconds.
async fn wake_probe(stop: CancellationToken) -> Vec<(Instant, u64)> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let thread = {
        let running = running.clone();
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        })
    };
    let mut ns = Vec::new();
    loop {
        tokio::select! {
            biased;
            sent = rx.recv() => match sent {
                Some(at) => {
                    let delay = u64::try_from(at.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    ns.push((at, delay));
                }
                None => break,
            },
            () = stop.cancelled() => break,
        }
    }
    running.store(false, Ordering::Relaxed);
    drop(rx);
    let _ = thread.join();
    ns
}

fn start_op(i: usize) -> Op {
    Op::StartRun {
        request: format!("Why is stock kept in memory? (question {i})"),
        repo: None,
        workflow: Some("architecture_discussion".into()),
        include: Vec::new(),
        skip: vec!["decision_documentation".into()],
        input: InputMode::Approve,
        budgets: None,
        plan_only: false,
    }
}

fn diff(after: StoreStats, before: StoreStats) -> StoreStats {
    StoreStats {
        commits: after.commits - before.commits,
        synced_commits: after.synced_commits - before.synced_commits,
        failed_commits: after.failed_commits - before.failed_commits,
        batches: after.batches - before.batches,
        events: after.events - before.events,
        bytes_written: after.bytes_written - before.bytes_written,
        largest_group: after.largest_group,
        stream_batches: after.stream_batches - before.stream_batches,
        stream_events: after.stream_events - before.stream_events,
    }
}

/// The workload's service: a temporary copy of the example repository, its store, and a
/// service whose model is the paced one.
///
/// Fields drop in order: the service first, the workspace last.
struct Bench {
    svc: Arc<Service>,
    /// Text deltas the model produced.
    deltas: Arc<AtomicU64>,
    clock: Arc<Clock>,
    counters: Arc<Counters>,
    store: Arc<Store>,
    /// Kept for the workload's duration: the workspace is removed when it drops.
    _ws: trellis_test_support::TempWorkspace,
}

impl Bench {
    /// Opens a fresh temporary workspace, store and service for `settings`.
    fn open(settings: &Settings) -> anyhow::Result<Self> {
        let config = if settings.test_command {
            format!("{CONFIG}{TEST_COMMAND}")
        } else {
            CONFIG.to_owned()
        };
        let ws = trellis_test_support::example_repo("inventory", &config)?;
        let repo = ws.path().canonicalize()?;
        let store = Store::open_workspace(&repo, StoreOptions::default())?;
        let rt = Runtime::open(&repo, &[], &[], store.clone())?;
        let counters = Arc::new(Counters::default());
        let clock = Arc::new(Clock::default());
        let model = paced_model(
            settings.deltas,
            settings.pace,
            counters.clone(),
            clock.clone(),
        );
        let deltas = model.deltas();
        rt.models().install("local", Arc::new(model));
        let svc = Service::start(
            Arc::new(rt),
            ServiceOptions {
                record: RecordOptions {
                    persist: settings.record,
                    ..RecordOptions::default()
                },
                ..ServiceOptions::default()
            },
        );
        Ok(Self {
            _ws: ws,
            store,
            svc,
            counters,
            clock,
            deltas,
        })
    }

    /// Sends the `runs` start ops at once and returns the runs they started, in order.
    async fn start_runs(&self, runs: usize) -> anyhow::Result<Vec<RunId>> {
        let starts: Vec<_> = (0..runs)
            .map(|i| {
                let svc = self.svc.clone();
                tokio::spawn(async move { svc.call(start_op(i)).await })
            })
            .collect();
        let mut ids = Vec::new();
        for s in starts {
            let out = s.await??;
            let id = out["run"]
                .as_str()
                .ok_or_else(|| anyhow::anyhow!("start op returned no run: {out}"))?;
            ids.push(RunId::from_string(id));
        }
        Ok(ids)
    }

    /// What was committed, to check against what every subscriber received: each run's
    /// status, and every stored event of the runs' graph streams, their sessions' streams
    /// and the workspace stream.
    fn committed(&self, runs: &[RunId]) -> anyhow::Result<Committed> {
        let store = &self.store;
        let mut c = Committed::default();
        for run in runs {
            c.statuses.push(self.svc.run_state(run)?.status);
            for e in store.events(run, 1, None)? {
                c.expected.push((StreamId::Run(run.clone()), e.seq));
            }
            let filter = SessionFilter {
                run: Some(run.clone()),
                ..SessionFilter::default()
            };
            for session in store.sessions(&filter)? {
                let stream = StreamId::Session(session.id);
                for e in store.stream_events(&stream, 0, None)? {
                    if matches!(
                        e.event,
                        ServiceEventBody::Session(SessionEvent::MessageDelta { .. })
                    ) {
                        c.stored_message_deltas += 1;
                    }
                    c.expected.push((stream.clone(), e.seq));
                }
            }
        }
        for e in store.stream_events(&StreamId::Workspace, 0, None)? {
            c.expected.push((StreamId::Workspace, e.seq));
        }
        Ok(c)
    }
}

/// What the store holds at the end of the workload.
#[derive(Default)]
struct Committed {
    /// Final status of every run.
    statuses: Vec<RunStatus>,
    /// `(stream, seq)` of every committed event every subscriber should have received.
    expected: Vec<(StreamId, u64)>,
    /// `messageDelta` rows stored in the runs' session streams.
    stored_message_deltas: u64,
}

impl Committed {
    /// The committed events some subscriber did not receive, as `subscriber: stream#seq`.
    fn missing_from(&self, subscribers: &[Subscriber]) -> Vec<String> {
        let mut missing = Vec::new();
        for (i, s) in subscribers.iter().enumerate() {
            for key in &self.expected {
                if !s.keys.contains(key) {
                    missing.push(format!("subscriber {i}: {}#{}", key.0, key.1));
                }
            }
        }
        missing
    }
}

/// The process's resource counters when the workload starts.
struct Baseline {
    peak_rss_reset: bool,
    stats: StoreStats,
    cpu: Duration,
    children: Duration,
    t0: Instant,
}

impl Baseline {
    /// Resets the peak RSS (when the kernel allows it) and reads the counters.
    fn take(store: &Store) -> Self {
        Self {
            peak_rss_reset: reset_peak_rss(),
            stats: store.stats(),
            cpu: cpu_time(),
            children: children_cpu_time(),
            t0: Instant::now(),
        }
    }
}

/// The latency of the wakes of `probed` sent in each phase.
fn wake_latencies(probed: &[(Instant, u64)], began: &[Option<Instant>; 3]) -> [Latency; 3] {
    Phase::ALL.map(|p| {
        Latency::of(
            probed
                .iter()
                .filter(|(at, _)| phase_at(began, *at) == p)
                .map(|(_, ns)| *ns)
                .collect(),
        )
    })
}

/// The subscribers' receipts by kind of event and phase in which it was published.
struct Receipts(Vec<(Kind, Phase, u64)>);

impl Receipts {
    /// Every receipt of every subscriber.
    fn of(subscribers: &[Subscriber], began: &[Option<Instant>; 3]) -> Self {
        Self(
            subscribers
                .iter()
                .flat_map(|s| s.samples.iter())
                .map(|(k, at, ns)| (*k, phase_at(began, *at), *ns))
                .collect(),
        )
    }

    /// The latency of the receipts `f` picks.
    fn latency(&self, f: &dyn Fn(Kind, Phase) -> bool) -> Latency {
        Latency::of(
            self.0
                .iter()
                .filter(|(k, p, _)| f(*k, *p))
                .map(|(_, _, ns)| *ns)
                .collect(),
        )
    }
}

/// Runs the workload once, in a fresh temporary workspace, store and service.
pub async fn run(settings: Settings) -> anyhow::Result<Outcome> {
    let bench = Bench::open(&settings)?;
    let (store, svc, clock) = (&bench.store, &bench.svc, &bench.clock);
    let stop = CancellationToken::new();
    let readers: Vec<_> = (0..settings.subscribers)
        .map(|_| tokio::spawn(subscribe(svc.live(), stop.clone())))
        .collect();

    let probe = tokio::spawn(wake_probe(stop.clone()));
    let base = Baseline::take(store.as_ref());
    clock.start();
    let runs = bench.start_runs(settings.runs).await?;
    clock.enter(Phase::Streaming);
    for run in &runs {
        svc.wait_run(run).await;
    }
    svc.bus().flush().await;
    store.flush()?;
    stop.cancel();
    let mut subscribers = Vec::new();
    for r in readers {
        subscribers.push(r.await?);
    }
    let wall = base.t0.elapsed();
    let cpu = cpu_time().saturating_sub(base.cpu);
    let children_cpu = children_cpu_time().saturating_sub(base.children);
    let probed = probe.await?;
    let began = clock.began();
    let phase_began = began.map(|b| b.map(|b| b.saturating_duration_since(base.t0)));
    let peak_rss_kib = peak_rss_kib();
    let store_stats = diff(store.stats(), base.stats);

    let committed = bench.committed(&runs)?;
    let missing = committed.missing_from(&subscribers);
    svc.shutdown().await;

    let receipts = Receipts::of(&subscribers, &began);
    Ok(Outcome {
        settings,
        wall,
        cpu,
        children_cpu,
        wake_latency: wake_latencies(&probed, &began),
        peak_rss_kib,
        peak_rss_reset: base.peak_rss_reset,
        statuses: committed.statuses,
        session_latency: receipts.latency(&|k, _| k == Kind::Session),
        run_latency: receipts.latency(&|k, _| k == Kind::Run),
        workspace_latency: receipts.latency(&|k, _| k == Kind::Workspace),
        all_latency: receipts.latency(&|_, _| true),
        phase_latency: Phase::ALL.map(|p| receipts.latency(&|_, q| q == p)),
        phase_began,
        subscribers,
        raw_deltas: bench.deltas.load(Ordering::Relaxed),
        agent_calls: bench.counters.agent_calls.load(Ordering::Relaxed),
        query_calls: bench.counters.query_calls.load(Ordering::Relaxed),
        stored_message_deltas: committed.stored_message_deltas,
        store: store_stats,
        checked: committed.expected.len(),
        missing,
    })
}
