//! Retrieval benchmark: cold index, no-op update, one-file change, BM25 and hybrid query
//! latency, embedding throughput. See docs/benchmarks.md ("Retrieval") for the corpus.
//!
//! ```sh
//! cargo run --release -p trellis-index --example index_bench -- CORPUS_DIR \
//!     [--embed-sample 512] [--queries 200] [--min-vectors 100000]
//! ```
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::time::{Duration, Instant};

use trellis_index::chunk::{Chunk, ChunkId};
use trellis_index::embed;
use trellis_index::vectors::VectorIndex;
use trellis_index::{Category, Index, IndexConfig, SearchMode, SearchRequest, UpdateOptions};

const QUERIES: &[&str] = &[
    "parse configuration file",
    "hash map insert entry",
    "split string on whitespace",
    "read file to string",
    "tokenizer normalizer lowercase",
    "matrix multiplication kernel",
    "tls certificate verification",
    "http request header parsing",
    "serialize struct to json",
    "thread pool spawn task",
    "utf8 decode error",
    "sqlite transaction commit",
    "compress deflate stream",
    "tree sitter parse node",
    "regex match captures",
    "async channel receiver",
    "error display formatting",
    "path canonicalize symlink",
    "sha256 digest update",
    "memory map file",
];

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1000.0
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let corpus = std::path::PathBuf::from(args.get(1).expect("usage: index_bench CORPUS_DIR"));
    let sample = arg(&args, "--embed-sample", 512);
    let queries = arg(&args, "--queries", 200);
    let min_vectors = arg(&args, "--min-vectors", 100_000);
    let store = tempfile::tempdir()?;
    let mut config = IndexConfig::default();
    config.embedding.batch_size = 32;

    // Cold index: symbols + sections + BM25.
    let mut index = Index::open_at(&corpus, store.path(), config.clone())?;
    let t = Instant::now();
    let cold = index.update(&UpdateOptions::default())?;
    let cold_s = t.elapsed().as_secs_f64();
    index.close_writer()?;
    println!(
        "| cold index (walk + read + hash + parse + BM25 + commit) | {} files, {} symbols, {} sections, {} chunks | {:.2} s | {:.2} s per 10k files |",
        cold.files,
        cold.symbols,
        cold.sections,
        cold.chunks,
        cold_s,
        cold_s * 10_000.0 / cold.files as f64
    );
    println!(
        "|   of which walk | | {:.2} s | |",
        cold.scan_ms as f64 / 1000.0
    );

    // No-op update.
    let t = Instant::now();
    let noop = index.update(&UpdateOptions::default())?;
    println!(
        "| no-op update (walk + stat) | {} files read | {:.0} ms | |",
        noop.files_read,
        t.elapsed().as_secs_f64() * 1000.0
    );

    // One-file change: the fast path and a full walk.
    let victim = index
        .chunks_of_kind_sample()?
        .ok_or_else(|| anyhow::anyhow!("no Rust file in corpus"))?;
    let path = corpus.join(&victim);
    let original = std::fs::read(&path)?;
    let mut times = Vec::new();
    for i in 0..5 {
        let mut changed = original.clone();
        changed.extend_from_slice(format!("\npub fn trellis_bench_added_{i}() {{}}\n").as_bytes());
        std::fs::write(&path, &changed)?;
        let t = Instant::now();
        let s = index.update_paths(&[victim.as_str()], false)?;
        times.push(t.elapsed());
        assert_eq!(s.files_indexed, 1);
    }
    println!(
        "| one-file change, `update_paths` (parse + BM25 commit + metadata) | {victim} | p50 {:.1} ms | max {:.1} ms |",
        pct(&mut times.clone(), 0.5),
        pct(&mut times, 1.0)
    );
    std::fs::write(&path, b"pub fn trellis_bench_walk() {}\n")?;
    let t = Instant::now();
    let s = index.update(&UpdateOptions::default())?;
    println!(
        "| one-file change, full `update` (walk + stat all + re-index 1) | {} re-indexed | {:.0} ms | |",
        s.files_indexed,
        t.elapsed().as_secs_f64() * 1000.0
    );
    std::fs::write(&path, &original)?;
    index.update_paths(&[victim.as_str()], false)?;
    index.close_writer()?;

    // BM25 latency over all chunks.
    let mut bm = Vec::new();
    for i in 0..queries {
        let q = QUERIES[i % QUERIES.len()];
        let t = Instant::now();
        let hits = index.search(&SearchRequest {
            query: q.into(),
            categories: vec![Category::Code],
            limit: 10,
            mode: SearchMode::Bm25,
        })?;
        bm.push(t.elapsed());
        assert!(!hits.is_empty());
    }
    println!(
        "| BM25 query (top 10 of {} chunks, chunks fetched) | {queries} queries | p50 {:.2} ms | p90 {:.2} ms |",
        cold.chunks,
        pct(&mut bm.clone(), 0.5),
        pct(&mut bm, 0.9)
    );

    // Embedding throughput on a sample of real chunks.
    let Some(model) = embed::from_config(&config.embedding, true)? else {
        return Ok(());
    };
    let ids = index.sample_chunk_ids(sample)?;
    let chunks: Vec<Chunk> = index.chunks(&ids)?;
    let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = Instant::now();
    let vecs = model.embed(&refs)?;
    let secs = t.elapsed().as_secs_f64();
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "| embedding throughput, all-MiniLM-L6-v2 (candle, CPU, batch 32, ≤256 tokens) | {} chunks, {} KB of text | {:.1} s | {:.1} chunks/s |",
        refs.len(),
        bytes / 1024,
        secs,
        refs.len() as f64 / secs
    );

    // Query embedding latency.
    let mut qe = Vec::new();
    for q in QUERIES {
        let t = Instant::now();
        model.embed(&[q])?;
        qe.push(t.elapsed());
    }
    println!(
        "| query embedding (one short query) | {} queries | p50 {:.1} ms | p90 {:.1} ms |",
        QUERIES.len(),
        pct(&mut qe.clone(), 0.5),
        pct(&mut qe, 0.9)
    );

    // Hybrid latency at ≥ min_vectors: the matrix holds the real sample embeddings,
    // repeated cyclically over every chunk id so that its size is that of a fully embedded
    // index (the scan cost does not depend on the values; the vector ranking does, so this
    // measures latency only, not quality).
    let all_ids = index.sample_chunk_ids(usize::MAX)?;
    let n = all_ids.len().max(min_vectors);
    let dim = model.dim();
    let mut rows = Vec::with_capacity(n * dim);
    let mut live: Vec<(ChunkId, u64, Category)> = Vec::with_capacity(n);
    for i in 0..n {
        rows.extend_from_slice(&vecs[i % vecs.len()]);
        live.push((all_ids[i % all_ids.len()], i as u64, Category::Code));
    }
    let vi = VectorIndex::build(dim, &rows, &live);
    drop(rows);
    let qvs: Vec<Vec<f32>> = model.embed(QUERIES)?;
    let mut hy = Vec::new();
    let mut vs = Vec::new();
    for i in 0..queries {
        let q = QUERIES[i % QUERIES.len()];
        let qv = &qvs[i % qvs.len()];
        let t = Instant::now();
        vi.search(qv, &[], 100);
        vs.push(t.elapsed());
        let t = Instant::now();
        let hits = index.search_in(
            &SearchRequest {
                query: q.into(),
                categories: vec![],
                limit: 10,
                mode: SearchMode::Hybrid,
            },
            Some(qv),
            Some(&vi),
        )?;
        hy.push(t.elapsed());
        assert!(!hits.is_empty());
    }
    println!(
        "| vector scan, top 100 of {} × {dim} | {queries} queries | p50 {:.2} ms | p90 {:.2} ms |",
        vi.len(),
        pct(&mut vs.clone(), 0.5),
        pct(&mut vs, 0.9)
    );
    println!(
        "| hybrid query: BM25 top 100 + vector top 100 over {} + RRF + fetch 10 (query embedding excluded) | {queries} queries | p50 {:.2} ms | p90 {:.2} ms |",
        vi.len(),
        pct(&mut hy.clone(), 0.5),
        pct(&mut hy, 0.9)
    );
    Ok(())
}
