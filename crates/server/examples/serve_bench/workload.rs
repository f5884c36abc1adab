//! The workload of the `trellis serve` benchmark, shared by the `serve_bench` example and its
//! smoke test (`tests/suite/serve_bench.rs`, which includes this file by path).
//!
//! [`Server::start`]: a temporary copy of `examples/inventory` (BM25 retrieval,
//! `agents.test_command` configured), a [`Service`] whose models are a [`PacedModel`], served
//! by [`trellis_server::serve`] on a free 127.0.0.1 port, on its own tokio runtime (2 worker
//! threads, as `trellis serve` builds it).
//!
//! [`Server::round`]: on one other thread (a current-thread runtime: the clients' CPU time is
//! that thread's), `runs × clients_per_run` WebSocket clients connect to `/api/events` over
//! loopback (untimed); then, timed, `runs` tasks each `POST /api/workflows` (raw HTTP/1.1, one
//! connection each) and hand the run id to the run's clients, which subscribe to `run:<id>`
//! from `since` 0 and read until `workflow:completed`. A tap on [`Service::live`] (on the
//! clients' thread) records when the service published every event, so that each frame's
//! latency is its receipt minus its [`LiveEvent::published_at`](trellis_core::service::LiveEvent::published_at),
//! both `Instant`s of this process.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;
use trellis_core::Runtime;
use trellis_core::service::{LiveEvent, Service, ServiceOptions};
use trellis_protocol::{RunId, ServiceEventBody, StreamId};
use trellis_server::{AppState, Limits, Settings as ServerSettings, Token, Workspace};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::TempWorkspace;
use trellis_test_support::paced::{self, PacedModel, Reply};
use trellis_test_support::usage;

/// BM25 retrieval only (no embedding model to load), and a configured test command (without
/// one, every run start detects it by running Python).
const CONFIG: &str = r#"
[index.embedding]
backend = "none"

[agents]
test_command = "python3 -B -m unittest -q"
"#;

/// The access token of the benchmark's server.
pub const TOKEN: &str = "serve-bench-0123456789abcdef0123";

/// The workflow every run uses.
pub const WORKFLOW: &str = "architecture_discussion";

/// The model's pacing.
#[derive(Clone, Copy, Debug)]
pub struct Pacing {
    /// Text deltas of the retrieval queries call.
    pub query_chunks: usize,
    /// Text deltas of the analysis agent's report call.
    pub agent_chunks: usize,
    /// Time between two deltas of a call (from the call's start).
    pub chunk: Duration,
}

impl Pacing {
    /// Model time of one run (one queries call, one report call).
    pub fn per_run(&self) -> Duration {
        self.chunk * u32::try_from(self.query_chunks + self.agent_chunks).unwrap_or(u32::MAX)
    }
}

/// Counts what the model was asked.
#[derive(Debug, Default)]
pub struct ModelCounters {
    /// Retrieval query calls.
    pub query_calls: AtomicU64,
    /// Agent report calls.
    pub agent_calls: AtomicU64,
    /// Paced model time promised, all calls, in nanoseconds (pieces × pace).
    pub paced_ns: AtomicU64,
}

/// The served workspace, its service and the runtime they run on.
pub struct Server {
    /// The server's runtime (2 worker threads).
    rt: tokio::runtime::Runtime,
    ws: Option<TempWorkspace>,
    /// The workspace's service.
    pub service: Arc<Service>,
    /// Where it listens.
    pub addr: SocketAddr,
    /// What the model was asked.
    pub counters: Arc<ModelCounters>,
    stop: CancellationToken,
    served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

fn model(pacing: Pacing, counters: Arc<ModelCounters>) -> PacedModel {
    PacedModel::new("paced-serve-bench", move |r| {
        let reply = if paced::is_queries(r) {
            counters.query_calls.fetch_add(1, Ordering::Relaxed);
            Reply {
                pieces: paced::query_pieces(pacing.query_chunks),
                pace: pacing.chunk,
            }
        } else {
            counters.agent_calls.fetch_add(1, Ordering::Relaxed);
            Reply {
                pieces: paced::report_pieces(pacing.agent_chunks),
                pace: pacing.chunk,
            }
        };
        let n = u32::try_from(reply.pieces.len()).unwrap_or(u32::MAX);
        let ns = u64::try_from((reply.pace * n).as_nanos()).unwrap_or(u64::MAX);
        counters.paced_ns.fetch_add(ns, Ordering::Relaxed);
        reply
    })
}

impl Server {
    /// A fresh workspace, store and service, served on a free 127.0.0.1 port.
    pub fn start(pacing: Pacing) -> anyhow::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("server")
            .enable_all()
            .build()?;
        let ws = trellis_test_support::example_repo("inventory", CONFIG)?;
        let root = ws.path().canonicalize()?;
        let store = Arc::new(Store::open_workspace(&root, StoreOptions::default())?);
        let runtime = Runtime::open(&root, &[], &[], store)?;
        let counters = Arc::new(ModelCounters::default());
        let model = model(pacing, counters.clone());
        runtime.models.install("local", Arc::new(model));
        let stop = CancellationToken::new();
        let (service, addr, served) = rt.block_on(async {
            let service = Service::start(Arc::new(runtime), ServiceOptions::default());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let state = AppState::new(
                vec![Workspace {
                    id: "inventory".into(),
                    root: root.clone(),
                    service: service.clone(),
                }],
                ServerSettings {
                    token: Token::new(TOKEN),
                    allowed_hosts: trellis_server::loopback_hosts(addr.port()),
                    limits: Limits::default(),
                },
            )?;
            let signal = stop.clone();
            let served = tokio::spawn(trellis_server::serve(listener, state, async move {
                signal.cancelled().await;
            }));
            anyhow::Ok((service, addr, served))
        })?;
        Ok(Self {
            rt,
            ws: Some(ws),
            service,
            addr,
            counters,
            stop,
            served: Some(served),
        })
    }

    /// One round: `runs` concurrent runs, `clients_per_run` WebSocket clients each.
    pub fn round(&self, runs: usize, clients_per_run: usize) -> anyhow::Result<Round> {
        let addr = self.addr;
        let live = self.service.live();
        let peak_reset = usage::reset_peak_rss();
        let rss_before_kib = usage::rss_kib();
        let load_before = loadavg();
        let stat0 = proc_stat_busy();
        let own0 = usage::cpu_time() + usage::children_cpu_time();
        let at0 = Instant::now();
        let calls0 = (
            self.counters.query_calls.load(Ordering::Relaxed),
            self.counters.agent_calls.load(Ordering::Relaxed),
            self.counters.paced_ns.load(Ordering::Relaxed),
        );
        let clients = std::thread::Builder::new()
            .name("bench-clients".into())
            .spawn(move || -> anyhow::Result<ClientRound> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(client_round(addr, runs, clients_per_run, live))
            })?
            .join()
            .map_err(|_| anyhow::anyhow!("the client thread panicked"))??;
        let stat1 = proc_stat_busy();
        let stat_wall = at0.elapsed().as_secs_f64();
        let own = usage::cpu_time() + usage::children_cpu_time() - own0;
        let peak_rss_kib = usage::peak_rss_kib();
        let load_after = loadavg();
        // What the store holds for every run, to check what the clients saw against.
        let mut stored = HashMap::new();
        let mut statuses = HashMap::new();
        for run in clients.runs.keys() {
            let id = RunId::from_string(run);
            self.rt.block_on(self.service.wait_run(&id));
            let n = self.service.runtime().store.events(&id, 1, None)?.len();
            stored.insert(run.clone(), n as u64);
            statuses.insert(
                run.clone(),
                format!(
                    "{:?}",
                    self.service.runtime().store.get_run(run)?.summary.status
                ),
            );
        }
        let model_calls = (
            self.counters.query_calls.load(Ordering::Relaxed) - calls0.0,
            self.counters.agent_calls.load(Ordering::Relaxed) - calls0.1,
            Duration::from_nanos(self.counters.paced_ns.load(Ordering::Relaxed) - calls0.2),
        );
        let other_busy = match (stat0, stat1) {
            (Some((b0, t0, cpus)), Some((b1, t1, _))) if t1 > t0 && cpus > 0 => {
                // Ticks per second, from the ticks all CPUs counted over the wall time.
                let hz = (t1 - t0) as f64 / (cpus as f64 * stat_wall);
                let busy = (b1 - b0) as f64 / hz;
                Some(((busy - own.as_secs_f64()) / stat_wall).max(0.0))
            }
            _ => None,
        };
        Ok(Round::new(
            runs,
            clients_per_run,
            clients,
            stored,
            statuses,
            model_calls,
            RoundMachine {
                rss_before_kib,
                peak_rss_kib,
                peak_reset,
                load_before,
                load_after,
                other_cores_busy: other_busy,
            },
        ))
    }

    /// Stops the server and its service, and removes the workspace.
    pub fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(served) = self.served.take() {
            let _ = self.rt.block_on(served);
        }
        drop(self.ws.take());
    }
}

/// `(busy, total, cpus)`: busy and total ticks of all CPUs (the `cpu` line of `/proc/stat`),
/// and how many CPUs it counts (`cpuN` lines).
fn proc_stat_busy() -> Option<(u64, u64, usize)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some((total - idle, total, cpus))
}

/// The load average (1, 5, 15 minutes) from `/proc/loadavg`.
pub fn loadavg() -> [f64; 3] {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = s.split_whitespace().map(|x| x.parse().unwrap_or(f64::NAN));
    [
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
    ]
}

/// Milliseconds since the Unix epoch, as a float.
fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(addr: SocketAddr) -> anyhow::Result<Socket> {
    let mut req = format!("ws://{addr}/api/events").into_client_request()?;
    req.headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse()?);
    let (ws, _) = tokio_tungstenite::connect_async(req).await?;
    Ok(ws)
}

/// `POST /api/workflows` over a fresh connection (HTTP/1.1, `Connection: close`): the run id.
async fn start_run(addr: SocketAddr, i: usize) -> anyhow::Result<String> {
    let body = json!({
        "request": format!("Why is stock kept in memory? (question {i})"),
        "workflow": WORKFLOW,
        "skip": ["decision_documentation"],
        "input": "approve",
    })
    .to_string();
    let req = format!(
        "POST /api/workflows HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    tcp.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP response: {text}"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    anyhow::ensure!(status == "201", "POST /api/workflows: {head}\n{body}");
    let v: Value = serde_json::from_str(body)?;
    v["run"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no run id in {v}"))
}

/// The fields of a server frame the clients read (the event body is skipped).
#[derive(Deserialize)]
struct In<'a> {
    #[serde(rename = "type", borrow)]
    ty: &'a str,
    #[serde(default, borrow)]
    name: Option<&'a str>,
    #[serde(default, borrow)]
    stream: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    ts: Option<i64>,
}

/// One event frame as a client received it.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    /// Its seq.
    pub seq: u64,
    /// When the client had parsed it.
    pub at: Instant,
    /// The frame's `ts` (commit time, epoch ms) subtracted from the client's wall clock at
    /// receipt, in ms.
    pub ts_lag_ms: f64,
}

/// What one client saw of its run.
#[derive(Debug)]
pub struct Client {
    /// The run.
    pub run: String,
    /// When it sent its subscribe frame.
    pub subscribed_at: Instant,
    /// Every event frame of the run, in order of receipt.
    pub frames: Vec<Received>,
    /// The name of the last event frame (`workflow:completed` when the run succeeded).
    pub last_name: String,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
}

/// What the client thread measured.
#[derive(Debug)]
pub struct ClientRound {
    /// From the first POST to the last run's final frame at its last client.
    pub wall: Duration,
    /// Connecting the clients (untimed) plus `wall`, for the machine's other load.
    pub wall_with_setup: Duration,
    /// CPU of the whole process over `wall` (`getrusage(RUSAGE_SELF)`).
    pub process_cpu: Duration,
    /// CPU of the client thread over `wall` (`RUSAGE_THREAD`): the clients, the HTTP
    /// requests and the latency tap.
    pub client_cpu: Duration,
    /// CPU of the child processes (git) reaped over `wall` (`RUSAGE_CHILDREN`).
    pub children_cpu: Duration,
    /// Per run: POST sent, 201 received, first event frame at a client, last client done.
    pub runs: HashMap<String, RunTimes>,
    /// Per client.
    pub clients: Vec<Client>,
    /// When the service published each run event (`(stream, seq)`), from the tap.
    pub published: HashMap<(String, u64), Instant>,
    /// Events the tap lost to lagging.
    pub tap_lagged: u64,
    /// Runs that could not be started, with why.
    pub start_errors: Vec<String>,
}

/// One run's client-side times.
#[derive(Clone, Copy, Debug)]
pub struct RunTimes {
    /// Before the POST.
    pub submitted: Instant,
    /// The 201 parsed.
    pub created: Instant,
    /// The last of its clients received the final frame.
    pub done: Option<Instant>,
    /// Its first event frame at any of its clients.
    pub first_event: Option<Instant>,
}

const TERMINAL: [&str; 3] = ["workflow:completed", "workflow:error", "workflow:cancelled"];

/// Reads `run:<run>` on `ws` from seq 0 until the run's final frame.
async fn follow(mut ws: Socket, run: String) -> Client {
    let stream = format!("run:{run}");
    let sub = json!({ "type": "subscribe", "stream": stream, "since": 0 }).to_string();
    let subscribed_at = Instant::now();
    let mut c = Client {
        run,
        subscribed_at,
        frames: Vec::new(),
        last_name: String::new(),
        error: None,
    };
    if let Err(e) = ws.send(Message::text(sub)).await {
        c.error = Some(format!("subscribe: {e}"));
        return c;
    }
    let read = async {
        while let Some(m) = ws.next().await {
            let text = match m {
                Ok(Message::Text(t)) => t,
                Ok(Message::Close(f)) => return Some(format!("closed: {f:?}")),
                Ok(_) => continue,
                Err(e) => return Some(format!("{e}")),
            };
            let at = Instant::now();
            let f: In<'_> = match serde_json::from_str(&text) {
                Ok(f) => f,
                Err(e) => return Some(format!("bad frame {e}: {text}")),
            };
            match f.ty {
                "event" if f.stream.as_deref() == Some(stream.as_str()) => {
                    let ts_lag_ms = epoch_ms() - f.ts.unwrap_or(0) as f64;
                    c.frames.push(Received {
                        seq: f.seq.unwrap_or(0),
                        at,
                        ts_lag_ms,
                    });
                    let name = f.name.unwrap_or("");
                    if TERMINAL.contains(&name) {
                        c.last_name = name.to_owned();
                        return None;
                    }
                }
                "error" => return Some(format!("error frame: {text}")),
                _ => {}
            }
        }
        Some("connection ended".to_owned())
    };
    c.error = match tokio::time::timeout(Duration::from_secs(120), read).await {
        Ok(e) => e,
        Err(_) => Some("no final frame within 120 s".into()),
    };
    let _ = ws.close(None).await;
    c
}

/// Records when each run event was published until `stop`, then what is already queued.
async fn tap(
    mut rx: broadcast::Receiver<Arc<LiveEvent>>,
    stop: CancellationToken,
) -> (HashMap<(String, u64), Instant>, u64) {
    let mut out = HashMap::new();
    let mut lagged = 0;
    let mut take = |e: &LiveEvent| {
        if matches!(e.event, ServiceEventBody::Run(_))
            && let StreamId::Run(run) = &e.stream
        {
            out.insert((run.to_string(), e.seq), e.published_at());
        }
    };
    loop {
        let r = tokio::select! {
            biased;
            r = rx.recv() => r,
            () = stop.cancelled() => break,
        };
        match r {
            Ok(e) => take(&e),
            Err(broadcast::error::RecvError::Lagged(n)) => lagged += n,
            Err(broadcast::error::RecvError::Closed) => return (out, lagged),
        }
    }
    loop {
        match rx.try_recv() {
            Ok(e) => take(&e),
            Err(broadcast::error::TryRecvError::Lagged(n)) => lagged += n,
            Err(_) => return (out, lagged),
        }
    }
}

/// The round, on the client thread.
async fn client_round(
    addr: SocketAddr,
    runs: usize,
    per_run: usize,
    live: broadcast::Receiver<Arc<LiveEvent>>,
) -> anyhow::Result<ClientRound> {
    let setup = Instant::now();
    let stop = CancellationToken::new();
    let tapped = tokio::spawn(tap(live, stop.clone()));
    // Connect every client first (untimed).
    let mut sockets = Vec::with_capacity(runs * per_run);
    for _ in 0..runs * per_run {
        sockets.push(connect(addr).await?);
    }
    let thread0 = usage::thread_cpu_time();
    let cpu0 = usage::cpu_time();
    let children0 = usage::children_cpu_time();
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(runs);
    for i in 0..runs {
        let mine: Vec<Socket> = sockets.drain(..per_run).collect();
        tasks.push(tokio::spawn(async move {
            let submitted = Instant::now();
            let run = start_run(addr, i).await;
            let created = Instant::now();
            let run = match run {
                Ok(r) => r,
                Err(e) => return Err(format!("run {i}: {e:#}")),
            };
            let followers: Vec<_> = mine
                .into_iter()
                .map(|ws| tokio::spawn(follow(ws, run.clone())))
                .collect();
            let mut clients = Vec::new();
            for f in followers {
                match f.await {
                    Ok(c) => clients.push(c),
                    Err(e) => return Err(format!("run {i}: a client task failed: {e}")),
                }
            }
            let done = clients
                .iter()
                .filter_map(|c| c.frames.last().map(|f| f.at))
                .max();
            let first_event = clients
                .iter()
                .filter_map(|c| c.frames.first().map(|f| f.at))
                .min();
            let times = RunTimes {
                submitted,
                created,
                done,
                first_event,
            };
            Ok((run, times, clients))
        }));
    }
    let mut out = ClientRound {
        wall: Duration::ZERO,
        wall_with_setup: Duration::ZERO,
        process_cpu: Duration::ZERO,
        client_cpu: Duration::ZERO,
        children_cpu: Duration::ZERO,
        runs: HashMap::new(),
        clients: Vec::new(),
        published: HashMap::new(),
        tap_lagged: 0,
        start_errors: Vec::new(),
    };
    for t in tasks {
        match t.await? {
            Ok((run, times, clients)) => {
                out.runs.insert(run, times);
                out.clients.extend(clients);
            }
            Err(e) => out.start_errors.push(e),
        }
    }
    // The measured window ends at the last final frame; the CPU counters a little later
    // (after the awaits above, microseconds).
    let end = out
        .runs
        .values()
        .filter_map(|r| r.done)
        .max()
        .unwrap_or_else(Instant::now);
    out.client_cpu = usage::thread_cpu_time().saturating_sub(thread0);
    out.process_cpu = usage::cpu_time().saturating_sub(cpu0);
    out.children_cpu = usage::children_cpu_time().saturating_sub(children0);
    out.wall = end.saturating_duration_since(t0);
    out.wall_with_setup = setup.elapsed();
    stop.cancel();
    let (published, lagged) = tapped.await?;
    out.published = published;
    out.tap_lagged = lagged;
    Ok(out)
}

/// Percentiles of a set of samples (nearest rank), in ms.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Samples.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Stats {
    /// Of `ms`.
    pub fn of(mut ms: Vec<f64>) -> Self {
        if ms.is_empty() {
            return Self::default();
        }
        ms.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let i = ((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
            ms[i]
        };
        Self {
            n: ms.len(),
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: ms[ms.len() - 1],
            mean: ms.iter().sum::<f64>() / ms.len() as f64,
        }
    }

    /// As JSON.
    pub fn json(&self) -> Value {
        if self.n == 0 {
            return json!({ "n": 0 });
        }
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        json!({
            "n": self.n, "p50_ms": r(self.p50), "p90_ms": r(self.p90), "p99_ms": r(self.p99),
            "max_ms": r(self.max), "mean_ms": r(self.mean),
        })
    }
}

/// The machine around a round.
#[derive(Clone, Debug)]
pub struct RoundMachine {
    /// `VmRSS` before the round, KiB.
    pub rss_before_kib: Option<u64>,
    /// `VmHWM` after the round, KiB.
    pub peak_rss_kib: Option<u64>,
    /// Whether `VmHWM` was reset before the round.
    pub peak_reset: bool,
    /// Load average before and after.
    pub load_before: [f64; 3],
    /// After.
    pub load_after: [f64; 3],
    /// Other processes' CPU use during the round, in cores (`/proc/stat` busy time minus this
    /// process and its children).
    pub other_cores_busy: Option<f64>,
}

/// One measured round.
#[derive(Debug)]
pub struct Round {
    /// Runs started.
    pub runs: usize,
    /// Clients per run.
    pub clients_per_run: usize,
    /// Runs whose every client saw every stored event of the run, in order, ending with
    /// `workflow:completed`.
    pub runs_ok: usize,
    /// Why the others failed.
    pub failures: Vec<String>,
    /// First POST to the last run's final frame at its clients.
    pub wall: Duration,
    /// Event frames received by all clients.
    pub frames: u64,
    /// Run events stored per run (median).
    pub events_per_run: u64,
    /// Commit (publish) → client, frames of events published after the client subscribed.
    pub latency_live: Stats,
    /// Same, every frame (replayed ones too: published before the client subscribed).
    pub latency_all: Stats,
    /// Frames delivered from the replay (published before the client subscribed).
    pub replayed: u64,
    /// Frames with no publish time in the tap.
    pub untapped: u64,
    /// Client wall clock minus the frame's `ts` (ms resolution), live frames.
    pub ts_lag_live: Stats,
    /// `POST /api/workflows` → 201.
    pub post: Stats,
    /// POST sent → the run's first event frame at a client.
    pub submit_to_first_event: Stats,
    /// POST sent → the final frame at the run's last client.
    pub run_wall: Stats,
    /// Runs between their 201 and their final frame at their last client, on average over
    /// the round's wall time, and at most.
    pub in_flight: (f64, usize),
    /// The client thread's data.
    pub client: ClientRound,
    /// Model calls (queries, agent) and paced model time, over the round.
    pub model_calls: (u64, u64, Duration),
    /// The machine.
    pub machine: RoundMachine,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Round {
    fn new(
        runs: usize,
        clients_per_run: usize,
        client: ClientRound,
        stored: HashMap<String, u64>,
        statuses: HashMap<String, String>,
        model_calls: (u64, u64, Duration),
        machine: RoundMachine,
    ) -> Self {
        let mut failures: Vec<String> = client.start_errors.clone();
        let mut bad_runs = std::collections::HashSet::new();
        let mut live = Vec::new();
        let mut all = Vec::new();
        let mut ts_lag = Vec::new();
        let mut replayed = 0;
        let mut untapped = 0;
        let mut frames = 0;
        for c in &client.clients {
            frames += c.frames.len() as u64;
            let n = stored.get(&c.run).copied().unwrap_or(0);
            let seqs: Vec<u64> = c.frames.iter().map(|f| f.seq).collect();
            let expected: Vec<u64> = (1..=n).collect();
            let problem = if let Some(e) = &c.error {
                Some(e.clone())
            } else if c.last_name != "workflow:completed" {
                Some(format!(
                    "ended with {} (status {:?})",
                    c.last_name,
                    statuses.get(&c.run)
                ))
            } else if seqs != expected {
                Some(format!(
                    "saw {} frames, seqs {:?}…, the store has {n}",
                    seqs.len(),
                    &seqs[..seqs.len().min(5)]
                ))
            } else {
                None
            };
            if let Some(p) = problem {
                bad_runs.insert(c.run.clone());
                failures.push(format!("run {}: {p}", c.run));
            }
            for f in &c.frames {
                match client.published.get(&(c.run.clone(), f.seq)) {
                    Some(p) => {
                        let l = ms(f.at.saturating_duration_since(*p));
                        all.push(l);
                        if *p >= c.subscribed_at {
                            live.push(l);
                            ts_lag.push(f.ts_lag_ms);
                        } else {
                            replayed += 1;
                        }
                    }
                    None => untapped += 1,
                }
            }
        }
        let times: Vec<&RunTimes> = client.runs.values().collect();
        let post = times
            .iter()
            .map(|t| ms(t.created.saturating_duration_since(t.submitted)))
            .collect();
        let first = times
            .iter()
            .filter_map(|t| {
                t.first_event
                    .map(|f| ms(f.saturating_duration_since(t.submitted)))
            })
            .collect();
        let run_wall = times
            .iter()
            .filter_map(|t| t.done.map(|d| ms(d.saturating_duration_since(t.submitted))))
            .collect();
        let in_flight = {
            let mut edges: Vec<(Instant, i32)> = Vec::new();
            let mut busy = Duration::ZERO;
            for t in &times {
                if let Some(d) = t.done {
                    busy += d.saturating_duration_since(t.created);
                    edges.push((t.created, 1));
                    edges.push((d, -1));
                }
            }
            edges.sort();
            let (mut now, mut most) = (0i32, 0i32);
            for (_, e) in edges {
                now += e;
                most = most.max(now);
            }
            (
                busy.as_secs_f64() / client.wall.as_secs_f64().max(1e-9),
                usize::try_from(most).unwrap_or(0),
            )
        };
        let mut per_run: Vec<u64> = stored.values().copied().collect();
        per_run.sort_unstable();
        Self {
            runs,
            clients_per_run,
            runs_ok: client.runs.len() - bad_runs.len(),
            failures,
            wall: client.wall,
            frames,
            events_per_run: per_run.get(per_run.len() / 2).copied().unwrap_or(0),
            latency_live: Stats::of(live),
            latency_all: Stats::of(all),
            replayed,
            untapped,
            ts_lag_live: Stats::of(ts_lag),
            post: Stats::of(post),
            submit_to_first_event: Stats::of(first),
            run_wall: Stats::of(run_wall),
            in_flight,
            client,
            model_calls,
            machine,
        }
    }

    /// Successful runs per second of wall time.
    pub fn runs_per_s(&self) -> f64 {
        self.runs_ok as f64 / self.wall.as_secs_f64()
    }

    /// Event frames per second, all clients.
    pub fn frames_per_s(&self) -> f64 {
        self.frames as f64 / self.wall.as_secs_f64()
    }

    /// The server's CPU time: the process minus the client thread (git children apart).
    pub fn server_cpu(&self) -> Duration {
        self.client
            .process_cpu
            .saturating_sub(self.client.client_cpu)
    }

    /// Every live commit → client sample of the round, ms (for pooling over rounds).
    pub fn live_samples(&self) -> Vec<f64> {
        self.live_frames()
            .map(|(p, f)| ms(f.at.saturating_duration_since(p)))
            .collect()
    }

    /// Every live event ts → client sample of the round, ms.
    pub fn ts_lag_samples(&self) -> Vec<f64> {
        self.live_frames().map(|(_, f)| f.ts_lag_ms).collect()
    }

    /// The frames of events published after their client subscribed, with the publish time.
    fn live_frames(&self) -> impl Iterator<Item = (Instant, &Received)> {
        self.client.clients.iter().flat_map(move |c| {
            c.frames.iter().filter_map(move |f| {
                let p = *self.client.published.get(&(c.run.clone(), f.seq))?;
                (p >= c.subscribed_at).then_some((p, f))
            })
        })
    }
}
