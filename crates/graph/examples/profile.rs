//! Runs a demo graph many times in memory, for profilers:
//! `cargo run --release -p trellis-graph --example profile -- chain '{"n":100}' 200`
//! (`valgrind --tool=callgrind target/release/examples/profile …` counts instructions).
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::sync::Arc;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use serde_json::{Value, json};
use trellis_graph::{Engine, MemoryJournal, demo};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map_or("chain", String::as_str);
    let params: Value = args
        .get(2)
        .map_or(json!({"n": 100}), |p| serde_json::from_str(p).unwrap());
    let reps: usize = args.get(3).map_or(200, |r| r.parse().unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let graph = Arc::new(demo::build(name, &params).unwrap());
    let input = match name {
        "feature" => demo::feature_input(),
        "chain" => json!({"counter": 0}),
        _ => json!({}),
    };
    rt.block_on(async {
        let engine = Engine::new(Arc::new(MemoryJournal::new()));
        let t = std::time::Instant::now();
        for _ in 0..reps {
            let h = engine.start(graph.clone(), input.clone()).unwrap();
            h.wait().await.unwrap();
        }
        let el = t.elapsed();
        println!("{reps} runs in {el:?}: {:?}/run", el / reps as u32);
    });
}
