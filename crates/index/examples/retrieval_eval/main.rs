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
use trellis_index::search::{QueryPlan, SearchHit};
use trellis_index::vectors::dot;
use trellis_index::{
    Category, ChunkKind, ContextPack, Index, IndexConfig, Progress, Rerank, RetrievalRequest,
    RetrievalScope, SearchFilter, SearchMode, SearchRequest, TestFiles, UpdateOptions, embed,
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

/// The command line (see the module documentation).
struct Options {
    /// Every argument after the program name.
    args: Vec<String>,
    /// The queries (JSON lines).
    set: String,
    /// `--mirrors`: the bare clones, `<owner>+<name>/repo`.
    mirrors: PathBuf,
    /// `--work`: one directory per repository (its tree and its index).
    work: PathBuf,
    /// `--modes`.
    modes: Vec<String>,
    /// `--subject-only`: search the first line of each message.
    subject_only: bool,
    /// `--text-only`.
    text_only: bool,
    /// `--repo`.
    only_repo: Option<String>,
    /// `--max-per-repo`.
    max_per_repo: usize,
}

impl Options {
    /// Reads the command line; fails with the usage when the query file is missing.
    fn parse(args: Vec<String>) -> anyhow::Result<Self> {
        let set = args
            .first()
            .context("usage: retrieval_eval QUERIES.jsonl [options]")?
            .clone();
        Ok(Self {
            set,
            mirrors: PathBuf::from(arg(&args, "--mirrors").unwrap_or("/work/.mirror".into())),
            work: PathBuf::from(arg(&args, "--work").unwrap_or("/tmp/rank/work".into())),
            modes: arg(&args, "--modes")
                .unwrap_or("bm25,hybrid,hybrid+learned".into())
                .split(',')
                .map(str::to_string)
                .collect(),
            subject_only: args.iter().any(|a| a == "--subject-only"),
            text_only: args.iter().any(|a| a == "--text-only"),
            only_repo: arg(&args, "--repo"),
            max_per_repo: arg(&args, "--max-per-repo").map_or(usize::MAX, |v| v.parse().unwrap()),
            args,
        })
    }

    /// Whether the flag `name` was given.
    fn flag(&self, name: &str) -> bool {
        self.args.iter().any(|a| a == name)
    }
}

/// The queries of the set, by repository (`--repo` filters, `--max-per-repo` caps each).
fn load_queries(opts: &Options) -> anyhow::Result<BTreeMap<String, Vec<Query>>> {
    let mut queries: Vec<Query> = Vec::new();
    for line in std::fs::read_to_string(&opts.set)?.lines() {
        let q: Query = serde_json::from_str(line)?;
        if opts.only_repo.as_deref().is_none_or(|r| q.repo.contains(r)) {
            queries.push(q);
        }
    }
    let mut by_repo: BTreeMap<String, Vec<Query>> = BTreeMap::new();
    for q in queries {
        let v = by_repo.entry(q.repo.clone()).or_default();
        if v.len() < opts.max_per_repo {
            v.push(q);
        }
    }
    Ok(by_repo)
}

fn main() -> anyhow::Result<()> {
    let opts = Options::parse(std::env::args().skip(1).collect())?;
    let dump = arg(&opts.args, "--dump-features")
        .map(|p| std::fs::File::create(p).map(std::io::BufWriter::new))
        .transpose()?;
    let by_repo = load_queries(&opts)?;

    let mut config = IndexConfig::default();
    config.search.tests = TestFiles::Exclude;
    // Off only to reproduce feature dumps made without the long-query analysis (the first,
    // 140-query model's); the shipped model's were dumped with it on, as retrieval runs.
    config.search.query.analyze = !opts.flag("--no-analysis");
    let ranker = Ranker::shipped()?;
    eprintln!(
        "shipped ranker: {} trees ({})",
        ranker.trees(),
        ranker.trained_on
    );
    let mut eval = Eval {
        opts: &opts,
        config,
        scope: RetrievalScope::code(),
        ranker,
        dump,
        totals: BTreeMap::new(),
        per_lang: BTreeMap::new(),
        rerank_times: Vec::new(),
        candidates_seen: 0,
        report: Vec::new(),
    };
    let started = Instant::now();
    for (repo, qs) in &by_repo {
        eval.repo(repo, qs)?;
    }
    if let Some(mut out) = eval.dump.take() {
        out.flush()?;
    }
    eval.print_summary(&by_repo, started);
    if let Some(p) = arg(&opts.args, "--report") {
        std::fs::write(p, serde_json::to_string_pretty(&eval.report)?)?;
    }
    Ok(())
}

/// Brings a repository's index up to date with the tree written out: with `--text-only` the
/// text pass, cancelled as soon as every file is searchable; else a complete update with
/// embeddings.
fn update_index(idx: &mut Index, text_only: bool) -> anyhow::Result<()> {
    if text_only {
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
    Ok(())
}

/// What a query counts as found.
struct GoldKeys {
    /// The files the commit changed.
    files: Vec<String>,
    /// The function and method chunks (path, qualified name) overlapping the changed lines.
    functions: Vec<(String, String)>,
}

impl GoldKeys {
    /// The query's gold files and, from the index of the parent, its gold functions.
    fn of(idx: &Index, q: &Query) -> anyhow::Result<Self> {
        let files: Vec<String> = q.gold.iter().map(|g| g.path.clone()).collect();
        let mut functions: Vec<(String, String)> = Vec::new();
        for g in &q.gold {
            for c in idx.chunks_of(&g.path)? {
                let overlaps = g
                    .lines
                    .iter()
                    .any(|[s, e]| c.decl.start_line <= *e && *s <= c.decl.end_line);
                let key = (c.path.clone(), c.decl.qualified_name.clone());
                if overlaps
                    && matches!(c.decl.kind, ChunkKind::Function | ChunkKind::Method)
                    && !functions.contains(&key)
                {
                    functions.push(key);
                }
            }
        }
        Ok(Self { files, functions })
    }

    /// A candidate's training label: 2 a gold function, 1 in a gold file, 0 other.
    fn label(&self, hit: &SearchHit) -> u8 {
        let key = (
            hit.chunk.path.clone(),
            hit.chunk.decl.qualified_name.clone(),
        );
        if self.functions.contains(&key) {
            2
        } else if self.files.contains(&hit.chunk.path) {
            1
        } else {
            0
        }
    }
}

/// Whether a mode searches with embeddings, and its ranker.
fn mode_settings(mode: &str) -> anyhow::Result<(bool, Rerank)> {
    Ok(match mode {
        "bm25" => (false, Rerank::Blend),
        "bm25+learned" => (false, Rerank::Learned),
        "hybrid" => (true, Rerank::Blend),
        "hybrid+learned" => (true, Rerank::Learned),
        other => anyhow::bail!("unknown mode {other}"),
    })
}

/// The distinct files, and the distinct functions and methods (path, symbol), of the packed
/// items in order.
fn pack_keys(pack: &ContextPack) -> (Vec<String>, Vec<(String, String)>) {
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
    (files, fns)
}

/// The evaluation's settings and what it has measured so far.
struct Eval<'a> {
    opts: &'a Options,
    config: IndexConfig,
    scope: RetrievalScope,
    ranker: &'static Ranker,
    /// `--dump-features`.
    dump: Option<std::io::BufWriter<std::fs::File>>,
    /// Per mode.
    totals: BTreeMap<String, Tally>,
    /// Per language and mode.
    per_lang: BTreeMap<(String, String), Tally>,
    /// The learned ranker's time per candidate list.
    rerank_times: Vec<Duration>,
    /// Candidates in those lists.
    candidates_seen: usize,
    /// One entry per query (`--report`).
    report: Vec<serde_json::Value>,
}

impl Eval<'_> {
    /// Evaluates a repository's queries, each on its parent commit's tree, in one index.
    fn repo(&mut self, repo: &str, qs: &[Query]) -> anyhow::Result<()> {
        let mirror = self.opts.mirrors.join(repo.replace('/', "+")).join("repo");
        let dir = self.opts.work.join(repo.replace('/', "+"));
        let tree = dir.join("tree");
        let mut index: Option<Index> = None;
        let mut embedder = embed::from_config(&self.config.embedding, false)?;
        for q in qs {
            let t0 = Instant::now();
            snapshot::write_tree(&mirror, &q.parent, &tree)?;
            if index.is_none() {
                index = Some(Index::open_at(
                    &tree,
                    &dir.join("index"),
                    self.config.clone(),
                )?);
            }
            let idx = index.as_mut().unwrap();
            if let Some(e) = embedder.take() {
                idx.set_embedder(e);
            }
            update_index(idx, self.opts.text_only)?;
            self.query(idx, q, t0.elapsed())?;
        }
        Ok(())
    }

    /// Evaluates one query in every mode (after timing the learned ranker and dumping
    /// features, when asked) and adds its entry to the report.
    fn query(&mut self, idx: &mut Index, q: &Query, prepared: Duration) -> anyhow::Result<()> {
        let opts = self.opts;
        let text = if opts.subject_only {
            q.query.lines().next().unwrap_or("").to_string()
        } else {
            q.query.clone()
        };
        let gold = GoldKeys::of(idx, q)?;
        let plan = idx.plan(&text)?;
        let timing = opts.modes.iter().any(|m| m.ends_with("+learned"));
        if self.dump.is_some() || timing {
            for hybrid in [true, false] {
                self.rank_candidates(idx, q, &text, &plan, &gold, hybrid)?;
            }
        }
        let mut result = serde_json::json!({"id": q.id, "repo": q.repo, "lang": q.lang,
            "functions_gold": gold.functions.len(), "long": plan.is_long(),
            "frames": plan.analysis.frames.len(), "named_files": plan.analysis.files.len(),
            "named_gold": plan.analysis.files.iter().any(|f| gold.files.contains(f))});
        for mode in &opts.modes {
            result[mode] = self.mode(idx, q, mode, &text, &gold)?;
        }
        eprintln!(
            "{} prepared in {:.1}s; {}",
            q.id,
            prepared.as_secs_f64(),
            opts.modes
                .iter()
                .map(|m| format!("{m}: {}", result[m]["file_rank"]))
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.report.push(result);
        Ok(())
    }

    /// Times the learned ranker on the query's candidate list (hybrid or BM25-only) and,
    /// with `--dump-features`, writes each candidate's features and label.
    fn rank_candidates(
        &mut self,
        idx: &Index,
        q: &Query,
        text: &str,
        plan: &QueryPlan,
        gold: &GoldKeys,
        hybrid: bool,
    ) -> anyhow::Result<()> {
        let (hits, cosines) = candidates(idx, text, hybrid)?;
        let inputs: Vec<RankInput<'_>> = hits
            .iter()
            .zip(&cosines)
            .map(|(hit, cosine)| RankInput {
                hit,
                cosine: *cosine,
            })
            .collect();
        let t = Instant::now();
        let scores = self.ranker.rerank(&plan.text, &inputs);
        self.rerank_times.push(t.elapsed());
        self.candidates_seen += scores.len();
        let Some(out) = self.dump.as_mut() else {
            return Ok(());
        };
        let feats = rank::features::features(&plan.text, &inputs);
        for (h, f) in hits.iter().zip(&feats) {
            let row = serde_json::json!({
                "qid": q.id, "repo": q.repo, "hybrid": hybrid, "label": gold.label(h),
                "path": h.chunk.path, "symbol": h.chunk.decl.qualified_name,
                "f": f.as_slice(),
            });
            writeln!(out, "{row}")?;
        }
        Ok(())
    }

    /// Retrieves in one mode, tallies the ranks of the first gold file and function, and
    /// returns the query's entry for that mode.
    fn mode(
        &mut self,
        idx: &mut Index,
        q: &Query,
        mode: &str,
        text: &str,
        gold: &GoldKeys,
    ) -> anyhow::Result<serde_json::Value> {
        let (hybrid, rerank) = mode_settings(mode)?;
        let detached = if hybrid { None } else { idx.take_embedder() };
        idx.set_rerank(rerank);
        let t = Instant::now();
        let pack = idx.retrieve(&RetrievalRequest {
            query: text.to_string(),
            scope: &self.scope,
            stage: None,
            budget_tokens: Some(usize::MAX / 4),
            candidates: None,
        })?;
        let took = t.elapsed();
        if let Some(e) = detached {
            idx.set_embedder(e);
        }
        let (files, fns) = pack_keys(&pack);
        let file_rank = first_hit(&files, &gold.files);
        let fn_rank = (!gold.functions.is_empty()).then(|| first_hit(&fns, &gold.functions));
        self.totals
            .entry(mode.to_string())
            .or_default()
            .add(file_rank, fn_rank, took);
        self.per_lang
            .entry((q.lang.clone(), mode.to_string()))
            .or_default()
            .add(file_rank, fn_rank, took);
        Ok(
            serde_json::json!({"file_rank": file_rank, "function_rank": fn_rank,
            "top_files": files.iter().take(5).collect::<Vec<_>>()}),
        )
    }

    /// Prints the run's line, the table per mode, the table per language and mode, and the
    /// learned ranker's timing.
    fn print_summary(&mut self, by_repo: &BTreeMap<String, Vec<Query>>, started: Instant) {
        let subject_only = self.opts.subject_only;
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
        println!(
            "\n| mode | file Acc@1 | @5 | @10 | function Acc@1 | @5 | @10 | retrieve per query |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for m in &self.opts.modes {
            if let Some(t) = self.totals.get(m) {
                println!("| {m} | {} |", t.row());
            }
        }
        if let Some(t) = self.totals.values().next() {
            println!(
                "\nfunction numbers over {} of {} queries (the others changed no function or method)",
                t.function_queries, t.file_queries
            );
        }
        println!(
            "\n| language | mode | file Acc@1 | @5 | @10 | function Acc@1 | @5 | @10 | time |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for ((lang, m), t) in &self.per_lang {
            println!("| {lang} ({}) | {m} | {} |", t.file_queries, t.row());
        }
        self.print_rerank_times();
    }

    /// The learned ranker's time per candidate list (mean, p95, max), when it was timed.
    fn print_rerank_times(&mut self) {
        let rerank_times = &mut self.rerank_times;
        if rerank_times.is_empty() {
            return;
        }
        rerank_times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mean = rerank_times.iter().map(|d| ms(*d)).sum::<f64>() / rerank_times.len() as f64;
        println!(
            "\nlearned rerank (features + trees) per candidate list: mean {mean:.2} ms, p95 {:.2} ms, \
             max {:.2} ms over {} lists ({:.0} candidates each on average)",
            ms(rerank_times[rerank_times.len() * 95 / 100]),
            ms(rerank_times[rerank_times.len() - 1]),
            rerank_times.len(),
            self.candidates_seen as f64 / rerank_times.len() as f64
        );
    }
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
