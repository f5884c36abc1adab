//! Localisation evaluation of retrieval on queries mined from public repositories' history
//! (`scripts/retrieval_mine.py`; docs/retrieval.md, "Learned ranking"), and the feature dump
//! the learned ranker is trained on (`scripts/retrieval_train.py`).
//!
//! ```sh
//! python3 scripts/retrieval_mine.py --split dev --out /tmp/rank/data/dev.jsonl
//! cargo run --release -p trellis-index --example retrieval_eval -- /tmp/rank/data/dev.jsonl \
//!     [--mirrors /work/.mirror] [--work /tmp/rank/work] [--modes bm25,hybrid,hybrid+learned] \
//!     [--subject-only] [--repo NAME] [--max-per-repo N] [--report out.json] \
//!     [--dump-features train.jsonl] [--no-analysis] [--text-only]
//! ```
//!
//! For each query the parent commit is written out (`git archive`) into one directory per
//! repository and the repository's index there is updated in place (an updated index ranks
//! exactly like a fresh one: `tests/suite/incremental.rs`), with embeddings. Each mode then
//! runs `Index::retrieve` with the code strategy, as `trellis search` does, with test files
//! excluded (`index.search.tests = "exclude"`) and an unlimited budget. Acc@k counts a query
//! when any gold file (function) is among the first k distinct files (functions: function and
//! method chunks, by path and qualified name) of the packed items. Gold functions are the
//! parent's function and method chunks whose lines the commit changed; queries without any
//! are left out of the function numbers (their count is printed).
//!
//! Modes: `bm25` (no embedder, hand-weighted rerank: the BM25 order), `bm25+learned`,
//! `hybrid` (BM25 + embeddings, the hand-weighted blend `index.search.rerank = "blend"`) and
//! `hybrid+learned` (the default). `--dump-features` writes every candidate's ranker
//! features and label (2: a gold function, 1: in a gold file, 0: other), hybrid and BM25-only.
//! `--no-analysis` searches every query as written (`index.search.query.analyze = false`).
//! `--text-only` keeps each index as the text pass leaves it (every file as text windows, no
//! symbols: what searches see before the symbol pass of a large update has run); use a
//! `--work` of its own and file-level numbers only (there are no function chunks).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

mod snapshot;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Deserialize;
use trellis_index::rank::{self, RankInput, Ranker};
use trellis_index::search::SearchHit;
use trellis_index::vectors::dot;
use trellis_index::{
    Category, ChunkKind, Index, IndexConfig, Progress, Rerank, RetrievalRequest,
    RetrievalStrategyConfig, SearchFilter, SearchMode, SearchRequest, TestFiles, UpdateOptions,
    embed,
};

#[derive(Deserialize)]
struct Gold {
    path: String,
    lines: Vec<[u32; 2]>,
}

#[derive(Deserialize)]
struct Query {
    id: String,
    repo: String,
    parent: String,
    query: String,
    lang: String,
    gold: Vec<Gold>,
}

const KS: [usize; 3] = [1, 5, 10];

#[derive(Default, Clone)]
struct Tally {
    files: [usize; 3],
    file_queries: usize,
    functions: [usize; 3],
    function_queries: usize,
    time: Duration,
}

impl Tally {
    fn add(&mut self, file_rank: Option<usize>, fn_rank: Option<Option<usize>>, t: Duration) {
        self.file_queries += 1;
        self.time += t;
        for (i, k) in KS.iter().enumerate() {
            if file_rank.is_some_and(|r| r < *k) {
                self.files[i] += 1;
            }
        }
        if let Some(r) = fn_rank {
            self.function_queries += 1;
            for (i, k) in KS.iter().enumerate() {
                if r.is_some_and(|r| r < *k) {
                    self.functions[i] += 1;
                }
            }
        }
    }

    fn pct(n: usize, of: usize) -> f64 {
        100.0 * n as f64 / of.max(1) as f64
    }

    fn row(&self) -> String {
        let f = |a: &[usize; 3], n| {
            a.iter()
                .map(|x| format!("{:5.1}", Self::pct(*x, n)))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        format!(
            "{} | {} | {:.0} ms",
            f(&self.files, self.file_queries),
            f(&self.functions, self.function_queries),
            self.time.as_secs_f64() * 1000.0 / self.file_queries.max(1) as f64
        )
    }
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The 0-based rank of the first relevant key in `ranked` (distinct keys in order).
fn first_hit<T: PartialEq>(ranked: &[T], gold: &[T]) -> Option<usize> {
    ranked.iter().position(|x| gold.contains(x))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let set = args
        .first()
        .context("usage: retrieval_eval QUERIES.jsonl [options]")?;
    let mirrors = PathBuf::from(arg(&args, "--mirrors").unwrap_or("/work/.mirror".into()));
    let work = PathBuf::from(arg(&args, "--work").unwrap_or("/tmp/rank/work".into()));
    let modes: Vec<String> = arg(&args, "--modes")
        .unwrap_or("bm25,hybrid,hybrid+learned".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let subject_only = args.iter().any(|a| a == "--subject-only");
    let text_only = args.iter().any(|a| a == "--text-only");
    let only_repo = arg(&args, "--repo");
    let max_per_repo: usize =
        arg(&args, "--max-per-repo").map_or(usize::MAX, |v| v.parse().unwrap());
    let mut dump = arg(&args, "--dump-features")
        .map(|p| std::fs::File::create(p).map(std::io::BufWriter::new))
        .transpose()?;

    let mut queries: Vec<Query> = Vec::new();
    for line in std::fs::read_to_string(set)?.lines() {
        let q: Query = serde_json::from_str(line)?;
        if only_repo.as_deref().is_none_or(|r| q.repo.contains(r)) {
            queries.push(q);
        }
    }
    let mut by_repo: BTreeMap<String, Vec<Query>> = BTreeMap::new();
    for q in queries {
        let v = by_repo.entry(q.repo.clone()).or_default();
        if v.len() < max_per_repo {
            v.push(q);
        }
    }

    let mut config = IndexConfig::default();
    config.search.tests = TestFiles::Exclude;
    // Off only to reproduce feature dumps made without the long-query analysis (the first,
    // 140-query model's); the shipped model's were dumped with it on, as retrieval runs.
    config.search.query.analyze = !args.iter().any(|a| a == "--no-analysis");
    let strategy = RetrievalStrategyConfig::code();
    let ranker = Ranker::shipped()?;
    eprintln!(
        "shipped ranker: {} trees ({})",
        ranker.trees(),
        ranker.trained_on
    );
    let mut totals: BTreeMap<String, Tally> = BTreeMap::new();
    let mut per_lang: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let mut rerank_times: Vec<Duration> = Vec::new();
    let mut candidates_seen = 0usize;
    let mut report: Vec<serde_json::Value> = Vec::new();
    let started = Instant::now();

    for (repo, qs) in &by_repo {
        let mirror = mirrors.join(repo.replace('/', "+")).join("repo");
        let dir = work.join(repo.replace('/', "+"));
        let tree = dir.join("tree");
        let mut index: Option<Index> = None;
        let mut embedder = embed::from_config(&config.embedding, false)?;
        for q in qs {
            let t0 = Instant::now();
            snapshot::write_tree(&mirror, &q.parent, &tree)?;
            if index.is_none() {
                index = Some(Index::open_at(&tree, &dir.join("index"), config.clone())?);
            }
            let idx = index.as_mut().unwrap();
            if let Some(e) = embedder.take() {
                idx.set_embedder(e);
            }
            if text_only {
                // The text pass, then a cancel as soon as every file is searchable.
                let stop = AtomicBool::new(false);
                let on_progress = |p: Progress| {
                    if matches!(p, Progress::Searchable { .. }) {
                        stop.store(true, Ordering::Relaxed);
                    }
                };
                match idx.update(&UpdateOptions {
                    text_first: Some(true),
                    progress: Some(&on_progress),
                    cancel: Some(&stop),
                    ..UpdateOptions::default()
                }) {
                    Ok(_) | Err(trellis_index::Error::Cancelled) => {}
                    Err(e) => return Err(e.into()),
                }
            } else {
                idx.update(&UpdateOptions {
                    embed: true,
                    ..UpdateOptions::default()
                })?;
            }
            let prepared = t0.elapsed();
            let text = if subject_only {
                q.query.lines().next().unwrap_or("").to_string()
            } else {
                q.query.clone()
            };
            // Gold: the files, and the function/method chunks overlapping the changed lines.
            let gold_files: Vec<String> = q.gold.iter().map(|g| g.path.clone()).collect();
            let mut gold_fns: Vec<(String, String)> = Vec::new();
            for g in &q.gold {
                for c in idx.chunks_of(&g.path)? {
                    let overlaps = g
                        .lines
                        .iter()
                        .any(|[s, e]| c.start_line <= *e && *s <= c.end_line);
                    let key = (c.path.clone(), c.qualified_name.clone());
                    if overlaps
                        && matches!(c.kind, ChunkKind::Function | ChunkKind::Method)
                        && !gold_fns.contains(&key)
                    {
                        gold_fns.push(key);
                    }
                }
            }
            let plan = idx.plan(&text)?;
            let timing = modes.iter().any(|m| m.ends_with("+learned"));
            if dump.is_some() || timing {
                for hybrid in [true, false] {
                    let (hits, cosines) = candidates(idx, &text, hybrid)?;
                    let inputs: Vec<RankInput<'_>> = hits
                        .iter()
                        .zip(&cosines)
                        .map(|(hit, cosine)| RankInput {
                            hit,
                            cosine: *cosine,
                        })
                        .collect();
                    let t = Instant::now();
                    let scores = ranker.rerank(&plan.text, &inputs);
                    rerank_times.push(t.elapsed());
                    candidates_seen += scores.len();
                    let Some(out) = dump.as_mut() else { continue };
                    let feats = rank::features::features(&plan.text, &inputs);
                    for (h, f) in hits.iter().zip(&feats) {
                        let key = (h.chunk.path.clone(), h.chunk.qualified_name.clone());
                        let label = if gold_fns.contains(&key) {
                            2
                        } else if gold_files.contains(&h.chunk.path) {
                            1
                        } else {
                            0
                        };
                        let row = serde_json::json!({
                            "qid": q.id, "repo": q.repo, "hybrid": hybrid, "label": label,
                            "path": h.chunk.path, "symbol": h.chunk.qualified_name,
                            "f": f.as_slice(),
                        });
                        writeln!(out, "{row}")?;
                    }
                }
            }
            let mut result = serde_json::json!({"id": q.id, "repo": q.repo, "lang": q.lang,
                "functions_gold": gold_fns.len(), "long": plan.is_long(),
                "frames": plan.analysis.frames.len(), "named_files": plan.analysis.files.len(),
                "named_gold": plan.analysis.files.iter().any(|f| gold_files.contains(f))});
            for mode in &modes {
                let (hybrid, rerank) = match mode.as_str() {
                    "bm25" => (false, Rerank::Blend),
                    "bm25+learned" => (false, Rerank::Learned),
                    "hybrid" => (true, Rerank::Blend),
                    "hybrid+learned" => (true, Rerank::Learned),
                    other => anyhow::bail!("unknown mode {other}"),
                };
                let detached = if hybrid { None } else { idx.take_embedder() };
                idx.set_rerank(rerank);
                let t = Instant::now();
                let pack = idx.retrieve(&RetrievalRequest {
                    query: text.clone(),
                    strategy: &strategy,
                    stage: None,
                    budget_tokens: Some(usize::MAX / 4),
                    candidates: None,
                })?;
                let took = t.elapsed();
                if let Some(e) = detached {
                    idx.set_embedder(e);
                }
                let mut files: Vec<String> = Vec::new();
                let mut fns: Vec<(String, String)> = Vec::new();
                for it in &pack.items {
                    if !files.contains(&it.attribution.path) {
                        files.push(it.attribution.path.clone());
                    }
                    if matches!(it.kind, ChunkKind::Function | ChunkKind::Method) {
                        let key = (
                            it.attribution.path.clone(),
                            it.attribution.symbol.clone().unwrap_or_default(),
                        );
                        if !fns.contains(&key) {
                            fns.push(key);
                        }
                    }
                }
                let file_rank = first_hit(&files, &gold_files);
                let fn_rank = (!gold_fns.is_empty()).then(|| first_hit(&fns, &gold_fns));
                totals
                    .entry(mode.clone())
                    .or_default()
                    .add(file_rank, fn_rank, took);
                per_lang
                    .entry((q.lang.clone(), mode.clone()))
                    .or_default()
                    .add(file_rank, fn_rank, took);
                result[mode] = serde_json::json!({"file_rank": file_rank, "function_rank": fn_rank,
                    "top_files": files.iter().take(5).collect::<Vec<_>>()});
            }
            eprintln!(
                "{} prepared in {:.1}s; {}",
                q.id,
                prepared.as_secs_f64(),
                modes
                    .iter()
                    .map(|m| format!("{m}: {}", result[m]["file_rank"]))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            report.push(result);
        }
    }
    if let Some(mut out) = dump {
        out.flush()?;
    }
    let n: usize = by_repo.values().map(Vec::len).sum();
    println!(
        "{n} queries, {} repositories, {} queries{} ({:.0} s)",
        by_repo.len(),
        if subject_only {
            "subject only"
        } else {
            "whole message"
        },
        if subject_only { "" } else { " as-is" },
        started.elapsed().as_secs_f64()
    );
    println!("\n| mode | file Acc@1 | @5 | @10 | function Acc@1 | @5 | @10 | retrieve per query |");
    println!("|---|---|---|---|---|---|---|---|");
    for m in &modes {
        if let Some(t) = totals.get(m) {
            println!("| {m} | {} |", t.row());
        }
    }
    if let Some(t) = totals.values().next() {
        println!(
            "\nfunction numbers over {} of {} queries (the others changed no function or method)",
            t.function_queries, t.file_queries
        );
    }
    println!("\n| language | mode | file Acc@1 | @5 | @10 | function Acc@1 | @5 | @10 | time |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for ((lang, m), t) in &per_lang {
        println!("| {lang} ({}) | {m} | {} |", t.file_queries, t.row());
    }
    if !rerank_times.is_empty() {
        rerank_times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mean = rerank_times.iter().map(|d| ms(*d)).sum::<f64>() / rerank_times.len() as f64;
        println!(
            "\nlearned rerank (features + trees) per candidate list: mean {mean:.2} ms, p95 {:.2} ms, \
             max {:.2} ms over {} lists ({:.0} candidates each on average)",
            ms(rerank_times[rerank_times.len() * 95 / 100]),
            ms(rerank_times[rerank_times.len() - 1]),
            rerank_times.len(),
            candidates_seen as f64 / rerank_times.len() as f64
        );
    }
    if let Some(p) = arg(&args, "--report") {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}

/// The candidates `Index::retrieve` reranks for the code strategy's source, with cosines.
fn candidates(
    idx: &Index,
    text: &str,
    hybrid: bool,
) -> anyhow::Result<(Vec<SearchHit>, Vec<Option<f32>>)> {
    let qv = if hybrid { idx.embed_query(text)? } else { None };
    let vi = if qv.is_some() {
        idx.vector_index()?
    } else {
        None
    };
    let filter = SearchFilter::new(&idx.config().search)?;
    let hits = idx.search_filtered(
        &SearchRequest {
            query: text.to_string(),
            categories: vec![Category::Code, Category::Other],
            limit: idx.config().search.limit,
            mode: SearchMode::Hybrid,
        },
        qv.as_deref(),
        vi.as_deref(),
        Some(&filter),
    )?;
    let cosines = hits
        .iter()
        .map(|h| match (&qv, &vi) {
            (Some(q), Some(v)) => v.get(h.chunk.id).map(|cv| dot(q, cv)),
            _ => None,
        })
        .collect();
    Ok((hits, cosines))
}
