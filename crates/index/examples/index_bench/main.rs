//! Retrieval benchmark: cold index, no-op update, one-file change, BM25 and hybrid query
//! latency, and embedding throughput against sentence-transformers in the same run. See
//! docs/benchmarks.md ("Retrieval") for the corpus and the recorded results.
//!
//! ```sh
//! cargo run --release -p trellis-index --example index_bench -- CORPUS_DIR \
//!     [--cold-runs 3] [--queries 200] [--embed-sample 512] [--rounds 3] [--max-tokens 128] \
//!     [--batch 32] [--embed-all] [--min-vectors 100000] \
//!     [--python ~/.cache/trellis/bench-venv/bin/python] [--st-script scripts/bench-embeddings.py]
//! ```
//!
//! The cold index is timed next to universal-ctags (`ctags -R`, all languages and Trellis's
//! languages only), the parse-only floor and the extraction floor (read + parse + symbols and
//! chunks, no writes) in the same run: when it is searchable (the text pass) and when it is
//! complete, and the lower bound under any complete index (extraction floor + text pass).
//! `--single-pass` indexes without the text pass (symbols
//! directly, as small updates do); `--searchable-only` stops each cold run when it is
//! searchable; `--no-reference` skips the floors and ctags.
//! `--cold-only` stops after the cold index, `--no-embed` after BM25; `--embed-only` indexes
//! once (untimed) and runs only the embedding comparison. `--threads N` (default: all cores)
//! applies to both embedding sides. `--embed-all` embeds
//! every chunk of the corpus for real (slow: ~20 chunks/s on two cores) and measures hybrid
//! search over those vectors; without it the vector matrix is padded to `--min-vectors` rows
//! by repeating the sample's real embeddings (latency only).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

mod cold;
mod ctags;
mod floor;
mod st;

/// The allocator of the `trellis` binary, so that the numbers are the product's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use trellis_index::chunk::{Chunk, ChunkId};
use trellis_index::config::LocalEngine;
use trellis_index::embed::{self, Embedder};
use trellis_index::lang::Lang;
use trellis_index::scan::{Excludes, scan};
use trellis_index::vectors::VectorIndex;
use trellis_index::{
    Category, Index, IndexConfig, SearchMode, SearchRequest, UpdateOptions, UpdateStats,
};

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

pub fn pct(v: &[Duration], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1000.0
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn engine_label(engine: LocalEngine) -> String {
    match engine {
        LocalEngine::Native => "native encoder, f32".into(),
        LocalEngine::LlamaCpp => format!(
            "llama.cpp, {} weights",
            trellis_index::embed::local::DEFAULT_WEIGHTS.as_str()
        ),
    }
}

/// The embedding comparison: the configured engine (and with `--compare-engines` the other
/// one, in the same rounds) against sentence-transformers; returns the configured engine's
/// vectors.
fn compare(
    args: &[String],
    model: &dyn embed::Embedder,
    config: &IndexConfig,
    texts: &[String],
    rounds: usize,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let mut engines = vec![st::Engine {
        label: engine_label(config.embedding.engine),
        model,
    }];
    let mut other_cfg = config.embedding.clone();
    other_cfg.engine = match other_cfg.engine {
        LocalEngine::Native => LocalEngine::LlamaCpp,
        LocalEngine::LlamaCpp => LocalEngine::Native,
    };
    let other = if args.iter().any(|a| a == "--compare-engines") {
        embed::from_config(&other_cfg, false)?
    } else {
        None
    };
    if let Some(o) = other.as_deref() {
        engines.push(st::Engine {
            label: engine_label(other_cfg.engine),
            model: o,
        });
    }
    st::compare(args, &engines, config, texts, rounds)
}

fn row(what: &str, size: &str, value: &str, extra: &str) {
    println!("| {what} | {size} | {value} | {extra} | {} |", loadavg());
}

/// The command line: the corpus and what to measure (see the module documentation).
struct Options {
    /// Every argument, for the flags the embedding comparison reads itself.
    args: Vec<String>,
    /// The tree to index.
    corpus: PathBuf,
    /// `--cold-runs`.
    cold_runs: usize,
    /// `--queries`.
    queries: usize,
    /// `--embed-sample`.
    sample: usize,
    /// `--rounds`.
    rounds: usize,
    /// `--min-vectors`.
    min_vectors: usize,
    /// `--embed-all`.
    embed_all: bool,
    /// `--embed-only`.
    embed_only: bool,
    /// `--no-reference`: no floors, no ctags.
    no_reference: bool,
    /// `--searchable-only`.
    searchable_only: bool,
    /// `Some(false)` with `--single-pass` (no text pass).
    text_first: Option<bool>,
}

impl Options {
    /// Reads the command line; panics with the usage when the corpus is missing.
    fn parse(args: Vec<String>) -> Self {
        let corpus = PathBuf::from(
            args.get(1)
                .expect("usage: index_bench CORPUS_DIR [options]"),
        );
        let flag = |name: &str| args.iter().any(|a| a == name);
        Self {
            corpus,
            cold_runs: arg(&args, "--cold-runs", 3),
            queries: arg(&args, "--queries", 200),
            sample: arg(&args, "--embed-sample", 512),
            rounds: arg(&args, "--rounds", 3),
            min_vectors: arg(&args, "--min-vectors", 100_000),
            embed_all: flag("--embed-all"),
            embed_only: flag("--embed-only"),
            no_reference: flag("--no-reference"),
            searchable_only: flag("--searchable-only"),
            text_first: if flag("--single-pass") {
                Some(false)
            } else {
                None
            },
            args,
        }
    }

    /// Whether the flag `name` was given.
    fn flag(&self, name: &str) -> bool {
        self.args.iter().any(|a| a == name)
    }
}

/// The index configuration: defaults, with the embedding flags (`--batch`, `--max-tokens`,
/// `--engine`, `--threads`, all cores by default).
fn bench_config(args: &[String], cores: usize) -> IndexConfig {
    let mut config = IndexConfig::default();
    config.embedding.batch_size = arg(args, "--batch", 32);
    config.embedding.max_tokens = arg(args, "--max-tokens", 128);
    config.embedding.engine = match st::value(args, "--engine") {
        Some("llama_cpp") => LocalEngine::LlamaCpp,
        _ => LocalEngine::Native,
    };
    config.embedding.threads = Some(arg(args, "--threads", cores));
    config
}

/// The CPU's model name (Linux; empty elsewhere).
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default()
}

fn main() -> anyhow::Result<()> {
    let opts = Options::parse(std::env::args().collect());
    let cpu = cpu_model();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let config = bench_config(&opts.args, cores);
    println!(
        "machine: {cores} cores, {cpu}; corpus {}",
        opts.corpus.display()
    );
    corpus_stats(&opts.corpus, &config)?;
    println!();
    println!("| measurement | size | result | per unit / spread | load (1, 5, 15 min) |");
    println!("|---|---|---|---|---|");

    // The floor under any cold index: read every source file and parse it with tree-sitter,
    // nothing else (no symbol extraction, no chunks, no writes).
    let floor = if opts.no_reference {
        f64::NAN
    } else {
        floor::parse_floor(&opts.corpus, &config)?
    };
    if opts.flag("--parse-report") {
        return floor::parse_report(&opts.corpus, &config);
    }
    let reference = cold::Reference::measure(&opts, &config, floor)?;
    let Some(cold::ColdIndex {
        store: _store,
        mut index,
        stats: cold,
        secs,
    }) = cold::runs(&opts, &config, &reference)?
    else {
        return Ok(());
    };
    cold_median_row(secs, &cold);

    if opts.flag("--cold-only") {
        return Ok(());
    }
    if opts.embed_only {
        return embedding_comparison_only(&opts, &config, &index);
    }
    noop_update(&mut index)?;
    let victims = victims(&index, &opts.corpus, &config)?;
    for victim in &victims {
        one_file_change(&mut index, &opts.corpus, victim, false)?;
    }
    index.close_writer()?;
    bm25_latency(&index, opts.queries, cold.chunks)?;
    if opts.flag("--no-embed") {
        return Ok(());
    }
    embeddings(&opts, &config, &mut index, &victims)
}

/// The median cold index time over the complete runs, per 10k files.
fn cold_median_row(mut secs: Vec<f64>, cold: &UpdateStats) {
    secs.sort_by(f64::total_cmp);
    let med = secs[secs.len() / 2];
    row(
        &format!("cold index, median of {} runs", secs.len()),
        &format!("{} files", cold.files),
        &format!("{med:.2} s"),
        &format!(
            "**{:.2} s per 10k files** (min {:.2}, max {:.2} s)",
            med * 10_000.0 / cold.files as f64,
            secs[0],
            secs[secs.len() - 1]
        ),
    );
}

/// `--embed-only`: the embedding comparison on the sample, nothing else.
fn embedding_comparison_only(
    opts: &Options,
    config: &IndexConfig,
    index: &Index,
) -> anyhow::Result<()> {
    let Some(model) = embed::from_config(&config.embedding, true)? else {
        return Ok(());
    };
    let ids = index.sample_chunk_ids(opts.sample)?;
    let texts: Vec<String> = index
        .chunks(&ids)?
        .iter()
        .map(Chunk::embedding_text)
        .collect();
    compare(&opts.args, model.as_ref(), config, &texts, opts.rounds)?;
    Ok(())
}

/// A no-op update (walk + stat) and its row.
fn noop_update(index: &mut Index) -> anyhow::Result<()> {
    let t = Instant::now();
    let noop = index.update(&UpdateOptions::default())?;
    row(
        "no-op update (walk + stat)",
        &format!("{} files read", noop.files_read),
        &format!("{:.0} ms", t.elapsed().as_secs_f64() * 1000.0),
        "",
    );
    Ok(())
}

/// The files the one-file changes edit: the first Rust file with symbols, the Rust file of
/// median size and the largest one.
fn victims(index: &Index, corpus: &Path, config: &IndexConfig) -> anyhow::Result<[String; 3]> {
    let first = index
        .chunks_of_kind_sample()?
        .ok_or_else(|| anyhow::anyhow!("no Rust file in corpus"))?;
    let (median, largest) = rust_files_by_size(corpus, config)?;
    Ok([first, median, largest])
}

/// BM25 latency over all chunks, `queries` queries, and its row.
fn bm25_latency(index: &Index, queries: usize, chunks: u64) -> anyhow::Result<()> {
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
    row(
        &format!("BM25 query (top 10 of {chunks} chunks, chunks fetched)"),
        &format!("{queries} queries"),
        &format!("p50 {:.2} ms", pct(&bm, 0.5)),
        &format!("p90 {:.2} ms", pct(&bm, 0.9)),
    );
    Ok(())
}

/// The embedding measurements: the comparison on the sample, query embedding latency, then
/// hybrid search over real (`--embed-all`) or padded vectors.
fn embeddings(
    opts: &Options,
    config: &IndexConfig,
    index: &mut Index,
    victims: &[String; 3],
) -> anyhow::Result<()> {
    let Some(model) = embed::from_config(&config.embedding, true)? else {
        return Ok(());
    };
    let ids = index.sample_chunk_ids(opts.sample)?;
    let chunks: Vec<Chunk> = index.chunks(&ids)?;
    let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
    let vecs = compare(&opts.args, model.as_ref(), config, &texts, opts.rounds)?;
    query_embedding_latency(model.as_ref())?;

    let qvs: Vec<Vec<f32>> = model.embed(QUERIES)?;
    let vi = if opts.embed_all {
        embed_every_chunk(index, config, &opts.corpus, victims)?
    } else {
        std::sync::Arc::new(padded_vectors(index, &vecs, opts.min_vectors)?)
    };
    let real = if opts.embed_all {
        "real embeddings of every chunk"
    } else {
        "sample embeddings repeated (latency only)"
    };

    // At exactly `--min-vectors` rows (chunks spread over the corpus; BM25 still over every
    // chunk), then over every chunk's row.
    if vi.len() > opts.min_vectors {
        let sub = vector_subset(index, &vi, opts.min_vectors)?;
        hybrid(index, &sub, &qvs, model.as_ref(), opts.queries, real)?;
    }
    hybrid(index, &vi, &qvs, model.as_ref(), opts.queries, real)?;
    Ok(())
}

/// Latency of embedding one short query, over every query, and its row.
fn query_embedding_latency(model: &dyn Embedder) -> anyhow::Result<()> {
    let mut qe = Vec::new();
    for q in QUERIES {
        let t = Instant::now();
        model.embed(&[q])?;
        qe.push(t.elapsed());
    }
    row(
        "query embedding (one short query)",
        &format!("{} queries", QUERIES.len()),
        &format!("p50 {:.1} ms", pct(&qe, 0.5)),
        &format!("p90 {:.1} ms", pct(&qe, 0.9)),
    );
    Ok(())
}

/// `--embed-all`: embeds every chunk of the corpus for real (row: throughput), repeats the
/// one-file changes with embeddings, and returns the index's vectors.
fn embed_every_chunk(
    index: &mut Index,
    config: &IndexConfig,
    corpus: &Path,
    victims: &[String; 3],
) -> anyhow::Result<std::sync::Arc<VectorIndex>> {
    let for_index = embed::from_config(&config.embedding, false)?.expect("local model");
    index.set_embedder(for_index);
    let load = loadavg();
    let t = Instant::now();
    let s = index.update(&UpdateOptions {
        embed: true,
        ..UpdateOptions::default()
    })?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "| embed every chunk (distinct texts) | {} embedded, {} chunks with a vector | {secs:.0} s | {:.1} chunks/s | {load} |",
        s.embedded,
        s.chunks_embedded,
        s.embedded as f64 / secs
    );
    index.close_writer()?;
    for victim in victims {
        one_file_change(index, corpus, victim, true)?;
    }
    index.close_writer()?;
    index
        .vector_index()?
        .ok_or_else(|| anyhow::anyhow!("no vectors after embedding"))
}

/// The rows of `vi` for `n` chunks spread over the corpus.
fn vector_subset(index: &Index, vi: &VectorIndex, n: usize) -> anyhow::Result<VectorIndex> {
    let ids = index.sample_chunk_ids(n)?;
    let mut rows = Vec::with_capacity(ids.len() * vi.dim());
    let mut live = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        if let Some(v) = vi.get(*id) {
            rows.extend_from_slice(v);
            live.push((*id, i as u64, Category::Code));
        }
    }
    Ok(VectorIndex::build(vi.dim(), &rows, &live))
}

/// Vector scan, hybrid query with a precomputed query vector, and end to end.
fn hybrid(
    index: &Index,
    vi: &VectorIndex,
    qvs: &[Vec<f32>],
    model: &dyn Embedder,
    queries: usize,
    real: &str,
) -> anyhow::Result<()> {
    let mut hy = Vec::new();
    let mut vs = Vec::new();
    let mut e2e = Vec::new();
    for i in 0..queries {
        let q = QUERIES[i % QUERIES.len()];
        let qv = &qvs[i % qvs.len()];
        let req = SearchRequest {
            query: q.into(),
            categories: vec![],
            limit: 10,
            mode: SearchMode::Hybrid,
        };
        let t = Instant::now();
        vi.search(qv, &[], 100);
        vs.push(t.elapsed());
        let t = Instant::now();
        let hits = index.search_in(&req, Some(qv), Some(vi))?;
        hy.push(t.elapsed());
        assert!(!hits.is_empty());
        let t = Instant::now();
        let qv = model.embed(&[q])?;
        let hits = index.search_in(&req, qv.first().map(Vec::as_slice), Some(vi))?;
        e2e.push(t.elapsed());
        assert!(!hits.is_empty());
    }
    row(
        &format!(
            "vector scan, top 100 of {} × {} ({real})",
            vi.len(),
            vi.dim()
        ),
        &format!("{queries} queries"),
        &format!("p50 {:.2} ms", pct(&vs, 0.5)),
        &format!("p90 {:.2} ms", pct(&vs, 0.9)),
    );
    row(
        &format!(
            "hybrid query: BM25 top 100 of all chunks + vector top 100 of {} + RRF + fetch 10 (query vector precomputed)",
            vi.len()
        ),
        &format!("{queries} queries"),
        &format!("**p50 {:.2} ms**", pct(&hy, 0.5)),
        &format!("p90 {:.2} ms", pct(&hy, 0.9)),
    );
    row(
        "same, end to end (query embedding included)",
        &format!("{queries} queries"),
        &format!("p50 {:.2} ms", pct(&e2e, 0.5)),
        &format!("p90 {:.2} ms", pct(&e2e, 0.9)),
    );
    Ok(())
}

/// Counts the files the walk finds, by kind.
/// CPU time (user + system) of this process so far, in seconds (Linux; 0 elsewhere).
pub fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may contain spaces):
    // utime and stime are the 12th and 13th, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn corpus_stats(corpus: &Path, config: &IndexConfig) -> anyhow::Result<()> {
    let files = scan(corpus, &Excludes::new(config)?)?;
    let mut code = std::collections::BTreeMap::<&str, usize>::new();
    let (mut docs, mut other) = (0, 0);
    for f in &files {
        let lang = Lang::detect(&f.path);
        if lang.is_code() {
            *code.entry(lang.as_str()).or_default() += 1;
        } else if lang.is_document() {
            docs += 1;
        } else {
            other += 1;
        }
    }
    let ncode: usize = code.values().sum();
    let by_lang: Vec<String> = code.iter().map(|(l, n)| format!("{l} {n}")).collect();
    println!(
        "corpus: {} files indexed by the walk: {ncode} source files with a parser ({}), {docs} documents, {other} other (plain text, config, data, binaries)",
        files.len(),
        by_lang.join(", ")
    );
    Ok(())
}

/// The Rust files of median and of largest size (the walk's size limit applies).
fn rust_files_by_size(corpus: &Path, config: &IndexConfig) -> anyhow::Result<(String, String)> {
    let mut files: Vec<_> = scan(corpus, &Excludes::new(config)?)?
        .into_iter()
        .filter(|f| f.path.ends_with(".rs"))
        .collect();
    files.sort_by_key(|f| f.size);
    let median = files
        .get(files.len() / 2)
        .ok_or_else(|| anyhow::anyhow!("no Rust file"))?;
    let largest = files.last().unwrap_or(median);
    Ok((median.path.clone(), largest.path.clone()))
}

/// Appends a function to `victim` and re-indexes just that path, 20 times (5 with
/// embeddings); restores the file afterwards.
fn one_file_change(
    index: &mut Index,
    corpus: &Path,
    victim: &str,
    embed: bool,
) -> anyhow::Result<()> {
    let path = corpus.join(victim);
    let original = std::fs::read(&path)?;
    let reps = if embed { 5 } else { 20 };
    let mut times = Vec::new();
    let mut chunks = 0;
    let mut embedded = 0;
    let mut parts = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..reps {
        let mut changed = original.clone();
        changed.extend_from_slice(
            format!("\npub fn trellis_bench_added_{i}_{embed}() {{}}\n").as_bytes(),
        );
        std::fs::write(&path, &changed)?;
        let t = Instant::now();
        let s = index.update_paths(&[victim], embed)?;
        times.push(t.elapsed());
        assert_eq!(s.files_indexed, 1);
        chunks = s.chunks_written;
        embedded = s.embedded;
        parts.0.push(Duration::from_millis(s.parse_ms));
        parts.1.push(Duration::from_millis(s.fulltext_ms));
        parts.2.push(Duration::from_millis(s.meta_ms));
    }
    std::fs::write(&path, &original)?;
    index.update_paths(&[victim], embed)?;
    let what = if embed {
        format!("one-file change + re-embed changed chunks ({embedded} embedded)")
    } else {
        "one-file change, `update_paths` (read + parse + BM25 commit + metadata)".to_string()
    };
    row(
        &what,
        &format!(
            "{victim} ({} KB, {chunks} chunks), {reps} edits",
            original.len() / 1024
        ),
        &format!("**p50 {:.1} ms**", pct(&times, 0.5)),
        &format!(
            "max {:.1} ms; p50 of parts: read + parse {:.0}, full-text commit {:.0}, metadata {:.0} ms",
            pct(&times, 1.0),
            pct(&parts.0, 0.5),
            pct(&parts.1, 0.5),
            pct(&parts.2, 0.5)
        ),
    );
    Ok(())
}

/// A matrix of at least `min` rows: the sample's real embeddings repeated cyclically over the
/// corpus's chunk ids (the scan cost does not depend on the values; the ranking does, so it
/// measures latency only, not quality).
fn padded_vectors(index: &Index, vecs: &[Vec<f32>], min: usize) -> anyhow::Result<VectorIndex> {
    let all_ids = index.sample_chunk_ids(usize::MAX)?;
    let n = all_ids.len().max(min);
    let dim = vecs[0].len();
    let mut rows = Vec::with_capacity(n * dim);
    let mut live: Vec<(ChunkId, u64, Category)> = Vec::with_capacity(n);
    for i in 0..n {
        rows.extend_from_slice(&vecs[i % vecs.len()]);
        live.push((all_ids[i % all_ids.len()], i as u64, Category::Code));
    }
    Ok(VectorIndex::build(dim, &rows, &live))
}
