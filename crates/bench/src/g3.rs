//! G3 linear chain of 1, 10 and 100 trivial nodes: per-node overhead as T(100)/100 and as the
//! slope (T(100) - T(1)) / 99, which removes the fixed per-run cost. No journal, in-memory
//! journal, SQLite store (FULL, pipelined commits). Mirrors the anchor's `bench_g3.py`
//! (2000 / 1000 / 200 runs in memory, 300 / 150 / 30 on SQLite, warm-up max(3, n/20)).

use std::path::Path;

use serde_json::json;
use trellis_graph::Durability;
use trellis_store::Synchronous;

use crate::harness::{Backend, Setup, check_g3, graph, measure};
use crate::results::Area;
use crate::stats::reps;
use crate::sys;

/// Chain lengths measured.
pub const LENGTHS: [usize; 3] = [1, 10, 100];
/// Backends measured.
pub const BACKENDS: [Backend; 3] = [
    Backend::None,
    Backend::Memory,
    Backend::Durable(Synchronous::Full),
];

fn runs(n: usize, backend: Backend, scale: f64) -> usize {
    let base = match (backend, n) {
        (Backend::Durable(_), 1) => 300,
        (Backend::Durable(_), 10) => 150,
        (Backend::Durable(_), _) => 30,
        (_, 1) => 2000,
        (_, 10) => 1000,
        _ => 200,
    };
    reps(base, scale)
}

/// Runs every G3 case.
pub async fn run(scale: f64, dir: &Path) -> anyhow::Result<Area> {
    let mut area = Area {
        load_start: sys::loadavg()[0],
        ..Area::default()
    };
    for backend in BACKENDS {
        for n in LENGTHS {
            let g = graph("chain", json!({ "n": n }))?;
            let key = format!("len={n}/{}", backend.key());
            let setup = Setup::new(
                backend,
                Durability::Async,
                dir,
                &format!("g3_{n}_{}", backend.key()),
            )?;
            let reps = runs(n, backend, scale);
            let case = measure(
                key,
                &setup,
                &g,
                || json!({ "counter": 0 }),
                (reps, (reps / 20).max(3)),
                |o| check_g3(o, n),
            )
            .await?;
            crate::progress(&format!(
                "G3 {:<22} n={:<5} median {:8.3} ms  p90 {:8.3} ms  cpu/run {:8.3} ms  per node {:7.2} us  commits/fsyncs per run {}",
                case.key,
                case.stats.n,
                case.stats.median_ms,
                case.stats.p90_ms,
                case.stats.cpu_mean_ms.unwrap_or(f64::NAN),
                case.stats.median_ms / n as f64 * 1e3,
                crate::results::Commits::show(case.commits_per_run, 2),
            ));
            area.cases.push(case);
        }
    }
    area.load_end = sys::loadavg()[0];
    Ok(area)
}

/// Per-node cost of `backend`: (T100/100, slope (T100 - T1)/99), in microseconds.
pub fn per_node_us(area: &Area, backend: &str) -> Option<(f64, f64)> {
    let t = |n: usize| {
        area.get(&format!("len={n}/{backend}"))
            .map(|c| c.stats.median_ms)
    };
    let (t1, t100) = (t(1)?, t(100)?);
    Some((t100 / 100.0 * 1e3, (t100 - t1) / 99.0 * 1e3))
}
