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
    Category, Index, IndexConfig, Progress, SearchMode, SearchRequest, UpdateOptions,
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

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let corpus = PathBuf::from(
        args.get(1)
            .expect("usage: index_bench CORPUS_DIR [options]"),
    );
    let cold_runs: usize = arg(&args, "--cold-runs", 3);
    let queries: usize = arg(&args, "--queries", 200);
    let sample: usize = arg(&args, "--embed-sample", 512);
    let rounds: usize = arg(&args, "--rounds", 3);
    let min_vectors: usize = arg(&args, "--min-vectors", 100_000);
    let embed_all = args.iter().any(|a| a == "--embed-all");
    let mut config = IndexConfig::default();
    config.embedding.batch_size = arg(&args, "--batch", 32);
    config.embedding.max_tokens = arg(&args, "--max-tokens", 128);
    let embed_only = args.iter().any(|a| a == "--embed-only");
    config.embedding.engine = match st::value(&args, "--engine") {
        Some("llama_cpp") => LocalEngine::LlamaCpp,
        _ => LocalEngine::Native,
    };

    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    config.embedding.threads = Some(arg(&args, "--threads", cores));
    println!("machine: {cores} cores, {cpu}; corpus {}", corpus.display());
    corpus_stats(&corpus, &config)?;
    println!();
    println!("| measurement | size | result | per unit / spread | load (1, 5, 15 min) |");
    println!("|---|---|---|---|---|");

    // The floor under any cold index: read every source file and parse it with tree-sitter,
    // nothing else (no symbol extraction, no chunks, no writes).
    let no_reference = args.iter().any(|a| a == "--no-reference");
    let floor = if no_reference {
        f64::NAN
    } else {
        floor::parse_floor(&corpus, &config)?
    };
    if args.iter().any(|a| a == "--parse-report") {
        return floor::parse_report(&corpus, &config);
    }
    let extraction = if no_reference {
        None
    } else {
        Some(floor::extract_floor(&corpus, &config)?)
    };

    // universal-ctags on the same tree, then the cold index (symbols + sections + BM25, no
    // embeddings), each run into a fresh store: first searchable (text pass), then complete.
    let ctags = if no_reference {
        None
    } else {
        ctags::both(&corpus)?
    };
    let searchable_only = args.iter().any(|a| a == "--searchable-only");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let floor_secs = floor;
    let text_first = if args.iter().any(|a| a == "--single-pass") {
        Some(false)
    } else {
        None
    };
    let mut cold_times = Vec::new();
    let mut kept = None;
    let cold_runs = if embed_only { 1 } else { cold_runs.max(1) };
    for run in 0..cold_runs {
        let store = tempfile::tempdir()?;
        let mut index = Index::open_at(&corpus, store.path(), config.clone())?;
        let load = loadavg();
        let cpu0 = cpu_secs();
        let t = Instant::now();
        let at_searchable = std::sync::Mutex::new(None);
        let on_progress = |p: Progress| {
            if let Progress::Searchable { .. } = p {
                *at_searchable.lock().unwrap() =
                    Some((t.elapsed().as_secs_f64(), cpu_secs() - cpu0));
                stop.store(searchable_only, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let cold = index.update(&UpdateOptions {
            progress: Some(&on_progress),
            cancel: Some(&stop),
            text_first,
            ..UpdateOptions::default()
        });
        if searchable_only && let Some((s_secs, s_cpu)) = at_searchable.lock().unwrap().take() {
            println!(
                "| cold index run {}: **searchable** (then stopped) | {} files | **{s_secs:.2} s** | CPU {s_cpu:.1} s | {load} |",
                run + 1,
                index.counts()?.files
            );
            continue;
        }
        let cold = cold?;
        index.close_writer()?;
        let secs = t.elapsed().as_secs_f64();
        let cpu = cpu_secs() - cpu0;
        let searchable = at_searchable.lock().unwrap().take();
        if let Some((s_secs, s_cpu)) = searchable {
            println!(
                "| cold index run {}: **searchable** (walk + read + hash + text windows of every file + BM25 commit; no tree-sitter) | {} files | **{s_secs:.2} s** | CPU {s_cpu:.1} s; text pass {:.2} s{} | {load} |",
                run + 1,
                cold.files,
                cold.text_pass_ms as f64 / 1000.0,
                ctags
                    .as_ref()
                    .map(|c| format!("; **{:.2}× ctags -R**", s_secs / c.secs))
                    .unwrap_or_default(),
            );
        }
        println!(
            "| cold index run {}: **complete** (walk + read + hash + parse + symbols + sections + BM25 + metadata) | {} files, {} symbols, {} sections, {} chunks | **{secs:.2} s** | CPU {cpu:.1} s (user + system); **{:.2}× the parse floor, {}**; phases: text pass {:.2} s, symbol pass {:.2} s (of which, overlapping, read + parse + extract {:.2}, full-text {:.2}, metadata {:.2} s, summed over both passes); {:.2} s per 10k files | {load} |",
            run + 1,
            cold.files,
            cold.symbols,
            cold.sections,
            cold.chunks,
            secs / floor_secs,
            ctags
                .as_ref()
                .map(|c| format!("{:.2}× ctags -R", secs / c.secs))
                .unwrap_or_else(|| "ctags not run".into()),
            cold.text_pass_ms as f64 / 1000.0,
            (cold.index_ms - cold.text_pass_ms) as f64 / 1000.0,
            cold.parse_ms as f64 / 1000.0,
            cold.fulltext_ms as f64 / 1000.0,
            cold.meta_ms as f64 / 1000.0,
            secs * 10_000.0 / cold.files as f64
        );
        if let (Some((x_secs, x_cpu)), Some((s_secs, s_cpu))) = (extraction, searchable) {
            // The work no design can skip if it parses every file and gives BM25 every file's
            // text once: the extraction above plus this run's text pass, at best overlapped on
            // every core.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            let sum = x_secs + s_secs;
            let overlapped = (x_cpu + s_cpu) / cores;
            println!(
                "| lower bound: floor + extraction, then the text pass (BM25 of every file's text once, no symbol documents, no symbol rows) | {} files | {sum:.2} s in sequence; {overlapped:.2} s if both kept all {cores} cores busy | CPU {:.1} s; **{:.2}× the parse floor** ({:.2}× overlapped){} | {load} |",
                cold.files,
                x_cpu + s_cpu,
                sum / floor_secs,
                overlapped / floor_secs,
                ctags
                    .as_ref()
                    .map(|c| format!(
                        "; {:.2}× ctags -R ({:.2}× overlapped)",
                        sum / c.secs,
                        overlapped / c.secs
                    ))
                    .unwrap_or_default(),
            );
        }
        cold_times.push((secs, cold.files));
        kept = Some((store, index, cold));
    }
    let Some((_store, mut index, cold)) = kept else {
        return Ok(());
    };
    let mut secs: Vec<f64> = cold_times.iter().map(|c| c.0).collect();
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

    if args.iter().any(|a| a == "--cold-only") {
        return Ok(());
    }
    if embed_only {
        let Some(model) = embed::from_config(&config.embedding, true)? else {
            return Ok(());
        };
        let ids = index.sample_chunk_ids(sample)?;
        let texts: Vec<String> = index
            .chunks(&ids)?
            .iter()
            .map(Chunk::embedding_text)
            .collect();
        compare(&args, model.as_ref(), &config, &texts, rounds)?;
        return Ok(());
    }

    // No-op update.
    let t = Instant::now();
    let noop = index.update(&UpdateOptions::default())?;
    row(
        "no-op update (walk + stat)",
        &format!("{} files read", noop.files_read),
        &format!("{:.0} ms", t.elapsed().as_secs_f64() * 1000.0),
        "",
    );

    // One-file change: the first Rust file with symbols, and the largest Rust file.
    let first = index
        .chunks_of_kind_sample()?
        .ok_or_else(|| anyhow::anyhow!("no Rust file in corpus"))?;
    let (median, largest) = rust_files_by_size(&corpus, &config)?;
    for victim in [first.as_str(), median.as_str(), largest.as_str()] {
        one_file_change(&mut index, &corpus, victim, false)?;
    }
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
    row(
        &format!(
            "BM25 query (top 10 of {} chunks, chunks fetched)",
            cold.chunks
        ),
        &format!("{queries} queries"),
        &format!("p50 {:.2} ms", pct(&bm, 0.5)),
        &format!("p90 {:.2} ms", pct(&bm, 0.9)),
    );

    if args.iter().any(|a| a == "--no-embed") {
        return Ok(());
    }

    // Embeddings.
    let Some(model) = embed::from_config(&config.embedding, true)? else {
        return Ok(());
    };
    let ids = index.sample_chunk_ids(sample)?;
    let chunks: Vec<Chunk> = index.chunks(&ids)?;
    let texts: Vec<String> = chunks.iter().map(Chunk::embedding_text).collect();
    let vecs = compare(&args, model.as_ref(), &config, &texts, rounds)?;

    // Query embedding latency.
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

    let qvs: Vec<Vec<f32>> = model.embed(QUERIES)?;
    let vi = if embed_all {
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
        for victim in [first.as_str(), median.as_str(), largest.as_str()] {
            one_file_change(&mut index, &corpus, victim, true)?;
        }
        index.close_writer()?;
        index
            .vector_index()?
            .ok_or_else(|| anyhow::anyhow!("no vectors after embedding"))?
    } else {
        std::sync::Arc::new(padded_vectors(&index, &vecs, min_vectors)?)
    };
    let real = if embed_all {
        "real embeddings of every chunk"
    } else {
        "sample embeddings repeated (latency only)"
    };

    // At exactly `--min-vectors` rows (chunks spread over the corpus; BM25 still over every
    // chunk), then over every chunk's row.
    if vi.len() > min_vectors {
        let ids = index.sample_chunk_ids(min_vectors)?;
        let mut rows = Vec::with_capacity(ids.len() * vi.dim());
        let mut live = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            if let Some(v) = vi.get(*id) {
                rows.extend_from_slice(v);
                live.push((*id, i as u64, Category::Code));
            }
        }
        let sub = VectorIndex::build(vi.dim(), &rows, &live);
        hybrid(&index, &sub, &qvs, model.as_ref(), queries, real)?;
    }
    hybrid(&index, &vi, &qvs, model.as_ref(), queries, real)?;
    Ok(())
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
