//! Bytes on disk per run (benchmarked against LangGraph's ~50 KB for the same run).

use trellis_graph::Journal;
use trellis_protocol::RunId;
use trellis_store::Backend;
use trellis_store::{SqliteStore, StoreOptions};

use super::fixtures::{block_on, realistic_run};

#[test]
fn a_realistic_nine_step_run_fits_in_five_kilobytes() {
    const RUNS: u64 = 200;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    store.vacuum().unwrap();
    let empty = store.size_on_disk().unwrap();

    let mut events = 0;
    let mut json_bytes = 0;
    for _ in 0..RUNS {
        let run = RunId::new();
        let mut commits = Vec::new();
        for b in realistic_run(&run) {
            events += b.events.len() as u64;
            json_bytes += b
                .events
                .iter()
                .map(|e| serde_json::to_vec(e).unwrap().len() + 1)
                .sum::<usize>();
            commits.push(store.append(b));
        }
        for c in commits {
            block_on(c).unwrap();
        }
    }
    store.vacuum().unwrap();
    let full = store.size_on_disk().unwrap();
    let per_run = (full - empty) / RUNS;
    let stats = store.stats();
    eprintln!(
        "{RUNS} runs, {} events/run: {per_run} bytes/run on disk after VACUUM \
         ({} bytes/run of event blobs, {} bytes/run as JSON lines; empty db {empty} bytes); {stats:?}",
        events / RUNS,
        stats.bytes_written / RUNS,
        json_bytes as u64 / RUNS,
    );
    assert!((45..=50).contains(&(events / RUNS)));
    assert!(per_run <= 5_000, "{per_run} bytes per run");
}
