//! G1 `feature_with_iterative_testing` (9 node steps per run): per-run latency with no
//! journal, the in-memory journal and the SQLite store at `synchronous` FULL and NORMAL, each
//! with pipelined (`Durability::Async`) and per-step (`Durability::Sync`) commits.
//! Mirrors the anchor's `bench_g1.py` (1000 runs in memory, 500 on SQLite, 30 warm-up).

use std::path::Path;

use trellis_graph::{Durability, demo};
use trellis_store::Synchronous;

use crate::harness::{Backend, Setup, check_g1, durability_key, g1_graph, measure};
use crate::results::Area;
use crate::stats::reps;
use crate::sys;

const WARMUP: usize = 30;

/// Runs every G1 case.
pub async fn run(scale: f64, dir: &Path) -> anyhow::Result<Area> {
    let mut area = Area {
        load_start: sys::loadavg()[0],
        ..Area::default()
    };
    let graph = g1_graph(0, None)?;
    let mut cases = vec![(Backend::None, Durability::Async, reps(1000, scale))];
    for d in [Durability::Async, Durability::Sync] {
        cases.push((Backend::Memory, d, reps(1000, scale)));
    }
    for s in [Synchronous::Full, Synchronous::Normal] {
        for d in [Durability::Async, Durability::Sync] {
            cases.push((Backend::Durable(s), d, reps(500, scale)));
        }
    }
    for (backend, durability, n) in cases {
        let key = match backend {
            Backend::None => "none".to_owned(),
            b => format!("{}/{}", b.key(), durability_key(durability)),
        };
        let setup = Setup::new(
            backend,
            durability,
            dir,
            &format!("g1_{}", key.replace('/', "_")),
        )?;
        let case = measure(
            key,
            &setup,
            &graph,
            demo::feature_input,
            (n, WARMUP),
            check_g1,
        )
        .await?;
        crate::progress(&format!(
            "G1 {:<22} n={:<5} median {:8.3} ms  p90 {:8.3} ms  cpu/run {:8.3} ms  commits/fsyncs per run {}",
            case.key,
            case.stats.n,
            case.stats.median_ms,
            case.stats.p90_ms,
            case.stats.cpu_mean_ms.unwrap_or(f64::NAN),
            crate::results::Commits::show(case.commits_per_run, 2),
        ));
        area.cases.push(case);
    }
    area.load_end = sys::loadavg()[0];
    Ok(area)
}
