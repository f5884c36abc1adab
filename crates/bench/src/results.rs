//! What the Trellis side measured, grouped by area (serialised next to the report as JSON).

use serde::{Deserialize, Serialize};

use crate::stats::Stats;

/// Store transactions per run, and how many of them fsynced the WAL.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Commits {
    /// Transactions committed per run (`StoreStats::commits`).
    pub commits: f64,
    /// Of those, committed with `synchronous = FULL`, one WAL fsync each
    /// (`StoreStats::synced_commits`).
    pub fsyncs: f64,
}

impl Commits {
    /// `commits / fsyncs` with `digits` decimals.
    pub fn show(c: Option<Self>, digits: usize) -> String {
        c.map_or_else(
            || "–".into(),
            |c| format!("{:.digits$} / {:.digits$}", c.commits, c.fsyncs),
        )
    }
}

/// One latency case: a key like `memory/async` or `N=100/none` and its samples.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Case {
    /// `<backend>/<durability>` (G1), `N=<n>/<backend>` (G2), `len=<n>/<backend>` (G3).
    pub key: String,
    /// Per-run wall time.
    pub stats: Stats,
    /// Store transactions and WAL fsyncs per run.
    pub commits_per_run: Option<Commits>,
}

/// The cases of one area with the load average around them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Area {
    /// 1-minute load average before the first case.
    pub load_start: f64,
    /// 1-minute load average after the last case.
    pub load_end: f64,
    /// The cases, in measurement order.
    pub cases: Vec<Case>,
}

impl Area {
    /// The case named `key`.
    pub fn get(&self, key: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.key == key)
    }
}

/// One configuration of the concurrent-throughput benchmark (measured in its own process).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Throughput {
    /// `<backend>/<durability>/sleep=<us>`.
    pub key: String,
    /// Runs in flight at once.
    pub concurrency: usize,
    /// Microseconds each node sleeps.
    pub sleep_us: u64,
    /// Timed runs (after one warm-up wave).
    pub runs: usize,
    /// Wall time of the timed runs, seconds.
    pub elapsed_s: f64,
    /// Runs per second.
    pub runs_per_s: f64,
    /// `concurrency / (9 × sleep)`: the throughput if the engine cost nothing.
    pub ideal_runs_per_s: Option<f64>,
    /// CPU time (all threads) per run, ms.
    pub cpu_ms_per_run: f64,
    /// Latency of one run.
    pub latency: Stats,
    /// Resident set before the runtime and journal were created, MiB.
    pub rss_before_mib: f64,
    /// Peak resident set of the process, MiB.
    pub peak_rss_mib: f64,
    /// Store transactions and WAL fsyncs per run.
    pub commits_per_run: Option<Commits>,
    /// Load averages around the measurement.
    pub load: [f64; 2],
}

/// Bytes per G1 run on disk.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Size {
    /// `durable_full/<durability>`.
    pub key: String,
    /// Runs written.
    pub runs: usize,
    /// The empty store after `VACUUM` (schema only), bytes.
    pub empty_bytes: u64,
    /// The store after the runs, a WAL checkpoint and `VACUUM` (file + WAL), bytes.
    pub file_bytes: u64,
    /// `file_bytes / runs` (what the anchor reports).
    pub bytes_per_run: f64,
    /// `(file_bytes - empty_bytes) / runs`.
    pub bytes_per_run_net: f64,
    /// Compressed event-blob bytes per run as written by the store.
    pub blob_bytes_per_run: f64,
    /// Events per run.
    pub events_per_run: f64,
    /// Store transactions and WAL fsyncs per run.
    pub commits_per_run: Commits,
}

/// Resume of a paused G1 run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Resume {
    /// `memory` or `durable_full`.
    pub key: String,
    /// Start to the pause at `security_review`.
    pub run_until_interrupt: Stats,
    /// `engine.resume(.., Answer approve)` to completion (loads and replays the log, then
    /// runs security_review, lint_and_format, DONE).
    pub resume_to_end: Stats,
}

/// Cold start of the `trellis` CLI.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cold {
    /// The binary used, if found.
    pub cli: Option<String>,
    /// Why a case could not be measured.
    pub not_measured: Option<String>,
    /// `trellis --help` wall time (process start + argument parsing + exit).
    pub help: Option<Stats>,
    /// `trellis --db <db> runs resume <run> --answer security_review=approve` wall time.
    pub resume: Option<Stats>,
    /// The exact resume command line (with placeholders).
    pub command: String,
    /// Load averages around the measurement.
    pub load: [f64; 2],
}

/// Everything measured on the Trellis side.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Trellis {
    /// G1 latency.
    pub g1: Option<Area>,
    /// G2 fan-out latency.
    pub g2: Option<Area>,
    /// G3 chain latency.
    pub g3: Option<Area>,
    /// 100 concurrent runs.
    pub concurrent: Option<Vec<Throughput>>,
    /// Bytes per run.
    pub size: Option<Vec<Size>>,
    /// Resume latency.
    pub resume: Option<Vec<Resume>>,
    /// Cold start.
    pub cold: Option<Cold>,
}
