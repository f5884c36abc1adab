//! G2 fan-out/fan-in: an orchestrator spawns N workers (every 7th fails) and a collector
//! aggregates them with a failure policy that cycles through any / all / majority, N = 10,
//! 100, 1000; no journal, in-memory journal, SQLite store (FULL, pipelined commits).
//! Mirrors the anchor's `bench_g2.py` (500 / 150 / 30 runs, 20 / 5 / 2 warm-up).

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use trellis_graph::{Durability, Graph};
use trellis_store::Synchronous;

use crate::harness::{Backend, Setup, check_g2, commits_per_run, graph};
use crate::results::{Area, Case};
use crate::stats::{reps, timed_loop};
use crate::sys;

/// The sizes measured.
pub const SIZES: [usize; 3] = [10, 100, 1000];
/// The backends measured at each size.
pub const BACKENDS: [Backend; 3] = [
    Backend::None,
    Backend::Memory,
    Backend::Durable(Synchronous::Full),
];

fn plan(n: usize, scale: f64) -> (usize, usize) {
    match n {
        10 => (reps(500, scale), 20),
        100 => (reps(150, scale), 5),
        _ => (reps(30, scale), 2),
    }
}

/// Runs every G2 case.
pub async fn run(scale: f64, dir: &Path) -> anyhow::Result<Area> {
    let mut area = Area {
        load_start: sys::loadavg()[0],
        ..Area::default()
    };
    for n in SIZES {
        // The anchor passes the policy in the input; here it is a graph parameter, so one
        // graph per policy, cycled the same way.
        let graphs: Vec<Arc<Graph>> = ["any_fails", "all_fail", "majority_fail"]
            .into_iter()
            .map(|p| graph("fanout", json!({ "n": n, "policy": p })))
            .collect::<anyhow::Result<_>>()?;
        for backend in BACKENDS {
            let key = format!("N={n}/{}", backend.key());
            let setup = Setup::new(
                backend,
                Durability::Async,
                dir,
                &format!("g2_{n}_{}", backend.key()),
            )?;
            let before = setup.store_stats();
            let i = Cell::new(0usize);
            let stats = timed_loop(
                plan(n, scale).0,
                plan(n, scale).1,
                || {
                    let g = graphs[i.get() % graphs.len()].clone();
                    i.set(i.get() + 1);
                    let engine = setup.engine.clone();
                    async move { Ok(engine.run(g, json!({})).await?) }
                },
                |out| check_g2(out, n),
            )
            .await
            .with_context(|| format!("case G2 {key}"))?;
            let commits = setup
                .store
                .as_ref()
                .map(|_| commits_per_run(before, setup.store_stats(), i.get()));
            crate::progress(&format!(
                "G2 {key:<22} n={:<5} median {:9.3} ms  p90 {:9.3} ms  cpu/run {:9.3} ms  per worker {:7.2} us  commits/fsyncs per run {}",
                stats.n,
                stats.median_ms,
                stats.p90_ms,
                stats.cpu_mean_ms.unwrap_or(f64::NAN),
                stats.median_ms / n as f64 * 1e3,
                crate::results::Commits::show(commits, 2),
            ));
            area.cases.push(Case {
                key,
                stats,
                commits_per_run: commits,
            });
        }
    }
    area.load_end = sys::loadavg()[0];
    Ok(area)
}
