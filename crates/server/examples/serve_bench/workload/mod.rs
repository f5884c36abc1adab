//! The workload of the `trellis serve` benchmark, shared by the `serve_bench` example and its
//! smoke test (`tests/suite/serve_bench.rs`, which includes this module by path).
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
pub(super) const CONFIG: &str = r#"
[index.embedding]
backend = "none"

[agents]
test_command = "python3 -B -m unittest -q"
"#;

/// The access token of the benchmark's server.
pub const TOKEN: &str = "serve-bench-0123456789abcdef0123";

/// What every run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// `architecture_discussion` without its documentation stage: BM25 retrieval (one
    /// queries call) and the analysis agent (one report call), no git work (its agent only
    /// reads).
    Discussion,
    /// The trivial G1 graph of the LangGraph server anchor in Trellis's terms: nine stages in
    /// a row (`.trellis/workflows/g1.yaml`), each a tool-less agent making one report call;
    /// no retrieval, no git work.
    G1,
}

/// The G1 workflow: nine one-agent stages in a row, as the anchor's nine node steps.
const G1_YAML: &str = "metadata:\n  name: \"g1\"\n  description: \"Nine one-agent steps in a row (the serve benchmark's G1)\"\nstages:\n";

/// The G1 steps' role: no tools, one report.
const G1_ROLE: &str =
    "name: g1_step\nmodel_role: planner\nrole: You report.\nobjective: Report.\ntools: []\n";

impl Workload {
    /// From the `--workload` flag.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "discussion" => Some(Self::Discussion),
            "g1" => Some(Self::G1),
            _ => None,
        }
    }

    /// The `--workload` flag's value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Discussion => "discussion",
            Self::G1 => "g1",
        }
    }

    /// What a run is, for the JSON.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Discussion => {
                "architecture_discussion (decision_documentation skipped, input approve)"
            }
            Self::G1 => "g1 (nine one-agent stages in a row, input approve)",
        }
    }

    /// Model calls per run: (retrieval queries, agent reports).
    pub fn calls(self) -> (usize, usize) {
        match self {
            Self::Discussion => (1, 1),
            Self::G1 => (0, 9),
        }
    }

    /// The body of `POST /api/workflows` of run `i`.
    pub(super) fn body(self, i: usize) -> Value {
        match self {
            Self::Discussion => json!({
                "request": format!("Why is stock kept in memory? (question {i})"),
                "workflow": "architecture_discussion",
                "skip": ["decision_documentation"],
                "input": "approve",
            }),
            Self::G1 => json!({
                "request": format!("Run G1 (run {i})"),
                "workflow": "g1",
                "input": "approve",
            }),
        }
    }

    /// Writes what the workload needs into the workspace at `root`.
    fn install(self, root: &std::path::Path) -> std::io::Result<()> {
        if self == Self::G1 {
            let mut yaml = G1_YAML.to_owned();
            for step in 1..=9 {
                let next = if step == 9 {
                    "\"DONE\"".to_owned()
                } else {
                    (step + 1).to_string()
                };
                yaml.push_str(&format!(
                    "  - stage_id: {step}\n    name: \"step_{step}\"\n    parallel_agents:\n      - agent: \"g1_step\"\n    routing:\n      next_stage_on_success: {next}\n      next_stage_on_failure: \"ABORT\"\n      max_attempts: 1\n"
                ));
            }
            std::fs::create_dir_all(root.join(".trellis/workflows"))?;
            std::fs::write(root.join(".trellis/workflows/g1.yaml"), yaml)?;
            std::fs::create_dir_all(root.join(".trellis/agents"))?;
            std::fs::write(root.join(".trellis/agents/g1_step.yaml"), G1_ROLE)?;
        }
        Ok(())
    }
}

/// The model's pacing.
#[derive(Clone, Copy, Debug)]
pub struct Pacing {
    /// Text deltas of the retrieval queries call.
    pub query_chunks: usize,
    /// Text deltas of an agent's report call.
    pub agent_chunks: usize,
    /// Time between two deltas of a call (from the call's start).
    pub chunk: Duration,
    /// What every run is.
    pub workload: Workload,
}

impl Pacing {
    /// Model time of one run (its calls' deltas × the pace).
    pub fn per_run(&self) -> Duration {
        let (queries, reports) = self.workload.calls();
        let deltas = queries * self.query_chunks + reports * self.agent_chunks;
        self.chunk * u32::try_from(deltas).unwrap_or(u32::MAX)
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
    /// A second server over the same PostgreSQL database, executing nothing, which the
    /// clients follow the runs from ([`Server::start_on`]).
    other: Option<(Arc<Service>, SocketAddr)>,
    /// What the model was asked.
    pub counters: Arc<ModelCounters>,
    /// The executing server's store (its writer's counters).
    store: Arc<Store>,
    workload: Workload,
    stop: CancellationToken,
    served: Vec<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// Serves `service` (the workspace at `root`) on a free 127.0.0.1 port until `stop`.
async fn serve_on(
    root: &std::path::Path,
    service: Arc<Service>,
    stop: CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let state = AppState::new(
        vec![Workspace {
            id: "inventory".into(),
            root: root.to_owned(),
            service,
        }],
        ServerSettings {
            token: Token::new(TOKEN),
            allowed_hosts: trellis_server::loopback_hosts(addr.port()),
            limits: Limits::default(),
        },
    )?;
    let served = tokio::spawn(trellis_server::serve(listener, state, async move {
        stop.cancelled().await;
    }));
    Ok((addr, served))
}

pub(super) fn model(pacing: Pacing, counters: Arc<ModelCounters>) -> PacedModel {
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
    /// A fresh workspace, store and service, served on a free 127.0.0.1 port; over the
    /// workspace's SQLite file, or over the PostgreSQL database `db` when given, with a second server
    /// of the workspace over its own connection to it (as another machine's `trellis serve`
    /// would be), on a port of its own and on the same runtime: the runs execute in the
    /// first, the clients follow them from the second, whose events come through the
    /// database (committed there, then its notification).
    pub fn start_on(pacing: Pacing, db: Option<&str>) -> anyhow::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("server")
            .enable_all()
            .build()?;
        let ws = trellis_test_support::example_repo("inventory", CONFIG)?;
        let root = ws.path().canonicalize()?;
        pacing.workload.install(&root)?;
        let open = || -> anyhow::Result<Arc<Store>> {
            Ok(match db {
                Some(url) => Store::connect(url, None, StoreOptions::default())?,
                None => Store::open_workspace(&root, StoreOptions::default())?,
            })
        };
        let store = open()?;
        let runtime = Runtime::open(&root, &[], &[], store.clone())?;
        let counters = Arc::new(ModelCounters::default());
        let model = model(pacing, counters.clone());
        runtime.models().install("local", Arc::new(model));
        let other = match db {
            Some(_) => Some(Runtime::open(&root, &[], &[], open()?)?),
            None => None,
        };
        let stop = CancellationToken::new();
        let (service, addr, other, served) = rt.block_on(async {
            let service = Service::start(Arc::new(runtime), ServiceOptions::default());
            let (addr, served) = serve_on(&root, service.clone(), stop.clone()).await?;
            let mut all = vec![served];
            let other = match other {
                Some(runtime) => {
                    let follower = Service::start(Arc::new(runtime), ServiceOptions::default());
                    let (at, served) = serve_on(&root, follower.clone(), stop.clone()).await?;
                    all.push(served);
                    Some((follower, at))
                }
                None => None,
            };
            anyhow::Ok((service, addr, other, all))
        })?;
        Ok(Self {
            rt,
            ws: Some(ws),
            service,
            addr,
            other,
            counters,
            store,
            workload: pacing.workload,
            stop,
            served,
        })
    }

    /// Where the clients follow the runs: the second server when there is one.
    pub fn follow_addr(&self) -> SocketAddr {
        self.other.as_ref().map_or(self.addr, |(_, a)| *a)
    }

    /// One round: `runs` concurrent runs, `clients_per_run` WebSocket clients each.
    pub fn round(&self, runs: usize, clients_per_run: usize) -> anyhow::Result<Round> {
        let workload = self.workload;
        let addr = self.addr;
        let follow = self.follow_addr();
        let live = self.service.live();
        let peak_reset = usage::reset_peak_rss();
        let rss_before_kib = usage::rss_kib();
        let load_before = loadavg();
        let stat0 = proc_stat_busy();
        let own0 = usage::cpu_time() + usage::children_cpu_time();
        let store0 = self.store.stats();
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
                rt.block_on(client_round(
                    addr,
                    follow,
                    workload,
                    runs,
                    clients_per_run,
                    live,
                ))
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
            let n = self.service.run_events(&id, 1, None)?.len();
            stored.insert(run.clone(), n as u64);
            statuses.insert(
                run.clone(),
                format!("{:?}", self.service.run_record(run)?.summary.status),
            );
        }
        let store1 = self.store.stats();
        let writes = StoreWrites {
            commits: store1.commits - store0.commits,
            synced_commits: store1.synced_commits - store0.synced_commits,
            batches: store1.batches - store0.batches,
            stream_batches: store1.stream_batches - store0.stream_batches,
            bytes: store1.bytes_written - store0.bytes_written,
        };
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
                writes,
            },
        ))
    }

    /// Stops the server and its service, and removes the workspace.
    pub fn shutdown(mut self) {
        self.stop.cancel();
        for served in std::mem::take(&mut self.served) {
            let _ = self.rt.block_on(served);
        }
        drop(self.other.take());
        drop(self.ws.take());
    }
}

/// `(busy, total, cpus)`: busy and total ticks of all CPUs (the `cpu` line of `/proc/stat`),
/// and how many CPUs it counts (`cpuN` lines).
pub(super) fn proc_stat_busy() -> Option<(u64, u64, usize)> {
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
pub(super) fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}

mod clients;
mod stats;

pub use clients::*;
pub use stats::*;
