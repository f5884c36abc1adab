//! Shared set-up: journals (the analogues of LangGraph's checkpointers), engines, demo graphs
//! and the result checks that mirror the anchor's `check_*_result`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail, ensure};
use serde::Serialize;
use serde_json::{Value, json};
use trellis_graph::{
    Durability, Engine, EngineConfig, Graph, Journal, MemoryJournal, NullJournal, RunOutcome, demo,
};
use trellis_protocol::RunStatus;
use trellis_store::{Store, StoreOptions, StoreStats, Synchronous};

/// Node steps of one G1 run (code, test ✗, enrich, test ✗, enrich, test, security, lint, DONE).
pub const G1_NODE_STEPS: usize = 9;

/// Where a case's runs are recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Backend {
    /// [`NullJournal`]: nothing recorded (LangGraph without a checkpointer).
    None,
    /// [`MemoryJournal`]: every event kept in memory (LangGraph's `InMemorySaver`).
    Memory,
    /// [`Store`]: the SQLite WAL journal with the given `synchronous` (LangGraph's `SqliteSaver`).
    Durable(#[serde(skip)] Synchronous),
}

impl Backend {
    /// Short key used in tables (`none`, `memory`, `durable_full`, `durable_normal`).
    pub fn key(self) -> &'static str {
        match self {
            Backend::None => "none",
            Backend::Memory => "memory",
            Backend::Durable(Synchronous::Full) => "durable_full",
            Backend::Durable(Synchronous::Normal) => "durable_normal",
        }
    }

    /// Parses [`Backend::key`].
    pub fn parse(key: &str) -> anyhow::Result<Self> {
        Ok(match key {
            "none" => Backend::None,
            "memory" => Backend::Memory,
            "durable_full" => Backend::Durable(Synchronous::Full),
            "durable_normal" => Backend::Durable(Synchronous::Normal),
            other => {
                bail!("unknown backend `{other}` (none, memory, durable_full, durable_normal)")
            }
        })
    }
}

/// Short key of a durability mode (`async`, `sync`).
pub fn durability_key(d: Durability) -> &'static str {
    match d {
        Durability::Async => "async",
        Durability::Sync => "sync",
    }
}

/// Parses [`durability_key`].
pub fn parse_durability(key: &str) -> anyhow::Result<Durability> {
    match key {
        "async" => Ok(Durability::Async),
        "sync" => Ok(Durability::Sync),
        other => bail!("unknown durability `{other}` (async, sync)"),
    }
}

/// An engine over a fresh journal; keeps the store (if any) for its counters.
pub struct Setup {
    /// The engine.
    pub engine: Engine,
    /// The SQLite store behind a durable backend.
    pub store: Option<Arc<Store>>,
}

impl Setup {
    /// A fresh journal of kind `backend` (a durable one in a new file `dir/name.db`).
    pub fn new(
        backend: Backend,
        durability: Durability,
        dir: &Path,
        name: &str,
    ) -> anyhow::Result<Self> {
        let config = EngineConfig {
            durability,
            ..EngineConfig::default()
        };
        let (journal, store): (Arc<dyn Journal>, _) = match backend {
            Backend::None => (Arc::new(NullJournal), None),
            Backend::Memory => (Arc::new(MemoryJournal::new()), None),
            Backend::Durable(synchronous) => {
                let store = open_fresh_store(&dir.join(format!("{name}.db")), synchronous)?;
                (store.clone(), Some(store))
            }
        };
        Ok(Self {
            engine: Engine::with_config(journal, config),
            store,
        })
    }

    /// The store's writer counters (zero for in-memory backends).
    pub fn store_stats(&self) -> StoreStats {
        self.store.as_ref().map(|s| s.stats()).unwrap_or_default()
    }
}

/// Opens a store at `path`, deleting any previous file (and its WAL) first.
pub fn open_fresh_store(path: &Path, synchronous: Synchronous) -> anyhow::Result<Arc<Store>> {
    remove_db(path)?;
    Store::open(
        path,
        StoreOptions {
            synchronous,
            ..StoreOptions::default()
        },
    )
    .with_context(|| format!("opening store {}", path.display()))
}

/// Deletes a database file with its `-wal` and `-shm` siblings.
pub fn remove_db(path: &Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", p.display())),
        }
    }
    Ok(())
}

/// Builds demo graph `name` with `params`.
pub fn graph(name: &str, params: Value) -> anyhow::Result<Arc<Graph>> {
    Ok(Arc::new(demo::build(name, &params).with_context(|| {
        format!("building demo graph `{name}`")
    })?))
}

/// G1 with every node sleeping `sleep_us` and an approval interrupt at `approval_stage`.
pub fn g1_graph(sleep_us: u64, approval_stage: Option<&str>) -> anyhow::Result<Arc<Graph>> {
    let mut params = json!({ "sleep_us": sleep_us });
    if let Some(stage) = approval_stage {
        params["approval_stage"] = json!(stage);
    }
    graph("feature", params)
}

/// The anchor's `check_g1_result`: DONE, test_generation on its 3rd attempt after 2
/// enrichments, 1 user message + 9 node messages.
pub fn check_g1(out: &RunOutcome) -> anyhow::Result<()> {
    ensure!(
        out.status == RunStatus::Succeeded,
        "G1 run ended {:?}: {:?}",
        out.status,
        out.error
    );
    ensure!(
        out.state.get("outcome") == Some(&json!("DONE")),
        "G1 outcome {:?}",
        out.state.get("outcome")
    );
    let attempt = out
        .state
        .get_in("stage_results", "test_generation")
        .and_then(|r| r.get("attempt"));
    ensure!(
        attempt == Some(&json!(3)),
        "test_generation attempt {attempt:?}"
    );
    let enrich = out.counters.get("enrichment_attempts:test_generation");
    ensure!(enrich == Some(&2), "enrichment attempts {enrich:?}");
    let messages = out
        .state
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    ensure!(
        messages == 1 + G1_NODE_STEPS,
        "G1 run has {messages} messages"
    );
    Ok(())
}

/// The anchor's `check_g2_result`: `n` results, and every 7th worker (from 0) failed.
pub fn check_g2(out: &RunOutcome, n: usize) -> anyhow::Result<()> {
    ensure!(
        out.status.is_final(),
        "G2 run ended {:?}: {:?}",
        out.status,
        out.error
    );
    let results = out
        .state
        .get("results")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    ensure!(results == n, "G2 run has {results} results, expected {n}");
    let failed = out.state.get("n_failed").and_then(Value::as_u64);
    let expected = (0..n).filter(|i| i % 7 == 0).count() as u64;
    ensure!(
        failed == Some(expected),
        "G2 n_failed {failed:?}, expected {expected}"
    );
    Ok(())
}

/// The anchor's G3 assertion: the counter equals the chain length.
pub fn check_g3(out: &RunOutcome, n: usize) -> anyhow::Result<()> {
    ensure!(
        out.status == RunStatus::Succeeded,
        "G3 run ended {:?}: {:?}",
        out.status,
        out.error
    );
    let counter = out.state.get("counter").and_then(Value::as_u64);
    ensure!(
        counter == Some(n as u64),
        "G3 counter {counter:?}, expected {n}"
    );
    Ok(())
}

/// Commits and fsyncs per run between two snapshots of the store counters.
pub fn commits_per_run(
    before: StoreStats,
    after: StoreStats,
    runs: usize,
) -> crate::results::Commits {
    let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / runs.max(1) as f64;
    crate::results::Commits {
        commits: per(after.commits, before.commits),
        fsyncs: per(after.synced_commits, before.synced_commits),
    }
}

/// Times `n` runs of `graph` (after `warmup` untimed ones), each a fresh run started from
/// `input()` and awaited to its outcome, every outcome checked by `check`. Commits per run
/// are counted over every run of the case, warm-up included (all runs are identical).
pub async fn measure(
    key: String,
    setup: &Setup,
    graph: &Arc<Graph>,
    input: impl Fn() -> Value,
    (n, warmup): (usize, usize),
    check: impl Fn(&RunOutcome) -> anyhow::Result<()>,
) -> anyhow::Result<crate::results::Case> {
    let before = setup.store_stats();
    let runs = std::cell::Cell::new(0usize);
    let stats = crate::stats::timed_loop(
        n,
        warmup,
        || {
            runs.set(runs.get() + 1);
            let (engine, graph, input) = (setup.engine.clone(), graph.clone(), input());
            async move { Ok(engine.run(graph, input).await?) }
        },
        |out| check(out),
    )
    .await
    .with_context(|| format!("case {key}"))?;
    let commits = setup
        .store
        .as_ref()
        .map(|_| commits_per_run(before, setup.store_stats(), runs.get()));
    Ok(crate::results::Case {
        key,
        stats,
        commits_per_run: commits,
    })
}
