//! Percentiles and the results of a round.

use super::*;

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
/// What the store's writer committed during a round (its counters' difference).
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreWrites {
    /// Transactions.
    pub commits: u64,
    /// Of those, with an fsync (`synchronous = FULL`).
    pub synced_commits: u64,
    /// Run event batches.
    pub batches: u64,
    /// Session and workspace stream batches.
    pub stream_batches: u64,
    /// Run event bytes.
    pub bytes: u64,
}

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
    /// What the store's writer committed.
    pub writes: StoreWrites,
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

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Round {
    pub(super) fn new(
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
