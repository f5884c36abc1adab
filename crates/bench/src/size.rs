//! Bytes per G1 run on disk: M runs (200 at scale 1) into a fresh store, then a WAL
//! checkpoint and `VACUUM` (`Store::vacuum`), then (database file + WAL) / M — the anchor's
//! `bench_resume.py` size measurement (`bytes_per_run_file`, VACUUMed file / M).

use std::path::Path;

use trellis_graph::{Durability, demo};
use trellis_store::Synchronous;

use crate::harness::{Backend, Setup, check_g1, durability_key, g1_graph};
use crate::results::Size;
use crate::stats::reps;

/// Measures the store with pipelined and with per-step commits (per-step commits write more,
/// smaller batches).
pub async fn run(scale: f64, dir: &Path) -> anyhow::Result<Vec<Size>> {
    let runs = reps(200, scale);
    let graph = g1_graph(0, None)?;
    let mut out = Vec::new();
    for durability in [Durability::Async, Durability::Sync] {
        let key = format!("durable_full/{}", durability_key(durability));
        let setup = Setup::new(
            Backend::Durable(Synchronous::Full),
            durability,
            dir,
            &format!("size_{}", durability_key(durability)),
        )?;
        let Some(store) = setup.store.clone() else {
            anyhow::bail!("durable backend without a store")
        };
        store.vacuum()?;
        let empty_bytes = store.size_on_disk()?;
        let before = store.stats();
        for _ in 0..runs {
            check_g1(
                &setup
                    .engine
                    .run(graph.clone(), demo::feature_input())
                    .await?,
            )?;
        }
        store.flush()?;
        let after = store.stats();
        store.vacuum()?;
        let file_bytes = store.size_on_disk()?;
        let per = |x: u64| x as f64 / runs as f64;
        let size = Size {
            key,
            runs,
            empty_bytes,
            file_bytes,
            bytes_per_run: per(file_bytes),
            bytes_per_run_net: per(file_bytes.saturating_sub(empty_bytes)),
            blob_bytes_per_run: per(after.bytes_written - before.bytes_written),
            events_per_run: per(after.events - before.events),
            commits_per_run: crate::harness::commits_per_run(before, after, runs),
        };
        crate::progress(&format!(
            "size {:<22} {} runs: {:.0} B/run on disk after VACUUM ({:.0} B/run net of the empty schema), blobs {:.0} B/run, {:.1} events/run",
            size.key,
            size.runs,
            size.bytes_per_run,
            size.bytes_per_run_net,
            size.blob_bytes_per_run,
            size.events_per_run
        ));
        out.push(size);
    }
    Ok(out)
}
